"""Synthetic rigid HPC workload: a simplified Lublin–Feitelson (2003) model, so demos need no download.

Source: U. Lublin and D. G. Feitelson, "The workload on parallel supercomputers: modeling the
characteristics of rigid jobs", JPDC 63(11), 2003, and its reference implementation
``m_lublin99.c`` (Parallel Workloads Archive, "models"). We use the model's *typeless* ("whole
sample") parameters, i.e. no batch/interactive split. What we kept, and what we changed:

* **Arrivals** (changed): a Poisson process of rate ``arrival_rate`` jobs/s starting at time 0,
  instead of the model's gamma inter-arrivals with a daily cycle, so the offered load is set by
  one number: load ≈ ``arrival_rate`` × E[nodes × runtime] / ``nodes``. A rate below ``jobs`` / 1e10
  per second is refused: the stream would outlast the readers' time bound (``MAX_SECONDS``).
* **Size** (kept): serial (1 node) with probability ``serial_prob`` = 0.244; otherwise
  ``x`` ~ two-stage uniform on log2 sizes — U(u_low, u_med) with probability 0.86, else
  U(u_med, u_hi), where u_hi = log2(``nodes``), u_med = u_hi − 2.5, u_low = 0.8 (clamped so
  u_low ≤ u_med ≤ u_hi on small machines). With probability ``pow2_prob`` = 0.576 / (1 − 0.244)
  ≈ 0.762 (the source's power-of-two share, taken among parallel jobs) ``x`` is rounded to an
  integer, so the size is a power of two; size = round(2^x), capped at ``nodes`` (counted in
  ``notes["nodes_capped"]``; only happens when ``nodes`` is not a power of two).
* **Run time** (kept): log(runtime) is hyper-gamma — Gamma(shape 4.2, scale 0.94) with
  probability p = clip(−0.0054 × size + 0.78, 0, 1), else Gamma(312, 0.03) — redrawn while above
  12 (runtime ≤ e^12 ≈ 45 h), and runtime = ⌊e^draw⌋ whole seconds. The mean run time grows with
  size because p falls linearly with the node count (as in the source; not with log2 size).
* **Time limit** (added; the model has none): runtime × U(1, ``estimate_factor_max``) rounded up
  to a whole minute, so every job ends within its limit, as under a scheduler that kills at it.

Every value is drawn from the ``rng`` passed in (no global state), in a fixed order that does not
depend on any policy: the same seed gives the same jobs.
"""

from __future__ import annotations

import math

import numpy as np

from sim.core import InputError, Job, Workload
from sim.workloads.errors import check_rate

SERIAL_PROB = 0.244
POW2_PROB = 0.576 / (1 - SERIAL_PROB)
U_LOW, U_MED_GAP, U_PROB = 0.8, 2.5, 0.86
GAMMA_SHORT = (4.2, 0.94)
GAMMA_LONG = (312.0, 0.03)
P_SLOPE, P_INTERCEPT = -0.0054, 0.78
MAX_LOG_RUNTIME = 12.0


def synthetic_hpc(rng: np.random.Generator, *, jobs: int, nodes: int, arrival_rate: float,
                  estimate_factor_max: float = 5.0, serial_prob: float = SERIAL_PROB,
                  pow2_prob: float = POW2_PROB) -> Workload:
    """``jobs`` rigid jobs for a ``nodes``-node machine (the model is in the module docstring).

    >>> w = synthetic_hpc(np.random.default_rng(1), jobs=3, nodes=64, arrival_rate=0.01)
    >>> len(w.jobs), w.default_nodes, all(j.runtime <= j.time_limit for j in w.jobs)
    (3, 64, True)
    """
    _check_arguments(rng, jobs, nodes, arrival_rate, estimate_factor_max, serial_prob, pow2_prob)
    submit = np.cumsum(rng.exponential(1 / arrival_rate, jobs))
    size, capped = _sizes(rng, jobs, nodes, serial_prob, pow2_prob)
    runtime = _runtimes(rng, size)
    factor = rng.uniform(1.0, estimate_factor_max, jobs)
    limit = np.ceil(runtime * factor / 60) * 60
    job_list = [Job(i, float(submit[i]), (int(size[i]),), float(limit[i]), float(runtime[i]))
                for i in range(jobs)]
    source = (f"synthetic_hpc(jobs={jobs}, nodes={nodes}, arrival_rate={arrival_rate:g}, "
              f"estimate_factor_max={estimate_factor_max:g})")
    return Workload(job_list, source=source, default_nodes=nodes, notes={"nodes_capped": capped} if capped else {})


