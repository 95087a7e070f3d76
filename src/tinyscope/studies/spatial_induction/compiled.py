"""Compiled spatial-induction circuits as runs: ``sih-compiled-{eca,v3,vn2d}-{det,stoch}``.

Nothing is trained: the model's weights are set by Construction I and the Layer-2 matching head
(:mod:`tinyscope.studies.spatial_induction.constructions.dedicated_heads`). ``tinyscope construct`` writes the run directory, after
which ``tinyscope eval`` and (for deterministic circuits) ``tinyscope analyze`` work as on a
trained run. The reported distribution is the Layer-2 output block B4 (App. H.2's readout).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import torch

from tinyscope.errors import ConfigError, check, check_choice
from tinyscope.models.utils import count_parameters
from tinyscope.runs.experiment import Experiment, View, ViewOptions
from tinyscope.runs.registry import register
from tinyscope.studies.spatial_induction.experiment import CITATION, SETTINGS, SihEvalConfig, task_config
from tinyscope.studies.spatial_induction.task import CellularConfig, CellularTask, fresh_eval_task
from tinyscope.train.trainer import TrainConfig


@dataclass
class ConstructionConfig:
    construction: str = "I"
    kappa: float = 0.01            # KL budget of Theorem 9 (stochastic rules)
    alpha: float = 1.0             # Dirichlet pseudocount (stochastic rules)
    Lambda: float | None = None    # Layer-1 logit scale; None = the recipe of App. H.7
    beta: float | None = None      # Layer-2 scale; None = the recipe of App. H.7
    readout_scale: float = 10.0

    def __post_init__(self):
        check_choice("construction.construction", self.construction, ("I", "II"))
        check(0 < self.kappa <= 1, f"construction.kappa={self.kappa} must lie in (0, 1]")
        check(self.alpha > 0, f"construction.alpha={self.alpha} must be > 0")
        check(self.Lambda is None or self.Lambda > 0, f"construction.Lambda={self.Lambda} must be > 0")
        check(self.beta is None or self.beta > 0, f"construction.beta={self.beta} must be > 0")


@dataclass
class CompiledRunConfig:
    seed: int = 0
    task: CellularConfig = field(default_factory=CellularConfig)
    construction: ConstructionConfig = field(default_factory=ConstructionConfig)
    train: TrainConfig = field(default_factory=lambda: TrainConfig(steps=1))
    eval: SihEvalConfig = field(default_factory=SihEvalConfig)


def kl_rows(q: np.ndarray, p: np.ndarray) -> np.ndarray:
    """KL(q || p) along the last axis, with 0 log 0 = 0."""
    safe_q = np.where(q > 0, q, 1.0)
    return np.where(q > 0, q * (np.log(safe_q) - np.log(np.clip(p, 1e-300, None))), 0.0).sum(-1)


def compile_circuit(cfg: CompiledRunConfig, task: CellularTask):
    check(task.cfg.token_ids == "tinyscope", "compiled circuits read tinyscope's token ids; keep task.token_ids=tinyscope")
    from tinyscope.studies.spatial_induction.constructions.dedicated_heads import construction_one
    from tinyscope.studies.spatial_induction.constructions.shared_head import construction_two

    c = cfg.construction
    build = construction_one if c.construction == "I" else construction_two
    return build(task.layout, stochastic=task.stochastic, kappa=c.kappa, alpha=c.alpha, Lambda=c.Lambda,
                            beta=c.beta, readout_scale=c.readout_scale)


#: pools of the compiled runs' held-out rules (large spaces): nothing is trained, so any held-out
#: rules serve; pools of App. I.1's shape but small enough to build for every grid of the checks
COMPILED_POOL_SIZES = (6000, 600, 600)


class CompiledSihExperiment(Experiment):
    citation = CITATION
    study = "spatial_induction"
    trainable = False

    def __init__(self, setting: str, regime: str):
        self.setting, self.regime = setting, regime
        self.name = f"sih-compiled-{setting}-{regime}"
        self.description = f"spatial induction heads compiled by Construction I or II ({setting}, {regime}); not trained"
        self.config_cls = CompiledRunConfig
        small = dict(pool_sizes=list(COMPILED_POOL_SIZES)) if setting != "eca" and regime == "det" else {}
        self.presets = {"paper": lambda: CompiledRunConfig(task=task_config(setting, regime, n_val=64, n_test=256, **small))}

    def build_task(self, cfg: CompiledRunConfig) -> CellularTask:
        return CellularTask(cfg.task)

    def build_model(self, cfg: CompiledRunConfig, task: CellularTask) -> torch.nn.Module:
        from tinyscope.studies.spatial_induction.constructions.dedicated_heads import StarPrepended

        circuit = compile_circuit(cfg, task)
        return StarPrepended(circuit.model, task.layout.V + 2) if circuit.star else circuit.model

    def views(self, run, options: ViewOptions = ViewOptions()) -> list[View]:
        """The positional widths over grid sizes (App. E) and the KL to the Bayes posterior against
        the Layer-2 scale beta with Theorem 9's budget (App. H), from results.json."""
        from tinyscope.studies.spatial_induction.constructions.figures import kl_vs_beta_figure, widths_table_figure

        res = run.results
        views = []
        if res.get("grid_independence"):
            views.append(View("grid_independence", "App. E", "Positional widths of the compiled circuit over grid "
                              "sizes.", lambda: widths_table_figure(res["grid_independence"])))
        if res.get("kl_vs_beta"):
            views.append(View("kl_vs_beta", "App. H", "Measured KL to the Bayes posterior against the Layer-2 scale "
                              "beta, beside Theorem 9's budget.", lambda: kl_vs_beta_figure(res["kl_vs_beta"])))
        return views

    def evaluator(self, cfg: CompiledRunConfig, task: CellularTask):
        return lambda model: self.final_evaluation(cfg, task, model)

    def write_compiled(self, cfg: CompiledRunConfig, out) -> dict:
        """The run directory of the compiled circuit (see :func:`write_compiled`)."""
        return write_compiled(self, cfg, out)

    def fresh_eval_config(self, cfg: CompiledRunConfig, seed: int, n: int | None = None) -> CompiledRunConfig:
        """The test set drawn afresh from ``seed`` (``n`` trajectories), as for a trained run."""
        return dataclasses.replace(cfg, task=fresh_eval_task(cfg.task, seed, n))

    def claims(self) -> list:
        """Theorem 9's exactness, Lemma 6's grid independence and Table 8's widths (claims.py)."""
        from tinyscope.studies.spatial_induction.claims import claims_of

        return claims_of(self.name)

    def final_evaluation(self, cfg: CompiledRunConfig, task: CellularTask, model: torch.nn.Module) -> dict:
        """TF metrics of the Layer-2 output B4 on the fixed coverage-filtered test set, with the
        largest KL to the Bayes posterior over resolvable scored cells (alpha of the config for
        stochastic rules, alpha = 0 for deterministic ones)."""
        from tinyscope.studies.spatial_induction.bayes import stream_predictive
        from tinyscope.studies.spatial_induction.metrics import teacher_forced_metrics

        circuit = compile_circuit(cfg, task)
        circuit.model.load_state_dict((model.inner if hasattr(model, "inner") else model).state_dict())
        test = task.eval_set("test")
        probs = torch.cat([circuit.predictive(test.tokens[i:i + 64]) for i in range(0, len(test), 64)]).double()
        V = task.layout.V
        logits = torch.full((*probs.shape[:2], V + 2), -1e9, dtype=torch.float64)
        logits[..., :V] = torch.log(probs.clamp_min(1e-300))
        out = teacher_forced_metrics(logits, task.layout, test.meta["traj"], test.targets, test.loss_mask,
                                     test.meta["tables"], task.stochastic)
        alpha = cfg.construction.alpha if task.stochastic else 0.0  # deterministic: the lookup of Cor. D.4
        q, resolvable = stream_predictive(task.layout, test.meta["traj"], alpha=alpha)
        scored = test.loss_mask & resolvable
        kl = kl_rows(q, probs.numpy())[scored]
        out.update(max_kl_bayes=float(kl.max()) if kl.size else 0.0, resolvable_frac=float(scored.sum() / test.loss_mask.sum()))
        return {f"test_{k}": float(v) for k, v in out.items()}


