"""Claims race through a real ``mlflow server`` (loopback): many pairs of sweeps claim the same run key at once,
one of each pair's creations reaching the server late (its start time taken before a random delay, as when a
busy server or network holds a request), and each key is claimed to run exactly once. The losing claim is
withdrawn: KILLED, then deleted."""

from __future__ import annotations

import os
import random
import socket
import threading
import time
from pathlib import Path
from typing import Any

from mlflow.entities import ViewType
from mlflow.tracking import MlflowClient

from sweeps.record import CLAIM_TAGS, DECIDED_TAG, Claimant, RunResult, claim_run
from sweeps.tracking import CODE_TAG, INPUTS_TAG, TAG, Claim, MlflowStore
from tests.test_sweeper import mlflow_server  # noqa: F401

PAIRS = 40


def late_creations(store: MlflowStore, rng: random.Random) -> None:
    """The store's run creations carry the time they were asked for, and reach the server up to 0.1 s later."""
    create = store.client.create_run

    def late(experiment_id: str, **kwargs: Any) -> Any:
        asked = int(time.time() * 1000)
        time.sleep(rng.uniform(0, 0.1))
        return create(experiment_id, start_time=asked, **kwargs)

    store.client.create_run = late  # type: ignore[method-assign]


def test_pairs_of_claims_through_a_tracking_server_run_each_key_once(mlflow_server: str) -> None:  # noqa: F811
    stores = [MlflowStore(mlflow_server, "race") for _ in range(2)]
    for i, store in enumerate(stores):
        late_creations(store, random.Random(i))
    outcomes: dict[int, list[Claim | RunResult]] = {key: [] for key in range(PAIRS)}

    def sweep(side: int) -> None:
        claimant = Claimant(f"sweep-{side}", socket.gethostname(), os.getpid(), Claimant.this("x").started)
        for key in range(PAIRS):
            tags = {f"{TAG}run_key": f"k{key}", f"{TAG}sweep_id": claimant.sweep_id, CODE_TAG: "c", INPUTS_TAG: "i",
                    **claimant.tags()}
            barrier.wait()
            outcomes[key].append(claim_run(stores[side], tags, f"k{key}", {}))

    barrier = threading.Barrier(2)
    threads = [threading.Thread(target=sweep, args=(side,)) for side in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    client = MlflowClient(mlflow_server)
    every = client.search_runs([stores[0].experiment_id], run_view_type=ViewType.ALL, max_results=1000)
    by_key: dict[str, list[Any]] = {}
    for run in every:
        by_key.setdefault(run.data.tags[f"{TAG}run_key"], []).append(run)
    for key, pair in outcomes.items():
        won = [o for o in pair if isinstance(o, Claim)]
        assert len(pair) == 2 and len(won) == 1, (key, pair)
        lost = next(o for o in pair if isinstance(o, RunResult))
        assert lost.elsewhere is not None and "running in another sweep" in str(lost)
        runs = by_key[f"k{key}"]
        [kept] = [r for r in runs if r.info.lifecycle_stage == "active"]
        assert kept.info.run_id == won[0].run_id and kept.data.tags[DECIDED_TAG] == "run"
        assert all(r.info.status == "KILLED" for r in runs if r is not kept)  # withdrawn: KILLED and deleted
        assert kept.data.tags[CLAIM_TAGS[0]] == lost.elsewhere  # the loser names the winner


def test_a_claim_waits_for_a_later_claim_that_is_deciding(mlflow_server: str, tmp_path: Path) -> None:  # noqa: F811
    """The one case the order alone gets wrong: a later claim that did not see ours (ours reached the store
    late) decided to run; ours, seeing it, defers — and while it has not decided yet, ours waits."""
    store = MlflowStore(mlflow_server, "wait")
    me, other = (Claimant(name, socket.gethostname(), os.getpid(), Claimant.this("x").started)
                 for name in ("me", "other"))
    tags = {f"{TAG}run_key": "k", CODE_TAG: "c", INPUTS_TAG: "i"}
    asked = int(time.time() * 1000) - 5000  # ours was asked for first …
    later = store.claim({**tags, f"{TAG}sweep_id": "other", **other.tags()}, "k")  # … the other's reached it first

    def decide_soon() -> None:
        time.sleep(1.0)
        store.set_tag(later.run_id, DECIDED_TAG, "run")

    create = store.client.create_run
    store.client.create_run = lambda eid, **kw: create(eid, start_time=asked, **kw)  # type: ignore[method-assign]
    threading.Thread(target=decide_soon).start()
    tic = time.monotonic()
    outcome = claim_run(store, {**tags, f"{TAG}sweep_id": "me", **me.tags()}, "k", {})
    assert isinstance(outcome, RunResult) and outcome.elsewhere == "other"
    assert time.monotonic() - tic >= 0.9  # it waited for the other's decision
