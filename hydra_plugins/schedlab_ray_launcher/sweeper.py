"""``hydra/sweeper=schedlab``: Hydra's basic sweeper that plans each batch and launches only what is left.

:class:`SweepPlan` is the one planner of a sweep: it describes or composes each run through the
composition cache (:class:`sweeps._hydra.Composer`), has schedlab's :class:`sweeps.planner.Planner` (the
sweeper's ``planner`` option, set by schedlab's Hydra callback) validate them and look the store up once,
and hands the runs left to do to the launcher — the Ray launcher with itself as the sink that claims
and records them, Hydra's basic launcher one run at a time. A run not launched comes back as a COMPLETED
JobReturn whose value is a :class:`sweeps.planner.Recorded`. Without a planner every run is launched.

No ``from __future__ import annotations`` here: OmegaConf reads these dataclass annotations.
"""

import functools
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, List, Optional  # noqa: UP035 - OmegaConf needs typing generics

from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from hydra_plugins.schedlab_ray_launcher.batch import PlannedRun, RunReport, SweepAbortedError, SweepStats
from sweeps._hydra import Composer, basic_sweeper, finish, job_error
from sweeps.planner import Planner, Recorded, group_choices, task_config

BasicSweeper, BasicSweeperConf = basic_sweeper()


@dataclass
class SchedlabSweeperConf(BasicSweeperConf):
    """Hydra's ``basic`` sweeper options (``max_batch_size``, ``params``) and schedlab's run planner."""

    _target_: str = "hydra_plugins.schedlab_ray_launcher.sweeper.SchedlabSweeper"
    planner: Any = None  # a sweeps.planner.Planner (_target_); None: run every run, record nothing


ConfigStore.instance().store(group="hydra/sweeper", name="schedlab", node=SchedlabSweeperConf, provider="schedlab")


