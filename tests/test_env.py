"""The Gymnasium environment over the engine: Gymnasium's own checker, exact schedules against the
policies it must reproduce, rewards that are the simulator's metrics, strict actions and seeding."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")

from gymnasium.utils.env_checker import check_env  # noqa: E402

from sim.core import Cluster, InputError, Workload, rigid_job  # noqa: E402
from sim.env import InvalidActionError, SchedulingEnv  # noqa: E402
from sim.metrics import summarize  # noqa: E402
from sim.policies.learned import FEATURES, KernelNet, LearnedPolicy  # noqa: E402
from sweeps import task  # noqa: E402
from sweeps.env_config import compose_config, env_from_config  # noqa: E402

SMALL = ["workload.jobs=300"]  # hpc128, the default synthetic stream at load ≈ 0.8


@pytest.fixture(scope="module")
def cfg() -> dict[str, Any]:
    return compose_config(SMALL)


def play(env: SchedulingEnv, seed: int, agent: Any) -> tuple[list[Any], float, dict[str, Any]]:
    """One episode: the actions taken, the summed reward and the last info."""
    obs, info = env.reset(seed=seed)
    actions, total = [], 0.0
    while True:
        action = agent(obs, info["action_mask"])
        actions.append(action)
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        assert not truncated
        if terminated:
            return actions, total, info


def oldest(window: int):
    """The FCFS choice: the oldest job if it can start, else wait."""
    return lambda obs, mask: 0 if mask[0] else window


def starts(run_cfg: dict[str, Any], seed: int, policy: str) -> list[float]:
    outcome = task.run_one({**run_cfg, "seed": seed, "policy": {"_target_": "sim.policies.backfill.SeedBackfill",
                                                                "window": policy}})
    return outcome.tables["jobs"]["start_time"]


class ValidActions(gymnasium.ActionWrapper):
    """Test only: ``check_env`` samples actions without the mask, so each is mapped to a valid one
    (the k-th sample to the (k mod n)-th valid action) — the checker then exercises the env's API."""

    def action(self, action: Any) -> int:
        valid = np.flatnonzero(self.env.unwrapped.action_masks())
        return int(valid[int(action) % len(valid)])


@pytest.mark.filterwarnings("ignore:.*different from the unwrapped version")
@pytest.mark.parametrize("backfill", ["none", "easy"])
def test_gymnasium_env_checker_passes(cfg: dict[str, Any], backfill: str) -> None:
    env = env_from_config(cfg, backfill=backfill, window=8, reward_at="step")
    check_env(ValidActions(env), skip_render_check=True)


@pytest.mark.parametrize("seed", [0, 7])
def test_the_fcfs_choice_reproduces_policy_fcfs_exactly(cfg: dict[str, Any], seed: int) -> None:
    env = env_from_config(cfg, backfill="none", window=16)
    actions, _, info = play(env, seed, oldest(16))
    assert [r.start for r in env.result.records] == starts(cfg, seed, "none")
    assert 16 in actions and 0 in actions  # it did wait with jobs that fit behind the head
    assert info["metrics"]["bsld/mean"] == task.run_one({**cfg, "seed": seed, "policy": {
        "_target_": "sim.policies.backfill.SeedBackfill", "window": "none"}}).summary["bsld/mean"]


@pytest.mark.parametrize("seed", [0, 7])
def test_choosing_the_oldest_head_with_easy_backfill_is_easy(cfg: dict[str, Any], seed: int) -> None:
    env = env_from_config(cfg, backfill="easy", window=16)
    play(env, seed, lambda obs, mask: 0)
    assert [r.start for r in env.result.records] == starts(cfg, seed, "head")


def test_an_agent_with_a_network_is_the_learned_policy_with_its_weights(cfg: dict[str, Any], tmp_path) -> None:
    """One definition: the env's decision process driven by ``KernelNet.act`` is ``LearnedPolicy``'s."""
    for backfill in ("none", "easy"):
        net = KernelNet.initial(np.random.default_rng(5), window=8, backfill=backfill)
        net = net.with_vector(net.vector() + np.r_[np.zeros(net.size - 1), 0.3])  # wait now and then
        path = net.save(tmp_path / f"{backfill}.npz")
        env = env_from_config(cfg, backfill=backfill, window=8)
        play(env, 3, lambda obs, mask, net=net: net.act(obs, mask))
        policy_cfg = {"_target_": "sim.policies.learned.LearnedPolicy", "weights": str(path)}
        outcome = task.run_one({**cfg, "seed": 3, "policy": policy_cfg})
        assert [r.start for r in env.result.records] == outcome.tables["jobs"]["start_time"]
        assert LearnedPolicy(str(path)).net.window == 8


