"""The driver-side hook protocol of the Ray launcher.

Workers only run the task function. Everything that must happen once, in one process — validating
the whole sweep before any Ray process starts, skipping runs already done, writing results to a
tracking store — is a :class:`SweepHook` that the launcher calls on the driver.
"""

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from hydra.errors import CompactHydraException
from omegaconf import DictConfig


class SweepAbortedError(CompactHydraException):
    """The sweep cannot start (an invalid run config); Hydra prints only the message."""


class RunFailedError(CompactHydraException):
    """Raised by Hydra for a failed run after the sweep summary has been printed."""


@dataclasses.dataclass
class PlannedRun:
    """One run of the sweep (``config``: composed on the driver, with the ``hydra`` node).

    A run the composition cache can describe as plain data has ``plain`` (its resolved task config)
    and ``choices`` (its config-group choices, ``{"policy": "easy", …}``) and is composed by the worker that runs it
    (``recipe``), on the driver only when :meth:`composed` is called (by ``build``): a run that is
    skipped is never composed. The launcher drops a config it composed once the run is submitted
    (:meth:`release`), so a sweep holds no more configs than runs not yet submitted.
    """

    index: int
    overrides: list[str]
    config: DictConfig | None
    plain: dict[str, Any] | None = None
    choices: dict[str, str] = dataclasses.field(default_factory=dict)
    #: how a worker composes it (the composition cache's ``Recipe``), when it is described as plain data
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
        return " ".join(self.overrides) or "(defaults)"


@dataclasses.dataclass
class RunReport:
    """What the driver learns when a run ends (``value`` is the task function's return value)."""

    run: PlannedRun
    status: str  # "FINISHED" or "FAILED"
    value: Any = None
    error: str | None = None
    traceback: str | None = None
    node_id: str = ""
    node_ip: str = ""
    seconds: float = 0.0
    start_time: float = 0.0  # epoch seconds
    end_time: float = 0.0
    #: what the hook's :meth:`~SweepHook.recorder` returned on the worker (e.g. the id of the record it
    #: wrote), ``None`` when it had none or wrote nothing; why it failed in ``record_error``
    recorded: Any = None
    record_error: str | None = None


@dataclasses.dataclass
class SweepStats:
    """End-of-sweep counts (``interrupted`` when the driver was stopped with Ctrl-C)."""

    total: int
    done: int = 0
    failed: int = 0
    skipped: int = 0
    seconds: float = 0.0
    interrupted: bool = False
    #: why the sweep stopped early (a result that could not be recorded), empty when it did not
    stopped: str = ""
    failures: list[RunReport] = dataclasses.field(default_factory=list)

    @property
    def not_run(self) -> int:
        return self.total - self.done - self.failed - self.skipped


@runtime_checkable
class SweepHook(Protocol):
    """Driver-side callbacks of a sweep, in call order."""

    def validate(self, config: DictConfig, runs: Sequence[PlannedRun]) -> None:
        """Check every run; raise :class:`SweepAbortedError` to stop before any Ray process starts."""
        ...

    def plan(self, runs: Sequence[PlannedRun]) -> Sequence[str | None]:
        """Per run, ``None`` to run it or a reason to skip it (called before Ray starts; when every run
        is skipped, Ray is never started)."""
        ...

    def start(self, run: PlannedRun) -> str | None:
        """Called as ``run`` is submitted: ``None`` to start it, or why it must not start after all (e.g.
        another sweep claimed it meanwhile; the launcher counts it skipped)."""
        ...

    def recorder(self, run: PlannedRun) -> Callable[[RunReport], Any] | None:
        """Optional work for the worker once ``run`` ended (called as it is submitted): a picklable
        callable given the run's report there (its ``run`` is ``None``); what it returns reaches
        :meth:`on_result` as ``report.recorded``, and if it raises the sweep stops as when
        :meth:`on_result` raises. ``None``: nothing to do on the worker."""
        ...

    def runtime_env(self) -> dict[str, Any]:
        """What workers on a Ray cluster started elsewhere need besides the launcher's own (Ray's
        ``runtime_env``, e.g. ``{"py_modules": [folder]}`` for a researcher's package the cluster's nodes
        may lack); called before Ray is joined, after :meth:`plan`."""
        ...

    def on_result(self, report: RunReport) -> None:
        """A run ended (called as runs finish, in completion order)."""
        ...

    def finish(self, stats: SweepStats) -> None:
        """The sweep ended (also after an interruption)."""
        ...


class NullHook:
    """Runs everything and records nothing."""

    def validate(self, config: DictConfig, runs: Sequence[PlannedRun]) -> None:
        return None

    def plan(self, runs: Sequence[PlannedRun]) -> Sequence[str | None]:
        return [None] * len(runs)

    def start(self, run: PlannedRun) -> None:
        return None

    def recorder(self, run: PlannedRun) -> None:
        return None

    def runtime_env(self) -> dict[str, Any]:
        return {}

    def on_result(self, report: RunReport) -> None:
        return None

    def finish(self, stats: SweepStats) -> None:
        return None
