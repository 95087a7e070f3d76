"""The spatial in-context learning task: one rule per trajectory, drawn from a split's pool
(deterministic) or from the Dirichlet prior (stochastic), serialized as a token stream.

Training batches: unfiltered trajectories of training rules, loss at every position (App. I.2).
Evaluation sets (val = val-out, test): coverage-filtered trajectories of held-out rules, loss
mask on cell targets at t >= T0 (App. I.3); fixed by ``data_seed`` and fingerprinted.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from tinyscope.errors import check, check_choice
from tinyscope.studies.spatial_induction.bayes import true_predictive
from tinyscope.studies.spatial_induction.coverage import is_covered, rejection_sample
from tinyscope.studies.spatial_induction.evolve import evolve
from tinyscope.studies.spatial_induction.lattice import NEIGHBOURHOODS, Lattice
from tinyscope.studies.spatial_induction.rules import dirichlet_tables, table_from_number
from tinyscope.studies.spatial_induction.serialize import Layout
from tinyscope.studies.spatial_induction.splits import SPLITS, EnumeratedSplits, HashedSplits
from tinyscope.studies.spatial_induction.symmetry import SymmetryGroup
from tinyscope.tasks.base import Batch, fingerprint


@dataclass
class CellularConfig:
    """Table 10 settings; ``rules`` = deterministic | stochastic."""

    neighbourhood: str = "elementary"
    grid: list[int] = field(default_factory=lambda: [16])
    V: int = 2
    T: int = 10
    T0: int = 4
    rules: str = "deterministic"
    alpha: float = 1.0                   # Dirichlet concentration of stochastic rows
    symmetry_spatial: str = "reflection"  # the split's symmetry group (recorded with the run)
    symmetry_states: str = "complement"
    split_seed: int = 0
    holdout: list[int] = field(default_factory=lambda: [110])  # rule numbers forced into test
    n_val: int = 512                     # val-out trajectories (coverage-filtered)
    n_test: int = 1024                   # test trajectories (coverage-filtered)
    data_seed: int = 1234
    # evaluation sets drawn afresh from this seed (`tinyscope eval RUN --seed S`) instead of
    # ``data_seed``; the same splits, rule pools, coverage filter and sizes. None: ``data_seed``.
    eval_seed: int | None = None
    # optional training curriculum over the horizon: the first curriculum_steps[i] training batches
    # (cumulative) use curriculum_T[i] steps, later ones the full T (positions stay absolute)
    curriculum_T: list[int] = field(default_factory=list)
    curriculum_steps: list[int] = field(default_factory=list)
    # optional Dirichlet concentration per curriculum phase (stochastic rules only): small alpha
    # draws near-deterministic training rules, whose in-context matches carry a sharper signal;
    # evaluation always uses ``alpha``. Empty = ``alpha`` throughout.
    curriculum_alpha: list[float] = field(default_factory=list)
    # training targets of stochastic rules: "sampled" = the next state drawn in the trajectory (the
    # paper); "expected" = its conditional law q_true(. | parents) as a soft target. Both give the
    # same expected gradient and the same minimiser (the Bayes predictor); "expected" has less noise.
    train_targets: str = "sampled"

    def __post_init__(self):
        check_choice("task.neighbourhood", self.neighbourhood, tuple(NEIGHBOURHOODS))
        check_choice("task.rules", self.rules, ("deterministic", "stochastic"))
        check(self.V >= 2, f"task.V={self.V} must be >= 2")
        check(2 <= self.T0 < self.T, f"task.T0={self.T0} must satisfy 2 <= T0 < T={self.T}")
        check(self.alpha > 0, f"task.alpha={self.alpha} must be > 0")
        check(self.n_val >= 1 and self.n_test >= 1, "task.n_val and task.n_test must be >= 1")
        check(self.eval_seed is None or self.eval_seed >= 0, f"task.eval_seed={self.eval_seed} must be >= 0 or None")
        check(len(self.curriculum_T) == len(self.curriculum_steps),
              f"task.curriculum_T={self.curriculum_T} and task.curriculum_steps={self.curriculum_steps} need one entry each")
        check(all(2 <= t <= self.T for t in self.curriculum_T), f"task.curriculum_T={self.curriculum_T} must lie in [2, T]")
        check_choice("task.train_targets", self.train_targets, ("sampled", "expected"))
        check(self.train_targets == "sampled" or self.rules == "stochastic",
              "task.train_targets=expected applies to stochastic rules only")
        if self.curriculum_alpha:
            check(self.rules == "stochastic", "task.curriculum_alpha applies to stochastic rules only")
            check(len(self.curriculum_alpha) == len(self.curriculum_steps),
                  f"task.curriculum_alpha={self.curriculum_alpha} needs one entry per task.curriculum_steps")
            check(all(a > 0 for a in self.curriculum_alpha), f"task.curriculum_alpha={self.curriculum_alpha} must be > 0")
        dim = len(NEIGHBOURHOODS[self.neighbourhood][0])
        check(len(self.grid) == dim, f"task.grid={self.grid} needs {dim} sides for the {self.neighbourhood} neighbourhood")


def fresh_eval_task(cfg: CellularConfig, seed: int, n: int | None = None) -> CellularConfig:
    """``cfg`` with every evaluation set (val-out, test, val-in) drawn afresh from ``seed``: the
    same rule pools, held-out rules, coverage filter, grid and horizon; ``n`` trajectories per
    set (None: the run's own counts). The training stream and the model are unaffected."""
    n_val, n_test = (cfg.n_val, cfg.n_test) if n is None else (int(n), int(n))
    return dataclasses.replace(cfg, eval_seed=int(seed), n_val=n_val, n_test=n_test)


class CellularTask:
    """Sampler, layout, rule pools and fixed evaluation sets of one CA setting."""

    def __init__(self, cfg: CellularConfig):
        self.cfg = cfg
        self.lattice = Lattice(tuple(cfg.grid), NEIGHBOURHOODS[cfg.neighbourhood], cfg.V)
        self.layout = Layout(self.lattice, cfg.T)
        self.vocab_size = self.layout.vocab_size
        self.group = SymmetryGroup(Lattice((3,) * self.lattice.dim if self.lattice.dim > 1 else (3,),
                                           self.lattice.offsets, cfg.V),
                                   cfg.symmetry_spatial, cfg.symmetry_states)
        self._eval: dict[str, Batch] = {}
        self.batches_drawn = 0  # training batches so far: drives the horizon curriculum

    def state_dict(self) -> dict:
        return {"batches_drawn": self.batches_drawn}

    def load_state_dict(self, state: dict) -> None:
        self.batches_drawn = int(state.get("batches_drawn", 0))

    def _phase(self, batch_index: int) -> int | None:
        """Curriculum phase of training batch ``batch_index`` (None once the curriculum is over)."""
        for i, until in enumerate(np.cumsum(self.cfg.curriculum_steps)):
            if batch_index < until:
                return i
        return None

    def train_horizon(self, batch_index: int) -> int:
        """T of training batch ``batch_index`` under the curriculum (the full T after it)."""
        i = self._phase(batch_index)
        return self.cfg.T if i is None else int(self.cfg.curriculum_T[i])

    def train_alpha(self, batch_index: int) -> float:
        """Dirichlet alpha of the rules of training batch ``batch_index`` (``alpha`` after the curriculum)."""
        i = self._phase(batch_index)
        return self.cfg.alpha if i is None or not self.cfg.curriculum_alpha else float(self.cfg.curriculum_alpha[i])

    @property
    def stochastic(self) -> bool:
        return self.cfg.rules == "stochastic"

    @property
    def n_ctx(self) -> int:
        return self.layout.input_length

    @cached_property
    def splits(self):
        """Rule pools; None for stochastic rules (every trajectory has a fresh Dirichlet rule)."""
        if self.stochastic:
            return None
        lat = self.lattice
        if lat.V == 2 and lat.k == 3 and lat.dim == 1:
            check(self.group.name == "reflectionxcomplement",
                  "the ECA splits use the 88 classes of reflection x complement; keep task.symmetry_*")
            return EnumeratedSplits(seed=self.cfg.split_seed, holdout=tuple(self.cfg.holdout))
        return HashedSplits(self.group, seed=self.cfg.split_seed, holdout=tuple(self.cfg.holdout))

    # ------------------------------------------------------------------ rules
    def draw_rules(self, rng: np.random.Generator, n: int, split: str, alpha: float | None = None) -> np.ndarray:
        """``n`` rule tables of ``split``: (n, C) ints, or (n, C, V) Dirichlet(``alpha``, default
        ``task.alpha``) rows."""
        check_choice("split", split, SPLITS)
        lat = self.lattice
        if self.stochastic:
            return dirichlet_tables(rng, n, lat.V, lat.k, self.cfg.alpha if alpha is None else alpha)
        if isinstance(self.splits, EnumeratedSplits):
            pool = self.splits.rules(split)
            numbers = pool[rng.integers(0, len(pool), size=n)]
            return np.stack([table_from_number(int(r), lat.V, lat.k) for r in numbers]) if n else \
                np.zeros((0, lat.n_configs), np.int64)
        return self.splits.sample(rng, n, split)

    def trajectories(self, rng: np.random.Generator, n: int, split: str, covered: bool,
                     alpha: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(tables, trajectories (n, T, *shape)); ``covered`` applies the coverage filter."""
        def draw(g, m):
            tables = self.draw_rules(g, m, split, alpha)
            return tables, evolve(self.lattice, tables, self.cfg.T, g)

        if not covered:
            return draw(rng, n)
        return rejection_sample(draw, lambda x: is_covered(self.lattice, x, self.cfg.T0), rng, n)

    # ------------------------------------------------------------------ batches
    def batch(self, tables: np.ndarray, traj: np.ndarray, scored_only: bool) -> Batch:
        """Model batch of trajectories: input stream[:-1], targets stream[1:]; loss mask on every
        position, or (``scored_only``) on cell targets at t >= T0."""
        stream = self.layout.serialize(traj)  # (B, N - 1)
        B = len(stream)
        if scored_only:
            mask = np.broadcast_to(self.layout.eval_mask(self.cfg.T0), (B, self.layout.input_length)).copy()
        else:
            mask = np.ones((B, self.layout.input_length), dtype=bool)
        return Batch(stream[:, :-1], stream[:, 1:], mask, {"traj": traj, "tables": tables})

    def sample(self, rng: np.random.Generator, batch_size: int) -> Batch:
        """A training batch: unfiltered trajectories of training rules, loss everywhere (a shorter
        prefix of the stream while a horizon curriculum is on)."""
        T, alpha = self.train_horizon(self.batches_drawn), self.train_alpha(self.batches_drawn)
        self.batches_drawn += 1
        tables, traj = self.trajectories(rng, batch_size, "train", covered=False, alpha=alpha)
        batch = self.batch(tables, traj, scored_only=False)
        if self.cfg.train_targets == "expected":
            batch.meta["soft_targets"] = self.expected_targets(batch.targets, traj, tables)
        if T < self.cfg.T:
            keep = T * self.layout.step_tokens - 2  # input positions of a T-step stream
            meta = {"traj": traj[:, :T], "tables": tables}
            if "soft_targets" in batch.meta:
                meta["soft_targets"] = batch.meta["soft_targets"][:, :keep]
            batch = Batch(batch.tokens[:, :keep], batch.targets[:, :keep], batch.loss_mask[:, :keep], meta)
        return batch

    def expected_targets(self, targets: np.ndarray, traj: np.ndarray, tables: np.ndarray) -> np.ndarray:
        """Soft training targets (B, N - 2, vocab): at each cell target the generating rule's law
        q_true(. | parents) (uniform for the initial row), at each separator its one-hot."""
        soft = np.eye(self.vocab_size, dtype=np.float32)[targets]  # (B, L, vocab)
        q_true = true_predictive(self.lattice, traj, tables).astype(np.float32)  # (B, T, *shape, V)
        is_cell = self.layout.to_stream(np.ones(traj.shape, dtype=bool), fill=False)  # (B, L)
        V = self.lattice.V
        soft[is_cell] = 0.0
        soft[..., :V][is_cell] = self.layout.to_stream(q_true, fill=0.0)[is_cell]
        return soft

    EVAL_SPLITS = ("val", "test", "val_in", "val_in_nofilter")

    def eval_set(self, split: str = "test") -> Batch:
        """A fixed evaluation set (Table 9): ``val`` (val-out) and ``test`` draw held-out rules,
        ``val_in`` / ``val_in_nofilter`` draw training rules with new initial states (diagnostic);
        all but ``val_in_nofilter`` are coverage-filtered. Loss mask: cells at t >= T0."""
        check(split in self.EVAL_SPLITS, f"evaluation split {split!r} must be one of {', '.join(self.EVAL_SPLITS)}")
        if split not in self._eval:
            n = self.cfg.n_test if split == "test" else self.cfg.n_val
            rng = np.random.default_rng(self.eval_entropy(split))
            pool = split if split in SPLITS else "train"
            tables, traj = self.trajectories(rng, n, pool, covered=split != "val_in_nofilter")
            self._eval[split] = self.batch(tables, traj, scored_only=True)
        return self._eval[split]

    FRESH_TAG = 0x5EED  # separates fresh evaluation streams from the run's own, whatever the seeds

    def eval_entropy(self, split: str) -> list[int]:
        """The seed words of evaluation split ``split``: ``[data_seed, i]`` for the run's own sets
        (i = 1 + the split's index in EVAL_SPLITS), ``[eval_seed, i, FRESH_TAG]`` for fresh ones."""
        i = self.EVAL_SPLITS.index(split) + 1
        if self.cfg.eval_seed is None:
            return [self.cfg.data_seed, i]
        return [self.cfg.eval_seed, i, self.FRESH_TAG]

    def eval_fingerprint(self) -> str:
        ev = self.eval_set("test")
        return fingerprint(ev.tokens, ev.targets, ev.loss_mask)
