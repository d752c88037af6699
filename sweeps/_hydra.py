"""Every use of a private Hydra or OmegaConf API, in one module (each has a canary in
``tests/test_hydra_private.py`` that names the Hydra version when a release changes it), and the
composition cache built on them.

The cache (:class:`Composer`: the launcher's, installed as the config loader it shares with the sweeper, so
that any sweeper's own compose uses it) composes a sweep's runs once per set of config-group choices: Hydra's
compose builds the defaults list and merges every group file (120–170 ms of driver CPU per run, measured),
while runs mostly differ only in value overrides (``seed=3``). A run whose shape has no interpolation but
``${hydra:runtime.cwd}`` outside its ``hydra`` node, and whose value overrides set plain leaves to plain
values, is *described* (:meth:`Composer.describe`): its resolved task config is its shape's template with the
values set, and a worker composes it from a :class:`Recipe` and the shape's composition. Any other run is
composed by Hydra, so errors read as Hydra words them."""

import contextlib
import copy
import functools
import json
import os
import pickle
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from hydra._internal.config_loader_impl import get_overrides_dirname
from hydra.core.config_loader import ConfigLoader
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, OverrideType, ValueType
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn
from omegaconf import AnyNode, DictConfig, ListConfig, OmegaConf, open_dict, read_write

#: the only interpolation a described run's task config may hold: the same for every run (launch directory)
CONSTANT_INTERPOLATION = "${hydra:runtime.cwd}"
PLAIN_VALUES = (int, float, bool, str, type(None))


def task_config(cfg: DictConfig) -> dict[str, Any]:
    """The run's resolved config as a plain dict, without the ``hydra`` node."""
    plain: dict[str, Any] = {}
    for key in cfg:
        if key != "hydra":
            value = OmegaConf.select(cfg, str(key), throw_on_missing=False)
            plain[str(key)] = (OmegaConf.to_container(value, resolve=True, throw_on_missing=False)
                               if isinstance(value, DictConfig | ListConfig) else value)
    return plain


def group_choices(cfg: DictConfig) -> dict[str, str]:
    """The config-group choices Hydra recorded for a composed run (``{"policy": "easy", …}``), without
    Hydra's own groups."""
    choices = OmegaConf.select(cfg, "hydra.runtime.choices", default=None) or {}
    return {str(k): str(v) for k, v in choices.items() if not str(k).startswith("hydra") and v is not None}


def check_planned(cfg: DictConfig, plain: dict[str, Any]) -> None:
    """Refuse to run a config that differs from the plain one the driver planned (and keyed and will
    record) the run with: the composition cache must never make a run compute something else."""
    ours = task_config(cfg)
    if json.dumps(ours, sort_keys=True, default=str) != json.dumps(plain, sort_keys=True, default=str):
        keys = sorted(k for k in {*ours, *plain} if json.dumps(ours.get(k), sort_keys=True, default=str)
                      != json.dumps(plain.get(k), sort_keys=True, default=str))
        raise RuntimeError(f"the composed config differs from the one the driver planned the run with "
                           f"(keys {', '.join(keys)}): not run; a bug of the composition cache, please report it")


def job_error(ret: JobReturn) -> BaseException:
    """The exception a FAILED job raised (reading ``ret.return_value`` would raise it)."""
    return ret._return_value


singleton_state, set_singleton_state = Singleton.get_state, Singleton.set_state


def finish(cfg: DictConfig, idx: int, sweep_dir: str) -> DictConfig:
    """Number a composed run, place it in the sweep directory and resolve its task part (on the driver for a
    run composed there, on the worker for a described one)."""
    with open_dict(cfg):
        cfg.hydra.job.id = cfg.hydra.job.num = idx
        cfg.hydra.sweep.dir = sweep_dir
    OmegaConf.set_readonly(cfg.hydra, True)
    HydraConfig.instance().cfg = cfg  # ${hydra:…} resolves against this run (set_config copies the node)
    subdir = str(OmegaConf.select(cfg, "hydra.sweep.subdir"))  # as run_job computes it in the worker
    with read_write(cfg.hydra.runtime), open_dict(cfg.hydra.runtime):
        cfg.hydra.runtime.output_dir = os.path.abspath(os.path.join(sweep_dir, subdir))
    with read_write(cfg), open_dict(cfg):
        for key in [k for k in cfg if k != "hydra"]:
            node = cfg._get_node(key)
            if isinstance(node, DictConfig | ListConfig):
                OmegaConf.resolve(node)
            else:
                cfg[key] = cfg[key]
    return cfg


def without_callback(callbacks: Any, kind: type) -> Any:
    """Hydra's ``Callbacks`` of a sweep without those of class ``kind`` (what a launcher's ``run_job`` notifies)."""
    if callbacks is None:
        return None
    kept = copy.copy(callbacks)
    kept.callbacks = [c for c in callbacks.callbacks if not isinstance(c, kind)]
    return kept


