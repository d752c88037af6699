"""Suite-wide settings: every simulation run by a test (in this process or a child) is checked."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ["SCHEDLAB_CHECK_INVARIANTS"] = "1"

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The read-only reference data beside the repository (CI provides it)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"reference data not found at {SHARED_DATA}")
    return SHARED_DATA
