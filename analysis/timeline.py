"""One run's schedule over time, rebuilt from its ``jobs.parquet``: node ids and resource use.

The simulator records how many nodes a job held, not which ones. :func:`assign_nodes` gives
concrete ids post hoc by replaying starts and ends in time order, each start taking the lowest
free ids — a valid allocation whenever capacity was never exceeded (ends at an instant are
applied before starts, as in the engine).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis import AnalysisError

HOUR = 3600.0


def time_unit(span_seconds: float) -> tuple[str, float]:
    """``("h", 3600)`` for spans over five hours, else ``("s", 1)``: the axis unit and divisor.

    >>> time_unit(600.0), time_unit(86400.0)
    (('s', 1.0), ('h', 3600.0))
    """
    return ("h", HOUR) if span_seconds > 5 * HOUR else ("s", 1.0)


def busy_steps(jobs: pd.DataFrame, resource: str = "nodes") -> pd.DataFrame:
    """Amount of ``resource`` in use from each event time until the next (columns time, busy).

    >>> jobs = pd.DataFrame({"start_time": [0.0, 5.0], "end_time": [10.0, 20.0], "nodes": [2, 3]})
    >>> busy_steps(jobs).to_dict("list")
    {'time': [0.0, 5.0, 10.0, 20.0], 'busy': [2.0, 5.0, 3.0, 0.0]}
    """
    ran = _ran(jobs, resource)
    demand = ran[resource].to_numpy(dtype=float)
    deltas = pd.Series(
        np.concatenate([demand, -demand]),
        index=np.concatenate([ran["start_time"].to_numpy(float), ran["end_time"].to_numpy(float)]),
    )
    steps = deltas.groupby(level=0).sum().sort_index().cumsum()
    return pd.DataFrame({"time": steps.index.to_numpy(float), "busy": steps.to_numpy().round(9) + 0.0})


def assign_nodes(jobs: pd.DataFrame, capacity: int | None = None, resource: str = "nodes") -> pd.DataFrame:
    """Contiguous node-id blocks per job (job_id, start_time, end_time, first_node, n_nodes).

    ``capacity`` defaults to the peak use. A job that would exceed it is an error naming the job.

    >>> jobs = pd.DataFrame({"job_id": [1, 2, 3], "start_time": [0.0, 0.0, 5.0],
    ...                      "end_time": [5.0, 9.0, 9.0], "nodes": [2, 1, 3]})
    >>> assign_nodes(jobs, 4)[["job_id", "first_node", "n_nodes"]].values.tolist()
    [[1, 0, 2], [2, 2, 1], [3, 0, 2], [3, 3, 1]]
    """
    ran = _ran(jobs, resource)
    demand = ran[resource].to_numpy(dtype=float)
    if not np.allclose(demand, np.round(demand)):
        raise AnalysisError(f"resource {resource!r} has fractional demands; node ids need whole units")
    if capacity is None:
        capacity = int(busy_steps(ran, resource)["busy"].max()) if len(ran) else 0
    free = np.ones(capacity, dtype=bool)
    job_ids = ran["job_id"].to_numpy() if "job_id" in ran else np.arange(len(ran))
    starts, ends = ran["start_time"].to_numpy(float), ran["end_time"].to_numpy(float)
    held: dict[int, np.ndarray] = {}
    blocks: list[tuple[object, float, float, int, int]] = []
    for kind, pos in _events(ran):
        if kind == 0:
            free[held.pop(pos)] = True
            continue
        need = round(demand[pos])
        ids = np.flatnonzero(free)[:need]
        if len(ids) < need:
            raise AnalysisError(
                f"job {job_ids[pos]} needs {need} {resource} at t={starts[pos]:g} but only "
                f"{len(ids)} of {capacity} are free: the schedule exceeds the capacity"
            )
        free[ids] = False
        if ends[pos] > starts[pos]:
            held[pos] = ids
        else:
            free[ids] = True
        blocks.extend((job_ids[pos], starts[pos], ends[pos], first, count) for first, count in _runs(ids))
    columns = ["job_id", "start_time", "end_time", "first_node", "n_nodes"]
    return pd.DataFrame(blocks, columns=columns).sort_values(["job_id", "first_node"], ignore_index=True)


def _ran(jobs: pd.DataFrame, resource: str) -> pd.DataFrame:
    """Jobs that started and hold a positive amount of ``resource``."""
    if resource not in jobs:
        raise AnalysisError(f"jobs table has no {resource!r} column; columns: {', '.join(map(str, jobs.columns))}")
    ran = jobs[jobs["start_time"].notna() & jobs["end_time"].notna() & (jobs[resource] > 0)]
    return ran.reset_index(drop=True)


def _events(ran: pd.DataFrame) -> list[tuple[int, int]]:
    """(kind, row position) in replay order: by time, ends (0) before starts (1), starts by job id."""
    ids = ran["job_id"].to_numpy() if "job_id" in ran else np.arange(len(ran))
    ends = [(t, 0, 0, pos) for pos, (s, t) in enumerate(zip(ran["start_time"], ran["end_time"], strict=True)) if t > s]
    starts = [(t, 1, ids[pos], pos) for pos, t in enumerate(ran["start_time"])]
    return [(kind, pos) for _, kind, _, pos in sorted(ends + starts, key=lambda e: (e[0], e[1], e[2], e[3]))]


def _runs(ids: np.ndarray) -> list[tuple[int, int]]:
    """Consecutive id runs as (first, count): [0, 1, 2, 5] → [(0, 3), (5, 1)]."""
    if len(ids) == 0:
        return []
    breaks = np.flatnonzero(np.diff(ids) != 1) + 1
    return [(int(chunk[0]), len(chunk)) for chunk in np.split(ids, breaks)]
