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

from tinyscope.errors import TinyscopeError, check, check_choice
from tinyscope.studies.spatial_induction.bayes import true_predictive
from tinyscope.studies.spatial_induction.coverage import cover, feasibility
from tinyscope.studies.spatial_induction.evolve import evolve
from tinyscope.studies.spatial_induction.lattice import NEIGHBOURHOODS, Lattice
from tinyscope.studies.spatial_induction.pools import PAPER_POOL_SIZES, StratifiedPools
from tinyscope.studies.spatial_induction.rules import NAMED_RULES, dirichlet_tables, near, table_from_number
from tinyscope.studies.spatial_induction.serialize import TOKEN_IDS, Layout
from tinyscope.studies.spatial_induction.splits import SPLITS, EnumeratedSplits
from tinyscope.studies.spatial_induction.symmetry import SymmetryGroup
from tinyscope.tasks.base import Batch, fingerprint

#: version of the sampler, pools and token streams; the presets record it (rundir.trained_as
#: then treats runs of an older version as stale). 2: coverage keeps the rule, App. I.1 pools.
DATA_VERSION = 2


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
    # stochastic rules held out of training (names in rules.NAMED_RULES whose table is stochastic,
    # "stavskaya" = Stavskaya p = 0.29): a training rule within ``holdout_radius`` of one of them or
    # of one of its symmetry images (sup norm over the table, rules.near) is redrawn
    holdout_stochastic: list[str] = field(default_factory=list)
    holdout_radius: float = 0.05
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
    # rule pools of the large spaces (train, val-out, test rules after orbit expansion); empty:
    # App. I.1's sizes for 1D V=3 k=3 and 2D von Neumann (see pools.PAPER_POOL_SIZES)
    pool_sizes: list[int] = field(default_factory=list)
    # the coverage filter redraws a trajectory's initial state at most this often; a deterministic
    # rule with no covering one among as many draws of its own stream is not coverage-feasible
    coverage_tries: int = 64
    # token ids of the separators: "tinyscope" (ROW_SEP = V, TIME_SEP = V + 1) or "authors" (the
    # public code's: 1D one separator V, 2D TIME_SEP = V, ROW_SEP = V + 1)
    token_ids: str = "tinyscope"
    # the data pipeline a run was trained with: 1 = before 2026-12-01 (a missing field reads as 1;
    # the coverage filter then redrew the rule, pools were unweighted); the presets set DATA_VERSION
    data_version: int = 1

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
        check(not self.pool_sizes or (len(self.pool_sizes) == 3 and min(self.pool_sizes) >= 1),
              f"task.pool_sizes={self.pool_sizes} must be empty or three positive sizes (train, val, test)")
        if self.holdout_stochastic:
            check(self.rules == "stochastic", "task.holdout_stochastic applies to stochastic rules only")
            for name in self.holdout_stochastic:
                check_choice("task.holdout_stochastic", name, tuple(n for n in NAMED_RULES if NAMED_RULES[n]().ndim == 2))
        check(0 < self.holdout_radius <= 1, f"task.holdout_radius={self.holdout_radius} must lie in (0, 1]")
        check(self.coverage_tries >= 1, f"task.coverage_tries={self.coverage_tries} must be >= 1")
        check_choice("task.token_ids", self.token_ids, TOKEN_IDS)
        check(self.data_version in (1, DATA_VERSION), f"task.data_version={self.data_version} must be 1 or {DATA_VERSION}")
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
        self.layout = Layout(self.lattice, cfg.T, cfg.token_ids)
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

    @property
    def example_tokens(self) -> int:
        """Tokens of one sampled example, known without sampling: the first draw of a
        deterministic-rule task builds its rule pools (minutes for V = 3 and 2-D, then cached),
        which a memory estimate or a dry run should not wait for."""
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
        sizes = tuple(self.cfg.pool_sizes) or PAPER_POOL_SIZES.get((lat.V, lat.k, lat.dim))
        check(sizes is not None, f"task.pool_sizes must be given for V={lat.V}, k={lat.k}, dimension {lat.dim} "
              f"(App. I.1 sizes exist for {', '.join(f'V={v} k={k} {d}D' for v, k, d in PAPER_POOL_SIZES)})")
        return StratifiedPools(lat, self.group, self.cfg.T0, sizes, seed=self.cfg.split_seed,
                               tries=self.cfg.coverage_tries, holdout=tuple(self.cfg.holdout))

    @cached_property
    def held_out_tables(self) -> np.ndarray:
        """The stochastic rules kept out of training and their symmetry images, (R, C, V)."""
        C, V = self.lattice.n_configs, self.lattice.V
        tables = [NAMED_RULES[name]() for name in self.cfg.holdout_stochastic]
        for name, table in zip(self.cfg.holdout_stochastic, tables):
            check(table.shape == (C, V), f"task.holdout_stochastic={name!r} has a table of shape {table.shape}, "
                  f"not ({C}, {V}) of this lattice")
        if not tables:
            return np.zeros((0, C, V))
        return self.group.orbit_stochastic(np.stack(tables)).reshape(-1, C, V)

    def pool(self, split: str) -> np.ndarray:
        """Rule numbers of ``split``'s pool (deterministic rules)."""
        check_choice("split", split, SPLITS)
        return np.asarray(self.splits.rules(split), dtype=np.uint64)

    @cached_property
    def _feasible_eca(self) -> dict[str, np.ndarray]:
        """The coverage-feasible subset of each ECA pool (App. I.1), computed once up front."""
        out = {}
        for split in SPLITS:
            numbers = self.pool(split)
            tables = np.stack([table_from_number(int(r), 2, 3) for r in numbers])
            out[split] = numbers[feasibility(self.lattice, tables, self.cfg.T0, self.cfg.coverage_tries)[0]]
        return out

    def eval_pool(self, split: str) -> np.ndarray | None:
        """Rule numbers the coverage-filtered sets of ``split`` draw from, when known up front: the
        feasible subset of an ECA pool, the held-out pools of the large spaces (built feasible);
        None for a large training pool (checked rule by rule: the same uniform law)."""
        if isinstance(self.splits, EnumeratedSplits):
            return self._feasible_eca[split]
        return None if split == "train" else self.pool(split)

    # ------------------------------------------------------------------ rules
    def _tables(self, numbers: np.ndarray) -> np.ndarray:
        from tinyscope.studies.spatial_induction.pools import tables_of

        return tables_of(numbers, self.lattice.V, self.lattice.n_configs)

    def draw_rules(self, rng: np.random.Generator, n: int, split: str, alpha: float | None = None) -> np.ndarray:
        """``n`` rule tables of ``split``, uniform over its pool: (n, C) ints, or (n, C, V)
        Dirichlet(``alpha``, default ``task.alpha``) rows."""
        check_choice("split", split, SPLITS)
        lat = self.lattice
        if self.stochastic:
            alpha = self.cfg.alpha if alpha is None else alpha
            tables = dirichlet_tables(rng, n, lat.V, lat.k, alpha)  # (n, C, V)
            if split == "train":
                for _ in range(1000):
                    bad = near(tables, self.held_out_tables, self.cfg.holdout_radius)
                    if not bad.any():
                        return tables
                    tables[bad] = dirichlet_tables(rng, int(bad.sum()), lat.V, lat.k, alpha)
                raise TinyscopeError(f"training rules stayed within task.holdout_radius={self.cfg.holdout_radius} "
                                     f"of the held-out rules after 1000 redraws; lower the radius")
            return tables
        pool = self.pool(split)
        return self._tables(pool[rng.integers(0, len(pool), size=n)])

    def draw_feasible_rules(self, rng: np.random.Generator, n: int, split: str,
                            max_rounds: int = 200) -> tuple[np.ndarray, np.ndarray]:
        """``n`` tables uniform over the coverage-feasible subset of ``split``'s pool, with each
        one's witness initial state (n, *shape)."""
        pool, cfg = self.eval_pool(split), self.cfg
        if pool is not None:
            if not len(pool):
                raise TinyscopeError(f"no rule of the {split} pool is coverage-feasible on grid {cfg.grid} "
                                     f"with T0={cfg.T0}; lengthen the context or enlarge the grid")
            tables = self._tables(pool[rng.integers(0, len(pool), size=n)])
            return tables, feasibility(self.lattice, tables, cfg.T0, cfg.coverage_tries)[1]
        kept, witnesses, have = [], [], 0
        for _ in range(max_rounds):
            tables = self.draw_rules(rng, max(n - have, 16), split)
            ok, witness = feasibility(self.lattice, tables, cfg.T0, cfg.coverage_tries)
            kept.append(tables[ok])
            witnesses.append(witness[ok])
            have += int(ok.sum())
            if have >= n:
                return np.concatenate(kept)[:n], np.concatenate(witnesses)[:n]
        raise TinyscopeError(f"only {have} of {n} rules of the {split} pool were coverage-feasible after "
                             f"{max_rounds} rounds; lengthen the context (task.T0) or enlarge the grid")

    def trajectories(self, rng: np.random.Generator, n: int, split: str, covered: bool,
                     alpha: float | None = None, max_rounds: int = 200) -> tuple[np.ndarray, np.ndarray]:
        """(tables, trajectories (n, T, *shape)); ``covered`` applies the coverage filter: each
        trajectory's rule is drawn once (uniform over the feasible subset of the pool) and only
        its initial state is redrawn (App. I.1). A fresh Dirichlet rule with no covering draw in
        ``task.coverage_tries`` is replaced by a fresh one."""
        cfg = self.cfg
        if not covered:
            tables = self.draw_rules(rng, n, split, alpha)
            return tables, evolve(self.lattice, tables, cfg.T, rng)
        if not self.stochastic:
            tables, witness = self.draw_feasible_rules(rng, n, split)
            traj, _ = cover(self.lattice, tables, cfg.T, cfg.T0, rng, cfg.coverage_tries, x0_fallback=witness)
            return tables, traj
        kept, trajs, have = [], [], 0
        for _ in range(max_rounds):
            tables = self.draw_rules(rng, n - have, split, alpha)
            traj, ok = cover(self.lattice, tables, cfg.T, cfg.T0, rng, cfg.coverage_tries)
            kept.append(tables[ok])
            trajs.append(traj[ok])
            have += int(ok.sum())
            if have >= n:
                return np.concatenate(kept)[:n], np.concatenate(trajs)[:n]
        raise TinyscopeError(f"coverage filter accepted only {have} of {n} trajectories after {max_rounds} rounds; "
                             "lengthen the context (task.T0) or enlarge the grid")

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
