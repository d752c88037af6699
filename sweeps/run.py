"""The front door: ``python sweeps/run.py -m policy=easy,conservative seed='range(0,10)'``.

Composes each run from ``conf/``; the task function only simulates and returns the outcome. What runs
and how it is recorded is decided by schedlab's launcher for ``-m`` (whichever sweeper makes the batches:
it runs only the runs left to do), by :class:`sweeps.callback.SchedlabCallback` for a single run.

SIGTERM (what SLURM and ``timeout`` send) ends a sweep as Ctrl-C does: what finished is recorded, the rest is
left for a rerun of the same command, and the process ends with one line and exit status 130.
"""

from __future__ import annotations

import atexit
import gc
import signal
import sys
import threading
from typing import Any

import hydra
from omegaconf import DictConfig

from sweeps._hydra import task_config
from sweeps.task import RunOutcome, run_one

#: what Hydra adds after every error it prints; after a one-line error (no traceback) there is no stack to see
FULL_ERROR_HINT = "\nSet the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.\n"
INTERRUPTED = "interrupted: rerun the same command to resume (finished runs are kept)"


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> RunOutcome:
    """One run: simulate it and return its outcome."""
    return run_one(task_config(cfg))


class OneLineErrors:
    """``sys.stderr`` without Hydra's :data:`FULL_ERROR_HINT` after an error printed without a traceback (by
    this thread: Ray forwards its workers' logs from another)."""

    def __init__(self, stream: Any) -> None:
        self.stream, self.traceback = stream, False

    def write(self, text: str) -> int:
        if threading.current_thread() is threading.main_thread():
            self.traceback = self.traceback or "Traceback" in text
        return 0 if text == FULL_ERROR_HINT and not self.traceback else self.stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


if __name__ == "__main__":
    atexit.register(gc.freeze)  # the exit skips collecting MLflow's and Ray's objects (~1 s: the last handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # raises KeyboardInterrupt
    sys.stderr = OneLineErrors(sys.stderr)
    try:
        main()
    except KeyboardInterrupt:  # outside a batch (composing, planning …); a batch prints its own summary
        print(INTERRUPTED, file=sys.stderr, flush=True)
        raise SystemExit(130) from None
