"""Reading trace files and turning bad input into one clear :class:`~sim.core.InputError`.

Every reader reports a problem as ``FILE:LINE: FIELD: expected WHAT, got 'TEXT'`` (the style of a
compiler diagnostic), so a user can open the file at the right line without a traceback.
"""

from __future__ import annotations

import gzip
import io
import math
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from sim.core import InputError

ARCHIVE_URL = "https://www.cs.huji.ac.il/labs/parallel/workload/"
#: the largest time (s) a trace may hold, about 317 years: beyond it a value is not physical (a run
#: time of 1e300 would become the makespan), a trace is in milliseconds by mistake (Unix time in ms is
#: ~1.7e12), and a float no longer resolves microseconds
MAX_SECONDS = 1e10
#: the most a trace file may hold, decompressed (512 MiB, about five million SWF records; counted in
#: characters once decoded): beyond it a file is a gzip "bomb" or not a trace, and its jobs would not fit in memory
MAX_TRACE_BYTES = 2**29
#: the longest line a trace may have (a record is ~100 characters; a file of zeros has no line ends)
MAX_LINE_CHARS = 2**20
_GZIP_MAGIC = b"\x1f\x8b"


def read_lines(path: str | Path) -> Iterator[str]:
    """The lines of ``path`` with their line ends, read one at a time (gzip-compressed files, any name,
    are decompressed as a stream), so memory holds one line, never the whole file.

    A UTF-8 byte-order mark (spreadsheet exports) is dropped; undecodable bytes become U+FFFD rather
    than failing, since traces are ASCII apart from free-text comments. A file beyond
    :data:`MAX_TRACE_BYTES` (a gzip "bomb": 2 MB that unpack to 2 GB) or with a line beyond
    :data:`MAX_LINE_CHARS` ends in an :class:`InputError` — for a gzip file whose trailer states
    its size, before anything is decompressed.
    """
    path = Path(path)
    if not path.is_file():
        what = "is not a file" if path.exists() else "does not exist"
        raise InputError(
            f"{path}: trace file {what}; real traces (SWF) come from the Parallel Workloads Archive "
            f"({ARCHIVE_URL}), or generate one with sim.workloads.synthetic_hpc"
        )
    return _stream(path)


def _stream(path: Path) -> Iterator[str]:
    """:func:`read_lines` once the file is known to exist."""
    try:
        with path.open("rb") as raw:
            packed = raw.read(2) == _GZIP_MAGIC
            if packed and raw.seek(0, io.SEEK_END) >= 4:
                raw.seek(-4, io.SEEK_END)  # ISIZE: the uncompressed size (mod 2^32) of the last member
                _check_size(path, int.from_bytes(raw.read(4), "little"))
            raw.seek(0)
            binary = gzip.GzipFile(fileobj=raw) if packed else raw
            stream = io.TextIOWrapper(binary, encoding="utf-8-sig", errors="replace", newline="")
            size, number, readline, longest = 0, 0, stream.readline, MAX_LINE_CHARS
            while line := readline(longest + 1):
                number += 1
                size += len(line)
                if len(line) > longest:
                    raise InputError(f"{path}:{number}: line longer than {MAX_LINE_CHARS:,} characters; "
                                     f"a trace record is a short line (is this a trace file?)")
                if size > MAX_TRACE_BYTES:
                    _check_size(path, size)
                yield line
    except (OSError, EOFError, zlib.error) as err:  # gzip.BadGzipFile is an OSError
        raise InputError(f"{path}: cannot read trace file: {err}") from None


def split_lines(text: str | Iterable[str]) -> Iterator[str]:
    """The lines of ``text`` without their ends, as ``str.splitlines`` splits a whole text.

    >>> list(split_lines("a\\r\\nb")), list(split_lines(["a\\r\\n", "b"]))
    (['a', 'b'], ['a', 'b'])
    """
    if isinstance(text, str):
        yield from text.splitlines()
    else:
        for line in text:
            yield from line.splitlines()


def _check_size(path: Path, size: int) -> None:
    if size > MAX_TRACE_BYTES:
        raise InputError(f"{path}: more than {MAX_TRACE_BYTES:,} bytes of trace (decompressed; the limit, "
                         f"sim.workloads.errors.MAX_TRACE_BYTES, holds about five million SWF records): is this a "
                         f"compressed 'bomb', or not a trace?")


def parse_number(text: str, where: str, field: str, *, minimum: float = 0.0) -> float:
    """``text`` as a finite number ≥ ``minimum``.

    >>> parse_number("2.5", "t.csv:2", "column 'time_limit'")
    2.5
    """
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= minimum):
        raise InputError(f"{where}: {field}: expected a number ≥ {minimum:g}, got {text!r}")
    return value


def time_error(where: str, field: str, text: str) -> InputError:
    """The one message for a time that is not a number of seconds in [0, :data:`MAX_SECONDS`]."""
    return InputError(f"{where}: {field}: expected a time in seconds, 0 ≤ t ≤ {MAX_SECONDS:g} (about 317 years), "
                      f"got {text!r}")


def check_rate(jobs: int, rate: float, field: str) -> None:
    """Refuse a Poisson stream of ``jobs`` arrivals at ``rate`` (> 0) per second whose expected span,
    ``jobs / rate``, exceeds :data:`MAX_SECONDS`: its times would not be physical, and at 1e300 s a
    run time no longer changes a float (turnaround 0, utilisation 0).

    >>> check_rate(1000, 1e-300, "workload.arrival_rate")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    sim.core.InputError: workload.arrival_rate must be ≥ jobs / 1e+10 s = 1e-07 jobs per second (...), got 1e-300
    """
    if jobs / rate > MAX_SECONDS:
        raise InputError(f"{field} must be ≥ jobs / {MAX_SECONDS:g} s = {jobs / MAX_SECONDS:g} jobs per second (the "
                         f"stream's expected span, jobs / arrival_rate, must stay within {MAX_SECONDS:g} s, about "
                         f"317 years), got {rate!r}")


def parse_time(text: str, name: str, line: int, field: str) -> float:
    """``text`` as seconds in [0, :data:`MAX_SECONDS`]; the message (``name:line``) is built only on failure.

    >>> parse_time("60", "t.csv", 2, "column 'time_limit'")
    60.0
    >>> parse_time("1e300", "t.csv", 2, "column 'time_limit'")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    sim.core.InputError: t.csv:2: column 'time_limit': expected a time in seconds, 0 ≤ t ≤ 1e+10 ..., got '1e300'
    """
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if 0 <= value <= MAX_SECONDS:  # False for NaN
        return value
    raise time_error(f"{name}:{line}", field, text)


def parse_count(text: str, where: str, field: str, *, minimum: int = 1) -> int:
    """``text`` as an integer ≥ ``minimum``; ``"4.0"`` is accepted as 4, large values stay exact.

    >>> parse_count("4.0", "t.csv:2", "column 'nodes'")
    4
    """
    try:
        value = int(text)
    except ValueError:
        try:
            number = float(text)
        except ValueError:
            number = math.nan
        value = int(number) if math.isfinite(number) and number.is_integer() else None
    if value is None or value < minimum:
        raise InputError(f"{where}: {field}: expected an integer ≥ {minimum}, got {text!r}")
    return value
