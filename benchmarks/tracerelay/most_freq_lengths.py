"""Most-Freq by source length, finely: where a trained model's accuracy collapses past the
training range, and which rank its first output picks there.

For each length T, ``--n`` fresh sources (generator ``(seed, T, stream 1)``, as ``tinyscope eval
--seed``) and one teacher-forced forward: exact (the whole ranking + EOS under teacher forcing,
which App. A finds equal to greedy on all but a few examples), top-1 (the first output), and the
share of first outputs that name the symbol of each true rank (rank 1 = most frequent). With
``--kept-gaps`` the sources longer than the training maximum keep its relative count gaps
(``task.gaps_from``: count differences scaled with T); with ``--kept-differences`` they keep
its count *differences* (a draw at the training maximum plus the same offset for every symbol,
the remainder to the most frequent ones, so no gap shrinks); with ``--balanced-lineages`` the
plain counts are dealt so that every residue class mod W (a relay lineage) holds each symbol
floor(c/W) or ceil(c/W) times, removing the lineages' own count noise (about sqrt(c/W)).

``--rescale-increments L ...`` is an intervention: at a length T past the training maximum
T_max, the relay increments of layers L ("all" for every layer) are multiplied by T_max / T
(:func:`~tinyscope.studies.tracerelay.analysis.scaled_increments`), so each lineage's accumulated phase has the size it has at
T_max. With ``--kept-gaps`` (counts exactly T / T_max times a T_max draw) that gives the phases
of a training-length source with the same composition; if the model then recovers its ID
accuracy, the collapse comes from the size of the accumulated phases (their length part) and
nothing else in the network depends on the length.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/tracerelay/most_freq_lengths.py RUN --checkpoint best \
        --lengths 192 256 288 320 384 448 512 768 1024 --n 256
"""
from __future__ import annotations

import argparse
import dataclasses

import numpy as np
import torch

from tinyscope.runs.rundir import load_run
from tinyscope.studies.tracerelay.analysis import COUNT_LIKE_R2, TWO_PI, count_fit, prompt_phases, scaled_increments
from tinyscope.studies.tracerelay.experiment import FRESH_STREAM
from tinyscope.studies.tracerelay.task import MostFreq, eval_rng, relative_gaps, separated_counts


def kept_difference_set(task: MostFreq, T: int, n: int, seed: int, reference: int):
    """``n`` sources of length ``T`` whose counts are a draw at ``reference`` plus (T - reference) // V
    each, the remainder one each to the most frequent symbols: the reference's count differences."""
    V, rng = task.cfg.V, eval_rng(seed, T, FRESH_STREAM)
    offset, rest = divmod(T - reference, V)
    src, rank = np.zeros((n, T), np.int64), np.zeros((n, V), np.int64)
    for i in range(n):
        counts = separated_counts(rng, V, task.cfg.gap, reference) + offset  # (V,) increasing
        counts[V - rest:] += 1
        src[i], rank[i] = task.arrange(rng, counts)
    return task.batch(src, rank)


def balanced_lineage_set(task: MostFreq, T: int, n: int, seed: int, W: int):
    """``n`` plain-sampler sources of length ``T`` reordered so that positions t = r mod W hold each
    symbol floor(c/W) or ceil(c/W) times: the symbols sorted, dealt round-robin to the W residue
    classes, each class shuffled."""
    rng = eval_rng(seed, T, FRESH_STREAM)
    src, rank = task.sources(rng, n, T)  # (n, T), (n, V)
    out = np.empty_like(src)
    for i in range(n):
        dealt = np.sort(src[i])  # (T,) the multiset, by symbol
        for r in range(W):
            out[i, r::W] = rng.permutation(dealt[r::W])
    return task.batch(out, rank)


@torch.no_grad()
def by_length(model, task: MostFreq, T: int, n: int, seed: int, bs: int = 64, kind: str = "plain",
              rescale_layers: list[int] = ()) -> dict:
    """Teacher-forced exact, top-1 and the first output's true-rank shares at length ``T``; past
    the training maximum, the increments of ``rescale_layers`` times T_max / T."""
    reference = task.cfg.max_len
    scale = reference / T if T > reference else 1.0
    if kind == "kept-differences" and T > reference:
        batch = kept_difference_set(task, T, n, seed, reference)
    elif kind == "balanced-lineages":
        batch = balanced_lineage_set(task, T, n, seed, model.cfg.stride)
    else:
        batch = task.eval_set(T, n, seed, stream=FRESH_STREAM)
    V = task.cfg.V
    exact, first = [], []
    for i in range(0, n, bs):
        tokens = torch.as_tensor(batch.tokens[i:i + bs])  # (b, T + V + 1)
        targets = torch.as_tensor(batch.targets[i:i + bs])[:, T:]  # (b, V + 1)
        with scaled_increments(model, list(rescale_layers), scale):
            pred = model(tokens)[:, T:].argmax(-1)  # (b, V + 1)
        exact.append((pred == targets).all(1).numpy())
        first.append(pred[:, 0].numpy())
    exact, first = np.concatenate(exact), np.concatenate(first)  # (n,), (n,)
    ranking = batch.meta["ranking"]  # (n, V): symbols, most frequent first
    rank_of_first = np.array([np.flatnonzero(r == f)[0] if f in r else V for r, f in zip(ranking, first)])
    counts = np.stack([np.bincount(r, minlength=V)[:V] for r in batch.tokens[:, :T]])  # (n, V)
    return {"exact": float(exact.mean()), "top1": float((rank_of_first == 0).mean()),
            "first_rank_share": [float((rank_of_first == k).mean()) for k in range(V + 1)],
            "median_relative_gap": float(np.median(relative_gaps(counts)))}


