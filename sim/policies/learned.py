"""Learned scheduling: a window of waiting jobs, a per-job scoring network, and the policy that uses it.

One decision process serves the Gymnasium environment (:mod:`sim.env`) and the trained policy alike:
:class:`WindowPolicy` shows the oldest ``window`` waiting jobs (in (submit, id) order) as an
observation of :data:`FEATURES` per job and asks :meth:`WindowPolicy.choose` for an action — a window
slot, or :data:`WAIT` slot ``window`` — until it waits or nothing can start. The environment answers
``choose`` with the agent's action; :class:`LearnedPolicy` with :class:`KernelNet`, RLScheduler's kernel
idea (Zhang et al., SC'20): one small network scores every job from its own features, and the best
valid score wins (ties: the oldest job).

``backfill``:

``none``  the action starts a job that fits now, or waits for the next event; waiting is allowed only
          while something runs (an idle machine must start a job, so a run can never stall);
``easy``  the chosen job becomes the queue head: it starts now if it fits, else it is reserved and the
          other waiting jobs backfill around it by EASY's rule (fit now, end by time limit before the
          head's shadow time; :class:`~sim.policies.backfill.RunningEnds`), in queue order, at every
          pass until it starts; waiting is never an action. Always choosing the oldest job is EASY.

Both run on one node-count machine.
"""

from __future__ import annotations

import bisect
import hashlib
import io
import itertools
import math
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sim.core import InputError, Job, Start
from sim.engine import SchedulingError
from sim.policies.backfill import RunningEnds
from sim.policies.base import BasePolicy, EngineView

#: the per-job features of an observation row, each in [0, 1]
FEATURES = ("valid", "nodes", "time_limit", "wait", "fits", "free", "queue")
#: times enter as log1p(seconds) / LOG_TIME, capped at 1 (≈ 11.6 days)
LOG_TIME = math.log1p(1e6)
BACKFILLS = ("none", "easy")


def wait_action(window: int) -> int:
    """The action that waits for the next event: the slot after the window."""
    return window


def job_features(jobs: Sequence[Job], now: float, free: int, total: int, queued: int, window: int) -> np.ndarray:
    """The observation: one row of :data:`FEATURES` per window slot (``jobs`` first, zero rows after).

    >>> obs = job_features([Job(0, 0.0, (4,), 600.0, 60.0)], 100.0, 8, 16, 1, 2)
    >>> [[round(float(x), 3) for x in row] for row in obs]
    [[1.0, 0.25, 0.463, 0.334, 1.0, 0.5, 0.333], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]
    """
    obs = np.zeros((window, len(FEATURES)), dtype=np.float32)
    n = len(jobs)
    if n:
        nodes = np.array([job.demand[0] for job in jobs], dtype=np.float64)
        limit = np.array([job.time_limit for job in jobs], dtype=np.float64)
        waited = now - np.array([job.submit for job in jobs], dtype=np.float64)
        obs[:n, 0] = 1.0
        obs[:n, 1] = nodes / total
        obs[:n, 2] = np.minimum(np.log1p(limit) / LOG_TIME, 1.0)
        obs[:n, 3] = np.minimum(np.log1p(waited) / LOG_TIME, 1.0)
        obs[:n, 4] = nodes <= free
        obs[:n, 5] = free / total
        obs[:n, 6] = queued / (queued + window)
    return obs


