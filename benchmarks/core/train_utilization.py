"""Training-step utilization of every registered experiment's cpu preset (issue 21).

For each trainable experiment with a ``cpu`` preset, two Trainers on copies of the same model:

* ``preset``: the preset's ``train.precision``, ``train.threads``, ``train.compile`` and
  ``train.prefetch``, resolved by the Trainer on this machine (``Trainer.prepare``, then the
  training steps of ``prefetch=auto``'s trial, untimed here);
* ``plain``: fp32, 1 thread, eager, no prefetch (the reference).

Both run ``--steps`` timed training steps (``Trainer.train_step``: batch, forward, backward,
clipping, optimizer) per round, interleaved with a GEMM peak measurement ((1024, 1024) @
(1024, 1024) at the preset's threads, in fp32 and, where the preset chose bf16, in bf16), for
``--rounds`` rounds; medians are compared. FLOPs per step are counted once on the plain model with
``torch.utils.flop_counter.FlopCounterMode`` (matmuls, convolutions and attention of forward and
backward). Columns:

    util_plain  = FLOPs / plain step time  / fp32 peak on 1 thread
    util        = FLOPs / preset step time / peak of the preset's precision and threads
    speedup     = plain step time / preset step time      (target: >= 1 for every preset)

The figure printed last is the median ``util`` over the experiments (target >= 0.5).

    OMP_NUM_THREADS=2 python benchmarks/core/train_utilization.py [--experiments a,b] [--steps 5] [--rounds 3] [--compile on]
"""
from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch
from torch.utils.flop_counter import FlopCounterMode

from tinyscope.runs import registry
from tinyscope.runs.rundir import build
from tinyscope.train.trainer import Trainer


def gemm_seconds(dtype: torch.dtype, threads: int, n: int = 1024, reps: int = 3) -> float:
    """Seconds of one (n, n) @ (n, n) matmul (median of ``reps``) on ``threads`` threads."""
    torch.set_num_threads(threads)
    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)  # (n, n) each
    a @ b
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def trainer_for(exp, cfg, model, task, **train) -> Trainer:
    tcfg = copy.deepcopy(cfg.train)
    for k, v in train.items():
        setattr(tcfg, k, v)
    return Trainer(model, task, tcfg, seed=cfg.seed, objective=exp.objective(cfg, task), progress=False)


def time_steps(trainer: Trainer, n: int) -> float:
    """Median seconds of one of ``n`` training steps (the threads set to the trainer's choice)."""
    torch.set_num_threads(int(trainer.machine["threads"]))
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        trainer.train_step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(name: str, steps: int, rounds: int, compile: str = "preset") -> dict:
    exp = registry.get(name)
    cfg = exp.presets["cpu"]()
    cfg.train.device = "cpu"
    task, model = build(exp, cfg)
    plain = trainer_for(exp, cfg, copy.deepcopy(model), task, precision="fp32", threads=1, compile=False,
                        prefetch=False)
    plain.prepare()
    torch.set_num_threads(1)
    with FlopCounterMode(display=False) as counter:
        plain.train_step()
    flops = counter.get_total_flops()
    preset = trainer_for(exp, cfg, model, task, **({} if compile == "preset" else {"compile": compile == "on"}))
    t0 = time.perf_counter()
    preset.prepare()
    preset.train_step()  # the first step (compiles where train.compile is on)
    first = time.perf_counter() - t0
    while preset.prefetch_trial is not None:  # prefetch=auto decides on its first training steps
        preset.train_step()
    plain.train_step()
    m = preset.machine
    dtype = torch.bfloat16 if m["precision"] == "bf16" else torch.float32
    t = {"plain": [], "preset": [], "peak1": [], "peak": []}
    for _ in range(rounds):
        t["plain"].append(time_steps(plain, steps))
        t["preset"].append(time_steps(preset, steps))
        t["peak1"].append(gemm_seconds(torch.float32, 1))
        t["peak"].append(gemm_seconds(dtype, int(m["threads"])))
    med = {k: statistics.median(v) for k, v in t.items()}
    gemm = 2 * 1024 ** 3
    return {"name": name, "flops": flops, "plain_s": med["plain"], "preset_s": med["preset"], "first_s": first,
            "util_plain": flops / med["plain"] / (gemm / med["peak1"]),
            "util": flops / med["preset"] / (gemm / med["peak"]),
            "speedup": med["plain"] / med["preset"], "peak_gflops": gemm / med["peak"] / 1e9, **m}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experiments", default="", help="comma-separated names (default: every cpu preset)")
    ap.add_argument("--steps", type=int, default=5, help="timed steps per round and configuration")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--compile", choices=("preset", "on", "off"), default="preset",
                    help="train.compile of the preset configuration (default: the preset's)")
    args = ap.parse_args()
    names = [n for n in args.experiments.split(",") if n] or \
        [e.name for e in registry.experiments() if e.trainable and "cpu" in e.presets]
    print(f"{'experiment':40s} {'GFLOP':>7s} {'plain ms':>9s} {'preset ms':>9s} {'speedup':>7s} "
          f"{'util_plain':>10s} {'util':>6s} {'peak GF/s':>9s}  choice")
    utils = []
    for name in names:
        r = measure(name, args.steps, args.rounds, args.compile)
        utils.append(r["util"])
        choice = (f"{r['precision']} x{r['threads']}{' compiled' if r['compile'] else ''}"
                  f"{' prefetch' if r.get('prefetch') else ''} (first step {r['first_s']:.1f} s)")
        print(f"{name:40s} {r['flops'] / 1e9:7.3f} {r['plain_s'] * 1e3:9.1f} {r['preset_s'] * 1e3:9.1f} "
              f"{r['speedup']:7.2f} {r['util_plain']:10.3f} {r['util']:6.3f} {r['peak_gflops']:9.1f}  {choice}",
              flush=True)
    print(f"median utilization over {len(utils)} cpu presets: {statistics.median(utils):.3f}")


if __name__ == "__main__":
    main()