def tiny(*jobs: tuple[int, float, int, float]) -> SchedulingEnv:
    """An env on a 4-node machine whose every episode is ``jobs`` (id, submit, nodes, run time = limit)."""
    workload = Workload([rigid_job(i, s, n, t) for i, s, n, t in jobs])
    return SchedulingEnv(Cluster.nodes(4), lambda rng: workload, window=2)


def test_a_hand_built_episode_step_by_step() -> None:
    """A (4 nodes, 100 s) at 0; B (2 nodes, 10 s) and C (1 node, 10 s) at 1: the agent first starts A (the
    idle machine may not wait), then at t=100 chooses C before B; each decision's window, mask and time."""
    env = tiny((0, 0.0, 4, 100.0), (1, 1.0, 2, 10.0), (2, 1.0, 1, 10.0))
    obs, info = env.reset(seed=0)
    assert obs.shape == (2, len(FEATURES)) and obs.dtype == np.float32
    assert info["time"] == 0.0 and info["action_mask"].tolist() == [True, False, False]  # no wait on an idle machine
    assert obs[0].tolist()[:2] == [1.0, 1.0] and obs[1].tolist() == [0.0] * len(FEATURES)
    obs, reward, terminated, _, info = env.step(0)
    assert (info["time"], info["waiting"], reward, terminated) == (100.0, 2, 0.0, False)
    assert info["action_mask"].tolist() == [True, True, False]  # both fit; nothing runs, so no wait
    obs, _, _, _, info = env.step(1)  # C
    assert info["time"] == 100.0 and info["action_mask"].tolist() == [True, False, True]  # B fits; C runs
    _, reward, terminated, _, info = env.step(0)  # B
    assert terminated and {(r.job.id, r.start) for r in env.result.records} == {(0, 0.0), (1, 100.0), (2, 100.0)}
    assert reward == -info["metrics"]["bsld/mean"] == -summarize(env.result)["bsld/mean"]


def test_invalid_actions_raise_one_line_and_change_nothing(cfg: dict[str, Any]) -> None:
    env = tiny((0, 0.0, 4, 100.0), (1, 1.0, 2, 10.0), (2, 1.0, 1, 10.0))
    env.reset(seed=0)
    for action, message in [(1, "action slot 1 is not valid now; valid actions: 0 (slots of waiting jobs that fit)"),
                            (2, "action wait is not valid now; valid actions: 0"),
                            (7, "action 7 (outside 0..2) is not valid now"),
                            (True, "action True is not a slot number (0..2)"),
                            (0.0, "action 0.0 is not a slot number (0..2)")]:
        with pytest.raises(InvalidActionError, match=message.replace("(", r"\(").replace(")", r"\)")) as caught:
            env.step(action)
        assert "\n" not in str(caught.value) and isinstance(caught.value, InputError)
    _, _, _, _, info = env.step(np.int64(0))  # the episode is where it was
    assert info["time"] == 100.0
    env.step(np.array(1))
    assert env.step(0)[2]  # terminated
    with pytest.raises(InputError, match="no episode in progress: call reset"):
        env.step(0)
    with pytest.raises(InputError, match="no episode in progress: call reset"):
        SchedulingEnv(Cluster.nodes(4), lambda rng: Workload([])).step(0)


def test_reset_with_a_seed_is_reproducible_and_seeds_differ(cfg: dict[str, Any]) -> None:
    env = env_from_config(cfg, backfill="none", window=8, reward_at="step")
    rng = np.random.default_rng(0)
    random_valid = lambda obs, mask: int(rng.choice(np.flatnonzero(mask)))  # noqa: E731
    first = play(env, 11, random_valid)
    rng = np.random.default_rng(0)
    again = play(env, 11, random_valid)
    assert first[0] == again[0] and first[1] == again[1]
    other = env.reset(seed=12)[0]
    assert not np.array_equal(env.reset(seed=11)[0], other)
    env.reset(seed=4)  # unseeded resets continue the seeded sequence
    seeds = [env.reset()[1]["seed"] for _ in range(3)]
    env.reset(seed=4)
    assert [env.reset()[1]["seed"] for _ in range(3)] == seeds and len(set(seeds)) == 3


def test_the_seed_draws_the_sweep_runs_jobs(cfg: dict[str, Any]) -> None:
    env = env_from_config(cfg)
    play(env, 5, oldest(env.window))
    assert [r.job.submit for r in env.result.records] == task.run_one(
        {**cfg, "seed": 5, "policy": {"_target_": "sim.policies.backfill.SeedBackfill", "window": "none"}}
    ).tables["jobs"]["submit_time"]


