"""What produced a run, beyond its config: the contents of its input files and of the code that ran it.

A run's identity is its ``run_key`` (the semantic config, :func:`sweeps.tracking.run_key`) plus
:meth:`InputHasher.inputs` (sha256 of every file the workload reads) plus :meth:`CodeHasher.code`: every Python
source that builds or runs the simulation — ``sim/**/*.py``, the ``sweeps`` modules a worker executes
(:data:`RUN_MODULES`) and, for a ``_target_`` outside schedlab, the standard library and installed
distributions (a researcher's own policy), every ``*.py`` of the package it lives in and every module of
theirs those import (:func:`own_modules`). A source is hashed by what it means (:func:`source_digest`: its
syntax tree without docstrings), so a comment or docstring edit reruns nothing. The driver records them as
the tags ``schedlab.inputs`` and ``schedlab.code`` (with the per-file manifests ``schedlab.input_files`` and
``schedlab.code_files``); resuming a sweep reruns a finished run whose recorded inputs or code differ from
today's (``sweep.reuse=same``, the default) and names the files that changed.

Sources are keyed by their path relative to their root, so a README edit, a new commit or a checkout
elsewhere leaves a fingerprint unchanged.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import json
import sys
import sysconfig
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path

import sim

SIM_ROOT = Path(sim.__file__).resolve().parent
SWEEPS_ROOT = Path(__file__).resolve().parent
#: the ``sweeps`` modules a worker executes to build and run a simulation (besides ``sim/``)
RUN_MODULES = ("specs.py", "task.py")
#: ``schedlab.inputs`` of a run that reads no file (a generated workload)
NO_INPUTS = "none"
#: the per-file digests are kept as a tag only when they fit (MLflow caps tag values at 8000 chars)
MAX_MANIFEST_CHARS = 5000
REUSE = ("same", "any")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _digest(files: Mapping[str, str]) -> str:
    text = json.dumps(dict(sorted(files.items())), separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def changed_files(recorded_manifest: str | None, now: Mapping[str, str]) -> list[str]:
    """Names whose digest differs between a recorded manifest tag and ``now`` ([] if unknown).

    >>> changed_files('{"a.swf":"00","b.py":"1111111111111111"}', {"a.swf": "11" * 32, "b.py": "11" * 32})
    ['a.swf']
    """
    if not recorded_manifest:
        return []
    try:
        before = json.loads(recorded_manifest)
    except ValueError:
        return []
    current = {k: v[:16] for k, v in now.items()}
    return sorted(k for k in before.keys() | current.keys() if before.get(k) != current.get(k))


@dataclass(frozen=True)
class Fingerprint:
    """Named files with their sha256: the files one run reads (``traces/x.swf``) or the sources that ran it."""

    files: Mapping[str, str]

    @cached_property  # asked for every run planned, claimed and recorded: one hash and one JSON per fingerprint
    def digest(self) -> str:
        """One hash of all the files (:data:`NO_INPUTS` when there are none)."""
        return _digest(self.files) if self.files else NO_INPUTS

    @cached_property
    def manifest(self) -> str | None:
        """``{name: sha256[:16]}`` as JSON, or ``None`` when it is too long for a tag."""
        text = json.dumps({k: v[:16] for k, v in sorted(self.files.items())}, separators=(",", ":"))
        return text if len(text) <= MAX_MANIFEST_CHARS else None


def source_digest(path: Path) -> str:
    """sha256 of what a Python source means: its syntax tree without docstrings (comments, blank lines and
    layout never reach it), so an edit that cannot change a result reruns nothing; of its bytes when it does
    not parse."""
    text = path.read_bytes()
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return hashlib.sha256(text).hexdigest()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()


def tree_files(root: Path, prefix: str) -> dict[str, Path]:
    """Every ``*.py`` under ``root``, keyed ``prefix/relative/path.py``."""
    return {f"{prefix}/{path.relative_to(root).as_posix()}": path
            for path in sorted(root.rglob("*.py")) if "__pycache__" not in path.parts}


def tree_sources(root: Path, prefix: str) -> dict[str, str]:
    """:func:`source_digest` of every ``*.py`` under ``root``, keyed ``prefix/relative/path.py``."""
    return {name: source_digest(path) for name, path in tree_files(root, prefix).items()}


@cache
def schedlab_sources() -> dict[str, str]:
    """The simulator and the ``sweeps`` modules a run executes (read once per process)."""
    files = tree_sources(SIM_ROOT, "sim")
    files.update({f"sweeps/{name}": source_digest(SWEEPS_ROOT / name) for name in RUN_MODULES})
    return files


def code_fingerprint(root: Path) -> str:
    """sha256 (20 hex digits) of every ``*.py`` under ``root`` by relative path and meaning."""
    return _digest(tree_sources(root, "."))


_INSTALLED = tuple({Path(p).resolve() for key in ("stdlib", "platstdlib", "purelib", "platlib")
                    if (p := sysconfig.get_paths().get(key))})


@cache
def own_package(target: str) -> tuple[str, Path] | None:
    """The researcher's own code a ``_target_`` (``pkg.mod.Name`` or ``pkg.mod:Name``) lives in, imported (the
    driver validates every target before anything runs): the top-level package's name and folder, or a single
    module's name and file; ``None`` when that is not theirs (:func:`_theirs`)."""
    module = _module_of(target)
    if module is None:
        return None
    top = importlib.import_module(module.split(".")[0])
    folders = [Path(p).resolve() for p in getattr(top, "__path__", [])]
    place = folders[0] if folders else Path(top.__file__).resolve() if getattr(top, "__file__", None) else None
    if place is None or not _theirs(place):
        return None
    return top.__name__, place


