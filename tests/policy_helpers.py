"""Policies written outside ``sim/``, as a user would, for the loader and ``python -m sim --policy MODULE:Class``
tests (the command-line tests put ``tests/`` on ``PYTHONPATH`` and name them ``policy_helpers:Class``)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from sim.core import Job, Start
from sim.policies.base import BasePolicy
from sim.policies.queue_order import queue_key


class FirstFit(BasePolicy):
    """Greedy: every waiting job that fits starts, in queue ``order``; at most ``max_starts`` per pass."""

    def __init__(self, order: str = "fcfs", max_starts: int | None = None) -> None:
        self.key = queue_key(order)
        self.max_starts = max_starts
        self.waiting: list[Job] = []

    def submit(self, job: Job, now: float) -> None:
        self.waiting.append(job)

    def schedule(self, now: float) -> Sequence[Start]:
        assert self.view is not None
        free = self.view.free[0][0]
        starts = []
        for job in sorted(self.waiting, key=self.key):
            if job.demand[0] <= free and (self.max_starts is None or len(starts) < self.max_starts):
                free -= job.demand[0]
                starts.append(Start(job))
        started = {s.job.id for s in starts}
        self.waiting = [job for job in self.waiting if job.id not in started]
        return starts


class FirstFitCopy(FirstFit):
    """The same behaviour under another class: a different policy to the report, never pooled with FirstFit."""


class AnyOptions(FirstFit):
    """:class:`FirstFit` that accepts (and ignores) any option, e.g. another policy file's."""

    def __init__(self, **options: object) -> None:
        super().__init__()


class Overcommit(FirstFit):
    """Starts every job the moment it arrives, fitting or not."""

    def schedule(self, now: float) -> Sequence[Start]:
        starts, self.waiting = [Start(job) for job in self.waiting], []
        return starts


class Idle(FirstFit):
    """Never starts anything."""

    def schedule(self, now: float) -> Sequence[Start]:
        return []


class Hang(Idle):
    """Wakes up every second and never starts anything: the engine ends the run for want of progress."""

    def next_wakeup(self, now: float) -> float | None:
        return now + 1.0


class Stuck(Idle):
    """Loops in its first pass, as a policy stuck in its own code does (only Ctrl-C or a run's time limit ends
    it); creates the file ``ready`` (if given) first, so a test knows the run has begun."""

    def __init__(self, ready: str | None = None) -> None:
        super().__init__()
        self.ready = Path(ready) if ready else None

    def schedule(self, now: float) -> Sequence[Start]:
        if self.ready is not None:
            self.ready.touch()
        while True:
            time.sleep(0.01)


class NoSchedule:
    """Has everything of the protocol but ``schedule``."""

    name = "no_schedule"
    preserves_order = False
    workload_kinds = frozenset({"hpc"})

    def attach(self, view: object) -> None: ...
    def submit(self, job: Job, now: float) -> None: ...
    def complete(self, job: Job, now: float) -> None: ...
    def next_wakeup(self, now: float) -> float | None: ...
    def workflow_done(self, workflow: int) -> None: ...
    def stats(self) -> None: ...


class Unfinished(BasePolicy):
    """A :class:`BasePolicy` that forgot ``schedule``."""

    def submit(self, job: Job, now: float) -> None: ...


def nameless() -> object:
    """A factory whose product lacks ``name`` and everything else."""
    return object()


def picky(speed: float) -> FirstFit:
    """A factory with a required option that refuses bad values with a plain ValueError."""
    if speed <= 0:
        raise ValueError(f"speed must be positive, got {speed}")
    return FirstFit()


def by_name(name: str) -> FirstFit:
    """A factory whose own bug (an unknown name) surfaces as a KeyError."""
    return {"first_fit": FirstFit}[name]()


NOT_CALLABLE = 3
