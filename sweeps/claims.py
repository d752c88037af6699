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

A live claim is skipped ("running in another sweep"); a dead one is marked KILLED and taken over. Two
sweeps claiming one key at the same moment both look again after claiming: the earlier claim (start time,
then run id) runs, the later is withdrawn (deleted). That order is each client's clock: sweeps on hosts
whose clocks disagree by more than the time between two claims can still both run a key (NTP keeps a
cluster within milliseconds).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from sweeps.tracking import TAG, Claim, MlflowStore

BEAT_SECONDS = 15.0
DEAD_AFTER_SECONDS = 90.0
SWEEP_TAG = f"{TAG}sweep."
CLAIM_TAGS = (f"{TAG}claim.sweep", f"{TAG}claim.host", f"{TAG}claim.pid", f"{TAG}claim.started")


@dataclass(frozen=True)
class Recorded:
    """A planned run that is not run here, and why: finished before (in MLflow run ``run_id``, with its
    ``metrics``), the same run as run ``same_as`` of this sweep, or running in sweep ``elsewhere``."""

    reason: str
    run_id: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    same_as: int | None = None
    elsewhere: str | None = None

    def __str__(self) -> str:
        return self.reason


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
    try:
        beat = float(json.loads(beats.get(SWEEP_TAG + sweep, "{}")).get("beat", 0.0))
    except (ValueError, AttributeError):
        return False
    return now - beat < DEAD_AFTER_SECONDS


def claim_order(run: Any) -> tuple[int, str]:
    """Among live claims of one key the least (start time, run id) wins."""
    return run.info.start_time, run.info.run_id


def claim_run(store: MlflowStore, key: str, tags: dict[str, str], run_name: str,
              reusable: Callable[[list[Any]], list[Any]]) -> Claim | Recorded:
    """Claim the run with key ``key`` (``tags``: its identity and claimant tags): create it RUNNING, then look
    again. Another sweep finished it meanwhile (``reusable`` picks the FINISHED runs that stand for it) or
    holds an earlier live claim: the new claim is withdrawn and the run is :class:`Recorded`. A claim of this
    same sweep (keys are unique within a sweep) is an earlier attempt of this run, a Ray retry after its
    worker died: it is taken over, and a record already written into it is kept."""
    claim = store.claim(tags, run_name)
    others = [r for r in store.runs_by_key(key).get(key, []) if r.info.run_id != claim.run_id]
    mine = [r for r in others if r.data.tags.get(CLAIM_TAGS[0]) == tags[CLAIM_TAGS[0]] and r.info.status != "KILLED"]
    if mine:  # its record, if written, is left as it is (RunRecord.write)
        store.withdraw(claim.run_id)
        earlier = min(mine, key=claim_order).info
        return Claim(earlier.run_id, earlier.artifact_uri, earlier.start_time)
    done = reusable([r for r in others if r.info.status == "FINISHED"])
    if done:
        store.withdraw(claim.run_id)
        return Recorded(f"finished in MLflow run {done[0].info.run_id} (by another sweep)", done[0].info.run_id,
                        dict(done[0].data.metrics))
    rivals = [r for r in others if r.info.status == "RUNNING"]
    if rivals:
        beats, now = store.sweeps(), time.time()
        earlier = [r for r in rivals if alive(r, beats, now) and claim_order(r) < (claim.start_time, claim.run_id)]
        if earlier:
            store.withdraw(claim.run_id)
            owner = min(earlier, key=claim_order).data.tags.get(CLAIM_TAGS[0], "?")
            return Recorded(f"running in another sweep: {owner}", elsewhere=owner)
    return claim


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
    out = []
    for key, value in tags.items():
        if key.startswith(SWEEP_TAG):
            try:
                beat = float(json.loads(value).get("beat", 0.0))
            except (ValueError, AttributeError):
                beat = 0.0
            if now - beat > DEAD_AFTER_SECONDS:
                out.append(key)
    return out
