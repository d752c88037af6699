"""A run's claim and record in MLflow: whichever sweeps share a store, each run key is run (and FINISHED) once,
and recorded one way.

**Claims.** Before a run starts, its MLflow run is created RUNNING, tagged with the claimant (sweep id, host,
process id and that process's start time); the record is written into that run, and a Ray retry writes into
the same one. Another sweep that finds a RUNNING run for a key asks whether its claimant is alive:

- on the same host, exactly: the claimant's process exists and started when the claim says (a reused
  pid has another start time);
- elsewhere, by its heartbeat: every running sweep keeps the experiment tag ``schedlab.sweep.<id>`` at
  the time of its last beat (every :data:`BEAT_SECONDS`); a claim whose sweep has not beaten for
  :data:`DEAD_AFTER_SECONDS` is dead;
- a RUNNING run without claim tags (left by an older schedlab) is dead.

A live claim is skipped ("running in another sweep"); a dead one is marked KILLED and taken over. A claim is
safe without a lock (a tracking server's REST API has none), however late the store shows it to others
(:func:`claim_run`): after creating its claim a sweep looks at the key's other claims and defers (withdraws its
claim: KILLED, then deleted) to one that *decided* to run (tag :data:`DECIDED_TAG`) or that is earlier (start
time, then run id) and still deciding; it waits while a later one is still deciding; otherwise it tags its own
claim decided and runs. Of two claims one always sees the other (the later look follows both creations), so
exactly one runs: either both see each other and the earlier runs, or only one sees the other — which then
waits for that one's decision to run. Decisions are read, never inferred from clocks.

**Records.** The driver knows everything about a run's record except its outcome (:class:`RunRecord`: run
key, fingerprints, params, name); the process that ran it knows the outcome (:class:`RunReport`). A run is
claimed by the process that runs it when every such process sees the store (a tracking server, SQLite beside
a local Ray or in this process), else by the driver. A process that sees the driver's store writes the record
itself; one on another node of a cluster cannot see a SQLite file on the driver's disk, so the driver writes
the same record from the report handed back. Either way it is :meth:`RunRecord.write`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import yaml
from hydra.core.utils import JobReturn, JobStatus

from sweeps._hydra import job_error
from sweeps.identity import Fingerprint, changed_files
from sweeps.tracking import (
    CODE_TAG,
    INPUT_FILES_TAG,
    INPUTS_TAG,
    TAG,
    Claim,
    MlflowStore,
    StoreURI,
    open_store,
)

BEAT_SECONDS = 15.0
DEAD_AFTER_SECONDS = 90.0
DECIDE_SECONDS = DEAD_AFTER_SECONDS  # how long a claim waits for a later one's decision before deferring to it
SWEEP_TAG = f"{TAG}sweep."
CLAIM_TAGS = (f"{TAG}claim.sweep", f"{TAG}claim.host", f"{TAG}claim.pid", f"{TAG}claim.started")
DECIDED_TAG = f"{TAG}claim.decided"  # set on a claim once its sweep decided to run it


@dataclass(frozen=True)
class RunResult:
    """What a run gives its sweeper, whether it ran in this sweep or not: its metrics (those logged in MLflow)
    and, when it was not run here, why (``reason``: finished before in MLflow run ``run_id``, the same run as
    job ``same_as`` of this sweep, or running in sweep ``elsewhere``). ``float(result)`` and ``list(result)``
    are the metrics named by ``sweep.objective`` (one for ``float``), what Optuna's sweeper reads;
    ``stochastic`` says whether the run's workload depends on its seed.

    >>> r = RunResult({"wait/mean": 2.5, "util": 0.5}, objective=("wait/mean",))
    >>> float(r), list(RunResult(r.metrics, objective=("util", "wait/mean")))
    (2.5, [0.5, 2.5])
    """

    metrics: dict[str, float] = field(default_factory=dict)
    reason: str = ""
    run_id: str | None = None
    same_as: int | None = None
    elsewhere: str | None = None
    objective: tuple[str, ...] = ()
    stochastic: bool = True

    def __str__(self) -> str:
        return self.reason or f"ran in this sweep (MLflow run {self.run_id})"

    def values(self) -> list[float]:
        """The ``sweep.objective`` metrics, in order (a clear error when there is none to give)."""
        if not self.objective:
            raise TypeError("the run has no objective: name its metrics with sweep.objective=[METRIC,...] "
                            "(e.g. sweep.objective=[wait/mean])")
        if self.elsewhere is not None:
            raise ValueError(f"no result: {self.reason}")
        missing = [m for m in self.objective if m not in self.metrics]
        if missing:
            raise ValueError(f"sweep.objective: {missing[0]!r} is not a metric of this run; its metrics: "
                             f"{', '.join(sorted(self.metrics))}")
        return [float(self.metrics[m]) for m in self.objective]

    def __float__(self) -> float:
        values = self.values()
        if len(values) != 1:
            raise TypeError(f"sweep.objective names {len(values)} metrics; a single-objective study needs one")
        return values[0]

    def __iter__(self) -> Iterator[float]:
        return iter(self.values())


def process_started(pid: int) -> str | None:
    """A process's start time (clock ticks since boot, ``/proc/<pid>/stat`` field 22), ``None`` when it is gone.

    >>> process_started(os.getpid()) is not None and process_started(2 ** 22 + 1) is None
    True
    """
    try:
        stat = open(f"/proc/{pid}/stat").read()  # noqa: SIM115 (one read)
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]


@dataclass(frozen=True)
class Claimant:
    """Who claims runs: one sweep, in one process on one host."""

    sweep_id: str
    host: str
    pid: int
    started: str

    @classmethod
    @cache
    def this(cls, sweep_id: str) -> Claimant:
        return cls(sweep_id, socket.gethostname(), os.getpid(), process_started(os.getpid()) or "")

    def tags(self) -> dict[str, str]:
        return dict(zip(CLAIM_TAGS, (self.sweep_id, self.host, str(self.pid), self.started), strict=True))


def alive(run: Any, beats: dict[str, str], now: float) -> bool:
    """Whether the sweep that claimed a RUNNING ``run`` still runs (see the module docstring); ``beats``
    is the experiment's tags (:meth:`MlflowStore.sweeps`).

    >>> from types import SimpleNamespace as S
    >>> me = Claimant.this("s1").tags()
    >>> alive(S(data=S(tags=me)), {}, time.time())
    True
    >>> alive(S(data=S(tags={**me, "schedlab.claim.pid": str(2 ** 22 + 1)})), {}, time.time())
    False
    >>> far = {**me, "schedlab.claim.host": "elsewhere"}
    >>> alive(S(data=S(tags=far)), {"schedlab.sweep.s1": json.dumps({"beat": time.time() - 10})}, time.time())
    True
    >>> alive(S(data=S(tags=far)), {"schedlab.sweep.s1": json.dumps({"beat": time.time() - 600})}, time.time())
    False
    """
    tags = run.data.tags
    if not all(key in tags for key in CLAIM_TAGS):
        return False
    sweep, host, pid, started = (tags[key] for key in CLAIM_TAGS)
    if host == socket.gethostname():
        return process_started(int(pid)) == started
    return now - beat_time(beats.get(SWEEP_TAG + sweep)) < DEAD_AFTER_SECONDS


def beat_time(value: str | None) -> float:
    """The time of a heartbeat tag's last beat (0 when there is none or it cannot be read).

    >>> beat_time('{"beat": 12.5}'), beat_time(None), beat_time("garbage")
    (12.5, 0.0, 0.0)
    """
    try:
        return float(json.loads(value or "{}").get("beat", 0.0))
    except (ValueError, AttributeError):
        return 0.0


def claim_order(run: Any) -> tuple[int, str]:
    """Among live claims of one key the least (start time, run id) wins."""
    return run.info.start_time, run.info.run_id


def skip_rule(found: list[Any], tags: dict[str, str], sweep: dict[str, Any], beats: Callable[[], dict[str, str]],
              now: float, claim: Claim | None = None) -> tuple[RunResult | Claim | None, list[str], bool]:
    """Whether a run is run here: the one rule, when a sweep plans (``claim`` None) and again once it has claimed
    the run (``claim``: its new claim, left out of ``found``, the store's runs of its key; ``tags``: its identity
    tags; ``beats``: the experiment's heartbeat tags, read only when needed). In order: with a claim, one this
    sweep made before (not KILLED: a Ray retry) is returned, to be taken over; a FINISHED run that stands for it
    (``sweep.reuse=same``: one of its code and inputs; ``any``: any; ``sweep.force=true``: none) gives its
    :class:`RunResult`; a live claim of another sweep (with a claim: one that decided to run, or one made before
    it, :func:`claim_order`) means not here. Otherwise ``None``: run it. Also returned: the RUNNING claims of
    dead sweeps, to mark KILLED, and whether a later live claim is still deciding (then look again)."""
    me = tags[f"{TAG}sweep_id"]
    if claim is not None:
        mine = [r for r in found if r.data.tags.get(CLAIM_TAGS[0]) == me and r.info.status != "KILLED"]
        if mine:
            earlier = min(mine, key=claim_order).info
            return Claim(earlier.run_id, earlier.artifact_uri, earlier.start_time), [], False
    running = [r for r in found if r.info.status == "RUNNING" and r.data.tags.get(CLAIM_TAGS[0]) != me]
    heard = beats() if running else {}
    live = [r for r in running if alive(r, heard, now)]
    dead = [r.info.run_id for r in running if r not in live]
    same = sweep.get("reuse", "same") == "same"  # reuse=any: any FINISHED run of the key; force: none
    done = [] if sweep.get("force", False) else [
        r for r in found if r.info.status == "FINISHED"
        and (not same or all(r.data.tags.get(tag) == tags[tag] for tag in (CODE_TAG, INPUTS_TAG)))]
    if done:
        run_id = done[0].info.run_id
        return RunResult(dict(done[0].data.metrics), f"finished in MLflow run {run_id}", run_id), dead, False
    deciding = False
    if claim is not None:
        mine = (claim.start_time, claim.run_id)
        deciding = any(DECIDED_TAG not in r.data.tags and claim_order(r) > mine for r in live)
        live = [r for r in live if DECIDED_TAG in r.data.tags or claim_order(r) < mine]
    if live:
        owner = min(live, key=claim_order).data.tags.get(CLAIM_TAGS[0], "?")
        return RunResult(reason=f"running in another sweep: {owner}", elsewhere=owner), dead, False
    return None, dead, deciding


def claim_run(store: MlflowStore, tags: dict[str, str], run_name: str, sweep: dict[str, Any]) -> Claim | RunResult:
    """Claim a run (``tags``: its identity and claimant tags): create it RUNNING, then apply :func:`skip_rule`
    to its key's runs, again while a later claim is deciding (:data:`DECIDE_SECONDS` at most: then it defers).
    When the rule says the run is not run here, or is an earlier attempt of this sweep's (its record, if
    written, is kept: :meth:`MlflowStore.log`), the new claim is withdrawn; else it is tagged decided."""
    key = tags[f"{TAG}run_key"]
    claim = store.claim(tags, run_name)
    pause, give_up = 0.02, time.monotonic() + DECIDE_SECONDS
    while True:
        others = [r for r in store.runs_by_key(key).get(key, []) if r.info.run_id != claim.run_id]
        decision, dead, deciding = skip_rule(others, tags, sweep, store.sweeps, time.time(), claim)
        for run_id in dead:
            store.mark_killed(run_id)
        if deciding and time.monotonic() > give_up:
            decision = RunResult(reason="running in another sweep (its claim did not decide in time)", elsewhere="?")
        if decision is not None:
            store.withdraw(claim.run_id)
            if isinstance(decision, Claim):  # this sweep's earlier attempt, taken over
                store.set_tag(decision.run_id, DECIDED_TAG, "run")
            return decision
        if not deciding:
            store.set_tag(claim.run_id, DECIDED_TAG, "run")
            return claim
        time.sleep(pause)
        pause = min(2 * pause, 1.0)


class Heartbeat:
    """Keeps the sweep's tag ``schedlab.sweep.<id>`` fresh while it runs; removes it at :meth:`stop`."""

    def __init__(self, store: MlflowStore, claimant: Claimant) -> None:
        self.store, self.claimant = store, claimant
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._beat()
        self._thread = threading.Thread(target=self._run, name="schedlab-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.store.set_sweep_tag(SWEEP_TAG + self.claimant.sweep_id, None)

    def _run(self) -> None:
        while not self._stop.wait(BEAT_SECONDS):
            try:
                self._beat()
            except Exception:  # a missed beat is retried at the next; a long outage makes our claims look dead
                continue

    def _beat(self) -> None:
        value = json.dumps({"beat": time.time(), "host": self.claimant.host, "pid": self.claimant.pid})
        self.store.set_sweep_tag(SWEEP_TAG + self.claimant.sweep_id, value)


def stale_sweeps(tags: dict[str, str], now: float) -> list[str]:
    """Heartbeat tags of sweeps dead for long (killed without cleaning up), to delete.

    >>> stale_sweeps({"schedlab.sweep.a": '{"beat": 0}', "schedlab.sweep.b": json.dumps({"beat": 1e12})}, 1e6)
    ['schedlab.sweep.a']
    """
    return [key for key, value in tags.items()
            if key.startswith(SWEEP_TAG) and now - beat_time(value) > DEAD_AFTER_SECONDS]


@dataclass(frozen=True)
class StoreLocation:
    """Where a record goes, and how a process knows it sees the same store as the driver."""

    uri: str
    experiment_name: str
    artifact_root: str | None
    #: the driver's host and, for a SQLite store, (device, inode) of its file there
    host: str
    file_id: tuple[int, int] | None

    @classmethod
    def of(cls, uri: str, experiment_name: str, artifact_root: str | None) -> StoreLocation:
        return cls(uri, experiment_name, artifact_root, socket.gethostname(), _file_id(uri))

    def reachable(self) -> bool:
        """True when this process writes to the driver's store: a tracking server, or the same SQLite
        file on the same machine (a node of a cluster elsewhere has its own disk; and a worker never
        creates a store: the driver made it before the sweep started)."""
        if StoreURI(self.uri).remote:
            return True
        return socket.gethostname() == self.host and self.file_id is not None and _file_id(self.uri) == self.file_id


def _file_id(uri: str) -> tuple[int, int] | None:
    database = StoreURI(uri).sqlite_file
    try:
        stat = os.stat(database) if database is not None else None
    except OSError:
        return None
    return None if stat is None else (stat.st_dev, stat.st_ino)


@cache
def seen_from_here(location: StoreLocation) -> MlflowStore | None:
    """The driver's store when this process can write to it (asked once per process), else ``None``."""
    return open_store(location.uri, location.experiment_name, location.artifact_root) if location.reachable() else None


@dataclass
class RunReport:
    """What became of one run, made where it ran (:meth:`of`) and read on the driver. ``status`` is FINISHED,
    FAILED or SKIPPED (another sweep claimed or finished it meanwhile; ``value`` is then its
    :class:`RunResult`); ``value`` is otherwise what the task function returned. ``recorded``: the MLflow
    run id when this process wrote the record; ``record_error``: why it could not."""

    status: str
    value: Any = None
    error: str | None = None
    traceback: str | None = None
    node_id: str = ""
    node_ip: str = ""
    end_time: float = 0.0  # epoch seconds
    working_dir: str | None = None
    task_name: str | None = None
    recorded: str | None = None
    record_error: str | None = None

    @classmethod
    def of(cls, ret: JobReturn, node_id: str, node_ip: str = "") -> RunReport:
        """The report of a job Hydra's ``run_job`` ran, now (a failure: its one-line error and its traceback)."""
        report = cls("FINISHED", None, node_id=node_id, node_ip=node_ip, end_time=time.time(),
                     working_dir=ret.working_dir, task_name=ret.task_name)
        if ret.status == JobStatus.COMPLETED:
            report.value = ret.return_value
        else:
            report.fail(job_error(ret))
        return report

    @classmethod
    def crashed(cls, exc: BaseException, node_id: str = "", node_ip: str = "") -> RunReport:
        """The report of a run that failed outside its task function, now (it never started)."""
        report = cls("FINISHED", node_id=node_id, node_ip=node_ip, end_time=time.time())
        report.fail(exc)
        return report

    def fail(self, exc: BaseException) -> None:
        """Mark the report FAILED by ``exc``: its one-line error and its traceback."""
        self.status, self.error = "FAILED", one_line(exc)
        self.traceback = "".join(traceback.format_exception(exc))

    @property
    def outcome(self) -> Any:
        """The task function's :class:`sweeps.task.RunOutcome` of a FINISHED run, else ``None``."""
        return self.value if self.status == "FINISHED" else None


def metrics_of(outcome: Any) -> dict[str, float]:
    """A run's metrics as recorded (and as a recorded run gives them back): its outcome's summary and the
    simulation's wall time ``sim/seconds``."""
    return {**outcome.summary, "sim/seconds": outcome.seconds}


def one_line(exc: BaseException) -> str:
    """An exception as one line of at most 500 characters: its type and the first line of its message."""
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0][:500] if text else type(exc).__name__


