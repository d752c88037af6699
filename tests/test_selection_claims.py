"""Claims tested as worded (issue 38, item 4): a ratio claim on the paired log ratio, and a similarity
claim whose margin is never tighter than a declared floor (the paper's printed resolution, the measured
run-to-run noise of a wall-clock metric)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from analysis import AnalysisError
from analysis.claims import INCONCLUSIVE, NOT_SUPPORTED, SUPPORTED, evaluate
from analysis.paper_spec import Claim, PaperTable, _claim


def verdict(a: list[float], b: list[float], **claim: Any) -> tuple[str, str]:
    """The verdict and test text of a comparison claim on per-seed pairs (a[i], b[i])."""
    rows = [*({"k": "a", "seed": s, "m": v} for s, v in enumerate(a)),
            *({"k": "b", "seed": s, "m": v} for s, v in enumerate(b))]
    test = Claim(text="t", metric="m", a={"k": "a"}, b={"k": "b"}, **claim)
    table = PaperTable("t", "t", "e", None, ["k"], ["m"], [test], Path("t.yaml"), pd.DataFrame())
    [line] = evaluate(table, pd.DataFrame(rows)).itertuples()
    return line.verdict, line.test


# the mrcp O claim's shape (issue 38): every seed's ratio is 42–68×, yet b and the ratio vary by seed
B = [0.0100, 0.0200, 0.0050]
A = [0.42, 1.36, 0.34]
MUCH_HIGHER = {"relation": ">", "at_least": 0.5}


def test_a_ratio_that_holds_in_every_seed_is_supported_on_the_log_ratio() -> None:
    assert verdict(A, B, **MUCH_HIGHER)[0] == INCONCLUSIVE  # a − b: n = 3 and a wide spread
    result, text = verdict(A, B, log=True, **MUCH_HIGHER)
    assert result == SUPPORTED and text == "log((k=a) / (k=b)) > 0, by ≥ log 1.5"


@pytest.mark.parametrize(("ratios", "expected"), [
    ([1.2, 1.25, 1.22], NOT_SUPPORTED),  # higher, but not 1.5 times
    ([0.5, 0.45, 0.55], NOT_SUPPORTED),  # lower
    ([1.1, 3.0, 1.3], INCONCLUSIVE),  # the CI straddles log 1.5
])
def test_the_log_ratio_can_fail(ratios: list[float], expected: str) -> None:
    assert verdict([r * b for r, b in zip(ratios, B, strict=True)], B, log=True, **MUCH_HIGHER)[0] == expected


def test_a_similarity_claim_respects_its_margin() -> None:
    b = [0.0090, 0.0091, 0.0089, 0.0090]
    a = [x + d for x, d in zip(b, [0.0012, 0.0011, 0.0013, 0.0012], strict=True)]  # ~13 %: outside ±10 %, inside 2 ms
    assert verdict(a, b, relation="~")[0] == NOT_SUPPORTED
    result, text = verdict(a, b, relation="~", margin=0.002)
    assert result == SUPPORTED and text == "(k=a) − (k=b) ~ 0 (±10% of b, at least ±0.002)"
    assert verdict([x + 0.003 + 0.0001 * (i % 2) for i, x in enumerate(b)], b, relation="~",
                   margin=0.002)[0] == NOT_SUPPORTED  # the floor binds


def test_a_relative_margin_wider_than_the_floor_still_applies() -> None:
    b = [100.0, 101.0, 99.0]
    assert verdict([x + d for x, d in zip(b, [7.5, 8.0, 8.5], strict=True)], b, relation="~",
                   margin=1.0)[0] == SUPPORTED  # 8 % < 10 % of b


@pytest.mark.parametrize(("raw", "message"), [
    ({"below": 0.05, "log": True}, r"\.log: true or false, and only for a comparison or trend"),
    ({"a": {"k": 1}, "b": {"k": 2}, "relation": ">", "log": "yes"}, r"\.log: true or false"),
    ({"a": {"k": 1}, "b": {"k": 2}, "relation": ">", "margin": 0.01}, r"\.margin: a similarity floor"),
    ({"a": {"k": 1}, "b": {"k": 2}, "relation": "~", "log": True, "margin": 0.01}, r"\.margin: a similarity floor"),
    ({"a": {"k": 1}, "b": {"k": 2}, "relation": "~", "margin": -1}, r"\.margin: expected a positive number"),
])
def test_bad_log_and_margin_fields_are_one_line(raw: dict, message: str) -> None:
    with pytest.raises(AnalysisError, match=message):
        _claim({"text": "t", "metric": "m", **raw}, "f.yaml: paper.claims[0]", ["m"])


def test_a_pair_without_a_log_ratio_is_left_out() -> None:
    result, _ = verdict([0.5, 1.2, 0.0, 0.27], [0.01, 0.02, 0.01, 0.006], log=True, **MUCH_HIGHER)
    assert result == SUPPORTED  # seeds 0, 1, 3: ratios 50, 60, 45; seed 2 (a = 0) has no log ratio
    assert verdict([0.0, 0.0, 0.0], [0.01, 0.02, 0.01], log=True, **MUCH_HIGHER)[0] == INCONCLUSIVE  # none left