@dataclass(frozen=True)
class KernelNet:
    """One score per job: a small tanh network applied to each row of an observation, plus a ``wait``
    score (used with ``backfill: none``). ``layers`` are ``(W, b)`` pairs, the last with one output.
    ``window`` and ``backfill`` are the decision process the weights were trained for."""

    layers: tuple[tuple[np.ndarray, np.ndarray], ...]
    wait: float
    window: int
    backfill: str

    @classmethod
    def initial(cls, rng: np.random.Generator, hidden: Sequence[int] = (16, 8), window: int = 32,
                backfill: str = "easy") -> KernelNet:
        """A fresh network, weights ~ N(0, 1/fan_in)."""
        sizes = [len(FEATURES), *hidden, 1]
        layers = tuple((rng.normal(0.0, 1.0 / math.sqrt(a), (a, b)), np.zeros(b)) for a, b in itertools.pairwise(sizes))
        return cls(layers, 0.0, window, backfill)

    @property
    def size(self) -> int:
        """The number of parameters (:meth:`vector`'s length)."""
        return sum(w.size + b.size for w, b in self.layers) + 1

    def vector(self) -> np.ndarray:
        """All parameters as one flat vector (for evolution strategies)."""
        return np.concatenate([*(np.concatenate([w.ravel(), b]) for w, b in self.layers), [self.wait]])

    def with_vector(self, theta: np.ndarray) -> KernelNet:
        """The same architecture with the parameters ``theta`` (:meth:`vector`'s layout)."""
        layers, at = [], 0
        for w, b in self.layers:
            layers.append((theta[at:at + w.size].reshape(w.shape), theta[at + w.size:at + w.size + b.size].copy()))
            at += w.size + b.size
        return KernelNet(tuple(layers), float(theta[at]), self.window, self.backfill)

    def scores(self, obs: np.ndarray) -> np.ndarray:
        """The score of each row of ``obs``."""
        h = obs.astype(np.float64)
        for k, (w, b) in enumerate(self.layers):
            h = h @ w + b
            if k < len(self.layers) - 1:
                h = np.tanh(h)
        return h[:, 0]

    def act(self, obs: np.ndarray, mask: np.ndarray) -> int:
        """The valid action with the highest score (a job's, or :func:`wait_action`'s ``wait``); ties: the
        lowest slot, i.e. the oldest job."""
        scores = np.append(self.scores(obs), self.wait)
        return int(np.argmax(np.where(mask, scores, -np.inf)))

    def save(self, path: str | Path) -> Path:
        """Write the weights and the decision process they are for as an ``.npz`` file."""
        arrays = {f"W{k}": w for k, (w, _) in enumerate(self.layers)} | {f"b{k}": b for k, (_, b) in
                                                                          enumerate(self.layers)}
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as out:
            np.savez(out, **arrays, wait=np.float64(self.wait), window=np.int64(self.window),
                     backfill=np.str_(self.backfill), features=np.str_(",".join(FEATURES)))
        return path

    @classmethod
    def load(cls, data: bytes, name: str) -> KernelNet:
        """Weights written by :meth:`save` (``name``: the file, for the one-line :class:`InputError`)."""
        if not data.startswith(b"PK"):  # np.load would read any other bytes as a pickle, and refuse that
            raise InputError(f"weights file {name}: not a weights .npz (not a zip archive)")
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as npz:
                arrays = {key: npz[key] for key in npz.files}
        except Exception as error:  # a truncated zip, not an npz, a pickled object: all one line
            raise InputError(f"weights file {name}: not a weights .npz ({type(error).__name__}: "
                             f"{' '.join(str(error).split())})") from None
        missing = sorted({"W0", "b0", "wait", "window", "backfill", "features"} - set(arrays))
        if missing:
            raise InputError(f"weights file {name}: missing array(s) {', '.join(missing)}")
        if str(arrays["features"]) != ",".join(FEATURES):
            raise InputError(f"weights file {name}: trained on features {arrays['features']}, this schedlab "
                             f"computes {','.join(FEATURES)}: retrain")
        layers, inputs, k = [], len(FEATURES), 0
        while f"W{k}" in arrays:
            w, b = arrays[f"W{k}"], arrays.get(f"b{k}")
            if w.ndim != 2 or w.shape[0] != inputs or b is None or b.shape != (w.shape[1],):
                raise InputError(f"weights file {name}: layer {k} has W {w.shape} and b "
                                 f"{None if b is None else b.shape}; expected W ({inputs}, n) and b (n,)")
            layers.append((w.astype(np.float64), b.astype(np.float64)))
            inputs, k = w.shape[1], k + 1
        window, backfill, wait = arrays["window"], str(arrays["backfill"]), arrays["wait"]
        if inputs != 1:
            raise InputError(f"weights file {name}: the last layer has {inputs} outputs; expected one score")
        if window.shape != () or window.dtype.kind not in "iu" or int(window) <= 0 or backfill not in BACKFILLS:
            raise InputError(f"weights file {name}: window {window} and backfill {backfill!r}; expected a positive "
                             f"integer and one of {', '.join(BACKFILLS)}")
        if not all(np.isfinite(a).all() for layer in layers for a in layer) or not np.isfinite(wait).all():
            raise InputError(f"weights file {name}: weights that are not finite numbers")
        return cls(tuple(layers), float(wait), int(window), backfill)