@dataclass
class RunRecord:
    """A run's record before it ran (the driver makes it, :meth:`sweeps.planner.Planner.recorder`), and what
    the process that runs it is handed (``index`` and ``config``: the composed config, or the recipe that
    composes it there). Where the run runs, :meth:`start` claims it unless the driver did, and :meth:`finish`
    writes the record when the store is :meth:`~StoreLocation.reachable` (``store`` None: nothing is recorded)."""

    store: StoreLocation | None
    claim: Claim | None  # None: claimed by start(), as the run starts
    cfg: dict[str, Any]  # the plain config the run was planned with
    tags: dict[str, str] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    claimant: dict[str, str] = field(default_factory=dict)  # the claiming sweep's tags (sweeps.record)
    run_name: str = ""
    index: int = -1
    config: Any = None  # a DictConfig or a sweeps._hydra.Recipe, set as the run is handed over

    def start(self, store: MlflowStore | None = None) -> RunResult | None:
        """Claim the run in ``store`` (the driver's) or, where it runs, in the store seen from there, unless it
        was claimed (:func:`claim_run`, the driver's and the worker's one path): ``None`` to run it (``claim``
        set), else why another sweep has it."""
        if self.claim is not None or self.store is None:
            return None
        store = store or seen_from_here(self.store)
        if store is None:
            raise RuntimeError(f"this worker cannot reach the tracking store {self.store.uri} to claim the run")
        claimed = claim_run(store, {**self.tags, **self.claimant}, self.run_name, self.cfg.get("sweep") or {})
        if isinstance(claimed, RunResult):
            return claimed
        self.claim = claimed
        return None

    def finish(self, report: RunReport) -> None:
        """Write the record of an ended run here when this process sees the store (``report.recorded``, or
        ``report.record_error``); a recorded outcome then travels back without its tables and files."""
        try:
            store = seen_from_here(self.store) if self.store is not None else None
            if store is None:
                return
            report.recorded = self.write(report, store)
        except Exception as error:
            report.record_error = one_line(error)
            return
        if report.outcome is not None:
            report.value = dataclasses.replace(report.outcome, tables={}, files={})

    def write(self, report: RunReport, store: MlflowStore) -> str:
        """Log the ended run into its claim in ``store``; its MLflow run id."""
        assert self.claim is not None, "a run is claimed before it is recorded"
        tags = {**self.tags, f"{TAG}ray_node": report.node_id}
        if report.node_ip:
            tags[f"{TAG}ray_node_ip"] = report.node_ip
        if report.error:
            tags[f"{TAG}error"] = report.error.splitlines()[0][:5000]
        metrics: dict[str, float] = {}
        params = dict(self.params)
        outcome = report.outcome
        if outcome is not None:
            metrics = metrics_of(outcome)
            tags.update(read_inputs(self.tags, outcome.inputs))
            tags.update({f"{TAG}note.{k}": str(v) for k, v in outcome.notes.items()})
            if outcome.nodes_from_workload is not None:
                params["cluster.nodes"] = outcome.nodes_from_workload  # the size the trace header gave
        files = {"config.yaml": yaml.safe_dump(self.cfg, sort_keys=False).encode(),
                 **(outcome.files if outcome is not None else {})}
        if report.traceback:
            files["traceback.txt"] = report.traceback.encode()
        return store.log(self.claim, report.status, report.end_time, params, tags, metrics, files,
                         outcome.tables if outcome is not None else {})


def read_inputs(planned: dict[str, str], read: dict[str, str]) -> dict[str, str]:
    """The input tags of what a run read (``read``: sha256 by file name); when that is not what the sweep
    planned with, the planned digest and the files that differ are kept beside them.

    >>> planned = {"schedlab.inputs": Fingerprint({"a": "0" * 64}).digest}
    >>> read_inputs(planned, {"a": "0" * 64})
    {}
    >>> sorted(read_inputs(planned, {"a": "1" * 64}))
    ['schedlab.input_files', 'schedlab.inputs', 'schedlab.inputs_changed', 'schedlab.inputs_planned']
    """
    if not read:
        return {}
    now = Fingerprint(read)
    if now.digest == planned.get(INPUTS_TAG):
        return {}
    tags = {INPUTS_TAG: now.digest, f"{TAG}inputs_planned": planned.get(INPUTS_TAG, "")}
    if now.manifest:
        tags[INPUT_FILES_TAG] = now.manifest
    changed = changed_files(planned.get(INPUT_FILES_TAG), read)
    tags[f"{TAG}inputs_changed"] = ", ".join(changed) if changed else "?"
    return tags
