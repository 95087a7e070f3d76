"""The claims of Oskin, "Explicit Fuzzy Logic in the Feed-Forward Layer" (NC-FFN), that tinyscope checks.

Only the abstract and third-party accounts of the paper are public (``seed003-details.md``, Sec. 4):
``where`` is "Abstract" for the abstract's statements and "Digest" for the numbers a digest of the
full PDF or a reimplementation gives. Four groups:

* **parameter neutrality** (computed): an NC-FFN layer has the GELU FFN's parameters, and so has
  the whole model, with or without the small quantifier block (FFNs narrowed to match);
* **parity** (computed by training once, a few minutes of one core, shared by the three claims): the
  fewest parameters at which a pure feed-forward stack of each basis fits all 2^8 inputs of 8-bit
  parity at depth 1 in at least half of 5 seeds (:mod:`~tinyscope.studies.ncffn.parity_bases` with
  its default protocol);
* **sequence quantifiers** on the synthetic licensing language (``cpu`` preset): the half-life and
  latch counts, the licensing detectors, and, on its harder ``npi`` variant (minimal pairs over
  distance, distractor, nested-negation and quantifier phenomena), the NC-FFN deficit and its
  recovery at epochs 1 and 2, tinyscope's stand-in for the paper's BLiMP licensing and quantifier
  phenomena;
* **the paper's scale** (``ncffn-gpt2``'s ``paper`` preset: GPT-2 small, 124M parameters, on a
  BPE-tokenized OpenWebText; GPU): the parameter count (computed), the perplexity tie, the
  half-lives, BLiMP licensing (:mod:`~tinyscope.studies.ncffn.blimp`), LAMBADA
  (:mod:`~tinyscope.studies.ncffn.lambada`) and the divergence of the fully Boolean FFN; each
  claim's note gives the ``torchrun`` command of its runs (:func:`torchrun_command`).
"""
from __future__ import annotations

import functools
import math

from tinyscope.runs.claims import (
    Claim,
    ClaimError,
    Measure,
    PaperValue,
    RunRecord,
    Runs,
    RunSet,
    at_least,
    at_most,
    combine,
    declare,
    difference,
    metric,
    ratio,
    within,
    within_run,
)

SEEDS = (0, 1, 2, 3, 4)
EXP = "ncffn-lm"
PARITY_BITS, PARITY_DEPTH = 8, 1
PARITY_NS = (4, 6, 8)                  # the parity claims' N at depth 1 (the digest names N = 8)
GELU_LAYER_PARAMS = 4_722_432          # Digest (reimplementation): one d = 768, d_ff = 3072 layer
PPL_GELU, PPL_NC = 18.32, 18.36        # Digest: OpenWebText perplexity
HALF_LIFE = 1.5                        # Abstract: median half-life ~1.5 tokens
DIVERGE_STEPS = 16_000                 # Digest: the fully Boolean FFN diverges within ~16k steps

CPU_NC = ("model.ffn=nc",)
CPU_QUANT = ("model.ffn=nc", "quant.layers=0,1")
PAPER_NC = ("model.ffn=nc",)
PAPER_QUANT = ("model.ffn=nc", "quant.layers=" + ",".join(str(l) for l in range(12)))
PAPER_BOOL = ("model.ffn=nc_bool",)
GPT2 = "ncffn-gpt2"                     # the paper-scale experiment (paper_lm.py)
PAPER_SEEDS = (0,)                      # one run per variant: each is ~6.6B tokens of a 124M model
PAPER_NOTE = ("GPT-2 small on the BPE-tokenized corpus with nanoGPT's OpenWebText recipe (the paper's steps and "
              "schedule are not public); run in a folder holding openwebtext.txt, blimp/data/*.jsonl and "
              "lambada_test.txt (or links to them), so that the runs are the preset's")


