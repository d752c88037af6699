"""Header-named CSV traces: DR_EVT's "simple" format and schedlab's own jobs CSV.

Rules shared by both readers (each a test in ``tests/test_workloads.py``):

* The first line is a header; columns are found by name (surrounding spaces ignored), in any
  order. A missing required column is an error that names it and lists the expected columns;
  unknown columns are ignored. A row with more or fewer cells than the header is an error.
* Blank lines are skipped. Gzip-compressed files are read transparently.
* Times are seconds: a submit time, time limit or run time must be a number in [0, 1e10] (1e10 s is
  about 317 years: ``MAX_SECONDS``, beyond which a value is not physical); a node count must be an
  integer ≥ 1 (``4.0`` is accepted as 4). Anything else is an error naming the
  file, line, column and what was expected. Unsorted submit times are fine (the engine sorts).
* A file with no job rows is an error.

DR_EVT simple CSV (``read_drevt_csv``): columns ``job_submit_time``, ``num_nodes``,
``time_limit`` and optional ``actual_run_time``; ``queue``, ``exit_status`` are ignored. No
aliases: the reference data README lists none. Job id = 0-based row index. The run time defaults to
the time limit, when the column is absent or the cell empty (counted as
``notes["runtime_from_time_limit"]``).

Jobs CSV (``read_jobs_csv`` / ``write_jobs_csv``): ``job_id,submit_time,nodes,time_limit,
actual_runtime`` plus an optional ``user`` column (written only when some job has a user). Job ids
must be unique integers ≥ 0. Numbers are written exactly (``repr``) and user names quoted, so a round
trip gives equal jobs.

Both readers count, without changing them, jobs whose run time exceeds their time limit
(``notes["runtime_over_limit"]``; the engine's ``kill_at_limit`` decides what happens to them).
Notes only hold non-zero counts.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from sim.core import InputError, Job, Workload
from sim.workloads.errors import MAX_SECONDS, parse_count, parse_time, read_lines

DREVT_REQUIRED = ("job_submit_time", "num_nodes", "time_limit")
DREVT_RUNTIME = "actual_run_time"
JOBS_COLUMNS = ("job_id", "submit_time", "nodes", "time_limit", "actual_runtime")
JOBS_USER = "user"

Row = dict[str, str]


def read_drevt_csv(path: str | Path) -> Workload:
    """Read a DR_EVT simple CSV trace (see the module docstring for the rules)."""
    return parse_drevt_csv(read_lines(path), str(path))


def read_jobs_csv(path: str | Path) -> Workload:
    """Read schedlab's plain jobs CSV (see the module docstring for the rules)."""
    return parse_jobs_csv(read_lines(path), str(path))


def parse_drevt_csv(text: str | Iterable[str], name: str) -> Workload:
    """Parse DR_EVT simple CSV ``text`` (a string or its lines with their ends); ``name`` (the file)
    prefixes error messages."""
    notes: Counter[str] = Counter()
    jobs = []
    lines: dict[int, int] = {}
    for index, (line, row) in enumerate(_rows(text, name, DREVT_REQUIRED, (DREVT_RUNTIME,))):
        lines[index] = line
        submit, nodes, limit = _rigid_fields(row, name, line, DREVT_REQUIRED)
        runtime_text = row.get(DREVT_RUNTIME, "").strip()
        if runtime_text:
            runtime = parse_time(runtime_text, name, line, f"column {DREVT_RUNTIME!r}")
        else:
            runtime = limit
            notes["runtime_from_time_limit"] += 1
        jobs.append(Job(index, submit, (nodes,), limit, runtime))
    return _workload(jobs, name, notes, lines)


def parse_jobs_csv(text: str | Iterable[str], name: str) -> Workload:
    """Parse jobs CSV ``text`` (a string or its lines with their ends); ``name`` (the file) prefixes
    error messages."""
    first_line: dict[int, int] = {}
    jobs = []
    for line, row in _rows(text, name, JOBS_COLUMNS, (JOBS_USER,)):
        where = f"{name}:{line}"
        job_id = parse_count(row["job_id"], where, "column 'job_id'", minimum=0)
        if job_id in first_line:
            raise InputError(f"{where}: column 'job_id': duplicate id {job_id} (first on line {first_line[job_id]})")
        first_line[job_id] = line
        submit, nodes, limit = _rigid_fields(row, name, line, JOBS_COLUMNS[1:4])
        runtime = parse_time(row["actual_runtime"], name, line, "column 'actual_runtime'")
        jobs.append(Job(job_id, submit, (nodes,), limit, runtime, user=row.get(JOBS_USER, "")))
    return _workload(jobs, name, Counter(), first_line)


