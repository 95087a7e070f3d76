"""Decoding cost per generated token after 1k, 10k and 100k tokens of context: TraceRelay's
bounded state against a standard transformer's growing key-value cache.

TraceRelay (paper geometry, d_c = 64) is prefilled in parallel on the real context and then
stepped; its state holds, per layer, the last W normalized inputs, the W lineage phases and
the last L Left keys/values, whatever the context. The baseline is the foundation Transformer
at the same width (H = 64, 3 layers, 4 heads, FFN 256, pre-LN, no positions) decoding with a
preallocated KV cache; its cache is filled with random keys/values of the context's size
(decode time and memory depend on the cache's size, not its content), which spares the
quadratic prefill of 100k tokens.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/tracerelay/decode.py [--lengths 1000 10000 100000]
"""
from __future__ import annotations

import argparse
import math
import time

import torch

from tinyscope.models.transformer import Transformer, TransformerConfig
from tinyscope.studies.tracerelay.model import TraceRelay, TraceRelayConfig


class KVCacheDecoder:
    """Step-by-step decoding of a foundation Transformer with a preallocated KV cache."""

    def __init__(self, model: Transformer, context: int, capacity: int):
        self.model, self.n = model, context
        cfg = model.cfg
        H = cfg.n_heads[0]
        g = torch.Generator().manual_seed(0)
        self.k = [torch.randn(1, H, capacity, cfg.d_head, generator=g) for _ in model.blocks]
        self.v = [torch.randn(1, H, capacity, cfg.d_head, generator=g) for _ in model.blocks]

    def nbytes(self) -> int:
        return sum(t[:, :, :self.n].numel() * t.element_size() for t in self.k + self.v)

    @torch.no_grad()
    def step(self, token: torch.Tensor) -> torch.Tensor:
        x = self.model.W_E(token)[:, None]  # (1, 1, D)
        for i, block in enumerate(self.model.blocks):
            attn = block.attn
            y = block.ln1(x)
            q = attn.W_Q(y).view(1, 1, attn.n_heads, attn.d_head).transpose(1, 2)  # (1, H, 1, dh)
            self.k[i][:, :, self.n] = attn.W_K(y).view(1, attn.n_heads, attn.d_head)
            self.v[i][:, :, self.n] = attn.W_V(y).view(1, attn.n_heads, attn.d_head)
            k, v = self.k[i][:, :, :self.n + 1], self.v[i][:, :, :self.n + 1]  # (1, H, n+1, dh)
            z = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(attn.d_head), -1) @ v  # (1, H, 1, dh)
            x = x + attn.W_O(z.transpose(1, 2).reshape(1, 1, -1))
            x = x + block.mlp(block.ln2(x))
        self.n += 1
        return self.model.W_U(self.model.ln_final(x))[:, 0]  # (1, V)


def per_token(step, steps: int) -> float:
    step()  # warm-up
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - t0) / steps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[1000, 10000, 100000])
    p.add_argument("--steps", type=int, default=32)
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    relay = TraceRelay(TraceRelayConfig(vocab_size=8, n_out=6)).eval()
    tf = Transformer(TransformerConfig(vocab_size=8, n_ctx=8, d_model=64, d_head=16, n_heads=[4, 4, 4],
                                       d_mlp=[256] * 3, act="gelu", norm="pre", final_norm=True, attn_out_proj=True,
                                       positions="none")).eval()
    rows = []
    for n in args.lengths:
        tokens = torch.randint(0, 8, (1, n))
        t0 = time.perf_counter()
        state = relay.prefill(tokens)
        prefill_s = time.perf_counter() - t0
        token = torch.tensor([3])
        box = {"s": state}

        def relay_step(token=token, box=box):
            _, box["s"] = relay.step(token, box["s"])

        t_relay = per_token(relay_step, args.steps)
        kv = KVCacheDecoder(tf, n, n + args.steps + 2)
        kv_bytes = kv.nbytes()
        t_tf = per_token(lambda kv=kv, token=token: kv.step(token), args.steps)
        rows.append((n, t_relay * 1e3, box["s"].nbytes() / 1024, t_tf * 1e3, kv_bytes / 1024, prefill_s))
        print(f"context {n:>7,}: TraceRelay {t_relay * 1e3:6.2f} ms/token, state {box['s'].nbytes() / 1024:8.1f} KiB "
              f"(prefill {prefill_s:.1f} s) | transformer {t_tf * 1e3:6.2f} ms/token, KV cache {kv_bytes / 1024:10.1f} KiB",
              flush=True)
    print("FIGURE tracerelay_decode (per generated token)")
    print(f"{'context':>9} | {'TraceRelay ms':>13} | {'state KiB':>9} | {'Transformer ms':>14} | {'KV cache KiB':>12}")
    for n, tr, sb, tt, kb, _ in rows:
        print(f"{n:>9,} | {tr:>13.2f} | {sb:>9.1f} | {tt:>14.2f} | {kb:>12.1f}")


if __name__ == "__main__":
    main()
