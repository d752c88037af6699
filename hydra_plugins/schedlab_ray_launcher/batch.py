"""What a launch does, whichever sweeper asked for it (:meth:`Sweep.launch`): plan the batch it is given, run
what is left (each through :func:`execute`, on Ray or in this process) and give back a JobReturn for every job
in order — a run not run here returns its recorded :class:`sweeps.record.RunResult`. Without a planner (an app
without schedlab's callback) every job runs and returns what its task function returned.

No ``from __future__ import annotations`` here: Hydra's plugin scan executes this module outside
``sys.modules``, where dataclasses cannot resolve string annotations.
"""

import atexit
import contextlib
import dataclasses
import functools
import json
import signal
import socket
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, run_job, setup_globals
from hydra.errors import CompactHydraException
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from sweeps._hydra import Recipe, RunReturn, check_planned, finish, share_cache, without_callback
from sweeps.callback import SchedlabCallback
from sweeps.planner import InvalidSweepError, Planner, Run, active_sweep
from sweeps.record import RunRecord, RunReport, one_line


class SweepAbortedError(CompactHydraException):
    """The sweep cannot start or go on (no cluster, a result that cannot be recorded); Hydra prints only
    the message."""


class RunFailedError(CompactHydraException):
    """What a failed run's JobReturn raises, after the batch's summary has been printed."""


@dataclasses.dataclass
class SweepStats:
    """Counts of a batch (``interrupted``: Ctrl-C; ``stopped``: why it stopped early)."""

    total: int
    done: int = 0
    failed: int = 0
    skipped: int = 0
    seconds: float = 0.0
    interrupted: bool = False
    stopped: str = ""
    failures: list[tuple[Run, RunReport]] = dataclasses.field(default_factory=list)
    skips: Counter[str] = dataclasses.field(default_factory=Counter)  # why runs were skipped → how many

    def skip(self, run: Run) -> None:
        """Count a run not run here, by why (its ``result``)."""
        result = run.result
        why = ("repeating another run of this sweep" if result is not None and result.same_as is not None
               else "running in another sweep" if result is not None and result.elsewhere is not None
               else "already recorded")
        self.skipped += 1
        self.skips[why] += 1

    @property
    def not_run(self) -> int:
        return self.total - self.done - self.failed - self.skipped


class Executor(Protocol):
    """Where a launcher's runs execute: a Ray instance or cluster, or this process."""

    local: bool  # True when every run executes where the driver's store can be seen (a local Ray, this process)

    def preflight(self) -> None:
        """Refuse bad options or an unreachable cluster before anything is planned."""

    def run(self, sweep: "Sweep", batch: "Batch", runtime_env: dict[str, Any]) -> None:
        """Run ``batch.todo`` of ``sweep``, each through :meth:`Batch.submit` and :meth:`Batch.ended`."""

    def close(self) -> None:
        """End what :meth:`run` started."""


class RunTimeoutError(Exception):
    """A run took longer than ``hydra.launcher.run_timeout``."""


