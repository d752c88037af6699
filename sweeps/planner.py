"""Which runs of a sweep to run, and their records: validate every run, skip those recorded before, claim
the rest as they start and record each result in MLflow (:class:`sweeps.record.RunRecord`, written by the
Ray worker or here).

A :class:`Planner` works on plain run configs; schedlab's sweepers (``hydra_plugins``) hand it each batch
and launch only what it leaves to do; schedlab's Hydra callback (sweeps/callback.py) hands it a single run.

A run is skipped when a FINISHED run has the same identity: its ``run_key`` (the semantic config and
the policy's label; without the seed when the workload is not stochastic, so a seed sweep of a replay
runs once per cell) and, with ``sweep.reuse=same`` (the default), the same ``schedlab.code`` and
``schedlab.inputs`` (:mod:`sweeps.identity`). ``sweep.reuse=any`` matches on the run key alone.

A policy's label (run name, end-of-sweep table, the MLflow param ``policy``) is its config choice
(``policy=easy``, ``policy=mine``); a ``policy._target_=…`` override is labelled by its class.

A run to do is claimed as it starts (:mod:`sweeps.claims`): its MLflow run is created RUNNING and its
record written into it, so sweeps sharing a store run each key once; a live claim of another sweep is
skipped ("running in another sweep"), a dead one taken over.
"""

from __future__ import annotations

import importlib.metadata
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any, Protocol

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import CompactHydraException
from hydra.types import RunMode
from omegaconf import DictConfig, ListConfig, OmegaConf

from sim.core import InputError
from sweeps import task
from sweeps.claims import CLAIM_TAGS, Claimant, Heartbeat, Recorded, alive, stale_sweeps
from sweeps.identity import REUSE, CodeHasher, Fingerprint, InputHasher, changed_files, own_package
from sweeps.record import (
    CODE_FILES_TAG,
    CODE_TAG,
    INPUT_FILES_TAG,
    INPUTS_TAG,
    RunRecord,
    StoreLocation,
    reusable,
    run_params,
    targets,
)
from sweeps.summary import format_policy_table
from sweeps.tracking import TAG, Claim, MlflowStore, browse, git_commit, open_store, run_key

#: where runs go when the command line changes what the default experiment computes (see :func:`adhoc`)
ADHOC_EXPERIMENT = "schedlab-adhoc"


class InvalidSweepError(CompactHydraException):
    """A run of the sweep is invalid: nothing was run (Hydra prints only the message)."""


class Run(Protocol):
    """A run as the planner sees it: its index in the sweep, plain config, group choices and overrides."""

    index: int
    plain: dict[str, Any]
    choices: dict[str, str]
    overrides: list[str]

    @property
    def label(self) -> str: ...


def task_config(cfg: DictConfig) -> dict[str, Any]:
    """The run's resolved config as a plain dict, without the ``hydra`` node."""
    plain: dict[str, Any] = {}
    for key in cfg:
        if key != "hydra":
            value = OmegaConf.select(cfg, str(key), throw_on_missing=False)
            plain[str(key)] = (OmegaConf.to_container(value, resolve=True, throw_on_missing=False)
                               if isinstance(value, DictConfig | ListConfig) else value)
    return plain


def group_choices(cfg: DictConfig) -> dict[str, str]:
    """The config-group choices Hydra recorded for a composed run (``{"policy": "easy", …}``), without
    Hydra's own groups."""
    choices = OmegaConf.select(cfg, "hydra.runtime.choices", default=None) or {}
    return {str(k): str(v) for k, v in choices.items() if not str(k).startswith("hydra") and v is not None}


