"""The backfilling seed's pseudocode, transcribed literally (slow on purpose: O(n²) per event).

It is the oracle the fast policies are checked against and the baseline ``make bench`` reports
speed-ups over. Same-instant contract: completions, then arrivals in (submit, id) order, then one
scheduling pass. Jobs are ``(job_id, submit, nodes, time_limit, runtime)`` tuples.
"""

from __future__ import annotations

import math

JobTuple = tuple[int, float, int, float, float]


def _reservation(needed: int, free_nodes: int, running: list[dict]) -> float:
    """Step 2 of the seed: when enough nodes will be available (pessimistic ends)."""
    if free_nodes >= needed:
        return -math.inf  # fits now: reservation is "now" (filled in by the caller)
    events = sorted((r["start"] + r["time_limit"], r["nodes"]) for r in running)
    cumulative_freed = 0
    for end_time, nodes in events:
        cumulative_freed += nodes
        if free_nodes + cumulative_freed >= needed:
            return end_time
    raise ValueError("job needs more than TOTAL_NODES")


def _schedule(policy: str, now: float, total: int, wait_queue: list[dict], running: list[dict]) -> None:
    while True:
        if not wait_queue:
            return
        free_nodes = total - sum(r["nodes"] for r in running)
        fcfs_head = wait_queue[0]
        if free_nodes >= fcfs_head["nodes"]:  # Step 1
            _start(fcfs_head, now, wait_queue, running)
            continue
        if policy == "fcfs":
            return
        backfilled = False
        if policy == "easy":
            reservation_time = _reservation(fcfs_head["nodes"], free_nodes, running)  # Step 2
            for job in list(wait_queue[1:]):  # Step 3
                free_nodes = total - sum(r["nodes"] for r in running)
                if job["nodes"] > free_nodes:
                    continue
                if now + job["time_limit"] >= reservation_time:
                    continue
                _start(job, now, wait_queue, running)
                backfilled = True
        else:  # conservative
            for job in list(wait_queue[1:]):
                position = wait_queue.index(job)
                free_nodes = total - sum(r["nodes"] for r in running)
                if job["nodes"] > free_nodes:
                    continue
                earliest_reservation = math.inf
                for waiting_job in wait_queue[0:position]:  # reservations from effective running
                    r = _reservation(waiting_job["nodes"], free_nodes, running)
                    earliest_reservation = min(earliest_reservation, now if r == -math.inf else r)
                if now + job["time_limit"] >= earliest_reservation:
                    continue
                _start(job, now, wait_queue, running)
                backfilled = True
        if not backfilled:
            return


def _start(job: dict, now: float, wait_queue: list[dict], running: list[dict]) -> None:
    job["start"] = now
    wait_queue.remove(job)
    running.append(job)


def run(policy: str, jobs: list[JobTuple], total: int) -> dict[int, tuple[float, float]]:
    """Schedule ``jobs`` with the seed's ``fcfs``/``easy``/``conservative``: id → (start, end)."""
    pending = sorted(
        ({"id": i, "submit": s, "nodes": n, "time_limit": tl, "runtime": rt} for i, s, n, tl, rt in jobs),
        key=lambda j: (j["submit"], j["id"]),
    )
    wait_queue: list[dict] = []
    running: list[dict] = []
    result: dict[int, tuple[float, float]] = {}
    while pending or wait_queue or running:
        times = [r["start"] + r["runtime"] for r in running] + [j["submit"] for j in pending[:1]]
        now = min(times)
        for r in sorted((r for r in running if r["start"] + r["runtime"] == now), key=lambda r: r["id"]):
            running.remove(r)
            result[r["id"]] = (r["start"], now)
        while pending and pending[0]["submit"] == now:
            wait_queue.append(pending.pop(0))
        _schedule(policy, now, total, wait_queue, running)
    return result