@contextlib.contextmanager
def wall_clock_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`RunTimeoutError` in this thread (the main one: a Ray task's or the driver's) once ``seconds``
    of wall clock have passed. Python code is stopped between two bytecodes, ``time.sleep`` at once; a call
    into C that never returns is not."""

    def expired(signum: int, frame: Any) -> None:
        raise RunTimeoutError(f"the run took longer than hydra.launcher.run_timeout={seconds:g} s (wall clock); "
                              f"stopped")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def execute(record: RunRecord, base: Callable[[], bytes], master: DictConfig, sweep_dir: str,
            task_function: TaskFunction, callbacks: Any, node_id: str, node_ip: str = "", limit: float | None = None
            ) -> RunReport:
    """The one body of a run, in a Ray worker or this process: compose it (from its recipe and its shape's
    composition ``base``, checked against the plan) and claim it, run it with Hydra's ``run_job`` within
    ``limit`` seconds (:func:`wall_clock_limit`), write its record (when this process sees the store); its
    report."""
    try:
        config = record.config
        if isinstance(config, Recipe):
            config = finish(config.compose(base(), master), record.index, sweep_dir)
            check_planned(config, record.cfg)
        instead = record.start()
    except Exception as error:  # a config that is not the planned one, a store this process cannot see
        return RunReport.crashed(error, node_id, node_ip)
    if instead is not None:
        return RunReport("SKIPPED", instead)
    try:
        with wall_clock_limit(limit) if limit is not None else contextlib.nullcontext():
            ret = run_job(hydra_context=HydraContext(config_loader=None, callbacks=callbacks),
                          task_function=task_function, config=config, job_dir_key="hydra.sweep.dir",
                          job_subdir_key="hydra.sweep.subdir")
        report = RunReport.of(ret, node_id, node_ip)
    except RunTimeoutError as error:  # the limit struck outside the task function (in run_job's own steps)
        report = RunReport.crashed(error, node_id, node_ip)
    record.finish(report)
    return report


class Batch:
    """One launch's runs while they execute: what each run is handed (:meth:`submit`), what became of it
    (:meth:`ended`), the counts."""

    def __init__(self, runs: list[Run], planner: Planner | None, stats: SweepStats, timings: dict[str, float]
                 ) -> None:
        self.runs, self.planner, self.stats, self.timings = runs, planner, stats, timings
        self.todo = [run for run in runs if run.result is None]
        self.reports: dict[int, RunReport] = {}

    def submit(self, run: Run) -> RunRecord | None:
        """What the process that runs ``run`` is handed: its record with its index and its recipe (composed where
        it runs, checked against the plan) or config; ``None`` when it is not run after all (the driver claims
        it and another sweep has it)."""
        if self.planner is not None and self.planner.claim(run) is not None:
            self.stats.skip(run)
            return None
        record = (self.planner.recorder(run) if self.planner is not None else None) or RunRecord(None, None, run.plain)
        if run.recipe is not None:
            return dataclasses.replace(record, index=run.index, config=run.recipe)
        job = dataclasses.replace(record, index=run.index, config=run.composed())
        run.release()  # the sweep keeps only the configs of runs not yet submitted
        return job

    def ended(self, run: Run, report: RunReport) -> None:
        """File what became of ``run``; a result that cannot be recorded stops the sweep (the next would fail too)."""
        why, cause = report.record_error, None
        if why is None and self.planner is not None:
            try:
                self.planner.ended(run, report)
            except Exception as error:
                why, cause = one_line(error), error
        if why is not None:
            self.stats.stopped = f"run #{run.index} ({run.name}) ended but could not be recorded: {why}"
            raise SweepAbortedError(f"sweep stopped: {self.stats.stopped}; runs recorded before it are kept, rerun "
                                    f"the same command to resume") from cause
        self.reports[run.index] = report
        if report.status == "SKIPPED":  # its worker found it claimed or finished by another sweep
            self.stats.skip(run)
        elif report.status == "FINISHED":
            self.stats.done += 1
        else:
            self.stats.failed += 1
            self.stats.failures.append((run, report))


class Sweep:
    """A launcher's sweep: the composition cache it shares with the sweeper, the executor, and every
    :meth:`launch` the sweeper asks for."""

    def __init__(self, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig,
                 executor: Executor, run_timeout: float | None = None) -> None:
        if run_timeout is not None and (isinstance(run_timeout, bool) or not isinstance(run_timeout, int | float)
                                        or not 0 < run_timeout < float("inf")):
            raise SweepAbortedError(f"hydra.launcher.run_timeout must be a positive number of seconds (or null: no "
                                    f"limit), got {run_timeout!r}; nothing was run")
        self.config, self.task_function, self.executor = config, task_function, executor
        self.run_timeout = None if run_timeout is None else float(run_timeout)
        #: what a run's ``run_job`` notifies: the sweep's callbacks but schedlab's (its job hooks are a single run's)
        self.callbacks = without_callback(hydra_context.callbacks, SchedlabCallback)
        self.composer = share_cache(hydra_context, config)
        self.sweep_dir = str(Path(str(config.hydra.sweep.dir)).absolute())
        planner = active_sweep(config)  # what it starts ends with the sweep, however the sweep ends
        (planner.closers.append if planner is not None else atexit.register)(executor.close)

    def launch(self, job_overrides: Sequence[Sequence[str]], first: int) -> list[JobReturn]:
        """Hydra's launcher API: plan the batch, run what is left, a JobReturn per job in order."""
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        Path(self.sweep_dir).mkdir(parents=True, exist_ok=True)
        self.executor.preflight()  # bad options, no cluster: refused before anything is planned
        planner = active_sweep(self.config)
        tic = time.perf_counter()
        runs = [self.planned(list(overrides), first + i, planner is not None)
                for i, overrides in enumerate(job_overrides)]
        timings = {"compose": time.perf_counter() - tic}
        tic = time.perf_counter()
        if planner is not None:
            try:
                planner.plan(self.config, runs)
            except InvalidSweepError:
                raise
            except Exception as error:
                raise SweepAbortedError(f"could not plan the sweep: {one_line(error)}; nothing was run") from error
        timings["prepare"] = time.perf_counter() - tic
        batch = Batch(runs, planner, SweepStats(total=len(runs)), timings)
        for run in runs:
            if run.result is not None:
                batch.stats.skip(run)
        if planner is not None:
            print(planned_line(len(runs), len(batch.todo), timings), flush=True)
        try:
            if batch.todo:
                if planner is not None:
                    planner.claim_on_workers(local=self.executor.local)
                self.executor.run(self, batch, planner.runtime_env() if planner is not None else {})
        except KeyboardInterrupt:
            batch.stats.interrupted = True
        except SweepAbortedError as error:
            batch.stats.stopped = batch.stats.stopped or str(error)
            raise
        finally:
            print_summary(batch.stats)
            write_stats(Path(self.sweep_dir) / f"sweep-{first}.json", batch.stats, timings)
        if batch.stats.interrupted:
            raise SystemExit(130)
        return self.returns(batch)

    def planned(self, overrides: list[str], index: int, describe: bool) -> Run:
        """One job: described as plain data when the cache can (composed where it runs, which checks it),
        else composed now."""
        compose = functools.partial(self.compose, overrides, index)
        described = self.composer.describe(overrides) if describe else None
        if described is not None:
            plain, choices, recipe = described
            return Run(index, overrides, plain, choices, recipe=recipe, compose=compose)
        run = Run.of(compose(), index) if describe else Run(index, overrides, {}, {}, compose=compose)
        run.compose, run.overrides = compose, overrides
        return run

    def compose(self, overrides: list[str], index: int) -> DictConfig:
        return finish(self.composer.load_sweep_config(self.config, overrides), index, self.sweep_dir)

    def base(self, recipe: Recipe) -> bytes:
        return self.composer.shape(recipe.shape).blob

    def returns(self, batch: Batch) -> list[JobReturn]:
        """The batch's JobReturns in job order: a run not run here (or found claimed where it ran) returns its
        :class:`RunResult`; a failed run's return value raises :class:`RunFailedError` (how many failed)."""
        error = failed_error(batch.stats) if batch.stats.failed else None
        name = OmegaConf.select(self.config, "hydra.job.name")
        out = []
        for run in batch.runs:
            report = batch.reports.get(run.index)
            if report is not None and report.status == "FAILED":
                value, why = None, report.error
            elif batch.planner is None:
                value, why = (report.value if report is not None else None), None
            else:
                value, why = batch.planner.result(run)
            failed = why is not None
            out.append(RunReturn(run.composed, (error or RunFailedError(why)) if failed else value,
                                 overrides=list(filter_overrides(run.overrides)),
                                 working_dir=report.working_dir if report else None,
                                 task_name=(report.task_name if report else None) or name,
                                 status=JobStatus.FAILED if failed else JobStatus.COMPLETED))
        return out


