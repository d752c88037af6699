"""What the Ray launcher is given — planned runs and, from a sweeper that records them, a :class:`Sink` for
their results — and what it gives back (a :class:`RunReport` per run, the batch's :class:`SweepStats`)."""

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol

from hydra.core.utils import filter_overrides
from hydra.errors import CompactHydraException
from omegaconf import DictConfig


class SweepAbortedError(CompactHydraException):
    """The sweep cannot start or go on (no cluster, a result that cannot be recorded); Hydra prints only
    the message."""


class RunFailedError(CompactHydraException):
    """Raised for a failed run after the sweep summary has been printed."""


@dataclasses.dataclass
class PlannedRun:
    """One run of a batch: its index, its overrides as the sweeper gave them and either its composed
    ``config`` (with the ``hydra`` node) or, for a run the composition cache describes, its resolved task
    config ``plain``, group ``choices`` and the ``recipe`` a worker composes it from. ``build`` composes
    it (again) on the driver: the launcher drops a config once the run is submitted (:meth:`release`)."""

    index: int
    overrides: list[str]
    config: DictConfig | None = None
    plain: dict[str, Any] | None = None
    choices: dict[str, str] = dataclasses.field(default_factory=dict)
    recipe: Any = None
    build: Callable[[], DictConfig] | None = dataclasses.field(default=None, repr=False, compare=False)

    def composed(self) -> DictConfig:
        """The run's composed config (composed now if it was not, or was released)."""
        if self.config is None:
            assert self.build is not None, f"run #{self.index} has neither a config nor a way to compose it"
            self.config = self.build()
        return self.config

    def release(self) -> None:
        """Drop the composed config when it can be composed again."""
        if self.build is not None:
            self.config = None

    @property
    def label(self) -> str:
        """The run's own overrides, e.g. ``policy=easy seed=3``."""
        return " ".join(filter_overrides(self.overrides)) or "(defaults)"


@dataclasses.dataclass
class RunReport:
    """What the driver learns when a run ends (``value``: the task function's return value)."""

    run: PlannedRun | None  # None on the worker
    status: str  # "FINISHED", "FAILED" or "SKIPPED" (``value``: why)
    value: Any = None
    error: str | None = None
    traceback: str | None = None
    node_id: str = ""
    node_ip: str = ""
    seconds: float = 0.0
    start_time: float = 0.0  # epoch seconds
    end_time: float = 0.0
    #: what the sink's recorder returned on the worker (the id of the record it wrote), why it failed
    recorded: Any = None
    record_error: str | None = None


@dataclasses.dataclass
class SweepStats:
    """Counts of a batch (``interrupted``: Ctrl-C; ``stopped``: why it stopped early)."""

    total: int
    done: int = 0
    failed: int = 0
    skipped: int = 0
    seconds: float = 0.0
    interrupted: bool = False
    stopped: str = ""
    failures: list[RunReport] = dataclasses.field(default_factory=list)

    @property
    def not_run(self) -> int:
        return self.total - self.done - self.failed - self.skipped


class Sink(Protocol):
    """Where a recording sweeper takes the launcher's runs, on the driver, in call order per run."""

    def start(self, run: PlannedRun) -> Any:
        """``None`` to start ``run`` now, else what its JobReturn returns instead (it is counted skipped:
        e.g. another sweep claimed it meanwhile)."""

    def recorder(self, run: PlannedRun) -> Any:
        """A picklable callable or ``None``. The worker calls its ``start()`` before the run (``None`` to run
        it, else what its JobReturn returns instead: the run is reported ``SKIPPED``, counted skipped), and
        calls it with the run's report once it ended (it writes the record there); what that returns
        reaches :meth:`on_result` as ``report.recorded``."""

    def on_result(self, report: RunReport) -> None:
        """``report.run`` ended or was skipped by its worker (in completion order); raising stops the sweep."""
