"""The geometry of a one-layer attention model over every (token, position) pair.

Mahajne & Moldwin (Sec. 2.2, 3.2-3.5) read the model through the V x T combined embeddings
``e = x_tok + p_pos`` and their images under the query, key and value maps, and through the
output network ``z -> softmax(W_lm (z + FFN(z)) + b)`` drawn over the plane. Everything here is
measured through hook names only (``hook_embed``, ``hook_pos_embed``, ``blocks.0.attn.hook_q|k|v``,
``blocks.{L-1}.hook_resid_mid``), so any model with those hooks can be drawn:

* :func:`all_points` runs a (V, T) batch whose row v is token v at every position; at layer 0
  each position's embedding, query, key and value depend on that position alone, so the batch
  yields all V x T points at once.
* :func:`output_probs` evaluates the output network at arbitrary residual points by replacing
  ``hook_resid_mid`` of the last layer with them.
* :func:`landscape` is that evaluation on a grid of the plane (Fig. 9-10): probabilities,
  entropy (nats) and the argmax token.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from tinyscope.errors import TinyscopeError
from tinyscope.interp.projection import Plane, fit_plane
from tinyscope.models.utils import device_of

EMBED, POS_EMBED = "hook_embed", "hook_pos_embed"


_SUBSCRIPTS = str.maketrans("0123456789", "\u2080\u2081\u2082\u2083\u2084\u2085\u2086\u2087\u2088\u2089")


def subscript(n: int) -> str:
    """``n`` in subscript digits, for point labels like ``+\u2085`` (token +, position 5)."""
    return str(n).translate(_SUBSCRIPTS)


def token_labels(task, vocab_size: int) -> list[str]:
    """Printable token names: the task's ``vocab`` when it has one, else the ids."""
    vocab = getattr(task, "vocab", None)
    if vocab is not None and len(vocab) >= vocab_size:
        return [str(t) for t in vocab[:vocab_size]]
    return [str(i) for i in range(vocab_size)]


def model_dims(model) -> tuple[int, int]:
    """(vocab_size, n_ctx) of a model with a TransformerConfig-like ``cfg``."""
    cfg = getattr(model, "cfg", None)
    if cfg is None or not hasattr(cfg, "vocab_size") or not hasattr(cfg, "n_ctx"):
        raise TinyscopeError(f"{type(model).__name__} has no cfg.vocab_size / cfg.n_ctx; geometry views need them")
    return int(cfg.vocab_size), int(cfg.n_ctx)


def has_geometry(model) -> bool:
    """True when the model exposes the hooks the geometry views read."""
    names = set(getattr(model, "hook_dict", {}))
    needed = {EMBED, "blocks.0.attn.hook_q", "blocks.0.attn.hook_k", "blocks.0.attn.hook_v"}
    return needed <= names and getattr(model, "cfg", None) is not None


def n_layers(model) -> int:
    names = getattr(model, "hook_dict", {})
    return 1 + max((int(n.split(".")[1]) for n in names if n.startswith("blocks.")), default=-1)


def resid_mid_name(model) -> str:
    return f"blocks.{n_layers(model) - 1}.hook_resid_mid"


def owned(t: torch.Tensor) -> np.ndarray:
    """A float32 numpy copy of ``t`` that owns its memory.

    ``Tensor.numpy()`` shares memory with the tensor, and hooks such as ``hook_pos_embed`` (a
    slice of ``W_pos``) or a Linear's ``weight`` are the parameters themselves: loading the next
    checkpoint into the same model would rewrite every array taken from them.
    """
    return t.detach().to("cpu", torch.float32, copy=True).numpy()


def _weight(model, layer: int, name: str, head: int) -> np.ndarray | None:
    """Rows of W_Q / W_K / W_V for one head, (d_head, D), when the model stores them as Linear."""
    try:
        attn = model.blocks[layer].attn
        W = owned(getattr(attn, name).weight)  # (H*Dh, D)
        dh = attn.d_head
    except (AttributeError, IndexError, TypeError):
        return None
    return W[head * dh:(head + 1) * dh]


