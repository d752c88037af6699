"""The precision sweeper's work: cells from the sweep axes, rounds of seeds, results as they come back.

A plain Hydra sweeper: each round asks the configured launcher (``launch(job_overrides, initial_job_idx)``)
for the seeds :func:`sim.precision.judge` wants for every unsettled cell; how they run — planned, resumed,
claimed and recorded, one Ray session for every round — is the launcher's business. A run's metrics are its
:class:`sweeps.record.RunResult`'s, whether it ran now or was recorded before (a plain
:class:`sweeps.task.RunOutcome` from a launcher that does not record); a cell whose results say its workload
ignores the seed is deterministic. A failed run is counted, never retried within the sweep (a rerun of the
sweep retries it, like any unfinished run); a seed another live sweep is running is left to it.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn, JobStatus
from hydra.errors import CompactHydraException
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from sim import precision as stats
from sweeps._hydra import job_error
from sweeps.record import RunResult

log = logging.getLogger(__name__)


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
        except stats.RuleError as error:
            raise PrecisionSweepError(f"hydra.sweeper: {error}") from None
        self.baseline = baseline
        self.seed_key = seed_key
        self.params = dict(params or {})
        self.sweeper: Any = None

    def setup(self, sweeper: Any, *, hydra_context: HydraContext, task_function: TaskFunction,
              config: DictConfig) -> None:
        sweeper.hydra_context, sweeper.config = hydra_context, config
        sweeper.launcher = Plugins.instance().instantiate_launcher(hydra_context=hydra_context,
                                                                   task_function=task_function, config=config)
        self.sweeper = sweeper

    def sweep(self, arguments: list[str]) -> list[Sequence[JobReturn]]:
        """Run rounds until every cell is met, capped, failing or deterministic; print the table."""
        config = self.sweeper.config
        cells = self._cells(arguments)
        baseline_of = self._pairs(cells)
        state = {cell: stats.Cell() for cell in cells}
        sweep_dir = Path(str(config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(config, sweep_dir / "multirun.yaml")
        returns: list[Sequence[JobReturn]] = []
        index, round_no = 0, 0
        while True:
            verdicts = {str(k): v for k, v in stats.judge_paired(state, baseline_of, self.rule).items()}
            jobs = [Job(cell, state[cell].tried + k) for cell in cells for k in range(verdicts[cell].more)]
            if not jobs:
                break
            round_no += 1
            log.info(f"precision round {round_no}: {len(jobs)} runs for {len({j.cell for j in jobs})} cell(s)")
            batch = [[*cells[job.cell], f"{self.seed_key}={job.seed}"] for job in jobs]
            results = self.sweeper.launcher.launch(batch, initial_job_idx=index)
            returns.append(results)
            self._take(state, jobs, results)
            index += len(batch)
        stats.save(sweep_dir / "precision.json", verdicts, self.rule)
        print(stats.table(verdicts, self.rule.confidence), flush=True)
        print(f"precision sweep: {index} runs in {round_no} round(s); table saved in {sweep_dir / 'precision.json'}")
        elsewhere = sum(len(cell.elsewhere) for cell in state.values())
        if elsewhere:
            print(f"{elsewhere} seed(s) were running in another sweep and are not in this table: rerun this "
                  f"command once it has ended")
        return returns

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

    def _take(self, state: dict[str, stats.Cell], jobs: list[Job], results: Sequence[JobReturn]) -> None:
        """File each run's metrics (or its failure) under its cell and seed (``results[i]`` is ``jobs[i]``'s)."""
        for job, ret in zip(jobs, results, strict=True):
            value = ret.return_value if ret.status == JobStatus.COMPLETED else None
            if ret.status != JobStatus.COMPLETED:
                log.warning(f"{job.cell} {self.seed_key}={job.seed} failed: {job_error(ret)}")
                state[job.cell].failed.add(job.seed)
            elif not isinstance(value, RunResult):  # a launcher that does not record: the task's RunOutcome
                self._file(state, job, dict(value.summary))
            elif value.elsewhere is not None:  # another live sweep runs it: its result is that sweep's
                state[job.cell].elsewhere.add(job.seed)
            else:
                state[job.cell].deterministic |= not value.stochastic
                if value.stochastic or value.same_as is None:  # a replay's other seeds repeat its one run
                    self._file(state, job, value.metrics)

    def _file(self, state: dict[str, stats.Cell], job: Job, summary: dict[str, float]) -> None:
        missing = [t.metric for t in self.rule.targets if t.metric not in summary]
        if missing:
            run = f"{job.cell} {self.seed_key}={job.seed}"
            raise PrecisionSweepError(f"hydra.sweeper.metrics: {missing[0]!r} is not a metric of run '{run}'; "
                                      f"its metrics: {', '.join(sorted(summary))}")
        state[job.cell].results[job.seed] = {t.metric: float(summary[t.metric]) for t in self.rule.targets}


def _per_metric(value: Any, metric: str, name: str) -> float | None:
    """A half-width option for one metric: one number for all, or a ``{metric: number}`` map."""
    if value is None or isinstance(value, int | float):
        return value
    if OmegaConf.is_dict(value) or isinstance(value, dict):
        given = value.get(metric)
        return None if given is None else float(given)
    raise PrecisionSweepError(f"hydra.sweeper.{name} must be a number or a {{metric: number}} map, got {value!r}")
