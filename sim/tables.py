"""Column tables (``{column: [values…]}``, as :mod:`sim.metrics` and :mod:`sim.workflows.metrics`
return them) and tables produced row by row, written as CSV atomically: to a temporary file, then
renamed."""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def cell(value: Any) -> str:
    """A CSV cell: whole floats without ``.0``, other floats at full precision, NaN as empty.

    >>> cell(3.0), cell(2.5), cell(float("nan")), cell(True), cell(7)
    ('3', '2.5', '', 'true', '7')
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value != value:
            return ""
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value)


@contextmanager
def csv_rows(path: Path, columns: Sequence[str]) -> Iterator[Callable[[Sequence[Any]], None]]:
    """A function writing one row (cells as :func:`cell`) to a CSV file with header ``columns``, as
    the rows are produced; the file appears, complete, when the block ends, and not at all if it raises."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with tmp.open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(columns)
            yield lambda row: writer.writerow([cell(v) for v in row])
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(path)


def write_csv(table: Mapping[str, Sequence[Any]], path: Path) -> None:
    """Write ``table`` with a header row; the file appears complete or not at all."""
    with csv_rows(path, list(table)) as write:
        for row in zip(*table.values(), strict=True):
            write(row)