@pytest.mark.parametrize("reward", ["bsld", "wait"])
def test_per_step_rewards_add_up_to_the_metric(cfg: dict[str, Any], reward: str) -> None:
    env = env_from_config(cfg, backfill="easy", window=8, reward=reward, reward_at="step")
    rng = np.random.default_rng(1)
    actions, total, info = play(env, 2, lambda obs, mask: int(rng.choice(np.flatnonzero(mask))))
    assert len(actions) > 50
    assert total == pytest.approx(-info["metrics"][f"{reward}/mean"], rel=1e-9)
    ends = env_from_config(cfg, backfill="easy", window=8, reward="util")
    rng = np.random.default_rng(1)
    assert play(ends, 2, lambda obs, mask: int(rng.choice(np.flatnonzero(mask))))[1] == info["metrics"]["util"]


@pytest.mark.parametrize(("options", "message"), [
    ({"reward": "util", "reward_at": "step"}, "reward util is known only at the episode's end"),
    ({"reward": "slowdown"}, "reward 'slowdown' at 'end': expected one of bsld, wait, util"),
    ({"backfill": "conservative"}, "backfill must be one of none, easy, got 'conservative'"),
    ({"window": 0}, "window must be a positive integer, got 0"),
])
def test_bad_options_are_one_line(cfg: dict[str, Any], options: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        env_from_config(cfg, **options)


@pytest.mark.parametrize(("overrides", "message"), [
    (["cluster=drf_pool", "workload=multires3"], "policy 'SchedulingEnv' schedules hpc workloads, not multires"),
    (["cluster=drf_pool"], "policy 'SchedulingEnv' does not fit cluster {'cpu': 32.0, 'mem': 128.0} × 1 machine"),
    (["cluster=from_trace", "workload=swf", f"workload.path={__file__}"], "needs a sized cluster"),
])
def test_a_config_the_env_cannot_run_is_refused(overrides: list[str], message: str) -> None:
    with pytest.raises(InputError, match=message):
        env_from_config(compose_config(overrides))


def test_reset_and_close_end_the_episode_in_progress(cfg: dict[str, Any]) -> None:
    env = env_from_config(cfg)
    before = threading.active_count()
    for seed in range(5):
        env.reset(seed=seed)
        env.step(0)
    assert threading.active_count() == before + 1  # one episode's engine at a time
    env.close()
    assert threading.active_count() == before


def swf(folder: Any, jobs: int = 40) -> str:
    """A trace of ``jobs`` jobs on 16 nodes, one every 50 s; its path."""
    rows = [f"{k + 1} {50 * k} -1 {60 + 7 * (k % 5)} {1 + k % 16} -1 -1 {1 + k % 16} 200 -1 1 1 1 1 1 -1 -1 -1"
            for k in range(jobs)]
    path = folder / "t.swf"
    path.write_text("; MaxNodes: 16\n" + "\n".join(rows) + "\n")
    return str(path)


def test_a_trace_episode_is_the_whole_trace_as_a_run_replays_it(tmp_path: Any) -> None:
    cfg = compose_config(["workload=swf", f"workload.path={swf(tmp_path)}", "cluster=hpc16"])
    env = env_from_config(cfg)
    play(env, 3, oldest(env.window))
    assert [r.start for r in env.result.records] == starts(cfg, 0, "none")


def test_a_window_of_a_trace_per_episode_is_drawn_by_the_seed(tmp_path: Any) -> None:
    cfg = compose_config(["workload=swf", f"workload.path={swf(tmp_path)}", "cluster=hpc16"])
    env = env_from_config(cfg, episode_jobs=10)

    def episode(seed: int) -> list[tuple[int, float]]:
        play(env, seed, oldest(env.window))
        return [(r.job.id, r.job.submit) for r in env.result.records]

    first = episode(1)
    ids = [job_id for job_id, _ in first]
    assert ids == list(range(ids[0], ids[0] + 10)) and [s for _, s in first] == [50.0 * k for k in range(10)]
    assert episode(1) == first and len({episode(seed)[0][0] for seed in range(6)}) > 1
    with pytest.raises(InputError, match="episode_jobs must be a whole number from 1 to the trace's 40 jobs, got 41"):
        env_from_config(cfg, episode_jobs=41)
    with pytest.raises(InputError, match="episode_jobs windows a replayed trace; SyntheticHpc draws"):
        env_from_config(compose_config(SMALL), episode_jobs=10)