def length_drift(model, task: MostFreq, n: int, seed: int, far: int) -> list[dict]:
    """Per layer, over the count-like channels: the length part of each channel's total increment.

    On ``n`` fresh training-range sources (lengths uniform in [min_len, max_len]) the total increment
    of channel j over the W lineages is fitted as ``counts @ a_j + b_j`` (:func:`count_fit`); as the
    counts sum to T, ``counts @ a_j = T mean(a_j) + (counts - T/V) @ (a_j - mean(a_j))``. The drift
    ``mean(a_j) (far - max_len) W^-1 / 2 pi`` is how many turns a lineage's phase moves from length
    max_len to ``far`` by length alone, with the count differences held."""
    rng, cfg = eval_rng(seed, 0, FRESH_STREAM), task.cfg
    totals, counts = [], []  # per source: per layer (d,), and (V,)
    for T in rng.integers(cfg.min_len, cfg.max_len + 1, size=n):
        src, _ = task.sources(rng, 1, int(T))  # (1, T)
        totals.append([p["phi"][0].sum(0) for p in prompt_phases(model, task, src)])  # the W lineage ends summed
        counts.append(np.bincount(src[0], minlength=cfg.V)[:cfg.V])
    counts = np.stack(counts)  # (n, V)
    W = model.cfg.stride
    out = []
    for layer in range(len(totals[0])):
        tot = np.stack([t[layer] for t in totals])  # (n, d)
        r2, coef = count_fit(tot, counts)  # (d,), (V + 1, d)
        like = r2 >= COUNT_LIKE_R2
        drift = np.abs(coef[:-1].mean(0)) * (far - cfg.max_len) / W / TWO_PI  # (d,) turns per lineage
        spread = (tot / W).std(0) / TWO_PI  # (d,) turns: the training-range spread of a lineage's phase
        out.append({"layer": layer, "count_like": int(like.sum()), "channels": len(r2),
                    "drift_turns": float(np.median(drift[like])) if like.any() else float("nan"),
                    "spread_turns": float(np.median(spread[like])) if like.any() else float("nan")})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--checkpoint", default="best")
    ap.add_argument("--lengths", type=int, nargs="+", default=[192, 256, 288, 320, 384, 448, 512, 768, 1024])
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--drift", type=int, default=0, metavar="N",
                    help="also fit the length part of the count-like phases on N training-range sources")
    kind = ap.add_mutually_exclusive_group()
    kind.add_argument("--kept-gaps", action="store_true", help="sources past the training maximum keep its relative gaps")
    kind.add_argument("--kept-differences", action="store_true",
                      help="sources past the training maximum keep its count differences")
    kind.add_argument("--balanced-lineages", action="store_true",
                      help="every relay lineage (position mod W) holds each symbol c/W times, rounded")
    ap.add_argument("--rescale-increments", nargs="+", default=[], metavar="L",
                    help="past the training maximum, scale these layers' relay increments by T_max / T ('all': every layer)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    which = int(args.checkpoint) if args.checkpoint.isdigit() else args.checkpoint
    run = load_run(args.run, which)
    task = run.task
    if args.kept_gaps:
        task = MostFreq(dataclasses.replace(task.cfg, gaps_from=task.cfg.max_len))
    model = run.model.eval()
    n_layers = model.cfg.n_layers
    rescale = list(range(n_layers)) if args.rescale_increments == ["all"] else [int(x) for x in args.rescale_increments]
    if any(not 0 <= layer < n_layers for layer in rescale):
        raise SystemExit(f"--rescale-increments: layers are 0..{n_layers - 1} or 'all', got {args.rescale_increments}")
    V = task.cfg.V
    print(f"{run.experiment.name} step {run.step}; {args.n} fresh sources per length (seed {args.seed})"
          f"{'; kept gaps of T = ' + str(task.cfg.max_len) if args.kept_gaps else ''}"
          f"{'; kept count differences of T = ' + str(task.cfg.max_len) if args.kept_differences else ''}"
          f"{'; lineage-balanced order' if args.balanced_lineages else ''}"
          f"{'; increments of layers ' + str(rescale) + ' times T_max / T' if rescale else ''}")
    kind = ("kept-differences" if args.kept_differences else "balanced-lineages" if args.balanced_lineages
            else "plain")
    ranks = " ".join(f"r{k + 1:<4}" for k in range(V)) + " none"
    print(f"{'T':>5} {'gap':>6} {'exact':>6} {'top1':>6}  first output's true rank:  {ranks}")
    for T in args.lengths:
        m = by_length(model, task, T, args.n, args.seed, kind=kind, rescale_layers=rescale)
        shares = " ".join(f"{s:5.2f}" for s in m["first_rank_share"])
        print(f"{T:>5} {m['median_relative_gap']:6.3f} {100 * m['exact']:6.1f} {100 * m['top1']:6.1f}  "
              f"{' ' * 27}{shares}")
    if args.drift:
        far = max(args.lengths)
        print(f"\nlength part of the count-like phases (fit on {args.drift} sources of length "
              f"{task.cfg.min_len}-{task.cfg.max_len}): median turns a lineage's phase moves from T = "
              f"{task.cfg.max_len} to {far} by length alone, against its spread within the training range")
        for m in length_drift(model, task, args.drift, args.seed, far):
            print(f"layer {m['layer']}: {m['count_like']}/{m['channels']} count-like; drift {m['drift_turns']:.2f} turns, "
                  f"training-range spread (SD) {m['spread_turns']:.2f} turns")


if __name__ == "__main__":
    main()
