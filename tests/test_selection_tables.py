"""Readable tables (issue 38, item 5): ``paper.layout: long`` writes a line per configuration, each
config key its own column, a paper column only where the table has published values and no
``paper —`` filler; the default stays the paper's wide shape (docs/paper rebuilds byte for byte)."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

from analysis import AnalysisError
from analysis.paper import main
from analysis.paper_spec import read_table
from analysis.stats import level_text
from tests.conftest import REPO

CONF = REPO / "conf" / "experiment"
PUBLISHED = REPO / "docs" / "paper" / "published"
COMMITTED = REPO / "docs" / "paper" / "runs.parquet"


def long_table(tmp_path: Path, table: str) -> list[str]:
    """``table`` rebuilt from the committed runs with ``layout: long``: its Markdown lines."""
    conf = tmp_path / "conf"
    conf.mkdir()
    line = f"  table: {table}\n"
    text = without_layout((CONF / f"paper_{table}.yaml").read_text()).replace(line, line + "  layout: long\n")
    (conf / f"paper_{table}.yaml").write_text(text)
    assert read_table(conf / f"paper_{table}.yaml", PUBLISHED).layout == "long"
    assert main(["--runs", str(COMMITTED), "--only", f"paper_{table}", "--no-figures", "--out", str(tmp_path / "out"),
                 "--conf-dir", str(conf), "--published", str(PUBLISHED)]) == 0
    assert (tmp_path / "out" / f"{table}.tex").read_text().count(r"\\") > 3
    return (tmp_path / "out" / f"{table}.md").read_text().splitlines()


def without_layout(text: str) -> str:
    """An experiment file's text without its ``layout:`` line (shipped tables may already say ``long``)."""
    return re.sub(r"^  layout: .*\n", "", text, flags=re.MULTILINE)


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_a_table_of_many_factors_reads_as_lines(tmp_path: Path) -> None:
    lines = long_table(tmp_path, "rules")
    header = cells(lines[2])
    assert header[:5] == ["workload.type", "policy.laxity_distribution", "policy.tsp", "policy.multi_parent",
                          "policy.late_rule"]
    assert len(header) <= 12 and not any("paper" in h for h in header)  # the paper has no such table
    body = [cells(line) for line in lines[4:] if line.startswith("| ")]
    workloads = {row[0] for row in body}
    assert len(body) == 16 * len(workloads) and all(len(row) == len(header) for row in body)  # 16 configurations each
    assert "paper —" not in "\n".join(lines)


def test_published_values_get_their_own_column_blank_where_none(tmp_path: Path) -> None:
    lines = long_table(tmp_path, "ligo_lambda")
    header = cells(lines[2])
    assert header == ["workload.arrival_rate", "policy.laxity_distribution", "policy.tsp",
                      "P (%): ours", "P (%): paper", "T (s): ours", "T (s): paper", "O (s): ours", "O (s): paper"]
    first = dict(zip(header, cells(lines[4]), strict=True))
    assert first["workload.arrival_rate"] == "1/265" and first["P (%): paper"] == "0.02 ± 0.01"
    assert first["T (s): ours"].endswith("(n=10)") and "paper —" not in "\n".join(lines)


def test_an_unknown_layout_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "paper_rules.yaml"
    text = without_layout((CONF / "paper_rules.yaml").read_text())
    path.write_text(text.replace("  table: rules\n", "  table: rules\n  layout: tall\n"))
    with pytest.raises(AnalysisError, match=r"paper\.layout: expected one of wide, long, got 'tall'"):
        read_table(path, PUBLISHED)


def test_every_rmdcwf_table_names_the_readings_and_scale_it_ran() -> None:
    """Issue 38 item 2: a table's caption names the open readings and the workload scale of its runs (or its
    factors show them), so a reader knows which reconstruction a published-vs-ours cell compares."""
    open_rules = {"policy.remap_trigger", "policy.multi_parent", "policy.late_rule"}
    export = pd.read_parquet(COMMITTED)
    tables = [read_table(p, PUBLISHED) for p in sorted(CONF.glob("paper_*.yaml"))
              if "override /policy: rmdcwf" in p.read_text()]
    assert len(tables) >= 18
    for table in tables:
        assert open_rules <= {*table.reading, *table.factors}, table.id
        caption = (REPO / "docs" / "paper" / f"{table.id}.md").read_text().rstrip().splitlines()[-1]
        named = re.search(r"readings and scale: (.*?) \(the seed leaves them open", caption)
        assert named, table.id
        shown = dict(pair.split("=") for pair in named.group(1).split(", "))
        assert set(shown) == set(table.reading) - set(table.factors), table.id
        runs = export[export["experiment"] == table.experiment]
        for key, value in shown.items():  # what the runs had (a|b: several workloads'), not what conf/ says today
            assert set(value.split("|")) <= {level_text(v) for v in runs[f"params.{key}"].dropna()}, (table.id, key)


def test_a_reading_key_the_runs_lack_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    text = (CONF / "paper_ligo_lambda.yaml").read_text()
    (conf / "paper_ligo_lambda.yaml").write_text(re.sub(r"^  reading: .*$", "  reading: [policy.multi_parents]",
                                                        text, flags=re.MULTILINE))
    assert main(["--runs", str(COMMITTED), "--only", "paper_ligo_lambda", "--no-figures", "--out", str(tmp_path / "o"),
                 "--conf-dir", str(conf), "--published", str(PUBLISHED)]) == 2
    err = capsys.readouterr().err
    assert "paper.reading: policy.multi_parents is not a config key of the runs" in err and err.count("\n") == 1


def test_the_tables_defaults_are_the_reading_and_scale_the_study_chose() -> None:
    """Issue 38 item 2: conf/'s defaults of the seed's open readings and of each workload's scale are what
    selection.md's § 5 decision chose (its "Chosen:" line, computed from the committed runs)."""
    text = (REPO / "docs" / "paper" / "selection.md").read_text()
    chosen = re.search(r"\*\*Chosen: (\w+)/(\w+)/(\w+)\*\*, at ligo workload\.size = ([\d.]+), "
                       r"genome workload\.size = ([\d.]+)", text)
    assert chosen, "selection.md has no § 5 decision"
    trigger, multi_parent, late_rule, ligo, genome = chosen.groups()
    policy = OmegaConf.load(REPO / "conf" / "policy" / "rmdcwf.yaml")
    assert (policy.remap_trigger, policy.multi_parent, policy.late_rule) == (trigger, multi_parent, late_rule)
    for workload, size in (("ligo", ligo), ("genome", genome)):
        assert OmegaConf.load(REPO / "conf" / "workload" / f"{workload}.yaml").size == float(size), workload
