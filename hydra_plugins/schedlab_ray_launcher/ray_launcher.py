"""``hydra/launcher=ray`` and ``hydra/launcher=serial``: the config schemas and thin Launchers (the work is in
:mod:`.batch`, Ray's part in :mod:`._core`).

No ``from __future__ import annotations`` here: OmegaConf reads these dataclass annotations.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Dict, Optional  # noqa: UP035 - OmegaConf needs typing generics

from hydra.core.config_store import ConfigStore
from hydra.core.utils import JobReturn
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
    run_timeout: Optional[float] = None  # wall-clock seconds a run may take (then FAILED); None: no limit  # noqa: UP045
    local: RayLocalConf = field(default_factory=RayLocalConf)
    init: Dict[str, Any] = field(default_factory=dict)  # extra ray.init() keywords  # noqa: UP006


@dataclass
class SerialLauncherConf:
    """Every run in this process, one after another (Hydra's basic launcher, planned and recorded)."""

    _target_: str = "hydra_plugins.schedlab_ray_launcher.ray_launcher.SerialLauncher"
    progress: bool = True
    run_timeout: Optional[float] = None  # wall-clock seconds a run may take (then FAILED); None: no limit  # noqa: UP045


ConfigStore.instance().store(group="hydra/launcher", name="ray", node=RayLauncherConf, provider="schedlab")
ConfigStore.instance().store(group="hydra/launcher", name="serial", node=SerialLauncherConf, provider="schedlab")


class RayLauncher(Launcher):
    """Plans each batch a sweeper launches (any sweeper: basic, Optuna, precision …), runs what is left as Ray
    tasks in one Ray session for the whole sweep, and returns a JobReturn per job (:class:`.batch.Sweep`)."""

    def __init__(self, **options: Any) -> None:
        self.options = options
        self.sweep: Any = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        from hydra_plugins.schedlab_ray_launcher.batch import Sweep

        self.sweep = Sweep(hydra_context, task_function, config, self.executor(), self.options.get("run_timeout"))

    def executor(self) -> Any:
        from hydra_plugins.schedlab_ray_launcher._core import RayExecutor

        return RayExecutor(self.options)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        return self.sweep.launch(job_overrides, initial_job_idx)


class SerialLauncher(RayLauncher):
    """``hydra/launcher=serial``: the same planning, claiming and recording, each run in this process."""

    def executor(self) -> Any:
        from hydra_plugins.schedlab_ray_launcher.batch import InProcess

        return InProcess(progress=bool(self.options.get("progress", True)))