class RunReturn(JobReturn):
    """A JobReturn whose ``cfg`` (the task's config) and ``hydra_cfg`` (``{"hydra": …}``) are made from the
    run's composed config on first access (assigning one replaces it): a sweeper seldom reads them (copying
    two configs per run cost the driver milliseconds each)."""

    def __init__(self, compose: Any, value: Any, overrides: list[str], working_dir: str | None,
                 task_name: str | None, status: Any) -> None:  # JobReturn's own __init__ would set cfg to None
        self._compose, self.overrides, self.working_dir, self.task_name = compose, overrides, working_dir, task_name
        self.status, self._return_value = status, value

    @functools.cached_property
    def cfg(self) -> DictConfig:  # type: ignore[override]
        config = self._compose()
        cfg = OmegaConf.masked_copy(config, [str(k) for k in config if k != "hydra"])
        OmegaConf.set_struct(cfg, OmegaConf.is_struct(config))
        return cfg

    @functools.cached_property
    def hydra_cfg(self) -> DictConfig:  # type: ignore[override]
        config = self._compose()
        cfg = OmegaConf.masked_copy(config, "hydra")
        cfg.hydra._set_parent(config)
        OmegaConf.set_readonly(cfg.hydra, True)
        return cfg


def _template(base: DictConfig) -> bytes | None:
    """A shape's resolved task config, pickled (copied per run), when its only interpolations are
    :data:`CONSTANT_INTERPOLATION`; ``None`` when some run of it could resolve differently."""
    raw = OmegaConf.to_container(base, resolve=False)
    raw.pop("hydra", None)
    if any("${" in text.replace(CONSTANT_INTERPOLATION, "") for text in _strings(raw)):
        return None
    hydra = HydraConfig.instance()
    before, hydra.cfg = hydra.cfg, base  # ${hydra:runtime.cwd} resolves against the shape's own node
    try:
        return pickle.dumps(task_config(base), protocol=pickle.HIGHEST_PROTOCOL)
    finally:
        hydra.cfg = before


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict | list):
        return [s for v in (value.values() if isinstance(value, dict) else value) for s in _strings(v)]
    return []


def _plain_node(base: DictConfig, key: str) -> bool:
    """Whether ``key`` names a plain (untyped, non-container) leaf of ``base``: then setting it in the
    resolved task config is what Hydra's ``OmegaConf.update`` does."""
    *parents, leaf = key.split(".")
    node: Any = base
    try:
        for part in parents:
            node = node._get_node(part)
            if not isinstance(node, DictConfig) or node._is_none() or node._is_interpolation():
                return False
        return type(node._get_node(leaf)) is AnyNode
    except Exception:  # a key the config does not have: Hydra's compose words the error
        return False


@dataclass
class _Shape:
    """One set of group choices: Hydra's composition (read it, do not change it) and its pickle (each run's copy
    is one unpickling: a deep copy in about 60 % of ``copy.deepcopy``'s time, measured, half of it the pickling
    done once here), its resolved template (``None``: not describable), group choices and plain leaves (by key)."""

    base: DictConfig
    blob: bytes
    template: bytes | None
    choices: dict[str, str]
    plain_keys: dict[str, bool] = field(default_factory=dict)


@dataclass(frozen=True)
class Recipe:
    """How a worker composes a described run from its shape's composition (``values``: the positions of
    its value overrides)."""

    shape: tuple[str, ...]
    overrides: tuple[str, ...]
    values: tuple[int, ...]

    def compose(self, base: bytes, master: DictConfig) -> DictConfig:
        """What Hydra does with the run's value overrides after composing its groups, on a copy of ``base``."""
        parsed = [parse_override(text) for text in self.overrides]
        cfg = pickle.loads(base)
        for i in self.values:
            OmegaConf.update(cfg, parsed[i].key_or_group, parsed[i].value(), merge=True)
        dirname = cfg.hydra.job.config.override_dirname
        cfg.hydra.overrides.task = list(self.overrides)
        cfg.hydra.job.override_dirname = get_overrides_dirname(
            overrides=parsed, exclude_keys=list(dirname.exclude_keys), item_sep=dirname.item_sep,
            kv_sep=dirname.kv_sep)
        OmegaConf.copy_cache(from_config=master, to_config=cfg)
        return cfg


_PARSER = OverridesParser.create()
#: ``dotted.key=number`` with a decimal int or float literal: what a ``range()`` or a list of rates expands to
_NUMBER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)=(-?(?:0|[1-9][0-9]*))(\.[0-9]+)?")


@lru_cache(maxsize=100_000)  # a sweep's overrides recur (``policy=easy`` in every run)
def parse_override(text: str) -> Override:
    """One override as Hydra's grammar parses it; ``key=number`` (most of a big sweep's) is read directly,
    about a hundred times faster than Hydra's ANTLR parser, into the same :class:`Override` (a property
    test compares them)."""
    match = _NUMBER.fullmatch(text)
    if match is None:
        return _PARSER.parse_overrides([text])[0]
    key, whole, fraction = match.groups()
    value: int | float = float(whole + fraction) if fraction else int(whole)
    return Override(type=OverrideType.CHANGE, key_or_group=key, value_type=ValueType.ELEMENT, _value=value,
                    input_line=text)


