"""Every use of a private Hydra or OmegaConf API, in one module (each has a canary in
``tests/test_hydra_private.py`` that names the Hydra version when a release changes it), and the
composition cache built on them.

The cache (:class:`Composer`, owned by the launcher, which also puts it in front of the config loader it
shares with the sweeper, :class:`CachedLoader`, so that any sweeper's own compose uses it) composes a
sweep's runs once per set of config-group choices: Hydra's compose builds the defaults list and merges every
group file (120–170 ms of driver CPU per run, measured), while runs mostly differ only in value overrides
(``seed=3``). A run whose shape has no interpolation but ``${hydra:runtime.cwd}`` outside its ``hydra``
node, and whose value overrides set plain leaves to plain values, is *described*
(:meth:`Composer.describe`): its resolved task config is its shape's template with the values set, and a
worker composes it from a :class:`Recipe` and the shape's composition. Any other run is composed by Hydra,
so errors read as Hydra words them. """

import json
import os
import pickle
import re
from collections import OrderedDict
from dataclasses import dataclass
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
    HydraConfig.instance().cfg = cfg
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


def pickled(cfg: DictConfig) -> bytes:
    """A config as bytes that unpickle to a deep copy: what ``copy.deepcopy`` gives, in about 60 % of its time
    (measured), half of it spent once when the bytes are kept (:meth:`Composer.blob`)."""
    return pickle.dumps(cfg, protocol=pickle.HIGHEST_PROTOCOL)


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


class _Config:
    """``cfg`` (slot 0) or ``hydra_cfg`` (slot 1) of a :class:`RunReturn`: made on first read, replaceable."""

    def __init__(self, slot: int) -> None:
        self.slot = slot

    def __get__(self, ret: "RunReturn | None", owner: type | None = None) -> Any:
        if ret is None:
            return self
        if ret._configs[self.slot] is None:
            config = ret._compose()
            if self.slot == 0:
                cfg = OmegaConf.masked_copy(config, [str(k) for k in config if k != "hydra"])
                OmegaConf.set_struct(cfg, OmegaConf.is_struct(config))
            else:
                cfg = OmegaConf.masked_copy(config, "hydra")
                cfg.hydra._set_parent(config)
                OmegaConf.set_readonly(cfg.hydra, True)
            ret._configs[self.slot] = cfg
        return ret._configs[self.slot]

    def __set__(self, ret: "RunReturn", value: DictConfig | None) -> None:
        if value is not None:  # JobReturn's __init__ sets None
            ret._configs[self.slot] = value


class RunReturn(JobReturn):
    """A JobReturn whose ``cfg`` (the task's config) and ``hydra_cfg`` (``{"hydra": …}``) are made from the
    run's composed config on first access: a sweeper seldom reads them (copying two configs per run cost
    the driver milliseconds each)."""

    cfg = _Config(0)  # type: ignore[assignment]
    hydra_cfg = _Config(1)  # type: ignore[assignment]

    def __init__(self, compose: Any, value: Any, **fields: Any) -> None:
        self._compose, self._configs = compose, [None, None]
        super().__init__(**fields)
        self.return_value = value


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
    """One shape's resolved template (``None``: not describable), group choices and plain leaves (by key)."""

    template: bytes | None
    choices: dict[str, str]
    plain_keys: dict[str, bool]

    def plain(self, base: DictConfig, o: Override) -> bool:
        if o.key_or_group not in self.plain_keys:
            self.plain_keys[o.key_or_group] = _plain_node(base, o.key_or_group)
        value = o.value()
        return (self.plain_keys[o.key_or_group] and isinstance(value, PLAIN_VALUES)
                and not (isinstance(value, str) and "${" in value))


def apply_values(base: bytes, master: DictConfig, parsed: list[Override], values: list[Override]) -> DictConfig:
    """A run's config from its shape's composition: what Hydra does with the run's value overrides after
    composing its groups, on a copy of ``base`` (:func:`pickled`; ``parsed``: all its overrides)."""
    cfg = pickle.loads(base)
    for o in values:
        OmegaConf.update(cfg, o.key_or_group, o.value(), merge=True)
    dirname = cfg.hydra.job.config.override_dirname
    cfg.hydra.overrides.task = [o.input_line for o in parsed]
    cfg.hydra.job.override_dirname = get_overrides_dirname(
        overrides=parsed, exclude_keys=list(dirname.exclude_keys), item_sep=dirname.item_sep, kv_sep=dirname.kv_sep)
    OmegaConf.copy_cache(from_config=master, to_config=cfg)
    return cfg


@dataclass(frozen=True)
class Recipe:
    """How a worker composes a described run from its shape's composition (``values``: the positions of
    its value overrides)."""

    shape: tuple[str, ...]
    overrides: tuple[str, ...]
    values: tuple[int, ...]

    def compose(self, base: bytes, master: DictConfig) -> DictConfig:
        parsed = [parse_override(text) for text in self.overrides]
        return apply_values(base, master, parsed, [parsed[i] for i in self.values])


