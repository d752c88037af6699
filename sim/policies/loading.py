"""Policies from ``conf/policy/*.yaml`` (the one registry) or from any ``package.module:Class``.

A policy file names the class or per-family factory itself as ``_target_``, with its options::

    _target_: sim.policies.backfill.SeedBackfill
    window: head
    order: fcfs

The sweeps build the same files through Hydra; this loader needs only PyYAML, so the simulator's
command line and the tests use the same registry. Every failure is a one-line :class:`InputError`.

>>> policy_from_conf("easy", backfill_order="sjf").name
'easy'
>>> build_policy("sim.policies.backfill:SeedBackfill", {"window": "ahead"}).name
'conservative'
>>> build_policy("mysched:Mine", {})
Traceback (most recent call last):
sim.core.InputError: cannot import policy mysched:Mine: No module named 'mysched'
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from sim.core import InputError
from sim.policies.base import Policy

#: the folder of the policy files, ``conf/policy`` of the repository
POLICY_CONF = Path(__file__).resolve().parents[2] / "conf" / "policy"
#: what a policy must have (:class:`~sim.policies.base.Policy`): methods, then attributes
PROTOCOL_METHODS = ("attach", "submit", "complete", "schedule", "next_wakeup", "workflow_done", "stats")
PROTOCOL_MEMBERS = (*PROTOCOL_METHODS, "name", "preserves_order", "workload_kinds")
_BASE_HINT = "of the Policy protocol (sim/policies/base.py); subclass sim.policies.base.BasePolicy for the defaults"


def policy_names(folders: Iterable[Path] = (POLICY_CONF,)) -> list[str]:
    """The policy files' names (``easy``, ``drf`` …), sorted."""
    return sorted({path.stem for folder in folders for path in folder.glob("*.yaml")})


#: the one interpolation a policy file may hold (a relative path's folder); read without Hydra, the current folder
LAUNCH_DIR = "${hydra:runtime.cwd}"


def policy_config(name: str, folders: Iterable[Path] = (POLICY_CONF,)) -> dict[str, Any]:
    """``NAME.yaml`` from the first folder that has it, as a dict holding ``_target_`` and the options
    (:data:`LAUNCH_DIR` read as the current folder, as Hydra reads it for a command launched here)."""
    import yaml  # only the command line and the tests read policy files

    folders = list(folders)
    names = policy_names(folders)
    if name not in names:
        raise InputError(f"unknown policy {name!r}; expected one of {', '.join(names)} "
                         f"(the files in {', '.join(map(str, folders))})")
    path = next(f / f"{name}.yaml" for f in folders if (f / f"{name}.yaml").is_file())
    try:
        config = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise InputError(f"{path}: not valid YAML ({' '.join(str(error).split())})") from None
    if not isinstance(config, dict) or not isinstance(config.get("_target_"), str):
        raise InputError(f"{path}: expected a mapping with a _target_ (the policy class or factory)")
    return {key: str(Path.cwd()) if value == LAUNCH_DIR else value for key, value in config.items()}


def resolve_target(target: str) -> Callable[..., Any]:
    """The callable ``pkg.mod.Class`` or ``pkg.mod:Class`` names (``pkg.mod:Outer.Inner`` too)."""
    module_name, _, attribute = target.partition(":") if ":" in target else target.rpartition(".")
    if not module_name or not attribute:
        raise InputError(f"policy {target!r}: expected package.module.Class or package.module:Class")
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # any failure to import the user's module is a bad --policy, in one line
        detail = str(error) if isinstance(error, ImportError) else f"{type(error).__name__}: {error}"
        raise InputError(f"cannot import policy {target}: {detail}") from None
    found: Any = module
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise InputError(f"cannot import policy {target}: module {module_name} has no attribute {attribute!r}")
        found = getattr(found, part)
    if not callable(found):
        raise InputError(f"policy {target} is not a class or factory but {type(found).__name__} {found!r}")
    return found


def check_policy_target(target: str, options: Mapping[str, Any]) -> Callable[..., Any]:
    """Everything :func:`build_policy` checks short of calling the target: it imports, it takes
    ``options`` (by its signature), and a class has the protocol's methods. Returns the callable."""
    factory = resolve_target(target)
    if isinstance(factory, type):
        missing = [f"{m}()" for m in PROTOCOL_METHODS
                   if not callable(getattr(factory, m, None)) or m in getattr(factory, "__abstractmethods__", ())]
        if missing:
            raise InputError(f"policy {target} lacks {', '.join(missing)} {_BASE_HINT}")
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # no introspectable signature: the call will tell
        return factory
    named = [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if not any(p.kind is p.VAR_KEYWORD for p in parameters):
        unknown = [key for key in options if key not in named]
        if unknown:
            takes = f"it takes: {', '.join(named)}" if named else "it takes no options"
            raise InputError(f"policy {target} does not accept option {unknown[0]!r} ({takes})")
    required = [p.name for p in parameters
                if p.name in named and p.default is p.empty and p.name not in options]
    if required:
        raise InputError(f"policy {target} needs option {required[0]!r}")
    return factory


def build_policy(target: str, options: Mapping[str, Any]) -> Policy:
    """A fresh policy: ``target`` called with ``options``, checked against the protocol."""
    factory = check_policy_target(target, options)
    try:
        policy = factory(**options)
    except InputError:
        raise
    except (TypeError, ValueError) as error:
        raise InputError(f"policy {target}: {' '.join(str(error).split())}") from None
    except Exception as error:  # a researcher's constructor failing otherwise: still one line, naming it
        raise InputError(f"policy {target}: {type(error).__name__}: {' '.join(str(error).split())}") from None
    missing = [f"{m}()" if m in PROTOCOL_METHODS else m for m in PROTOCOL_MEMBERS if not hasattr(policy, m)]
    if missing:
        raise InputError(f"policy {target} lacks {', '.join(missing)} {_BASE_HINT}")
    return policy


def policy_from_conf(name: str, **options: Any) -> Policy:
    """The policy ``conf/policy/NAME.yaml`` describes, its options updated with ``options``.

    >>> policy_from_conf("conservative_classic").depth is None
    True
    """
    config = policy_config(name)
    target = config.pop("_target_")
    return build_policy(target, {**config, **options})
