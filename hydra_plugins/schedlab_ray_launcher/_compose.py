"""A composition cache: compose a sweep's runs once per set of config-group choices.

Composing a run with Hydra means building the defaults list and merging every group file, which
costs tens of milliseconds; the runs of a sweep usually share their group choices and differ only
in value overrides (``seed=3``, ``workload.arrival_rate=0.02``). :class:`CachingConfigLoader`
composes once per distinct set of group overrides, then per run copies that config and applies
the value overrides exactly as Hydra does after composing. A run's config is composed once: the
sweeper's check that every run composes (``validate_batch_is_legal``) leaves it for the launcher.

Most runs need not be composed on the driver at all: when a run's shape has no interpolation but
``${hydra:runtime.cwd}`` outside its ``hydra`` node and each value override sets a plain leaf to a
plain value, :meth:`CachingConfigLoader.plain` gives the run's resolved task config as plain data
(its shape's resolved template with the values set), and :meth:`~CachingConfigLoader.check` checks
the run without composing it. A resume that skips such runs composes none; the launcher composes the
ones it runs as it submits them, and the worker checks that config against the plain one.
"""

import pickle
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from hydra._internal.config_loader_impl import get_overrides_dirname  # Hydra's own: same dir names
from hydra.core.config_loader import ConfigLoader
from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.hydra_config import HydraConfig
from hydra.core.object_type import ObjectType
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, OverrideType, ValueType
from hydra.plugins.config_source import ConfigSource
from hydra.types import RunMode
from omegaconf import AnyNode, DictConfig, ListConfig, OmegaConf

#: the only interpolation a run's task config may hold for :meth:`CachingConfigLoader.plain`: the same
#: for every run of a sweep (the launch directory)
CONSTANT_INTERPOLATION = "${hydra:runtime.cwd}"
PLAIN_VALUES = (int, float, bool, str, type(None))


def copy_config(cfg: DictConfig) -> DictConfig:
    """A deep copy of ``cfg`` through pickle: the same nodes, flags and types as ``copy.deepcopy``
    gives (the composition tests compare them node by node), in about 60 % of its time (measured)."""
    return pickle.loads(pickle.dumps(cfg, protocol=pickle.HIGHEST_PROTOCOL))


def task_config(cfg: DictConfig) -> dict[str, Any]:
    """The run's resolved config as a plain dict, without the ``hydra`` node."""
    plain: dict[str, Any] = {}
    for key in cfg:
        if key == "hydra":
            continue
        value = OmegaConf.select(cfg, str(key), throw_on_missing=False)
        plain[str(key)] = (OmegaConf.to_container(value, resolve=True, throw_on_missing=False)
                           if isinstance(value, DictConfig | ListConfig) else value)
    return plain


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
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _plain_value(o: Override) -> bool:
    """Whether value override ``o`` sets a plain value (no interpolation, no container)."""
    value = o.value()
    return isinstance(value, PLAIN_VALUES) and not (isinstance(value, str) and "${" in value)


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


def group_choices(cfg: DictConfig) -> dict[str, str]:
    """The config-group choices Hydra recorded for a composed run (``{"policy": "easy", …}``), without
    Hydra's own groups."""
    choices = OmegaConf.select(cfg, "hydra.runtime.choices", default=None) or {}
    return {str(k): str(v) for k, v in choices.items() if not str(k).startswith("hydra") and v is not None}


@dataclass
class _Shape:
    """What the cache knows of one shape's composition: its resolved task config pickled (``None`` when
    some run of it could resolve differently, see :func:`_template`), its group choices, and which keys
    are plain leaves (asked once per key)."""

    template: bytes | None
    choices: dict[str, str]
    plain_keys: dict[str, bool]

    @classmethod
    def of(cls, base: DictConfig) -> "_Shape":
        return cls(_template(base), group_choices(base), {})

    def plain_leaf(self, base: DictConfig, o: Override) -> bool:
        if o.key_or_group not in self.plain_keys:
            self.plain_keys[o.key_or_group] = _plain_node(base, o.key_or_group)
        return self.plain_keys[o.key_or_group] and _plain_value(o)


def apply_values(base: DictConfig, master: DictConfig, parsed: list[Override], values: list[Override]
                 ) -> DictConfig:
    """A run's config from its shape's composition ``base``: what Hydra does with the run's value
    overrides after composing its groups, on a copy of ``base`` (``parsed``: all its overrides)."""
    cfg = copy_config(base)
    for o in values:
        OmegaConf.update(cfg, o.key_or_group, o.value(), merge=True)
    dirname = cfg.hydra.job.config.override_dirname
    cfg.hydra.overrides.task = [o.input_line for o in parsed]
    cfg.hydra.job.override_dirname = get_overrides_dirname(
        overrides=parsed, exclude_keys=list(dirname.exclude_keys), item_sep=dirname.item_sep,
        kv_sep=dirname.kv_sep)
    OmegaConf.copy_cache(from_config=master, to_config=cfg)
    return cfg