def _theirs(path: Path) -> bool:
    """Whether a source is the researcher's: outside schedlab's hashed code, the standard library and installed
    distributions (their versions pin them)."""
    return not any(path.is_relative_to(root) for root in (SIM_ROOT, SWEEPS_ROOT, *_INSTALLED))


def own_modules(target: str) -> dict[str, Path]:
    """The researcher's sources a ``_target_`` runs, keyed ``package/path.py`` (or ``module.py``): every ``*.py``
    of its package (:func:`own_package`), then every module of theirs that those import, directly or through
    each other, wherever it lives on ``sys.path`` (found by their ``import`` statements, top level or inside
    functions; a module imported by a name computed at run time is not seen)."""
    own = own_package(target)
    if own is None:
        return {}
    name, place = own
    files = tree_files(place, name) if place.is_dir() else {place.name: place}
    todo = list(files)
    while todo:
        key = todo.pop()
        for module in _imports(files[key], key):
            found = _own_file(module)
            if found is not None and found[0] not in files:
                files[found[0]] = found[1]
                todo.append(found[0])
    return dict(sorted(files.items()))


def _imports(path: Path, key: str) -> set[str]:
    """The modules a source's ``import`` statements may load (``from a import b``: ``a`` and ``a.b``)."""
    try:
        tree = ast.parse(path.read_bytes())
    except (SyntaxError, ValueError):
        return set()
    package = key.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    if not key.endswith("/__init__.py"):
        package = package.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[:len(package.split(".")) - node.level + 1] if package else []
                base = ".".join([*parent, *([base] if base else [])])
            if base:
                names.add(base)
                names.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    return {".".join(name.split(".")[:end]) for name in names for end in range(1, name.count(".") + 2)}


def _own_file(module: str) -> tuple[str, Path] | None:
    """``(key, path)`` of a module's source when it is the researcher's, else ``None``."""
    loaded = sys.modules.get(module)
    origin = getattr(loaded, "__file__", None) if loaded is not None else None
    if origin is None:
        try:
            spec = importlib.util.find_spec(module)  # imports its parent packages, as the run does
        except (ImportError, ValueError, AttributeError):
            return None
        origin = spec.origin if spec is not None and spec.has_location else None
    if not origin or not str(origin).endswith(".py") or not _theirs(path := Path(origin).resolve()):
        return None
    return module.replace(".", "/") + ("/__init__.py" if path.name == "__init__.py" else ".py"), path


def places(modules: dict[str, Path]) -> set[Path]:
    """Where :func:`own_modules` live: the top-level package folder or the single module file of each."""
    return {path.parents[key.count("/") - 1] if "/" in key else path for key, path in modules.items()}


def _module_of(target: str) -> str | None:
    """The importable module a target lives in (``None``: none is)."""
    if ":" in target:
        return target.split(":", 1)[0]
    parts = target.split(".")
    for end in range(len(parts) - 1, 0, -1):
        name = ".".join(parts[:end])
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        return name
    return None


class CodeHasher:
    """The code :class:`Fingerprint` of a run from its ``_target_`` s: schedlab's sources plus the researcher's own
    modules (:func:`own_modules`), each target's walked and read once per hasher (the planner keeps one per sweep,
    and each fingerprint it made)."""

    def __init__(self) -> None:
        self.own: dict[str, dict[str, Path]] = {}  # target → its own modules (:func:`own_modules`)
        self._digests: dict[Path, str] = {}

    def code(self, targets: Iterable[str]) -> Fingerprint:
        files = dict(schedlab_sources())
        for target in sorted(set(targets)):
            if target not in self.own:
                self.own[target] = own_modules(target)
            for key, path in self.own[target].items():
                if path not in self._digests:
                    self._digests[path] = source_digest(path)
                files[key] = self._digests[path]
        return Fingerprint(files)


class InputHasher:
    """sha256 of input files, each file read once per hasher (a sweep's runs share a few files)."""

    def __init__(self) -> None:
        self._seen: dict[Path, str] = {}

    def inputs(self, files: Mapping[str, Path] | Iterable[tuple[str, Path]]) -> Fingerprint:
        """``files`` maps the user's name of each file to its path (or lists those pairs)."""
        out = {}
        for name, path in dict(files).items():
            resolved = path.resolve()
            if resolved not in self._seen:
                self._seen[resolved] = sha256_file(resolved)
            out[name] = self._seen[resolved]
        return Fingerprint(out)
