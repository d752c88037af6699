"""The front door: ``python sweeps/run.py -m policy=easy,conservative seed='range(0,10)'``.

Composes each run from ``conf/``; the task function only simulates and returns the outcome. What runs
and how it is recorded is decided by schedlab's launcher for ``-m`` (whichever sweeper makes the batches:
it runs only the runs left to do), by :class:`sweeps.callback.SchedlabCallback` for a single run.
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from sweeps._hydra import task_config
from sweeps.task import RunOutcome, run_one


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> RunOutcome:
    """One run: simulate it and return its outcome."""
    return run_one(task_config(cfg))


if __name__ == "__main__":
    main()