def torchrun_command(overrides: tuple[str, ...] = (), seed: int = 0, gpus: int = 8) -> str:
    """The command that trains one paper-scale run on ``gpus`` GPUs into the directory where
    ``tinyscope reproduce ncffn --include-gpu`` then finds and judges it."""
    from tinyscope.sweep.grid import setting_name

    pairs = [tuple(o.split("=", 1)) for o in overrides]
    sets = "".join(f" --set {o}" for o in overrides)
    out = f"reproduce/ncffn/runs/{GPT2}-paper/{setting_name(pairs)}/s{seed}"
    return (f"torchrun --standalone --nproc_per_node {gpus} -m tinyscope.cli run {GPT2} --preset paper "
            f"--seed {seed}{sets} --out {out}")


def _gpu_note(text: str, *variants: tuple[str, ...]) -> str:
    """``text``, the preset's protocol and the exact command of each variant the claim compares."""
    return f"{text}{'; ' if text else ''}{PAPER_NOTE}; commands: " + " && ".join(torchrun_command(v) for v in variants)


def _paper(overrides: tuple[str, ...] = ()) -> RunSet:
    return RunSet(GPT2, "paper", overrides, PAPER_SEEDS)


def _rs(preset: str, overrides: tuple[str, ...] = ()) -> RunSet:
    return RunSet(EXP, preset, overrides, SEEDS)


# ---------------------------------------------------------------- parameter counts
def _lm_parameters(preset: str, overrides: tuple[str, ...] = (), experiment: str = EXP) -> int:
    """Parameters of the model the preset builds (its own vocabulary), on the meta device (no memory)."""
    import types

    import torch

    from tinyscope.models.utils import count_parameters
    from tinyscope.runs import registry

    exp = registry.get(experiment)
    cfg = exp.config(preset, 0, list(overrides))
    with torch.device("meta"):  # the presets' vocabularies (the task only gives the model its vocabulary size)
        model = exp.build_model(cfg, types.SimpleNamespace(vocab_size=cfg.model.vocab_size))
    return count_parameters(model)


def lm_parameter_ratio(preset: str, overrides: tuple[str, ...], experiment: str = EXP) -> float:
    """Parameters of the preset's model with ``overrides`` over those of its GELU baseline."""
    return _lm_parameters(preset, overrides, experiment) / _lm_parameters(preset, (), experiment)


def ffn_layer_parameters(kind: str, d_model: int = 768, d_ff: int = 3072) -> int:
    from tinyscope.models.ffn import MLP, NCFFN
    from tinyscope.models.utils import count_parameters

    return count_parameters(NCFFN(d_model, d_ff) if kind == "nc" else MLP(d_model, d_ff, act="gelu"))


def logic_share(d_model: int = 768, d_ff: int = 3072) -> float:
    """Share of an NC-FFN layer's hidden channels that are fuzzy-pair (A·B, A·(1−B)) units."""
    from tinyscope.models.ffn import NCFFN

    layer = NCFFN(d_model, d_ff)
    return 2 * layer.n_pairs / layer.d_hidden


# ---------------------------------------------------------------- parity probe
PARITY_OTHERS = ("gelu", "swiglu", "bilinear")


@functools.lru_cache(maxsize=None)
def parity_rows(n_bits: int = PARITY_BITS, depth: int = PARITY_DEPTH) -> tuple[dict, ...]:
    """The probe's rows (every basis, width and seed of the default protocol) at one (N, depth),
    trained once per process."""
    from tinyscope.studies.ncffn.parity_bases import ParitySweepConfig, parity_sweep

    return tuple(parity_sweep(ParitySweepConfig(n_bits=[n_bits], depths=[depth]), progress=False))


def efficiency_ratio(rows, basis: str = "nc_bool", others=PARITY_OTHERS, share: float = 0.5) -> float:
    """``basis``'s threshold parameters P(share) over the smallest of ``others``' (≤ 1: no other basis
    needs fewer; inf: ``basis`` never solves; :func:`~tinyscope.studies.ncffn.parity_stats.efficiency_ratio`,
    whose bootstrap interval docs/results/ncffn.md gives)."""
    from tinyscope.studies.ncffn.parity_stats import efficiency_ratio as ratio

    return ratio(list(rows), basis, tuple(others), share, n_boot=1)["ratio"]


def best_accuracy(rows, basis: str) -> float:
    """Best accuracy of ``basis`` over its seeds and widths."""
    accs = [r["accuracy"] for r in rows if r["basis"] == basis]
    return max(accs) if accs else math.nan


