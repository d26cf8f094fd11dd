# pcreg — developer entry points. `make demo` and `make test` work on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
TORCH_VERSION ?= 2.13.0
STAMP := $(VENV)/.pcreg-installed
PYTEST_ARGS ?=
# the suite on two worker processes, each taking whole test files (module fixtures are built
# once), one at a time starting Ray clusters (tests/conftest.py, _ray_turn): pytest 13:35
# against 17:40-22:27 in one process on the 2-core AMD EPYC (BENCHMARKS.md, "The test
# suite's time"); PYTEST_WORKERS=0 runs it in this process
PYTEST_WORKERS ?= 2
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: setup system-deps demo test test-all bench bench-quick bench-deps lint clean

setup: system-deps $(STAMP)

system-deps:
	@bash scripts/system_deps.sh

# torch goes first, pinned, in its own pip call: an unpinned torch would pull a CUDA build.
# pip installs without byte-compiling (--no-compile); compileall then compiles the packages on
# every core (test folders, and torch's Python 3.12-only test helpers, left out) and pcreg
# itself. On the 2-core AMD EPYC pip's own one-core compile took 84 of the install's 172 s;
# compileall -j 0 takes 46 s. pcreg is compiled too because where PYTHONDONTWRITEBYTECODE is
# set (it is on this project's machines) Python never caches its modules: each `pcreg
# register` compiled its imports anew (1.96 s without, 1.77 s with, mean of 4 alternating).
$(STAMP): pyproject.toml
	@echo "pcreg setup: first run on this machine, about 3 minutes (a virtualenv in $(VENV), torch $(TORCH_VERSION) for the CPU, pcreg and its dependencies, then the networks' ONNX export)"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "pcreg setup: [1/4] torch $(TORCH_VERSION) (CPU build)"
	$(PIP) install -q --no-compile "torch==$(TORCH_VERSION)"
	@echo "pcreg setup: [2/4] pcreg and its dependencies"
	$(PIP) install -q --no-compile -e ".[dev]"
	@echo "pcreg setup: [3/4] byte-compiling them on every core (about 45 s)"
	@site="$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" && test -d "$$site" && \
	{ $(PY) -m compileall -qq -j 0 -x 'site-packages[/\\].*[/\\](tests?|testing[/\\]_internal)[/\\]' "$$site" pcreg || \
	echo "pcreg setup: some installed files did not byte-compile; Python compiles them when they are imported"; }
	@echo "pcreg setup: [4/4] the shipped networks' ONNX export (about 45 s)"
	@# the shipped networks' ONNX Runtime graphs (into ~/.cache/pcreg), so the first
	@# `pcreg register` does not export them; without them pcreg exports on first use
	@$(PY) tools/export_onnx.py || echo "pcreg setup: the ONNX export failed; the first registration will retry it"
	@touch $(STAMP)

# --force: the demo's own outputs are replaced, so `make demo` runs again after a first run
demo: setup
	$(VENV)/bin/pcreg demo --out demo_out --force

# pytest exit code 5 means "no tests collected": not a failure of the suite itself.
test: setup
	@bash scripts/system_deps.sh --test || echo "pcreg setup: chromium not installed; the HTML report's browser test will skip"
	@$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS); rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest: no tests collected"; exit 0; fi; exit $$rc

test-all: setup
	@$(MAKE) --no-print-directory test PYTEST_ARGS="-m 'slow or not slow'"

bench: setup bench-deps
	$(VENV)/bin/pcreg benchmark

bench-quick: setup bench-deps
	$(VENV)/bin/pcreg benchmark --quick

# the peers the benchmarks compare against (KISS-Matcher, KISS-ICP), once: where they cannot
# be installed (offline, no wheel) the benchmarks run without them and leave their rows out,
# with a warning
BENCH_STAMP := $(VENV)/.pcreg-bench-installed
bench-deps: $(BENCH_STAMP)

$(BENCH_STAMP): $(STAMP)
	@$(PIP) install -q -e ".[bench]" && touch $@ || \
	  echo "pcreg bench: kiss-matcher / kiss-icp could not be installed; their rows are left out"

lint: setup
	$(VENV)/bin/ruff check pcreg tests tools
	$(VENV)/bin/ruff format --check pcreg tests tools

clean:
	rm -rf $(VENV) .pytest_cache demo_out