@dataclass
class Geometry:
    """Every (token, position) pair at layer ``layer``, head ``head``.

    tok (V, D): token embeddings x; pos (T, D): position embeddings p; emb (V, T, D): e = x + p;
    q, k, v (V, T, Dh): the head's query, key and value of each e; W_Q, W_K, W_V (Dh, D) or None.
    """

    labels: list[str]
    tok: np.ndarray
    pos: np.ndarray
    emb: np.ndarray
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    W_Q: np.ndarray | None
    W_K: np.ndarray | None
    W_V: np.ndarray | None
    head: int = 0

    @property
    def V(self) -> int:
        return self.emb.shape[0]

    @property
    def T(self) -> int:
        return self.emb.shape[1]

    @property
    def d_head(self) -> int:
        return self.q.shape[-1]

    def point_labels(self) -> list[str]:
        """Labels of the V*T points in (token, position) order: ``+5`` is ``+`` at position 5."""
        return [f"{lab}{subscript(t)}" for lab in self.labels for t in range(self.T)]

    def scores(self) -> np.ndarray:
        """Raw dot products q . k of every query point with every key point, (V, T, V, T) (Sec. 3.4, Fig. 8)."""
        return np.einsum("atd,bsd->atbs", self.q, self.k)

    def causal_mask(self) -> np.ndarray:
        """(V, T, V, T) bool: True where the key (b, s) can be attended by the query (a, t), s <= t (Sec. 2.2)."""
        t = np.arange(self.T)
        allowed = t[None, :] <= t[:, None]  # (T_query, T_key)
        return np.broadcast_to(allowed[None, :, None, :], (self.V, self.T, self.V, self.T))

    def masked_scaled_scores(self) -> np.ndarray:
        """The pre-softmax score q_(a,t) . k_(b,s) / sqrt(d_k) of every query point with every key
        point, (V*T, V*T) in (token, position) order, NaN where s > t (Movie 5)."""
        n = self.V * self.T
        s = self.scores() / math.sqrt(self.d_head)  # (V, T, V, T)
        return np.where(self.causal_mask(), s, np.nan).reshape(n, n)

    def pooled_attention(self) -> np.ndarray:
        """Attention output of each query point (a, t) when every key point (b, s) with s <= t is in
        its context: sum over those keys of softmax(q . k / sqrt(d_k)) v_(b,s), (V, T, Dh) (Movie 3,
        the authors' "attention output, causal mask")."""
        n = self.V * self.T
        s = self.masked_scaled_scores()  # (n, n), NaN = masked
        s = np.where(np.isnan(s), -np.inf, s)
        w = np.exp(s - s.max(-1, keepdims=True))  # (n, n)
        w /= w.sum(-1, keepdims=True)
        return (w @ self.v.reshape(n, -1)).reshape(self.V, self.T, -1)  # (V, T, Dh)


@torch.no_grad()
def all_points(model, labels: list[str] | None = None, head: int = 0) -> Geometry:
    """Embeddings, queries, keys and values of all V x T (token, position) pairs at layer 0.

    Every array is a copy: the Geometry of one checkpoint stays as it was when the next one is
    loaded into the same model."""
    V, T = model_dims(model)
    layer = 0
    names = [EMBED, POS_EMBED] + [f"blocks.{layer}.attn.hook_{n}" for n in "qkv"]
    names = [n for n in names if n in model.hook_dict]
    tokens = torch.arange(V, device=device_of(model))[:, None].expand(V, T).contiguous()  # (V, T)
    _, cache = model.run_with_cache(tokens, names_filter=names)
    tok = owned(cache[EMBED][:, 0])  # (V, D)
    if POS_EMBED in cache:
        pos = owned(cache[POS_EMBED][0])  # (T, D)
    else:
        pos = np.zeros((T, tok.shape[1]), dtype=tok.dtype)
    emb = tok[:, None, :] + pos[None, :, :]  # (V, T, D)

    def head_of(name: str) -> np.ndarray:
        x = owned(cache[f"blocks.{layer}.attn.hook_{name}"])  # (V, T, H, Dh)
        if head >= x.shape[2]:
            raise TinyscopeError(f"head {head} does not exist; layer {layer} has {x.shape[2]} heads")
        return x[:, :, head, :]  # (V, T, Dh)

    return Geometry(labels=labels or [str(i) for i in range(V)], tok=tok, pos=pos, emb=emb,
                    q=head_of("q"), k=head_of("k"), v=head_of("v"),
                    W_Q=_weight(model, layer, "W_Q", head), W_K=_weight(model, layer, "W_K", head),
                    W_V=_weight(model, layer, "W_V", head), head=head)