@cache
def schedlab_version() -> str:
    try:
        return importlib.metadata.version("schedlab")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class Planner:
    """Validates, de-duplicates, claims and records runs; one instance per sweep, on the driver."""

    def __init__(self, summary: bool = True) -> None:
        self.summary = summary
        self.sweep_id = f"{datetime.now():%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"
        self.store: MlflowStore | None = None
        self.experiment_name = ADHOC_EXPERIMENT
        self.adhoc = False
        self.swept: frozenset[str] = frozenset()
        self.cfgs: dict[int, dict[str, Any]] = {}
        self.parts: dict[int, task.RunParts] = {}
        self.workloads: dict[int, str] = {}
        self.labels: dict[int, str] = {}
        self.overrides: dict[int, Sequence[str]] = {}
        self.keys: dict[int, str] = {}
        self.inputs: dict[int, Fingerprint] = {}
        self.code: dict[int, Fingerprint] = {}
        self.first: dict[str, int] = {}  # run key → the first run of this sweep with it
        self.seeds: dict[str, set[Any]] = {}  # run key of a deterministic run → the seeds asked for
        self.reran: Counter[str] = Counter()
        self.hasher = InputHasher()
        self.code_hasher = CodeHasher()
        #: (policy label, policy config, metrics) of every run finished now or before, for the summary table
        self.results: list[tuple[str, dict[str, Any], dict[str, float]]] = []
        self.run_ids: dict[int, str] = {}
        self.existing: dict[tuple[str, str], dict[str, list[Any]]] = {}  # (store, experiment) → runs by key
        self.claims: dict[int, Claim] = {}
        self.records: dict[int, RunRecord] = {}  # of claimed runs until they are recorded
        self.elsewhere: Counter[str] = Counter()  # sweep id → runs skipped because it is running them
        self.taken_over = 0  # claims of dead sweeps marked KILLED
        self.killed: set[str] = set()
        self.changed_inputs: Counter[str] = Counter()  # files runs read with other contents than planned
        self.heartbeat: Heartbeat | None = None
        self.workers_claim = False  # Ray workers claim their runs as they start (see claim_on_workers)

    def validate(self, config: DictConfig, runs: Sequence[Run]) -> None:
        """Check every run (raises :class:`InvalidSweepError` naming each problem and the runs it hits)."""
        if not runs:
            raise InvalidSweepError("the sweep has no runs (an empty value list, e.g. seed='range(0,0)'); "
                                    "nothing was run")
        self.configure(config)
        errors: dict[str, list[Run]] = {}
        for run in runs:
            try:
                self.check(run.index, run.plain, run.choices, run.overrides)
            except InputError as e:
                errors.setdefault(str(e), []).append(run)
        if not errors:
            errors = self.unreadable([run for run in runs if run.index in self.parts], len(runs))
        if errors:
            lines = [f"{message}\n    ({_which(bad, len(runs))})" for message, bad in errors.items()]
            raise InvalidSweepError("invalid configuration, nothing was run:\n  " + "\n  ".join(lines))

    def unreadable(self, runs: Sequence[Run], total: int) -> dict[str, list[Run]]:
        """Read each replayed input once, on the driver (a trace with a bad line): when no run of the sweep
        could read its input, the errors — nothing is started; otherwise ``{}``, and the runs with a bad
        input fail in their workers and are recorded FAILED beside the others."""
        errors: dict[str, list[Run]] = {}
        read: dict[str, str | None] = {}
        for run in runs:
            parts, cfg = self.parts[run.index], self.cfgs[run.index]
            if parts.workload.stochastic or not parts.workload.input_files():
                return {}
            replay = repr((cfg.get("workload"), cfg.get("cluster")))
            if replay not in read:
                try:
                    task.check_inputs(parts)
                    read[replay] = None
                except InputError as error:
                    read[replay] = str(error)
            if read[replay] is None:
                return {}
            errors.setdefault(read[replay], []).append(run)
        return errors if sum(map(len, errors.values())) == total else {}

    def runtime_env(self) -> dict[str, Any]:
        """The researcher's own packages the planned runs' ``_target_`` s live in, for Ray to ship to a
        cluster's nodes (``py_modules``: a package folder or a single module file each)."""
        places = {own[1] for cfg in self.cfgs.values() for target in targets(cfg).values()
                  if (own := own_package(target)) is not None}
        return {"py_modules": sorted(str(place) for place in places)} if places else {}

    def recorder(self, index: int) -> RunRecord | None:
        """The record of claimed run ``index`` for its worker to write (``None``: nothing is recorded)."""
        return self.run_record(index) if self.store is not None else None

    def on_result(self, index: int, report: Any) -> None:
        """Run ``index`` ended (a report with ``status``, ``value``, ``error``, ``traceback``, ``node_id``,
        ``node_ip``, ``end_time`` and ``recorded``: the MLflow run id when its worker wrote the record; status
        ``SKIPPED``: its worker found it claimed or finished by another sweep, ``value`` says which)."""
        if report.status == "SKIPPED":
            self.count_elsewhere(report.value)
            return
        outcome = report.value if report.status == "FINISHED" else None
        if report.recorded is not None:
            self.recorded(index, outcome, report.recorded)
        else:
            self.record(index, report.status, outcome, report.error, report.traceback, node=report.node_id,
                        end=report.end_time, node_ip=report.node_ip)

    def finish(self) -> None:
        """The sweep ended (also when it was stopped): close, then the policy table and notes."""
        self.close()
        if self.summary and self.results:
            print(format_policy_table(self.results))
        for line in self.notes() + self.where():
            print(line)
        sys.stdout.flush()

    def close(self) -> None:
        """Claims of runs never recorded are marked KILLED (a later sweep, even in this process, runs
        them), and the heartbeat stops."""
        if self.store is not None and (self.claims or self.workers_claim):
            for run_id in self.store.running(CLAIM_TAGS[0], self.sweep_id):
                self.store.mark_killed(run_id)
        if self.heartbeat is not None:
            self.heartbeat.stop()
            self.heartbeat = None

    def claim_on_workers(self, local_ray: bool) -> None:
        """Let the Ray workers claim their runs as they start when every worker sees the store (a tracking
        server, or SQLite beside a local Ray instance): the driver's CPU then goes to planning."""
        if self.store is not None and (local_ray or self.store.uri.startswith(("http://", "https://"))):
            self.workers_claim = True
            self.start_heartbeat()

    def start_heartbeat(self) -> None:
        if self.heartbeat is None and self.store is not None:
            self.heartbeat = Heartbeat(self.store, Claimant.this(self.sweep_id))
            self.heartbeat.start()

    def configure(self, config: DictConfig) -> None:
        """Read the sweep's own config (with its ``hydra`` node): swept factors and experiment."""
        self.swept = swept_keys(config)
        self.adhoc = adhoc(config)

    def check(self, index: int, cfg: dict[str, Any], choices: dict[str, str] | None = None,
              overrides: Sequence[str] = ()) -> task.RunParts:
        """Validate one run config (raises :class:`InputError`) and keep it for planning, with its policy's
        label (:func:`policy_label`) from its config-group ``choices`` and command-line ``overrides``."""
        parts = task.prepare(cfg)
        self.non_semantic(cfg)
        reuse = (cfg.get("sweep") or {}).get("reuse", "same")
        if reuse not in REUSE:
            raise InputError(f"sweep.reuse must be one of {', '.join(REUSE)} (same: skip a finished run only "
                             f"when its config, input files and simulator code are today's), got {reuse!r}")
        self.cfgs[index], self.parts[index], self.overrides[index] = cfg, parts, list(overrides)
        self.workloads[index] = (choices or {}).get("workload") or type(parts.workload).__name__
        self.labels[index] = policy_label(cfg, (choices or {}).get("policy", ""), overrides)
        return parts

    def plan(self, indices: Iterable[int]) -> list[Recorded | None]:
        """Per run (each :meth:`check` ed first: its choices and overrides give its label, part of its key):
        ``None`` to run it, or why not (finished before, a duplicate, running in another sweep)."""
        cfgs = {i: self.cfgs[i] for i in indices}
        first = next(iter(cfgs.values()))
        sweep = first.get("sweep") or {}
        non_semantic = self.non_semantic(first)
        for i, cfg in cfgs.items():
            workload = self.parts[i].workload
            self.keys[i] = run_key(cfg, non_semantic if workload.stochastic else (*non_semantic, "seed"),
                                   label=self.labels[i])
            self.inputs[i] = self.hasher.inputs(workload.input_files())
            self.code[i] = self.code_hasher.code(targets(cfg).values())
        self.experiment_name = ADHOC_EXPERIMENT if self.adhoc else str(first.get("experiment_name") or ADHOC_EXPERIMENT)
        tracking = first.get("tracking") or {}
        existing: dict[str, list[Any]] = {}
        if tracking.get("uri"):
            self.store = open_store(str(tracking["uri"]), self.experiment_name, tracking.get("artifact_root"))
            existing = self.recorded_before(self.store)
        running = self.running_elsewhere({self.keys[i] for i in cfgs}, existing)
        decisions: list[Recorded | None] = []
        for i, cfg in cfgs.items():
            key = self.keys[i]
            if not self.parts[i].workload.stochastic:
                self.seeds.setdefault(key, set()).add(cfg.get("seed"))
            finished = [r for r in existing.get(key, []) if r.info.status == "FINISHED"]
            same = self.reusable(finished, i)
            if key in self.first:
                decisions.append(Recorded(f"same run as #{self.first[key]}", same_as=self.first[key]))
            elif key in running:
                decisions.append(Recorded(f"running in another sweep: {running[key]}", elsewhere=running[key]))
                self.elsewhere[running[key]] += 1
            elif same:
                run_id, metrics = same[0].info.run_id, dict(same[0].data.metrics)
                decisions.append(Recorded(f"finished in MLflow run {run_id}", run_id, metrics))
                self.results.append((self.labels[i], cfg.get("policy") or {}, metrics))
            else:
                if finished and not sweep.get("force", False):
                    self.reran["; ".join(self.changes(finished[0], i))] += 1
                decisions.append(None)
            self.first.setdefault(key, i)
        return decisions

    def running_elsewhere(self, keys: set[str], existing: dict[str, list[Any]]) -> dict[str, str]:
        """Run key → the live sweep running it, among ``keys``; RUNNING runs of dead sweeps (and stale
        heartbeat tags) are cleaned up on the way."""
        assert self.store is not None or not existing
        ours = {c.run_id for c in self.claims.values()} | self.killed
        claimed = [run for key in keys & set(existing) for run in existing[key]
                   if run.info.status == "RUNNING" and run.info.run_id not in ours]
        if not claimed:
            return {}
        beats, now, live = self.store.sweeps(), time.time(), {}
        for tag in stale_sweeps(beats, now):
            self.store.set_sweep_tag(tag, None)
        for run in claimed:
            if alive(run, beats, now):
                live[run.data.tags[f"{TAG}run_key"]] = run.data.tags[CLAIM_TAGS[0]]
            else:
                self.store.mark_killed(run.info.run_id)
                self.killed.add(run.info.run_id)  # the search is reused for the whole sweep
                self.taken_over += 1
        return live

    def claim(self, index: int) -> Recorded | None:
        """Create run ``index``'s MLflow run (RUNNING) before it runs; ``None`` when this sweep runs it, else
        why not: another sweep claimed or finished the same run meanwhile (its claim is then withdrawn).
        Nothing to claim when nothing is recorded (``tracking=none``)."""
        if self.store is None or index in self.claims:
            return None
        self.start_heartbeat()
        record = self.run_record(index)
        elsewhere = record.claim_in(self.store)
        if elsewhere is not None:
            self.count_elsewhere(elsewhere)
            return elsewhere
        self.claims[index] = record.claim
        return None

    def count_elsewhere(self, recorded: Recorded) -> None:
        if recorded.elsewhere is not None:
            self.elsewhere[recorded.elsewhere] += 1

    def reusable(self, finished: list[Any], index: int) -> list[Any]:
        """The FINISHED runs that stand for run ``index`` (:func:`sweeps.record.reusable`)."""
        tags = {CODE_TAG: self.code[index].digest, INPUTS_TAG: self.inputs[index].digest}
        return reusable(finished, tags, self.cfgs[index].get("sweep") or {})

    def recorded_before(self, store: MlflowStore) -> dict[str, list[Any]]:
        """The store's runs by run key as the sweep found them: one search per store and experiment per sweep
        (in-process jobs are planned one at a time; each searching again made a resume quadratic in N)."""
        where = (store.uri, store.experiment_id)
        if where not in self.existing:
            self.existing[where] = store.runs_by_key()
        return self.existing[where]

    def changes(self, run: Any, index: int) -> list[str]:
        """What differs between a recorded run and run ``index`` besides the config ([] if nothing)."""
        tags = run.data.tags
        if CODE_TAG not in tags:
            return ["recorded without code and input fingerprints"]
        why = []
        code = self.code[index]
        if tags[CODE_TAG] != code.digest:
            files = changed_files(tags.get(CODE_FILES_TAG), code.files)
            why.append(f"code changed: {', '.join(files)}" if files else "code changed")
        inputs = self.inputs[index]
        if tags.get(INPUTS_TAG) != inputs.digest:
            files = changed_files(tags.get(INPUT_FILES_TAG), inputs.files)
            why.append(f"input file changed: {', '.join(files)}" if files else "input files changed")
        return why

    def notes(self) -> list[str]:
        """What the sweep decided for the user: reruns and why, collapsed seeds, where runs went."""
        lines = [f"{n} reran: {why}" for why, n in sorted(self.reran.items())]
        lines += [f"input file {name} changed during the sweep: {n} run(s) read other contents than planned (their "
                  f"records say so: schedlab.inputs_planned); rerun the sweep so that every run reads one version"
                  for name, n in sorted(self.changed_inputs.items())]
        lines += [f"{n} not run here: running in another sweep ({sweep}); rerun this command once it ends"
                  for sweep, n in sorted(self.elsewhere.items())]
        if self.taken_over:
            lines.append(f"{self.taken_over} run(s) left RUNNING by a sweep that died: marked KILLED and run again")
        per_workload: dict[str, int] = {}
        for i, key in self.keys.items():
            if key in self.seeds and len(self.seeds[key]) > 1:
                per_workload[self.workloads[i]] = max(per_workload.get(self.workloads[i], 0), len(self.seeds[key]))
        lines += [f"workload {name} is deterministic: {n} seeds → 1 run per cell" for name, n in per_workload.items()]
        if self.adhoc and self.store is not None:
            lines.append(f"ad-hoc runs (the command line changed the default experiment) go to {ADHOC_EXPERIMENT!r}; "
                         f"choose one with experiment=NAME or experiment_name=NAME")
        return lines

    def where(self) -> list[str]:
        """Where the sweep's runs are and the link to their table in the MLflow UI (nothing untracked)."""
        if self.store is None:
            return []
        return [f"MLflow: experiment {self.experiment_name!r} in {self.store.uri} (sweep {self.sweep_id}); "
                f"its runs: {browse(self.store.uri, self.store.experiment_id)}"]

    def record(self, index: int, status: str, outcome: task.RunOutcome | None, error: str | None,
               traceback: str | None, node: str, end: float, node_ip: str = "") -> None:
        """Log one ended run into its claim (on the driver: in-process runs, and Ray runs their worker could
        not log, or that failed before their worker claimed them)."""
        if self.store is not None and self.run_record(index).claim is None and self.claim(index) is not None:
            return  # another sweep has it
        run_id = None if self.store is None else \
            self.run_record(index).write(status, outcome, error, traceback, node, end, node_ip)
        self.recorded(index, outcome, run_id)

    def recorded(self, index: int, outcome: task.RunOutcome | None, run_id: str | None = None) -> None:
        """Keep an ended run's metrics for the summary (and its MLflow run id once it is logged)."""
        if outcome is not None:
            self.results.append((self.labels[index], self.cfgs[index].get("policy") or {}, dict(outcome.summary)))
            planned = self.inputs[index].files
            for name in [n for n, digest in outcome.inputs.items() if planned.get(n) != digest]:
                self.changed_inputs[name] += 1
        if run_id is not None:
            self.run_ids[index] = run_id
            self.records.pop(index, None)

    def identity_tags(self, index: int) -> dict[str, str]:
        """What identifies run ``index`` (run key, code and input fingerprints, classes), set when it is
        claimed so that other sweeps find it."""
        cfg, inputs, code = self.cfgs[index], self.inputs[index], self.code[index]
        tags = {f"{TAG}run_key": self.keys[index], f"{TAG}sweep_id": self.sweep_id, f"{TAG}git_commit": git_commit(),
                f"{TAG}version": schedlab_version(), CODE_TAG: code.digest, INPUTS_TAG: inputs.digest,
                **{f"{TAG}target.{group}": target for group, target in targets(cfg).items()}}
        if inputs.files and inputs.manifest:
            tags[INPUT_FILES_TAG] = inputs.manifest
        if code.manifest:
            tags[CODE_FILES_TAG] = code.manifest
        return tags

    def run_name(self, index: int) -> str:
        return run_name(self.labels[index], self.cfgs[index], self.overrides[index], self.swept,
                        seed=self.parts[index].workload.stochastic)

    def run_record(self, index: int) -> RunRecord:
        """Everything the record of run ``index`` needs but its outcome and claim (:meth:`claim` sets it here;
        else its worker claims it): made once, for its worker or, when that cannot reach the store, for the driver."""
        assert self.store is not None
        record = self.records.get(index)
        if record is None:
            cfg, label = self.cfgs[index], self.labels[index]
            location = StoreLocation.of(self.store.uri, self.experiment_name, self.store.artifact_root)
            record = self.records[index] = RunRecord(
                location, None, cfg, self.identity_tags(index), run_params(cfg, self.non_semantic(cfg), label),
                Claimant.this(self.sweep_id).tags(), self.run_name(index))
        return record

    @staticmethod
    def non_semantic(cfg: dict[str, Any]) -> tuple[str, ...]:
        """``sweep.non_semantic``: the keys that never change a run's result (listed in conf/config.yaml)."""
        listed = (cfg.get("sweep") or {}).get("non_semantic")
        if listed is None:
            raise InputError("sweep.non_semantic is missing: the keys that never change a run's result "
                             "(conf/config.yaml lists them)")
        return tuple(listed)