def mean_accuracy(rows, basis: str, width: int) -> float:
    """Mean over seeds of ``basis``'s best accuracy at ``width``."""
    accs = [r["accuracy"] for r in rows if r["basis"] == basis and r["width"] == width]
    return sum(accs) / len(accs) if accs else math.nan


def same_size_accuracy_ratio(rows, basis: str = "nc", baseline: str = "gelu", share: float = 0.5) -> float:
    """At the width where ``basis`` first solves parity (P(share)'s width), its mean accuracy over
    seeds over ``baseline``'s at the same width (the same parameter count: NC-FFN is
    parameter-neutral); 0 if ``basis`` never solves."""
    from tinyscope.studies.ncffn.parity_stats import threshold_params

    width = threshold_params(list(rows), basis, share, n_boot=1)["width"]
    if width is None:
        return 0.0
    return mean_accuracy(rows, basis, width) / mean_accuracy(rows, baseline, width)


# ---------------------------------------------------------------- measures over training histories
def eval_at(rec: RunRecord, key: str, step: int) -> float:
    """``key`` at the first evaluation at or after ``step`` (metrics.jsonl)."""
    for r in rec.history():
        if r.get("split") == "eval" and key in r and r["step"] >= step:
            return float(r[key])
    raise ClaimError(f"run of seed {rec.seed} has no evaluation of {key!r} at step >= {step} in its metrics.jsonl")


def recovered_fraction(gelu: float, nc: float, nc_quant: float) -> float:
    """Share of NC-FFN's deficit to GELU that the quantifiers win back: (NCq − NC) / (GELU − NC);
    0 when NC shows no deficit (nothing the claim could be checked on)."""
    gap = gelu - nc
    return (nc_quant - nc) / gap if gap > 0 else 0.0


def recovery_at(key: str, step: int) -> Measure:
    """Per seed, :func:`recovered_fraction` of ``key`` at ``step``; RunSets: GELU, NC, NC + quantifiers."""
    def per_seed(runs: Runs) -> dict[int, float]:
        seeds = sorted(set(runs[0]) & set(runs[1]) & set(runs[2])) if len(runs) == 3 else []
        return {s: recovered_fraction(*(eval_at(r[s], key, step) for r in runs)) for s in seeds}

    return Measure(f"(NCq − NC) / (GELU − NC) of {key} at step {step}", per_seed)


def gap_at(key: str, step: int) -> Measure:
    """Per seed, RunSet 0's ``key`` minus RunSet 1's, both at ``step``."""
    def per_seed(runs: Runs) -> dict[int, float]:
        seeds = sorted(set(runs[0]) & set(runs[1])) if len(runs) == 2 else []
        return {s: eval_at(runs[0][s], key, step) - eval_at(runs[1][s], key, step) for s in seeds}

    return Measure(f"GELU − NC-FFN {key} at step {step}", per_seed)


def divergence_step(history: list[dict], factor: float = 1.5) -> float:
    """The first logged training step whose loss is not finite or exceeds ``factor`` times the lowest
    loss logged before it; +inf if training never diverged."""
    best = math.inf
    for r in history:
        if r.get("split") != "train" or "loss" not in r:
            continue
        loss = float(r["loss"])
        if not math.isfinite(loss) or (math.isfinite(best) and loss > factor * best):
            return float(r["step"])
        best = min(best, loss)
    return math.inf


def _divergence(label: str, fn) -> Measure:
    def per_seed(runs: Runs) -> dict[int, float]:
        out = {}
        for s, rec in (runs[0].items() if runs else ()):
            if not rec.history():
                raise ClaimError(f"run of seed {s} has no metrics.jsonl to find a divergence in")
            out[s] = fn(divergence_step(rec.history()))
        return out

    return Measure(label, per_seed)


def diverged() -> Measure:
    return _divergence("1 if the training loss diverged (non-finite or > 1.5× its best so far)",
                       lambda step: float(math.isfinite(step)))


def steps_to_divergence() -> Measure:
    return _divergence("training step at which the loss diverged (inf: never)", lambda step: step)


