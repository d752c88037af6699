"""WfFormat (WfCommons) workflow instances as DAGs, and an open stream drawing them.

Schema 1.3–1.4: ``workflow.tasks`` with ``name`` (and ``id``), ``runtime`` or ``runtimeInSeconds``,
``parents`` / ``children`` naming other tasks by id (or name). Schema 1.5+: structure in
``workflow.specification.tasks`` (``id``, ``parents``, ``children``), run times in
``workflow.execution.tasks`` (``id``, ``runtimeInSeconds``). Edges are the union of what
``parents`` and ``children`` say; task ids must be unique, run times at most 1e10 s and tasks at most
:data:`~sim.workflows.limits.MAX_TASKS`. Read with plain :mod:`json`: ``sim/`` takes only stdlib and numpy,
and the ``wfcommons`` package would bring its whole generator/analysis stack for ~60 lines of parsing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from sim.core import InputError, Workload
from sim.workflows.dag import topological_order
from sim.workflows.files import load_json
from sim.workflows.generators import Dag
from sim.workflows.limits import check_size, check_tasks, check_time
from sim.workflows.stream import open_stream


def read_wfformat(path: str | Path) -> Dag:
    """The instance's DAG, tasks in file order; errors name the file and the task."""
    path = Path(path)
    data = load_json(path)
    workflow = data.get("workflow") if isinstance(data, dict) else None
    if not isinstance(workflow, dict):
        raise InputError(f"{path}: not a WfFormat instance (no 'workflow' object)")
    spec = workflow.get("specification")
    if isinstance(spec, dict):
        tasks = _list(path, spec.get("tasks"), "workflow.specification.tasks")
        runs = (workflow.get("execution") or {}).get("tasks") or []
        seconds = {r.get("id"): r.get("runtimeInSeconds") for r in runs if isinstance(r, dict)}
    else:
        tasks = _list(path, workflow.get("tasks"), "workflow.tasks")
        seconds = {}
    check_tasks(len(tasks), str(path))
    keys: dict[Any, int] = {}
    labels: dict[Any, int] = {}
    for i, task in enumerate(tasks):
        label = (task.get("id") or task.get("name")) if isinstance(task, dict) else None
        if not label or not isinstance(label, str | int) or isinstance(label, bool):
            raise InputError(f"{path}: task at position {i} needs an 'id' or 'name' (a string), got {label!r}")
        if label in labels:
            raise InputError(f"{path}: duplicate task id {label!r} (tasks at positions {labels[label]} and {i})")
        labels[label] = i
        keys.setdefault(label, i)
        keys.setdefault(task.get("name"), i)
    parents: list[set[int]] = [set() for _ in tasks]
    runtimes = []
    for i, task in enumerate(tasks):
        label = task.get("id") or task["name"]
        runtime = seconds.get(label, task.get("runtimeInSeconds", task.get("runtime")))
        if runtime is None:
            raise InputError(f"{path}: task {label!r} has no runtime ('runtimeInSeconds' or 'runtime')")
        if not isinstance(runtime, int | float) or isinstance(runtime, bool) or not 0 <= runtime < float("inf"):
            raise InputError(f"{path}: task {label!r}: runtime must be a non-negative number of seconds, "
                             f"got {runtime!r}")
        runtimes.append(check_time(float(runtime), f"{path}: task {label!r}", "runtime"))
        for field in ("parents", "children"):
            refs = task.get(field) or []
            if not isinstance(refs, list):
                raise InputError(f"{path}: task {label!r}: {field} must be a list of task ids, got {refs!r}")
            for ref in refs:
                if not isinstance(ref, str | int) or ref not in keys:
                    raise InputError(f"{path}: task {label!r}: unknown task {ref!r} in {field}")
                if field == "parents":
                    parents[i].add(keys[ref])
                else:
                    parents[keys[ref]].add(i)
    names = tuple(str(t.get("name") or t.get("id")) for t in tasks)
    dag = Dag(tuple(runtimes), tuple(tuple(sorted(p)) for p in parents), names)
    topological_order(dag.parents, str(path))
    return dag


def wfformat_stream(rng: np.random.Generator, folder: str | Path, **stream: Any) -> Workload:
    """An open stream (see :func:`sim.workflows.stream.open_stream`) whose every arrival draws one
    ``*.json`` instance of ``folder`` uniformly (files in name order)."""
    files = sorted(Path(folder).glob("*.json"))
    if not files:
        raise InputError(f"{folder}: no WfFormat instance files (*.json) in this folder")
    dags = [read_wfformat(f) for f in files]
    for file, dag in zip(files, dags, strict=True):
        check_size(len(dag.runtimes), stream["machines"], stream["slots"], str(file))
    return open_stream(rng, lambda r: dags[int(r.integers(len(dags)))], source=str(folder), kind="wfformat",
                       **stream)


def _list(path: Path, value: Any, where: str) -> list:
    if not isinstance(value, list) or not value:
        raise InputError(f"{path}: {where} must be a non-empty list of tasks")
    return value
