"""The launcher's work: start or join Ray, submit planned runs, gather them with ``ray.wait`` as they finish."""

import json
import logging
import pickle
import socket
import time
import traceback
from collections.abc import Callable
from typing import Any

import ray
from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus, filter_overrides, run_job, setup_globals
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from hydra_plugins.schedlab_ray_launcher import _checks
from hydra_plugins.schedlab_ray_launcher._progress import Progress
from hydra_plugins.schedlab_ray_launcher._reaper import Reaper
from hydra_plugins.schedlab_ray_launcher.batch import (
    PlannedRun,
    RunFailedError,
    RunReport,
    Sink,
    SweepAbortedError,
    SweepStats,
)
from sweeps._hydra import (
    Recipe,
    RunReturn,
    finish,
    job_error,
    set_singleton_state,
    singleton_state,
)
from sweeps.planner import task_config

log = logging.getLogger(__name__)


def failed_error(stats: SweepStats) -> RunFailedError:
    """What a failed run's JobReturn raises: how many failed, the first, and whether any completed."""
    first = stats.failures[0]
    rest = "the others completed" if stats.done + stats.skipped else "none completed"
    return RunFailedError(f"{stats.failed} of {stats.total} runs failed (first: #{first.run.index}, "
                          f"{first.error}); {rest}")


def preflight(options: dict[str, Any]) -> str | None:
    """Check the launcher options; the reachable ``HOST:PORT`` of the cluster to join, ``None`` for a
    local instance (or a Ray this process already runs)."""
    _checks.check_options(options, _checks.usable_cpus().count)
    address = str(options.get("address") or "local")
    if ray.is_initialized() or address == "local":
        return None
    resolved = _checks.resolve_address(address)
    _checks.probe(resolved)
    return resolved


def connect(options: dict[str, Any], address: str | None, runtime_env: dict[str, Any]) -> bool:
    """Start a local Ray (``address`` None) or join ``address``, saying which (it takes seconds); True when
    we started or joined it (and must shut it down). Joining a cluster, ``runtime_env`` (code its nodes may
    lack) is merged into the launcher's ``init.runtime_env``; a local instance's workers inherit this
    process's environment."""
    if ray.is_initialized():
        return False
    init = options.get("init") or {}
    extra = dict(OmegaConf.to_container(init, resolve=True) if isinstance(init, DictConfig) else init)
    if address is not None and runtime_env:
        merged = dict(extra.get("runtime_env") or {})
        for key, value in runtime_env.items():
            merged[key] = [*merged.get(key, []), *value] if isinstance(value, list) else value
        extra["runtime_env"] = merged
    extra.setdefault("log_to_driver", True)
    extra.setdefault("logging_level", logging.WARNING)
    if address is None:
        local = dict(options.get("local") or {})
        num_cpus = local.pop("num_cpus", None)
        if num_cpus:
            size = f"{num_cpus} CPU{'s' if num_cpus != 1 else ''}"
        else:
            usable = _checks.usable_cpus()
            num_cpus, size = usable.count, str(usable)
        print(f"starting a local Ray instance ({size})…", flush=True)
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
    """``ray.init(**kwargs)``; Ray's own failure to start or join stops the sweep with one line."""
    try:
        return ray.init(**kwargs)
    except Exception as error:  # Ray raises a bare Exception for start-up timeouts
        ray.shutdown()  # whatever half started
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise SweepAbortedError(f"{what}: {reason}; nothing was run (rerun to resume)") from None


def write_stats(path: Any, stats: SweepStats, timings: dict[str, float]) -> None:
    """Counts and phase timings (seconds) of a batch, for benchmarks and post-mortems."""
    counts = {k: getattr(stats, k) for k in ("total", "done", "failed", "skipped", "not_run", "interrupted", "stopped")}
    path.write_text(json.dumps({**counts, "seconds": stats.seconds, "timings": timings}, indent=1))


