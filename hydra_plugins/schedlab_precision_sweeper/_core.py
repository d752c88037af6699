"""The precision sweeper's work: cells from the sweep axes, rounds of seeds, results read back.

Each round launches, for every unsettled cell, the seeds :func:`analysis.precision.judge` asks for,
through the configured launcher. A run's metrics come from its ``JobReturn`` (a
:class:`sweeps.task.RunOutcome`); a run the launcher skipped because MLflow already holds it
finished (the Ray launcher returns no value for it) is read back from that store through
:func:`analysis.runs.load_runs`, by its ``schedlab.run_key``. A failed run is counted, never
retried within the sweep (a rerun of the sweep retries it, like any unfinished run).

On schedlab's Ray launcher every round would start and stop its own Ray instance (~20 s each on a
small machine); the sweeper instead starts Ray once, before the first round, the way the launcher
would (its options, its checks, the first round validated first), and the launcher leaves a Ray
this process already runs alone.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn, JobStatus
from hydra.errors import CompactHydraException
from hydra.types import HydraContext, TaskFunction
from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from analysis import AnalysisError
from analysis import precision as stats

log = logging.getLogger(__name__)

#: workload specs that replay a file, used until every spec says ``stochastic`` itself
REPLAYS = ("sweeps.specs.TraceFile", "sweeps.specs.WorkflowFile")
#: the reasons the recording path gives for a run it skips (``JobReturn.task_name`` of the Ray launcher)
SKIPPED = re.compile(r"finished in MLflow run (?P<run_id>\w+)")
DUPLICATE = re.compile(r"same run as #(?P<index>\d+)")


class PrecisionSweepError(CompactHydraException):
    """A precision sweep that cannot run as configured; Hydra prints only the message."""


@dataclass(frozen=True)
class Job:
    """One launched run: its cell and seed."""

    cell: str
    seed: int


class PrecisionSweep:
    """The sweep loop behind :class:`~hydra_plugins.schedlab_precision_sweeper.precision_sweeper.PrecisionSweeper`."""

    def __init__(self, metrics: Sequence[str], relative_halfwidth: Any = None, absolute_halfwidth: Any = None,
                 confidence: float = 0.95, initial: int = 5, batch: int = 5, max_replications: int = 100,
                 max_failures: int = 3, extrapolate: bool = False, baseline: str | None = None, seed_key: str = "seed",
                 params: dict[str, str] | None = None) -> None:
        try:
            self.rule = stats.Rule(
                tuple(stats.Target(str(m), _per_metric(relative_halfwidth, m, "relative_halfwidth"),
                                   _per_metric(absolute_halfwidth, m, "absolute_halfwidth")) for m in metrics),
                confidence=confidence, initial=initial, batch=batch, max_replications=max_replications,
                max_failures=max_failures, extrapolate=extrapolate)
        except AnalysisError as error:
            raise PrecisionSweepError(f"hydra.sweeper: {error}") from None
        self.baseline = baseline
        self.seed_key = seed_key
        self.params = dict(params or {})
        self.sweeper: Any = None
        self.launcher: Any = None
        self.verdicts: dict[str, stats.Verdict] = {}
        self.by_index: dict[int, dict[str, float] | None] = {}  # job index → its target metrics (None: failed)

    def setup(self, sweeper: Any, *, hydra_context: HydraContext, task_function: TaskFunction,
              config: DictConfig) -> None:
        sweeper.hydra_context, sweeper.config = hydra_context, config
        self.sweeper = sweeper
        self.launcher = Plugins.instance().instantiate_launcher(hydra_context=hydra_context,
                                                                task_function=task_function, config=config)

    def sweep(self, arguments: list[str]) -> list[Sequence[JobReturn]]:
        """Run rounds until every cell is met, capped, failing or deterministic; print the table."""
        from hydra_plugins.schedlab_ray_launcher.sweeper import validate_batch

        config = self.sweeper.config
        cells = self._cells(arguments)
        baseline_of = self._pairs(cells)
        state = {cell: stats.Cell(deterministic=not self._stochastic(overrides)) for cell, overrides in cells.items()}
        sweep_dir = Path(str(config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(config, sweep_dir / "multirun.yaml")
        returns: list[Sequence[JobReturn]] = []
        index, round_no = 0, 0
        with contextlib.ExitStack() as session:
            while True:
                self.verdicts = {str(k): v for k, v in stats.judge_paired(state, baseline_of, self.rule).items()}
                jobs = [Job(cell, state[cell].tried + k) for cell in cells for k in range(self.verdicts[cell].more)]
                if not jobs:
                    break
                round_no += 1
                log.info(f"precision round {round_no}: {len(jobs)} runs for {len({j.cell for j in jobs})} cell(s)")
                batch = [[*cells[job.cell], f"{self.seed_key}={job.seed}"] for job in jobs]
                if not validate_batch(self.sweeper.hydra_context, config, batch):
                    self.sweeper.validate_batch_is_legal(batch)
                if round_no == 1:  # every run of the first round composes and is valid: now start Ray, once
                    session.enter_context(_one_ray(self.launcher, functools.partial(self._planned, batch)))
                results = self.launcher.launch(batch, initial_job_idx=index)
                returns.append(results)
                self._take(state, jobs, results, index)
                index += len(batch)
        stats.save(sweep_dir / "precision.json", self.verdicts, self.rule)
        print(stats.table(self.verdicts, self.rule.confidence), flush=True)
        print(f"precision sweep: {index} runs in {round_no} round(s); table saved in {sweep_dir / 'precision.json'}")
        return returns

    # -- the cells ---------------------------------------------------------------------------------
    def _cells(self, arguments: list[str]) -> dict[str, list[str]]:
        """Cell label → its overrides: the product of the sweep axes (fixed overrides in every cell)."""
        parser = OverridesParser.create(config_loader=self.sweeper.hydra_context.config_loader)
        params = {k: v for k, v in self.params.items() if k != self.seed_key}
        if len(params) < len(self.params):  # e.g. an experiment written for the basic sweeper
            log.info(f"hydra/sweeper=precision: hydra.sweeper.params.{self.seed_key} left out, the seeds are "
                     f"the replication index (0, 1, 2 … per cell)")
        overrides = parser.parse_overrides([*(f"{k}={v}" for k, v in params.items()), *arguments])
        axes: dict[str, list[str]] = {}
        for override in overrides:
            key = override.get_key_element()
            if key.lstrip("+~") == self.seed_key:
                raise PrecisionSweepError(
                    f"hydra/sweeper=precision chooses the seeds (0, 1, 2 … per cell): remove '{override.input_line}' "
                    f"from the command line")
            if override.is_sweep_override():
                if not override.is_discrete_sweep():
                    raise PrecisionSweepError(f"hydra/sweeper=precision sweeps lists and ranges, not "
                                              f"'{override.input_line}'")
                axes[key] = [f"{key}={value}" for value in override.sweep_string_iterator()]
            else:
                axes[key] = [f"{key}={override.get_value_element_as_str()}"]
        swept = [k for k, v in axes.items() if len(v) > 1]
        cells: dict[str, list[str]] = {}
        for combo in itertools.product(*axes.values()):
            label = " ".join(o for o in combo if o.split("=", 1)[0] in swept) or "(defaults)"
            cells[label] = list(combo)
        return cells

    def _pairs(self, cells: dict[str, list[str]]) -> dict[str, str | None]:
        """Paired mode: each cell → the cell that differs only in having the ``baseline`` level."""
        if self.baseline is None:
            return dict.fromkeys(cells)
        key = self.baseline.split("=", 1)[0]
        levels = {o for overrides in cells.values() for o in overrides if o.split("=", 1)[0] == key}
        if self.baseline not in levels:
            raise PrecisionSweepError(f"hydra.sweeper.baseline={self.baseline!r} is not a level of the sweep; "
                                      f"levels of {key}: {', '.join(sorted(levels)) or 'none (not an axis)'}")
        by_overrides = {tuple(overrides): cell for cell, overrides in cells.items()}
        pairs: dict[str, str | None] = {}
        for cell, overrides in cells.items():
            swapped = tuple(self.baseline if o.split("=", 1)[0] == key else o for o in overrides)
            partner = by_overrides[swapped]
            pairs[cell] = None if partner == cell else partner
        return pairs

    def _stochastic(self, overrides: list[str]) -> bool:
        """Whether a cell's workload depends on the seed: its spec's ``stochastic`` flag when it has one;
        otherwise every workload but the file replays of :data:`REPLAYS` counts as stochastic."""
        loader = self.sweeper.hydra_context.config_loader
        cfg = loader.load_sweep_config(self.sweeper.config, [*overrides, f"{self.seed_key}=0"])
        target = OmegaConf.select(cfg, "workload._target_", default=None)
        if target is None:
            return True
        flag = getattr(get_class(str(target)), "stochastic", None)
        return bool(flag) if flag is not None else str(target) not in REPLAYS

    def _planned(self, batch: list[list[str]]) -> list[Any]:
        """The runs of ``batch`` as the Ray launcher's hook sees them (for its validation): plain data
        where the composition cache can describe a run, else the config its check composed and kept."""
        from hydra_plugins.schedlab_ray_launcher._compose import CachingConfigLoader
        from hydra_plugins.schedlab_ray_launcher.hooks import PlannedRun

        loader, config = self.sweeper.hydra_context.config_loader, self.sweeper.config
        if not isinstance(loader, CachingConfigLoader):
            return [PlannedRun(i, overrides, loader.load_sweep_config(config, overrides))
                    for i, overrides in enumerate(batch)]
        runs = []
        for i, overrides in enumerate(batch):
            plain = loader.plain(config, overrides)  # described as plain data, or composed (and kept)
            run = PlannedRun(i, overrides, loader.peek(config, overrides) if plain is None else None)
            if plain is not None:
                run.plain, run.choices, run.recipe = plain
            runs.append(run)
        return runs

    # -- the results -------------------------------------------------------------------------------
    def _take(self, state: dict[str, stats.Cell], jobs: list[Job], results: Sequence[JobReturn], first: int) -> None:
        """File each run's metrics (or its failure) under its cell and seed (job ``first`` + i is ``jobs[i]``)."""
        recorded: dict[str, Job] = {}  # MLflow run id → the skipped job it answers
        reasons = self._reasons(results)
        for i, (job, ret) in enumerate(zip(jobs, results, strict=True)):
            if ret.status != JobStatus.COMPLETED:
                log.warning(f"{job.cell} {self.seed_key}={job.seed} failed: {ret._return_value}")
                self._file(state, job, first + i, None)
            elif ret.return_value is not None:
                self._file(state, job, first + i, dict(ret.return_value.summary))
            elif (found := SKIPPED.search(reasons[i])) is not None:  # finished in MLflow before
                recorded[found["run_id"]] = job
            elif (same := DUPLICATE.search(reasons[i])) is not None:  # the same run as an earlier job
                self._file(state, job, first + i, self.by_index.get(int(same["index"])))
            else:
                log.warning(f"{job.cell} {self.seed_key}={job.seed}: the launcher returned no result "
                            f"({ret.task_name}); counted as failed")
                self._file(state, job, first + i, None)
        if recorded:
            metrics = _recorded(*self._store(results), list(recorded))
            for run_id, job in recorded.items():
                self._file(state, job, first + jobs.index(job), metrics[run_id])

    def _reasons(self, results: Sequence[JobReturn]) -> list[str]:
        """Why each job returned no result: the Ray launcher says so in ``task_name``; an in-process job
        (basic launcher) that the recording path skipped says nothing, so the sweep's tracker is asked
        again, the way the recording callback asked it before the job (one store query)."""
        reasons = [str(ret.task_name) for ret in results]
        silent = {i: ret for i, ret in enumerate(results) if ret.status == JobStatus.COMPLETED
                  and ret.return_value is None and not SKIPPED.search(reasons[i]) and not DUPLICATE.search(reasons[i])
                  and isinstance(ret.cfg, DictConfig)}
        if silent:
            from sweeps.hook import SweepTracker, group_choices, task_config

            tracker = SweepTracker(summary=False)
            tracker.configure(self.sweeper.config)
            plain = {i: task_config(ret.cfg) for i, ret in silent.items()}
            for i, ret in silent.items():  # its choices and overrides give its label, as the recording path had it
                tracker.check(i, plain[i], group_choices(ret.hydra_cfg), list(ret.overrides or []))
            answers = tracker.plan_configs(plain)
            for i, answer in zip(silent, answers, strict=True):
                reasons[i] = answer or reasons[i]
        return reasons

    def _file(self, state: dict[str, stats.Cell], job: Job, index: int, summary: dict[str, float] | None) -> None:
        if summary is None:
            state[job.cell].failed.add(job.seed)
            self.by_index[index] = None
        else:
            state[job.cell].results[job.seed] = self.by_index[index] = self._metrics(job, summary)

    def _store(self, results: Sequence[JobReturn]) -> tuple[str, str]:
        """The MLflow store and experiment the recording path wrote to (its tracker's, else the config's)."""
        tracker = getattr(self.launcher, "options", {}).get("hook")
        if getattr(tracker, "store", None) is not None:
            return str(tracker.store.uri), str(tracker.experiment_name)
        from sweeps.hook import task_config

        plain = task_config(next(r.cfg for r in results if isinstance(r.cfg, DictConfig)))
        return str((plain.get("tracking") or {}).get("uri") or ""), str(plain.get("experiment_name"))

    def _metrics(self, job: Job, summary: dict[str, float]) -> dict[str, float]:
        missing = [t.metric for t in self.rule.targets if t.metric not in summary]
        if missing:
            run = f"{job.cell} {self.seed_key}={job.seed}"
            raise PrecisionSweepError(f"hydra.sweeper.metrics: {missing[0]!r} is not a metric of run '{run}'; "
                                      f"its metrics: {', '.join(sorted(summary))}")
        return {t.metric: float(summary[t.metric]) for t in self.rule.targets}


