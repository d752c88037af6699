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
from dataclasses import dataclass
from functools import cache
from typing import Any

from sweeps.tracking import TAG, MlflowStore

BEAT_SECONDS = 15.0
DEAD_AFTER_SECONDS = 90.0
SWEEP_TAG = f"{TAG}sweep."
CLAIM_TAGS = (f"{TAG}claim.sweep", f"{TAG}claim.host", f"{TAG}claim.pid", f"{TAG}claim.started")


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