for _setting in SETTINGS:
    for _regime in ("det", "stoch"):
        register(CompiledSihExperiment(_setting, _regime))


def write_compiled_run(setting: str, regime: str, out, overrides: list[str] | None = None) -> dict:
    """``tinyscope construct``: compile the circuit of ``sih-compiled-{setting}-{regime}`` at its
    ``paper`` preset with ``overrides`` into run directory ``out``; returns results.json."""
    from tinyscope.runs import registry

    exp = registry.get(f"sih-compiled-{setting}-{regime}")
    return exp.write_compiled(exp.config("paper", None, overrides), out)


def write_compiled(exp: CompiledSihExperiment, cfg: CompiledRunConfig, out, preset: str = "paper") -> dict:
    """Compile, evaluate and save the circuit of ``cfg`` into run directory ``out``: config.json,
    checkpoints/best.safetensors, results.json (the final evaluation, the construction's sizes,
    the grid-independence rows and, for stochastic rules, KL against beta) and report.html.

    Everything is measured before anything is written, so a failure leaves no partial run
    directory behind; a directory that already holds a run is refused."""
    from pathlib import Path

    from tinyscope.report.run_report import write_run_report
    from tinyscope.runs.rundir import _config_record, build, load_run
    from tinyscope.train import checkpoint as ckpt

    out = Path(out)
    if (out / "config.json").exists():
        raise ConfigError(f"{out} already holds a run; choose another --out")
    task, model = build(exp, cfg)
    circuit = compile_circuit(cfg, task)
    results = {"experiment": exp.name, "preset": preset, "seed": cfg.seed, "steps": 0, "selected_step": 0,
               "construction": circuit.describe(), "metrics": exp.final_evaluation(cfg, task, model),
               "eval_fingerprint": exp.eval_fingerprint(cfg, task),
               "n_parameters": count_parameters(model)}
    results["grid_independence"] = grid_independence(exp.setting, cfg)
    if task.stochastic:
        from tinyscope.studies.spatial_induction.constructions.dedicated_heads import construction_one
        from tinyscope.studies.spatial_induction.constructions.figures import kl_vs_beta
        from tinyscope.studies.spatial_induction.constructions.shared_head import construction_two

        ev = task.eval_set("test").select(slice(0, 16))
        build_circuit = construction_one if cfg.construction.construction == "I" else construction_two
        results["kl_vs_beta"] = kl_vs_beta(task, ev, build_circuit)
    out.mkdir(parents=True, exist_ok=True)
    ckpt.atomic_write_json(out / "config.json", _config_record(exp, preset, cfg))
    ckpt.save_model(out / "checkpoints" / "best.safetensors", model, step=0)
    ckpt.atomic_write_json(out / "results.json", results)
    write_run_report(load_run(out))  # the widths table and the KL-vs-beta figure
    return results


