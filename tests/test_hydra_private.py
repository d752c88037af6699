"""sweeps/_hydra.py: the canaries of every private Hydra and OmegaConf API schedlab uses (each fails naming
the versions when a release changes it), and the composition cache built on them, which gives exactly what
Hydra's full compose gives, run by run."""

from __future__ import annotations

import dataclasses
import inspect
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import hydra
import omegaconf
import pytest
from hydra import initialize_config_dir
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper  # what Hydra's own sweeper hands a launcher
from hydra.core.config_loader import ConfigLoader
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn, JobStatus
from hydra.errors import ConfigCompositionException
from hydra.types import HydraContext, RunMode
from hypothesis import example, given, settings
from hypothesis import strategies as st
from omegaconf import AnyNode, DictConfig, ListConfig, OmegaConf, open_dict

from hydra_plugins.schedlab_ray_launcher.batch import Sweep
from sweeps import _hydra
from sweeps._hydra import (
    Composer,
    Described,
    check_planned,
    finish,
    group_choices,
    parse_override,
    task_config,
)
from sweeps.tracking import flatten, run_key
from tests.conftest import REPO

VERSIONS = f"Hydra {hydra.__version__}, OmegaConf {omegaconf.__version__}"


def canary(ok: bool, what: str) -> None:
    assert ok, f"{VERSIONS} changed {what}: update sweeps/_hydra.py (every private use is there)"


def test_canary_override_dirname() -> None:
    params = inspect.signature(_hydra.get_overrides_dirname).parameters
    canary(list(params) == ["overrides", "exclude_keys", "item_sep", "kv_sep"],
           "hydra._internal.config_loader_impl.get_overrides_dirname's parameters")
    text = _hydra.get_overrides_dirname(overrides=[parse_override("seed=3"), parse_override("a=b")],
                                        exclude_keys=["a"], item_sep=",", kv_sep="=")
    canary(text == "seed=3", "what get_overrides_dirname returns")


def test_canary_config_nodes() -> None:
    cfg = OmegaConf.create({"a": {"b": 1, "c": "${a.b}"}, "n": None})
    canary(type(cfg._get_node("a")._get_node("b")) is AnyNode, "DictConfig._get_node / AnyNode")
    canary(cfg._get_node("a")._get_node("c")._is_interpolation() and cfg._get_node("n")._is_none(),
           "Node._is_interpolation / _is_none")
    part = OmegaConf.masked_copy(cfg, "a")
    part.a._set_parent(cfg)
    canary(part.a.c == 1, "Node._set_parent")
    other = OmegaConf.create({"t": "${now:%f}"})
    OmegaConf.copy_cache(from_config=cfg, to_config=other)
    canary(OmegaConf.get_cache(other) == OmegaConf.get_cache(cfg), "OmegaConf.copy_cache")


def test_canary_job_return_and_singletons() -> None:
    ret = JobReturn(status=JobStatus.FAILED)
    ret.return_value = ValueError("x")
    canary(isinstance(_hydra.job_error(ret), ValueError), "JobReturn._return_value")
    state = _hydra.singleton_state()
    canary(isinstance(state, dict) and "instances" in state, "Singleton.get_state")
    _hydra.set_singleton_state(state)


def test_canary_callbacks_and_job_return_fields() -> None:
    """A launcher's runs notify the sweep's callbacks but schedlab's (``Callbacks.callbacks``), and a RunReturn
    sets JobReturn's fields itself (its ``__init__`` would set ``cfg``)."""
    from hydra._internal.callbacks import Callbacks

    from sweeps.callback import SchedlabCallback

    log = "hydra.experimental.callbacks.LogJobReturnCallback"
    callbacks = Callbacks(OmegaConf.create({"hydra": {"callbacks": {
        "s": {"_target_": "sweeps.callback.SchedlabCallback"}, "l": {"_target_": log}}}}))
    kept = _hydra.without_callback(callbacks, SchedlabCallback)
    canary([type(c).__name__ for c in kept.callbacks] == ["LogJobReturnCallback"] and len(callbacks.callbacks) == 2,
           "hydra._internal.callbacks.Callbacks.callbacks")
    fields = [f.name for f in dataclasses.fields(JobReturn)]
    canary(fields == ["overrides", "cfg", "hydra_cfg", "working_dir", "task_name", "status", "_return_value"],
           "JobReturn's fields")
    ret = _hydra.RunReturn(lambda: OmegaConf.create({"a": 1, "hydra": {"x": 2}}), 5, overrides=["a=1"],
                           working_dir=None, task_name="t", status=JobStatus.COMPLETED)
    assert ret.return_value == 5 and ret.cfg == {"a": 1} and ret.hydra_cfg.hydra.x == 2


