"""The next training batch drawn on a background thread while the current step computes.

A batch is a function of its step alone (``draw(step)`` samples with ``step_rng(seed, step)``),
so drawing it early gives the same bytes. What drawing early could change is a stateful task's
state (a counter of batches drawn, a curriculum's stage): the trainer therefore asks for a
batch ahead only when nothing reads or changes that state before the batch is used (no
evaluation and no checkpoint at the end of the current step), and the pending draw is always
waited for (:meth:`Prefetcher.drain`) before anything else touches the task. One worker thread
at most; numpy and torch release the interpreter lock in their kernels, so the draw overlaps
the step's arithmetic.

Whether it pays is a property of the task and the machine, not a constant: a batch that is
cheap to draw in Python-heavy code takes turns with the training step for the interpreter lock
(and, on a run given one core, for the core), and made the TraceRelay cpu presets 10-14% slower.
``train.prefetch=auto`` therefore decides on the run's own first steps (:class:`PrefetchTrial`).
"""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Generic, TypeVar

from tinyscope.train import machine

T = TypeVar("T")
TRIAL_BLOCK = 8              # training steps per timed block of train.prefetch=auto
TRIAL_ROUNDS = 3             # blocks drawn each way, interleaved
PREFETCH_CLEAR_WIN = 1.10    # prefetched blocks must be this much faster to keep prefetch on (a wrong "on" cost 18%)


class Prefetcher(Generic[T]):
    """``get(step)`` returns ``draw(step)``: the batch drawn ahead by ``ahead(step)`` when there
    is one, else drawn now. ``enabled=False`` draws every batch when asked (the reference path)."""

    def __init__(self, draw: Callable[[int], T], enabled: bool = True):
        self.draw, self.enabled = draw, enabled
        self._pool: ThreadPoolExecutor | None = None
        self._pending: tuple[int, Future] | None = None

    def ahead(self, step: int) -> None:
        """Start drawing the batch of ``step`` in the background (a no-op when disabled)."""
        if not self.enabled:
            return
        self.drain()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tinyscope-prefetch")
        self._pending = (step, self._pool.submit(self.draw, step))

    def get(self, step: int) -> T:
        """The batch of ``step``: the one drawn ahead if it is that step's, else drawn now."""
        if self._pending is not None and self._pending[0] == step:
            _, future = self._pending
            self._pending = None
            return future.result()  # an error in the draw is raised here, in the training thread
        self.drain()
        return self.draw(step)

    def drain(self) -> None:
        """Wait for a pending draw and drop it (its error too)."""
        if self._pending is not None:
            _, future = self._pending
            self._pending = None
            future.exception()

    def close(self) -> None:
        self.drain()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


class PrefetchTrial:
    """``train.prefetch=auto`` decided on the run's first ``2 * rounds * block`` training steps:
    they alternate blocks of ``block`` steps drawn now (plain) and drawn ahead (prefetched),
    plain first; each block's mean step time is recorded, leaving out its first step (whose
    batch was drawn the other block's way) and any step that ends at an evaluation or a
    checkpoint (it draws nothing ahead). Prefetch stays on only when its fastest block beats the
    fastest plain block by ``margin`` (:func:`machine.fastest`: the minimum, because neighbours on
    the machine only ever add time). The batches are the same bytes either way, so the trial
    changes nothing but the time of its slower blocks."""

    def __init__(self, block: int = TRIAL_BLOCK, rounds: int = TRIAL_ROUNDS, margin: float = PREFETCH_CLEAR_WIN):
        if block < 2 or rounds < 1:
            raise ValueError(f"a prefetch trial needs block >= 2 and rounds >= 1, got {block}, {rounds}")
        self.block, self.rounds, self.margin = block, rounds, margin
        self.times: dict[bool, list[float]] = {False: [], True: []}
        self.seen = 0
        self._current: list[float] = []

    @property
    def prefetching(self) -> bool:
        """Whether the current step is in a prefetched block."""
        return bool((self.seen // self.block) % 2)

    @property
    def done(self) -> bool:
        return self.seen >= 2 * self.rounds * self.block

    def record(self, seconds: float, counted: bool = True) -> None:
        """The wall time of the current step (``counted=False``: a step not to time)."""
        if self.seen % self.block and counted:
            self._current.append(seconds)
        mode = self.prefetching
        self.seen += 1
        if self.seen % self.block == 0 and self._current:
            self.times[mode].append(sum(self._current) / len(self._current))
            self._current = []

    def choice(self) -> bool:
        """Prefetch on (True) or off, from the blocks timed so far (off when a side has none)."""
        if not self.times[False] or not self.times[True]:
            return False
        return bool(machine.fastest(self.times, [False, True], self.margin))
