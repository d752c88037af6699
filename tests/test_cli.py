"""``python -m sim``: schedule CSV in input order, summary on stdout, clear errors with exit 2."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

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


def test_job_wider_than_machine_is_named(tmp_path: Path, capsys) -> None:
    trace = write(tmp_path / "wide.csv", "job_submit_time,num_nodes,time_limit\n0,5,10\n0,50,10\n")
    assert main([str(trace), "--nodes", "10", "--policy", "fcfs"]) == 2
    assert "job 1" in capsys.readouterr().err
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
