"""``conf/policy`` is the one registry: every file builds through the loader, and every way of getting a
policy wrong — in a file, a ``package.module:Class`` or ``python -m sim`` — is one line."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from sim import Cluster, InputError, rigid_job, simulate
from sim.policies import BasePolicy, build_policy, check_policy_target, policy_from_conf
from sim.policies.loading import POLICY_CONF, PROTOCOL_MEMBERS, policy_config, policy_names, resolve_target
from tests.conftest import DREVT, REPO

HELPERS = "tests.policy_helpers"
TRACE = DREVT / "traces" / "01_backfill_allowed.csv"  # 100 nodes


@pytest.mark.parametrize("name", policy_names())
def test_every_policy_file_builds_a_policy(name: str) -> None:
    config = yaml.safe_load((POLICY_CONF / f"{name}.yaml").read_text())
    assert "name" not in config  # the label is the Hydra config choice
    assert config["_target_"].startswith("sim.policies.")
    policy = policy_from_conf(name)
    assert isinstance(policy, BasePolicy) and all(hasattr(policy, m) for m in PROTOCOL_MEMBERS)
    assert isinstance(policy.name, str) and policy.name


def test_the_policy_names_are_the_files() -> None:
    assert policy_names() == sorted(p.stem for p in POLICY_CONF.glob("*.yaml"))
    assert {"fcfs", "easy", "conservative", "easy_classic", "conservative_classic", "drf", "rmdcwf"} <= set(
        policy_names())


def test_options_update_the_file() -> None:
    policy = policy_from_conf("easy", order="sjf", backfill_order="widest")
    assert (policy.window, policy.order, policy.name) == ("head", "sjf", "easy")
    assert policy_config("easy") == {"_target_": "sim.policies.backfill.SeedBackfill", "window": "head",
                                     "order": "fcfs", "backfill_order": None}


def test_importing_the_package_imports_no_policy_family() -> None:
    code = ("import sys\nimport sim.policies, sim.engine\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'ortools', 'yaml') "
            "or m.startswith(('sim.workflows', 'sim.policies.'))))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['sim.policies.base', 'sim.policies.loading']"


def one_line(call, match: str | None = None) -> str:
    with pytest.raises(InputError, match=match) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_unknown_name_lists_the_files(tmp_path) -> None:
    message = one_line(lambda: policy_from_conf("nosuch"), "unknown policy 'nosuch'; expected one of asset_fair,")
    assert "conservative_classic" in message
    (tmp_path / "broken.yaml").write_text("window: head\n")
    one_line(lambda: policy_config("broken", [tmp_path]), "expected a mapping with a _target_")
    (tmp_path / "bad.yaml").write_text("_target_: [\n")
    one_line(lambda: policy_config("bad", [tmp_path]), "not valid YAML")


@pytest.mark.parametrize(("target", "message"), [
    ("mysched.Mine", "cannot import policy mysched.Mine: No module named 'mysched'"),
    ("mysched:Mine", "cannot import policy mysched:Mine: No module named 'mysched'"),
    (f"{HELPERS}:Mine", f"cannot import policy {HELPERS}:Mine: module {HELPERS} has no attribute 'Mine'"),
    (f"{HELPERS}.NOT_CALLABLE", f"policy {HELPERS}.NOT_CALLABLE is not a class or factory but int 3"),
    ("Mine", "policy 'Mine': expected package.module.Class or package.module:Class"),
])
def test_targets_that_do_not_resolve(target: str, message: str) -> None:
    assert one_line(lambda: resolve_target(target)) == message


@pytest.mark.parametrize(("target", "options", "message"), [
    (f"{HELPERS}:NoSchedule", {}, f"policy {HELPERS}:NoSchedule lacks schedule() of the Policy protocol "
     "(sim/policies/base.py); subclass sim.policies.base.BasePolicy for the defaults"),
    (f"{HELPERS}:Unfinished", {}, f"policy {HELPERS}:Unfinished lacks schedule() of the Policy protocol"),
    (f"{HELPERS}:nameless", {}, f"policy {HELPERS}:nameless lacks attach(), submit(), complete(), schedule(), "
     "next_wakeup(), workflow_done(), stats(), name, preserves_order, workload_kinds of the Policy protocol"),
    (f"{HELPERS}:FirstFit", {"foo": 1}, f"policy {HELPERS}:FirstFit does not accept option 'foo' "
     "(it takes: order, max_starts)"),
    (f"{HELPERS}:picky", {}, f"policy {HELPERS}:picky needs option 'speed'"),
    (f"{HELPERS}:picky", {"speed": -1}, f"policy {HELPERS}:picky: speed must be positive, got -1"),
    (f"{HELPERS}:by_name", {"name": "nosuch"}, f"policy {HELPERS}:by_name: KeyError: 'nosuch'"),
    (f"{HELPERS}:FirstFit", {"order": "fastest"}, "unknown queue order 'fastest'; expected one of fcfs, sjf,"),
    ("sim.policies.profile.ProfileBackfill", {"depth": "two"}, "depth must be null"),
])
def test_bad_policies_and_options_are_one_line(target: str, options: dict, message: str) -> None:
    assert one_line(lambda: build_policy(target, options)).startswith(message)


def test_check_policy_target_does_not_build() -> None:
    assert check_policy_target(f"{HELPERS}:picky", {"speed": -1}).__name__ == "picky"  # the call would refuse
    one_line(lambda: check_policy_target(f"{HELPERS}:FirstFit", {"foo": 1}), "does not accept option 'foo'")


def test_a_user_policy_runs() -> None:
    policy = build_policy(f"{HELPERS}:FirstFit", {"max_starts": 1})
    jobs = [rigid_job(0, 0, 2, 10), rigid_job(1, 0, 2, 10), rigid_job(2, 0, 8, 10)]
    starts = {r.job.id: r.start for r in simulate(jobs, Cluster.nodes(10), policy).records}
    assert starts == {0: 0, 1: 10, 2: 20} and policy.name == "FirstFit"  # one start per pass


# -- python -m sim --------------------------------------------------------------------------------------------------
def cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "sim", str(TRACE), "--nodes", "100", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)


def test_cli_runs_a_policy_from_a_module_with_options(tmp_path) -> None:
    out = tmp_path / "s.csv"
    done = cli("--policy", "policy_helpers:FirstFit", "--policy-option", "max_starts=1", "--order", "sjf",
               "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "policy policy_helpers:FirstFit max_starts=1 order=sjf" in done.stdout
    assert sum(1 for _ in out.open()) == 4  # header + three jobs


def test_cli_backfill_order_reaches_a_conf_policy() -> None:
    done = cli("--policy", "easy", "--policy-option", "backfill_order=sjf", "--policy-option", "order=fcfs")
    assert done.returncode == 0, done.stderr
    assert "policy easy backfill_order=sjf order=fcfs" in done.stdout and "wait/mean" in done.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["--policy", "nosuch"], "error: unknown policy 'nosuch'; expected one of asset_fair, conservative,"),
    (["--policy", "mysched:Mine"], "error: cannot import policy mysched:Mine: No module named 'mysched'"),
    (["--policy", "policy_helpers:FirstFit", "--policy-option", "foo=1"],
     "error: policy policy_helpers:FirstFit does not accept option 'foo' (it takes: order, max_starts)"),
    (["--policy", "policy_helpers:NoSchedule"], "error: policy policy_helpers:NoSchedule lacks schedule()"),
    (["--policy", "easy", "--policy-option", "backfill_order"], "error: --policy-option 'backfill_order': "
     "expected KEY=VALUE"),
    (["--policy", "easy", "--policy-option", "order=[sjf"], "error: --policy-option 'order=[sjf': '[sjf' is not"),
    (["--policy", "easy", "--policy-option", "order=sjf", "--order", "ljf"], "error: --order: order is also given"),
    (["--policy", "easy", "--policy-option", "backfill_order=3"], "error: unknown backfill order 3; expected one"),
    (["--policy", "fcfs", "--policy-option", "backfill_order=sjf"], "error: fcfs never backfills"),
])
def test_cli_bad_policies_exit_2_with_one_line(args: list[str], message: str) -> None:
    done = cli(*args)
    assert (done.returncode, done.stdout, done.stderr.count("\n")) == (2, "", 1), done.stderr
    assert done.stderr.startswith(message), done.stderr


@pytest.mark.parametrize(("policy", "message"), [
    ("Overcommit", "error: Overcommit: job 1 needs 45 at t=10.0, 30 free"),
    ("Idle", "error: Idle: 3 jobs never started (first: [0, 1, 2])"),
])
def test_cli_a_policy_that_breaks_the_rules_ends_with_one_line(policy: str, message: str) -> None:
    done = cli("--policy", f"policy_helpers:{policy}")
    assert (done.returncode, done.stderr) == (1, message + "\n")
