"""The launcher's work: compose on the driver, run on Ray, gather with ``ray.wait``."""

import functools
import json
import logging
import os
import pickle
import socket
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ray
from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, run_job, setup_globals
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict, read_write

from hydra_plugins.schedlab_ray_launcher import _checks
from hydra_plugins.schedlab_ray_launcher._compose import CachingConfigLoader, Recipe, task_config
from hydra_plugins.schedlab_ray_launcher._progress import Progress, print_summary
from hydra_plugins.schedlab_ray_launcher._reaper import Reaper
from hydra_plugins.schedlab_ray_launcher.hooks import (
    NullHook,
    PlannedRun,
    RunFailedError,
    RunReport,
    SweepAbortedError,
    SweepHook,
    SweepStats,
)

log = logging.getLogger(__name__)


def launch(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[JobReturn]:
    """Run one batch of jobs; return their JobReturns in job order (failed ones as FAILED)."""
    setup_globals()
    config, hydra_context = launcher.config, launcher.hydra_context
    options = launcher.options
    address = _preflight(options)  # bad options, no cluster: refused before anything is composed or started
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    sweep_dir = Path(str(config.hydra.sweep.dir)).absolute()
    sweep_dir.mkdir(parents=True, exist_ok=True)

    tic = time.perf_counter()
    runs = [_planned(hydra_context, config, list(ov), initial_job_idx + i, sweep_dir)
            for i, ov in enumerate(job_overrides)]
    if isinstance(hydra_context.config_loader, CachingConfigLoader):
        hydra_context.config_loader.forget()
    timings = {"compose": time.perf_counter() - tic}
    hook: SweepHook = options.get("hook") or NullHook()
    tic = time.perf_counter()
    hook.validate(config, runs)  # nothing has started yet: an invalid run stops the sweep here
    timings["prepare"] = time.perf_counter() - tic

    stats = SweepStats(total=len(runs))
    returns: dict[int, JobReturn] = {}
    tic = time.perf_counter()
    try:
        _plan_and_run(options, address, launcher.task_function, hydra_context, config, sweep_dir, runs, stats, returns,
                      hook, timings)
    except KeyboardInterrupt:
        stats.interrupted = True
    except SweepAbortedError as error:
        stats.stopped = stats.stopped or str(error)
        raise
    finally:
        stats.seconds = time.perf_counter() - tic
        _write_stats(sweep_dir / f"sweep-{initial_job_idx}.json", stats, timings)
        print_summary(stats)
        hook.finish(stats)
    if stats.interrupted:
        raise SystemExit(130)
    if stats.failed:
        error = failed_error(stats)
        for ret in returns.values():
            if ret.status == JobStatus.FAILED:
                ret.return_value = error
    return [returns[r.index] for r in runs]


def failed_error(stats: SweepStats) -> RunFailedError:
    """What a failed run's JobReturn raises: how many failed, the first, and whether any completed."""
    first = stats.failures[0]
    rest = "the others completed" if stats.done + stats.skipped else "none completed"
    return RunFailedError(f"{stats.failed} of {stats.total} runs failed (first: #{first.run.index}, "
                          f"{first.error}); {rest}")


def _write_stats(path: Path, stats: SweepStats, timings: dict[str, float]) -> None:
    """Counts and phase timings (seconds) of the batch, for benchmarks and post-mortems."""
    counts = {k: getattr(stats, k) for k in ("total", "done", "failed", "skipped", "not_run", "interrupted")}
    path.write_text(json.dumps({**counts, "seconds": stats.seconds, "timings": timings}, indent=1))


def _planned(hydra_context: HydraContext, config: DictConfig, overrides: list[str], idx: int,
             sweep_dir: Path) -> PlannedRun:
    """One run of the batch: described as plain data when the composition cache can
    (:meth:`CachingConfigLoader.plain`: composed by the worker that runs it, on the driver only when
    something reads its config), else composed now."""
    build = functools.partial(_compose, hydra_context, config, overrides, idx, sweep_dir)
    run = PlannedRun(index=idx, overrides=list(filter_overrides(overrides)), config=None, build=build)
    loader = hydra_context.config_loader
    plain = loader.plain(config, overrides) if isinstance(loader, CachingConfigLoader) else None
    if plain is None:
        run.composed()
    else:
        run.plain, run.choices, run.recipe = plain
    return run


def _compose(hydra_context: HydraContext, config: DictConfig, overrides: list[str], idx: int,
             sweep_dir: Path) -> DictConfig:
    """Compose and resolve one run on the driver, so interpolations see the driver's paths.

    The config the sweeper composed to check the run is reused when the loader kept it
    (:meth:`CachingConfigLoader.take`). ``${hydra:…}`` resolves against this run's ``hydra`` node:
    what ``HydraConfig.set_config`` does, without its copy of that node (a third of the cost).
    """
    loader = hydra_context.config_loader
    cfg = loader.take(config, overrides) if isinstance(loader, CachingConfigLoader) else \
        loader.load_sweep_config(config, overrides)
    return _finish(cfg, idx, sweep_dir)


def _finish(cfg: DictConfig, idx: int, sweep_dir: Path) -> DictConfig:
    """Number a composed run, place it in the sweep directory and resolve its task part (the driver's
    last step for a run it composes, a worker's for one it composes from a recipe)."""
    with open_dict(cfg):
        cfg.hydra.job.id = idx
        cfg.hydra.job.num = idx
        cfg.hydra.sweep.dir = str(sweep_dir)
    OmegaConf.set_readonly(cfg.hydra, True)
    HydraConfig.instance().cfg = cfg
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
    """``cfg`` (slot 0) or ``hydra_cfg`` (slot 1) of a :class:`_RunReturn`: made on first read, replaceable."""

    def __init__(self, slot: int) -> None:
        self.slot = slot

    def __get__(self, ret: "_RunReturn | None", owner: type | None = None) -> Any:
        if ret is None:
            return self
        if ret._configs[self.slot] is None:
            make = _task_config if self.slot == 0 else _hydra_config
            ret._configs[self.slot] = make(ret._run.composed())
        return ret._configs[self.slot]

    def __set__(self, ret: "_RunReturn", value: DictConfig | None) -> None:
        if value is not None:  # JobReturn's __init__ sets None
            ret._configs[self.slot] = value


class _RunReturn(JobReturn):
    """A JobReturn with the configs Hydra's ``run_job`` gives, made on first access (a sweeper seldom
    reads them; copying two configs per run cost the driver milliseconds each): ``cfg`` is the task's
    config (no ``hydra`` node), ``hydra_cfg`` is ``{"hydra": …}`` for this job, interpolating into it."""

    cfg = _Config(0)  # type: ignore[assignment]
    hydra_cfg = _Config(1)  # type: ignore[assignment]

    def __init__(self, run: PlannedRun, **fields: Any) -> None:
        self._run, self._configs = run, [None, None]
        super().__init__(**fields)


def _task_config(config: DictConfig) -> DictConfig:
    cfg = OmegaConf.masked_copy(config, [str(k) for k in config if k != "hydra"])
    OmegaConf.set_struct(cfg, OmegaConf.is_struct(config))
    return cfg


def _hydra_config(config: DictConfig) -> DictConfig:
    hydra_cfg = OmegaConf.masked_copy(config, "hydra")
    hydra_cfg.hydra._set_parent(config)
    OmegaConf.set_readonly(hydra_cfg.hydra, True)
    return hydra_cfg


def _skipped_return(run: PlannedRun, reason: str) -> JobReturn:
    return _RunReturn(run, overrides=run.overrides, task_name=reason, status=JobStatus.COMPLETED)


def _preflight(options: dict[str, Any]) -> str | None:
    """Check the launcher options; the reachable ``HOST:PORT`` of the cluster to join, ``None`` for a
    local instance (or a Ray this process already runs)."""
    _checks.check_options(options, _checks.machine_cpus())
    address = str(options.get("address") or "local")
    if ray.is_initialized() or address == "local":
        return None
    resolved = _checks.resolve_address(address)
    _checks.probe(resolved)
    return resolved


def _connect(options: dict[str, Any], address: str | None, runtime_env: dict[str, Any]) -> bool:
    """Start a local Ray (``address`` None) or join ``address``, saying which (it takes seconds); True
    when we started or joined it (and must shut it down). Joining a cluster, the hook's ``runtime_env``
    (code its nodes may lack) is merged into the launcher's ``init.runtime_env``; a local instance's
    workers inherit this process's environment."""
    if ray.is_initialized():
        return False
    init = options.get("init") or {}
    extra = dict(OmegaConf.to_container(init, resolve=True) if isinstance(init, DictConfig) else init)  # Ray: plain
    if address is not None and runtime_env:
        merged = dict(extra.get("runtime_env") or {})
        for key, value in runtime_env.items():
            merged[key] = [*merged.get(key, []), *value] if isinstance(value, list) else value
        extra["runtime_env"] = merged
    extra.setdefault("log_to_driver", True)
    extra.setdefault("logging_level", logging.WARNING)
    if address is None:
        local = dict(options.get("local") or {})
        num_cpus = local.pop("num_cpus", None) or _checks.machine_cpus()
        print(f"starting a local Ray instance ({num_cpus} CPU{'s' if num_cpus != 1 else ''})…", flush=True)
        context = _init("could not start a local Ray instance", address="local", num_cpus=num_cpus,
                        **{k: v for k, v in local.items() if v is not None}, **extra)
        global _REAPER
        _REAPER = Reaper(context.address_info["session_dir"])  # the instance ends with this process, even killed
        return True
    print(f"connecting to Ray at {address}…", flush=True)
    _init(f"could not join the Ray cluster at {address} (hydra.launcher.address)", address=address, **extra)
    try:
        _checks.check_feasible(float(options.get("num_cpus", 1.0)), ray.nodes(), address)
    except SweepAbortedError:
        ray.shutdown()
        raise
    return True


_REAPER: Reaper | None = None  # of the local instance this process started


def shutdown() -> None:
    """``ray.shutdown()``, telling the local instance's reaper that its end is no failure."""
    if _REAPER is not None:
        _REAPER.released()
    ray.shutdown()


def _init(what: str, **kwargs: Any) -> Any:
    """``ray.init(**kwargs)``, its context; Ray's own failure to start or join (a node timing out on an
    overloaded machine, a cluster refusing the driver) stops the sweep with one line instead of a traceback."""
    try:
        return ray.init(**kwargs)
    except Exception as error:  # Ray raises a bare Exception for start-up timeouts
        ray.shutdown()  # whatever half started
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise SweepAbortedError(f"{what}: {reason}; nothing was run (rerun to resume)") from None


def _plan_and_run(options: dict[str, Any], address: str | None, task_function: TaskFunction,
                  hydra_context: HydraContext, config: DictConfig, sweep_dir: Path,
                  runs: list[PlannedRun], stats: SweepStats, returns: dict[int, JobReturn], hook: SweepHook,
                  timings: dict[str, float]) -> None:
    """Plan (the tracking store's one lookup), then start Ray only when some run is left to do: a
    resume with nothing to do never starts it."""
    tic = time.perf_counter()
    todo = _apply_plan(type(hook).__name__, runs, _plan_result(hook, runs), stats, returns)
    timings["prepare"] += time.perf_counter() - tic
    if not todo:
        print(f"nothing to run: all {len(runs)} runs were recorded before or repeat another", flush=True)
        return
    print(f"planned {len(runs)} runs in {timings['compose'] + timings['prepare']:.1f} s: {len(todo)} to run"
          + (f", {stats.skipped} recorded before or repeating another" if stats.skipped else ""), flush=True)
    tic = time.perf_counter()
    started = _connect(options, address, hook.runtime_env())
    timings["ray_start"] = time.perf_counter() - tic
    try:
        _run_on_ray(options, task_function, hydra_context, config, sweep_dir, todo, stats, returns, hook, timings)
    finally:
        if started:
            tic = time.perf_counter()
            shutdown()
            timings["ray_stop"] = time.perf_counter() - tic


def _plan_result(hook: SweepHook, runs: list[PlannedRun]) -> Sequence[str | None]:
    """The hook's plan; its failure (e.g. a tracking store that cannot be read) as one message."""
    try:
        return hook.plan(runs)
    except SweepAbortedError:
        raise
    except Exception as error:
        raise SweepAbortedError(f"{type(hook).__name__} could not plan the sweep: {_one_line(error)}; "
                                f"nothing was run") from error


def _apply_plan(hook_name: str, runs: list[PlannedRun], skips: Sequence[str | None], stats: SweepStats,
                returns: dict[int, JobReturn]) -> list[PlannedRun]:
    """Record the runs the plan skips; return the others."""
    if len(skips) != len(runs):
        raise SweepAbortedError(f"{hook_name}.plan returned {len(skips)} decisions for {len(runs)} runs")
    todo = []
    for run, reason in zip(runs, skips, strict=True):
        if reason is None:
            todo.append(run)
        else:
            returns[run.index] = _skipped_return(run, reason)
            stats.skipped += 1
    return todo


def _run_on_ray(options: dict[str, Any], task_function: TaskFunction, hydra_context: HydraContext,
                config: DictConfig, sweep_dir: Path,
                todo: list[PlannedRun], stats: SweepStats, returns: dict[int, JobReturn], hook: SweepHook,
                timings: dict[str, float]) -> None:
    """Submit the runs (at most ``max_in_flight`` at once) and gather them as they finish."""
    num_cpus = float(options.get("num_cpus", 1.0))
    slots = max(1, int(ray.cluster_resources().get("CPU", 1) // num_cpus))
    limit = int(options.get("max_in_flight") or 2 * slots)
    remote = ray.remote(_execute).options(num_cpus=num_cpus, max_retries=int(options.get("max_retries", 3)),
                                          retry_exceptions=False)
    shared = [ray.put((task_function, hydra_context.callbacks, Singleton.get_state(), config))]  # a list: not resolved
    bases: dict[tuple[str, ...], ray.ObjectRef] = {}  # shape → its composition, once in the object store
    log.info(f"Launching {len(todo)} jobs on Ray ({slots} slots)")
    pending = list(reversed(todo))
    in_flight: dict[ray.ObjectRef, PlannedRun] = {}
    progress = Progress(len(todo), stats, enabled=bool(options.get("progress", True)))
    tic = time.perf_counter()
    slot_seconds = 0.0
    try:
        while pending or in_flight:
            while pending and len(in_flight) < limit:
                run = pending.pop()
                skip = hook.start(run)
                if skip is not None:  # e.g. another sweep started it meanwhile
                    returns[run.index] = _skipped_return(run, skip)
                    stats.skipped += 1
                    progress.advance()
                    continue
                record = hook.recorder(run)
                if run.recipe is not None:  # the worker composes it from its shape's composition
                    if run.recipe.shape not in bases:
                        bases[run.recipe.shape] = ray.put(hydra_context.config_loader.base(config, run.recipe))
                    config_or_recipe, base = run.recipe, [bases[run.recipe.shape]]
                else:
                    config_or_recipe, base = run.composed(), []
                    run.release()  # the sweep keeps only the configs of runs not yet submitted
                # one C-pickled blob: Ray's cloudpickle visits each of a config's ~500 objects in Python
                job = pickle.dumps((config_or_recipe, run.index, record, run.plain), protocol=pickle.HIGHEST_PROTOCOL)
                in_flight[remote.remote(shared, job, base, str(sweep_dir))] = run
            progress.update(running=min(len(in_flight), slots))
            if not in_flight:  # every run left was skipped as it was submitted
                continue
            ready, _ = ray.wait(list(in_flight), num_returns=1)
            for ref in ready:
                run = in_flight.pop(ref)
                report, ret = _collect(ref, run)
                slot_seconds += report.seconds
                _record(hook, report, stats)  # counted done only once the hook has recorded it
                returns[run.index] = ret
                if report.status == "FINISHED":
                    stats.done += 1
                else:
                    stats.failed += 1
                    stats.failures.append(report)
                progress.advance()
    finally:
        timings.update(runs=time.perf_counter() - tic, slots=slots, task_seconds=slot_seconds)
        for ref in in_flight:
            ray.cancel(ref, force=True)
        progress.close()


def _record(hook: SweepHook, report: RunReport, stats: SweepStats) -> None:
    """Hand a result to the hook; when it (or its recorder on the worker) cannot record it, stop the sweep
    (the next would fail too)."""
    why, cause = report.record_error, None
    if why is None:
        try:
            hook.on_result(report)
            return
        except Exception as error:
            why, cause = _one_line(error), error
    stats.stopped = (f"run #{report.run.index} ({report.run.label}) ended but {type(hook).__name__} could not "
                     f"record it: {why}")
    raise SweepAbortedError(f"sweep stopped: {stats.stopped}; runs recorded before it are kept, rerun the "
                            f"same command to resume") from cause


def _collect(ref: ray.ObjectRef, run: PlannedRun) -> tuple[RunReport, JobReturn]:
    """Turn a finished Ray task (or its death after all retries) into a report and a JobReturn."""
    try:
        report, ret = ray.get(ref)
    except Exception as e:  # the worker died max_retries + 1 times, or the result could not be unpickled
        now = time.time()
        report = RunReport(run=run, status="FAILED", error=_one_line(e), traceback=str(e), start_time=now,
                           end_time=now)
        ret = JobReturn(status=JobStatus.FAILED)
        ret.return_value = e
    report.run = run
    status = JobStatus.FAILED if report.status == "FAILED" else ret.status
    return report, _RunReturn(run, overrides=run.overrides if ret.overrides is None else ret.overrides,
                              working_dir=ret.working_dir, task_name=ret.task_name, status=status,
                              _return_value=ret._return_value)


_SHARED: dict[str, Any] = {}  # object id → what it holds, fetched once per worker process
MAX_SHARED = 64


def _fetch(ref: ray.ObjectRef) -> Any:
    key = ref.hex()
    if key not in _SHARED:
        if len(_SHARED) >= MAX_SHARED:
            _SHARED.clear()
        _SHARED[key] = ray.get(ref)
    return _SHARED[key]


def _execute(shared: list[ray.ObjectRef], job: bytes, base: list[ray.ObjectRef], sweep_dir: str
             ) -> tuple[RunReport, JobReturn]:
    """Ray task: run one job through Hydra's ``run_job`` in this worker, then record its report here.

    ``job`` pickles the run's composed config, or the :class:`Recipe` that composes it here from its
    shape's composition (``base``, fetched once per worker like the task function and Hydra's global
    state in ``shared``), its index, the hook's :meth:`~SweepHook.recorder` for it and the plain
    config the driver planned it with (checked before it runs).
    """
    task_function, callbacks, singleton_state, master = _fetch(shared[0])
    config_or_recipe, index, record, plain = pickle.loads(job)
    setup_globals()
    Singleton.set_state(singleton_state)
    if isinstance(config_or_recipe, Recipe):
        cfg = _finish(config_or_recipe.compose(_fetch(base[0]), master), index, Path(sweep_dir))
    else:
        cfg = config_or_recipe
    if plain is not None:
        _check_planned(cfg, plain)
    ctx = ray.get_runtime_context()
    start, tic = time.time(), time.perf_counter()
    ret = run_job(hydra_context=HydraContext(config_loader=None, callbacks=callbacks), task_function=task_function,
                  config=cfg, job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")
    seconds = time.perf_counter() - tic
    report = RunReport(run=None, status="FINISHED", seconds=seconds, start_time=start, end_time=time.time(),
                       node_id=ctx.get_node_id(), node_ip=ray.util.get_node_ip_address() or socket.gethostname())
    ret.hydra_cfg = ret.cfg = None  # the driver has them; keep the transfer small
    if ret.status == JobStatus.COMPLETED:
        report.value = ret.return_value
    else:
        exc = ret._return_value
        report.status = "FAILED"
        report.error = _one_line(exc)
        report.traceback = "".join(traceback.format_exception(exc))
        ret.return_value = RuntimeError(report.error)  # tracebacks do not cross processes
    if record is not None:
        try:
            report.recorded = record(report)
        except Exception as error:
            report.record_error = _one_line(error)
    return report, ret


def _check_planned(cfg: DictConfig, plain: dict[str, Any]) -> None:
    """Refuse to run a config that differs from the plain one the driver planned (and keyed and will
    record) the run with: the composition cache must never make a run compute something else."""
    HydraConfig.instance().cfg = cfg
    ours = task_config(cfg)
    if json.dumps(ours, sort_keys=True, default=str) != json.dumps(plain, sort_keys=True, default=str):
        keys = sorted(k for k in {*ours, *plain} if json.dumps(ours.get(k), sort_keys=True, default=str)
                      != json.dumps(plain.get(k), sort_keys=True, default=str))
        raise RuntimeError(f"the composed config differs from the one the driver planned the run with "
                           f"(keys {', '.join(keys)}): not run; a bug of the composition cache, please report it")


def _one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0][:500] if text else type(exc).__name__
