"""``hydra/launcher=ray``: the config schema and a thin Launcher (the work is in ``_core``).

No ``from __future__ import annotations`` here: OmegaConf reads these dataclass annotations.
"""

import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional  # noqa: UP035 - OmegaConf needs typing generics

from hydra.core.config_store import ConfigStore
from hydra.core.utils import JobReturn, configure_log, setup_globals
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


@dataclass
class RayLocalConf:
    """Options for the Ray instance the launcher starts itself (``address: local`` only)."""

    num_cpus: Optional[int] = None  # None: every CPU this process may use (affinity, cgroup quota); more is refused  # noqa: UP045
    object_store_memory: Optional[int] = None  # bytes; None: Ray's default  # noqa: UP045
    include_dashboard: bool = False


@dataclass
class RayLauncherConf:
    """Where and how runs execute.

    ``address``: ``local`` starts a private Ray instance (never joins a running one); ``auto`` or
    ``HOST:PORT`` joins a cluster started with ``ray start --head``. Each run reserves ``num_cpus``; a run
    whose worker process dies is retried ``max_retries`` times (exceptions raised by the task are not
    retried: they make a FAILED run). Values Ray would reject or never satisfy, and an address nothing
    answers on, are refused before anything starts (:mod:`._checks`).
    """

    _target_: str = "hydra_plugins.schedlab_ray_launcher.ray_launcher.RayLauncher"
    address: str = "local"
    num_cpus: float = 1.0
    max_retries: int = 3
    max_in_flight: Optional[int] = None  # None: twice the cluster's run slots  # noqa: UP045
    progress: bool = True
    local: RayLocalConf = field(default_factory=RayLocalConf)
    init: Dict[str, Any] = field(default_factory=dict)  # extra ray.init() keywords  # noqa: UP006


ConfigStore.instance().store(group="hydra/launcher", name="ray", node=RayLauncherConf, provider="schedlab")


class RayLauncher(Launcher):
    """Runs what it is given as Ray tasks and gathers them as they finish.

    Hydra's :meth:`launch` composes and runs every job; schedlab's sweepers plan first and hand over only
    the runs left to do (:meth:`run`), with a sink that claims and records them, in one Ray session for
    the whole sweep (:meth:`close` ends it).
    """

    def __init__(self, **options: Any) -> None:
        self.options = options
        self.config: Optional[DictConfig] = None  # noqa: UP045
        self.task_function: Optional[TaskFunction] = None  # noqa: UP045
        self.hydra_context: Optional[HydraContext] = None  # noqa: UP045
        self.started = False

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        """Hydra's launcher API: compose every job (Hydra's compose, on the driver), run them all."""
        from hydra_plugins.schedlab_ray_launcher import _core
        from hydra_plugins.schedlab_ray_launcher._progress import print_summary
        from hydra_plugins.schedlab_ray_launcher.batch import PlannedRun, SweepStats
        from sweeps._hydra import finish

        setup_globals()
        assert self.config is not None and self.hydra_context is not None
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        sweep_dir = str(Path(str(self.config.hydra.sweep.dir)).absolute())
        Path(sweep_dir).mkdir(parents=True, exist_ok=True)
        loader, config = self.hydra_context.config_loader, self.config
        def build(overrides: list[str], idx: int) -> DictConfig:
            return finish(loader.load_sweep_config(config, overrides), idx, sweep_dir)

        runs = [PlannedRun(initial_job_idx + i, list(ov), build=functools.partial(build, list(ov), initial_job_idx + i))
                for i, ov in enumerate(job_overrides)]
        for run in runs:
            run.composed()  # every run composes before any starts
        stats, returns = SweepStats(total=len(runs)), {}
        try:
            self.run(runs, None, stats, returns, {})
        finally:
            self.close()
            print_summary(stats)
        return _core.finish_returns(stats, returns, runs)

    def run(self, runs: Sequence[Any], sink: Any, stats: Any, returns: dict[int, JobReturn],
            timings: dict[str, float], base: Any = None, runtime_env: Optional[Dict[str, Any]] = None  # noqa: UP006, UP045
            ) -> None:
        """Run ``runs`` (:class:`~.batch.PlannedRun`), joining or starting Ray first if this process has
        none; each run's JobReturn goes into ``returns`` by index, the counts into ``stats``; ``sink`` (a
        :class:`~.batch.Sink` or None) claims and records them; ``base`` gives a recipe's composition."""
        from hydra_plugins.schedlab_ray_launcher import _core

        assert self.config is not None and self.hydra_context is not None and self.task_function is not None
        tic = time.perf_counter()
        if not self.started:
            self.started = _core.connect(self.options, _core.preflight(self.options), runtime_env or {})
        timings["ray_start"] = time.perf_counter() - tic
        tic = time.perf_counter()
        try:
            _core.run(self.options, self.task_function, self.hydra_context, self.config,
                      str(Path(str(self.config.hydra.sweep.dir)).absolute()), list(runs), sink, base, stats, returns,
                      timings)
        finally:
            stats.seconds += time.perf_counter() - tic

    def preflight(self) -> None:
        """Refuse bad options, or an address nothing answers on, before anything is planned or started."""
        from hydra_plugins.schedlab_ray_launcher import _core

        _core.preflight(self.options)

    def close(self) -> None:
        """End the Ray session this launcher started or joined (none: nothing to do)."""
        from hydra_plugins.schedlab_ray_launcher import _core

        if self.started:
            self.started = False
            _core.shutdown()
