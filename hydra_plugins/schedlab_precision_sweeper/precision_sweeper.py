"""``hydra/sweeper=precision``: the config schema and a thin Sweeper (the work is in ``_core``).

No ``from __future__ import annotations`` here: OmegaConf reads these dataclass annotations.
"""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional  # noqa: UP035 - OmegaConf needs typing generics

from hydra.core.config_store import ConfigStore
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


@dataclass
class PrecisionSweeperConf:
    """Replications per cell until the CI half-width meets its target (Law & Kelton).

    Cells are the product of the sweep axes in ``params`` and on the command line; the seed is the
    replication index (0, 1, 2 … per cell, common random numbers), so it must not be an axis. A
    cell runs ``initial`` seeds, then ``batch`` more per round while a metric of ``metrics`` has a
    half-width above ``max(relative_halfwidth · |mean|, absolute_halfwidth)`` at ``confidence``;
    it stops when met, at ``max_replications`` seeds (capped) or after ``max_failures`` failed
    runs. ``extrapolate`` adds at once the seeds the current variance says are missing (at least
    ``batch``; fewer rounds, each of which waits for its slowest run). On the Ray launcher one Ray
    instance serves every round. Both half-widths take a number for every metric or a
    ``{metric: number}`` map. ``baseline`` (e.g. ``policy=easy``) judges every other level of that
    axis on its per-seed difference to the baseline (paired mode).
    """

    _target_: str = "hydra_plugins.schedlab_precision_sweeper.precision_sweeper.PrecisionSweeper"
    metrics: List[str] = field(default_factory=lambda: ["wait/mean"])  # noqa: UP006
    relative_halfwidth: Any = 0.05
    absolute_halfwidth: Any = None
    confidence: float = 0.95
    initial: int = 5
    batch: int = 5
    max_replications: int = 100
    max_failures: int = 3
    extrapolate: bool = False
    baseline: Optional[str] = None  # noqa: UP045
    seed_key: str = "seed"
    params: Optional[Dict[str, str]] = None  # noqa: UP006, UP045


ConfigStore.instance().store(group="hydra/sweeper", name="precision", node=PrecisionSweeperConf,
                             provider="schedlab")


class PrecisionSweeper(Sweeper):
    """Launches rounds of replications through the configured launcher until every cell settles."""

    def __init__(self, **options: Any) -> None:
        from hydra_plugins.schedlab_precision_sweeper import _core

        self.impl = _core.PrecisionSweep(**options)

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.impl.setup(self, hydra_context=hydra_context, task_function=task_function, config=config)

    def sweep(self, arguments: List[str]) -> Any:  # noqa: UP006
        return self.impl.sweep(arguments)
