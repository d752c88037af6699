"""What produced a run, beyond its config: the contents of its input files and the simulator code.

A run's identity is its ``run_key`` (the semantic config, :func:`sweeps.tracking.run_key`) plus
:func:`input_digests` (sha256 of every file the workload reads) plus :func:`code_fingerprint`
(sha256 of the ``sim/**/*.py`` sources). The driver records the last two as the tags
``schedlab.inputs`` and ``schedlab.code``; resuming a sweep reruns a finished run whose recorded
inputs or code differ from today's (``sweep.reuse=same``, the default).

The fingerprint covers the simulator's Python sources only, by content, so a README edit, a new
commit or a checkout elsewhere leaves it unchanged.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import sim

SIM_ROOT = Path(sim.__file__).resolve().parent
#: ``schedlab.inputs`` of a run that reads no file (a generated workload)
NO_INPUTS = "none"
#: the per-file digests are kept as a tag only when they fit (MLflow caps tag values at 8000 chars)
MAX_MANIFEST_CHARS = 5000
REUSE = ("same", "any")


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


@cache
def code_fingerprint(root: Path = SIM_ROOT) -> str:
    """sha256 (20 hex digits) of every ``*.py`` under ``root``: relative path and contents, sorted by path.

    Computed once per process (the driver's); editing a non-Python file leaves it unchanged.
    """
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py"), key=lambda p: p.relative_to(root).as_posix()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:20]


@dataclass(frozen=True)
class Inputs:
    """The files one run reads, by the name the user gave (``traces/x.swf``), with their sha256."""

    files: Mapping[str, str]

    @property
    def digest(self) -> str:
        """One hash of all the files (``none`` when the workload reads none)."""
        if not self.files:
            return NO_INPUTS
        text = json.dumps(dict(sorted(self.files.items())), separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:20]

    @property
    def manifest(self) -> str | None:
        """``{name: sha256[:16]}`` as JSON, or ``None`` when it is too long for a tag."""
        text = json.dumps({k: v[:16] for k, v in sorted(self.files.items())}, separators=(",", ":"))
        return text if len(text) <= MAX_MANIFEST_CHARS else None


class InputHasher:
    """sha256 of input files, each file read once per driver (a sweep's runs share a few files)."""

    def __init__(self) -> None:
        self._seen: dict[Path, str] = {}

    def inputs(self, files: Mapping[str, Path]) -> Inputs:
        """``files`` maps the user's name of each file to its path."""
        out = {}
        for name, path in files.items():
            resolved = path.resolve()
            if resolved not in self._seen:
                self._seen[resolved] = sha256_file(resolved)
            out[name] = self._seen[resolved]
        return Inputs(out)


def changed_inputs(recorded_manifest: str | None, now: Inputs) -> list[str]:
    """Names of the files whose digest differs from a run's ``schedlab.input_files`` tag ([] if unknown).

    >>> changed_inputs('{"a.swf":"00"}', Inputs({"a.swf": "11" * 32}))
    ['a.swf']
    """
    if not recorded_manifest:
        return []
    try:
        before = json.loads(recorded_manifest)
    except ValueError:
        return []
    current = {k: v[:16] for k, v in now.files.items()}
    return sorted(k for k in before.keys() | current.keys() if before.get(k) != current.get(k))
