"""Throughput of tinyscope's Transformer against the same model in TransformerLens 4.3 (a
``TransformerBridge`` over its native model, made by ``tinyscope.interop.to_transformer_lens``:
identical weights), for a training step, a forward with every hook cached and a plain forward,
on three shapes; then the hook-overhead ratio of ``benchmarks/core/hook_overhead.py``.

    .venv/bin/python benchmarks/core/interop_speed.py [--rounds 5] [--seconds 0.4] [--overhead-rounds 5]

One process, one intra-op thread, rounds interleaved (each round times every library and
operation once, in turn), so that machine noise hits both alike; throughput is tokens per CPU
second of this process. Prints per shape and operation the median tokens/s of each and the
median of the per-round ratios tinyscope / TransformerLens (> 1: tinyscope is faster), and, last,
the hook-overhead ratio tinyscope (no hooks) / bare nanoGPT-style module (target >= 0.95).
"""
from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import statistics
import time
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

from tinyscope.interop import to_transformer_lens
from tinyscope.models.transformer import Transformer, TransformerConfig

SHAPES = {  # name: (config, batch)
    "plus-last-even (D=2, T=8, 1 layer)": (TransformerConfig(), 256),
    "spatial-induction shared cpu (D=64, T=168, 2 layers)": (TransformerConfig(
        vocab_size=4, n_ctx=168, d_model=64, n_heads=[1, 1], d_mlp=[256, 256], norm="pre", attn_out_proj=True,
        qkv_bias=True, attn_out_bias=True, unembed_bias=False, init="gpt2"), 16),
    "GPT-style (D=128, 4 heads, T=64, 2 layers, final LN)": (TransformerConfig(
        vocab_size=16, n_ctx=64, d_model=128, n_heads=[4, 4], d_mlp=[512, 512], act="gelu", norm="pre",
        final_norm=True, attn_out_proj=True, unembed_bias=False, init="gpt2"), 32),
}


def train_step(model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> None:
    logits = model(x)  # (B, T, V)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def operations(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> dict[str, Callable[[], None]]:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step() -> None:
        model.train()
        train_step(model, opt, x, y)

    def cached() -> None:
        model.eval()
        with torch.no_grad():
            model.run_with_cache(x)

    def plain() -> None:
        model.eval()
        with torch.no_grad():
            model(x)

    return {"training step": step, "forward with cache": cached, "plain forward": plain}


def rate(fn: Callable[[], None], tokens: int, seconds: float) -> float:
    """Tokens per CPU second of ``fn``, repeated until ``seconds`` of CPU time have passed."""
    n, start = 0, time.process_time()
    while True:
        fn()
        n += 1
        spent = time.process_time() - start
        if spent >= seconds:
            return n * tokens / spent


def hook_overhead(rounds: int, steps: int) -> float:
    """The ratio benchmarks/core/hook_overhead.py measures, with its models and measurement."""
    path = Path(__file__).with_name("hook_overhead.py")
    spec = importlib.util.spec_from_file_location("hook_overhead", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    torch.manual_seed(0)
    data = torch.randint(0, bench.V, (bench.B, bench.T + 1))
    ours, bare = bench.tinyscope_model(), bench.BareGPT()
    bench.tokens_per_second(ours, 3, data), bench.tokens_per_second(bare, 3, data)  # warm up
    ratios = [bench.tokens_per_second(ours, steps, data) / bench.tokens_per_second(bare, steps, data)
              for _ in range(rounds)]
    return statistics.median(ratios)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=0.4, help="CPU seconds per library, operation and round")
    ap.add_argument("--overhead-rounds", type=int, default=5)
    ap.add_argument("--overhead-steps", type=int, default=20)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, TransformerLens {importlib.metadata.version('transformer-lens')}, "
          f"threads {torch.get_num_threads()}, {args.rounds} interleaved rounds of {args.seconds} CPU s")
    for name, (cfg, batch) in SHAPES.items():
        torch.manual_seed(0)
        ours = Transformer(cfg)
        theirs = to_transformer_lens(ours)
        data = torch.randint(0, cfg.vocab_size, (batch, cfg.n_ctx + 1))
        x, y = data[:, :-1], data[:, 1:]
        ops = {"tinyscope": operations(ours, x, y), "TransformerLens": operations(theirs, x, y)}
        for lib in ops.values():  # warm up
            for fn in lib.values():
                fn()
        rates: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.rounds):
            for op in ops["tinyscope"]:
                for lib in ops:
                    rates.setdefault((lib, op), []).append(rate(ops[lib][op], x.numel(), args.seconds))
        print(f"\n{name}, batch {batch}, {sum(p.numel() for p in ours.parameters()):,} parameters")
        for op in ops["tinyscope"]:
            a, b = rates["tinyscope", op], rates["TransformerLens", op]
            ratio = statistics.median(r / s for r, s in zip(a, b))
            print(f"  {op:20s} tinyscope {statistics.median(a):>12,.0f}  TransformerLens {statistics.median(b):>12,.0f}"
                  f" tokens/s   ratio {ratio:.2f}")
    ratio = hook_overhead(args.overhead_rounds, args.overhead_steps)
    print(f"\nhook-overhead ratio tinyscope (no hooks) / bare nanoGPT-style (benchmarks/core/hook_overhead.py, "
          f"median of {args.overhead_rounds} interleaved rounds): {ratio:.3f}")


if __name__ == "__main__":
    main()
