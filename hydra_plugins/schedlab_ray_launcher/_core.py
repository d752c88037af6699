"""Ray's side of the launcher: start or join Ray (once per sweep), submit the runs of a batch, gather them
with ``ray.wait`` as they finish; :func:`_execute` is the Ray task, :func:`sweeps`' one run body in a worker."""

import contextlib
import functools
import logging
import os
import pickle
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import ray
from hydra.core.utils import setup_globals
from omegaconf import DictConfig, OmegaConf

from hydra_plugins.schedlab_ray_launcher import _checks
from hydra_plugins.schedlab_ray_launcher._reaper import Reaper
from hydra_plugins.schedlab_ray_launcher.batch import Batch, Progress, SweepAbortedError, execute
from sweeps._hydra import set_singleton_state, singleton_state
from sweeps.record import RunReport, one_line

log = logging.getLogger(__name__)


def connect(options: dict[str, Any], address: str | None, runtime_env: dict[str, Any]) -> bool:
    """Start a local Ray (``address`` None) or join ``address``, saying which (it takes seconds); True when
    we started or joined it (and must shut it down). Joining a cluster, ``runtime_env``'s ``py_modules`` (code
    its nodes may lack) join the launcher's ``init.runtime_env``; a local instance's workers inherit this
    process's environment."""
    if ray.is_initialized():
        return False
    init = options.get("init") or {}
    extra = dict(OmegaConf.to_container(init, resolve=True) if isinstance(init, DictConfig) else init)
    if address is not None and runtime_env:
        env = dict(extra.get("runtime_env") or {})
        extra["runtime_env"] = {**env, "py_modules": [*env.get("py_modules", []), *runtime_env["py_modules"]]}
    extra.setdefault("log_to_driver", True)
    extra.setdefault("logging_level", logging.WARNING)
    if address is None:
        local = dict(options.get("local") or {})
        num_cpus = local.pop("num_cpus", None)
        cpus = _checks.UsableCpus(num_cpus) if num_cpus else _checks.usable_cpus()
        print(f"starting a local Ray instance ({cpus})…", flush=True)
        context = _init("could not start a local Ray instance", address="local", num_cpus=cpus.count,
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


def _shutdown() -> None:
    """``ray.shutdown()``, telling the local instance's reaper that its end is no failure."""
    if _REAPER is not None:
        _REAPER.released()
    ray.shutdown()


_STARTING = False  # ray.init is starting a local instance: the processes it forks leave the driver's session


def _own_session() -> None:
    if _STARTING:
        with contextlib.suppress(OSError):  # already a session leader
            os.setsid()


os.register_at_fork(after_in_child=_own_session)  # Ray's Popen has a preexec_fn, so forks run it


def _init(what: str, **kwargs: Any) -> Any:
    """``ray.init(**kwargs)``; Ray's own failure to start or join stops the sweep with one line. The SIGTERM
    handler Ray sets (``sys.exit``: the batch would end without its summary) is replaced by the one before.
    A local instance's processes (GCS, raylet, its workers and agents) run in sessions of their own: a signal
    to the driver's process group (Ctrl-C in a terminal, ``timeout``, ``kill -TERM -PGID``) reaches the driver
    alone, which ends the sweep as for Ctrl-C and shuts Ray down itself."""
    global _STARTING
    before = signal.getsignal(signal.SIGTERM)
    _STARTING = kwargs.get("address") == "local"
    try:
        return ray.init(**kwargs)
    except Exception as error:  # Ray raises a bare Exception for start-up timeouts
        ray.shutdown()  # whatever half started
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise SweepAbortedError(f"{what}: {reason}; nothing was run (rerun to resume)") from None
    finally:
        _STARTING = False
        if before is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, before)


