"""``hydra/sweeper=schedlab``: Hydra's basic sweeper, checking a batch through the composition cache.

Hydra's sweeper composes every run of a batch to check it before launching (a third of the driver's
work per run, and all of it before the first run starts). With the Ray launcher's
:class:`~hydra_plugins.schedlab_ray_launcher._compose.CachingConfigLoader` a run it can describe as
plain data is checked without composing it; any other run is composed, and the launcher takes that
config. With any other launcher it is Hydra's basic sweeper.

No ``from __future__ import annotations`` here: OmegaConf reads these dataclass annotations.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper, BasicSweeperConf
from hydra.core.config_store import ConfigStore
from hydra.types import HydraContext
from omegaconf import DictConfig


@dataclass
class SchedlabSweeperConf(BasicSweeperConf):
    """Hydra's ``basic`` sweeper options (``max_batch_size``, ``params``)."""

    _target_: str = "hydra_plugins.schedlab_ray_launcher.sweeper.SchedlabSweeper"


ConfigStore.instance().store(group="hydra/sweeper", name="schedlab", node=SchedlabSweeperConf, provider="schedlab")


def validate_batch(hydra_context: HydraContext, config: DictConfig, batch: Sequence[Sequence[str]]) -> bool:
    """Check that every run of ``batch`` composes, through the composition cache when the context has one
    (Hydra's errors, in Hydra's words); False when it has none (check as Hydra does)."""
    from hydra_plugins.schedlab_ray_launcher._compose import CachingConfigLoader

    loader = hydra_context.config_loader
    if not isinstance(loader, CachingConfigLoader):
        return False
    for overrides in batch:
        loader.check(config, list(overrides))
    return True


class SchedlabSweeper(BasicSweeper):
    """Hydra's basic sweeper whose batch check asks the Ray launcher's composition cache."""

    def validate_batch_is_legal(self, batch: Sequence[Sequence[str]]) -> None:
        assert self.hydra_context is not None and self.config is not None
        if not validate_batch(self.hydra_context, self.config, batch):
            super().validate_batch_is_legal(batch)