def run(options: dict[str, Any], task_function: TaskFunction, hydra_context: HydraContext, config: DictConfig,
        sweep_dir: str, todo: list[PlannedRun], sink: Sink | None, base: Callable[[tuple[str, ...]], DictConfig],
        stats: SweepStats, returns: dict[int, JobReturn], timings: dict[str, float]) -> None:
    """Submit the runs (at most ``max_in_flight`` at once), gather them as they finish; a KeyboardInterrupt
    ends it with ``stats.interrupted`` (the runs in flight are cancelled)."""
    num_cpus = float(options.get("num_cpus", 1.0))
    slots = max(1, int(ray.cluster_resources().get("CPU", 1) // num_cpus))
    limit = int(options.get("max_in_flight") or 2 * slots)
    remote = ray.remote(_execute).options(num_cpus=num_cpus, max_retries=int(options.get("max_retries", 3)),
                                          retry_exceptions=False)
    shared = [ray.put((task_function, hydra_context.callbacks, singleton_state(), config))]  # a list: not resolved
    bases: dict[tuple[str, ...], ray.ObjectRef] = {}  # shape → its composition, once in the object store
    log.info(f"Launching {len(todo)} jobs on Ray ({slots} slots)")
    pending = list(reversed(todo))
    in_flight: dict[ray.ObjectRef, PlannedRun] = {}
    progress = Progress(len(todo), stats, enabled=bool(options.get("progress", True)))
    tic, slot_seconds = time.perf_counter(), 0.0
    try:
        while pending or in_flight:
            while pending and len(in_flight) < limit:
                run = pending.pop()
                instead = sink.start(run) if sink is not None else None
                if instead is not None:  # e.g. another sweep started it meanwhile
                    returns[run.index] = skipped_return(run, instead, config)
                    stats.skipped += 1
                    progress.advance()
                    continue
                record = sink.recorder(run) if sink is not None else None
                if run.recipe is not None:  # the worker composes it from its shape's composition
                    if run.recipe.shape not in bases:
                        bases[run.recipe.shape] = ray.put(base(run.recipe.shape))
                    config_or_recipe, shape = run.recipe, [bases[run.recipe.shape]]
                else:
                    config_or_recipe, shape = run.composed(), []
                    run.release()  # the sweep keeps only the configs of runs not yet submitted
                # one C-pickled blob: Ray's cloudpickle visits each of a config's ~500 objects in Python
                plain = run.plain if run.recipe is not None else None  # a described run is checked on the worker
                job = pickle.dumps((config_or_recipe, run.index, record, plain), protocol=pickle.HIGHEST_PROTOCOL)
                in_flight[remote.remote(shared, job, shape, sweep_dir)] = run
            progress.update(running=min(len(in_flight), slots))
            if not in_flight:  # every run left was skipped as it was submitted
                continue
            ready, _ = ray.wait(list(in_flight), num_returns=1)
            for ref in ready:
                run = in_flight.pop(ref)
                report, ret = _collect(ref, run)
                slot_seconds += report.seconds
                _record(sink, report, stats)  # counted done only once the sink has recorded it
                skipped = report.status == "SKIPPED"  # its worker found it claimed or finished by another sweep
                returns[run.index] = skipped_return(run, report.value, config) if skipped else ret
                if skipped:
                    stats.skipped += 1
                elif report.status == "FINISHED":
                    stats.done += 1
                else:
                    stats.failed += 1
                    stats.failures.append(report)
                progress.advance()
    except KeyboardInterrupt:
        stats.interrupted = True
    finally:
        timings.update(runs=time.perf_counter() - tic, slots=slots, task_seconds=slot_seconds)
        for ref in in_flight:
            ray.cancel(ref, force=True)
        progress.close()


def skipped_return(run: PlannedRun, value: Any, config: DictConfig) -> JobReturn:
    """The JobReturn of a run not run here: COMPLETED, returning ``value`` (its configs made on first read)."""
    return RunReturn(run.composed, value, overrides=list(filter_overrides(run.overrides)),
                     task_name=OmegaConf.select(config, "hydra.job.name"), status=JobStatus.COMPLETED)


def _record(sink: Sink | None, report: RunReport, stats: SweepStats) -> None:
    """Hand a result to the sink; when it (or its recorder on the worker) cannot record it, stop the sweep
    (the next would fail too)."""
    why, cause = report.record_error, None
    if why is None:
        if sink is None:
            return
        try:
            sink.on_result(report)
            return
        except Exception as error:
            why, cause = one_line(error), error
    stats.stopped = f"run #{report.run.index} ({report.run.label}) ended but could not be recorded: {why}"
    raise SweepAbortedError(f"sweep stopped: {stats.stopped}; runs recorded before it are kept, rerun the "
                            f"same command to resume") from cause


def _collect(ref: ray.ObjectRef, run: PlannedRun) -> tuple[RunReport, JobReturn]:
    """Turn a finished Ray task (or its death after all retries) into a report and a JobReturn."""
    try:
        report, ret = ray.get(ref)
    except Exception as e:  # raised outside the task function, the worker died max_retries + 1 times, …
        now, cause = time.time(), getattr(e, "cause", None)  # a RayTaskError's first line names only the task
        report = RunReport(run=run, status="FAILED", error=one_line(cause if isinstance(cause, Exception) else e),
                           traceback=str(e), start_time=now, end_time=now)
        ret = JobReturn(status=JobStatus.FAILED)
        ret.return_value = e
    report.run = run
    status = JobStatus.FAILED if report.status == "FAILED" else ret.status
    value = ret.return_value if ret.status == JobStatus.COMPLETED else job_error(ret)
    return report, RunReturn(run.composed, value, overrides=run.overrides if ret.overrides is None else ret.overrides,
                             working_dir=ret.working_dir, task_name=ret.task_name, status=status)


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
    state in ``shared``), its index, its recorder (whose ``start()`` may skip the run) and the plain
    config the driver planned it with (checked before it runs).
    """
    task_function, callbacks, state, master = _fetch(shared[0])
    config_or_recipe, index, record, plain = pickle.loads(job)
    setup_globals()
    set_singleton_state(state)
    if isinstance(config_or_recipe, Recipe):
        cfg = finish(config_or_recipe.compose(_fetch(base[0]), master), index, sweep_dir)
    else:
        cfg = config_or_recipe
    if plain is not None:
        _check_planned(cfg, plain)
    instead = record.start() if record is not None else None
    if instead is not None:
        return RunReport(run=None, status="SKIPPED", value=instead), JobReturn(status=JobStatus.COMPLETED)
    ctx = ray.get_runtime_context()
    start, tic = time.time(), time.perf_counter()
    ret = run_job(hydra_context=HydraContext(config_loader=None, callbacks=callbacks), task_function=task_function,
                  config=cfg, job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")
    report = RunReport(run=None, status="FINISHED", seconds=time.perf_counter() - tic, start_time=start,
                       end_time=time.time(), node_id=ctx.get_node_id(),
                       node_ip=ray.util.get_node_ip_address() or socket.gethostname())
    ret.hydra_cfg = ret.cfg = None  # the driver has them; keep the transfer small
    if ret.status == JobStatus.COMPLETED:
        report.value = ret.return_value
    else:
        failed(report, job_error(ret))
        ret.return_value = RuntimeError(report.error)  # tracebacks do not cross processes
    if record is not None:
        try:
            report.recorded = record(report)
        except Exception as error:
            report.record_error = one_line(error)
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


def failed(report: RunReport, exc: BaseException) -> None:
    """Mark ``report`` FAILED by ``exc``: its one-line error and its traceback."""
    report.status, report.error = "FAILED", one_line(exc)
    report.traceback = "".join(traceback.format_exception(exc))


def one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0][:500] if text else type(exc).__name__


def finish_returns(stats: SweepStats, returns: dict[int, JobReturn], runs: list[PlannedRun]) -> list[JobReturn]:
    """A batch's JobReturns in job order, once its summary is printed: Ctrl-C exits 130; a failed run's
    JobReturn raises :class:`RunFailedError` (how many failed) when its value is read."""
    if stats.interrupted:
        raise SystemExit(130)
    if stats.failed:
        error = failed_error(stats)
        for ret in returns.values():
            if ret.status == JobStatus.FAILED:
                ret.return_value = error
    return [returns[r.index] for r in runs]