_PARSER = OverridesParser.create()
#: ``dotted.key=number`` with a decimal int or float literal: what a ``range()`` or a list of rates expands to
_NUMBER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)=(-?(?:0|[1-9][0-9]*))(\.[0-9]+)?")


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
    """The composition cache of one sweep (its master ``config``).

    Only plain ``group=option`` and ``key=value`` overrides take the cached path; anything else (``+``,
    ``++``, ``~``, ``group@package``, ``hydra`` keys, a ``hydra.searchpath``, a loader without a config
    repository) and any run whose cached path raises is composed by Hydra itself.
    """

    def __init__(self, loader: ConfigLoader, master: DictConfig, max_bases: int = 64, max_parsed: int = 100_000
                 ) -> None:
        self.loader, self.master, self.max_bases, self.max_parsed = loader, master, max_bases, max_parsed
        self._repository = getattr(loader, "repository", None)
        self._searchpath = bool(OmegaConf.select(master, "hydra.searchpath"))
        self._parsed: dict[str, Override] = {}
        self._is_group: dict[str, bool] = {}
        self._bases: OrderedDict[tuple[str, ...], DictConfig] = OrderedDict()
        self._blobs: dict[tuple[str, ...], bytes] = {}
        self._shapes: dict[tuple[str, ...], _Shape] = {}

    def describe(self, overrides: list[str]) -> Described | None:
        """The run as plain data, without composing it; ``None`` when it must be composed."""
        split = self._split(overrides)
        if split is None:
            return None
        parsed, groups, values = split
        shape = tuple(str(o.input_line) for o in groups)
        try:
            base = self.base(shape)
        except Exception:  # Hydra's full compose raises the error, in Hydra's words
            return None
        if shape not in self._shapes:
            self._shapes[shape] = _Shape(_template(base), group_choices(base), {})
        known = self._shapes[shape]
        if known.template is None or not all(known.plain(base, o) for o in values):
            return None
        value_ids = {id(o) for o in values}
        task = pickle.loads(known.template)
        for o in values:
            *parents, leaf = o.key_or_group.split(".")
            node = task
            for part in parents:
                node = node[part]
            node[leaf] = o.value()
        recipe = Recipe(shape, tuple(overrides), tuple(i for i, o in enumerate(parsed) if id(o) in value_ids))
        return task, known.choices, recipe

    def compose(self, overrides: list[str]) -> DictConfig:
        """The run's config as Hydra composes it (from its shape's cached composition when it can)."""
        split = self._split(overrides)
        if split is not None:
            parsed, groups, values = split
            try:
                return apply_values(self.blob(tuple(str(o.input_line) for o in groups)), self.master, parsed, values)
            except Exception:  # Hydra's full compose raises the error, in Hydra's words
                pass
        return self.loader.load_sweep_config(self.master, list(overrides))

    def base(self, shape: tuple[str, ...]) -> DictConfig:
        """Hydra's composition with only the group overrides ``shape`` (the ``max_bases`` last used are
        kept); read it, do not change it."""
        if shape in self._bases:
            self._bases.move_to_end(shape)
        else:
            self._bases[shape] = self.loader.load_sweep_config(self.master, list(shape))
            if len(self._bases) > self.max_bases:
                gone = self._bases.popitem(last=False)[0]
                self._shapes.pop(gone, None)
                self._blobs.pop(gone, None)
        return self._bases[shape]

    def blob(self, shape: tuple[str, ...]) -> bytes:
        """:meth:`base` pickled once (:func:`pickled`): each run's copy costs one unpickling."""
        base = self.base(shape)
        if shape not in self._blobs:
            self._blobs[shape] = pickled(base)
        return self._blobs[shape]

    def _split(self, overrides: list[str]) -> tuple[list[Override], list[Override], list[Override]] | None:
        """All parsed overrides, the group ones and the value ones; ``None``: needs the full compose."""
        if self._repository is None or self._searchpath:
            return None
        parsed = [self._parse(text) for text in overrides]
        groups, values = [], []
        for o in parsed:
            if (o.is_sweep_override() or o.is_add() or o.is_force_add() or o.is_delete()
                    or o.package is not None or o.key_or_group.startswith("hydra")):
                return None
            if o.key_or_group not in self._is_group:
                self._is_group[o.key_or_group] = self._repository.group_exists(o.key_or_group)
            if not self._is_group[o.key_or_group]:
                values.append(o)
            elif isinstance(o.value(), str):
                groups.append(o)
            else:
                return None
        return parsed, groups, values

    def _parse(self, text: str) -> Override:
        """One override, parsed once per sweep (``policy=easy`` recurs in every run)."""
        if text not in self._parsed:
            if len(self._parsed) >= self.max_parsed:
                self._parsed.clear()
            self._parsed[text] = parse_override(text)
        return self._parsed[text]


class CachedLoader:
    """Hydra's config loader with a sweep's :class:`Composer` in front of ``load_sweep_config`` for that sweep's
    master config: a sweeper that composes each job to check it (Hydra's basic sweeper does, 120–170 ms a run)
    gets the cache's compose, identical to Hydra's (tests/test_hydra_private.py). Everything else is Hydra's
    loader. Installed by the launcher in the :class:`~hydra.types.HydraContext` the sweeper handed it, which
    the sweeper holds too (:func:`share_cache`)."""

    def __init__(self, loader: ConfigLoader, composer: Composer) -> None:
        self.loader, self.composer = loader, composer

    def load_sweep_config(self, master_config: DictConfig, sweep_overrides: list[str]) -> DictConfig:
        if master_config is self.composer.master:
            return self.composer.compose(list(sweep_overrides))
        return self.loader.load_sweep_config(master_config, sweep_overrides)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)


def share_cache(context: Any, config: DictConfig) -> Composer:
    """The sweep's composition cache over ``context``'s loader, installed in ``context`` (the object Hydra's
    ``Plugins.instantiate_launcher`` hands the launcher is the sweeper's own) so that sweeper and launcher
    compose through one cache."""
    loader = context.config_loader
    if isinstance(loader, CachedLoader):
        return loader.composer
    composer = Composer(loader, config)
    context.config_loader = CachedLoader(loader, composer)
    return composer
