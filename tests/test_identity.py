"""Resume notices what changed: a finished run is reused only with today's config, input files and
simulator code (``sweep.reuse=same``); ``sweep.reuse=any`` trusts the config alone.

Most sweeps here drive :class:`sweeps.planner.Planner` in this process (what schedlab's launcher does
with each batch); one goes through ``sweeps/run.py`` to check what it prints.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, open_dict

from sweeps import identity, task, tracking
from sweeps.identity import SIM_ROOT, CodeHasher, InputHasher, code_fingerprint, schedlab_sources
from sweeps.planner import InvalidSweepError, Planner, Run
from sweeps.record import RunReport
from sweeps.tracking import MlflowStore
from tests.conftest import REPO
from tests.test_sweeper import ENV, RUN, runs, sqlite_uri

#: three jobs on a 16-node machine (SWF: id submit wait run procs cpu mem req_procs req_time …)
TRACE = ("; MaxNodes: 16\n"
         "1 0 -1 100 4 -1 -1 4 200 -1 1 1 1 1 1 -1 -1 -1\n"
         "2 10 -1 50 16 -1 -1 16 60 -1 1 1 1 1 1 -1 -1 -1\n"
         "3 20 -1 30 8 -1 -1 8 40 -1 1 1 1 1 1 -1 -1 -1\n")
EXPERIMENT = "identity-test"


@pytest.fixture()
def conf() -> Iterator[None]:
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        yield
    GlobalHydra.instance().clear()


def write_trace(folder: Path) -> Path:
    """``folder`` with the trace ``traces/x.swf`` in it."""
    (folder / "traces").mkdir()
    (folder / "traces" / "x.swf").write_text(TRACE)
    return folder


@pytest.fixture()
def trace_dir(tmp_path: Path) -> Path:
    return write_trace(tmp_path)


def trace_runs(cwd: Path, *overrides: str, policies: tuple[str, ...] = ("easy", "fcfs")) -> list[list[str]]:
    """One run per policy of the trace ``traces/x.swf`` under ``cwd``, recorded in ``cwd``'s store."""
    common = ["workload=swf", "workload.path=traces/x.swf", f"workload.base_dir={cwd}", "cluster=from_trace",
              f"tracking.uri={sqlite_uri(cwd)}", f"tracking.artifact_root={cwd}/mlartifacts",
              f"experiment_name={EXPERIMENT}", *overrides]
    return [[f"policy={p}", *common] for p in policies]


def drive(override_lists: list[list[str]], sweep: DictConfig | None = None) -> tuple[list[str | None], Planner]:
    """A sweep through the tracker, in this process: validate, plan, run and record what the plan keeps.

    ``sweep`` is the sweep's own config (:func:`multirun_config`); by default the first run's."""
    tracker = Planner(summary=False)
    planned = []
    for index, overrides in enumerate(override_lists):
        cfg = compose("config", overrides=overrides, return_hydra_config=True)
        HydraConfig.instance().set_config(cfg)
        planned.append((cfg, Run.of(cfg, index)))
    tracker.plan(sweep if sweep is not None else planned[0][0], [run for _, run in planned])
    decisions = [run.result for _, run in planned]
    for _, run in planned:
        if run.result is None:
            run_here(tracker, run)
    tracker.close()
    return decisions, tracker


def run_here(tracker: Planner, run: Run) -> None:
    """Claim, simulate and record a planned run in this process, as the serial launcher does."""
    assert tracker.claim(run) is None
    tracker.ended(run, RunReport("FINISHED", task.run_one(run.plain), node_id="test", end_time=1.0))


def multirun_config(*task_overrides: str) -> DictConfig:
    """The config a ``-m`` command line gives the driver: its raw overrides (sweeps included)."""
    cfg = compose("config", return_hydra_config=True)
    with open_dict(cfg.hydra):
        cfg.hydra.mode = RunMode.MULTIRUN
        cfg.hydra.overrides.task = list(task_overrides)
    return cfg


