"""The launcher's options and the Ray it will use, checked before anything starts.

A bad option or an unreachable cluster ends the sweep in about a second with one message naming the
option and the fix, instead of a Ray ``ValueError`` after Ray started, or a ``ray.init`` that waits
for a cluster that is not there (it retries for minutes) or for CPUs no node has (forever).
"""

import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra_plugins.schedlab_ray_launcher.batch import SweepAbortedError

#: Ray refuses an object store smaller than this (bytes)
MIN_OBJECT_STORE = 78_643_200
PROBE_SECONDS = 3.0
HEAD_HINT = "start one with `ray start --head --port=6379` and pass its HOST:PORT, or use hydra.launcher.address=local"


@dataclass(frozen=True)
class UsableCpus:
    """The CPUs this process may run on (what a local Ray instance gets when ``local.num_cpus`` is null),
    and what limits them below the machine's when something does."""

    count: int
    limit: str = ""  # e.g. "its CPU affinity (taskset, a SLURM allocation)"

    def __str__(self) -> str:
        machine = os.cpu_count() or 1
        cpus = f"{self.count} CPU{'s' if self.count != 1 else ''}"
        return f"{cpus}: {self.limit} of the machine's {machine}" if self.limit else cpus


def usable_cpus(cgroup_root: Path = Path("/sys/fs/cgroup"), proc_cgroup: Path = Path("/proc/self/cgroup")
                ) -> UsableCpus:
    """The CPUs this process may use: its affinity mask (``taskset``, the cpuset of a SLURM allocation or a
    container), capped by the CPU quota of its cgroup (``docker --cpus``, SLURM with ConstrainCores off but a
    quota), rounded down, at least 1 — not the node's core count, which would oversubscribe the allocation
    and distort every wall-clock metric."""
    machine = os.cpu_count() or 1
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else machine
    quota = cgroup_quota(cgroup_root, proc_cgroup)
    if quota is not None and int(quota) < affinity:
        return UsableCpus(max(1, int(quota)), f"its cgroup's CPU quota ({quota:g} CPUs)")
    if affinity < machine:
        return UsableCpus(affinity, "the CPUs it may run on (its CPU affinity: taskset, a SLURM allocation)")
    return UsableCpus(affinity)


