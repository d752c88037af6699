"""A Gymnasium environment over the simulator's own engine (``pip install -e '.[rl]'``).

Each episode is one run of :func:`sim.engine.simulate` with a policy whose choices come from the agent:
the decision process is :class:`~sim.policies.learned.WindowPolicy`'s, the same one a trained
:class:`~sim.policies.learned.LearnedPolicy` runs in a sweep, and the engine validates every start as
it does for any policy. The engine runs unchanged in a helper thread that hands control back and forth
with :meth:`SchedulingEnv.step` (strictly one side at a time, so an episode is as deterministic as a run).

* **Observation**: the oldest ``window`` waiting jobs, one row of
  :data:`~sim.policies.learned.FEATURES` each (padded with zero rows), float32 in [0, 1].
* **Action**: a window slot (start that job, or with ``backfill='easy'`` make it the reserved head that
  EASY backfills around), or slot ``window``: wait for the next event. :meth:`SchedulingEnv.action_masks`
  and ``info["action_mask"]`` say which are valid now; an invalid action raises
  :class:`InvalidActionError` and changes nothing (it is never replaced by a valid one). The agent is
  asked only when something can start (``none``) or no job is reserved (``easy``).
* **Reward**, named by ``reward`` (``bsld``, ``wait`` or ``util``, the definitions of :mod:`sim.metrics`)
  and ``reward_at``: ``end`` gives −bsld/mean, −wait/mean or +util of the finished schedule at the last
  step; ``step`` gives, at each step, −bsld (or −wait) / n of the jobs started since the previous one, so
  the rewards of an episode add up to the ``end`` value (utilisation is known only at the end).
* ``reset(seed=s)`` draws the jobs from ``draw(numpy.random.default_rng(s))``: seed s is the jobs of a
  sweep's run with ``seed=s``. Without a seed, episodes continue the env's seeded sequence.
"""

from __future__ import annotations

import math
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from sim.core import Cluster, InputError, Job, JobRecord, SimulationResult, Workload
from sim.engine import simulate, validate_jobs
from sim.metrics import bounded_slowdown, summarize
from sim.policies.learned import BACKFILLS, FEATURES, WindowPolicy, wait_action

REWARDS = ("bsld", "wait", "util")
REWARD_AT = ("end", "step")


class InvalidActionError(InputError):
    """An action the mask rules out (or not an action at all); the episode is left as it was."""


class _Aborted(Exception):
    """Raised inside the engine's thread to end an episode the env abandons (reset, close)."""


_ABORT = -1


class _Agent(WindowPolicy):
    """The decision process, its choices handed to the env and answered by the agent."""

    name = "agent"

    def __init__(self, window: int, backfill: str, kill_at_limit: bool) -> None:
        super().__init__(window, backfill)
        self.kill_at_limit = kill_at_limit
        self.asks: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()  # engine → env
        self.answers: queue.SimpleQueue[int] = queue.SimpleQueue()  # env → engine
        self.records: list[JobRecord] = []  # every start, as the engine will record it

    def choose(self, obs: np.ndarray, mask: np.ndarray, now: float) -> int:
        self.asks.put(("decide", (obs, mask, now, len(self._queue))))
        action = self.answers.get()
        if action == _ABORT:
            raise _Aborted
        return action

    def started(self, job: Job, now: float) -> None:
        duration = min(job.runtime, job.time_limit) if self.kill_at_limit else job.runtime
        self.records.append(JobRecord(job, now, now + duration))


@dataclass
class _Episode:
    """One engine run in its thread, and where the env is in it."""

    agent: _Agent
    jobs: list[Job]
    seed: int
    thread: threading.Thread | None = None
    mask: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    rewarded: int = 0  # records already paid out by per-step rewards
    over: bool = False
    result: SimulationResult | None = None

    def start(self, cluster: Cluster, kill_at_limit: bool) -> None:
        def play() -> None:
            try:
                result = simulate(self.jobs, cluster, self.agent, kill_at_limit=kill_at_limit)
            except _Aborted:
                return
            except BaseException as error:  # handed to the env's thread, which raises it
                self.agent.asks.put(("error", error))
                return
            self.agent.asks.put(("done", result))

        self.thread = threading.Thread(target=play, name=f"schedlab-env-seed{self.seed}", daemon=True)
        self.thread.start()

    def abort(self) -> None:
        if self.thread is not None and self.thread.is_alive():
            self.agent.answers.put(_ABORT)
            self.thread.join()
        self.over = True


def _wait(record: JobRecord) -> float:
    return record.wait


