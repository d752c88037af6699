"""The package boundaries of the design card, checked by scanning imports (STYLE.md, 'Our shape')."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

FORBIDDEN = {
    "sim": {"hydra", "omegaconf", "ray", "mlflow", "sweeps", "analysis", "pandas", "seaborn", "matplotlib"},
    "sweeps": {"analysis"},
    "analysis": {"sim", "sweeps", "ray", "hydra"},
}


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_never_imports_what_it_must_not(package: str) -> None:
    files = sorted((REPO / package).rglob("*.py"))
    assert files, f"{package}/ has no modules"
    offenders = {str(f.relative_to(REPO)): imported_roots(f) & FORBIDDEN[package] for f in files}
    assert {f: bad for f, bad in offenders.items() if bad} == {}
