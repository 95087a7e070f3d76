"""Bad inputs at the models' public entry points, as a careless or hostile caller gives them.

Every model (the core Transformer and its KV-cached decoder, TraceRelay, the circuit
transformer) and every entry point (``forward``, ``run_with_cache``, ``run_with_hooks``,
``prefill``, ``step``) must answer each bad input kind with one :class:`InputError`: one line
naming the argument, the bad value and what is allowed, raised before any layer runs (no hook
fires) and after one check per call. Good inputs give exactly what the unchecked computation
gives, bit for bit.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from tinyscope.errors import InputError, TinyscopeError
from tinyscope.models import inputs as inputs_module
from tinyscope.models.hooks import HookNameError
from tinyscope.models.kv_cache import KVCacheDecoder
from tinyscope.models.transformer import Transformer, TransformerConfig
from tinyscope.studies.circuits.enumeration import pad_batch, sample_expression
from tinyscope.studies.circuits.grammar import BOOLEAN, encode
from tinyscope.studies.circuits.model import CircuitConfig, CircuitTransformer
from tinyscope.studies.tracerelay.model import TraceRelay, TraceRelayConfig

V, CTX = 12, 8          # the Transformer's vocabulary and context
RV = 6                  # TraceRelay's vocabulary
CD = BOOLEAN.D          # the circuit model's width; id CD is BLANK, so ids run 0..CD


def transformer() -> Transformer:
    torch.manual_seed(0)
    return Transformer(TransformerConfig(vocab_size=V, n_ctx=CTX, d_model=8, n_heads=[2, 2], d_mlp=[16, 16],
                                         norm="pre", attn_out_proj=True)).eval()


def relay() -> TraceRelay:
    torch.manual_seed(0)
    return TraceRelay(TraceRelayConfig(vocab_size=RV, n_out=5, d_model=16, d_trace=[8, 4], n_heads=2, d_ffn=24,
                                       left_window=5, right_window=2, stride=3)).eval()


def circuit() -> CircuitTransformer:
    torch.manual_seed(0)
    return CircuitTransformer(CircuitConfig(grammar="boolean", init_std=1.0))


def circuit_tokens() -> torch.Tensor:
    rng = np.random.default_rng(0)
    seqs = [encode(BOOLEAN, sample_expression(BOOLEAN, rng, d, 0.5)) for d in (1, 2, 3)]
    return torch.from_numpy(pad_batch(BOOLEAN, seqs)[0])


def good(kind: str) -> torch.Tensor:
    gen = torch.Generator().manual_seed(1)
    return {"tf": torch.randint(0, V, (3, CTX), generator=gen), "relay": torch.randint(0, RV, (3, 11), generator=gen),
            "circuit": circuit_tokens()}[kind]


def one_line(err: pytest.ExceptionInfo, *needles: str) -> str:
    """The message of a raised InputError: one line, containing every needle."""
    assert isinstance(err.value, InputError) and isinstance(err.value, TinyscopeError)
    msg = str(err.value)
    assert "\n" not in msg and msg.strip() == msg and len(msg) < 300, msg
    for needle in needles:
        assert needle in msg, (needle, msg)
    return msg


# ---------------------------------------------------------------- the bad inputs, by kind
# (kind, builder from a good (B, T) tensor, words the message must hold). "{hi}" is the model's
# largest id, "{ctx}" its context (None: no context limit, so "too long" does not apply).
BAD = {
    "id too large": (lambda t, hi, ctx: t.clone().index_put_((torch.tensor([1]), torch.tensor([2])), torch.tensor(hi + 1)),
                     ["tokens", "{over}", "[0, {hi}]", "[1, 2]"]),
    "negative id": (lambda t, hi, ctx: t.clone().index_put_((torch.tensor([0]), torch.tensor([1])), torch.tensor(-3)),
                    ["tokens", "-3", "[0, {hi}]", "[0, 1]"]),
    "huge id": (lambda t, hi, ctx: t.clone().fill_(2**40), ["tokens", str(2**40), "[0, {hi}]"]),
    "too long": (lambda t, hi, ctx: t.new_zeros(t.shape[0], ctx + 1), ["tokens", "{long}", "{ctx}"]),
    "empty sequence": (lambda t, hi, ctx: t[:, :0], ["tokens", "empty", "at least 1 position"]),
    "one-dimensional": (lambda t, hi, ctx: t[0], ["tokens", "(batch, positions)", "tokens[None]"]),
    "three-dimensional": (lambda t, hi, ctx: t[..., None], ["tokens", "(batch, positions)"]),
    "float ids": (lambda t, hi, ctx: t.float(), ["tokens", "float32", "long()"]),
    "bool ids": (lambda t, hi, ctx: t > 0, ["tokens", "torch.bool", "integers"]),
    "a list": (lambda t, hi, ctx: t.tolist(), ["tokens", "list", "torch.Tensor"]),
    "wrong device": (lambda t, hi, ctx: t.to("meta"), ["tokens", "meta", "cpu"]),
}
LIMITS = {"tf": (V - 1, CTX), "relay": (RV - 1, None), "circuit": (CD, None)}


def bad_case(kind: str, case: str):
    build, needles = BAD[case]
    hi, ctx = LIMITS[kind]
    t = build(good(kind), hi, ctx)
    fmt = dict(hi=hi, over=hi + 1, ctx=ctx, long=(ctx or 0) + 1)
    return t, [n.format(**fmt) for n in needles]


def calls(kind: str):
    """Each public entry point of model ``kind`` as ``f(model, tokens)``."""
    hook = {"tf": "blocks.0.hook_resid_pre", "relay": "blocks.0.hook_resid_pre", "circuit": "hook_depth"}[kind]
    return {
        "forward": lambda m, t: m(t),
        "run_with_cache": lambda m, t: m.run_with_cache(t),
        "run_with_hooks": lambda m, t: m.run_with_hooks(t, fwd_hooks=[(hook, lambda x, hook: None)]),
        **({"prefill": lambda m, t: KVCacheDecoder(m).prefill(t)} if kind == "tf" else {}),
        **({"prefill": lambda m, t: m.prefill(t)} if kind == "relay" else {}),
        **({"run": lambda m, t: m.run(t), "predict": lambda m, t: m.predict(t, 2),
            "embed": lambda m, t: m.embed(t)} if kind == "circuit" else {}),
    }


MODELS = {"tf": transformer, "relay": relay, "circuit": circuit}
ENTRY = [(k, e) for k in MODELS for e in calls(k)]


# The Transformer's forward takes one sequence (T,) as (1, T), as TransformerLens does
# (tests/core/models/test_tl_conveniences.py); its KV-cached prefill still wants (B, P).
ONE_SEQUENCE_OK = {("tf", "forward"), ("tf", "run_with_cache"), ("tf", "run_with_hooks")}
CASES = [(k, e, c) for k, e in ENTRY for c in BAD if not (c == "too long" and LIMITS[k][1] is None)
         and not (c == "one-dimensional" and (k, e) in ONE_SEQUENCE_OK)]


@pytest.mark.parametrize("kind, entry, case", CASES)
def test_each_bad_input_gives_one_clear_error_before_any_layer_runs(kind, entry, case):
    model = MODELS[kind]()
    tokens, needles = bad_case(kind, case)
    fired = []
    for hp in model.hook_dict.values():
        hp.add_hook(lambda x, hook: fired.append(hook.name))
    with pytest.raises(InputError) as err:
        calls(kind)[entry](model, tokens)
    one_line(err, *needles)
    assert not fired, f"layers ran before the check: {fired[:3]}"
    model.reset_hooks()
    assert not any(hp.has_hooks for hp in model.hook_dict.values())  # run_with_* removed theirs


@pytest.mark.parametrize("kind, entry", ENTRY)
def test_good_inputs_check_once_per_call_whatever_the_depth(kind, entry, monkeypatch):
    """One check per call: not per layer, per iteration of the circuit loop, or per hook."""
    model = MODELS[kind]()
    seen = []
    real = inputs_module.check_tokens

    def counting(*args, **kwargs):
        seen.append(1)
        return real(*args, **kwargs)

    for module in ("tinyscope.models.transformer", "tinyscope.studies.tracerelay.model",
                   "tinyscope.studies.circuits.model", "tinyscope.models.kv_cache"):
        monkeypatch.setattr(f"{module}.check_tokens", counting)
    for grad in (False, True):  # the circuit model loops densely with autograd, sparsely without
        seen.clear()
        with torch.set_grad_enabled(grad):
            calls(kind)[entry](model, good(kind))
        assert len(seen) == 1


# ---------------------------------------------------------------- masks (TraceRelay's valid)
@pytest.mark.parametrize("entry", ["forward", "prefill", "run_with_cache"])
@pytest.mark.parametrize("mask, needles", [
    (lambda t: torch.ones(t.shape[0], t.shape[1] + 1, dtype=torch.bool), ["valid", "(3, 12)", "(3, 11)"]),
    (lambda t: torch.ones(t.shape[1], dtype=torch.bool), ["valid", "(11,)", "(3, 11)"]),
    (lambda t: torch.ones(t.shape[1], t.shape[0], dtype=torch.bool), ["valid", "(11, 3)", "must match tokens"]),
    (lambda t: torch.full(t.shape, 2), ["valid", "2", "True/False"]),
    (lambda t: torch.full(t.shape, float("nan")), ["valid", "nan", "True/False"]),
    (lambda t: torch.full(t.shape, 0.5), ["valid", "0.5", "[0, 0]"]),
    (lambda t: [[True] * t.shape[1]] * t.shape[0], ["valid", "list", "torch.Tensor"]),
], ids=["longer", "1-d", "transposed", "value 2", "nan", "value 0.5", "list"])
def test_relay_rejects_wrongly_shaped_or_valued_masks(entry, mask, needles):
    model, tokens = relay(), good("relay")
    fn = {"forward": lambda v: model(tokens, v), "prefill": lambda v: model.prefill(tokens, v),
          "run_with_cache": lambda v: model.run_with_cache(tokens, v)}[entry]
    with pytest.raises(InputError) as err:
        fn(mask(tokens))
    one_line(err, *needles)


# ---------------------------------------------------------------- step: decoding one token
def test_kv_step_rejects_bad_tokens_batch_mismatch_and_decoding_past_the_context():
    model, tokens = transformer(), good("tf")
    dec = KVCacheDecoder(model)
    with pytest.raises(InputError) as err:
        dec.step(tokens[:, 0])
    one_line(err, "prefill")
    dec.prefill(tokens[:, :CTX - 1])
    for bad, needles in [(torch.tensor([0, V, 1]), ["tokens", str(V), f"[0, {V - 1}]"]),
                         (torch.tensor([0, -1, 1]), ["tokens", "-1", f"[0, {V - 1}]"]),
                         (torch.tensor([0, 1]), ["tokens", "2 rows", "3"]),
                         (tokens[:, :2], ["tokens", "(batch,)"]),
                         (tokens[:, 0].float(), ["tokens", "float32"]),
                         (tokens[:, 0].tolist(), ["tokens", "list"])]:
        with pytest.raises(InputError) as err:
            dec.step(bad)
        one_line(err, *needles)
    assert dec.length == CTX - 1  # the failed steps left the cache as it was
    dec.step(tokens[:, CTX - 1:CTX])  # (B, 1) is accepted like (B,)
    with pytest.raises(InputError) as err:
        dec.step(tokens[:, 0])
    one_line(err, "position 8", f"model.n_ctx={CTX}")
    with pytest.raises(InputError) as err:  # a bad prefill leaves the cache untouched
        dec.prefill(tokens.new_zeros(3, CTX + 1))
    assert dec.length == CTX


def test_relay_step_rejects_bad_tokens_and_foreign_states():
    model, tokens = relay(), good("relay")
    state = model.prefill(tokens)
    for bad, needles in [(torch.tensor([0, RV, 1]), ["token", str(RV), f"[0, {RV - 1}]"]),
                         (torch.tensor([0, -2, 1]), ["token", "-2"]),
                         (torch.tensor([0, 1]), ["token", "2 rows", "(3,)"]),
                         (tokens[:, :1], ["token", "(batch,)"]),
                         (tokens[:, 0].double(), ["token", "float64"])]:
        with pytest.raises(InputError) as err:
            model.step(bad, state)
        one_line(err, *needles)
    with pytest.raises(InputError) as err:
        model.step(tokens[:, 0], {"layers": []})
    one_line(err, "state", "RelayState", "dict")
    other = TraceRelay(TraceRelayConfig(vocab_size=RV, n_out=5, d_model=16, d_trace=[8], n_heads=2, d_ffn=24,
                                        left_window=5, right_window=2, stride=3))
    with pytest.raises(InputError) as err:
        model.step(tokens[:, 0], other.prefill(tokens))
    one_line(err, "state", "1 layers", "2")
    for bad in (-1, 2.5, True):
        with pytest.raises(InputError) as err:
            model.empty_state(bad)
        one_line(err, "batch_size")


def test_circuit_state_entry_points_reject_bad_states():
    model, tokens = circuit(), good("circuit")
    x = model.embed(tokens)
    for bad, needles in [(x[..., :-1], ["x", f"(3, {tokens.shape[1]}, {CD - 1})", str(CD)]),
                         (x[:, :0], ["x", "positions >= 1"]),
                         (x[0], ["x", "(batch, positions >= 1"]),
                         (tokens, ["x", "float state", "tokens="])]:
        for fn in (lambda v: model.step(v), lambda v: model.run(x=v)):
            with pytest.raises(InputError) as err:
                fn(bad)
            one_line(err, *needles)
    for kwargs in ({}, {"tokens": tokens, "x": x}):
        with pytest.raises(InputError) as err:
            model.run(**kwargs)
        one_line(err, "exactly one of tokens=")


# ---------------------------------------------------------------- hooks: names, entries, replacements
@pytest.mark.parametrize("kind", list(MODELS))
def test_bad_hook_requests_are_one_clear_error_and_leave_no_hook_attached(kind):
    model, tokens = MODELS[kind](), good(kind)
    name = next(iter(model.hook_dict))
    cases = [
        ([("blocks.0.hook_nope", lambda x, hook: None)], HookNameError, ["unknown hook", "blocks.0.hook_nope", name]),
        ([(name, lambda x, hook: None), (3, lambda x, hook: None)], InputError, ["hook target", "int", "3"]),
        ([(name, "not callable")], InputError, ["fwd_hooks", "pairs", "not callable"]),
        ([name], InputError, ["fwd_hooks", "pairs"]),
        ([(name, lambda x, hook: x[..., :1])], InputError, [name, "returned shape", "expected"]),
    ]
    for fwd_hooks, error, needles in cases:
        with pytest.raises(error) as err:
            model.run_with_hooks(tokens, fwd_hooks=fwd_hooks)
        msg = str(err.value)  # one line (the unknown-name one lists every hook, so it may be long)
        assert "\n" not in msg and not msg.startswith("'") and all(n in msg for n in needles), msg
        assert not any(hp.has_hooks for hp in model.hook_dict.values())
    err = pytest.raises(HookNameError, model.run_with_hooks, tokens, fwd_hooks=cases[0][0])
    assert isinstance(err.value, KeyError) and isinstance(err.value, InputError)  # old `except KeyError` still works
    _, cache = model.run_with_cache(tokens, names_filter=name)
    with pytest.raises(KeyError) as err:
        cache["blocks.0.hook_nope"]
    assert isinstance(err.value, InputError) and "no activation" in str(err.value)


# ---------------------------------------------------------------- good inputs are unchanged
def _relay_unchecked(model: TraceRelay, tokens, valid):
    """TraceRelay's forward as it was before input checks (no check, ``valid.bool()``)."""
    valid = torch.ones_like(tokens, dtype=torch.bool) if valid is None else valid.bool()
    h = model.hook_embed(model.embed(tokens))
    for block in model.blocks:
        h, _ = block(h, valid, model.dense_attention, model.loop_scan)
    return model.head(model.norm_final(h))


