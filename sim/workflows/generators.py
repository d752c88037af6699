"""Synthetic scientific workflows after the Pegasus/Bharathi WorkflowGenerator models
(RMDCWF.md, "Workloads"): CyberShake, LIGO Inspiral and Genome (Epigenomics).

Each generator takes an explicit ``numpy.random.Generator`` and a task count ``n`` and returns a
:class:`Dag` on local task indices 0..n−1 numbered level by level (parents before children).

>>> dag = ligo(np.random.default_rng(1), 50)
>>> len(dag.runtimes), dag.names[0]
(50, 'TmpltBank')
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from sim.core import InputError
from sim.workflows.limits import MAX_TASKS


@dataclass(frozen=True)
class Dag:
    """One workflow's tasks: run times (s), parents (local indices) and task type names."""

    runtimes: tuple[float, ...]
    parents: tuple[tuple[int, ...], ...]
    names: tuple[str, ...]


def truncated_normal(rng: np.random.Generator, mu: float, var: float) -> float:
    """TN(μ, σ²): a draw of N(μ, σ²) accepted only within ±50 % of μ; after 100 rejections, μ.

    >>> truncated_normal(np.random.default_rng(0), 10.0, 0.0)
    10.0
    """
    sd = math.sqrt(var)
    for _ in range(100):
        x = float(rng.normal(mu, sd))
        if abs(x - mu) <= 0.5 * abs(mu):
            return x
    return float(mu)


class _Builder:
    """Collects tasks in creation order."""

    def __init__(self) -> None:
        self.runtimes: list[float] = []
        self.parents: list[tuple[int, ...]] = []
        self.names: list[str] = []

    def add(self, name: str, runtime: float, parents: tuple[int, ...] | list[int] = ()) -> int:
        self.runtimes.append(float(runtime))
        self.parents.append(tuple(parents))
        self.names.append(name)
        return len(self.runtimes) - 1

    def dag(self) -> Dag:
        return Dag(tuple(self.runtimes), tuple(self.parents), tuple(self.names))


def _split(total: int, groups: int) -> list[int]:
    """Contiguous group sizes as even as possible (larger groups first).

    >>> _split(7, 3)
    [3, 2, 2]
    """
    base, extra = divmod(total, groups)
    return [base + (i < extra) for i in range(groups)]


def _spread(rng: np.random.Generator, total: int, groups: int, jitter: float) -> list[int]:
    """``total`` items over ``groups`` (each ≥ 1), every group about total/groups · U(1 ± jitter)."""
    sizes: list[int] = []
    left = total
    for g in range(groups - 1):
        want = round(total / groups * rng.uniform(1 - jitter, 1 + jitter))
        size = min(max(1, want), left - (groups - 1 - g))
        sizes.append(size)
        left -= size
    return [*sizes, left]


def _too_small(kind: str, n: int, minimum: int, extra: str = "") -> InputError:
    return InputError(f"workload.n = {n} is too small for a {kind} workflow: it needs n ≥ {minimum}{extra}")


def cybershake(rng: np.random.Generator, n: int = 50) -> Dag:
    """CyberShake: ExtractSGT → SeismogramSynthesis → PeakValCalcOkaya → ZipPSA, plus ZipSeis
    joining every SeismogramSynthesis. n = n_E + 2·n_S + 2 (see RMDCWF.md for n_E)."""
    if n < 8 or n == 9:
        raise _too_small("cybershake", n, 8, " and n ≠ 9 (2 ExtractSGT with ≥ 1 synthesis each, 3 when n is odd)")
    k = math.floor(0.0081 * (n - 2))
    lo, hi = math.ceil(0.5 * k), math.floor(1.5 * k)
    n_e = max(2, int(rng.integers(lo, hi)) if hi > lo else lo)
    if (n - 2 - n_e) % 2:
        n_e += 1 if n_e == 2 else -1
    while (n - 2 - n_e) // 2 < n_e:  # every ExtractSGT needs at least one synthesis
        n_e -= 2
    n_s = (n - 2 - n_e) // 2
    b = _Builder()
    extract = [b.add("ExtractSGT", truncated_normal(rng, 137.45, 42681.27)) for _ in range(n_e)]
    synth = [b.add("SeismogramSynthesis", truncated_normal(rng, 43.40, 984.36), (e,))
             for e, count in zip(extract, _spread(rng, n_s, n_e, 0.25), strict=True) for _ in range(count)]
    peaks = [b.add("PeakValCalcOkaya", truncated_normal(rng, 1.09, 3.71), (s,)) for s in synth]
    b.add("ZipSeis", 0.0175 * n_s, synth)
    b.add("ZipPSA", 0.013 * n_s, peaks)
    return b.dag()


def ligo(rng: np.random.Generator, n: int = 50) -> Dag:
    """LIGO Inspiral: TmpltBank → Inspiral → Thinca → TrigBank → Inspiral → Thinca, with ``bn``
    Thinca per Thinca level, each joining (or fanning out to) a contiguous group."""
    if n % 2:
        raise InputError(f"workload.n = {n}: a ligo workflow needs an even n (tasks come in pairs)")
    if n < 6:
        raise _too_small("ligo", n, 6)
    bn = int(rng.integers(1, max(3, math.floor(0.05 * n))))
    if bn == 1 and (n - 2) % 4:
        bn += 1
    while n - 2 * bn < 4 * bn:  # each half needs a pair per Thinca
        bn -= 1
    pairs = (n - 2 * bn) // 2
    top = min(max(bn, round(pairs / 2 * rng.uniform(0.95, 1.05))), pairs - bn)
    b = _Builder()
    banks = [b.add("TmpltBank", truncated_normal(rng, 18.14, 0.18)) for _ in range(top)]
    insp1 = [b.add("Inspiral", truncated_normal(rng, 460.21, 297397.45), (t,)) for t in banks]
    thinca1 = _joins(b, rng, insp1, bn)
    bottom_sizes = _split(pairs - top, bn)
    trig = [b.add("TrigBank", truncated_normal(rng, 5.11, 0.1), (th,))
            for th, size in zip(thinca1, bottom_sizes, strict=True) for _ in range(size)]
    insp2 = [b.add("Inspiral", truncated_normal(rng, 460.21, 297397.45), (t,)) for t in trig]
    _joins(b, rng, insp2, bn, bottom_sizes)
    return b.dag()


