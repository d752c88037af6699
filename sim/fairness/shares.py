"""What "share" means under each fairness rule.

A user holding allocation vector ``x`` on a cluster of capacity ``C`` has share ``x[r] / C[r]`` of
resource r. The rules compared in the DRF paper differ only in the scalar they equalise:

* ``drf`` — the *dominant* share ``max_r x[r] / C[r]``;
* ``asset`` — asset fairness, the sum ``Σ_r x[r] / C[r]``;
* ``single`` — the share of one resource (``cpu_fair`` is ``single`` on CPU).

All three are linear in the number of identical tasks a user runs, so progressive filling only
needs the share of one task under the rule (:func:`rule_share` of its demand). The functions are
generic over numbers: integers or :class:`fractions.Fraction` in, exact results out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from sim.core import InputError

Rule = Literal["drf", "asset", "single"]
RULES: tuple[Rule, ...] = ("drf", "asset", "single")


def dominant_share(allocation: Sequence[float], capacity: Sequence[float]) -> float:
    """The largest per-resource share of ``allocation``.

    >>> from fractions import Fraction
    >>> dominant_share((3, 12), (Fraction(9), Fraction(18)))
    Fraction(2, 3)
    """
    return max(x / c for x, c in zip(allocation, capacity, strict=True))


def rule_share(vector: Sequence[float], capacity: Sequence[float], rule: Rule = "drf", resource: int = 0) -> float:
    """The share ``vector`` (an allocation, or one task's demand) represents under ``rule``.

    >>> from fractions import Fraction as F
    >>> cap = (F(9), F(18))
    >>> rule_share((1, 4), cap), rule_share((1, 4), cap, "asset"), rule_share((1, 4), cap, "single")
    (Fraction(2, 9), Fraction(1, 3), Fraction(1, 9))
    """
    if rule == "drf":
        return dominant_share(vector, capacity)
    if rule == "asset":
        return sum(x / c for x, c in zip(vector, capacity, strict=True))
    if rule == "single":
        return vector[resource] / capacity[resource]
    raise InputError(f"unknown fairness rule {rule!r}; expected one of {', '.join(RULES)}")
