"""DR_EVT conformance: ``easy`` and ``conservative`` reproduce all 36 × 2 reference outputs exactly.

The expected files are the outputs of DR_EVT's own Python reference schedulers (100 nodes), shipped
in ``tests/data/drevt`` with DR_EVT's LICENSE and NOTICE. The literal transcription of the seed's
pseudocode in ``tests/reference`` must agree too.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from sim import Cluster, simulate
from sim.policies import policy_from_conf
from sim.workloads import read_drevt_csv
from tests.conftest import DREVT
from tests.reference import seed_pseudocode

TRACES = sorted((DREVT / "traces").glob("*.csv"))
POLICIES = ["easy", "conservative"]


def expected(policy: str, trace: Path) -> dict[int, tuple[float, float]]:
    with (DREVT / f"expected_{policy}" / trace.name).open() as handle:
        return {int(row["job_idx"]): (float(row["start_time"]), float(row["end_time"]))
                for row in csv.DictReader(handle)}


def test_the_suite_is_complete() -> None:
    assert len(TRACES) == 36
    assert (DREVT / "LICENSE").is_file() and (DREVT / "NOTICE").is_file()


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("trace", TRACES, ids=[t.stem for t in TRACES])
def test_matches_drevt(trace: Path, policy: str) -> None:
    jobs = read_drevt_csv(trace).jobs
    result = simulate(jobs, Cluster.nodes(100), policy_from_conf(policy))
    assert {r.job.id: (r.start, r.end) for r in result.records} == expected(policy, trace)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("trace", TRACES, ids=[t.stem for t in TRACES])
def test_literal_reference_matches_drevt(trace: Path, policy: str) -> None:
    jobs = [(j.id, j.submit, j.nodes, j.time_limit, j.runtime) for j in read_drevt_csv(trace).jobs]
    assert seed_pseudocode.run(policy, jobs, 100) == expected(policy, trace)
