"""Which runs of a sweep to run, and their records: validate every run, skip those recorded before, claim
the rest as they start and record each result in MLflow (:class:`sweeps.record.RunRecord`, written where
the run ran or here).

A :class:`Planner` serves one sweep (schedlab's Hydra callback opens it, :func:`open_sweep`) and works on
:class:`Run` s: the launcher hands it each batch it is given, whichever sweeper made the batch, and runs only
what it leaves to do; the callback hands it a single run.

A run is skipped when a FINISHED run has the same identity: its ``run_key`` (the semantic config and
the policy's label; without the seed when the workload is not stochastic, so a seed sweep of a replay
runs once per cell) and, with ``sweep.reuse=same`` (the default), the same ``schedlab.code`` and
``schedlab.inputs`` (:mod:`sweeps.identity`). ``sweep.reuse=any`` matches on the run key alone. A run to do is
claimed as it starts (:mod:`sweeps.record`), so sweeps sharing a store run each key once; planning and claiming
apply one rule (:func:`sweeps.record.skip_rule`).
"""

from __future__ import annotations

import atexit
import dataclasses
import importlib.metadata
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.utils import filter_overrides
from hydra.errors import CompactHydraException
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from sim.core import InputError
from sweeps import task
from sweeps._hydra import group_choices, task_config
from sweeps.identity import REUSE, CodeHasher, Fingerprint, InputHasher, changed_files, places
from sweeps.record import (
    CLAIM_TAGS,
    DEAD_AFTER_SECONDS,
    Claimant,
    Heartbeat,
    RunRecord,
    RunReport,
    RunResult,
    StoreLocation,
    metrics_of,
    one_line,
    skip_rule,
    stale_sweeps,
)
from sweeps.summary import format_policy_table
from sweeps.tracking import (
    CODE_FILES_TAG,
    CODE_TAG,
    INPUT_FILES_TAG,
    INPUTS_TAG,
    SUPERSEDED_TAG,
    TAG,
    MlflowStore,
    StoreURI,
    browse,
    git_commit,
    key_of,
    non_semantic_key,
    open_store,
    semantic_config,
)

#: where runs go when the command line changes what the default experiment computes (see :func:`adhoc`)
ADHOC_EXPERIMENT = "schedlab-adhoc"


class InvalidSweepError(CompactHydraException):
    """A run of the sweep is invalid: nothing was run (Hydra prints only the message)."""


class ObjectiveError(CompactHydraException):
    """A run's result cannot give ``sweep.objective``: the sweep stops (Hydra prints only the message)."""


@dataclass
class Run:
    """One run of a sweep from planning to record. The launcher gives its index, overrides, resolved task
    config (``plain``), group ``choices`` and either the ``recipe`` a worker composes it from or the way to
    compose it here (``compose``); the planner adds the rest; ``result`` is what its JobReturn returns."""

    index: int
    overrides: list[str]
    plain: dict[str, Any]
    choices: dict[str, str]
    recipe: Any = None
    compose: Callable[[], DictConfig] | None = field(default=None, repr=False)
    config: DictConfig | None = field(default=None, repr=False)
    parts: task.RunParts | None = None
    policy: str = ""  # the policy's label (:func:`policy_label`)
    targets: dict[str, str] = field(default_factory=dict)  # the class or factory each group builds, by group
    workload: str = ""
    flat: dict[str, Any] = field(default_factory=dict)  # the semantic config, flattened once
    key: str = ""
    tags: dict[str, str] = field(default_factory=dict)  # its identity (run key, fingerprints, targets …)
    code: Fingerprint | None = None
    inputs: Fingerprint | None = None
    record: RunRecord | None = None
    result: RunResult | None = None
    #: (run id, name) of the FINISHED records of its key that it replaces (other code or inputs, or forced)
    supersedes: list[tuple[str, str]] = field(default_factory=list)

    @classmethod
    def of(cls, cfg: DictConfig, index: int = 0) -> Run:
        """A run of a config Hydra composed (the ``hydra`` node's overrides and choices included)."""
        overrides = list(OmegaConf.select(cfg, "hydra.overrides.task", default=[]) or [])
        return cls(index, overrides, task_config(cfg), group_choices(cfg), config=cfg)

    def composed(self) -> DictConfig:
        """The run's composed config (composed now if it was not, or was released)."""
        if self.config is None:
            assert self.compose is not None, f"run #{self.index} has neither a config nor a way to compose it"
            self.config = self.compose()
        return self.config

    def release(self) -> None:
        """Drop the composed config when it can be composed again."""
        if self.compose is not None:
            self.config = None

    @property
    def label(self) -> str:
        """The run's own overrides, e.g. ``policy=easy seed=3``."""
        return " ".join(filter_overrides(self.overrides)) or "(defaults)"

    @property
    def name(self) -> str:
        """The run's name as its MLflow run has it (its label before it has a record)."""
        return self.record.run_name if self.record is not None else self.label


