"""Reading trace files and turning bad input into one clear :class:`~sim.core.InputError`.

Every reader reports a problem as ``FILE:LINE: FIELD: expected WHAT, got 'TEXT'`` (the style of a
compiler diagnostic), so a user can open the file at the right line without a traceback.
"""

from __future__ import annotations

import gzip
import math
from pathlib import Path

from sim.core import InputError

ARCHIVE_URL = "https://www.cs.huji.ac.il/labs/parallel/workload/"
#: the largest time (s) a trace may hold, about 317 years: beyond it a value is not physical (a run
#: time of 1e300 would become the makespan), a trace is in milliseconds by mistake (Unix time in ms is
#: ~1.7e12), and a float no longer resolves microseconds
MAX_SECONDS = 1e10
_GZIP_MAGIC = b"\x1f\x8b"


def read_text(path: str | Path) -> str:
    """The decoded text of ``path``; gzip-compressed files (any name) are decompressed.

    A UTF-8 byte-order mark (spreadsheet exports) is dropped; undecodable bytes become U+FFFD
    rather than failing, since traces are ASCII apart from free-text comments.
    """
    path = Path(path)
    if not path.is_file():
        what = "is not a file" if path.exists() else "does not exist"
        raise InputError(
            f"{path}: trace file {what}; real traces (SWF) come from the Parallel Workloads Archive "
            f"({ARCHIVE_URL}), or generate one with sim.workloads.synthetic_hpc"
        )
    try:
        data = path.read_bytes()
        if data[:2] == _GZIP_MAGIC:
            data = gzip.decompress(data)
    except (OSError, EOFError) as err:
        raise InputError(f"{path}: cannot read trace file: {err}") from None
    return data.decode("utf-8-sig", errors="replace")


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