def planned_line(total: int, todo: int, timings: dict[str, float]) -> str:
    """What a batch's plan decided, in one line."""
    if not todo:
        return f"nothing to run: all {total} runs already recorded or repeating another"
    seconds = timings["compose"] + timings["prepare"]
    skipped = total - todo
    return (f"planned {total} runs in {seconds:.1f} s: {todo} to run"
            + (f", {skipped} already recorded or repeating another" if skipped else ""))


def failed_error(stats: SweepStats) -> RunFailedError:
    """What a failed run's JobReturn raises: how many failed, the first in job order (the job Hydra names when
    it reads the returns in order), and whether any completed."""
    run, report = min(stats.failures, key=lambda failure: failure[0].index)
    rest = "the others completed" if stats.done + stats.skipped else "none completed"
    return RunFailedError(f"{stats.failed} of {stats.total} runs failed (first: #{run.index}, {report.error}); {rest}"
                          f"; each run's traceback.txt is in its MLflow run (the FAILED lines above)")


def write_stats(path: Path, stats: SweepStats, timings: dict[str, float]) -> None:
    """Counts and phase timings (seconds) of a batch, for benchmarks and post-mortems."""
    counts = {k: getattr(stats, k) for k in ("total", "done", "failed", "skipped", "not_run", "interrupted", "stopped")}
    path.write_text(json.dumps({**counts, "seconds": stats.seconds, "timings": timings}, indent=1))


