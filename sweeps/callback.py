"""schedlab's Hydra callback (``hydra.callbacks.schedlab`` in ``conf/hydra/default.yaml``): nothing runs that
schedlab cannot record once.

- ``-m``: refuses, before anything runs, a launcher or sweeper that cannot record (schedlab's sweepers plan
  and record; Ray or Hydra's basic launcher run), ``replications`` < 1 and an unusable tracking store, and
  hands the sweeper a :class:`sweeps.planner.Planner`;
- a single run (no ``-m``): the planner checks it before it starts (a run recorded before is not run
  again) and records what the task function returned.

Hydra turns an exception raised by a callback into a warning, so a refusal here is printed and exits
(:func:`abort`).
"""

from __future__ import annotations

import socket
import sys
import time
import traceback
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from sim.core import InputError
from sweeps._hydra import job_error
from sweeps.planner import Planner, group_choices, task_config
from sweeps.preflight import StoreUnusableError, check_tracking

#: the launchers and sweepers whose runs schedlab records: ``_target_`` → the ``hydra/…=`` choices for it
LAUNCHERS = {"hydra_plugins.schedlab_ray_launcher.ray_launcher.RayLauncher": ("ray", "ray_mlflow"),
             "hydra._internal.core_plugins.basic_launcher.BasicLauncher": ("basic",)}
SWEEPERS = {"hydra_plugins.schedlab_ray_launcher.sweeper.SchedlabSweeper": ("schedlab",),
            "hydra_plugins.schedlab_precision_sweeper.precision_sweeper.PrecisionSweeper": ("precision",)}
PLANNER = "sweeps.planner.Planner"


def check_plugin(config: DictConfig, kind: str, known: dict[str, tuple[str, ...]]) -> None:
    """Refuse a ``hydra/<kind>`` whose runs schedlab cannot record, naming the ones it can.

    >>> check_plugin(OmegaConf.create({"hydra": {"launcher": {"_target_": "x.Mine"}}}), "launcher", LAUNCHERS)
    Traceback (most recent call last):
    ...
    SystemExit: 2
    """
    target = str(OmegaConf.select(config, f"hydra.{kind}._target_", default=""))
    if target not in known:
        choices = OmegaConf.select(config, "hydra.runtime.choices", default={}) or {}
        name = choices.get(f"hydra/{kind}", target) if isinstance(choices, DictConfig) else target
        working = ", ".join(f"hydra/{kind}={n}" for names in known.values() for n in names)
        abort(f"schedlab cannot record runs of hydra/{kind}={name} ({target}); nothing was run. Use one of: {working}")


def check_replications(config: DictConfig) -> None:
    """``replications`` (the seeds per cell of an experiment) must be a positive integer."""
    value = OmegaConf.select(config, "replications", default=None)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        abort(f"replications must be a positive integer (seeds per cell), got {value!r}; nothing was run")


def abort(message: str, code: int = 2) -> None:
    """End the process with one message (a callback's exceptions would only be warned about)."""
    print(f"Error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(code)


class SchedlabCallback(Callback):
    """Checks a multirun before it starts; plans and records a single run."""

    def __init__(self) -> None:
        self.planner: Planner | None = None  # a single run's

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        check_plugin(config, "launcher", LAUNCHERS)
        check_plugin(config, "sweeper", SWEEPERS)
        check_replications(config)
        try:
            check_tracking(config)  # before Ray starts: a down server or read-only store is one message
        except StoreUnusableError as error:
            abort(str(error))
        if OmegaConf.select(config, "hydra.sweeper.planner") is None:
            with read_write(config.hydra.sweeper), open_dict(config.hydra.sweeper):
                config.hydra.sweeper.planner = {"_target_": PLANNER, "summary": True}

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            check_tracking(config)
        except StoreUnusableError as error:
            abort(str(error))
        self.planner = Planner(summary=False)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        """A single run: validate it; a run recorded before (or claimed by another sweep) ends here."""
        if self.planner is None:  # a multirun's job: its sweeper planned it
            return
        plain = task_config(config)
        overrides = list(OmegaConf.select(config, "hydra.overrides.task", default=[]) or [])
        try:
            self.planner.configure(config)
            self.planner.check(0, plain, group_choices(config), overrides)
        except InputError as error:
            abort(f"invalid configuration, nothing was run: {error}")
        reason = self.planner.plan([0])[0] or self.planner.claim(0)
        if reason is not None:
            print(f"{' '.join(overrides) or '(defaults)'}: already recorded, {reason}; not recorded again "
                  f"(sweep.force=true records a new run)")
            self.on_run_end(config)
            raise SystemExit(0)

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        """A single run ended: record it (a failure is one line, not Hydra's traceback)."""
        if self.planner is None:
            return
        planner, label = self.planner, " ".join(job_return.overrides or []) or "(defaults)"
        error = None
        if job_return.status == JobStatus.COMPLETED:
            outcome = job_return.return_value
            planner.record(0, "FINISHED", outcome, None, None, socket.gethostname(), time.time())
            print(f"{label}: " + ", ".join(f"{k}={v:.6g}" for k, v in outcome.summary.items()))
        else:
            exc = job_error(job_return)
            error = f"{type(exc).__name__}: {exc}"
            planner.record(0, "FAILED", None, error, "".join(traceback.format_exception(exc)), socket.gethostname(),
                           time.time())
        recorded = planner.store is not None and 0 in planner.run_ids
        if recorded:
            print(f"MLflow run {planner.run_ids[0]} in {planner.store.uri} (experiment {planner.experiment_name!r})")
        if error is not None:
            self.on_run_end(config)
            where = "recorded as a FAILED run with its traceback.txt" if recorded else "not recorded"
            abort(f"the run failed: {error.strip().splitlines()[0]} ({where})", code=1)

    def on_run_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.planner is not None:
            self.planner.finish()
            self.planner = None