def logic_erosion(key: str = "two_operand_share_l0") -> Measure:
    """Per seed, ``1 - last / peak`` of ``key`` over the run's evaluations (metrics.jsonl):
    how much of its peak share of two-operand pairs a layer has lost by the end of training."""
    def per_seed(runs: Runs) -> dict[int, float]:
        from tinyscope.studies.ncffn.legibility_training import erosion_from_history

        out = {}
        for s, rec in (runs[0].items() if runs else ()):
            try:
                out[s] = erosion_from_history(rec.history(), key)
            except KeyError:
                raise ClaimError(f"run of seed {s} logged no {key!r} (an NC-FFN run from before the "
                                 f"two-operand metrics; train it again)") from None
        return out

    return Measure(f"1 − last / peak of {key} over the evaluations", per_seed)


@functools.lru_cache(maxsize=None)
def epoch_steps(preset: str = "cpu", overrides: tuple[str, ...] = ()) -> int:
    """Training steps in one pass over the licensing language's training corpus at ``preset``."""
    from tinyscope.runs import registry

    cfg = registry.get(EXP).config(preset, 0, list(overrides))
    return math.ceil(cfg.task.n_train_tokens / (cfg.train.batch_size * cfg.model.n_ctx))


def two_epochs(overrides: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The cpu preset trained for two epochs and evaluated at the end of each."""
    e = epoch_steps("cpu", overrides)
    return overrides + (f"train.steps={2 * e}", f"train.eval_every={e}")


# the npi licensing language (licensing_npi) at the cpu preset: 409,600 training tokens, 200 steps an epoch
NPI = ("task.language=npi", "task.n_train_tokens=409600")
NPI_SEEDS = SEEDS  # each run is under a minute of one quiet core
NPI_METRIC = "npi_pair_acc"


def _npi(overrides: tuple[str, ...] = ()) -> RunSet:
    return RunSet(EXP, "cpu", two_epochs(NPI + overrides), NPI_SEEDS)


# ---------------------------------------------------------------- the claims
NEUTRAL, PARITY, QUANT, LM, SYN = ("Abstract (parameter neutrality)", "Abstract (N-bit parity)",
                                   "Abstract (sequence quantifiers)", "Abstract (125M, OpenWebText)",
                                   "Abstract (licensing and quantifiers)")
def parity_note(n: int = PARITY_BITS) -> str:
    """The protocol of the parity claims at N = ``n``, depth 1."""
    source = "the digest's 8-bit parity" if n == 8 else "the digest names N = 8"
    return (f"N = {n} and depth 1 ({source}; 'shallow'); the paper's widths, optimiser, seeds and efficiency reading are not public: tinyscope's "
            f"probe trains full-batch on all {2 ** n} inputs (Adam 3e-2, cosine, ≤ 2,000 steps), 5 seeds at every "
            f"width 1-{2 * n} (nc_bool at even widths only: an odd one keeps a GELU channel); a basis solves at a "
            "width when ≥ half of its seeds reach 100% (parity_bases.ParitySweepConfig); bootstrap intervals over "
            "seeds in docs/results/ncffn.md; computed by training, minutes of one core")


PARITY_NOTE = parity_note()
LOGIC_NOTE = ("a two-operand pair: both memberships A and B vary over 100 held-out windows (the weaker one's std "
              ">= 0.1) and are not one proposition (|corr| <= 0.9), legibility_training.pair_logic; the paper "
              "gives no definition")
SYN_NOTE = ("the paper measures BLiMP licensing and quantifier phenomena at 125M scale; tinyscope's stand-in is "
            "the npi licensing language (task.language=npi: licensors at 0-6 fillers, out-of-scope distractors, "
            "nested negation that cancels, DE quantifiers) at the cpu preset, trained two epochs of 200 steps "
            "(evaluations at the end of each), seeds 0-4; 'npi_pair_acc' is the minimal-pair accuracy (the "
            "grammatical member's total log-probability higher) averaged over the four phenomena, ceiling 1")

CLAIMS = declare(
    # parameter neutrality
    Claim("ncffn/abstract/param-neutral/ffn-layer-768x3072", NEUTRAL, "an NC-FFN layer at d = 768, d_ff = 3072 "
          "has 4,722,432 parameters, exactly the GELU FFN's", PaperValue("4,722,432 (= GELU)", GELU_LAYER_PARAMS),
          within(GELU_LAYER_PARAMS, 0.5), compute=lambda: ffn_layer_parameters("nc"), experiment=EXP,
          row="NC-FFN layer", column="parameters",
          note="the count is the reimplementation's reading of the layer (two GELU-shaped matrices)"),
    Claim("ncffn/abstract/param-neutral/gelu-layer-768x3072", NEUTRAL, "the GELU FFN it replaces has 4,722,432 "
          "parameters", PaperValue("4,722,432", GELU_LAYER_PARAMS), within(GELU_LAYER_PARAMS, 0.5),
          compute=lambda: ffn_layer_parameters("gelu"), experiment=EXP, row="GELU layer", column="parameters"),
    Claim("ncffn/digest/param-neutral/logic-share", "Digest", "25% of an NC-FFN layer's units are fuzzy "
          "logic operators, 75% stay GELU", PaperValue("25% logic / 75% GELU", 0.25), within(0.25, 0.005),
          compute=logic_share, experiment=EXP, unit="%", row="NC-FFN layer", column="logic share"),
    Claim("ncffn/abstract/param-neutral/paper-model", NEUTRAL, "the 125M model with NC-FFN has exactly the "
          "GELU model's parameters", PaperValue("parameter-neutral", 1.0), within(1.0, 1e-9),
          compute=lambda: lm_parameter_ratio("paper", PAPER_NC, GPT2), experiment=GPT2, row="paper preset, NC-FFN",
          column="parameters / GELU's"),
    Claim("ncffn/abstract/param-neutral/paper-model-quantifiers", NEUTRAL, "with a small quantifier block in "
          "every layer the model keeps the GELU model's parameter count", PaperValue("parameter-neutral", 1.0),
          within(1.0, 1e-3), compute=lambda: lm_parameter_ratio("paper", PAPER_QUANT, GPT2), experiment=GPT2,
          row="paper preset, NC-FFN + quantifiers", column="parameters / GELU's",
          note="tinyscope narrows each quantified layer's FFN by the block's parameters (to within one unit)"),
    Claim("ncffn/abstract/param-neutral/cpu-model", NEUTRAL, "the same at the cpu preset",
          PaperValue("parameter-neutral", 1.0), within(1.0, 1e-9),
          compute=lambda: lm_parameter_ratio("cpu", CPU_NC), experiment=EXP, row="cpu preset, NC-FFN",
          column="parameters / GELU's"),
    Claim("ncffn/abstract/param-neutral/cpu-model-quantifiers", NEUTRAL, "the same with quantifiers in both "
          "layers", PaperValue("parameter-neutral", 1.0), within(1.0, 1e-3),
          compute=lambda: lm_parameter_ratio("cpu", CPU_QUANT), experiment=EXP,
          row="cpu preset, NC-FFN + quantifiers", column="parameters / GELU's"),
    Claim("ncffn/abstract/lm/n_parameters", LM, "the language model has 125M parameters",
          PaperValue("125M", 125e6), within(125e6, 2.5e6), compute=lambda: float(_lm_parameters("paper", (), GPT2)),
          experiment=GPT2, row="paper preset, GELU", column="parameters",
          note="GPT-2 small: 50,257 BPE entries, context 1,024, 12 layers of width 768, tied embeddings "
               "(124,439,808 parameters, the released GPT-2's count)"),
    # parity
    *(Claim(f"ncffn/abstract/parity/N={n}/depth=1/nc-over-best-other", PARITY, "on N-bit parity the bounded "
            "multiplicative (NC) units are the most parameter-efficient basis at shallow depth: the fewest "
            f"parameters at which a fully-NC stack fits {n}-bit parity in at least half of its seeds are no more "
            "than a GELU, SwiGLU or bilinear stack's",
            PaperValue("most parameter-efficient"), at_most(1.0),
            compute=lambda n=n: efficiency_ratio(parity_rows(n, PARITY_DEPTH)), experiment=EXP,
            row=f"N = {n}, depth 1", column="params solving in ≥ ½ of seeds: NC / best other",
            note="NC = the fully Boolean stack (nc_bool: every unit A·B or A·(1−B)); the 75% GELU nc layer is the "
                 "GELU FFN at small widths; " + parity_note(n))
      for n in PARITY_NS),
    Claim("ncffn/digest/parity/N=8/depth=1/nc-solves", "Digest", "a single NC-FFN layer solves 8-bit parity",
          PaperValue("solves", 1.0), at_least(1.0), compute=lambda: best_accuracy(parity_rows(), "nc"),
          experiment=EXP, unit="%", row="N = 8, depth 1", column="best NC-FFN accuracy", note=PARITY_NOTE),
    Claim("ncffn/digest/parity/N=8/depth=1/nc-vs-same-size-gelu", "Digest", "at its size an NC-FFN layer does "
          "1.3× the same-size GELU on 8-bit parity", PaperValue("1.3× the same-size GELU", 1.3),
          within(1.3, 0.15), compute=lambda: same_size_accuracy_ratio(parity_rows()), experiment=EXP,
          row="N = 8, depth 1", column="accuracy: NC-FFN / same-size GELU",
          note="the digest's figure is ambiguous; tinyscope reads it as NC-FFN's mean accuracy over seeds at "
               "the width where it first solves parity (≥ half of its seeds) over GELU's mean accuracy at that "
               "width; " + PARITY_NOTE),
    # sequence quantifiers and licensing, cpu scale
    Claim("ncffn/abstract/quantifiers/cpu/half_life_median", QUANT, "trained from the sticky init, the "
          "quantifiers' decay un-learns its stickiness: median half-life about 1.5 tokens",
          PaperValue("~1.5 tokens", HALF_LIFE), within(HALF_LIFE, 0.5), runs=(_rs("cpu", CPU_QUANT),),
          measure=metric("half_life_median"), row="cpu preset, NC-FFN + quantifiers", column="median half-life",
          unit="tokens", note="licensing language, 2 layers, 16 + 16 units per layer, init decay 0.99 "
                              "(half-life 69), the decay logits at train.lr without weight decay "
                              "(quant.decay_lr_mult, quant.decay_weight_decay); the paper's scale is the 125M model"),
    Claim("ncffn/abstract/quantifiers/cpu/n_latch", QUANT, "no quantifier unit stays a latch",
          PaperValue("zero latch units", 0.0), at_most(0.0), runs=(_rs("cpu", CPU_QUANT),),
          measure=metric("n_latch"), row="cpu preset, NC-FFN + quantifiers", column="latch units",
          note="a latch: half-life ≥ 64 tokens, a whole cpu-preset window (the paper's definition is not public)"),
    Claim("ncffn/abstract/quantifiers/cpu/licensor_classes_detected", QUANT, "quantifier units read as "
          "licensing detectors: each licensor (comparative, passive participle, negative polarity) has a unit "
          "that fires on it and carries it to the licensed word (than, by, nor)",
          PaperValue("3 of 3 licensors", 3.0), at_least(3.0), runs=(_rs("cpu", CPU_QUANT),),
          measure=metric("licensor_classes_detected"), row="cpu preset, NC-FFN + quantifiers",
          column="licensors with a detector",
          note="detector: fire and carry both > 0.1 (legibility.licensor_detectors) on the held-out windows"),
    Claim("ncffn/abstract/logic/cpu/layer0-concentration", QUANT, "two-operand logic concentrates in "
          "layer 0: its NC-FFN has a larger share of fuzzy pairs whose two operands both vary than layer 1's",
          PaperValue("concentrates in layer 0"), at_least(0.1), runs=(_rs("cpu", CPU_QUANT),),
          measure=within_run("two_operand_share_l0 − two_operand_share_l1", lambda a, b: a - b,
                             "two_operand_share_l0", "two_operand_share_l1"),
          unit="%", row="cpu preset, NC-FFN + quantifiers", column="two-operand pairs: layer 0 − layer 1",
          note=LOGIC_NOTE + "; tinyscope asks a lead of >= 10 points of share"),
    Claim("ncffn/abstract/logic/cpu/layer0-erodes", QUANT, "under training the two-operand logic of layer 0 "
          "erodes toward soft gating: its share of two-operand pairs falls from its peak by the end",
          PaperValue("erodes"), at_least(0.1), runs=(_rs("cpu", CPU_QUANT),), measure=logic_erosion(),
          unit="%", row="cpu preset, NC-FFN + quantifiers", column="layer-0 two-operand share lost from its peak",
          note=LOGIC_NOTE + "; read from the evaluations every 200 steps; tinyscope asks a loss of >= 10% of the "
                            "peak"),
    Claim("ncffn/abstract/licensing/cpu/nc-deficit-epoch2", SYN, "NC-FFN alone has a deficit on licensing "
          "(GELU better), wider at epoch two", PaperValue("a robust deficit"), at_least(0.01),
          runs=(_npi(), _npi(CPU_NC)), measure=gap_at(NPI_METRIC, 2 * epoch_steps("cpu", NPI)), unit="%",
          row="epoch 2", column="GELU − NC-FFN", note="tinyscope asks a gap of ≥ 1 point; " + SYN_NOTE),
    Claim("ncffn/abstract/licensing/cpu/recovered-epoch1", SYN, "the quantifiers recover NC-FFN's deficit at "
          "epoch one", PaperValue("recovered", 1.0), at_least(1.0), runs=(_npi(), _npi(CPU_NC), _npi(CPU_QUANT)),
          measure=recovery_at(NPI_METRIC, epoch_steps("cpu", NPI)), unit="%", row="epoch 1",
          column="share of the deficit recovered", note="0 where NC-FFN shows no deficit; " + SYN_NOTE),
    Claim("ncffn/abstract/licensing/cpu/halved-epoch2", SYN, "at epoch two the quantifiers halve the wider gap",
          PaperValue("halved", 0.5), within(0.5, 0.25), runs=(_npi(), _npi(CPU_NC), _npi(CPU_QUANT)),
          measure=recovery_at(NPI_METRIC, 2 * epoch_steps("cpu", NPI)), unit="%", row="epoch 2",
          column="share of the deficit recovered", note="0 where NC-FFN shows no deficit; " + SYN_NOTE),
    # the paper's scale
    Claim("ncffn/digest/lm/gelu-perplexity", "Digest", "the GELU baseline's OpenWebText perplexity is 18.32",
          PaperValue("18.32", PPL_GELU), within(PPL_GELU, 0.5), runs=(_paper(),),
          measure=combine("exp(val_loss)", math.exp, "val_loss"), row="GELU", column="perplexity",
          needs_gpu=True, note=_gpu_note("the BPE is learned on the corpus; --set data.tokenizer=gpt2/tokenizer.json "
                                          "takes GPT-2's own, whose perplexities the paper's are", ())),
    Claim("ncffn/digest/lm/nc-perplexity", "Digest", "NC-FFN's OpenWebText perplexity is 18.36",
          PaperValue("18.36", PPL_NC), within(PPL_NC, 0.5), runs=(_paper(PAPER_NC),),
          measure=combine("exp(val_loss)", math.exp, "val_loss"), row="NC-FFN", column="perplexity",
          needs_gpu=True, note=_gpu_note("the BPE is learned on the corpus", PAPER_NC)),
    Claim("ncffn/abstract/lm/nc-ties-gelu", LM, "at 125M NC-FFN ties the GELU baseline's perplexity",
          PaperValue("tie (18.36 vs 18.32)", math.log(PPL_NC) / math.log(PPL_GELU)),
          within(math.log(PPL_NC) / math.log(PPL_GELU), 0.005), runs=(_paper(PAPER_NC), _paper()),
          measure=ratio("val_loss", "val_loss"), row="NC-FFN / GELU", column="held-out loss ratio", needs_gpu=True,
          note=_gpu_note("the loss ratio does not depend on the perplexity's unit: ln 18.36 / ln 18.32 = 1.00075, "
                         "tolerance 0.5%", PAPER_NC, ())),
    Claim("ncffn/abstract/quantifiers/paper/half_life_median", QUANT, "at 125M the quantifiers' median "
          "half-life is about 1.5 tokens", PaperValue("~1.5 tokens", HALF_LIFE), within(HALF_LIFE, 0.5),
          runs=(_paper(PAPER_QUANT),), measure=metric("half_life_median"),
          row="paper preset, NC-FFN + quantifiers", column="median half-life", unit="tokens", needs_gpu=True,
          note=_gpu_note("quantifiers in all 12 layers, 32 + 32 units each; no weight decay on the decay logits "
                         "(at this schedule weight decay 0.1 alone would take the sticky init to 1.13 tokens, "
                         "legibility_training.weight_decay_half_life)", PAPER_QUANT)),
    Claim("ncffn/abstract/quantifiers/paper/n_latch", QUANT, "at 125M no quantifier unit is a latch",
          PaperValue("zero latch units", 0.0), at_most(0.0), runs=(_paper(PAPER_QUANT),),
          measure=metric("n_latch"), row="paper preset, NC-FFN + quantifiers", column="latch units",
          needs_gpu=True, note=_gpu_note("a latch: half-life ≥ 1,024 tokens, a whole window", PAPER_QUANT)),
    Claim("ncffn/abstract/blimp/nc-deficit", LM, "NC-FFN's one robust grammatical deficit lies in the licensing "
          "and quantifier phenomena", PaperValue("a robust deficit"), at_least(0.01),
          runs=(_paper(), _paper(PAPER_NC)), measure=difference("blimp_licensing_acc", "blimp_licensing_acc"),
          unit="%", row="BLiMP licensing + quantifiers", column="GELU − NC-FFN", needs_gpu=True,
          note=_gpu_note("blimp_licensing_acc: the share of BLiMP's npi_licensing and quantifiers pairs whose good "
                         "sentence is likelier", (), PAPER_NC)),
    Claim("ncffn/abstract/blimp/quantifiers-recover", LM, "the quantifier block recovers the deficit",
          PaperValue("recovered at epoch 1"), at_least(0.0),
          runs=(_paper(PAPER_QUANT), _paper()),
          measure=difference("blimp_licensing_acc", "blimp_licensing_acc"), unit="%",
          row="BLiMP licensing + quantifiers", column="NC-FFN + quantifiers − GELU", needs_gpu=True,
          note=_gpu_note("the paper's epochs are not the preset's steps; the selected checkpoint is measured",
                         PAPER_QUANT, ())),
    Claim("ncffn/abstract/lm/lambada-lead", LM, "with quantifiers the model modestly leads the GELU baseline on "
          "LAMBADA", PaperValue("modestly ahead"), at_least(0.001), runs=(_paper(PAPER_QUANT), _paper()),
          measure=difference("lambada_acc", "lambada_acc"), unit="%", row="LAMBADA",
          column="NC-FFN + quantifiers − GELU", needs_gpu=True,
          note=_gpu_note("a lead of ≥ 0.1 point in greedy last-word accuracy", PAPER_QUANT, ())),
    Claim("ncffn/abstract/lm/nc_bool-diverges", LM, "a fully Boolean FFN (no GELU units) diverges in training",
          PaperValue("diverges"), at_least(0.5), runs=(_paper(PAPER_BOOL),), measure=diverged(),
          aggregate="fraction", row="fully Boolean FFN", column="seeds diverged", needs_gpu=True,
          note=_gpu_note("diverged: a logged training loss non-finite or above 1.5× its best so far", PAPER_BOOL)),
    Claim("ncffn/digest/lm/nc_bool-diverges-by-16k", "Digest", "it diverges within about the first 16k steps",
          PaperValue("within ~16k steps", DIVERGE_STEPS), at_most(DIVERGE_STEPS),
          runs=(_paper(PAPER_BOOL),), measure=steps_to_divergence(), aggregate="median",
          row="fully Boolean FFN", column="step of divergence", needs_gpu=True, note=_gpu_note("", PAPER_BOOL)),
)