class WindowPolicy(BasePolicy):
    """The decision process of the module docstring; a subclass says who :meth:`choose` s."""

    workload_kinds = frozenset({"hpc"})

    def __init__(self, window: int, backfill: str) -> None:
        if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
            raise InputError(f"window must be a positive integer, got {window!r}")
        if backfill not in BACKFILLS:
            raise InputError(f"backfill must be one of {', '.join(BACKFILLS)}, got {backfill!r}")
        self.window, self.backfill = window, backfill
        self._queue: list[Job] = []  # waiting (not reserved), in (submit, id) order
        self._keys: list[tuple[float, int]] = []
        self._head: Job | None = None  # backfill easy: the chosen job, reserved until it starts
        self._running = RunningEnds()

    def attach(self, view: EngineView) -> None:
        if len(view.cluster.resources) != 1 or len(view.cluster.machines) != 1:
            raise ValueError(f"{self.name} schedules node counts on one machine; got {view.cluster}")
        super().attach(view)
        self._total = int(view.cluster.total[0])

    def submit(self, job: Job, now: float) -> None:
        key = (job.submit, job.id)
        position = bisect.bisect_right(self._keys, key)
        self._keys.insert(position, key)
        self._queue.insert(position, job)

    def complete(self, job: Job, now: float) -> None:
        self._running.remove(job.id, job.nodes)

    @abstractmethod
    def choose(self, obs: np.ndarray, mask: np.ndarray, now: float) -> int:
        """An action for the observation: a slot whose ``mask`` is True."""

    def started(self, job: Job, now: float) -> None:
        """``job`` starts now (a hook for the environment's rewards)."""

    def schedule(self, now: float) -> Sequence[Start]:
        assert self.view is not None, "attach() first"
        free = int(self.view.free[0][0])
        starts: list[Start] = []
        while self._queue or self._head is not None:
            if self._head is not None:
                if self._head.nodes > free:
                    self._backfill(now, free, starts)
                    break
                free = self._start(self._head, now, free, starts)
                self._head = None
                continue
            obs, mask = self.observe(now, free)
            if not mask.any():
                break
            action = self.choose(obs, mask, now)
            if not 0 <= action < len(mask) or not mask[action]:  # the environment checks before it answers
                raise SchedulingError(f"{self.name}: action {action} is not valid at t={now} (mask {mask.tolist()})")
            if action == wait_action(self.window):
                break
            job = self._queue.pop(action)
            del self._keys[action]
            if job.nodes <= free:
                free = self._start(job, now, free, starts)
            else:
                self._head = job
        return starts

    def observe(self, now: float, free: int) -> tuple[np.ndarray, np.ndarray]:
        """The observation and the action mask (window slots, then :func:`wait_action`) at ``now``."""
        shown = self._queue[:self.window]
        obs = job_features(shown, now, free, self._total, len(self._queue), self.window)
        mask = np.zeros(self.window + 1, dtype=bool)
        if self.backfill == "easy":
            mask[:len(shown)] = True
        else:
            mask[:len(shown)] = obs[:len(shown), 4] > 0
            mask[-1] = bool(self._running.entries) and mask.any()
        return obs, mask

    def _start(self, job: Job, now: float, free: int, starts: list[Start]) -> int:
        self._running.add(now + job.time_limit, job.id, job.nodes)
        starts.append(Start(job))
        self.started(job, now)
        return free - job.nodes

    def _backfill(self, now: float, free: int, starts: list[Start]) -> None:
        """EASY around the reserved head: in queue order, every job that fits and ends (by its time limit)
        before the head's shadow time."""
        assert self._head is not None
        queue, keys, kept, kept_keys = self._queue, self._keys, [], []
        shadow: float | None = None  # the head's shadow time, computed when needed (a start may move it)
        for k, job in enumerate(queue):
            if free and job.nodes <= free:
                if shadow is None:
                    shadow = self._running.shadow(self._head.nodes, free, now)
                if now + job.time_limit < shadow:
                    free = self._start(job, now, free, starts)
                    shadow = None
                    continue
            kept.append(job)
            kept_keys.append(keys[k])
        self._queue, self._keys = kept, kept_keys


class NetPolicy(WindowPolicy):
    """The decision process with a :class:`KernelNet` choosing (its window and backfill)."""

    def __init__(self, net: KernelNet) -> None:
        super().__init__(net.window, net.backfill)
        self.net = net

    def choose(self, obs: np.ndarray, mask: np.ndarray, now: float) -> int:
        return self.net.act(obs, mask)


class LearnedPolicy(NetPolicy):
    """A trained :class:`KernelNet` as a policy: ``weights`` is the ``.npz`` file the trainer wrote
    (``sweeps/train.py``; a relative path is read from ``base_dir``, in a sweep the folder it was launched
    from); the file also fixes ``window`` and ``backfill``. :meth:`input_files` names it, so a sweep hashes
    it into the run's identity (retrained weights rerun their runs); ``sha256`` is the digest of the bytes
    this policy loaded."""

    name = "learned"

    def __init__(self, weights: str, base_dir: str = "") -> None:
        if not isinstance(weights, str) or not weights or weights == "???":
            raise InputError(f"policy.weights must name a weights .npz file (written by sweeps/train.py), "
                             f"got {weights!r}")
        self.weights = weights
        self.path = Path(base_dir).expanduser() / Path(weights).expanduser()
        try:
            data = self.path.read_bytes()
        except OSError as error:
            raise InputError(f"weights file {self.path}: cannot read it ({error.strerror or error}); train one "
                             f"with: python sweeps/train.py") from None
        self.sha256 = hashlib.sha256(data).hexdigest()
        super().__init__(KernelNet.load(data, str(self.path)))

    def input_files(self) -> dict[str, Path]:
        """The files this policy reads, by the name the user gave: its weights."""
        return {self.weights: self.path}