CONF = REPO / "conf"


@pytest.fixture()
def loader() -> Iterator[ConfigLoader]:
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        yield GlobalHydra.instance().config_loader()
    GlobalHydra.instance().clear()


def master(loader: ConfigLoader, *overrides: str) -> DictConfig:
    """The multirun config a sweep starts from (``overrides``: the command line's)."""
    return loader.load_configuration("config", ["hydra.mode=MULTIRUN", *overrides], run_mode=RunMode.MULTIRUN)


#: seeds per cell in the per-run comparison (runs differing only in the seed compose alike; the paper
#: experiments have hundreds of runs at their own replications)
REPLICATIONS = 2


def shrunk(loader: ConfigLoader, experiment: str) -> list[str]:
    """``experiment=NAME``, with :data:`REPLICATIONS` seeds when the experiment counts replications."""
    args = [f"experiment={experiment}"]
    return [*args, f"replications={REPLICATIONS}"] if "replications" in master(loader, *args) else args


def sweep_jobs(loader: ConfigLoader, experiment: str) -> list[list[str]]:
    """Every run's overrides (at :data:`REPLICATIONS` seeds), as Hydra's basic sweeper hands them to the launcher."""
    args = shrunk(loader, experiment)
    params = [f"{k}={v}" for k, v in master(loader, *args).hydra.sweeper.params.items()] + args
    parsed = OverridesParser.create(config_loader=loader).parse_overrides(params)
    return [list(job) for job in BasicSweeper.split_arguments(parsed, None)[0]]