@torch.no_grad()
def output_probs(model, z: np.ndarray, chunk: int = 65536) -> np.ndarray:
    """Next-token probabilities (N, n_out) of the output network at residual points z (N, D).

    The output network is everything after the last layer's attention: FFN with its residual,
    final norm and LM head (Sec. 3.5). It is evaluated by running dummy tokens and replacing
    ``blocks.{L-1}.hook_resid_mid`` with the points.
    """
    _, T = model_dims(model)
    name = resid_mid_name(model)
    z = np.asarray(z, dtype=np.float32)
    N, D = z.shape
    device = device_of(model)
    out = []
    for start in range(0, N, chunk):
        part = torch.from_numpy(z[start:start + chunk]).to(device)  # (n, D)
        n = part.shape[0]
        rows = math.ceil(n / T)
        padded = torch.zeros(rows * T, D, device=device)  # (rows*T, D)
        padded[:n] = part
        padded = padded.view(rows, T, D)  # (rows, T, D)
        tokens = torch.zeros(rows, T, dtype=torch.long, device=device)  # (rows, T)
        logits = model.run_with_hooks(tokens, fwd_hooks=[(name, lambda x, hook, padded=padded: padded.to(x.dtype))])  # (rows, T, V)
        out.append(torch.softmax(logits.float(), -1).reshape(rows * T, -1)[:n].cpu().numpy())
    return np.concatenate(out, 0)


@dataclass
class Landscape:
    """The output network over a grid of the plane (Fig. 9-10).

    xs (n,), ys (n,): grid coordinates; probs (n, n, V) indexed [y, x, token]; entropy (n, n)
    in nats; argmax (n, n) token ids.
    """

    xs: np.ndarray
    ys: np.ndarray
    probs: np.ndarray
    plane: Plane

    @property
    def entropy(self) -> np.ndarray:
        p = np.clip(self.probs, 1e-12, 1.0)
        return -(p * np.log(p)).sum(-1)

    @property
    def argmax(self) -> np.ndarray:
        return self.probs.argmax(-1)

    @property
    def extent(self) -> tuple[float, float, float, float]:
        return (float(self.xs[0]), float(self.xs[-1]), float(self.ys[0]), float(self.ys[-1]))


def landscape(model, xlim: tuple[float, float], ylim: tuple[float, float], n: int = 160,
              plane: Plane | None = None) -> Landscape:
    """Evaluate the output network on an n x n grid; points are lifted through ``plane`` when the
    residual is wider than 2 (then the landscape is a 2-D slice through the PCA plane)."""
    xs = np.linspace(xlim[0], xlim[1], n)
    ys = np.linspace(ylim[0], ylim[1], n)
    gx, gy = np.meshgrid(xs, ys)  # (n, n) each, [y, x]
    grid = np.stack([gx.ravel(), gy.ravel()], -1)  # (n*n, 2)
    plane = plane or Plane(np.zeros(2), np.eye(2))
    probs = output_probs(model, plane.lift(grid))  # (n*n, V)
    return Landscape(xs, ys, probs.reshape(n, n, -1), plane)


def bounds(*point_sets: np.ndarray, pad: float = 0.08) -> tuple[tuple[float, float], tuple[float, float]]:
    """Axis limits (xlim, ylim) that hold every 2-D point of the sets with a relative margin."""
    pts = np.concatenate([np.asarray(p, dtype=np.float64).reshape(-1, 2) for p in point_sets], 0)
    lo, hi = pts.min(0), pts.max(0)
    span = np.maximum(hi - lo, 1e-6)
    lo, hi = lo - pad * span, hi + pad * span
    return (float(lo[0]), float(hi[0])), (float(lo[1]), float(hi[1]))


def residual_plane(geom: Geometry) -> Plane:
    """The plane of the residual stream: exact for D == 2, else PCA of embeddings and values."""
    D = geom.emb.shape[-1]
    pts = geom.emb.reshape(-1, D)
    if geom.v.shape[-1] == D:
        pts = np.concatenate([pts, geom.v.reshape(-1, D)], 0)
    return fit_plane(pts)


def head_plane(geom: Geometry) -> Plane:
    """The plane of the head's Q/K space: exact for d_head == 2, else PCA of queries and keys."""
    Dh = geom.d_head
    return fit_plane(np.concatenate([geom.q.reshape(-1, Dh), geom.k.reshape(-1, Dh)], 0))
