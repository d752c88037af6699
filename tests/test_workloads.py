"""Trace readers: every parsing rule on a tiny hand-written file, then the real reference traces."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.core import InputError, Job, Workload, rigid_job
from sim.workloads import load_trace, read_drevt_csv, read_jobs_csv, read_swf, write_jobs_csv
from sim.workloads.errors import ARCHIVE_URL
from tests.conftest import DREVT, find_trace, needs_trace


def record(**fields: object) -> str:
    """One SWF record; keyword ``fN`` overrides field N of a valid default job."""
    values: list[object] = [1, 0, -1, 100, 4, -1, -1, 4, 200, -1, 1, 7, 1, -1, -1, -1, -1, -1]
    for key, value in fields.items():
        values[int(key[1:]) - 1] = value
    return " ".join(map(str, values))


def write(tmp_path: Path, name: str, *lines: str) -> Path:
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines))
    return path


#: how every reader words a time outside [0, MAX_SECONDS]
TIME_RANGE = "expected a time in seconds, 0 ≤ t ≤ 1e+10 (about 317 years)"


def error_of(reader, path: Path) -> str:
    with pytest.raises(InputError) as info:
        reader(path)
    return str(info.value)


# --- SWF ---------------------------------------------------------------------------------------


def test_swf_maps_fields_and_header(tmp_path: Path) -> None:
    path = write(tmp_path, "t.swf", "; MaxNodes: 64", "; MaxProcs: 128", record(),
                 record(f1=2, f2=30, f4=50, f5=2, f8=2, f9=60, f12=9))
    workload = read_swf(path)
    assert workload.jobs == [Job(1, 0.0, (4,), 200.0, 100.0, user="7"), Job(2, 30.0, (2,), 60.0, 50.0, user="9")]
    assert workload.default_nodes == 64
    assert workload.source == str(path)
    assert workload.notes == {}


@pytest.mark.parametrize(("header", "expected"), [(["; MaxProcs: 128"], 128), ([], None),
                                                  (["; MaxNodes: -1", "; MaxProcs: 32 (partition)"], 32)])
def test_swf_default_nodes_falls_back_to_maxprocs(tmp_path: Path, header: list[str], expected: int | None) -> None:
    assert read_swf(write(tmp_path, "t.swf", *header, record())).default_nodes == expected


def test_swf_nodes_from_allocated_when_requested_unknown(tmp_path: Path) -> None:
    workload = read_swf(write(tmp_path, "t.swf", record(f5=8, f8=-1)))
    assert workload.jobs[0].nodes == 8
    assert workload.notes == {"nodes_from_allocated": 1}


@pytest.mark.parametrize(("fields", "note"), [({"f5": -1, "f8": -1}, "skipped_no_nodes"),
                                              ({"f5": 0, "f8": 0}, "skipped_no_nodes"),
                                              ({"f4": -1}, "skipped_no_runtime"),
                                              ({"f4": -1, "f5": -1, "f8": -1}, "skipped_no_nodes")])
def test_swf_skips_jobs_without_nodes_or_runtime(tmp_path: Path, fields: dict[str, int], note: str) -> None:
    workload = read_swf(write(tmp_path, "t.swf", record(f1=1), record(f1=2, **fields)))
    assert [job.id for job in workload.jobs] == [1]
    assert workload.notes == {note: 1}


@pytest.mark.parametrize("requested_time", [-1, 0])
def test_swf_time_limit_from_runtime_without_request(tmp_path: Path, requested_time: int) -> None:
    workload = read_swf(write(tmp_path, "t.swf", record(f4=77, f9=requested_time)))
    assert workload.jobs[0].time_limit == workload.jobs[0].runtime == 77
    assert workload.notes == {"time_limit_from_runtime": 1}


def test_swf_keeps_zero_runtime_overruns_unknown_user_and_unsorted_submits(tmp_path: Path) -> None:
    path = write(tmp_path, "t.swf", record(f1=1, f2=500, f4=0), record(f1=2, f2=10, f4=300, f9=200, f12=-1))
    workload = read_swf(path)
    assert [(job.submit, job.runtime, job.time_limit, job.user) for job in workload.jobs] == [
        (500.0, 0.0, 200.0, "7"), (10.0, 300.0, 200.0, "")]
    assert workload.notes == {"runtime_over_limit": 1}


def test_swf_reads_gzip(tmp_path: Path) -> None:
    path = tmp_path / "t.swf.gz"
    path.write_bytes(gzip.compress(f"; MaxNodes: 16\n{record()}\n".encode()))
    assert read_swf(path).jobs == [Job(1, 0.0, (4,), 200.0, 100.0, user="7")]


@pytest.mark.parametrize(("line", "message"), [
    (record(f1=2, f5="abc"), "field 5 (allocated processors): expected an integer, got 'abc'"),
    (record(f1=2, f8=4.5), "field 8 (requested processors): expected an integer, got '4.5'"),
    (record(f1=2, f4="nan"), "field 4 (run time): expected a number, got 'nan'"),
    (record(f1=2, f2=-5), "field 2 (submit time): expected a time ≥ 0, got '-5'"),
    (record(f1=2, f4="1e300"), f"field 4 (run time): {TIME_RANGE}, got '1e300'"),
    (record(f1=2, f9="2e10"), f"field 9 (requested time): {TIME_RANGE}, got '2e10'"),
    (record(f1=2) + " 0", "expected 18 whitespace-separated fields, got 19"),
    (record(f1=2).rsplit(" ", 1)[0], "expected 18 whitespace-separated fields, got 17"),
])
def test_swf_bad_record_names_file_line_and_field(tmp_path: Path, line: str, message: str) -> None:
    path = write(tmp_path, "bad.swf", "; MaxNodes: 8", record(f1=1), line)
    assert error_of(read_swf, path) == f"{path}:3: {message}"


def test_swf_duplicate_job_number(tmp_path: Path) -> None:
    path = write(tmp_path, "t.swf", record(), record())
    assert error_of(read_swf, path) == f"{path}:2: field 1 (job number): duplicate job number 1 (first on line 1)"


def test_swf_bad_header(tmp_path: Path) -> None:
    path = write(tmp_path, "t.swf", "; MaxNodes: lots", record())
    assert error_of(read_swf, path) == f"{path}:1: header MaxNodes: expected an integer, got 'lots'"


@pytest.mark.parametrize("lines", [[], ["; MaxNodes: 8", ""]])
def test_swf_without_records_is_an_error(tmp_path: Path, lines: list[str]) -> None:
    path = write(tmp_path, "t.swf", *lines)
    assert error_of(read_swf, path) == f"{path}: no jobs: the file has no job records (only comments or blank lines)"


def test_swf_with_no_usable_record_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "t.swf", record(f5=-1, f8=-1), record(f1=2, f4=-1))
    assert error_of(read_swf, path) == (
        f"{path}: no usable jobs: all 2 records were skipped (skipped_no_nodes=1, skipped_no_runtime=1)")


def test_swf_drop_invalid_skips_and_counts_bad_records(tmp_path: Path) -> None:
    path = write(tmp_path, "t.swf", record(f1=1), record(f1=2, f5="x"), record(f1=3, f2=-1), "1 2 3", record(f1=1),
                 record(f1=4))
    workload = read_swf(path, drop_invalid=True)
    assert [job.id for job in workload.jobs] == [1, 4]
    assert workload.notes == {"dropped_invalid": 4}


@pytest.mark.parametrize(("name", "jobs", "nodes", "notes"), [
    pytest.param(name, *counts, marks=needs_trace(name), id=name) for name, *counts in [
        ("KTH-SP2-1996-2.1-cln.swf", 28_475, 100, {"skipped_no_nodes": 1, "runtime_over_limit": 475}),
        ("NASA-iPSC-1993-3.1-cln.swf", 18_239, 128,
         {"nodes_from_allocated": 18_239, "time_limit_from_runtime": 18_239}),
        ("lublin_256.swf", 10_000, 256, {"nodes_from_allocated": 10_000, "time_limit_from_runtime": 10_000}),
    ]])
def test_real_swf_traces(name: str, jobs: int, nodes: int, notes: dict[str, int]) -> None:
    workload = read_swf(find_trace(name))
    assert (len(workload.jobs), workload.default_nodes, workload.notes) == (jobs, nodes, notes)
    assert all(0 < job.nodes <= nodes and job.runtime >= 0 and job.time_limit >= 0 for job in workload.jobs)


# --- DR_EVT CSV --------------------------------------------------------------------------------

DREVT_EXPECTED = "job_submit_time, num_nodes, time_limit (optional: actual_run_time)"


def test_drevt_ids_are_row_indices_and_runtime_defaults_to_limit(tmp_path: Path) -> None:
    path = write(tmp_path, "t.csv", "job_submit_time,num_nodes,exit_status,queue,time_limit,actual_run_time",
                 "0,70,0,pbatch,200,150", "", "10,45,0,pbatch,300,")
    workload = read_drevt_csv(path)
    assert workload.jobs == [rigid_job(0, 0, 70, 200, 150), rigid_job(1, 10, 45, 300, 300)]
    assert workload.notes == {"runtime_from_time_limit": 1}


def test_drevt_without_runtime_column(tmp_path: Path) -> None:
    workload = read_drevt_csv(write(tmp_path, "t.csv", " time_limit , num_nodes,job_submit_time", "5, 2, 1.5"))
    assert workload.jobs == [rigid_job(0, 1.5, 2, 5, 5)]
    assert workload.notes == {"runtime_from_time_limit": 1}


@pytest.mark.parametrize(("row", "message"), [
    ("x,4,10", f"column 'job_submit_time': {TIME_RANGE}, got 'x'"),
    ("-1,4,10", f"column 'job_submit_time': {TIME_RANGE}, got '-1'"),
    ("0,0,10", "column 'num_nodes': expected an integer ≥ 1, got '0'"),
    ("0,-3,10", "column 'num_nodes': expected an integer ≥ 1, got '-3'"),
    ("0,2.5,10", "column 'num_nodes': expected an integer ≥ 1, got '2.5'"),
    ("0,4,-10", f"column 'time_limit': {TIME_RANGE}, got '-10'"),
    ("0,4,inf", f"column 'time_limit': {TIME_RANGE}, got 'inf'"),
    ("0,4,1e300", f"column 'time_limit': {TIME_RANGE}, got '1e300'"),
    ("1e11,4,10", f"column 'job_submit_time': {TIME_RANGE}, got '1e11'"),
    ("0,4", "expected 3 comma-separated cells as in the header, got 2"),
])
def test_drevt_bad_value_names_file_line_and_column(tmp_path: Path, row: str, message: str) -> None:
    path = write(tmp_path, "t.csv", "job_submit_time,num_nodes,time_limit", "0,1,1", row)
    assert error_of(read_drevt_csv, path) == f"{path}:3: {message}"


def test_drevt_missing_column_lists_expected(tmp_path: Path) -> None:
    path = write(tmp_path, "t.csv", "job_submit_time,nodes,time_limit", "0,1,1")
    assert error_of(read_drevt_csv, path) == (
        f"{path}:1: missing column 'num_nodes': expected columns {DREVT_EXPECTED}; "
        "found job_submit_time, nodes, time_limit")


@pytest.mark.parametrize(("lines", "message"), [
    ([], f"empty file: expected a header line with columns {DREVT_EXPECTED}"),
    (["job_submit_time,num_nodes,time_limit", ""], "no jobs: the file has a header but no job rows"),
])
def test_drevt_empty_file(tmp_path: Path, lines: list[str], message: str) -> None:
    path = write(tmp_path, "t.csv", *lines)
    assert error_of(read_drevt_csv, path) == f"{path}: {message}"


@pytest.mark.parametrize("name", sorted(p.name for p in (DREVT / "traces").glob("*.csv")))
def test_drevt_reference_traces_match_reference_schedule(name: str) -> None:
    """The reference output lists each job's submit, nodes, limit (``duration``) and run (end − start)."""
    workload = read_drevt_csv(DREVT / "traces" / name)
    with open(DREVT / "expected_easy" / name, newline="") as stream:
        expected = list(csv.DictReader(stream))
    assert len(workload.jobs) == len(expected) > 0
    for job, row in zip(workload.jobs, expected, strict=True):
        assert (job.id, job.submit, job.nodes, job.time_limit, job.runtime) == (
            int(row["job_idx"]), float(row["submit_time"]), int(row["nodes"]), float(row["duration"]),
            float(row["end_time"]) - float(row["start_time"]))


