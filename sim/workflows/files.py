"""The workflow-stream JSON file: what a run's workflows were, so any policy can replay them.

``{"m": int, "c_r": int, "jobs": [{"id", "arrival", "earliest_start", "deadline", "kind"?,
"tasks": [{"id", "runtime", "parents": [...]}]}]}`` — job ids 0..J−1 in arrival order, task ids
0..n−1 local to their job (parents name task ids of the same job). ``m`` × ``c_r`` is the system
the deadlines were drawn for; SET^R is recomputed on it (or on the m, c_r the reader is given).
Values beyond :mod:`sim.workflows.limits` (m, c_r, tasks per job, times above 1e10 s) are refused.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sim.core import InputError, Workflow, Workload
from sim.workflows.limits import check_system
from sim.workflows.stream import make_workflow


def _job(wf: Workflow) -> dict[str, Any]:
    """One job of the file (task ids made local)."""
    first = wf.tasks[0].id if wf.tasks else 0
    tasks = [{"id": t.id - first, "runtime": t.runtime, "parents": [p - first for p in t.parents]} for t in wf.tasks]
    return {"id": wf.id, "arrival": wf.arrival, "earliest_start": wf.earliest_start, "deadline": wf.deadline,
            "kind": wf.kind, "tasks": tasks}


def write_stream(path: str | Path, workflows: Iterable[Workflow], m: int, c_r: int) -> Path:
    """Write the stream file for ``workflows`` on an m × c_r system, one job at a time (a generated
    stream builds each workflow as it is written), atomically: a temporary file in the same folder,
    then a rename."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps({"m": m, "c_r": c_r, "jobs": []}, separators=(",", ":"))[:-2])
            for k, wf in enumerate(workflows):
                f.write(("," if k else "") + json.dumps(_job(wf), separators=(",", ":")))
            f.write("]}")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load_json(path: Path) -> Any:
    """Parsed JSON, or an :class:`InputError` naming the file, line and column."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: line {e.lineno} column {e.colno}: malformed JSON: {e.msg}") from None


def read_stream(path: str | Path, machines: int | None = None, slots: int | None = None,
                warmup: int = 0) -> tuple[Workload, int, int]:
    """(workload, m, c_r) of a stream file; SET^R on ``machines`` × ``slots`` (default: the file's)."""
    path = Path(path)
    data = load_json(path)
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object with m, c_r and jobs")
    m, c_r = (_count(path, data, key) for key in ("m", "c_r"))
    check_system(m, c_r, f"{path}: ", "'")
    jobs = data.get("jobs")
    if not isinstance(jobs, list) or not jobs:
        raise InputError(f"{path}: 'jobs' must be a non-empty list of jobs")
    if not isinstance(warmup, int) or not 0 <= warmup < len(jobs):
        raise InputError(f"{path}: warm-up of {warmup!r} jobs must be in [0, {len(jobs)})")
    workflows, first, last = [], 0, -math.inf
    for pos, job in enumerate(jobs):
        where = f"{path}: job {job.get('id', f'at position {pos}') if isinstance(job, dict) else pos}"
        if not isinstance(job, dict):
            raise InputError(f"{where}: expected an object with id, arrival, earliest_start, deadline, tasks")
        if job.get("id") != pos or isinstance(job.get("id"), bool):
            raise InputError(f"{where}: id must be {pos} (jobs are numbered 0.. in arrival order)")
        arrival, start, deadline = (_time(where, job, key) for key in ("arrival", "earliest_start", "deadline"))
        if arrival < last:
            raise InputError(f"{where}: arrival {arrival} is before the previous job's ({last}); order jobs by arrival")
        if start < arrival:
            raise InputError(f"{where}: earliest_start {start} is before its arrival {arrival}")
        if deadline < start:
            raise InputError(f"{where}: deadline {deadline} is before its earliest_start {start}")
        runtimes, parents = _tasks(where, job.get("tasks"))
        kind = job.get("kind", "")
        wf = make_workflow(pos, first, arrival, start, deadline, runtimes, parents, machines or m, slots or c_r,
                           kind=kind if isinstance(kind, str) else "", where=where)
        workflows.append(wf)
        first, last = first + len(runtimes), arrival
    return Workload(source=str(path), kind="workflow", workflows=tuple(workflows), warmup=warmup), m, c_r


def _tasks(where: str, tasks: Any) -> tuple[list[float], list[list[int]]]:
    if not isinstance(tasks, list) or not tasks:
        raise InputError(f"{where}: 'tasks' must be a non-empty list")
    runtimes, parents = [], []
    for pos, task in enumerate(tasks):
        if not isinstance(task, dict) or task.get("id") != pos or isinstance(task.get("id"), bool):
            got = task.get("id") if isinstance(task, dict) else task
            raise InputError(f"{where}: task at position {pos} has id {got!r}; task ids must be 0..n−1 in order")
        runtime = task.get("runtime")
        if not _finite(runtime) or runtime < 0:
            raise InputError(f"{where}: task {pos}: runtime must be a non-negative number of seconds, got {runtime!r}")
        ps = task.get("parents", [])
        if not isinstance(ps, list):
            raise InputError(f"{where}: task {pos}: parents must be a list of task ids, got {ps!r}")
        runtimes.append(float(runtime))
        parents.append(ps)
    return runtimes, parents


def _count(path: Path, data: dict, key: str) -> int:
    value = data.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise InputError(f"{path}: '{key}' must be a positive integer, got {value!r}")
    return value


def _time(where: str, job: dict, key: str) -> float:
    value = job.get(key)
    if not _finite(value) or value < 0:
        raise InputError(f"{where}: {key} must be a non-negative number of seconds, got {value!r}")
    return float(value)


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
