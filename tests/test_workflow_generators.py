"""Workflow generators and the RM-DCWF open stream against RMDCWF.md ("Workloads")."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.core import InputError
from sim.workflows.budget import alone_schedule
from sim.workflows.dag import critical_path, levels
from sim.workflows.generators import GENERATORS, cybershake, genome, genome_shape, ligo, truncated_normal
from sim.workflows.stream import workflow_stream
from sweeps.specs import SlottedCluster, WorkflowStream

STREAM = {"jobs": 400, "arrival_rate": 1 / 180, "s_max": 50_000, "em_max": 5.0, "machines": 50, "slots": 2}


def _per_level(dag) -> dict[int, Counter]:
    out: dict[int, Counter] = {}
    for name, level in zip(dag.names, levels(dag.parents), strict=True):
        out.setdefault(level, Counter())[name] += 1
    return out


# --- TN rule ---------------------------------------------------------------------------------------

def test_truncated_normal_stays_within_half_of_mu_and_falls_back_to_mu():
    rng = np.random.default_rng(3)
    draws = [truncated_normal(rng, 100.0, 2500.0) for _ in range(5000)]
    assert min(draws) >= 50.0 and max(draws) <= 150.0
    assert abs(np.mean(draws) - 100.0) < 1.5  # symmetric truncation keeps the mean
    # σ so large that 100 tries almost surely all miss ±50 %: the rule returns μ exactly
    assert truncated_normal(np.random.default_rng(0), 1.0, 1e12) == 1.0


# --- structure ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(20))
def test_cybershake_structure(seed):
    dag = cybershake(np.random.default_rng(seed), 50)
    per = _per_level(dag)
    n_e = per[1]["ExtractSGT"]
    n_s = per[2]["SeismogramSynthesis"]
    assert set(per) == {1, 2, 3, 4} and len(dag.runtimes) == 50
    assert n_e >= 2 and n_e + 2 * n_s + 2 == 50
    assert per[3] == Counter({"PeakValCalcOkaya": n_s, "ZipSeis": 1}) and per[4] == Counter({"ZipPSA": 1})
    zip_seis = dag.names.index("ZipSeis")
    assert sorted(dag.parents[zip_seis]) == [t for t, n in enumerate(dag.names) if n == "SeismogramSynthesis"]
    fan = Counter(dag.parents[t][0] for t, n in enumerate(dag.names) if n == "SeismogramSynthesis")
    assert len(fan) == n_e and max(fan.values()) <= math.ceil(n_s / n_e * 1.25) + 1
    assert dag.runtimes[zip_seis] == pytest.approx(0.0175 * n_s) and dag.runtimes[zip_seis] < 1


def test_cybershake_extract_count_follows_k_at_large_n():
    counts = {cybershake(np.random.default_rng(s), 1002).names.count("ExtractSGT") for s in range(40)}
    k = math.floor(0.0081 * 1000)  # 8: n_E in [4, 12), nudged by ±1 for parity
    assert min(counts) >= math.ceil(0.5 * k) - 1 and max(counts) <= math.floor(1.5 * k) and len(counts) > 3


@pytest.mark.parametrize("seed", range(20))
def test_ligo_structure(seed):
    dag = ligo(np.random.default_rng(seed), 50)
    per = _per_level(dag)
    assert sorted(per) == [1, 2, 3, 4, 5, 6] and len(dag.runtimes) == 50
    bn = per[3]["Thinca"]
    assert per[6] == Counter({"Thinca": bn}) and 1 <= bn <= 2
    top, bottom = per[1]["TmpltBank"], per[4]["TrigBank"]
    assert per[2] == Counter({"Inspiral": top}) and per[5] == Counter({"Inspiral": bottom})
    assert 2 * (top + bottom) + 2 * bn == 50
    assert abs(top - bottom) <= 2 + 0.1 * (top + bottom)  # ±5 % around an even split, rounded
    for t, name in enumerate(dag.names):  # Inspirals are 1:1 children of a bank
        if name == "Inspiral":
            assert len(dag.parents[t]) == 1 and dag.names[dag.parents[t][0]] in ("TmpltBank", "TrigBank")


def test_ligo_bn_rule():
    # (n − 2) mod 4 ≠ 0 forbids bn = 1
    assert all(ligo(np.random.default_rng(s), 52).names.count("Thinca") >= 4 for s in range(30))
    assert min(ligo(np.random.default_rng(s), 200).names.count("Thinca") for s in range(60)) == 4  # 198 mod 4 = 2
    seen = {ligo(np.random.default_rng(s), 202).names.count("Thinca") // 2 for s in range(80)}
    assert seen == {1, 2, 3, 4, 5, 6, 7, 8, 9}  # [1, ⌊0.05·202⌋ = 10)


def test_genome_structure_two_lanes_five_splits():
    assert genome_shape(50) == (2, 5)
    dag = genome(np.random.default_rng(0), 50)
    names = Counter(dag.names)
    assert len(dag.runtimes) == 47
    assert names == Counter({"fastqSplit": 2, "filterContams": 10, "sol2sanger": 10, "fastq2bfq": 10, "map": 10,
                             "mapMerge": 3, "maqIndex": 1, "pileup": 1})
    assert max(levels(dag.parents)) == 9
    maps = [e for e, n in zip(dag.runtimes, dag.names, strict=True) if n == "map"]
    pileup = dag.runtimes[dag.names.index("pileup")]
    size = pileup * 881_356.0  # one reference size per workflow drives map and pileup
    assert 1.07e9 <= size <= 5.37e9
    assert all(size / (1.5 * 369_551.55) <= e <= size / (0.5 * 369_551.55) for e in maps)


@pytest.mark.parametrize(("kind", "small", "minimum"), [("cybershake", 7, 8), ("ligo", 4, 6), ("genome", 7, 8)])
def test_n_too_small_names_the_minimum(kind, small, minimum):
    with pytest.raises(InputError, match=rf"workload\.n = {small} .*{kind}.*n ≥ {minimum}"):
        GENERATORS[kind](np.random.default_rng(0), small)
    GENERATORS[kind](np.random.default_rng(0), minimum)


def test_odd_ligo_n_is_refused():
    with pytest.raises(InputError, match=r"workload\.n = 51: a ligo workflow needs an even n"):
        ligo(np.random.default_rng(0), 51)


# --- statistics at n = 50 (RMDCWF.md targets) --------------------------------------------------------

@pytest.mark.parametrize(("kind", "work", "cp"), [("cybershake", 1300, 220), ("ligo", 11_100, 1340),
                                                  ("genome", 96_700, 17_600)])
def test_mean_work_and_critical_path_match_rmdcwf(kind, work, cp):
    """Over 2,000 seeded draws the means are within 4 % of RMDCWF.md's figures. Their standard
    errors are at most 0.9 % (Genome's work, driven by one U(1.07e9, 5.37e9) reference size per
    workflow) and at most 0.35 % otherwise, so a failure means the model is off, not bad luck."""
    rng = np.random.default_rng(2017)
    dags = [GENERATORS[kind](rng, 50) for _ in range(2000)]
    works = [sum(d.runtimes) for d in dags]
    paths = [critical_path(d.runtimes, d.parents) for d in dags]
    assert np.mean(works) == pytest.approx(work, rel=0.04)
    assert np.mean(paths) == pytest.approx(cp, rel=0.04)


@pytest.mark.parametrize(("kind", "name", "mu"), [("cybershake", "SeismogramSynthesis", 43.40),
                                                  ("ligo", "Inspiral", 460.21), ("ligo", "TmpltBank", 18.14)])
def test_mean_task_runtimes(kind, name, mu):
    rng = np.random.default_rng(5)
    runtimes = [e for _ in range(200) for e, n in zip(*_named(GENERATORS[kind](rng, 50)), strict=True) if n == name]
    assert np.mean(runtimes) == pytest.approx(mu, rel=0.03)


def _named(dag):
    return dag.runtimes, dag.names


# --- properties --------------------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(sorted(GENERATORS)), n=st.integers(10, 160), seed=st.integers(0, 2**32 - 1))
def test_any_generated_dag_is_a_consistent_dag(kind, n, seed):
    n += (kind == "ligo") * (n % 2)
    dag = GENERATORS[kind](np.random.default_rng(seed), n)
    lv = levels(dag.parents)  # raises on a cycle or unknown parent
    assert all(lv[t] == 1 + max((lv[p] for p in ps), default=0) for t, ps in enumerate(dag.parents))
    assert all(p < t for t, ps in enumerate(dag.parents) for p in ps)  # numbered parents first
    assert len(dag.runtimes) == len(dag.names) == len(dag.parents)
    short = n - len(dag.runtimes)  # genome uses whole splits per lane
    assert short == 0 if kind != "genome" else 0 <= short < 4 * max(1, n // 25)
    assert all(e >= 0 for e in dag.runtimes)
    cp = critical_path(dag.runtimes, dag.parents)
    assert max(dag.runtimes) <= cp <= sum(dag.runtimes) + 1e-9


# --- the stream --------------------------------------------------------------------------------------

def _stream(seed=1, **overrides):
    return workflow_stream(np.random.default_rng(seed), overrides.pop("type", "ligo"), **{**STREAM, **overrides})


def test_stream_rules():
    w = _stream(jobs=1500)
    wfs = tuple(w.workflows)
    assert w.kind == "workflow" and len(wfs) == 1500 and [wf.id for wf in wfs] == list(range(1500))
    delayed = [wf.earliest_start - wf.arrival for wf in wfs if wf.earliest_start > wf.arrival]
    assert abs(len(delayed) / 1500 - 0.5) < 0.05  # 4.5 σ
    assert all(d == pytest.approx(round(d)) and 1 <= round(d) <= 50_000 for d in delayed)
    assert np.mean(delayed) == pytest.approx(25_000, rel=0.07)
    gaps = np.diff([0.0] + [wf.arrival for wf in wfs])
    assert np.mean(gaps) == pytest.approx(180, rel=0.08) and all(gaps >= 0)
    first = 0
    for wf in wfs:
        runtimes = [t.runtime for t in wf.tasks]
        local = [[p - first for p in t.parents] for t in wf.tasks]
        assert [t.id for t in wf.tasks] == list(range(first, first + len(wf.tasks)))
        assert all(t.workflow == wf.id and t.submit == wf.arrival and t.demand == (1,) for t in wf.tasks)
        assert wf.set_r == max(alone_schedule(runtimes, local, 50, 2, wf.earliest_start)) - wf.earliest_start
        assert wf.deadline == math.ceil(wf.deadline) and wf.work == pytest.approx(sum(runtimes))
        em = (wf.deadline - wf.earliest_start) / wf.set_r
        assert 1 <= em <= 5 + 1 / wf.set_r  # ceil adds under a second
        first += len(wf.tasks)
    assert first == sum(len(wf.tasks) for wf in wfs) and w.jobs == []


def test_em_spans_its_range():
    ems = [(wf.deadline - wf.earliest_start) / wf.set_r for wf in _stream(jobs=800, em_max=2.0).workflows]
    assert min(ems) < 1.05 and max(ems) > 1.95 and np.mean(ems) == pytest.approx(1.5, abs=0.03)


def _dags(w):
    return [tuple(t.runtime for t in wf.tasks) for wf in w.workflows]


def test_common_random_numbers_across_rate_cluster_and_em():
    base = _stream(jobs=150)
    faster = _stream(jobs=150, arrival_rate=1 / 150)
    smaller = _stream(jobs=150, machines=3)
    tighter = _stream(jobs=150, em_max=2.0)
    assert _dags(base) == _dags(faster) == _dags(smaller) == _dags(tighter)
    ratio = [a.arrival / b.arrival for a, b in zip(base.workflows, faster.workflows, strict=True)]
    assert ratio == pytest.approx([180 / 150] * 150)  # the same exponentials, rescaled
    assert [a.earliest_start > a.arrival for a in base.workflows] == [
        b.earliest_start > b.arrival for b in faster.workflows]
    assert all(s.set_r >= b.set_r for s, b in zip(smaller.workflows, base.workflows, strict=True))
    assert sum(s.deadline - s.earliest_start > b.deadline - b.earliest_start
               for s, b in zip(smaller.workflows, base.workflows, strict=True)) > 100  # 6 slots stretch SET^R


def test_set_r_is_the_critical_path_on_wide_systems_and_work_bound_on_one_slot():
    """SET^R follows m only once the system is narrower than the workflow: LIGO n = 50 has ≤ 24
    parallel tasks, so m = 40 and m = 60 (× 2 slots) give the same deadlines; one slot serialises."""
    wide, wider, serial = _stream(jobs=40, machines=40), _stream(jobs=40, machines=60), _stream(jobs=40, machines=1,
                                                                                                 slots=1)
    assert [wf.deadline for wf in wide.workflows] == [wf.deadline for wf in wider.workflows]
    assert all(wf.set_r == pytest.approx(wf.critical_path) for wf in wide.workflows)
    assert all(wf.set_r == pytest.approx(wf.work) for wf in serial.workflows)
    assert all(s.deadline > w.deadline for s, w in zip(serial.workflows, wide.workflows, strict=True))


def test_same_seed_same_stream_other_seed_other_stream():
    genome = _stream(seed=9, jobs=60, type="genome")
    assert tuple(genome.workflows) == tuple(_stream(seed=9, jobs=60, type="genome").workflows)
    assert tuple(genome.workflows) == tuple(genome.workflows)  # iterating again builds the same workflows
    assert _dags(_stream(seed=9, jobs=60)) != _dags(_stream(seed=10, jobs=60))


# --- specs and bad input -----------------------------------------------------------------------------

def test_spec_builds_on_the_cluster_it_is_given():
    w = WorkflowStream(type="cybershake", jobs=30, warmup=3).build(np.random.default_rng(4),
                                                                     SlottedCluster(m=5, c_r=1).build())
    assert w.warmup == 3 and len(w.workflows) == 30 and all(wf.kind == "cybershake" for wf in w.workflows)
    assert tuple(w.workflows) == tuple(workflow_stream(np.random.default_rng(4), "cybershake", n=50, warmup=3, **{
        **STREAM, "jobs": 30, "machines": 5, "slots": 1, "arrival_rate": WorkflowStream.arrival_rate}).workflows)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"em_max": 0.5}, r"workload\.em_max must be a number ≥ 1"),
    ({"jobs": 0}, r"workload\.jobs must be a positive integer"),
    ({"warmup": 10, "jobs": 10}, r"workload\.warmup must be an integer in \[0, jobs = 10\)"),
    ({"arrival_rate": 0}, r"workload\.arrival_rate must be a positive number"),
    ({"s_max": 0}, r"workload\.s_max must be an integer ≥ 1"),
    ({"type": "montage"}, r"workload\.type must be one of cybershake, ligo, genome"),
    ({"type": "cybershake", "n": 5}, r"workload\.n = 5 is too small for a cybershake workflow: it needs n ≥ 8"),
])
def test_bad_stream_parameters(kwargs, message):
    with pytest.raises(InputError, match=message):
        WorkflowStream(**kwargs)


@pytest.mark.parametrize(("kwargs", "field"), [({"m": 0}, "cluster.m"), ({"c_r": 0}, "cluster.c_r"),
                                               ({"m": 2.5}, "cluster.m")])
def test_bad_cluster(kwargs, field):
    with pytest.raises(InputError, match=rf"{field} must be a positive integer"):
        SlottedCluster(**kwargs)


def test_stream_needs_a_slotted_cluster():
    from sim.core import Cluster
    with pytest.raises(InputError, match="needs a slotted cluster"):
        WorkflowStream(jobs=5, warmup=0).build(np.random.default_rng(0), Cluster.nodes(8))