class InProcess:
    """``hydra/launcher=serial``: every run in this process, one after another (what Hydra's basic launcher
    does, planned, claimed and recorded like any other)."""

    local = True

    def __init__(self, progress: bool = True) -> None:
        self.progress = progress

    def preflight(self) -> None:
        return None

    def run(self, sweep: Sweep, batch: Batch, runtime_env: dict[str, Any]) -> None:
        tic = time.perf_counter()
        progress = Progress(len(batch.todo), batch.stats, enabled=self.progress)
        try:
            for run in batch.todo:
                job = batch.submit(run)
                if job is not None:
                    base = functools.partial(sweep.base, job.config)
                    batch.ended(run, execute(job, base, sweep.config, sweep.sweep_dir, sweep.task_function,
                                             sweep.callbacks, socket.gethostname(), limit=sweep.run_timeout))
                progress.show(done=1)
        finally:
            batch.stats.seconds += time.perf_counter() - tic
            progress.close()

    def close(self) -> None:
        return None


class Progress:
    """A tqdm bar over the runs to execute (done / failed / skipped / running, ETA); skipped runs are counted,
    not timed."""

    def __init__(self, total: int, stats: SweepStats, enabled: bool = True) -> None:
        self.stats, self.running = stats, -1
        self.bar = tqdm(total=total, desc="sweep", unit="run", disable=not enabled, file=sys.stderr,
                        dynamic_ncols=True, smoothing=0.1)
        self.show(running=0)

    def show(self, done: int = 0, running: int | None = None) -> None:
        """Advance the bar by ``done`` runs and set how many are ``running``; redrawn when either changes."""
        if not done and running in (None, self.running):
            return
        self.running = self.running if running is None else running
        self.bar.update(done)
        s = self.stats
        self.bar.set_postfix_str(f"done={s.done} failed={s.failed} skipped={s.skipped} running={self.running}",
                                 refresh=True)

    def close(self) -> None:
        self.bar.close()


def print_summary(stats: SweepStats) -> None:
    """A batch's summary on stdout: counts, then one line per failed run."""
    head = "sweep interrupted" if stats.interrupted else "sweep stopped" if stats.stopped else "sweep finished"
    line = (f"{head} in {stats.seconds:.1f} s: {stats.total} runs — {stats.done} done, {stats.failed} failed, "
            f"{stats.skipped} skipped")
    if stats.skips:
        line += f" ({', '.join(f'{n} {why}' for why, n in stats.skips.most_common())})"
    if stats.not_run:
        line += f", {stats.not_run} not run"
    print(line)
    for run, report in sorted(stats.failures, key=lambda failure: failure[0].index):
        where = f"; traceback.txt in MLflow run {report.recorded}" if report.recorded else ""
        print(f"  FAILED #{run.index} ({run.name}): {report.error}{where}")
    if stats.interrupted:
        print("  rerun the same command to resume: finished runs are skipped")
    sys.stdout.flush()