def cgroup_quota(root: Path, proc_cgroup: Path) -> float | None:
    """The tightest CPU quota (in CPUs) on this process's cgroup or an ancestor: ``cpu.max`` of cgroup v2,
    ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` of v1; ``None`` when there is none or it cannot be read."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    quotas = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2: one hierarchy
            folders, read = _ancestors(root, path), _v2_quota
        elif "cpu" in controllers.split(","):
            folders, read = _ancestors(root / controllers, path), _v1_quota
        else:
            continue
        quotas += [q for folder in folders if (q := read(folder)) is not None]
    return min(quotas, default=None)


def _ancestors(base: Path, path: str) -> list[Path]:
    parts = [p for p in path.split("/") if p]
    return [base.joinpath(*parts[:i]) for i in range(len(parts), -1, -1)]


def _v2_quota(folder: Path) -> float | None:
    try:
        quota, period = (folder / "cpu.max").read_text().split()
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        return None


def _v1_quota(folder: Path) -> float | None:
    try:
        quota = int((folder / "cpu.cfs_quota_us").read_text())
        return None if quota < 0 else quota / int((folder / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None


def check_options(options: Mapping[str, Any], cpus: int) -> None:
    """Refuse option values Ray would reject or never satisfy; ``cpus``: the CPUs this process may use.

    A local Ray instance may not have more CPUs than this process may use (oversubscribed runs would
    slow one another down and distort their timings), and one run may not reserve more CPUs than the
    Ray instance it would run on has (Ray would wait forever for them).

    >>> try:
    ...     check_options({"max_retries": -5}, cpus=2)
    ... except SweepAbortedError as error:
    ...     print(str(error).split(";")[0])
    hydra.launcher.max_retries=-5: expected an integer >= 0 (or -1: retry forever)
    """
    def refuse(key: str, expected: str) -> None:
        raise SweepAbortedError(f"hydra.launcher.{key}={_show(_get(options, key))}: {expected}; nothing was run")

    retries = _get(options, "max_retries", 3)
    if not _is_int(retries) or retries < -1:
        refuse("max_retries", "expected an integer >= 0 (or -1: retry forever)")
    per_run = _get(options, "num_cpus", 1.0)
    if isinstance(per_run, bool) or not isinstance(per_run, int | float) or not per_run > 0:
        refuse("num_cpus", "expected the CPUs each run reserves, a number > 0 (e.g. 1 or 0.5)")
    in_flight = _get(options, "max_in_flight")
    if in_flight is not None and (not _is_int(in_flight) or in_flight < 1):
        refuse("max_in_flight", "expected an integer >= 1, or null (twice the cluster's run slots)")
    address = str(_get(options, "address", "local") or "local")
    if address != "local":
        if address != "auto" and _host_port(address) is None:
            refuse("address", "expected local, auto or HOST:PORT of a `ray start --head` cluster")
        return
    local_cpus = _get(options, "local.num_cpus")
    if local_cpus is not None and (not _is_int(local_cpus) or not 1 <= local_cpus <= cpus):
        refuse("local.num_cpus", f"expected 1 to {cpus} (the CPUs this process may use), or null for all of them")
    store = _get(options, "local.object_store_memory")
    if store is not None and (not _is_int(store) or store < MIN_OBJECT_STORE):
        refuse("local.object_store_memory", f"expected bytes >= {MIN_OBJECT_STORE} (Ray's minimum), or null")
    instance = local_cpus or cpus
    if per_run > instance:
        size = f"{instance} (hydra.launcher.local.num_cpus)" if local_cpus else f"{instance}, all this process may use"
        raise SweepAbortedError(
            f"hydra.launcher.num_cpus={_show(per_run)}: each run would reserve {_show(per_run)} CPUs but the local "
            f"Ray instance has {size}; set hydra.launcher.num_cpus to at most {instance}; nothing was run")


def resolve_address(address: str) -> str:
    """``HOST:PORT`` of the cluster to join: ``auto`` is ``$RAY_ADDRESS`` or the address the last
    ``ray start`` on this machine recorded. Unlike ``ray.init(address="auto")`` this never joins
    whatever Ray processes happen to be running (on a shared machine: someone else's)."""
    if address != "auto":
        return address
    env = os.environ.get("RAY_ADDRESS", "").strip()
    if env:
        return env
    tmp = os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp"  # Ray's own lookup
    recorded = os.path.join(tmp, "ray", "ray_current_cluster")
    if os.path.isfile(recorded):
        with open(recorded) as f:
            found = f.read().strip()
        if found:
            return found
    raise SweepAbortedError(
        f"hydra.launcher.address=auto: no Ray cluster found (RAY_ADDRESS is unset and no `ray start` recorded one "
        f"in {recorded}); {HEAD_HINT}; nothing was run")


def probe(address: str, timeout: float = PROBE_SECONDS) -> None:
    """Refuse an address nothing listens on, or where what listens does not speak gRPC as a Ray cluster's GCS
    does (``ray.init`` would retry for minutes, logging a warning for each try)."""
    import grpc

    host, port = _host_port(address) or ("", 0)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as error:
        reason = "timed out" if isinstance(error, TimeoutError) else (error.strerror or str(error))
        raise SweepAbortedError(f"cannot reach a Ray cluster at {address} (hydra.launcher.address): {reason}; "
                                f"{HEAD_HINT}; nothing was run") from None
    channel = grpc.insecure_channel(f"{host}:{port}")
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout)
    except grpc.FutureTimeoutError:
        raise SweepAbortedError(f"{address} (hydra.launcher.address) answers but not as a Ray cluster (no gRPC "
                                f"there in {timeout:g} s: another service's port?); {HEAD_HINT}; nothing was "
                                f"run") from None
    finally:
        channel.close()


def check_feasible(per_run: float, nodes: Sequence[Mapping[str, Any]], address: str) -> None:
    """Refuse a per-run CPU reservation no live node of the cluster can give (Ray would wait forever)."""
    largest = max((float(n.get("Resources", {}).get("CPU", 0)) for n in nodes if n.get("Alive")), default=0.0)
    if per_run > largest:
        raise SweepAbortedError(
            f"hydra.launcher.num_cpus={_show(per_run)}: each run would reserve {_show(per_run)} CPUs but no node of "
            f"the Ray cluster at {address} has more than {_show(largest)}; set hydra.launcher.num_cpus to at most "
            f"{_show(largest)} or add bigger nodes; nothing was run")


def _get(options: Mapping[str, Any], dotted: str, default: Any = None) -> Any:
    node: Any = options
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or node.get(part) is None:
            return default
        node = node[part]
    return node


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _show(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _host_port(address: str) -> tuple[str, int] | None:
    """``("127.0.0.1", 6379)`` for ``127.0.0.1:6379`` (or ``ray://…``); ``None`` when it is not one.

    >>> _host_port("ray://head:10001"), _host_port("head"), _host_port("head:0")
    (('head', 10001), None, None)
    """
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    return host.strip("[]"), int(port)