def test_drevt_reference_suite_has_36_traces() -> None:
    assert len(list((DREVT / "traces").glob("*.csv"))) == 36


# --- jobs CSV ----------------------------------------------------------------------------------

JOBS_HEADER = "job_id,submit_time,nodes,time_limit,actual_runtime"


def test_jobs_csv_reads_columns_in_any_order_with_optional_user(tmp_path: Path) -> None:
    path = write(tmp_path, "t.csv", "nodes,user,job_id,actual_runtime,time_limit,submit_time", "4,ann,7,30,60,2.5")
    assert read_jobs_csv(path).jobs == [Job(7, 2.5, (4,), 60.0, 30.0, user="ann")]


def test_jobs_csv_missing_column_lists_expected(tmp_path: Path) -> None:
    path = write(tmp_path, "t.csv", "job_id,submit_time,nodes,time_limit", "1,0,1,1")
    assert error_of(read_jobs_csv, path) == (
        f"{path}:1: missing column 'actual_runtime': expected columns {JOBS_HEADER.replace(',', ', ')} "
        "(optional: user); found job_id, submit_time, nodes, time_limit")


@pytest.mark.parametrize(("row", "message"), [
    ("1,0,1,1,1", "column 'job_id': duplicate id 1 (first on line 2)"),
    ("2,0,1,1,-1", f"column 'actual_runtime': {TIME_RANGE}, got '-1'"),
    ("2,0,1,1,1e300", f"column 'actual_runtime': {TIME_RANGE}, got '1e300'"),
    ("x,0,1,1,1", "column 'job_id': expected an integer ≥ 0, got 'x'"),
])
def test_jobs_csv_bad_rows(tmp_path: Path, row: str, message: str) -> None:
    path = write(tmp_path, "t.csv", JOBS_HEADER, "1,0,1,1,1", row)
    assert error_of(read_jobs_csv, path) == f"{path}:3: {message}"


