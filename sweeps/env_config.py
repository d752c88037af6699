"""A :class:`sim.env.SchedulingEnv` from a composed config: the ``cluster`` and ``workload`` groups of a
run, so a policy is trained on exactly the workloads it is later swept on.

The config is the plain dict a run gets (:func:`sweeps._hydra.task_config` of a composed config, or
``conf/``'s files by hand); its ``policy`` is not used — the agent decides — and the run's checks
(:func:`sweeps.task.prepare`) see the env's decision process in its place (:class:`EnvDecides`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig

from sim.core import Cluster, InputError, Workload
from sim.policies.learned import WindowPolicy
from sweeps._hydra import task_config
from sweeps.task import RunParts, prepare

if TYPE_CHECKING:
    from sim.env import SchedulingEnv

CONF = Path(__file__).resolve().parents[1] / "conf"


class EnvDecides(WindowPolicy):
    """What the checks of a run see in place of the config's policy: the env's decision process."""

    name = "SchedulingEnv"

    def choose(self, obs: np.ndarray, mask: np.ndarray, now: float) -> int:
        raise NotImplementedError("the env's agent chooses")


def sized_parts(cfg: dict[str, Any], who: str) -> tuple[Cluster, RunParts]:
    """``cfg``'s cluster, which ``who`` needs sized, and its run parts, checked as a run's are
    (:func:`sweeps.task.prepare`) with the env's decision process as the policy."""
    parts = prepare({**cfg, "policy": {"_target_": f"{__name__}:EnvDecides", "window": 1, "backfill": "none"}})
    if not parts.cluster.fixed:
        raise InputError(f"{who} needs a sized cluster (cluster.nodes=N), not one sized by a trace")
    return parts.cluster.build(), parts


def env_from_config(cfg: dict[str, Any], episode_jobs: int | None = None, **options: Any) -> SchedulingEnv:
    """The env over ``cfg``'s cluster and workload (and engine options); ``options`` are
    :class:`SchedulingEnv`'s (``window``, ``backfill``, ``reward``, ``reward_at``). Episode seed s draws
    the jobs of the run with ``seed=s``; a replayed trace is the same every seed, so ``episode_jobs=K``
    makes each episode a window of K consecutive jobs of it (:func:`trace_window`). Needs gymnasium (the
    ``rl`` extra); composing and training do not."""
    from sim.env import SchedulingEnv

    cluster, parts = sized_parts(cfg, "SchedulingEnv")
    spec = parts.workload
    if spec.stochastic:
        if episode_jobs is not None:
            raise InputError(f"episode_jobs windows a replayed trace; {type(spec).__name__} draws each episode's "
                             f"jobs from its seed (set workload.jobs instead)")

        def draw(rng: np.random.Generator) -> Workload:
            return spec.build(rng, cluster)
    else:
        draw = functools.partial(trace_window, spec.build(np.random.default_rng(0), cluster), episode_jobs)
        if episode_jobs is not None:
            draw(np.random.default_rng(0))  # a window larger than the trace is refused here, not at reset
    return SchedulingEnv(cluster, draw, kill_at_limit=parts.kill_at_limit, drop_oversized=parts.drop_oversized,
                         **options)


def trace_window(trace: Workload, size: int | None, rng: np.random.Generator) -> Workload:
    """``size`` consecutive jobs of ``trace`` (by submit time) from a start drawn by ``rng``, shifted so that the
    first arrives at time 0 (RLScheduler's episodes); the whole trace when ``size`` is ``None``."""
    if size is None:
        return trace
    jobs = sorted(trace.jobs, key=lambda job: (job.submit, job.id))
    if isinstance(size, bool) or not isinstance(size, int) or not 0 < size <= len(jobs):
        raise InputError(f"episode_jobs must be a whole number from 1 to the trace's {len(jobs)} jobs, got {size!r}")
    start = int(rng.integers(0, len(jobs) - size + 1))
    window = jobs[start:start + size]
    return dataclasses.replace(trace, jobs=[dataclasses.replace(job, submit=job.submit - window[0].submit)
                                            for job in window])


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
