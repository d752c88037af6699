"""Suite-wide settings and test data.

Every simulation run by a test (in this process or a child) is checked. DR_EVT's conformance suite
ships in ``tests/data/drevt`` (MIT, its LICENSE and NOTICE beside it), so every clone runs it. Real
traces from the Parallel Workloads Archive are not redistributed: tests needing one look in the
folder ``$SCHEDLAB_TRACES`` names, then in ``../shared/data/traces``, and skip saying where to get it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock

from sim.workloads.errors import ARCHIVE_URL

os.environ["SCHEDLAB_CHECK_INVARIANTS"] = "1"

REPO = Path(__file__).resolve().parents[1]
DREVT = REPO / "tests" / "data" / "drevt"
TRACES_ENV = "SCHEDLAB_TRACES"
#: how to get each real trace the tests use (the archive's page for that log or model)
_DOWNLOAD = "download it from the Parallel Workloads Archive,"
TRACE_SOURCES = {
    "KTH-SP2-1996-2.1-cln.swf": f"{_DOWNLOAD} {ARCHIVE_URL}l_kth_sp2/index.html",
    "NASA-iPSC-1993-3.1-cln.swf": f"{_DOWNLOAD} {ARCHIVE_URL}l_nasa_ipsc/index.html",
    "lublin_256.swf": f"generate it with the archive's m_lublin99.c for 256 nodes, {ARCHIVE_URL}m_lublin99/index.html",
}


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """A folder ``build`` fills once per test session, whichever pytest-xdist worker asks first; the others
    wait for it and share it, so its users read it and write only files of their own into it."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / f"built-once-{name}"
    with FileLock(f"{folder}.lock"):
        if not (folder / ".built").exists():  # a worker whose build failed left it unmarked: build afresh
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            (folder / ".built").touch()
    return folder


def trace_folders() -> list[Path]:
    """Folders searched for real traces, in order."""
    folders = [Path(os.environ[TRACES_ENV])] if os.environ.get(TRACES_ENV) else []
    return [*folders, REPO.parent / "shared" / "data" / "traces"]


def find_trace(name: str) -> Path | None:
    """The real trace ``name`` (or its ``.gz``) in the first folder holding it; ``None`` when absent."""
    for folder in trace_folders():
        for candidate in (folder / name, folder / f"{name}.gz"):
            if candidate.is_file():
                return candidate
    return None


def missing_trace_reason(name: str) -> str:
    """Why a test needing ``name`` is skipped and how to get the trace."""
    how = TRACE_SOURCES.get(name, f"{_DOWNLOAD} {ARCHIVE_URL}")
    return f"needs the real trace {name}: {how}, into the folder ${TRACES_ENV} names (or ../shared/data/traces)"


def needs_trace(name: str) -> pytest.MarkDecorator:
    """Skip the test when the real trace ``name`` is absent, saying where to download it."""
    return pytest.mark.skipif(find_trace(name) is None, reason=missing_trace_reason(name))


def real_trace(name: str) -> Path:
    """The path of the real trace ``name``; skips the calling test when it is absent."""
    path = find_trace(name)
    if path is None:
        pytest.skip(missing_trace_reason(name))
    return path


@pytest.fixture(autouse=True)
def _sweeps_end_with_their_test():
    """An in-process sweep that raised (a test expecting its failure) never reached Hydra's on_multirun_end:
    finish it here, inside its test, rather than at interpreter exit after pytest's summary."""
    yield
    import sys

    planner = sys.modules.get("sweeps.planner")  # only when a test imported it
    if planner is not None:
        for sweep in list(planner._OPEN.values()):
            sweep.finish()