@contextlib.contextmanager
def _one_ray(launcher: Any, first_round: Callable[[], Sequence[Any]]) -> Iterator[None]:
    """One Ray instance for every round when ``launcher`` is schedlab's Ray launcher: started (or
    joined) with the launcher's own preflight and connect, so its options and checks apply, once its
    hook found the first round's runs valid (as the launcher has it check before Ray starts), and shut
    down after the last round. Other launchers run as they are."""
    from hydra_plugins.schedlab_ray_launcher.ray_launcher import RayLauncher

    if not isinstance(launcher, RayLauncher):
        yield
        return

    from hydra_plugins.schedlab_ray_launcher import _core as ray_core

    options = launcher.options
    address = ray_core._preflight(options)
    hook = options.get("hook")
    if hook is not None:
        hook.validate(launcher.config, first_round())
    started = ray_core._connect(options, address, hook.runtime_env() if hook is not None else {})
    try:
        yield
    finally:
        if started:
            ray_core.shutdown()


def _per_metric(value: Any, metric: str, name: str) -> float | None:
    """A half-width option for one metric: one number for all, or a ``{metric: number}`` map."""
    if value is None or isinstance(value, int | float):
        return value
    if OmegaConf.is_dict(value) or isinstance(value, dict):
        unknown = value.get(metric)
        return None if unknown is None else float(unknown)
    raise PrecisionSweepError(f"hydra.sweeper.{name} must be a number or a {{metric: number}} map, got {value!r}")


def _recorded(uri: str, experiment: str, run_ids: list[str]) -> dict[str, dict[str, float] | None]:
    """The metrics of these finished runs, read back from the sweep's MLflow store (None: not there)."""
    from analysis.runs import load_runs

    try:
        runs = load_runs(experiment, uri)
    except AnalysisError as error:
        raise PrecisionSweepError(f"cannot read back the runs the launcher skipped: {error}") from None
    return {run_id: runs.metrics.loc[run_id].dropna().to_dict() if run_id in runs.metrics.index else None
            for run_id in run_ids}