#: (plain resolved task config, group choices, how a worker composes it)
Described = tuple[dict[str, Any], dict[str, str], Recipe]


class Composer:
    """The composition cache of one sweep (its master ``config``), a config loader in place of Hydra's (whose
    ``load_sweep_config`` it serves for that master config; everything else is Hydra's loader).

    Only plain ``group=option`` and ``key=value`` overrides take the cached path; anything else (``+``,
    ``++``, ``~``, ``group@package``, ``hydra`` keys, a ``hydra.searchpath``, a loader without a config
    repository) and any run whose cached path raises is composed by Hydra itself. The first ``max_bases``
    shapes are kept (any other is composed again each time).
    """

    def __init__(self, loader: ConfigLoader, master: DictConfig, max_bases: int = 64) -> None:
        self.loader, self.master, self.max_bases = loader, master, max_bases
        self._repository = getattr(loader, "repository", None)
        self._searchpath = bool(OmegaConf.select(master, "hydra.searchpath"))
        self._is_group: dict[str, bool] = {}
        self._shapes: dict[tuple[str, ...], _Shape] = {}

    def describe(self, overrides: list[str]) -> Described | None:
        """The run as plain data, without composing it; ``None`` when it must be composed."""
        split = self._split(overrides)
        if split is None or split[3].template is None:
            return None
        parsed, shape, values, known = split
        task = pickle.loads(known.template)
        for i in values:
            key, value = parsed[i].key_or_group, parsed[i].value()
            if key not in known.plain_keys:
                known.plain_keys[key] = _plain_node(known.base, key)
            if not known.plain_keys[key] or not isinstance(value, PLAIN_VALUES) or (
                    isinstance(value, str) and "${" in value):
                return None
            *parents, leaf = key.split(".")
            node = task
            for part in parents:
                node = node[part]
            node[leaf] = value
        return task, known.choices, Recipe(shape, tuple(overrides), values)

    def shape(self, shape: tuple[str, ...]) -> _Shape:
        """Hydra's composition with only the group overrides ``shape``, and what the cache keeps of it."""
        if shape in self._shapes:
            return self._shapes[shape]
        base = self.loader.load_sweep_config(self.master, list(shape))
        blob = pickle.dumps(base, protocol=pickle.HIGHEST_PROTOCOL)
        known = _Shape(base, blob, _template(base), group_choices(base))
        if len(self._shapes) < self.max_bases:
            self._shapes[shape] = known
        return known

    def _split(self, overrides: list[str]) -> tuple[list[Override], tuple[str, ...], tuple[int, ...], _Shape] | None:
        """All parsed overrides, the shape (the group ones), the positions of the value ones and the shape's
        cache entry; ``None``: needs the full compose."""
        if self._repository is None or self._searchpath:
            return None
        parsed = [parse_override(text) for text in overrides]
        groups, values = [], []
        for i, o in enumerate(parsed):
            if (o.is_sweep_override() or o.is_add() or o.is_force_add() or o.is_delete()
                    or o.package is not None or o.key_or_group.startswith("hydra")):
                return None
            if o.key_or_group not in self._is_group:
                self._is_group[o.key_or_group] = self._repository.group_exists(o.key_or_group)
            if not self._is_group[o.key_or_group]:
                values.append(i)
            elif isinstance(o.value(), str):
                groups.append(str(o.input_line))
            else:
                return None
        shape = tuple(groups)
        try:
            return parsed, shape, tuple(values), self._shapes.get(shape) or self.shape(shape)  # known: one lookup
        except Exception:  # Hydra's full compose raises the error, in Hydra's words
            return None

    def load_sweep_config(self, master_config: DictConfig, sweep_overrides: list[str]) -> DictConfig:
        """A run of the sweep as Hydra composes it (Hydra's basic sweeper composes each job to check it), from its
        shape's cached composition when it can; any other master config by Hydra's loader."""
        split = self._split(list(sweep_overrides)) if master_config is self.master else None
        if split is not None:
            with contextlib.suppress(Exception):  # Hydra's full compose raises the error, in Hydra's words
                return Recipe(split[1], tuple(sweep_overrides), split[2]).compose(split[3].blob, self.master)
        return self.loader.load_sweep_config(master_config, list(sweep_overrides))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["loader"], name)


def share_cache(context: Any, config: DictConfig) -> Composer:
    """The sweep's composition cache over ``context``'s loader, installed in ``context`` (the object Hydra's
    ``Plugins.instantiate_launcher`` hands the launcher is the sweeper's own) so that sweeper and launcher
    compose through one cache."""
    loader = context.config_loader
    if isinstance(loader, Composer):
        return loader
    context.config_loader = Composer(loader, config)
    return context.config_loader