# the grids of the grid-independence check; the smallest V = 3 grid is Table 4's Z_32 (16 cells
# give 32 context transitions, which almost never cover all 27 configurations)
GRIDS = {"eca": ([16], [64], [256]), "v3": ([32], [64], [256]), "vn2d": ([6, 6], [8, 8], [12, 12])}


def grid_independence(setting: str, cfg: CompiledRunConfig) -> list[dict]:
    """Construction I on growing grids (deterministic rules, T = 4, T0 = 3): widths and accuracy."""
    from tinyscope.studies.spatial_induction.bayes import stream_predictive

    rows = []
    for grid in GRIDS[setting]:
        small = dict(pool_sizes=[600, 60, 60]) if setting != "eca" else {}
        task = CellularTask(task_config(setting, "det", grid=grid, T=4, T0=3, holdout=[], n_val=1, n_test=2, **small))
        c = compile_circuit(dataclasses.replace(cfg, task=task.cfg), task)
        ev = task.eval_set("test")
        pred = c.predictive(ev.tokens).numpy().argmax(-1)
        _, resolvable = stream_predictive(task.layout, ev.meta["traj"])
        scored = ev.loss_mask & resolvable
        s = c.sizes()
        rows.append({"grid": "x".join(map(str, grid)), "volume": task.lattice.volume, "d_p": s["d_p"],
                     "d_model": s["d_model"], "Lambda": s["Lambda"], "acc": float((pred == ev.targets)[scored].mean())})
    return rows