class RayExecutor:
    """``hydra/launcher=ray``: runs on a local Ray instance or a cluster, one Ray session for the whole sweep."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.options, self.started = options, False
        self.local = str(options.get("address") or "local") == "local"  # its workers see the driver's store
        self.address: str | None = None  # the cluster preflight found (None: a local instance)

    def preflight(self) -> None:
        """Check the launcher options and find the reachable ``HOST:PORT`` of the cluster to join (``None``: a
        local instance, or a Ray this process already runs)."""
        _checks.check_options(self.options, _checks.usable_cpus().count)
        if not ray.is_initialized() and not self.local:
            self.address = _checks.resolve_address(str(self.options["address"]))
            _checks.probe(self.address)

    def run(self, sweep: Any, batch: Batch, runtime_env: dict[str, Any]) -> None:
        tic = time.perf_counter()
        if not self.started:
            self.started = connect(self.options, self.address, runtime_env)
        batch.timings["ray_start"] = time.perf_counter() - tic
        tic = time.perf_counter()
        try:
            gather(self.options, sweep, batch)
        finally:
            batch.stats.seconds += time.perf_counter() - tic
            batch.timings["runs"] = time.perf_counter() - tic

    def close(self) -> None:
        """End the Ray session this launcher started or joined (none: nothing to do), telling the local instance's
        reaper that its end is no failure."""
        if self.started:
            self.started = False
            _shutdown()


def gather(options: dict[str, Any], sweep: Any, batch: Batch) -> None:
    """Submit the batch's runs (at most ``max_in_flight`` at once), gather them as they finish; a
    KeyboardInterrupt propagates once the runs in flight are cancelled."""
    num_cpus = float(options.get("num_cpus", 1.0))
    slots = max(1, int(ray.cluster_resources().get("CPU", 1) // num_cpus))
    limit = int(options.get("max_in_flight") or 2 * slots)
    remote = ray.remote(_execute).options(num_cpus=num_cpus, max_retries=int(options.get("max_retries", 3)),
                                          retry_exceptions=False)
    shared = [ray.put((sweep.task_function, sweep.callbacks, singleton_state(), sweep.config, sweep.run_timeout))]
    bases: dict[tuple[str, ...], ray.ObjectRef] = {}  # shape → its composition, once in the object store
    batch.timings["slots"] = slots
    log.info(f"Launching {len(batch.todo)} jobs on Ray ({slots} slots)")
    pending = list(reversed(batch.todo))
    in_flight: dict[ray.ObjectRef, Any] = {}
    progress = Progress(len(batch.todo), batch.stats, enabled=bool(options.get("progress", True)))
    try:
        while pending or in_flight:
            while pending and len(in_flight) < limit:
                run = pending.pop()
                job = batch.submit(run)
                if job is None:  # e.g. another sweep claimed it meanwhile
                    progress.show(done=1)
                    continue
                shape = []
                if run.recipe is not None:  # the worker composes it from its shape's composition
                    if run.recipe.shape not in bases:
                        bases[run.recipe.shape] = ray.put(sweep.base(run.recipe))
                    shape = [bases[run.recipe.shape]]
                # one C-pickled blob: Ray's cloudpickle visits each of a config's ~500 objects in Python
                blob = pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL)
                in_flight[remote.remote(shared, blob, shape, sweep.sweep_dir)] = run
            progress.show(running=min(len(in_flight), slots))
            if not in_flight:  # every run left was skipped as it was submitted
                continue
            ready, _ = ray.wait(list(in_flight), num_returns=1)
            for ref in ready:
                try:
                    report = ray.get(ref)
                except Exception as e:  # raised outside the task function, the worker died max_retries + 1 times, …
                    report = RunReport.crashed(e)
                    cause = getattr(e, "cause", None)  # a RayTaskError's first line names only the task
                    if isinstance(cause, Exception):
                        report.error = one_line(cause)
                batch.ended(in_flight.pop(ref), report)
                progress.show(done=1)
    finally:
        progress.close()
        if in_flight:
            _stop(list(in_flight))


def _stop(runs: list[ray.ObjectRef]) -> None:
    """End the runs still in flight when a batch is interrupted: the local instance this process started ends
    with them (a forced ``ray.cancel`` can race a run's reply, and Ray 2.60 then ends the driver from C++:
    task_manager.cc "Tried to complete task that was not pending"); a joined cluster's are force-cancelled."""
    if _REAPER is None:
        for ref in runs:
            ray.cancel(ref, force=True)
        return
    with _quiet_fd2():
        _shutdown()


@contextlib.contextmanager
def _quiet_fd2() -> Iterator[None]:
    """Ray's core worker logs each run it drops at shutdown on file descriptor 2 ("Failed to push error to
    driver", 2 of 16 interrupts): after the sweep's own summary that is noise, and the session's logs keep it."""
    sys.stderr.flush()
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


_SHARED: dict[str, Any] = {}  # object id → what it holds, fetched once per worker process
MAX_SHARED = 64


def _fetch(ref: ray.ObjectRef) -> Any:
    key = ref.hex()
    if key not in _SHARED:
        if len(_SHARED) >= MAX_SHARED:
            _SHARED.clear()
        _SHARED[key] = ray.get(ref)
    return _SHARED[key]


def _execute(shared: list[ray.ObjectRef], blob: bytes, base: list[ray.ObjectRef], sweep_dir: str) -> RunReport:
    """Ray task: one run's :class:`sweeps.record.RunRecord` (pickled in ``blob``) through :func:`~.batch.execute`
    in this worker. The task function, callbacks, Hydra's global state and the sweep's config (``shared``) and a
    recipe's shape composition (``base``) are fetched once per worker."""
    task_function, callbacks, state, master, limit = _fetch(shared[0])  # a list: Ray does not resolve it
    record = pickle.loads(blob)
    setup_globals()
    set_singleton_state(state)
    node_ip = ray.util.get_node_ip_address() or ""
    return execute(record, functools.partial(_fetch, *base), master, sweep_dir, task_function,
                   callbacks, ray.get_runtime_context().get_node_id(), node_ip, limit)
