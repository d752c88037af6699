"""The project's one confidence-interval definition over replications, used by the analysis tables and by the
precision sweeper's stopping rule: the half-width of the two-sided ``confidence`` interval of a mean is
``t_{(1+confidence)/2, n-1} · sd / √n`` with the quantile from :func:`scipy.stats.t.ppf`, NaN for n < 2."""

from __future__ import annotations

import numpy as np
from scipy import stats

CONFIDENCE = 0.95


def t_half_width(sd: float | np.ndarray, n: float | np.ndarray, confidence: float = CONFIDENCE) -> np.ndarray:
    """Half-width of the Student-t confidence interval of a mean; NaN where n < 2.

    >>> float(np.round(t_half_width(1.0, 4), 4))  # t(0.975, 3) = 3.1824, / sqrt(4)
    1.5912
    >>> bool(np.isnan(t_half_width(1.0, 1)))
    True
    """
    sd_arr = np.asarray(sd, dtype=float)
    n_arr = np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        dof = np.where(n_arr >= 2, n_arr - 1, np.nan)
        return stats.t.ppf(0.5 + confidence / 2, dof) * sd_arr / np.sqrt(n_arr)