class SweepPlan:
    """Plans a sweep's batches and runs what is left of each; a :class:`~.batch.Sink` for the Ray launcher.
    Used as a context manager around the sweep: it ends the Ray session and says what the sweep did."""

    def __init__(self, hydra_context: HydraContext, config: DictConfig, launcher: Launcher,
                 planner: Optional[Planner]) -> None:  # noqa: UP045
        self.config, self.launcher, self.planner = config, launcher, planner
        self.composer = Composer(hydra_context.config_loader, config)
        self.sweep_dir = str(Path(str(config.hydra.sweep.dir)).absolute())
        self.on_ray = hasattr(launcher, "run")  # schedlab's Ray launcher (Hydra's plugin scan reloads its class)

    def __enter__(self) -> "SweepPlan":
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self.on_ray:
                self.launcher.close()
        finally:
            if self.planner is not None:
                self.planner.finish()

    def planned(self, overrides: Sequence[str], idx: int) -> PlannedRun:
        """One run: described as plain data when the cache can (composed by the worker, which checks it), else
        composed now; for Hydra's basic launcher, which composes each run itself, composed as it does."""
        build = functools.partial(self._compose, list(overrides), idx)
        run = PlannedRun(idx, list(overrides), build=build)
        described = self.composer.describe(run.overrides) if self.on_ray else None
        if described is not None:
            run.plain, run.choices, run.recipe = described
        else:
            cfg = run.composed()
            if self.planner is not None:
                run.plain, run.choices = task_config(cfg), group_choices(cfg)
        return run

    def _compose(self, overrides: list[str], idx: int) -> DictConfig:
        cfg = (self.composer.compose(overrides) if self.on_ray
               else self.composer.loader.load_sweep_config(self.config, overrides))  # the basic launcher's compose
        return finish(cfg, idx, self.sweep_dir)

    def decide(self, runs: list[PlannedRun]) -> list[Optional[Recorded]]:  # noqa: UP045
        """The planner's decision per run (``None``: run it); every run invalid → nothing runs."""
        if self.planner is None:
            return [None] * len(runs)
        self.planner.validate(self.config, runs)
        try:
            return self.planner.plan(run.index for run in runs)
        except Exception as error:
            raise SweepAbortedError(f"could not plan the sweep: {type(error).__name__}: {error}; "
                                    f"nothing was run") from error

    def run(self, batch: Sequence[Sequence[str]], first: int) -> List[JobReturn]:  # noqa: UP006
        """Plan one batch, run what is left, print its summary; the JobReturns in job order."""
        from hydra_plugins.schedlab_ray_launcher import _core
        from hydra_plugins.schedlab_ray_launcher._progress import print_summary

        if self.on_ray:
            self.launcher.preflight()  # bad options, no cluster: refused before anything is planned
        tic = time.perf_counter()
        runs = [self.planned(overrides, first + i) for i, overrides in enumerate(batch)]
        timings = {"compose": time.perf_counter() - tic}
        tic = time.perf_counter()
        decisions = self.decide(runs)
        timings["prepare"] = time.perf_counter() - tic
        stats, returns, todo = SweepStats(total=len(runs)), {}, []
        for run, decision in zip(runs, decisions, strict=True):
            if decision is None:
                todo.append(run)
            else:
                returns[run.index] = _core.skipped_return(run, decision, self.config)
                stats.skipped += 1
        planned = timings["compose"] + timings["prepare"]
        if not todo:
            print(f"nothing to run: all {len(runs)} runs already recorded or repeating another", flush=True)
        elif self.planner is not None:
            print(f"planned {len(runs)} runs in {planned:.1f} s: {len(todo)} to run"
                  + (f", {stats.skipped} already recorded or repeating another" if stats.skipped else ""), flush=True)
        try:
            if todo and self.on_ray:
                runtime_env = self.planner.runtime_env() if self.planner is not None else {}
                sink = self if self.planner is not None else None
                if self.planner is not None:
                    self.planner.claim_on_workers(local_ray=self.launcher.options.get("address", "local") == "local")
                self.launcher.run(todo, sink, stats, returns, timings, base=self.composer.base,
                                  runtime_env=runtime_env)
            elif todo:
                self._in_process(todo, stats, returns)
        except SweepAbortedError as error:
            stats.stopped = stats.stopped or str(error)
            raise
        finally:
            print_summary(stats)
            _core.write_stats(Path(self.sweep_dir) / f"sweep-{first}.json", stats, timings)
        return _core.finish_returns(stats, returns, runs)

    def _in_process(self, todo: list[PlannedRun], stats: SweepStats, returns: dict[int, JobReturn]) -> None:
        """Hydra's basic launcher, one run at a time: each claimed before it runs, recorded when it ends."""
        from hydra_plugins.schedlab_ray_launcher._core import failed, skipped_return

        tic = time.perf_counter()
        try:
            for run in todo:
                instead = self.start(run) if self.planner is not None else None
                if instead is not None:
                    returns[run.index] = skipped_return(run, instead, self.config)
                    stats.skipped += 1
                    continue
                start = time.time()
                [ret] = self.launcher.launch([run.overrides], initial_job_idx=run.index)
                report = RunReport(run, "FINISHED", start_time=start, end_time=time.time(),
                                   node_id=socket.gethostname())
                if ret.status == JobStatus.COMPLETED:
                    report.value = ret.return_value
                else:
                    failed(report, job_error(ret))
                    stats.failures.append(report)
                if self.planner is not None:
                    self.on_result(report)
                returns[run.index] = ret
                stats.done += report.status == "FINISHED"
                stats.failed += report.status == "FAILED"
        except KeyboardInterrupt:
            stats.interrupted = True
        finally:
            stats.seconds += time.perf_counter() - tic

    # -- the Sink the Ray launcher records through -------------------------------------------------
    def start(self, run: PlannedRun) -> Optional[Recorded]:  # noqa: UP045
        return None if self.planner.workers_claim else self.planner.claim(run.index)

    def recorder(self, run: PlannedRun) -> Any:
        return self.planner.recorder(run.index)

    def on_result(self, report: RunReport) -> None:
        self.planner.on_result(report.run.index, report)


class SchedlabSweeper(BasicSweeper):
    """Hydra's basic sweeper (same batches, same multirun.yaml) whose batches go through a :class:`SweepPlan`;
    a failed run raises once every batch has run."""

    def __init__(self, max_batch_size: Optional[int], params: Optional[dict] = None,  # noqa: UP045
                 planner: Optional[Planner] = None) -> None:  # noqa: UP045
        super().__init__(max_batch_size, params)
        self.planner = planner
        self.plan: Optional[SweepPlan] = None  # noqa: UP045

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        super().setup(hydra_context=hydra_context, task_function=task_function, config=config)
        self.plan = SweepPlan(hydra_context, config, self.launcher, self.planner)

    def sweep(self, arguments: List[str]) -> Any:  # noqa: UP006
        assert self.config is not None and self.hydra_context is not None and self.plan is not None
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        self.overrides = self.split_arguments(parser.parse_overrides([*self._parse_config(), *arguments]),
                                              self.max_batch_size)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        returns: list[Sequence[JobReturn]] = []
        with self.plan:
            index = 0
            while not self.is_done():
                batch = self.get_job_batch()
                returns.append(self.plan.run(batch, index))
                index += len(batch)
        for ret in (ret for results in returns for ret in results):
            _ = ret.return_value  # a failed run raises how many failed
        return returns
