"""The next training batch drawn on a background thread while the current step computes.

A batch is a function of its step alone (``draw(step)`` samples with ``step_rng(seed, step)``),
so drawing it early gives the same bytes. What drawing early could change is a stateful task's
state (a counter of batches drawn, a curriculum's stage): the trainer therefore asks for a
batch ahead only when nothing reads or changes that state before the batch is used (no
evaluation and no checkpoint at the end of the current step), and the pending draw is always
waited for (:meth:`Prefetcher.drain`) before anything else touches the task. One worker thread
at most; numpy and torch release the interpreter lock in their kernels, so the draw overlaps
the step's arithmetic.
"""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Generic, TypeVar

T = TypeVar("T")


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
