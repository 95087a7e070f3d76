"""FFN throughput: training tokens/s of each FFN kind relative to GELU at equal parameters, and
the quantifier block's parallel scan vs its loop reference at T = 4,096.

    OMP_NUM_THREADS=1 python benchmarks/ncffn/ffn_throughput.py [--repeats 5]

Timings alternate between variants inside one process and report the median ratio, so the
machine's load cancels out (targets: NC >= 0.8x GELU; scan >= 50x loop).
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from tinyscope.models.ffn import build_ffn
from tinyscope.models.utils import count_parameters
from tinyscope.studies.ncffn.experiment import gpt
from tinyscope.studies.ncffn.model import QuantifiedTransformer
from tinyscope.studies.ncffn.quantifiers import (
    QuantifierBlock,
    existential_loop,
    existential_scan,
    proportion_loop,
    proportion_scan,
)

KINDS = ["gelu", "swiglu", "bilinear", "nc", "nc_bool"]


def _step_time(fn, n: int) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def train_step(model: torch.nn.Module, opt, tokens: torch.Tensor):
    def step():
        logits = model(tokens[:, :-1])  # (B, T, V)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return step


def ffn_ratios(repeats: int, d_model: int = 128, d_hidden: int = 512, B: int = 16, T: int = 128) -> dict:
    """Tokens/s relative to GELU: the FFN alone (forward + backward) and a 2-layer GPT train step."""
    torch.manual_seed(0)
    x = torch.randn(B, T, d_model)
    ffns = {k: build_ffn(k, d_model, d_hidden, "gelu", True) for k in KINDS}
    ffn_steps = {k: (lambda f=f: f(x).square().mean().backward()) for k, f in ffns.items()}
    tokens = torch.randint(0, 83, (B, T + 1))
    gpts, gpt_steps = {}, {}
    for k in KINDS:
        m = QuantifiedTransformer(gpt(n_ctx=T, d_model=d_model, d_head=32, d_mlp=[d_hidden] * 2, ffn=k))
        gpts[k] = m
        gpt_steps[k] = train_step(m, torch.optim.AdamW(m.parameters(), lr=1e-4), tokens)
    out = {}
    for label, steps, n in (("ffn", ffn_steps, 10), ("gpt", gpt_steps, 3)):
        ratios = {k: [] for k in KINDS}
        for _ in range(repeats):
            times = {k: _step_time(steps[k], n) for k in KINDS}
            for k in KINDS:
                ratios[k].append(times["gelu"] / times[k])
        out[label] = {k: statistics.median(v) for k, v in ratios.items()}
    out["params_ffn"] = {k: count_parameters(f) for k, f in ffns.items()}
    out["params_gpt"] = {k: count_parameters(m) for k, m in gpts.items()}
    return out


def quantifier_speedup(repeats: int, B: int = 4, T: int = 4096, d_model: int = 128, units: int = 16) -> dict:
    """Parallel scan vs loop at T tokens, forward + backward: the two quantifiers alone (given
    memberships and decays), and the whole block (with its input/output projections)."""
    torch.manual_seed(0)
    q = QuantifierBlock(d_model, units, units, init_decay=0.9)
    x = torch.randn(B, T, d_model, requires_grad=True)
    pre = torch.randn(B, T, units, requires_grad=True)
    theta = torch.randn(units, requires_grad=True)

    def scans(loop: bool):
        if loop:
            m, d = torch.sigmoid(pre), torch.sigmoid(theta)
            out = existential_loop(m, d) + proportion_loop(m, d)
        else:
            out = existential_scan(F.logsigmoid(pre), F.logsigmoid(theta)) \
                + proportion_scan(torch.sigmoid(pre), F.logsigmoid(theta))
        out.sum().backward()

    def block(loop: bool):
        q.use_scan = not loop
        q(x).sum().backward()

    out = {}
    for label, fn in (("quantifiers alone", scans), ("whole block", block)):
        r = []
        for _ in range(repeats):
            r.append(_step_time(lambda fn=fn: fn(True), 1) / _step_time(lambda fn=fn: fn(False), 3))
        out[label] = statistics.median(r)
    q.use_scan = True
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    q = quantifier_speedup(max(1, args.repeats // 2))
    r = ffn_ratios(args.repeats)
    print("FFN throughput relative to GELU at equal parameters (median of alternating timings)")
    print(f"{'kind':<10} {'FFN params':>10} {'FFN fwd+bwd':>12} {'GPT params':>11} {'GPT train step':>15}")
    for k in KINDS:
        print(f"{k:<10} {r['params_ffn'][k]:>10} {r['ffn'][k]:>11.2f}x {r['params_gpt'][k]:>11} {r['gpt'][k]:>14.2f}x")
    print(f"target: nc >= 0.80x  ->  {'met' if r['gpt']['nc'] >= 0.8 else 'NOT met'} ({r['gpt']['nc']:.2f}x)")
    print("quantifiers at T=4096 (B=4, 16 units each; block D=128), forward+backward, scan vs loop reference")
    for label, v in q.items():
        print(f"  {label:<18} {v:7.1f}x")
    print(f"target: >= 50x  ->  quantifiers alone {'met' if q['quantifiers alone'] >= 50 else 'NOT met'}, "
          f"whole block {'met' if q['whole block'] >= 50 else 'NOT met'}")


if __name__ == "__main__":
    main()