@dataclass(frozen=True)
class Recipe:
    """How to compose a run the cache describes as plain data anywhere its shape's ``base`` is
    (:func:`apply_values` with its overrides, the ``values`` positions being value overrides)."""

    shape: tuple[str, ...]
    overrides: tuple[str, ...]
    values: tuple[int, ...]

    def compose(self, base: DictConfig, master: DictConfig) -> DictConfig:
        parsed = [parse_override(text) for text in self.overrides]
        return apply_values(base, master, parsed, [parsed[i] for i in self.values])


_PARSER = OverridesParser.create()
#: ``dotted.key=number`` with a decimal int or float literal: what a ``range()`` or a list of rates expands to
_NUMBER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)=(-?(?:0|[1-9][0-9]*))(\.[0-9]+)?")


def parse_override(text: str) -> Override:
    """One override as Hydra's grammar parses it. ``key=number`` overrides (``seed=3``,
    ``workload.arrival_rate=0.02``: most of a big sweep's) are read directly, about a hundred times
    faster than Hydra's ANTLR parser, into the same :class:`Override` (a property test compares them)."""
    match = _NUMBER.fullmatch(text)
    if match is None:
        return _PARSER.parse_overrides([text])[0]
    key, whole, fraction = match.groups()
    value: int | float = float(whole + fraction) if fraction else int(whole)
    return Override(type=OverrideType.CHANGE, key_or_group=key, value_type=ValueType.ELEMENT, _value=value,
                    input_line=text)