def write_jobs_csv(workload: Workload, path: str | Path) -> None:
    """Write ``workload`` as a jobs CSV that :func:`read_jobs_csv` reads back into equal jobs.

    Only rigid jobs fit the format; a multi-resource or workflow job is an error rather than
    being written without its extra fields.
    """
    with_user = any(job.user for job in workload.jobs)
    rows = [[job.id, _exact(job.submit), _nodes_of(job), _exact(job.time_limit), _exact(job.runtime)]
            + ([job.user] if with_user else []) for job in workload.jobs]
    with open(path, "w", newline="", encoding="utf-8") as stream:
        csv.writer(stream, lineterminator="\n").writerow([*JOBS_COLUMNS, JOBS_USER] if with_user else JOBS_COLUMNS)
        # Quoting every text cell keeps any user name intact (a bare "\r" would otherwise end the row).
        csv.writer(stream, lineterminator="\n", quoting=csv.QUOTE_NONNUMERIC).writerows(rows)


def _rows(text: str | Iterable[str], name: str, required: Sequence[str],
          optional: Sequence[str]) -> Iterator[tuple[int, Row]]:
    """Yield ``(line number, {column: cell})`` for each non-blank data row, after checking the header."""
    reader = csv.reader(io.StringIO(text, newline="") if isinstance(text, str) else text)
    header = next((row for row in reader if _filled(row)), None)
    expected = ", ".join(required) + (f" (optional: {', '.join(optional)})" if optional else "")
    if header is None:
        raise InputError(f"{name}: empty file: expected a header line with columns {expected}")
    header = [cell.strip() for cell in header]
    where = f"{name}:{reader.line_num}"
    missing = [column for column in required if column not in header]
    if missing:
        raise InputError(f"{where}: missing column {missing[0]!r}: expected columns {expected}; "
                         f"found {', '.join(header)}")
    if len(set(header)) != len(header):
        raise InputError(f"{where}: duplicate column names in header {', '.join(header)}")
    count = 0
    width = len(header)
    for cells in reader:
        if not (cells and cells[0].strip()) and not _filled(cells):  # the first cell decides most rows
            continue
        if len(cells) != width:
            raise InputError(f"{name}:{reader.line_num}: expected {width} comma-separated cells as in "
                             f"the header, got {len(cells)}")
        count += 1
        yield reader.line_num, dict(zip(header, cells))  # noqa: B905 (widths checked above)
    if not count:
        raise InputError(f"{name}: no jobs: the file has a header but no job rows")


def _filled(cells: list[str]) -> bool:
    """Whether a CSV row has any non-blank cell."""
    return any(cell.strip() for cell in cells)


def _rigid_fields(row: Row, name: str, line: int, columns: Sequence[str]) -> tuple[float, int, float]:
    """Submit time, node count and time limit from the named ``columns`` of ``row``.

    This runs once per row: a fast screen first, the field-by-field check (and its message) only if it fails.
    """
    submit_col, nodes_col, limit_col = columns
    try:
        submit, nodes, limit = float(row[submit_col]), int(row[nodes_col]), float(row[limit_col])
    except ValueError:
        pass
    else:
        if 0 <= submit <= MAX_SECONDS and nodes >= 1 and 0 <= limit <= MAX_SECONDS:
            return submit, nodes, limit
    return (parse_time(row[submit_col], name, line, f"column {submit_col!r}"),
            parse_count(row[nodes_col], f"{name}:{line}", f"column {nodes_col!r}"),
            parse_time(row[limit_col], name, line, f"column {limit_col!r}"))


def _workload(jobs: list[Job], name: str, notes: Counter[str], lines: dict[int, int]) -> Workload:
    """Bundle ``jobs`` with the informational over-limit count and each job's line."""
    notes["runtime_over_limit"] = sum(job.runtime > job.time_limit for job in jobs)
    return Workload(jobs, source=name, notes={key: n for key, n in notes.items() if n}, lines=lines)


def _exact(value: float) -> int | float:
    """``value`` as an int when that is exact, so it is written without ``.0`` (floats use ``repr``)."""
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


def _nodes_of(job: Job) -> int:
    """The node count of a rigid job; anything else cannot be written as a jobs CSV."""
    if len(job.demand) != 1 or not float(job.demand[0]).is_integer() or job.workflow != -1 or job.parents:
        raise InputError(f"job {job.id}: a jobs CSV holds rigid node-count jobs only, got demand={job.demand}, "
                         f"workflow={job.workflow}, parents={job.parents}")
    return int(job.demand[0])
