"""The one recording path: every way of running a schedlab config records each run through
:class:`sweeps.hook.SweepTracker`, on the driver.

:class:`Recording` is a Hydra callback (``hydra.callbacks.recording`` in ``conf/hydra/default.yaml``).
It runs in the driver before anything is launched:

- ``-m`` with the Ray launcher (``ray`` or ``ray_mlflow``): the tracker is the launcher's driver-side
  hook (installed when the launcher config has none), fed each result as it arrives;
- ``-m hydra/launcher=basic`` and a single run (no ``-m``): the job runs in this process, so the
  tracker checks it before it starts and records what the task function returned when it ends;
- any other launcher is refused before any run starts, naming the ones that work.

The task function (``sweeps/run.py``) only returns a :class:`sweeps.task.RunOutcome`. Hydra turns an
exception raised by a callback into a warning, so a refusal here is printed and exits (:func:`abort`).
"""

from __future__ import annotations

import socket
import sys
import time
import traceback
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.errors import CompactHydraException
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from sweeps.preflight import StoreUnusableError, check_tracking

RAY = "hydra_plugins.schedlab_ray_launcher.ray_launcher.RayLauncher"
BASIC = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"
#: launcher ``_target_`` → the ``hydra/launcher=`` choices that select it
RECORDABLE = {RAY: ("ray", "ray_mlflow"), BASIC: ("basic",)}
TRACKER = "sweeps.hook.SweepTracker"
#: in-process jobs (basic launcher, single run) the tracker skips: ``hydra.job.num`` → why
SKIPPED: dict[int, str] = {}


def skipped(job_num: int | None) -> bool:
    """Whether the tracker decided not to run this in-process job (recorded before, or a duplicate)."""
    return (job_num or 0) in SKIPPED


class UnrecordableLauncherError(CompactHydraException):
    """A multirun launcher schedlab cannot record runs for; nothing was run."""


def check_launcher(config: DictConfig) -> str:
    """The launcher's ``_target_`` when schedlab can record its runs; raises otherwise.

    >>> check_launcher(OmegaConf.create({"hydra": {"launcher": {"_target_": BASIC}}})) == BASIC
    True
    """
    target = str(OmegaConf.select(config, "hydra.launcher._target_", default=""))
    if target not in RECORDABLE:
        choice = OmegaConf.select(config, "hydra.runtime.choices", default={}) or {}
        name = choice.get("hydra/launcher", target) if isinstance(choice, DictConfig) else target
        working = ", ".join(f"hydra/launcher={n}" for names in RECORDABLE.values() for n in names)
        raise UnrecordableLauncherError(f"schedlab cannot record runs launched by hydra/launcher={name} "
                                        f"({target}); nothing was run. Use one of: {working}")
    return target


class EmptySweepError(CompactHydraException):
    """A sweep that would run nothing (``replications=0``)."""


def check_replications(config: DictConfig) -> None:
    """``replications`` (the seeds per cell of an experiment) must be a positive integer.

    >>> check_replications(OmegaConf.create({"replications": 0}))
    Traceback (most recent call last):
    ...
    sweeps.recording.EmptySweepError: replications must be a positive integer (seeds per cell), got 0; nothing was run
    """
    value = OmegaConf.select(config, "replications", default=None)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise EmptySweepError(f"replications must be a positive integer (seeds per cell), got {value!r}; "
                              f"nothing was run")


def abort(message: str, code: int = 2) -> None:
    """End the process with one message (a callback's exceptions would only be warned about)."""
    print(f"Error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(code)


class Recording(Callback):
    """Routes every run of a schedlab sweep or single run to one :class:`SweepTracker`."""

    def __init__(self) -> None:
        self.tracker: Any = None  # a SweepTracker when this process runs the jobs itself
        self.skips = SKIPPED
        self.single = False  # a single run (no -m): a failure ends the process with one line

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            check_tracking(config)
        except StoreUnusableError as error:
            abort(str(error))
        self.single = True
        self._in_process(config, summary=False)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            target = check_launcher(config)
            check_replications(config)
            check_tracking(config)  # before Ray starts: a down server or read-only store is one message
        except (UnrecordableLauncherError, EmptySweepError, StoreUnusableError) as error:
            abort(str(error))
        if target == RAY:
            if OmegaConf.select(config, "hydra.launcher.hook") is None:
                with read_write(config.hydra.launcher), open_dict(config.hydra.launcher):
                    config.hydra.launcher.hook = {"_target_": TRACKER}
        else:
            self._in_process(config, summary=True)

    def _in_process(self, config: DictConfig, summary: bool) -> None:
        from sweeps.hook import SweepTracker

        self.tracker = SweepTracker(summary=summary)
        self.tracker.configure(config)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Validate the job and decide whether it was recorded before (in-process jobs only)."""
        if self.tracker is None:  # a Ray worker: the driver's tracker records this job
            return
        from sim.core import InputError
        from sweeps.hook import group_choices, task_config

        index = int(OmegaConf.select(config, "hydra.job.num", default=0) or 0)
        plain = task_config(config)
        try:
            overrides = list(OmegaConf.select(config, "hydra.overrides.task", default=[]) or [])
            self.tracker.check(index, plain, group_choices(config), overrides)
        except InputError as error:
            abort(f"invalid configuration, nothing was run: {error}")
        reason = self.tracker.plan_configs({index: plain})[0]
        if reason is None:
            reason = self.tracker.claim(index)
        if reason is not None:
            self.skips[index] = reason

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        """Record the job's result (in-process jobs only); a job recorded before is not recorded again."""
        if self.tracker is None:
            return
        index = int(OmegaConf.select(config, "hydra.job.num", default=0) or 0)
        label = " ".join(job_return.overrides or []) or "(defaults)"
        if index in self.skips:
            reason = self.skips.pop(index)
            if reason.startswith("same run as"):  # a repeated config, or another seed of a deterministic workload
                print(f"{label}: {reason}; not recorded")
            else:
                print(f"{label}: already recorded, {reason}; not recorded again (sweep.force=true records a new run)")
            return
        end = time.time()
        if job_return.status == JobStatus.COMPLETED:
            outcome = job_return.return_value
            self.tracker.record(index, "FINISHED", outcome, None, None, socket.gethostname(), end)
            print(f"{label}: " + ", ".join(f"{k}={v:.6g}" for k, v in outcome.summary.items()))
        else:
            exc = job_return._return_value
            self.tracker.record(index, "FAILED", None, f"{type(exc).__name__}: {exc}",
                                "".join(traceback.format_exception(exc)), socket.gethostname(), end)
        recorded = self.tracker.store is not None and index in self.tracker.run_ids
        if recorded:
            print(f"MLflow run {self.tracker.run_ids[index]} in {self.tracker.store.uri} "
                  f"(experiment {self.tracker.experiment_name!r})")
        if self.single and job_return.status != JobStatus.COMPLETED:  # one line, not Hydra's traceback
            self.on_run_end(config)
            error = f"{type(job_return._return_value).__name__}: {job_return._return_value}".strip()
            where = "recorded as a FAILED run with its traceback.txt" if recorded else "not recorded"
            abort(f"the run failed: {error.splitlines()[0]} ({where})", code=1)

    def on_run_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.tracker is None:
            return
        self.tracker.close()
        for line in self.tracker.notes() + self.tracker.where():
            print(line)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.tracker is not None and self.tracker.summary and self.tracker.results:
            from sweeps.summary import format_policy_table

            print(format_policy_table(self.tracker.results))
        self.on_run_end(config)