def nodes(cfg: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every node of a config with its path, depth first."""
    yield path, cfg
    if isinstance(cfg, DictConfig | ListConfig):
        keys = cfg.keys() if isinstance(cfg, DictConfig) else range(len(cfg))
        for key in keys:
            yield from nodes(cfg._get_node(key), f"{path}.{key}")


def assert_same(full: DictConfig, cached: DictConfig) -> None:
    """Same values, interpolations, node types and flags; same resolved task config."""
    assert OmegaConf.to_yaml(cached) == OmegaConf.to_yaml(full)
    for (path, a), (_, b) in zip(nodes(full), nodes(cached), strict=True):
        meta_a, meta_b = a._metadata, b._metadata
        assert (type(a), meta_a.ref_type, meta_a.object_type, meta_a.optional, meta_a.flags) == (
            type(b), meta_b.ref_type, meta_b.object_type, meta_b.optional, meta_b.flags), path
    assert resolved(cached) == resolved(full)


def resolved(cfg: DictConfig) -> dict[str, Any]:
    """The task part of a run config, resolved as the launcher resolves it."""
    HydraConfig.instance().set_config(cfg)
    return {k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v
            for k, v in cfg.items() if k != "hydra"}


def compose(loader: ConfigLoader | Composer, cfg: DictConfig, overrides: list[str]) -> DictConfig | str:
    """The composed run config (Hydra's, or the cache's), or the composition error as Hydra reports it."""
    try:
        return loader.load_sweep_config(cfg, overrides)
    except ConfigCompositionException as e:
        return f"{type(e).__name__}: {e}"


def assert_same_outcome(full: DictConfig | str, cached: DictConfig | str) -> None:
    if isinstance(full, str) or isinstance(cached, str):
        assert cached == full
    else:
        assert_same(full, cached)


#: runs per experiment checked beyond the first of each set of group choices in the default suite (a seeded
#: sample); ``make test-slow`` checks every run
SAMPLE = 6
EXPERIMENTS = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))


@pytest.mark.parametrize("every", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["sample", "every-run"])
@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_run_of_every_experiment_composes_as_hydra_does(loader: ConfigLoader, experiment: str,
                                                              every: bool) -> None:
    """The composition cache gives each run Hydra's own composition: the first run of each set of group
    choices (each a composition the cache keeps) and a seeded sample of the others — every run in
    ``make test-slow``."""
    cfg = master(loader, *shrunk(loader, experiment))
    cached = Composer(loader, cfg)
    jobs = sweep_jobs(loader, experiment)

    def shape(job: list[str]) -> tuple[str, ...]:
        return tuple(o for o in job if loader.repository.group_exists(o.split("=")[0]))

    groups = {shape(job) for job in jobs}
    if not every:
        firsts = list({shape(job): job for job in reversed(jobs)}.values())
        others = [job for job in jobs if job not in firsts]
        jobs = firsts + random.Random(experiment).sample(others, min(SAMPLE, len(others)))
    with mock.patch.object(loader, "load_sweep_config", wraps=loader.load_sweep_config) as hydra_compose:
        for job in jobs:
            full = loader.load_sweep_config(cfg, job)
            assert_same(full, cached.load_sweep_config(cfg, job))
            assert_same_plain(full, cached.describe(job))
    assert hydra_compose.call_count == len(jobs) + len(groups)  # one full compose per set of group choices
    assert all(cached.describe(job) is not None for job in jobs)  # no experiment needs a run composed


def assert_same_plain(full: DictConfig, plain: Described | None) -> None:
    """The cache's plain description of a run (when it has one) is the run's resolved task config, type
    for type, and its group choices."""
    if plain is not None:
        task, choices, _ = plain
        assert json.dumps(task, sort_keys=True) == json.dumps(resolved(full), sort_keys=True)
        assert choices == group_choices(full) and choices["policy"] == full.hydra.runtime.choices.policy


@pytest.mark.parametrize("overrides", [
    ["seed=3"],
    ["seed=1", "policy=fcfs", "policy.order=sjf"],
    ["policy=conservative", "cluster=hpc16", "seed=2", "workload.arrival_rate=0.02"],
    ["experiment=bench", "replications=7", "seed=${replications}"],
    ["replications=9", "seed=${replications}", "experiment_name=run-${seed}"],
    ["workload=swf", "workload.path=trace.swf", "cluster=from_trace"],
    ["engine={kill_at_limit:true}", "sweep.non_semantic=[tracking,sweep]", "experiment_name='a b'"],
    ["tracking=none", "engine.drop_oversized=true", "seed=0"],
])
def test_hand_written_overrides_compose_as_hydra_does(loader: ConfigLoader, overrides: list[str]) -> None:
    cfg = master(loader, "hydra.launcher.num_cpus=2")
    cached = Composer(loader, cfg)
    with mock.patch.object(loader, "load_sweep_config", wraps=loader.load_sweep_config) as hydra_compose:
        for order in ("ljf", "fcfs"):
            run = [*overrides, f"policy.order={order}"]
            full = loader.load_sweep_config(cfg, run)
            assert_same(full, cached.load_sweep_config(cfg, run))
            assert_same_plain(full, cached.describe(run))
    assert hydra_compose.call_count == 2 + 1  # the two full composes above, one for the cache


@pytest.mark.parametrize("overrides", [
    ["+extra=1"], ["++seed=4"], ["~sweep.force"], ["hydra.job.name=other", "seed=1"],
    ["policy@engine.policy=easy"], ["seed=1,2"],
])
def test_unusual_overrides_fall_back_to_the_full_compose(loader: ConfigLoader, overrides: list[str]) -> None:
    cfg = master(loader)
    cached = Composer(loader, cfg)
    with mock.patch.object(loader, "load_sweep_config", wraps=loader.load_sweep_config) as hydra_compose:
        assert_same_outcome(compose(loader, cfg, overrides), compose(cached, cfg, overrides))
    assert [c.args[1] for c in hydra_compose.call_args_list] == [overrides, overrides]  # ours, then the fallback


@pytest.mark.parametrize("overrides", [["policy=nosuch"], ["workload.arival_rate=3"], ["seed=1", "nosuch=3"]])
def test_composition_errors_read_as_hydra_words_them(loader: ConfigLoader, overrides: list[str]) -> None:
    cfg = master(loader)
    error = compose(loader, cfg, overrides)
    assert isinstance(error, str) and compose(Composer(loader, cfg), cfg, overrides) == error


def reference_task(loader: ConfigLoader, cfg: DictConfig, job: list[str], idx: int) -> dict[str, Any]:
    """What Hydra gives job ``idx``: its full compose, numbered and resolved as Hydra's basic launcher does."""
    run = loader.load_sweep_config(cfg, job)
    with open_dict(run):
        run.hydra.job.id = run.hydra.job.num = idx
    HydraConfig.instance().set_config(run)
    return task_config(run)


@pytest.mark.parametrize("params", [
    ["policy=easy,conservative", "cluster=hpc16,hpc128", "seed=range(0,3)",
     "workload.arrival_rate=choice(0.01,0.02)", "experiment_name=run-${seed}"],
    ["workload=drevt_csv", "workload.path=traces/t${seed}.csv", "seed=range(0,2)", "policy=fcfs,easy",
     "experiment_name=job-${hydra:job.num}"],
    ["policy=easy,conservative", "cluster=hpc16,hpc128", "seed=range(0,3)", "workload.jobs=30",
     "workload.arrival_rate=choice(0.01,0.02)", "experiment_name='plain values'"],
])
def test_every_launched_run_is_hydras_compose_field_by_field(loader: ConfigLoader, params: list[str],
                                                             tmp_path: Path) -> None:
    """The sweeper's path (plan each run, compose it as it is submitted, or on its worker from its recipe)
    gives each run the resolved config and run key of Hydra's own compose, both as the plain data it is
    planned with and as the config it runs with; one full compose per shape, and a run the cache
    describes as plain data is composed only when it runs."""
    cfg = master(loader, *params)
    parsed = OverridesParser.create(config_loader=loader).parse_overrides(params)
    jobs = [list(job) for job in BasicSweeper.split_arguments(parsed, None)[0]]
    plan = launcher_sweep(loader, cfg, tmp_path)
    cached = plan.composer.load_sweep_config
    with mock.patch.object(loader, "load_sweep_config", wraps=loader.load_sweep_config) as hydra_compose, \
            mock.patch.object(plan.composer, "load_sweep_config", wraps=cached) as cache_compose:
        runs = [plan.planned(job, i, describe=True) for i, job in enumerate(jobs)]
        described = [run.recipe is not None for run in runs]
        assert cache_compose.call_count == described.count(False)  # described runs: nothing composed yet
        configs = [task_config(run.composed()) for run in runs]  # as each is submitted
    shapes = {tuple(o for o in job if loader.repository.group_exists(o.split("=")[0])) for job in jobs}
    assert hydra_compose.call_count == len(shapes)
    assert cache_compose.call_count == len(jobs)
    assert all(described) == ("${" not in " ".join(params))  # interpolating overrides: composed runs
    keys = tuple(cfg.sweep.non_semantic)
    for i, (job, run, ours) in enumerate(zip(jobs, runs, configs, strict=True)):
        hydras = reference_task(loader, cfg, job, i)
        assert flatten(ours) == flatten(hydras), job
        assert run_key(ours, keys) == run_key(hydras, keys)
        assert json.dumps(run.plain, sort_keys=True) == json.dumps(hydras, sort_keys=True), job
        if run.recipe is not None:
            on_worker = finish(run.recipe.compose(plan.composer.shape(run.recipe.shape).blob, cfg), i, str(tmp_path))
            assert_same(run.composed(), on_worker)  # a worker composes it from the recipe as the driver does
            check_planned(on_worker, run.plain)  # what the worker checks before it runs it
    assert len({run_key(c, keys) for c in configs}) == len(jobs)
    if "${hydra:job.num}" in params[-1]:
        assert [c["experiment_name"] for c in configs] == [f"job-{i}" for i in range(len(jobs))]


def launcher_sweep(loader: ConfigLoader, cfg: DictConfig, folder: Path) -> Sweep:
    """The launcher's sweep over ``loader`` (nothing is launched here), as if schedlab's callback planned it."""
    with open_dict(cfg):
        cfg.hydra.sweep.dir = str(folder)
    return Sweep(HydraContext(config_loader=loader, callbacks=None), None, cfg, mock.Mock(spec=["close"]))


def test_a_worker_refuses_a_config_that_differs_from_the_planned_one(loader: ConfigLoader, tmp_path: Path) -> None:
    cfg, job = master(loader), ["policy=easy", "seed=3", "workload.jobs=30"]
    run = launcher_sweep(loader, cfg, tmp_path).planned(job, 0, describe=True)
    assert run.plain and run.recipe is not None and run.config is None
    wrong = {**run.plain, "workload": {**run.plain["workload"], "jobs": 31}}
    with pytest.raises(RuntimeError, match=r"differs from the one the driver planned the run with \(keys workload\)"):
        check_planned(run.composed(), wrong)
    run.release()
    assert run.config is None and task_config(run.composed())["workload"]["jobs"] == 30  # composed again


def test_any_sweepers_own_compose_goes_through_the_launchers_cache(loader: ConfigLoader, tmp_path: Path) -> None:
    """The launcher puts its cache in front of the loader of the HydraContext it shares with the sweeper (a
    private arrangement of Hydra's ``Plugins.instantiate_launcher``): Hydra's basic sweeper, which composes
    every job before launching it, then composes once per set of group choices, as Hydra's compose would."""
    cfg = master(loader, "policy=easy,fcfs", "seed=range(0,4)")
    with open_dict(cfg):
        cfg.hydra.sweep.dir = str(tmp_path)
    sweeper = Plugins.instance().instantiate_sweeper(  # Hydra's basic sweeper, conf/'s default, on the Ray launcher
        config=cfg, hydra_context=HydraContext(config_loader=loader, callbacks=None), task_function=lambda c: None)
    assert type(sweeper).__name__ == "BasicSweeper"
    canary(isinstance(sweeper.hydra_context.config_loader, Composer),
           "Plugins.instantiate_launcher: the launcher's HydraContext is no longer the sweeper's")
    jobs = [[f"policy={p}", f"seed={s}"] for p in ("easy", "fcfs") for s in range(4)]
    with mock.patch.object(loader, "load_sweep_config", wraps=loader.load_sweep_config) as hydra_compose:
        sweeper.validate_batch_is_legal(jobs)
        assert_same(loader.load_sweep_config(cfg, jobs[5]), sweeper.hydra_context.config_loader.load_sweep_config(
            cfg, jobs[5]))
    assert hydra_compose.call_count == 2 + 1  # one per shape, then ours above


_KEY = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}(\.[A-Za-z_][A-Za-z0-9_]{0,6}){0,3}", fullmatch=True)
_NUMBER_TEXT = st.one_of(st.integers(-10**20, 10**20).map(str),
                         st.floats(allow_nan=False, allow_infinity=False).map(repr),
                         st.from_regex(r"-?(0|[1-9][0-9]{0,4})\.[0-9]{1,25}", fullmatch=True))
