"""``python -m sim``: schedule CSV in input order, summary on stdout, clear errors with exit 2."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from sim.__main__ import main
from tests.conftest import REPO, real_trace


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_writes_schedule_in_input_order(tmp_path: Path, capsys) -> None:
    trace = write(tmp_path / "t.csv", "job_submit_time,num_nodes,time_limit\n10,50,300\n0,70,200\n20,20,50\n")
    out = tmp_path / "schedule.csv"
    assert main([str(trace), "--nodes", "100", "--policy", "easy", "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [(r["job_id"], r["start_time"], r["end_time"]) for r in rows] == [
        ("0", "200", "500"), ("1", "0", "200"), ("2", "20", "70")]
    printed = capsys.readouterr().out
    assert "wait/mean" in printed and "util" in printed


def test_bad_input_exits_2_with_one_clear_line(tmp_path: Path) -> None:
    trace = write(tmp_path / "bad.csv", "job_submit_time,num_nodes,time_limit\n0,abc,10\n")
    done = subprocess.run([sys.executable, "-m", "sim", str(trace), "--nodes", "10", "--policy", "easy"],
                          cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("error: ") and "bad.csv:2" in done.stderr and "num_nodes" in done.stderr


def test_job_wider_than_machine_names_file_line_and_the_cli_flag(tmp_path: Path, capsys) -> None:
    trace = write(tmp_path / "wide.csv", "job_submit_time,num_nodes,time_limit\n0,5,10\n\n0,50,10\n")
    assert main([str(trace), "--nodes", "10", "--policy", "fcfs"]) == 2
    assert capsys.readouterr().err == (
        f"error: {trace}:4: job 1 needs nodes=50 but the machine has nodes=10; --drop-oversized skips such jobs\n")
    assert main([str(trace), "--nodes", "10", "--policy", "fcfs", "--drop-oversized"]) == 0
    assert "dropped_oversized = 1" in capsys.readouterr().out


def test_swf_header_gives_machine_size(tmp_path: Path) -> None:
    out = tmp_path / "kth.csv"
    trace = real_trace("KTH-SP2-1996-2.1-cln.swf")
    done = subprocess.run([sys.executable, "-m", "sim", str(trace), "--policy", "easy", "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "on 100 nodes" in done.stdout
    assert sum(1 for _ in out.open()) - 1 == int(done.stdout.split(": ")[1].split()[0])


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sim", *args], cwd=REPO, capture_output=True, text=True, timeout=60)


def small_trace(tmp_path: Path, runtime: str = "100") -> Path:
    return write(tmp_path / "t.csv", f"job_submit_time,num_nodes,time_limit,actual_run_time\n0,4,200,{runtime}\n")


def test_nodes_zero_is_refused_not_replaced_by_the_header(tmp_path: Path) -> None:
    done = run_cli(str(small_trace(tmp_path)), "--policy", "easy", "--nodes", "0")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "error: --nodes: expected a machine size ≥ 1, got 0\n"


def test_out_in_a_missing_folder_fails_before_reading_or_simulating(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr("sim.__main__.load_trace", lambda *_: pytest.fail("read the trace before checking --out"))
    out = tmp_path / "missing" / "x.csv"
    assert main([str(small_trace(tmp_path)), "--policy", "easy", "--out", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"error: --out {out}: folder {out.parent} does not exist (create it first)\n")
    assert main([str(small_trace(tmp_path)), "--policy", "easy", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith(f"error: --out {tmp_path}: is a folder")


def test_non_physical_run_time_is_one_line(tmp_path: Path) -> None:
    trace = small_trace(tmp_path, "1e300")
    done = run_cli(str(trace), "--policy", "easy", "--nodes", "10")
    assert done.returncode == 2 and done.stdout == "" and done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"error: {trace}:2: column 'actual_run_time': ") and "1e300" in done.stderr


@pytest.mark.parametrize("args", [["--nodes", "abc"], ["--bogus"]])
def test_bad_options_are_one_line_with_status_2(tmp_path: Path, args: list[str]) -> None:
    done = run_cli(str(small_trace(tmp_path)), "--policy", "easy", *args)
    assert done.returncode == 2 and done.stdout == "" and done.stderr.count("\n") == 1
    assert done.stderr.startswith("error: ") and done.stderr.endswith("(see python -m sim --help)\n")
