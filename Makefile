# The two commands of the README: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test system venv clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

system:
	@bash scripts/install-system-packages.sh

# Builds the virtualenv, installs what is missing, runs the default recipe on
# the embedded PostgreSQL and writes the results (and report) under results/.
demo: system venv
	$(BIN)/blocklab run mbrc

# The suite, then the linters: ruff (style, bugs) and mypy (types) stay clean.
# Two pytest workers (pytest-xdist): the suite waits on engines, disks and subprocesses
# more than it computes, and on 2 cores two workers halve its wall time (BENCHMARKS.md,
# issue 24). Each worker has its own cache directory, engines and ports (tests/conftest.py).
# TEST_WORKERS=0 runs it in one process. Tests marked `serial` (a disk's read-ahead, whole-disk
# counters) run alone afterwards, with nothing of the suite beside them.
TEST_WORKERS ?= 2
test: system venv
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist worksteal -m "not serial"
	$(BIN)/pytest -q -m serial
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy src/blocklab

clean:
	rm -rf $(VENV) results .pytest_cache
