"""A :class:`sim.env.SchedulingEnv` from a composed config: the ``cluster`` and ``workload`` groups of a
run, so a policy is trained on exactly the workloads it is later swept on.

The config is the plain dict a run gets (:func:`sweeps._hydra.task_config` of a composed config, or
``conf/``'s files by hand); its ``policy`` is not used — the agent decides — and the run's checks
(:func:`sweeps.task.prepare`) see the env's decision process in its place (:class:`EnvDecides`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig

from sim.core import InputError, Workload
from sim.policies.learned import WindowPolicy
from sweeps._hydra import task_config
from sweeps.task import prepare

if TYPE_CHECKING:
    from sim.env import SchedulingEnv

CONF = Path(__file__).resolve().parents[1] / "conf"


class EnvDecides(WindowPolicy):
    """What the checks of a run see in place of the config's policy: the env's decision process."""

    name = "SchedulingEnv"

    def choose(self, obs: np.ndarray, mask: np.ndarray, now: float) -> int:
        raise NotImplementedError("the env's agent chooses")


_ENV_POLICY = {"_target_": f"{__name__}:EnvDecides", "window": 1, "backfill": "none"}


def env_from_config(cfg: dict[str, Any], **options: Any) -> SchedulingEnv:
    """The env over ``cfg``'s cluster and workload (and engine options); ``options`` are
    :class:`SchedulingEnv`'s (``window``, ``backfill``, ``reward``, ``reward_at``). Episode seed s draws
    the jobs of the run with ``seed=s``. Needs gymnasium (the ``rl`` extra); composing and training do not."""
    from sim.env import SchedulingEnv

    parts = prepare({**cfg, "policy": _ENV_POLICY})
    if not parts.cluster.fixed:
        raise InputError("SchedulingEnv needs a sized cluster (cluster.nodes=N), not one sized by a trace")
    cluster = parts.cluster.build()
    spec = parts.workload

    def draw(rng: np.random.Generator) -> Workload:
        return spec.build(rng, cluster)

    return SchedulingEnv(cluster, draw, kill_at_limit=parts.kill_at_limit, drop_oversized=parts.drop_oversized,
                         **options)


def compose_config(overrides: Sequence[str] = ()) -> dict[str, Any]:
    """``conf/config.yaml`` with command-line ``overrides`` (``cluster=hpc16 workload.jobs=500``), composed
    outside a Hydra app and resolved as a run's config is (``${hydra:runtime.cwd}`` = the current folder)."""
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            cfg = compose("config", overrides=list(overrides), return_hydra_config=True)
            HydraConfig.instance().set_config(cfg)
            return task_config(cfg)
    finally:
        GlobalHydra.instance().clear()
