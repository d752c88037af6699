"""A job wider than the machine: each interface names the file, the line and its own way to skip it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig

from sim import Cluster
from sim.core import InputError, Job, rigid_job
from sim.engine import OversizedJobError, validate_jobs
from sweeps import task
from sweeps._hydra import task_config
from tests.conftest import REPO

WIDE = "job_submit_time,num_nodes,time_limit\n0,5,10\n\n0,50,10\n"  # job 1 on line 4


@pytest.fixture
def sweep_config() -> Iterator[None]:
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        yield
    GlobalHydra.instance().clear()


def test_library_message_names_the_keyword() -> None:
    with pytest.raises(OversizedJobError) as info:
        validate_jobs([rigid_job(0, 0, 4, 10), rigid_job(7, 0, 50, 10)], Cluster.nodes(10))
    assert str(info.value) == "job 7 needs nodes=50 but the machine has nodes=10; drop_oversized=True skips such jobs"
    assert info.value.job_id == 7


def test_multi_machine_message_gives_the_largest_capacities() -> None:
    cluster = Cluster(("cpu", "mem"), ((4, 8), (2, 16)))
    with pytest.raises(OversizedJobError, match=r"needs cpu=3, mem=12 but no machine has more than cpu=4, mem=16"):
        validate_jobs([Job(0, 0.0, (3, 12), 1.0, 1.0)], cluster)


def test_sweep_message_names_file_line_and_the_config_key(sweep_config: None, tmp_path: Path) -> None:
    trace = tmp_path / "wide.csv"
    trace.write_text(WIDE)
    cfg = compose("config", overrides=["workload=drevt_csv", f"workload.path={trace}", "cluster.nodes=10"],
                  return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    with pytest.raises(InputError) as info:
        task.run_one(task_config(cfg))
    assert str(info.value) == (
        f"{trace}:4: job 1 needs nodes=50 but the machine has nodes=10; engine.drop_oversized=true skips such jobs")