class CachingConfigLoader(ConfigLoader):
    """Hydra's config loader with ``load_sweep_config`` cached per set of group overrides.

    Only plain ``group=option`` and ``key=value`` overrides take the cached path. Anything else
    (``+``/``++``/``~``, ``group@package``, ``hydra`` keys, sweeps, a group set to a non-string, a
    ``hydra.searchpath``, a loader without a config repository) and any run whose cached path
    raises is composed by Hydra itself, so errors read exactly as Hydra words them.
    """

    def __init__(self, loader: ConfigLoader, max_bases: int = 64, max_parsed: int = 100_000) -> None:
        self.loader = loader
        self.max_bases = max_bases
        self.max_parsed = max_parsed
        self._repository = getattr(loader, "repository", None)
        self._parsed: dict[str, Override] = {}
        self._is_group: dict[str, bool] = {}  # key → whether it names a config group
        self._master: DictConfig | None = None
        self._bases: OrderedDict[tuple[str, ...], DictConfig] = OrderedDict()
        self._shapes: dict[tuple[str, ...], _Shape] = {}
        self._searchpath = False  # whether the master sets hydra.searchpath (then every run is fully composed)
        self._composed_for: DictConfig | None = None
        self._composed: dict[tuple[str, ...], DictConfig] = {}

    def load_sweep_config(self, master_config: DictConfig, sweep_overrides: list[str]) -> DictConfig:
        """The run's config, kept until :meth:`take` hands it over (the sweeper composes every run of a
        batch to check it before launching; the launcher then takes that config instead of a second)."""
        split = self._split(master_config, sweep_overrides)
        if split is None:
            cfg = self.loader.load_sweep_config(master_config, sweep_overrides)
        else:
            try:
                cfg = self._compose(master_config, *split)
            except Exception:  # Hydra's full compose raises the error, in Hydra's words
                cfg = self.loader.load_sweep_config(master_config, sweep_overrides)
        if master_config is not self._composed_for:
            self._composed_for = master_config
            self._composed.clear()
        self._composed[tuple(sweep_overrides)] = cfg
        return cfg

    def check(self, master_config: DictConfig, sweep_overrides: list[str]) -> None:
        """What ``validate_batch_is_legal`` asks, cheaply: a run :meth:`plain` can describe is checked
        without composing it; any other run is composed (and kept for :meth:`take`), raising Hydra's error."""
        if self.plain(master_config, sweep_overrides, build=False) is None:
            self.load_sweep_config(master_config, sweep_overrides)

    def plain(self, master_config: DictConfig, sweep_overrides: list[str], build: bool = True
              ) -> tuple[dict[str, Any], dict[str, str], Recipe] | None:
        """The run's resolved task config (what :func:`task_config` gives for its composed config), its
        group choices (:func:`group_choices`) and how to compose it, without composing the run; ``None`` when that
        cannot be read off its shape (the run must be composed). ``build=False`` only says whether it can."""
        split = self._split(master_config, sweep_overrides)
        if split is None:
            return None
        parsed, groups, values = split
        shape = tuple(str(o.input_line) for o in groups)
        try:
            base = self._base(master_config, shape)
        except Exception:  # Hydra's full compose raises the error, in Hydra's words
            return None
        if shape not in self._shapes:
            self._shapes[shape] = _Shape.of(base)
        known = self._shapes[shape]
        if known.template is None or not all(known.plain_leaf(base, o) for o in values):
            return None
        value_ids = {id(o) for o in values}
        recipe = Recipe(shape, tuple(sweep_overrides), tuple(i for i, o in enumerate(parsed) if id(o) in value_ids))
        if not build:
            return {}, {}, recipe
        task = pickle.loads(known.template)
        for o in values:
            *parents, leaf = o.key_or_group.split(".")
            node = task
            for part in parents:
                node = node[part]
            node[leaf] = o.value()
        return task, known.choices, recipe

    def base(self, master_config: DictConfig, recipe: Recipe) -> DictConfig:
        """The composition a recipe starts from (read it, do not change it)."""
        return self._base(master_config, recipe.shape)

    def peek(self, master_config: DictConfig, sweep_overrides: list[str]) -> DictConfig:
        """The config kept for these overrides, still kept (read it, do not change it); composed and
        kept now if there is none."""
        if master_config is self._composed_for and tuple(sweep_overrides) in self._composed:
            return self._composed[tuple(sweep_overrides)]
        return self.load_sweep_config(master_config, sweep_overrides)

    def take(self, master_config: DictConfig, sweep_overrides: list[str]) -> DictConfig:
        """The config :meth:`load_sweep_config` last gave for these overrides (no longer kept: the
        caller may change it), composed now if it gave none since."""
        if master_config is self._composed_for and tuple(sweep_overrides) in self._composed:
            return self._composed.pop(tuple(sweep_overrides))
        self.load_sweep_config(master_config, sweep_overrides)
        return self._composed.pop(tuple(sweep_overrides))

    def forget(self) -> None:
        """Drop the configs composed but not taken (e.g. a sweeper's own look at a run)."""
        self._composed.clear()

    def _split(self, master: DictConfig, overrides: list[str]
               ) -> tuple[list[Override], list[Override], list[Override]] | None:
        """All parsed overrides, the group ones and the value ones; ``None``: needs the full compose."""
        self._use(master)
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
        """One override, parsed once per sweep (Hydra's grammar parser took a quarter of a run's compose;
        ``policy=easy`` recurs in every run). Overrides are parsed one by one, so this is Hydra's parse."""
        if text not in self._parsed:
            if len(self._parsed) >= self.max_parsed:
                self._parsed.clear()
            self._parsed[text] = parse_override(text)
        return self._parsed[text]

    def _compose(self, master: DictConfig, parsed: list[Override], groups: list[Override],
                 values: list[Override]) -> DictConfig:
        """The cached composition for ``groups``, then what Hydra does with the value overrides."""
        return apply_values(self._base(master, tuple(str(o.input_line) for o in groups)), master, parsed, values)

    def _base(self, master: DictConfig, group_overrides: tuple[str, ...]) -> DictConfig:
        """Hydra's composition with only the group overrides (the ``max_bases`` last used are kept)."""
        self._use(master)
        if group_overrides in self._bases:
            self._bases.move_to_end(group_overrides)
        else:
            self._bases[group_overrides] = self.loader.load_sweep_config(master, list(group_overrides))
            if len(self._bases) > self.max_bases:
                self._shapes.pop(self._bases.popitem(last=False)[0], None)
        return self._bases[group_overrides]

    def _use(self, master: DictConfig) -> None:
        """Key what is known per master config to ``master``: a new one starts afresh."""
        if master is not self._master:
            self._master = master
            self._bases.clear()
            self._shapes.clear()
            self._searchpath = bool(OmegaConf.select(master, "hydra.searchpath"))

    # -- the rest of the ConfigLoader interface, delegated -------------------------------------
    def load_configuration(self, config_name: str | None, overrides: list[str], run_mode: RunMode,
                           from_shell: bool = True, validate_sweep_overrides: bool = True) -> DictConfig:
        return self.loader.load_configuration(config_name, overrides, run_mode, from_shell, validate_sweep_overrides)

    def get_search_path(self) -> ConfigSearchPath:
        return self.loader.get_search_path()

    def get_sources(self) -> list[ConfigSource]:
        return self.loader.get_sources()

    def list_groups(self, parent_name: str) -> list[str]:
        return self.loader.list_groups(parent_name)

    def get_group_options(self, group_name: str, results_filter: ObjectType | None = ObjectType.CONFIG,
                          config_name: str | None = None, overrides: list[str] | None = None) -> list[str]:
        return self.loader.get_group_options(group_name, results_filter, config_name, overrides)

    def compute_defaults_list(self, config_name: str | None, overrides: list[str], run_mode: RunMode) -> Any:
        return self.loader.compute_defaults_list(config_name, overrides, run_mode)
