"""Runs claimed before they run: whichever sweeps share a store, each run key is run (and FINISHED) once.

Before a run starts, its sweep creates its MLflow run, RUNNING, tagged with the claimant (sweep id, host,
process id and that process's start time); the worker writes the record into that run, and a Ray retry
writes into the same one. Another sweep that finds a RUNNING run for a key asks whether its claimant is
alive:

- on the same host, exactly: the claimant's process exists and started when the claim says (a reused
  pid has another start time);
- elsewhere, by its heartbeat: every running sweep keeps the experiment tag ``schedlab.sweep.<id>`` at
  the time of its last beat (every :data:`BEAT_SECONDS`); a claim whose sweep has not beaten for
  :data:`DEAD_AFTER_SECONDS` is dead;
- a RUNNING run without claim tags (left by an older schedlab) is dead.

A live claim is skipped ("running in another sweep"); a dead one is marked KILLED and taken over. Two sweeps
claiming one key at the same moment both look again after claiming (:func:`skip_rule`, the same rule a sweep
plans with): the earlier claim (start time, then run id) runs, the later is withdrawn (deleted). That order
is each client's clock: sweeps on hosts whose clocks disagree by more than the time between two claims can
still both run a key (NTP keeps a cluster within milliseconds).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from sweeps.tracking import CODE_TAG, INPUTS_TAG, TAG, Claim, MlflowStore

BEAT_SECONDS = 15.0
DEAD_AFTER_SECONDS = 90.0
SWEEP_TAG = f"{TAG}sweep."
CLAIM_TAGS = (f"{TAG}claim.sweep", f"{TAG}claim.host", f"{TAG}claim.pid", f"{TAG}claim.started")


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
              now: float, claim: Claim | None = None) -> tuple[RunResult | Claim | None, list[str]]:
    """Whether a run is run here: the one rule, applied when a sweep plans (``claim`` None) and again once it
    has claimed the run (``claim``: its new claim, left out of ``found``, the store's runs of the run's key;
    ``tags``: the run's identity tags; ``beats``: the experiment's heartbeat tags, read only when needed).

    1. with a claim, a run this same sweep claimed before (and not KILLED) is an earlier attempt of this run,
       a Ray retry: that claim is returned, to be taken over;
    2. a FINISHED run that stands for it (:func:`reusable`): not run, its :class:`RunResult`;
    3. a live claim of another sweep (with a claim: one made before it, :func:`claim_order`): not run here.

    Otherwise ``None``: run it. The second value lists the RUNNING claims of dead sweeps, to mark KILLED.
    """
    me = tags[f"{TAG}sweep_id"]
    if claim is not None:
        mine = [r for r in found if r.data.tags.get(CLAIM_TAGS[0]) == me and r.info.status != "KILLED"]
        if mine:
            earlier = min(mine, key=claim_order).info
            return Claim(earlier.run_id, earlier.artifact_uri, earlier.start_time), []
    running = [r for r in found if r.info.status == "RUNNING" and r.data.tags.get(CLAIM_TAGS[0]) != me]
    heard = beats() if running else {}
    live = [r for r in running if alive(r, heard, now)]
    dead = [r.info.run_id for r in running if r not in live]
    done = reusable([r for r in found if r.info.status == "FINISHED"], tags, sweep)
    if done:
        run_id = done[0].info.run_id
        return RunResult(dict(done[0].data.metrics), f"finished in MLflow run {run_id}", run_id), dead
    if claim is not None:
        live = [r for r in live if claim_order(r) < (claim.start_time, claim.run_id)]
    if live:
        owner = min(live, key=claim_order).data.tags.get(CLAIM_TAGS[0], "?")
        return RunResult(reason=f"running in another sweep: {owner}", elsewhere=owner), dead
    return None, dead


def claim_run(store: MlflowStore, tags: dict[str, str], run_name: str, sweep: dict[str, Any]) -> Claim | RunResult:
    """Claim a run (``tags``: its identity and claimant tags): create it RUNNING, then apply :func:`skip_rule`
    to its key's runs. When the rule says the run is not run here, or is an earlier attempt of this sweep's
    (its record, if written, is kept: :meth:`MlflowStore.log`), the new claim is withdrawn."""
    key = tags[f"{TAG}run_key"]
    claim = store.claim(tags, run_name)
    others = [r for r in store.runs_by_key(key).get(key, []) if r.info.run_id != claim.run_id]
    decision, dead = skip_rule(others, tags, sweep, store.sweeps, time.time(), claim)
    for run_id in dead:
        store.mark_killed(run_id)
    if decision is None:
        return claim
    store.withdraw(claim.run_id)
    return decision


def reusable(finished: list[Any], tags: dict[str, str], sweep: dict[str, Any]) -> list[Any]:
    """The FINISHED runs that stand for a run with identity ``tags``: with ``sweep.reuse=same`` only those
    of its code and inputs, with ``any`` all of them; none with ``sweep.force=true``."""
    if sweep.get("force", False):
        return []
    return [r for r in finished if sweep.get("reuse", "same") == "any"
            or all(r.data.tags.get(tag) == tags[tag] for tag in (CODE_TAG, INPUTS_TAG))]


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
