"""What every bench script writes: ``NAME.json`` and ``NAME.md`` in the ``--out`` directory.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as out:
    ...     write(Path(out), "demo", {"results": [1]}, "| a |\\n|---|")
    ...     sorted(p.name for p in Path(out).iterdir())
    | a |
    |---|
    ['demo.json', 'demo.md']
"""

from __future__ import annotations

import json
import platform
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def machine(**extra: Any) -> dict[str, Any]:
    """The ``meta`` block of a bench result: Python, machine, processor (and ``extra``)."""
    return {"python": platform.python_version(), "machine": platform.machine(), "processor": platform.processor(),
            **extra}


def write(out: Path, name: str, body: Mapping[str, Any], table: str, indent: int = 2) -> None:
    """Write ``body`` as ``out/NAME.json`` and ``table`` (Markdown) as ``out/NAME.md``; print the table."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(body, indent=indent))
    (out / f"{name}.md").write_text(table + "\n")
    print(table)