def offered_load(workload: Workload, nodes: int) -> float:
    """Work offered per unit of capacity: Σ nodes × runtime / (``nodes`` × arrival span).

    The span runs from the first to the last submission; a value near or above 1 means the queue
    grows without bound.

    >>> from sim.core import rigid_job
    >>> offered_load(Workload([rigid_job(0, 0, 2, 50), rigid_job(1, 100, 4, 25)]), 4)
    0.5
    """
    if nodes <= 0:
        raise InputError(f"offered_load: nodes must be > 0, got {nodes}")
    if not workload.jobs:
        raise InputError("offered_load: the workload has no jobs")
    submits = [job.submit for job in workload.jobs]
    span = max(submits) - min(submits)
    if span <= 0:
        raise InputError("offered_load: undefined, every job is submitted at the same instant")
    work = math.fsum(job.demand[0] * job.runtime for job in workload.jobs)
    return work / (nodes * span)


def _sizes(rng: np.random.Generator, jobs: int, nodes: int, serial_prob: float,
           pow2_prob: float) -> tuple[np.ndarray, int]:
    """Job sizes (two-stage uniform on log2 size) and how many were capped at ``nodes``."""
    u_hi = math.log2(nodes)
    u_low = min(U_LOW, u_hi)
    u_med = min(max(u_hi - U_MED_GAP, u_low), u_hi)
    serial = rng.random(jobs) < serial_prob
    low_stage = rng.random(jobs) < U_PROB
    log_size = np.where(low_stage, rng.uniform(u_low, u_med, jobs), rng.uniform(u_med, u_hi, jobs))
    pow2 = rng.random(jobs) < pow2_prob
    log_size = np.where(pow2, np.floor(log_size + 0.5), log_size)
    size = np.where(serial, 1.0, np.floor(2.0**log_size + 0.5))
    capped = int(np.count_nonzero(size > nodes))
    return np.minimum(size, nodes), capped


def _runtimes(rng: np.random.Generator, size: np.ndarray) -> np.ndarray:
    """Whole-second run times: e^(hyper-gamma draw), redrawing draws above ``MAX_LOG_RUNTIME``."""
    p_short = np.clip(P_SLOPE * size + P_INTERCEPT, 0.0, 1.0)
    log_runtime = np.full(size.shape, np.inf)
    pending = np.arange(size.size)
    while pending.size:
        short = rng.random(pending.size) < p_short[pending]
        draw = np.where(short, rng.gamma(*GAMMA_SHORT, pending.size), rng.gamma(*GAMMA_LONG, pending.size))
        log_runtime[pending] = draw
        pending = pending[draw > MAX_LOG_RUNTIME]
    return np.floor(np.exp(log_runtime))