@cache
def schedlab_version() -> str:
    try:
        return importlib.metadata.version("schedlab")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


_OPEN: dict[int, Planner] = {}  # id of a sweep's config → its planner (schedlab's callback opens it)


def open_sweep(config: DictConfig) -> Planner:
    """The planner of the sweep of ``config`` starting in this process; it finishes at :meth:`Planner.finish`
    or, if the sweep raises first, when the process exits."""
    planner = Planner()
    planner.sweep_config = config  # held: its id stays this sweep's while the planner is open
    _OPEN[id(config)] = planner
    planner.closers.append(lambda: _OPEN.pop(id(config), None))
    atexit.register(planner.finish)
    return planner


def active_sweep(config: DictConfig) -> Planner | None:
    """The planner of the sweep of ``config`` (the object Hydra hands callbacks, sweeper and launcher alike);
    ``None`` for an app without schedlab's callback."""
    return _OPEN.get(id(config))


class Planner:
    """Validates, de-duplicates, claims and records runs; one instance per sweep, on the driver."""

    def __init__(self, summary: bool = True) -> None:
        self.summary = summary
        self.sweep_id = f"{datetime.now():%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"
        self.store: MlflowStore | None = None
        self.experiment_name = ADHOC_EXPERIMENT
        self.adhoc = False
        self.swept: frozenset[str] = frozenset()
        self.objective: tuple[str, ...] = ()
        self.runs: dict[int, Run] = {}
        self.first: dict[str, int] = {}  # run key → the first run of this sweep with it
        self.seeds: dict[str, set[Any]] = {}  # run key of a deterministic run → the seeds asked for
        #: fingerprints by targets and by input files, made once per sweep for each (runs share a few)
        self.code_hasher = CodeHasher()
        self.code_of, self.inputs_of = cache(self.code_hasher.code), cache(InputHasher().inputs)
        #: (policy label, policy config, metrics) of every run finished now or before, for the summary table
        self.results: list[tuple[str, dict[str, Any], dict[str, float]]] = []
        #: (store, experiment) → its runs by key: one search per sweep (each batch searching again made a long
        #: sweep quadratic in N)
        self.existing: dict[tuple[str, str], dict[str, list[Any]]] = {}
        self.locations: dict[tuple[str, str, str | None], StoreLocation] = {}
        self.claimant = Claimant.this(self.sweep_id).tags()  # this sweep's claim tags
        self.killed: set[str] = set()  # RUNNING claims of dead sweeps marked KILLED
        self.reran: Counter[str] = Counter()
        self.elsewhere: Counter[str] = Counter()  # sweep id → runs skipped because it is running them
        self.changed_inputs: Counter[str] = Counter()  # files runs read with other contents than planned
        self.heartbeat: Heartbeat | None = None
        self.workers_claim = False  # the runs are claimed where they run (see claim_on_workers)
        self.finished = False
        self.closers: list[Callable[[], None]] = []  # what ends with the sweep (the launcher's Ray session)
        self.sweep_config: DictConfig | None = None

    # -- planning ----------------------------------------------------------------------------------
    def plan(self, config: DictConfig, runs: Sequence[Run]) -> None:
        """Validate every run (raises :class:`InvalidSweepError` naming each problem and the runs it hits),
        then decide: a run not to run here gets its ``result`` (finished before, the same run as another of
        this sweep, running in another sweep)."""
        if not runs:
            raise InvalidSweepError("the sweep has no runs (an empty value list, e.g. seed='range(0,0)'); "
                                    "nothing was run")
        self.swept, self.adhoc = swept_keys(config), adhoc(config)  # the sweep's own config, its hydra node too
        errors: dict[str, list[Run]] = {}
        for run in runs:
            try:
                self.check(run)
            except InputError as e:
                errors.setdefault(str(e), []).append(run)
        if not errors:
            errors = self.unreadable(runs)
        if errors:
            lines = [f"{message}\n    ({_which(bad, len(runs))})" for message, bad in errors.items()]
            raise InvalidSweepError("invalid configuration, nothing was run:\n  " + "\n  ".join(lines))
        self.decide(runs)

    def check(self, run: Run) -> None:
        """Validate one run (raises :class:`InputError`): its parts, options and labels."""
        cfg = run.plain
        run.parts = task.prepare(cfg)
        sweep = cfg.get("sweep") or {}
        if sweep.get("reuse", "same") not in REUSE:
            raise InputError(f"sweep.reuse must be one of {', '.join(REUSE)} (same: skip a finished run only "
                             f"when its config, input files and simulator code are today's), got {sweep['reuse']!r}")
        objective = sweep.get("objective")
        objective = [objective] if isinstance(objective, str) else objective or []
        if not isinstance(objective, list) or not all(isinstance(m, str) and m for m in objective):
            raise InputError(f"sweep.objective must name metrics, e.g. sweep.objective=[wait/mean] or "
                             f"[bsld/mean,util]; got {sweep.get('objective')!r}")
        self.objective = tuple(objective)
        if sweep.get("non_semantic") is None:
            raise InputError("sweep.non_semantic is missing: the keys that never change a run's result "
                             "(conf/config.yaml lists them)")
        run.flat = semantic_config(cfg, sweep["non_semantic"])
        run.targets = {group: str(node["_target_"]) for group, node in cfg.items()
                       if isinstance(node, dict) and "_target_" in node}
        run.workload = run.choices.get("workload") or type(run.parts.workload).__name__
        run.policy = policy_label(cfg, run.choices.get("policy", ""), run.overrides)
        self.runs[run.index] = run

    def unreadable(self, runs: Sequence[Run]) -> dict[str, list[Run]]:
        """Read each input once, on the driver (a trace with a bad line, a WfFormat instance with duplicate
        task ids): when no run of the sweep could read its input, the errors — nothing is started; otherwise
        ``{}``, and the runs with a bad input fail in their workers and are recorded FAILED beside the others.
        A drawn workload's files are read by its ``check_files`` (a workload without one is not checked)."""
        errors: dict[str, list[Run]] = {}
        read: dict[str, str | None] = {}
        for run in runs:
            assert run.parts is not None
            workload = run.parts.workload
            if not workload.input_files() or (workload.stochastic and not hasattr(workload, "check_files")):
                return {}
            replay = repr(sorted(workload.input_files().items()) if workload.stochastic
                          else (run.plain.get("workload"), run.plain.get("cluster")))
            if replay not in read:
                try:
                    task.check_inputs(run.parts)
                    read[replay] = None
                except InputError as error:
                    read[replay] = str(error)
            if read[replay] is None:
                return {}
            errors.setdefault(read[replay], []).append(run)
        return errors if sum(map(len, errors.values())) == len(runs) else {}

    def decide(self, runs: Sequence[Run]) -> None:
        """Key and fingerprint each checked run, look the store up once and apply the skip rule."""
        first = runs[0].plain
        sweep = first.get("sweep") or {}
        for run in runs:
            assert run.parts is not None
            stochastic = run.parts.workload.stochastic
            run.key = key_of(run.flat if stochastic else {k: v for k, v in run.flat.items() if k != "seed"},
                             run.policy)
            run.inputs = inputs = self.inputs_of(tuple(run.parts.inputs.items()))
            run.code = code = self.code_of(tuple(run.targets.values()))
            # what identifies the run, set when it is claimed so that other sweeps find it
            run.tags = {f"{TAG}run_key": run.key, f"{TAG}sweep_id": self.sweep_id, f"{TAG}git_commit": git_commit(),
                        f"{TAG}version": schedlab_version(), CODE_TAG: code.digest, INPUTS_TAG: inputs.digest,
                        **{f"{TAG}target.{group}": target for group, target in run.targets.items()}}
            if inputs.files and inputs.manifest:
                run.tags[INPUT_FILES_TAG] = inputs.manifest
            if code.manifest:
                run.tags[CODE_FILES_TAG] = code.manifest
        self.experiment_name = ADHOC_EXPERIMENT if self.adhoc else str(first.get("experiment_name") or ADHOC_EXPERIMENT)
        tracking = first.get("tracking") or {}
        existing: dict[str, list[Any]] = {}
        if tracking.get("uri"):
            self.store = open_store(str(tracking["uri"]), self.experiment_name, tracking.get("artifact_root"))
            where = (self.store.uri, self.store.experiment_id)
            if where not in self.existing:
                self.existing[where] = self.store.runs_by_key()
            existing = self.existing[where]
        beats = cache(self.store.sweeps) if self.store is not None else dict
        now = time.time()
        for run in runs:
            assert run.parts is not None
            if not run.parts.workload.stochastic:
                self.seeds.setdefault(run.key, set()).add(run.plain.get("seed"))
            if run.key in self.first:
                same = self.first[run.key]
                self.not_run_here(run, RunResult(reason=f"same run as #{same}", same_as=same))
            else:
                found = [r for r in existing.get(run.key, []) if r.info.run_id not in self.killed]
                decision, dead, _ = skip_rule(found, run.tags, sweep, beats, now)
                if dead:
                    self.take_over(dead)
                if isinstance(decision, RunResult):
                    self.not_run_here(run, decision)
                elif finished := [r for r in found if r.info.status == "FINISHED"]:
                    if not sweep.get("force", False):
                        self.reran["; ".join(self.changes(finished[0], run))] += 1
                    run.supersedes = [(r.info.run_id, r.info.run_name) for r in finished
                                      if SUPERSEDED_TAG not in r.data.tags]
                self.first[run.key] = run.index

    def take_over(self, dead: Iterable[str]) -> None:
        """Mark RUNNING claims of dead sweeps KILLED (their runs are run again) and stale heartbeats gone."""
        dead = [run_id for run_id in dead if run_id not in self.killed]
        if not dead or self.store is None:
            return
        for run_id in dead:
            self.store.mark_killed(run_id)
            self.killed.add(run_id)
        for tag in stale_sweeps(self.store.sweeps(), time.time()):
            self.store.set_sweep_tag(tag, None)

    def not_run_here(self, run: Run, result: RunResult) -> None:
        """File a run this sweep does not run: finished (its metrics join the table), a repeat of another, or
        running elsewhere."""
        assert run.parts is not None
        run.result = dataclasses.replace(result, objective=self.objective, stochastic=run.parts.workload.stochastic)
        if result.elsewhere is not None:
            self.elsewhere[result.elsewhere] += 1
        elif result.same_as is None:
            self.results.append((run.policy, run.plain.get("policy") or {}, dict(result.metrics)))

    def changes(self, recorded: Any, run: Run) -> list[str]:
        """What differs between a recorded run and ``run`` besides the config ([] if nothing)."""
        tags = recorded.data.tags
        if CODE_TAG not in tags:
            return ["recorded without code and input fingerprints"]
        why = []
        assert run.code is not None and run.inputs is not None
        if tags[CODE_TAG] != run.code.digest:
            files = changed_files(tags.get(CODE_FILES_TAG), run.code.files)
            why.append(f"code changed: {', '.join(files)}" if files else "code changed")
        if tags.get(INPUTS_TAG) != run.inputs.digest:
            files = changed_files(tags.get(INPUT_FILES_TAG), run.inputs.files)
            why.append(f"input file changed: {', '.join(files)}" if files else "input files changed")
        return why

    def runtime_env(self) -> dict[str, Any]:
        """The researcher's own code the planned runs' ``_target_`` s run (their packages and the modules of theirs
        those import), for Ray to ship to a cluster's nodes (``py_modules``: a package folder or a single module
        file each)."""
        # every planned run's targets were fingerprinted: the modules each fingerprint was made of, walked once
        found = {place for modules in self.code_hasher.own.values() for place in places(modules)}
        return {"py_modules": sorted(str(place) for place in found)} if found else {}

    # -- claiming and recording --------------------------------------------------------------------
    def claim_on_workers(self, local: bool) -> None:
        """Let the runs be claimed where they run when every such process sees the store (a tracking server,
        or SQLite beside a local Ray or this process): the driver's CPU then goes to planning."""
        if self.store is not None and (local or StoreURI(self.store.uri).remote):
            self.workers_claim = True
            self.start_heartbeat()

    def start_heartbeat(self) -> None:
        if self.heartbeat is None and self.store is not None:
            self.heartbeat = Heartbeat(self.store, Claimant.this(self.sweep_id))
            self.heartbeat.start()

    def recorder(self, run: Run) -> RunRecord | None:
        """Run ``run``'s record, made once (``None``: nothing is recorded, ``tracking=none``)."""
        if self.store is None:
            return None
        if run.record is None:
            where = (self.store.uri, self.experiment_name, self.store.artifact_root)
            if where not in self.locations:  # one per store and sweep: it stats the SQLite file
                self.locations[where] = StoreLocation.of(*where)
            name = run_name(run.policy, run.plain, run.overrides, self.swept, seed=run.parts.workload.stochastic)
            run.record = RunRecord(self.locations[where], None, run.plain, run.tags,
                                   {"policy": run.policy, **run.flat}, self.claimant, name)
        return run.record

    def claim(self, run: Run, here: bool = False) -> RunResult | None:
        """Claim ``run`` here, before it runs, unless its worker will (``here``: even so, e.g. to record a run
        whose worker failed before claiming it): ``None`` when this sweep runs it, else why not (another sweep
        claimed or finished it meanwhile; its ``result`` is set)."""
        record = self.recorder(run)
        if record is None or record.claim is not None or (self.workers_claim and not here):
            return None
        self.start_heartbeat()
        instead = record.start(self.store)
        if instead is not None:
            self.not_run_here(run, instead)
        return instead

    def ended(self, run: Run, report: RunReport) -> None:
        """Run ``run`` ended where it ran (or was found claimed there, ``SKIPPED``): write its record when that
        process could not, and set its ``result`` (a FAILED run has none)."""
        assert run.parts is not None
        if report.status == "SKIPPED":
            self.not_run_here(run, report.value)
            return
        run_id = report.recorded
        if run_id is None and self.store is not None:
            if self.claim(run, here=True) is not None:  # which makes its record
                return  # another sweep has it
            run_id = report.recorded = run.record.write(report, self.store)  # type: ignore[union-attr]
        outcome = report.outcome
        if outcome is None:
            return
        metrics = metrics_of(outcome)
        if self.store is not None and run_id is not None:
            for old, name in run.supersedes:  # the records this one replaces, marked where the UI shows them
                self.store.supersede(old, name, run_id)
        run.result = RunResult(metrics, run_id=run_id, objective=self.objective,
                               stochastic=run.parts.workload.stochastic)
        self.results.append((run.policy, run.plain.get("policy") or {}, metrics))
        planned = run.inputs.files if run.inputs is not None else {}
        for name in [n for n, digest in outcome.inputs.items() if planned.get(n) != digest]:
            self.changed_inputs[name] += 1

    def result(self, run: Run) -> tuple[RunResult | None, str | None]:
        """What ``run``'s JobReturn returns, its result (a repeat of an earlier run carries that run's metrics), or
        why it failed (it repeats a run that failed); :class:`ObjectiveError` when it cannot give
        ``sweep.objective``."""
        result = run.result
        if result is not None and result.same_as is not None:
            twin = self.runs[result.same_as].result
            if twin is None or not twin.metrics:
                return None, f"run #{run.index} repeats run #{result.same_as}, which failed"
            result = dataclasses.replace(result, metrics=dict(twin.metrics), run_id=twin.run_id)
        if result is not None and self.objective and result.elsewhere is None:
            try:
                result.values()
            except (TypeError, ValueError) as error:
                raise ObjectiveError(f"run #{run.index} ({run.label}): {error}") from None
        return result, None

    # -- the end -----------------------------------------------------------------------------------
    def finish(self) -> None:
        """The sweep ended (also when it was stopped; once): close, then the policy table and notes."""
        if self.finished:
            return
        self.finished = True
        try:
            for close in self.closers:
                close()
        finally:
            self.close()
        if self.summary and self.results:
            print(format_policy_table(self.results, self.objective))
        for line in self.notes():
            print(line)
        if self.store is not None:  # where the runs are, and the link to their table in the MLflow UI
            print(f"MLflow: experiment {self.experiment_name!r} in {self.store.uri} (sweep {self.sweep_id}); "
                  f"its runs: {browse(self.store.uri, self.store.experiment_id)}")
        sys.stdout.flush()

    def close(self) -> None:
        """Claims of runs never recorded are marked KILLED (a later sweep, even in this process, runs
        them), and the heartbeat stops."""
        try:
            if self.store is not None and self.heartbeat is not None:
                for run_id in self.store.running(CLAIM_TAGS[0], self.sweep_id):
                    self.store.mark_killed(run_id)
        except Exception as error:  # the store went away: the claims go stale with the heartbeat
            print(f"could not mark this sweep's unrecorded claims KILLED ({one_line(error)}); a later sweep takes "
                  f"them over once this one's heartbeat is {DEAD_AFTER_SECONDS:g} s old", flush=True)
        finally:
            if self.heartbeat is not None:
                self.heartbeat.stop()
                self.heartbeat = None

    def notes(self) -> list[str]:
        """What the sweep decided for the user: reruns and why, collapsed seeds, where runs went."""
        lines = [f"{n} reran: {why}" for why, n in sorted(self.reran.items())]
        lines += [f"input file {name} changed during the sweep: {n} run(s) read other contents than planned (their "
                  f"records say so: schedlab.inputs_planned); rerun the sweep so that every run reads one version"
                  for name, n in sorted(self.changed_inputs.items())]
        lines += [f"{n} not run here: running in another sweep ({sweep}); rerun this command once it ends"
                  for sweep, n in sorted(self.elsewhere.items())]
        if self.killed:
            lines.append(f"{len(self.killed)} run(s) left RUNNING by a sweep that died: marked KILLED and run again")
        per_workload: dict[str, int] = {}
        for run in self.runs.values():
            if run.key in self.seeds and len(self.seeds[run.key]) > 1:
                per_workload[run.workload] = max(per_workload.get(run.workload, 0), len(self.seeds[run.key]))
        lines += [f"workload {name} is deterministic: {n} seeds → 1 run per cell" for name, n in per_workload.items()]
        if self.adhoc and self.store is not None:
            lines.append(f"ad-hoc runs (the command line changed the default experiment) go to {ADHOC_EXPERIMENT!r}; "
                         f"choose one with experiment=NAME or experiment_name=NAME")
        return lines


def policy_label(cfg: dict[str, Any], choice: str, overrides: Sequence[str] = ()) -> str:
    """A run's policy label (its run name's head, its row of the end-of-sweep table, the MLflow param ``policy``):
    its ``policy=`` config choice, or the class's name when the command line replaced the choice's ``_target_``
    (the choice's name would then claim a policy that did not run).

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
    return non_semantic_key(key, OmegaConf.select(config, "sweep.non_semantic", default=None) or ())


def _which(bad: Sequence[Run], total: int) -> str:
    if len(bad) == total:
        return f"all {total} runs"
    return f"{len(bad)} of {total} runs, e.g. #{bad[0].index}: {bad[0].label}"