_TEXT = st.one_of(st.builds(lambda k, v: f"{k}={v}", _KEY, _NUMBER_TEXT),
                  st.builds(lambda k, v: f"{k}={v}", _KEY, st.text("0123456789.-+_eE", min_size=1, max_size=8)))


def _as_hydra_parses(o: Override) -> tuple[Any, ...]:
    return (o.type, o.key_or_group, o.value_type, type(o._value), repr(o._value), o.package, o.input_line)


@settings(max_examples=500, deadline=None)
@given(_TEXT)
@example("true=1").via("a grammar keyword as key")
@example("x.null=-0.0").via("a grammar keyword as key, negative zero")
@example("inf.nan=007")
def test_a_number_override_is_read_as_hydras_grammar_parses_it(text: str) -> None:
    """The fast path for ``key=number`` gives Hydra's own parse, and anything else is Hydra's parse."""
    try:
        hydra = OverridesParser.create().parse_overrides([text])[0]
    except Exception as error:  # Hydra refuses it: so must we, in Hydra's words
        with pytest.raises(type(error)):
            parse_override(text)
        return
    assert _as_hydra_parses(parse_override(text)) == _as_hydra_parses(hydra)


def test_number_overrides_take_the_fast_path() -> None:
    """``seed=3`` and ``workload.arrival_rate=0.02`` do not go through Hydra's ANTLR parser; ``a=007``,
    ``a=1e-3`` and ``policy=easy`` do (and parse as Hydra parses them); each text is parsed once."""
    parse_override.cache_clear()
    with mock.patch.object(_hydra._PARSER, "parse_overrides", side_effect=AssertionError("slow path")):
        assert parse_override("seed=3")._value == 3
        assert parse_override("workload.arrival_rate=0.02")._value == 0.02
    for text in ("a=007", "a=1e-3", "policy=easy"):
        with mock.patch.object(_hydra._PARSER, "parse_overrides", wraps=_hydra._PARSER.parse_overrides) as slow:
            parse_override(text)
            parse_override(text)
        assert slow.call_count == 1, text
