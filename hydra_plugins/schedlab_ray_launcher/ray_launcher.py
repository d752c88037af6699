"""``hydra/launcher=ray``: the config schema and a thin Launcher (the work is in ``_core``).

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

    num_cpus: Optional[int] = None  # None: every core of this machine; more is refused  # noqa: UP045
    object_store_memory: Optional[int] = None  # bytes; None: Ray's default  # noqa: UP045
    include_dashboard: bool = False


@dataclass
class RayLauncherConf:
    """Where and how runs execute.

    ``address``: ``local`` starts a private Ray instance (never joins a running one); ``auto`` or
    ``HOST:PORT`` joins a cluster started with ``ray start --head``. Each run reserves
    ``num_cpus``; a run whose worker process dies is retried ``max_retries`` times (exceptions
    raised by the task are not retried: they make a FAILED run). ``hook`` is a ``_target_`` for a
    driver-side :class:`~hydra_plugins.schedlab_ray_launcher.hooks.SweepHook`. Values Ray would reject
    or never satisfy, and an address nothing answers on, are refused before anything starts
    (:mod:`._checks`).
    """

    _target_: str = "hydra_plugins.schedlab_ray_launcher.ray_launcher.RayLauncher"
    address: str = "local"
    num_cpus: float = 1.0
    max_retries: int = 3
    max_in_flight: Optional[int] = None  # None: twice the cluster's run slots  # noqa: UP045
    progress: bool = True
    local: RayLocalConf = field(default_factory=RayLocalConf)
    init: Dict[str, Any] = field(default_factory=dict)  # extra ray.init() keywords  # noqa: UP006
    hook: Any = None


ConfigStore.instance().store(group="hydra/launcher", name="ray", node=RayLauncherConf, provider="schedlab")


class RayLauncher(Launcher):
    """Composes every run on the driver, runs them as Ray tasks, gathers them as they finish."""

    def __init__(self, **options: Any) -> None:
        self.options = options
        self.config: Optional[DictConfig] = None  # noqa: UP045
        self.task_function: Optional[TaskFunction] = None  # noqa: UP045
        self.hydra_context: Optional[HydraContext] = None  # noqa: UP045

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        """Keep the context, its config loader wrapped in a composition cache.

        The context is the sweeper's too, so its check that every run composes
        (``validate_batch_is_legal``) uses the cache as well.
        """
        from hydra_plugins.schedlab_ray_launcher._compose import CachingConfigLoader

        if not isinstance(hydra_context.config_loader, CachingConfigLoader):
            hydra_context.config_loader = CachingConfigLoader(hydra_context.config_loader)
        self.config = config
        self.hydra_context = hydra_context
        self.task_function = task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from hydra_plugins.schedlab_ray_launcher import _core

        return _core.launch(self, job_overrides, initial_job_idx)
