"""Paper-style tables, paired comparisons and figures from tracked MLflow runs.

Reads what a sweep logged (never re-runs anything). One module per job:

* :mod:`analysis.runs` — load FINISHED / FAILED runs, detect factors, fetch artifacts;
* :mod:`analysis.store` — a local store checked before MLflow opens it (never created or written);
* :mod:`analysis.stats` — mean, sd, n and Student-t half-widths; paired differences;
* :mod:`analysis.formatting` — significant digits, Markdown / LaTeX / CSV tables;
* :mod:`analysis.summary` — factors and metrics resolved, aggregated, compared; table files;
* :mod:`analysis.timeline` — node assignment and utilisation of one schedule;
* :mod:`analysis.figures` — seaborn figures (PNG and PDF);
* :mod:`analysis.assemble` — the report folder: figures from runs and artifacts, ``report.md``;
* :mod:`analysis.report` — the command line (``python analysis/report.py``).

``analysis`` may import pandas, seaborn, scipy, matplotlib and mlflow (read side), never ``sim``
internals or ``sweeps``: the run layout in MLflow is the whole contract.
"""



class AnalysisError(Exception):
    """A problem with the user's request or data; the CLI prints its message on one line."""