times = st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False)


@st.composite
def workloads(draw: st.DrawFn) -> Workload:
    ids = draw(st.lists(st.integers(0, 2**62), min_size=1, max_size=20, unique=True))
    users = st.text(st.characters(blacklist_categories=["Cs"]), max_size=5) if draw(st.booleans()) else st.just("")
    return Workload([Job(i, draw(times), (draw(st.integers(1, 10_000)),), draw(times), draw(times), draw(users))
                     for i in ids])


@settings(max_examples=60, deadline=None)
@given(workload=workloads())
def test_jobs_csv_round_trip(tmp_path_factory: pytest.TempPathFactory, workload: Workload) -> None:
    path = tmp_path_factory.mktemp("rt") / "jobs.csv"
    write_jobs_csv(workload, path)
    assert read_jobs_csv(path).jobs == workload.jobs


def test_jobs_csv_accepts_byte_order_mark_and_integral_float_nodes(tmp_path: Path) -> None:
    path = tmp_path / "excel.csv"
    path.write_bytes(f"\ufeff{JOBS_HEADER}\r\n3,0,4.0,60,30\r\n".encode())
    assert read_jobs_csv(path).jobs == [rigid_job(3, 0, 4, 60, 30)]


def test_write_jobs_csv_refuses_jobs_it_cannot_represent(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    with pytest.raises(InputError, match=r"job 3: a jobs CSV holds rigid node-count jobs only"):
        write_jobs_csv(Workload([rigid_job(1, 0, 1, 1), Job(3, 0.0, (2.0, 4.0), 10.0, 10.0)]), path)
    assert not path.exists()


# --- load_trace --------------------------------------------------------------------------------


def test_load_trace_sniffs_format(tmp_path: Path) -> None:
    swf = write(tmp_path, "a.swf", record())
    gz = tmp_path / "a.swf.gz"
    gz.write_bytes(gzip.compress(swf.read_bytes()))
    drevt = write(tmp_path, "b.csv", "job_submit_time,num_nodes,time_limit", "0,3,9")
    jobs = write(tmp_path, "c.csv", '"job_id",submit_time,nodes,time_limit,actual_runtime', "5,0,3,9,9")
    assert [job.id for job in load_trace(swf).jobs] == [job.id for job in load_trace(gz).jobs] == [1]
    assert load_trace(drevt).jobs == [rigid_job(0, 0, 3, 9)]
    assert load_trace(jobs).jobs == [rigid_job(5, 0, 3, 9)]


def test_load_trace_explicit_format_overrides_name(tmp_path: Path) -> None:
    assert len(load_trace(write(tmp_path, "log.txt", record()), fmt="swf").jobs) == 1


@pytest.mark.parametrize(("name", "content", "message"), [
    ("x.txt", record(), "cannot tell the trace format from the name: expected .swf, .swf.gz or .csv; "
                        "pass fmt= one of swf, drevt_csv, jobs_csv"),
    ("x.csv", "a,b\n1,2", "cannot tell the CSV format: expected a header with job_submit_time (DR_EVT) "
                          "or job_id (jobs CSV); pass fmt= one of swf, drevt_csv, jobs_csv"),
])
def test_load_trace_unknown_format(tmp_path: Path, name: str, content: str, message: str) -> None:
    path = write(tmp_path, name, content)
    assert message in error_of(load_trace, path)


def test_load_trace_unknown_fmt_argument(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown trace format 'gwf': expected one of swf, drevt_csv, jobs_csv"):
        load_trace(write(tmp_path, "a.swf", record()), fmt="gwf")


@pytest.mark.parametrize("reader", [load_trace, read_swf, read_drevt_csv, read_jobs_csv])
def test_missing_file_points_to_the_archive(tmp_path: Path, reader) -> None:
    path = tmp_path / "KTH.swf"
    message = error_of(reader, path)
    assert message.startswith(f"{path}: trace file does not exist")
    assert ARCHIVE_URL in message