def test_fingerprint_is_what_the_python_sources_mean(tmp_path: Path) -> None:
    """Same sources anywhere ⇒ same fingerprint; a README, any non-Python file, a comment, a blank line or a
    docstring leave it; a .py edit that changes code changes it."""
    copy = tmp_path / "sim"
    shutil.copytree(SIM_ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = code_fingerprint(copy)
    assert before == code_fingerprint(SIM_ROOT)  # a checkout elsewhere: same code, same runs
    (tmp_path / "README.md").write_text("# edited\n")
    (copy / "NOTES.md").write_text("not code\n")
    (copy / "policies" / "data.json").write_text("{}")
    assert code_fingerprint(copy) == before
    policy = copy / "policies" / "backfill.py"
    text = policy.read_text()
    policy.write_text("# a comment\n\n" + text.replace('"""', '"""Reworded. ', 1) + "\n# a changed policy\n")
    assert code_fingerprint(copy) == before
    policy.write_text(text + "\nTUNED = 2\n")
    assert code_fingerprint(copy) != before


def test_source_digest_ignores_docstrings_comments_and_layout(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    digests = []
    for text in ['"""Doc."""\ndef f(x):\n    """Adds one."""\n    return x + 1\n',
                 '# note\n\ndef f(x):  # inline\n    return (x +\n            1)\n',
                 'def f(x):\n    return x + 2\n',
                 'def f(x):\n    "a first string: a docstring"\n    return x + 2\n']:
        source.write_text(text)
        digests.append(identity.source_digest(source))
    assert digests[0] == digests[1] != digests[2] == digests[3]  # a function's first string is its docstring
    source.write_text("def broken(:\n")
    assert identity.source_digest(source) == identity.sha256_file(source)  # not Python: its bytes


def test_a_policys_code_includes_the_modules_of_theirs_it_imports(tmp_path: Path, monkeypatch) -> None:
    """A helper module beside the policy's package on the path (``myutil.py`` imported by
    ``fairbf/policy.py``) and what that imports in turn, absolute or relative, are part of the run's code;
    editing one reruns (and names it), editing a comment in one does not."""
    (tmp_path / "fairbf").mkdir()
    (tmp_path / "fairbf" / "__init__.py").write_text("")
    (tmp_path / "fairbf" / "policy.py").write_text(
        "import json\nimport numpy\nfrom . import shared\nimport myutil\n\n\nclass Fair:\n    def key(self):\n"
        "        from deeper.inner import weight  # imported where it is used\n        return weight\n")
    (tmp_path / "fairbf" / "shared.py").write_text("A = 1\n")
    (tmp_path / "myutil.py").write_text("from sim.core import Job\n\nSLACK = 1.5\n")
    (tmp_path / "deeper").mkdir()
    (tmp_path / "deeper" / "__init__.py").write_text("")
    (tmp_path / "deeper" / "inner.py").write_text("from .more import WEIGHT as weight\n")
    (tmp_path / "deeper" / "more.py").write_text("WEIGHT = 3\n")
    (tmp_path / "unused.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    identity.own_package.cache_clear()
    code = CodeHasher().code(["fairbf.policy.Fair"])
    theirs = set(code.files) - set(schedlab_sources())
    assert theirs == {"fairbf/__init__.py", "fairbf/policy.py", "fairbf/shared.py", "myutil.py",
                      "deeper/__init__.py", "deeper/inner.py", "deeper/more.py"}
    assert identity.places(identity.own_modules("fairbf.policy.Fair")) == {tmp_path / "fairbf", tmp_path / "myutil.py",
                                                         tmp_path / "deeper"}
    (tmp_path / "myutil.py").write_text("# only a comment added\nfrom sim.core import Job\n\nSLACK = 1.5\n")
    assert CodeHasher().code(["fairbf.policy.Fair"]) == code
    (tmp_path / "myutil.py").write_text("from sim.core import Job\n\nSLACK = 2.0\n")
    edited = CodeHasher().code(["fairbf.policy.Fair"])
    assert identity.changed_files(code.manifest, edited.files) == ["myutil.py"]
    (tmp_path / "deeper" / "more.py").write_text("WEIGHT = 4\n")
    assert identity.changed_files(edited.manifest, CodeHasher().code(["fairbf.policy.Fair"]).files) == [
        "deeper/more.py"]


def test_a_runs_code_is_the_simulator_the_sweeps_modules_it_runs_and_its_own_packages(tmp_path: Path,
                                                                                     monkeypatch) -> None:
    """schedlab's part (sim/, sweeps/specs.py, sweeps/task.py) is every run's; a target in the researcher's
    package adds all of that package's sources; installed and standard-library targets add nothing."""
    ours = schedlab_sources()
    assert {"sweeps/specs.py", "sweeps/task.py", "sim/engine.py"} <= set(ours)
    assert not any(name.startswith(("sweeps/planner", "analysis/", "hydra_plugins/")) for name in ours)
    package = tmp_path / "labpol"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "fast.py").write_text("class Fast: ...\n")
    (package / "helpers.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    hasher = CodeHasher()
    easy = hasher.code(["sim.policies.backfill.SeedBackfill", "sweeps.specs.NodeCluster"])
    assert easy.files == ours
    mine = hasher.code(["labpol.sub.fast.Fast", "sweeps.specs.NodeCluster"])
    assert set(mine.files) - set(ours) == {"labpol/__init__.py", "labpol/sub/__init__.py", "labpol/sub/fast.py",
                                           "labpol/helpers.py"}
    assert CodeHasher().code(["labpol.sub.fast:Fast"]) == mine  # module:Class names the same package
    assert hasher.code(["numpy.random.default_rng", "collections.OrderedDict"]).files == ours
    (package / "helpers.py").write_text("X = 2\n")  # any file of the package, not only the target's module
    edited = CodeHasher().code(["labpol.sub.fast.Fast"])
    assert edited.digest != mine.digest
    assert identity.changed_files(mine.manifest, edited.files) == ["labpol/helpers.py"]


def test_inputs_hash_each_file_read_once(tmp_path: Path) -> None:
    a, b = tmp_path / "a.swf", tmp_path / "b.swf"
    a.write_text(TRACE)
    b.write_text(TRACE)
    hasher = InputHasher()
    one, two = hasher.inputs({"a.swf": a}), hasher.inputs({"b.swf": b})
    assert one.files["a.swf"] == two.files["b.swf"] and one.digest != two.digest  # names are part of it
    a.write_text(TRACE + "4 30 -1 10 1 -1 -1 1 20 -1 1 1 1 1 1 -1 -1 -1\n")
    assert hasher.inputs({"a.swf": a}) == one  # one sweep reads each file once
    assert InputHasher().inputs({"a.swf": a}).digest != one.digest


def test_edited_trace_is_rerun_and_named(conf: None, trace_dir: Path) -> None:
    first, _ = drive(trace_runs(trace_dir))
    assert first == [None, None]
    again, tracker = drive(trace_runs(trace_dir))
    assert all(r and str(r).startswith(f"finished in MLflow run {r.run_id}") for r in again) and tracker.notes() == []
    trace = trace_dir / "traces" / "x.swf"
    trace.write_text(trace.read_text().replace("1 0 -1 100 4", "1 0 -1 900 4"))  # in place: job 1 runs longer
    edited, tracker = drive(trace_runs(trace_dir))
    assert edited == [None, None]
    assert tracker.notes() == ["2 reran: input file changed: traces/x.swf"]
    found = runs(sqlite_uri(trace_dir), EXPERIMENT)
    assert len(found) == 4 and len({r.data.tags["schedlab.inputs"] for r in found}) == 2
    makespans = {r.data.metrics["makespan"] for r in found if r.data.params["policy"] == "easy"}
    assert len(makespans) == 2  # the rerun has the edited trace's numbers


def test_changed_code_is_rerun_unless_reuse_any(conf: None, trace_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    drive(trace_runs(trace_dir))
    before = {r.data.tags["schedlab.code"] for r in runs(sqlite_uri(trace_dir), EXPERIMENT)}
    edited = {**schedlab_sources(), "sim/engine.py": "0" * 64}  # as if sim/engine.py had been edited
    monkeypatch.setattr(identity, "schedlab_sources", lambda: edited)
    trusted, tracker = drive(trace_runs(trace_dir, "sweep.reuse=any"))
    assert all(r and str(r).startswith(f"finished in MLflow run {r.run_id}") for r in trusted) and tracker.notes() == []
    changed, tracker = drive(trace_runs(trace_dir))
    assert changed == [None, None] and tracker.notes() == ["2 reran: code changed: sim/engine.py"]
    every = runs(sqlite_uri(trace_dir), EXPERIMENT)
    codes = {r.data.tags["schedlab.code"] for r in every}
    assert len(before) == 1 and codes == before | {CodeHasher().code([]).digest}
    old = [r for r in every if r.data.tags["schedlab.code"] in before]  # replaced: marked where the UI shows them
    new = {r.info.run_id for r in every if r not in old}
    assert len(old) == 2 and {r.data.tags["schedlab.superseded_by"] for r in old} == new
    assert all(r.info.run_name.endswith(" (superseded)") for r in old)
    client = MlflowClient(sqlite_uri(trace_dir))
    current = client.search_runs([old[0].info.experiment_id], filter_string=tracking.CURRENT_RUNS)
    assert {r.info.run_id for r in current} == new  # what the printed link shows
    resumed, _ = drive(trace_runs(trace_dir))  # the new code's runs are now the ones reused
    assert all(r and str(r).startswith(f"finished in MLflow run {r.run_id}") for r in resumed)


def test_runs_without_fingerprints_are_rerun_and_say_so(conf: None, trace_dir: Path) -> None:
    drive(trace_runs(trace_dir, policies=("easy",)))
    [old] = runs(sqlite_uri(trace_dir), EXPERIMENT)
    MlflowClient(sqlite_uri(trace_dir)).delete_tag(old.info.run_id, "schedlab.code")  # as logged before tags
    decisions, tracker = drive(trace_runs(trace_dir, policies=("easy",)))
    assert decisions == [None] and tracker.notes() == ["1 reran: recorded without code and input fingerprints"]


def test_recorded_identity_tags(conf: None, trace_dir: Path) -> None:
    drive(trace_runs(trace_dir, policies=("easy",)))
    [run] = runs(sqlite_uri(trace_dir), EXPERIMENT)
    tags = run.data.tags
    digest = InputHasher().inputs({"traces/x.swf": trace_dir / "traces" / "x.swf"})
    code = CodeHasher().code(run.data.tags[f"schedlab.target.{group}"] for group in ("cluster", "workload", "policy"))
    assert tags["schedlab.code"] == code.digest and tags["schedlab.code_files"] == code.manifest
    assert tags["schedlab.inputs"] == digest.digest
    assert tags["schedlab.input_files"] == digest.manifest


def test_wfformat_folder_inputs_are_its_instance_files(tmp_path: Path) -> None:
    from sweeps.specs import WfFormatFolder

    (tmp_path / "wf").mkdir()
    for name in ("b.json", "a.json"):
        (tmp_path / "wf" / name).write_text("{}")
    (tmp_path / "wf" / "README.txt").write_text("not read")
    spec = WfFormatFolder(path="wf", base_dir=str(tmp_path), jobs=10, warmup=0)
    assert list(spec.input_files()) == ["wf/a.json", "wf/b.json"]
    assert spec.stochastic  # each arrival draws an instance with the seed's generator
    before = InputHasher().inputs(spec.input_files())
    (tmp_path / "wf" / "README.txt").write_text("edited")
    assert InputHasher().inputs(spec.input_files()) == before
    (tmp_path / "wf" / "b.json").write_text('{"edited": 1}')
    assert InputHasher().inputs(spec.input_files()).digest != before.digest


def test_bad_reuse_value_is_one_message(conf: None, trace_dir: Path) -> None:
    with pytest.raises(InvalidSweepError, match=r"sweep\.reuse must be one of same, any .*got 'sometimes'"):
        drive(trace_runs(trace_dir, "sweep.reuse=sometimes"))


def test_sweep_prints_how_many_reran_and_why(trace_dir: Path) -> None:
    """Through ``sweeps/run.py`` (basic launcher): an in-place trace edit between two sweeps is rerun."""
    def sweep() -> str:
        proc = subprocess.run([sys.executable, str(RUN), "-m", "hydra/launcher=serial", "workload=swf",
                               "workload.path=traces/x.swf", "cluster=from_trace", "policy=easy,fcfs", "seed=0"],
                              cwd=trace_dir, env=ENV, capture_output=True, text=True, timeout=180)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout

    sweep()
    trace = trace_dir / "traces" / "x.swf"
    trace.write_text(trace.read_text().replace("3 20 -1 30 8", "3 20 -1 70 8"))
    out = sweep()
    assert "2 reran: input file changed: traces/x.swf" in out and "already recorded" not in out
    assert len(runs(sqlite_uri(trace_dir))) == 4  # an ad-hoc command line: schedlab-adhoc


def in_process_job(tracker: Planner, index: int, overrides: list[str]) -> str | None:
    """Job ``index`` as Hydra's basic launcher drives the tracker: composed, checked, planned and, when the
    plan runs it, recorded; the plan's decision (``None``: it ran)."""
    cfg = compose("config", overrides=overrides, return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    run = Run.of(cfg, index)
    tracker.plan(cfg, [run])
    decision = run.result
    if decision is None:
        run_here(tracker, run)
    return decision


def test_each_in_process_run_is_recorded_in_its_own_experiment(conf: None, trace_dir: Path) -> None:
    """As Hydra's basic launcher drives the tracker, a job at a time: a job naming another experiment
    (``experiment_name=run-${seed}``) is recorded there, not in the first job's."""
    tracker = Planner(summary=False)
    for index, (name, policy) in enumerate([("identity-a", "easy"), ("identity-b", "fcfs")]):
        overrides = [o.replace(f"={EXPERIMENT}", f"={name}") for o in trace_runs(trace_dir, policies=(policy,))[0]]
        assert in_process_job(tracker, index, overrides) is None
    assert [len(runs(sqlite_uri(trace_dir), name)) for name in ("identity-a", "identity-b")] == [1, 1]


def test_in_process_jobs_search_the_store_once_per_sweep(conf: None, trace_dir: Path) -> None:
    """Hydra's basic launcher plans its jobs one at a time: the tracker searches a store's runs once per
    sweep (each job searching again made a resume quadratic in N), and a second sweep still skips them all.
    A run it claims looks up its own key alone (one indexed search per run run)."""
    jobs = trace_runs(trace_dir, policies=("easy", "fcfs", "conservative"))
    for sweep_number in (1, 2):
        tracker = Planner(summary=False)
        search_runs = mock.patch.object(MlflowStore, "runs_by_key", autospec=True, side_effect=MlflowStore.runs_by_key)
        with search_runs as search:
            decisions = [in_process_job(tracker, index, overrides) for index, overrides in enumerate(jobs)]
        whole = [call for call in search.call_args_list if len(call.args) == 1 and not call.kwargs]
        assert len(whole) == 1 and search.call_count == 1 + (len(jobs) if sweep_number == 1 else 0)
        assert [d is None for d in decisions] == [sweep_number == 1] * len(jobs)
    assert len(runs(sqlite_uri(trace_dir), EXPERIMENT)) == len(jobs)
