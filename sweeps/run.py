"""The front door: ``python sweeps/run.py -m policy=easy,conservative seed='range(0,10)'``.

Composes each run from ``conf/``; with ``-m`` the Ray launcher runs them in parallel and its
driver-side hook (:class:`sweeps.hook.SweepTracker`) logs each one to MLflow as it finishes.
Without ``-m`` (or with ``hydra/launcher=basic``) the run executes and is logged in this process.
"""

from __future__ import annotations

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from sweeps.hook import run_in_process, task_config
from sweeps.task import RunOutcome, run_one


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> RunOutcome | None:
    """One run; returns its outcome to the launcher (a worker never talks to MLflow itself)."""
    hydra_cfg = HydraConfig.get()
    launcher = str(OmegaConf.select(hydra_cfg, "launcher._target_", default=""))
    if hydra_cfg.mode == RunMode.MULTIRUN and not launcher.endswith(".BasicLauncher"):
        return run_one(task_config(cfg))  # in a worker: the launcher's driver-side hook records it
    return run_in_process(cfg, label=" ".join(hydra_cfg.overrides.task) or "(defaults)")


if __name__ == "__main__":
    main()
