"""Workloads: trace readers (SWF, DR_EVT CSV, jobs CSV) and the synthetic HPC generator.

Every reader returns a :class:`~sim.core.Workload` whose ``notes`` count the values it repaired
or the records it skipped, and raises :class:`~sim.core.InputError` naming file, line and field
for bad input. Real traces come from the Parallel Workloads Archive
(https://www.cs.huji.ac.il/labs/parallel/workload/); :func:`synthetic_hpc` needs no download. The
generator (and numpy with it) is imported on first use, so replaying a trace does without.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator
from itertools import chain
from pathlib import Path

from sim.core import InputError, Workload
from sim.workloads.csv_traces import parse_drevt_csv, parse_jobs_csv, read_drevt_csv, read_jobs_csv, write_jobs_csv
from sim.workloads.errors import read_lines
from sim.workloads.swf import parse_swf, read_swf

FORMATS = ("swf", "drevt_csv", "jobs_csv")
_PARSERS = {"swf": parse_swf, "drevt_csv": parse_drevt_csv, "jobs_csv": parse_jobs_csv}

__all__ = [
    "FORMATS",
    "load_trace",
    "offered_load",
    "read_drevt_csv",
    "read_jobs_csv",
    "read_swf",
    "synthetic_hpc",
    "write_jobs_csv",
]


def __getattr__(name: str) -> object:
    """``offered_load`` and ``synthetic_hpc`` from :mod:`sim.workloads.synthetic`, imported on first use."""
    if name in ("offered_load", "synthetic_hpc"):
        return getattr(importlib.import_module("sim.workloads.synthetic"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_trace(path: str | Path, fmt: str | None = None) -> Workload:
    """Read a trace, in format ``fmt`` (one of :data:`FORMATS`) or sniffed from its name and header.

    ``.swf`` / ``.swf.gz`` is SWF; a ``.csv`` (or ``.csv.gz``) whose header has ``job_submit_time``
    is DR_EVT's CSV, one with ``job_id`` the jobs CSV.
    """
    if fmt is not None and fmt not in _PARSERS:
        raise InputError(f"unknown trace format {fmt!r}: expected one of {', '.join(FORMATS)}")
    lines = read_lines(path)
    if fmt is None:
        fmt, lines = _sniff(Path(path), lines)
    return _PARSERS[fmt](lines, str(path))


def _sniff(path: Path, lines: Iterator[str]) -> tuple[str, Iterable[str]]:
    """The format of ``path`` from its suffix and, for CSV, its header line; and the lines, all still to read."""
    name = path.name.lower()
    if name.endswith((".swf", ".swf.gz")):
        return "swf", lines
    if name.endswith((".csv", ".csv.gz")):
        head = []
        for line in lines:  # up to the first non-blank line, the header
            head.append(line)
            if line.strip():
                break
        header = {cell.strip().strip('"') for cell in (head[-1] if head else "").split(",")}
        if "job_submit_time" in header:
            return "drevt_csv", chain(head, lines)
        if "job_id" in header:
            return "jobs_csv", chain(head, lines)
        raise InputError(f"{path}: cannot tell the CSV format: expected a header with job_submit_time "
                         f"(DR_EVT) or job_id (jobs CSV); pass fmt= one of {', '.join(FORMATS)}")
    raise InputError(f"{path}: cannot tell the trace format from the name: expected .swf, .swf.gz or .csv; "
                     f"pass fmt= one of {', '.join(FORMATS)}")
