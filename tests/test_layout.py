"""The package boundaries of the design card, checked by scanning imports (STYLE.md, 'Our shape')."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

FORBIDDEN = {
    "sim": {"hydra", "omegaconf", "ray", "mlflow", "sweeps", "analysis", "hydra_plugins", "pandas", "seaborn",
            "matplotlib"},
    "sweeps": {"analysis", "hydra_plugins"},  # the plugins build on sweeps, never the other way round
    "hydra_plugins": {"analysis"},
    "analysis": {"sim", "sweeps", "ray", "hydra", "hydra_plugins"},
}
#: modules a package may import although their top-level package is forbidden to it, and why
ALLOWED = {"analysis": {"sim.stats"}}  # the one CI definition, shared with the precision sweeper


def imported(path: Path) -> set[str]:
    """The absolute module names ``path`` imports."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_the_two_plugins_never_import_each_other() -> None:
    """A sweeper decides what to run, a launcher how: neither knows the other's code (Hydra's contract is
    ``launch(job_overrides, initial_job_idx)``)."""
    plugins = {"schedlab_ray_launcher": "hydra_plugins.schedlab_precision_sweeper",
               "schedlab_precision_sweeper": "hydra_plugins.schedlab_ray_launcher"}
    for plugin, other in plugins.items():
        for path in sorted((REPO / "hydra_plugins" / plugin).rglob("*.py")):
            assert not {name for name in imported(path) if name.startswith(other)}, path


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_never_imports_what_it_must_not(package: str) -> None:
    files = sorted((REPO / package).rglob("*.py"))
    assert files, f"{package}/ has no modules"
    offenders = {str(f.relative_to(REPO)): {name for name in imported(f) - ALLOWED.get(package, set())
                                            if name.split(".")[0] in FORBIDDEN[package]} for f in files}
    assert {f: bad for f, bad in offenders.items() if bad} == {}


def test_the_allowed_exceptions_import_nothing_forbidden_themselves() -> None:
    """An allowed module must not bring in what its importer may not import."""
    for package, modules in ALLOWED.items():
        for module in modules:
            path = REPO / (module.replace(".", "/") + ".py")
            assert not {name for name in imported(path) if name.split(".")[0] in FORBIDDEN[package]}, module
