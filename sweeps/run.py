"""The front door: ``python sweeps/run.py -m policy=easy,conservative seed='range(0,10)'``.

Composes each run from ``conf/``; the task function only simulates and returns the outcome (nothing
for an in-process job the tracker skips: recorded before, or a duplicate).
Recording is :class:`sweeps.recording.Recording`'s (a Hydra callback in ``conf/hydra/default.yaml``):
the same tracker records each run once whether it ran on Ray, on Hydra's basic launcher or alone.
"""

from __future__ import annotations

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from sweeps.hook import task_config
from sweeps.recording import skipped
from sweeps.task import RunOutcome, run_one


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> RunOutcome | None:
    """One run: simulate it and return its outcome (whoever launched it records it)."""
    if skipped(OmegaConf.select(HydraConfig.get(), "job.num", default=None, throw_on_missing=False)):
        return None
    return run_one(task_config(cfg))


if __name__ == "__main__":
    main()
