"""schedlab's Hydra callback (``hydra.callbacks.schedlab`` in ``conf/hydra/default.yaml``): nothing runs that
schedlab cannot record once.

- ``-m``, with any sweeper: refuses, before anything runs, a launcher that cannot record (schedlab's
  launchers plan, claim and record each batch they are given: ``hydra/launcher=ray`` or ``serial``),
  ``replications`` < 1 and an unusable tracking store; opens the sweep's :class:`sweeps.planner.Planner`
  for the launcher, and finishes it when the sweep ends;
- a single run (no ``-m``): the planner checks it before it starts (a run recorded before is not run
  again) and records what the task function returned.

Hydra turns an exception raised by a callback into a warning, so a refusal here is printed and exits
(:func:`abort`).
"""

from __future__ import annotations

import socket
import sys
from typing import Any

from hydra.core.utils import JobReturn
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from sweeps.planner import InvalidSweepError, Planner, Run, active_sweep, open_sweep
from sweeps.preflight import StoreUnusableError, check_tracking
from sweeps.record import RunReport

#: the launchers whose runs schedlab records: ``_target_`` → the ``hydra/launcher=`` choices for it
LAUNCHERS = {"hydra_plugins.schedlab_ray_launcher.ray_launcher.RayLauncher": ("ray", "ray_mlflow"),
             "hydra_plugins.schedlab_ray_launcher.ray_launcher.SerialLauncher": ("serial",)}


def check_launcher(config: DictConfig) -> None:
    """Refuse a ``hydra/launcher`` whose runs schedlab cannot record, naming the ones it can.

    >>> check_launcher(OmegaConf.create({"hydra": {"launcher": {"_target_": "x.Mine"}}}))
    Traceback (most recent call last):
    ...
    SystemExit: 2
    """
    target = str(OmegaConf.select(config, "hydra.launcher._target_", default=""))
    if target not in LAUNCHERS:
        choices = OmegaConf.select(config, "hydra.runtime.choices", default={}) or {}
        name = choices.get("hydra/launcher", target) if isinstance(choices, DictConfig) else target
        working = ", ".join(f"hydra/launcher={n}" for names in LAUNCHERS.values() for n in names)
        abort(f"schedlab cannot record runs of hydra/launcher={name} ({target}): it would run every run, recorded "
              f"or not, and record none; nothing was run. Use one of: {working} (serial: one run at a time in "
              f"this process, like Hydra's basic launcher)")


def check_replications(config: DictConfig) -> None:
    """``replications`` (the seeds per cell of an experiment) must be a positive integer."""
    value = OmegaConf.select(config, "replications", default=None)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        abort(f"replications must be a positive integer (seeds per cell), got {value!r}; nothing was run")


def abort(message: str, code: int = 2) -> None:
    """End the process with one message (a callback's exceptions would only be warned about)."""
    print(f"Error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(code)


def checked_store(config: DictConfig) -> None:
    try:
        check_tracking(config)  # before Ray starts: a down server or read-only store is one message
    except StoreUnusableError as error:
        abort(str(error))


class SchedlabCallback(Callback):
    """Checks a multirun before it starts and opens its planner; plans and records a single run."""

    def __init__(self) -> None:
        self.planner: Planner | None = None  # a single run's
        self.run: Run | None = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        check_launcher(config)
        check_replications(config)
        checked_store(config)
        open_sweep(config)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        planner = active_sweep(config)
        if planner is not None:
            planner.finish()

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        checked_store(config)
        self.planner = Planner(summary=False)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        """A single run: validate it; a run recorded before (or claimed by another sweep) ends here."""
        if self.planner is None:  # a multirun's job: its launcher planned it
            return
        run = Run.of(config)
        try:
            self.planner.plan(config, [run])
        except InvalidSweepError as error:
            abort(str(error))
        reason = run.result or self.planner.claim(run)
        if reason is not None:
            print(f"{run.label}: already recorded, {reason}; not recorded again (sweep.force=true records a new run)")
            self.on_run_end(config)
            raise SystemExit(0)
        self.run = run

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        """A single run ended: record it (a failure is one line, not Hydra's traceback)."""
        if self.planner is None or self.run is None:
            return
        planner, run = self.planner, self.run
        report = RunReport.of(job_return, socket.gethostname())
        planner.ended(run, report)
        if report.outcome is not None:
            print(f"{run.label}: " + ", ".join(f"{k}={v:.6g}" for k, v in report.outcome.summary.items()))
        recorded = run.result.run_id if run.result is not None else run.record.claim.run_id if run.record else None
        if planner.store is not None and recorded:
            print(f"MLflow run {recorded} in {planner.store.uri} (experiment {planner.experiment_name!r})")
        if report.error is not None:
            self.on_run_end(config)
            where = "recorded as a FAILED run with its traceback.txt" if recorded else "not recorded"
            abort(f"the run failed: {report.error} ({where})", code=1)

    def on_run_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.planner is not None:
            self.planner.finish()
            self.planner = None