def test_good_inputs_give_exactly_the_unchecked_outputs():
    tf, t = transformer(), good("tf")
    assert torch.equal(tf(t), tf(t, check=False))
    assert torch.equal(tf(t.int()), tf(t, check=False))  # int32 ids are good ids
    assert torch.equal(tf(t[:, :1]), tf(t[:, :1], check=False))  # one position
    assert tf(t[:0]).shape == (0, CTX, V)  # an empty batch (B = 0) of real sequences is allowed
    assert tf(torch.full((2, CTX), V - 1)).shape == (2, CTX, V)  # the largest id and the full context
    dec = KVCacheDecoder(tf)
    logits = [dec.prefill(t[:, :3])[:, -1]] + [dec.step(t[:, i]) for i in range(3, CTX)]
    full = tf(t, check=False)
    for i, lg in enumerate(logits):
        torch.testing.assert_close(lg, full[:, 2 + i], atol=1e-5, rtol=0)

    model, t = relay(), good("relay")
    valid = torch.ones_like(t, dtype=torch.bool)
    valid[0, :4] = False
    for v in (None, valid, valid.long(), valid.float(), valid.to(torch.uint8)):
        assert torch.equal(model(t, v), _relay_unchecked(model, t, v))
    state = model.prefill(t, valid)
    assert torch.equal(state.last_logits, _relay_unchecked(model, t, valid)[:, -1])
    nxt, _ = model.step(t[:, 0], state)
    assert nxt.shape == (3, 5)

    cm, t = circuit(), good("circuit")
    with torch.no_grad():
        fast, sparse = cm(t), cm._run_sparse(t).readout
    assert torch.equal(fast, sparse)
    dense = cm.run(t)  # with autograd: the dense loop through embed
    assert torch.equal(dense.readout.detach(), cm.run(x=cm.embed(t)).readout.detach())


@pytest.mark.parametrize("case", ["id too large", "negative id", "empty sequence"])
def test_the_message_reads_like_the_others(case):
    """Same wording across models: the id, where it is, the range and where the range comes from."""
    msgs = []
    for kind in MODELS:
        tokens, _ = bad_case(kind, case)
        with pytest.raises(InputError) as err:
            MODELS[kind]()(tokens)
        msgs.append(str(err.value))
    shapes = {re.sub(r"-?\d+|\(.*\)", "#", m) for m in msgs}
    assert len(shapes) == 1, msgs