class SchedulingEnv(gym.Env[np.ndarray, np.int64]):
    """Scheduling decisions of one node-count machine as a Gymnasium environment (module docstring).

    ``cluster``: the machine; ``draw``: a workload from a generator (e.g. a ``sweeps.specs`` spec's
    ``build`` bound to the cluster: :func:`sweeps.env_config.env_from_config` builds both from ``conf/``).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, cluster: Cluster, draw: Callable[[np.random.Generator], Workload], *, window: int = 32,
                 backfill: str = "none", reward: str = "bsld", reward_at: str = "end", kill_at_limit: bool = False,
                 drop_oversized: bool = False) -> None:
        if len(cluster.resources) != 1 or len(cluster.machines) != 1:
            raise InputError(f"SchedulingEnv schedules node counts on one machine; got resources "
                             f"{cluster.resources} on {len(cluster.machines)} machine(s)")
        if reward not in REWARDS or reward_at not in REWARD_AT:
            raise InputError(f"reward {reward!r} at {reward_at!r}: expected one of {', '.join(REWARDS)} at one of "
                             f"{', '.join(REWARD_AT)}")
        if reward == "util" and reward_at == "step":
            raise InputError("reward util is known only at the episode's end: use reward_at='end'")
        if backfill not in BACKFILLS:
            raise InputError(f"backfill must be one of {', '.join(BACKFILLS)}, got {backfill!r}")
        if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
            raise InputError(f"window must be a positive integer, got {window!r}")
        self.cluster, self.draw = cluster, draw
        self.window, self.backfill, self.reward, self.reward_at = window, backfill, reward, reward_at
        self.kill_at_limit, self.drop_oversized = kill_at_limit, drop_oversized
        self.observation_space = spaces.Box(0.0, 1.0, (window, len(FEATURES)), np.float32)
        self.action_space = spaces.Discrete(window + 1)
        self._episode: _Episode | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        """A new episode: the jobs of ``seed`` (see the module docstring), run to the first decision."""
        super().reset(seed=seed)
        if options:
            raise InputError(f"SchedulingEnv.reset takes no options, got {sorted(options)}")
        self.close()
        episode_seed = seed if seed is not None else int(self.np_random.integers(2**31))
        workload = self.draw(np.random.default_rng(episode_seed))
        jobs, _ = validate_jobs(workload.jobs, self.cluster, drop_oversized=self.drop_oversized)
        if not jobs:
            raise InputError(f"{workload.source or 'workload'} (seed {episode_seed}): no jobs to schedule")
        self._episode = _Episode(_Agent(self.window, self.backfill, self.kill_at_limit), jobs, episode_seed)
        self._episode.start(self.cluster, self.kill_at_limit)
        obs, _, over, info = self._advance()
        assert not over, "the first job always meets an idle machine: an episode has a decision"
        return obs, info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Apply ``action`` and run the engine to the next decision or the episode's end."""
        episode = self._episode
        if episode is None or episode.over:
            raise InputError("SchedulingEnv.step: no episode in progress: call reset() first")
        slot = self._check(action, episode.mask)
        episode.agent.answers.put(slot)
        obs, reward, over, info = self._advance()
        return obs, reward, over, False, info

    def action_masks(self) -> np.ndarray:
        """Which actions are valid now (window slots, then wait) — the name sb3-contrib's MaskablePPO calls."""
        if self._episode is None:
            raise InputError("SchedulingEnv.action_masks: call reset() first")
        return self._episode.mask.copy()

    @property
    def result(self) -> SimulationResult | None:
        """The finished episode's schedule (``None`` until the episode ends)."""
        return self._episode.result if self._episode is not None else None

    def close(self) -> None:
        """End the episode in progress, if any (its engine thread stops)."""
        if self._episode is not None:
            self._episode.abort()

    def _check(self, action: Any, mask: np.ndarray) -> int:
        if isinstance(action, np.ndarray) and action.shape == () and action.dtype.kind in "iu":
            action = action.item()  # a 0-d integer array is a slot number too (Discrete.contains agrees)
        if isinstance(action, bool | np.bool_) or not isinstance(action, int | np.integer):
            raise InvalidActionError(f"action {action!r} is not a slot number (0..{self.window})")
        slot = int(action)
        if 0 <= slot < len(mask) and mask[slot]:
            return slot
        valid = ", ".join(str(k) for k in np.flatnonzero(mask))
        what = ("wait" if slot == wait_action(self.window) else
                f"slot {slot}" if 0 <= slot < self.window else f"{slot} (outside 0..{self.window})")
        raise InvalidActionError(f"action {what} is not valid now; valid actions: {valid} "
                                 f"(slots of waiting jobs{' that fit' if self.backfill == 'none' else ''}"
                                 f"{', ' + str(self.window) + ' = wait' if mask[-1] else ''})")

    def _advance(self) -> tuple[np.ndarray, float, bool, dict[str, Any]]:
        """Wait for the engine's next message: a decision, the end of the run, or its error."""
        episode = self._episode
        assert episode is not None
        kind, payload = episode.agent.asks.get()
        if kind == "error":
            episode.over = True
            raise payload
        reward = self._step_reward(episode)
        if kind == "decide":
            obs, mask, now, waiting = payload
            episode.mask = mask
            return obs, reward, False, {"action_mask": mask.copy(), "time": now, "waiting": waiting,
                                        "seed": episode.seed}
        episode.over, episode.result = True, payload
        self._check_records(episode)
        metrics = summarize(episode.result)
        if self.reward_at == "end":
            reward = metrics["util"] if self.reward == "util" else -metrics[f"{self.reward}/mean"]
        episode.mask = np.zeros(self.window + 1, dtype=bool)
        return (np.zeros(self.observation_space.shape, dtype=np.float32), reward, True,
                {"action_mask": episode.mask.copy(), "metrics": metrics, "seed": episode.seed})

    def _step_reward(self, episode: _Episode) -> float:
        if self.reward_at == "end":
            return 0.0
        new = episode.agent.records[episode.rewarded:]
        episode.rewarded += len(new)
        cost = bounded_slowdown if self.reward == "bsld" else _wait
        return -math.fsum(cost(r) for r in new) / len(episode.jobs)

    @staticmethod
    def _check_records(episode: _Episode) -> None:
        """The starts the rewards were paid on are the engine's schedule (else the rewards would be wrong)."""
        assert episode.result is not None
        mine = sorted((r.job.id, r.start, r.end) for r in episode.agent.records)
        if mine != sorted((r.job.id, r.start, r.end) for r in episode.result.records):
            raise RuntimeError("SchedulingEnv: the engine's schedule differs from the starts the env rewarded")