def _joins(b: _Builder, rng: np.random.Generator, tasks: list[int], bn: int,
           sizes: list[int] | None = None) -> list[int]:
    """``bn`` Thinca tasks, each the child of a contiguous group of ``tasks``."""
    out, at = [], 0
    for size in sizes or _split(len(tasks), bn):
        out.append(b.add("Thinca", truncated_normal(rng, 5.37, 0.06), tasks[at:at + size]))
        at += size
    return out


def genome_shape(n: int) -> tuple[int, int]:
    """(lanes, splits per lane) for ``n`` tasks: lanes = max(1, n // 25), then as many splits as fit
    in L·(4S + 2) + [L > 1] + 2 ≤ n (our rule; the paper does not give one).

    >>> genome_shape(50)
    (2, 5)
    """
    if n < 8:
        raise _too_small("genome", n, 8, " (1 lane × 1 split)")
    lanes = max(1, n // 25)
    splits = (n - 2 - (lanes > 1) - 2 * lanes) // (4 * lanes)
    return lanes, splits


def genome(rng: np.random.Generator, n: int = 50) -> Dag:
    """Genome (Epigenomics): per lane fastqSplit → ``splits`` chains filterContams → sol2sanger →
    fastq2bfq → map → mapMerge; a final mapMerge over the lanes (when several); maqIndex → pileup.
    The reference size drives map and pileup; the small steps' parameters are ours (RMDCWF.md gives
    magnitudes only), and they are a negligible share of the work."""
    lanes, splits = genome_shape(n)
    size = float(rng.uniform(1.07e9, 5.37e9))
    b = _Builder()
    merges = []
    for _ in range(lanes):
        split = b.add("fastqSplit", truncated_normal(rng, 46.0, 100.0))
        maps = []
        for _ in range(splits):
            t = b.add("filterContams", truncated_normal(rng, 2.5, 0.25), (split,))
            t = b.add("sol2sanger", truncated_normal(rng, 0.6, 0.01), (t,))
            t = b.add("fastq2bfq", truncated_normal(rng, 1.4, 0.04), (t,))
            maps.append(b.add("map", size / truncated_normal(rng, 369_551.55, 1.305e10), (t,)))
        merges.append(b.add("mapMerge", float(rng.uniform(15.0, 60.0)), maps))
    if lanes > 1:
        merges = [b.add("mapMerge", float(rng.uniform(15.0, 60.0)), merges)]
    index = b.add("maqIndex", truncated_normal(rng, 0.5, 0.01), merges)
    b.add("pileup", size / 881_356.0, (index,))
    return b.dag()


#: generator per ``workload.type``
GENERATORS: dict[str, Callable[[np.random.Generator, int], Dag]] = {
    "cybershake": cybershake, "ligo": ligo, "genome": genome}


def task_count(kind: str, n: int) -> int | None:
    """Tasks in a ``kind`` workflow made with size parameter ``n``; ``None`` when the generator refuses n.

    >>> task_count("genome", 50), task_count("ligo", 51)
    (47, None)
    """
    if kind == "ligo":
        return n if n >= 6 and n % 2 == 0 else None
    if kind == "cybershake":
        return n if n >= 8 and n != 9 else None
    if n < 8:
        return None
    lanes, splits = genome_shape(n)
    return lanes * (4 * splits + 2) + (lanes > 1) + 2


@dataclass(frozen=True)
class SizeMix:
    """A continuous task-count scale on a generator's discrete sizes: a workflow is made with size
    parameter ``hi`` with probability ``p_hi``, else ``lo``, so that the mean task count is the
    requested size (``lo``/``hi``: the size parameters whose task counts bracket it)."""

    lo: int
    hi: int
    p_hi: float


def size_mix(kind: str, size: float) -> SizeMix:
    """The :class:`SizeMix` of mean task count ``size`` for ``kind`` workflows (neighbours by task
    count; the smallest n for each count).

    >>> size_mix("ligo", 51.5), size_mix("genome", 59.0)  # genome: 2 lanes × 6 or × 7 splits (55, 63 tasks)
    (SizeMix(lo=50, hi=52, p_hi=0.75), SizeMix(lo=55, hi=63, p_hi=0.5))
    """
    if not isinstance(size, int | float) or isinstance(size, bool) or not 0 < size <= MAX_TASKS:
        raise InputError(f"workload.size must be a mean task count in (0, {MAX_TASKS:,}], got {size!r}")
    counts: dict[int, int] = {}
    for n in range(6, 2 * math.ceil(size) + 50):  # a genome shape holds at least ~0.8 n tasks
        c = task_count(kind, n)
        if c is not None:
            counts.setdefault(c, n)
    below = [c for c in counts if c <= size]
    if not below:
        raise InputError(f"workload.size = {size} is below the smallest {kind} workflow ({min(counts)} tasks)")
    lo = max(below)
    hi = min(c for c in counts if c > size)
    return SizeMix(counts[lo], counts[hi], (size - lo) / (hi - lo))