def _check_arguments(rng: np.random.Generator, jobs: int, nodes: int, arrival_rate: float,
                     estimate_factor_max: float, serial_prob: float, pow2_prob: float) -> None:
    """Reject arguments the model cannot use, naming the parameter."""
    if not isinstance(rng, np.random.Generator):
        raise InputError(f"synthetic_hpc: rng must be a numpy.random.Generator "
                         f"(numpy.random.default_rng(seed)), got {type(rng).__name__}")
    for name, value in (("jobs", jobs), ("nodes", nodes)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value <= 0:
            raise InputError(f"synthetic_hpc: {name} must be a positive integer, got {value!r}")
    if not _number("arrival_rate", arrival_rate) > 0:
        raise InputError(f"synthetic_hpc: arrival_rate must be > 0 jobs per second, got {arrival_rate!r}")
    check_rate(int(jobs), float(arrival_rate), "synthetic_hpc: arrival_rate")
    if not _number("estimate_factor_max", estimate_factor_max) >= 1:
        raise InputError(f"synthetic_hpc: estimate_factor_max must be ≥ 1 (limits are never below the run "
                         f"time), got {estimate_factor_max!r}")
    for name, value in (("serial_prob", serial_prob), ("pow2_prob", pow2_prob)):
        if not 0 <= _number(name, value) <= 1:
            raise InputError(f"synthetic_hpc: {name} must be a probability in [0, 1], got {value!r}")


def _number(name: str, value: object) -> float:
    """``value`` as a finite float, or an error naming the parameter."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        raise InputError(f"synthetic_hpc: {name} must be a finite number, got {value!r}")
    return number


def mmc_jobs(rng: np.random.Generator, *, jobs: int, nodes: int, arrival_rate: float, mean_runtime: float,
             estimate_factor_max: float = 1.0) -> Workload:
    """An M/M/c queue as a workload: Poisson arrivals at ``arrival_rate``, one-node jobs, exponential
    run times of mean ``mean_runtime``, on ``nodes`` = c servers; time limit = run time ×
    U(1, ``estimate_factor_max``). Under FCFS (or EASY: one-node jobs never backfill past the head)
    the mean wait tends to :func:`erlang_c_wait`; a finite run from an empty machine waits a little
    less (the initial transient), by a fraction that falls like 1/``jobs``.

    >>> w = mmc_jobs(np.random.default_rng(0), jobs=3, nodes=4, arrival_rate=0.02, mean_runtime=100.0)
    >>> [j.nodes for j in w.jobs], all(j.runtime <= j.time_limit for j in w.jobs)
    ([1, 1, 1], True)
    """
    _check_arguments(rng, jobs, nodes, arrival_rate, estimate_factor_max, 0.0, 0.0)
    if not _number("mean_runtime", mean_runtime) > 0:
        raise InputError(f"mmc_jobs: mean_runtime must be > 0 seconds, got {mean_runtime!r}")
    submit = np.cumsum(rng.exponential(1 / arrival_rate, jobs))
    runtime = rng.exponential(mean_runtime, jobs)
    limit = runtime * rng.uniform(1.0, estimate_factor_max, jobs)
    job_list = [Job(i, float(submit[i]), (1,), float(limit[i]), float(runtime[i])) for i in range(jobs)]
    source = f"mmc_jobs(jobs={jobs}, nodes={nodes}, arrival_rate={arrival_rate:g}, mean_runtime={mean_runtime:g})"
    return Workload(job_list, source=source, default_nodes=nodes)


def erlang_c_wait(servers: int, arrival_rate: float, mean_runtime: float) -> float:
    """The stationary mean wait in queue of an M/M/c queue (Erlang C): C(c, a) · mean_runtime / (c − a),
    a = ``arrival_rate`` · ``mean_runtime`` < c.

    >>> round(erlang_c_wait(1, 0.5, 1.0), 6)  # M/M/1: ρ / (μ − λ) = 0.5 / 0.5
    1.0
    >>> round(erlang_c_wait(2, 1.0, 1.0), 6)  # c = 2, a = 1: C = 1/3, W = (1/3) / 1
    0.333333
    """
    a = arrival_rate * mean_runtime
    if not 0 < a < servers:
        raise InputError(f"erlang_c_wait: offered load a = {a:g} must lie in (0, servers = {servers})")
    term, below = 1.0, 0.0
    for k in range(servers):
        below += term
        term *= a / (k + 1)
    top = term * servers / (servers - a)  # a^c / c! · 1 / (1 − ρ)
    return top / (below + top) * mean_runtime / (servers - a)