def policy_label(cfg: dict[str, Any], choice: str, overrides: Sequence[str] = ()) -> str:
    """A run's policy label: its ``policy=`` config choice, or the class's name when the command line
    replaced the choice's ``_target_`` (the choice's name would then claim a policy that did not run).

    >>> policy_label({"policy": {"_target_": "sim.policies.backfill.SeedBackfill"}}, "easy")
    'easy'
    >>> policy_label({"policy": {"_target_": "mysched.Mine"}}, "easy", ["policy=easy", "policy._target_=mysched.Mine"])
    'Mine'
    """
    target = str((cfg.get("policy") or {}).get("_target_", "?"))
    if choice and not any(text.lstrip("+~").partition("=")[0] == "policy._target_" for text in overrides):
        return choice
    return target.replace(":", ".").rsplit(".", 1)[-1]


def run_name(label: str, cfg: dict[str, Any], overrides: Sequence[str], swept: Iterable[str], seed: bool = True
             ) -> str:
    """The run list's name: policy label, seed, then the swept factors' values (short keys, trace files by name).

    >>> run_name("easy", {"seed": 3}, ["policy=easy", "seed=3", "workload.arrival_rate=0.02", "tracking.uri=x"],
    ...          {"policy", "seed", "workload.arrival_rate"})
    'easy seed=3 arrival_rate=0.02'
    """
    wanted = set(swept) - {"policy", "policy._target_", "seed"}
    values = {}
    for text in overrides:
        key, _, value = text.lstrip("+~").partition("=")
        if key in wanted:
            values[key] = Path(value).name if "/" in value else value
    shorts = Counter(key.rsplit(".", 1)[-1] for key in values)
    factors = [f"{key if shorts[key.rsplit('.', 1)[-1]] > 1 else key.rsplit('.', 1)[-1]}={value}"
               for key, value in values.items()]
    head = [label] + ([f"seed={cfg.get('seed')}"] if seed else [])
    return " ".join(head + factors)


