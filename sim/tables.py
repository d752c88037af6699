"""Column tables (``{column: [values…]}``, as :mod:`sim.metrics` and :mod:`sim.workflows.metrics`
return them) written as CSV, atomically: to a temporary file, then renamed."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
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


def write_csv(table: Mapping[str, Sequence[Any]], path: Path) -> None:
    """Write ``table`` with a header row; the file appears complete or not at all."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(list(table))
        for row in zip(*table.values(), strict=True):
            writer.writerow([cell(v) for v in row])
    tmp.replace(path)
