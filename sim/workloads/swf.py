"""Standard Workload Format (SWF) reader, the format of the Parallel Workloads Archive.

Format: lines starting with ``;`` are header comments; every other non-blank line is a job record
of 18 whitespace-separated numbers (1 job number, 2 submit, 3 wait, 4 run time, 5 allocated
processors, 6 average CPU time, 7 used memory, 8 requested processors, 9 requested time,
10 requested memory, 11 status, 12 user, 13 group, 14 executable, 15 queue, 16 partition,
17 preceding job, 18 think time). The archive writes ``-1`` for "unknown".
Gzip-compressed files (``.swf.gz``) are read transparently, one line at a time (a file beyond
``MAX_TRACE_BYTES`` decompressed is refused, :func:`sim.workloads.errors.read_lines`).

How a record becomes a :class:`~sim.core.Job` (each rule has a test; counts go to ``notes``,
which holds only non-zero counts):

* id = field 1, submit = field 2, runtime = field 4, user = field 12 as a string (``""`` when
  negative, i.e. unknown). Status (field 11) is ignored: failed and cancelled jobs that ran still
  occupied their nodes, so they stay in the workload.
* nodes = requested processors (field 8) if > 0, else allocated processors (field 5) if > 0
  (``nodes_from_allocated``); if neither is > 0 the job cannot be placed and is skipped
  (``skipped_no_nodes``).
* A negative run time means the job never ran (or the log lost it): skipped
  (``skipped_no_runtime``; a record missing both nodes and run time counts as ``skipped_no_nodes``).
  A run time of 0 is kept.
* time limit = requested time (field 9) if > 0, else the run time (``time_limit_from_runtime``):
  with no estimate, the scheduler is given a perfect one, the usual convention for logs such as
  NASA iPSC and model outputs. Jobs that ran past their limit are kept unchanged and counted
  (``runtime_over_limit``); ``simulate(kill_at_limit=...)`` decides their fate.
* Header: ``MaxNodes`` (else ``MaxProcs``) gives ``default_nodes``; a value ≤ 0 means unknown.
  Job sizes are processor counts, so on a log whose nodes hold several processors
  (``MaxProcs`` > ``MaxNodes``) give the machine size explicitly instead.
* Errors (an :class:`~sim.core.InputError` naming file, line and field): a record without exactly
  18 fields; a field that is not a finite number; a non-integral job number, processor count or
  user; a negative submit time (a job must arrive to be simulated); a submit, run or requested time
  above ``MAX_SECONDS`` (1e10 s, about 317 years: not physical); a duplicate job number; a
  non-integral ``MaxNodes``/``MaxProcs`` header; a file with no usable job. With
  ``drop_invalid=True`` the per-record errors skip the record instead (``dropped_invalid``).
* Records need not be sorted by submit time (the engine sorts).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from sim.core import InputError, Job, Workload
from sim.workloads.errors import MAX_SECONDS, read_lines, split_lines, time_error

FIELDS = (
    "job number", "submit time", "wait time", "run time", "allocated processors", "average CPU time",
    "used memory", "requested processors", "requested time", "requested memory", "status", "user",
    "group", "executable", "queue", "partition", "preceding job", "think time",
)
_INTEGER_FIELDS = (0, 4, 7, 11)
_TIME_FIELDS = (1, 3, 8)  # submit, run and requested time
_NODE_HEADERS = ("MaxNodes", "MaxProcs")
_DROPPED = ("skipped", "dropped")


def read_swf(path: str | Path, *, drop_invalid: bool = False) -> Workload:
    """Read an SWF (or gzip-compressed SWF) file; see the module docstring for every rule."""
    return parse_swf(read_lines(path), str(path), drop_invalid=drop_invalid)


def parse_swf(text: str | Iterable[str], name: str, *, drop_invalid: bool = False) -> Workload:
    """Parse SWF ``text`` (a string or its lines); ``name`` (the file) prefixes error messages."""
    notes: Counter[str] = Counter()
    header: dict[str, int] = {}
    first_line: dict[int, int] = {}
    jobs: list[Job] = []
    records = 0
    for line, text_line in enumerate(split_lines(text), 1):
        parts = text_line.split()
        if not parts:
            continue
        if parts[0][0] == ";":
            _read_header(text_line, f"{name}:{line}", header)
            continue
        records += 1
        try:
            job = _job(parts, name, line, notes)
            if job is not None and job.id in first_line:
                raise InputError(f"{name}:{line}: field 1 (job number): duplicate job number {job.id} "
                                 f"(first on line {first_line[job.id]})")
        except InputError:
            if not drop_invalid:
                raise
            notes["dropped_invalid"] += 1
            continue
        if job is not None:
            first_line[job.id] = line
            jobs.append(job)
    _check_not_empty(name, records, jobs, notes)
    default_nodes = next((header[key] for key in _NODE_HEADERS if header.get(key, 0) > 0), None)
    return Workload(jobs, source=name, default_nodes=default_nodes, notes=dict(notes), lines=first_line)


def _job(parts: list[str], name: str, line: int, notes: Counter[str]) -> Job | None:
    """The job of one record, or ``None`` (counted in ``notes``) if it lacks nodes or a run time.

    This runs once per record, so the error message (``name:line``) is only built on failure.
    """
    if len(parts) != len(FIELDS):
        raise InputError(f"{name}:{line}: expected {len(FIELDS)} whitespace-separated fields, got {len(parts)}")
    values = _values(parts, name, line)
    job_number, submit, _, runtime, allocated, _, _, requested, requested_time = values[:9]
    if submit < 0:
        raise InputError(f"{name}:{line}: field 2 (submit time): expected a time ≥ 0, got {parts[1]!r}")
    if max(submit, runtime, requested_time) > MAX_SECONDS:
        bad = next(index for index in _TIME_FIELDS if values[index] > MAX_SECONDS)
        raise time_error(f"{name}:{line}", f"field {bad + 1} ({FIELDS[bad]})", parts[bad])
    nodes = requested if requested > 0 else allocated
    if nodes <= 0 or runtime < 0:
        notes["skipped_no_nodes" if nodes <= 0 else "skipped_no_runtime"] += 1
        return None
    if requested <= 0:
        notes["nodes_from_allocated"] += 1
    time_limit = requested_time
    if requested_time <= 0:
        notes["time_limit_from_runtime"] += 1
        time_limit = runtime
    elif runtime > requested_time:
        notes["runtime_over_limit"] += 1
    user = str(int(values[11])) if values[11] >= 0 else ""
    return Job(int(job_number), submit, (int(nodes),), time_limit, runtime, user=user)


def _values(parts: list[str], name: str, line: int) -> list[float]:
    """All 18 fields as floats: a fast screen, then a field-by-field check only if it fails."""
    try:
        values = list(map(float, parts))
    except ValueError:
        values = []
    if not (values and math.isfinite(sum(values)) and values[0].is_integer() and values[4].is_integer()
            and values[7].is_integer() and values[11].is_integer()):
        bad = next((index for index, part in enumerate(parts) if not _valid(part, index)), None)
        if bad is not None:
            what = "an integer" if bad in _INTEGER_FIELDS else "a number"
            raise InputError(f"{name}:{line}: field {bad + 1} ({FIELDS[bad]}): expected {what}, got {parts[bad]!r}")
    return values


def _valid(part: str, index: int) -> bool:
    """Whether field ``index`` holds a finite number (an integer where the format needs one)."""
    try:
        value = float(part)
    except ValueError:
        return False
    return math.isfinite(value) and (index not in _INTEGER_FIELDS or value.is_integer())


def _read_header(text_line: str, where: str, header: dict[str, int]) -> None:
    """Record a ``; MaxNodes: N`` / ``; MaxProcs: N`` comment in ``header``; ignore other comments."""
    key, _, value = text_line.strip().lstrip(";").partition(":")
    key = key.strip()
    if key not in _NODE_HEADERS:
        return
    token = value.split()[0] if value.split() else ""
    try:
        header[key] = int(token)
    except ValueError:
        raise InputError(f"{where}: header {key}: expected an integer, got {value.strip()!r}") from None


def _check_not_empty(name: str, records: int, jobs: list[Job], notes: Counter[str]) -> None:
    """Raise if the file yields no job: an empty workload is never what the user meant."""
    if not records:
        raise InputError(f"{name}: no jobs: the file has no job records (only comments or blank lines)")
    if not jobs:
        reasons = ", ".join(f"{key}={n}" for key, n in sorted(notes.items()) if key.startswith(_DROPPED))
        raise InputError(f"{name}: no usable jobs: all {records} records were skipped ({reasons})")