def _override_keys(config: DictConfig) -> list[tuple[str, bool]]:
    """(key, is a sweep) of each command-line override of the sweep or run."""
    texts = list(OmegaConf.select(config, "hydra.overrides.task", default=[]) or [])
    return [(o.key_or_group, o.is_sweep_override()) for o in OverridesParser.create().parse_overrides(texts)]


def swept_keys(config: DictConfig) -> frozenset[str]:
    """The factors that name a run: a sweep's axes (its ``hydra.sweeper.params`` and command-line
    sweeps), or a single run's command-line overrides (bookkeeping keys left out)."""
    multirun = OmegaConf.select(config, "hydra.mode", default=None) == RunMode.MULTIRUN
    keys = {key for key, is_sweep in _override_keys(config) if is_sweep or not multirun}
    params = OmegaConf.select(config, "hydra.sweeper.params", default=None)
    if multirun and isinstance(params, DictConfig):
        keys |= {str(key) for key in params}
    return frozenset(key for key in keys if not key.startswith("hydra") and not _bookkeeping(key, config))


def adhoc(config: DictConfig) -> bool:
    """True when the command line changes what a run computes without choosing ``experiment=`` or
    ``experiment_name=``: such runs go to :data:`ADHOC_EXPERIMENT`, not into the default experiment."""
    keys = [key for key, _ in _override_keys(config)]
    if "experiment" in keys or "experiment_name" in keys:
        return False
    return any(not key.startswith("hydra") and not _bookkeeping(key, config) for key in keys)


def _bookkeeping(key: str, config: DictConfig) -> bool:
    """A key that never changes a run's result (``sweep.non_semantic``, e.g. ``tracking.uri``)."""
    listed = OmegaConf.select(config, "sweep.non_semantic", default=None)
    return any(key == d or key.startswith(d + ".") for d in (listed or ()))


def _which(bad: Sequence[Run], total: int) -> str:
    if len(bad) == total:
        return f"all {total} runs"
    return f"{len(bad)} of {total} runs, e.g. #{bad[0].index}: {bad[0].label}"
