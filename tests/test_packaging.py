"""Packaging metadata: installs without setuptools deprecation warnings."""

from __future__ import annotations

import re
import tomllib

from tests.conftest import REPO


def test_license_is_an_spdx_string_with_a_setuptools_that_reads_it() -> None:
    """A ``{text = …}`` table makes setuptools ≥ 77 warn on every install (PEP 639 wants a string)."""
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert meta["project"]["license"] == "MIT"
    floor = next(re.fullmatch(r"setuptools>=(\d+)", r) for r in meta["build-system"]["requires"]
                 if r.startswith("setuptools"))
    assert floor is not None and int(floor.group(1)) >= 77
