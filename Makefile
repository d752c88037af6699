# schedlab — `make help` lists the targets.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
BENCH_OUT ?= bench-results
# pytest-xdist workers: one more than the cores, as the suite's sweeps often wait on their subprocesses
# (2 cores: 560 s with 2 workers, 450 s with 3, same tests)
XDIST ?= $(shell $(PYTHON) -c "import os; print((os.cpu_count() or 1) + 1)")

.DEFAULT_GOAL := help
.PHONY: help install test test-slow test-slurm run bench lint report paper selection clean

help: ## show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-10s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP) ## create .venv and install schedlab with its dev tools (only what is missing)

test: $(STAMP) ## run the whole test suite (fast; slow checks are behind -m slow, SLURM behind make test-slurm)
	$(PY) -m pytest -q -m "not slow and not slurm" -n $(XDIST) --dist worksteal

test-slow: $(STAMP) ## run only the slow checks (long fault cases, large sweeps)
	$(PY) -m pytest -q -m "slow and not slurm" -n $(XDIST) --dist worksteal

test-slurm: $(STAMP) ## the SLURM recipe on a real one-node SLURM on loopback (root; installs slurm-wlm, munge)
	$(PY) -m pytest -q -m slurm tests/test_slurm.py

run: $(STAMP) ## run the default demo sweep (local Ray, SQLite MLflow) and print its summary
	$(PY) sweeps/run.py -m
	$(PY) analysis/report.py --table-only

REPORT_ARGS ?=
report: $(STAMP) ## tables (mean ± 95% CI), paired diffs, figures from MLflow in reports/<experiment>/ (REPORT_ARGS=…)
	$(PY) analysis/report.py $(REPORT_ARGS)

PAPER_ARGS ?=
PAPER_OUT ?= docs/paper
paper: $(STAMP) ## every paper_*.yaml swept (resumes; RAY_ADDRESS=… a cluster), tables and runs.parquet in $(PAPER_OUT) (PAPER_ARGS=, see README)
	$(PY) sweeps/paper.py $(PAPER_ARGS)
	$(PY) analysis/paper.py --out $(PAPER_OUT) $(PAPER_ARGS)
	$(PY) analysis/paper.py --export-runs $(PAPER_OUT)/runs.parquet $(filter tracking.uri=%,$(PAPER_ARGS))

SELECTION_STORE ?= sqlite:///$(CURDIR)/mlflow.db
SELECTION_ARGS ?=
# the restored experiments' artifact root: the sweeps' own (tracking.artifact_root=… in SELECTION_ARGS), if given
SELECTION_ARTIFACTS = $(patsubst tracking.artifact_root=%,%,$(filter tracking.artifact_root=%,$(SELECTION_ARGS)))
selection: $(STAMP) ## issue 38's declared model-selection study to its end (27–38 h serial on 2 shared cores, selection.md; resumes; SELECTION_STORE=, SELECTION_ARGS=), Results in docs/paper/selection.md
	@if [ -f docs/paper/selection_runs.parquet ]; then \
	  $(PY) sweeps/restore.py --runs docs/paper/selection_runs.parquet --tracking-uri $(SELECTION_STORE) \
	  $(if $(SELECTION_ARTIFACTS),--artifact-root $(SELECTION_ARTIFACTS)); fi
	$(PY) sweeps/selection.py --tracking-uri $(SELECTION_STORE) $(SELECTION_ARGS)
	$(PY) analysis/selection.py --tracking-uri $(SELECTION_STORE) --export-runs docs/paper/selection_runs.parquet
	$(PY) analysis/selection.py --tracking-uri $(SELECTION_STORE) --runs docs/paper/selection_runs.parquet --write docs/paper/selection.md

bench: $(STAMP) ## benchmarks: simulator, the Gymnasium env, DRF, RM-DCWF, MRCP-RM, sweep speed and make paper on 1 vs 2 Ray nodes (JSON + Markdown tables in $(BENCH_OUT)/)
	$(PY) tests/bench/bench_sim.py --out $(BENCH_OUT)
	$(PY) tests/bench/bench_env.py --out $(BENCH_OUT)  # env decisions/s beside the engine's events/s
	$(PY) tests/bench/bench_drf.py --out $(BENCH_OUT)
	$(PY) tests/bench/bench_sweep.py --out $(BENCH_OUT)
	$(PY) tests/bench/bench_sweep_scale.py --out $(BENCH_OUT) $(SCALE_ARGS)  # N = 100, 2,000 tiny runs; SCALE_ARGS=--huge adds 10,000
	$(PY) tests/bench/bench_workflows.py --out $(BENCH_OUT)
	$(PY) tests/bench/bench_mrcp.py --out $(BENCH_OUT)
	$(PY) tests/bench/bench_precision.py --out $(BENCH_OUT)
	$(PY) tests/bench/bench_paper_cluster.py --out $(BENCH_OUT)

lint: $(STAMP) ## ruff over the whole tree
	$(PY) -m ruff check .

clean: ## remove caches and local outputs (keeps .venv)
	rm -rf .pytest_cache .ruff_cache .hypothesis outputs multirun $(BENCH_OUT)
