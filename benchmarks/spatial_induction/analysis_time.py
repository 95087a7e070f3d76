"""Wall time of the full mechanistic analysis (attention maps, alignment, ablation with three
control seeds, probes on five stages, t-SNE on five stages) of one cellular-automaton run.

    .venv/bin/python benchmarks/spatial_induction/analysis_time.py RUN [--n-traj 2000]

Without RUN it compiles the deterministic ECA circuit (Construction I) and analyzes that.
Prints the time of each analysis, the CPU time, the peak memory, and last the total wall time
(target: <= 5 minutes on this 2-core machine).
"""
from __future__ import annotations

import argparse
import resource
import tempfile
import time

import torch

from tinyscope.runs.rundir import load_run
from tinyscope.studies.spatial_induction.analysis import ANALYSES, AnalysisConfig, analyze


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run", nargs="?")
    ap.add_argument("--n-traj", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    path = args.run
    if path is None:
        from tinyscope.studies.spatial_induction.compiled import write_compiled_run

        path = tempfile.mkdtemp() + "/compiled"
        write_compiled_run("eca", "det", path)
    run = load_run(path)
    total_wall, total_cpu = time.perf_counter(), time.process_time()
    for name in ANALYSES:
        t0, c0 = time.perf_counter(), time.process_time()
        results, figures = analyze(run.model, run.task, AnalysisConfig(n_traj=args.n_traj, only=[name]), progress=False)
        print(f"{name:10s} {time.perf_counter() - t0:7.1f} s wall  {time.process_time() - c0:7.1f} s CPU", flush=True)
        for key in ("alignment", "ablation", "probes"):
            if key in results:
                print(f"    {key}: {results[key]}", flush=True)
    wall, cpu = time.perf_counter() - total_wall, time.process_time() - total_cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory {peak:.0f} MiB; CPU {cpu:.1f} s")
    print(f"full analysis of {path} on {args.n_traj} test trajectories: {wall:.1f} s wall (target <= 300 s)")


if __name__ == "__main__":
    main()
