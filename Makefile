# PyTorch Foundations — every target sets up .venv itself first. `make help` lists them.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
TORCH_VERSION ?= 2.13.0
# A GPU runner overrides this, e.g. TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"
TORCH_SPEC ?= torch==$(TORCH_VERSION)
# pinned versions of everything else (constraints.txt, `make lock`); CONSTRAINTS= installs the
# newest versions pyproject.toml allows instead
CONSTRAINTS ?= constraints.txt
DEVICE ?= cpu
JOBS ?= 2
WORKDIR ?= course-work
PYTEST_ARGS ?=

BIN := $(VENV)/bin
PY := $(BIN)/python
STAMP := $(VENV)/.installed
export PATH := $(abspath $(BIN)):$(PATH)
export PYDEVD_DISABLE_FILE_VALIDATION := 1

# pip speaks a line per package (never silent for long on a fresh machine), without progress bars
$(STAMP): pyproject.toml $(CONSTRAINTS)
	@echo "[venv] $(VENV): $(TORCH_SPEC) (about 15 s from a wheel on disk), then the course and its tools (about 35 s)"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --progress-bar off --disable-pip-version-check $(TORCH_SPEC)
	$(PY) -m pip install --progress-bar off --disable-pip-version-check $(if $(CONSTRAINTS),-c $(CONSTRAINTS),) -e ".[grader,dev]"
	@touch $@

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: venv
venv: $(STAMP) ## Create .venv: torch (TORCH_VERSION, default 2.13.0) + the course, editable

.PHONY: lock
lock: $(STAMP) ## Rewrite constraints.txt from .venv (after a deliberate upgrade there, and a green make test)
	@{ sed -n '/^#/p' constraints.txt; $(PY) -m pip list --format=freeze --exclude-editable --disable-pip-version-check \
	  | grep -v -i -E '^(torch|pytorch-foundations|pip|setuptools|wheel)==' | sort -f; } > constraints.txt.new
	mv constraints.txt.new constraints.txt

.PHONY: demo
demo: $(STAMP) ## Main job: release the course, then auto-grade the sample class into $(WORKDIR)/
	$(BIN)/course release
	rm -rf $(WORKDIR)/samples
	$(BIN)/course samples $(WORKDIR)/samples
	$(BIN)/course grade $(WORKDIR)/samples --workdir $(WORKDIR) --jobs $(JOBS)
	$(BIN)/course feedback --workdir $(WORKDIR)

.PHONY: release
release: $(STAMP) ## Write notebooks/ (student release) from solutions/
	$(BIN)/course release

.PHONY: check-release
check-release: $(STAMP) ## Fail if notebooks/ is stale or leaks a solution or hidden test
	$(BIN)/course check-release

.PHONY: notebooks
notebooks: $(STAMP) ## Execute every chapter with papermill: solutions pass, releases fail each test
	$(PY) ci/run_notebooks.py --device $(DEVICE) --jobs $(JOBS) $(if $(FAST),--fast,)

# `make lab` is the learner's JupyterLab: jupyter/learner/ (first on JUPYTER_CONFIG_PATH) switches
# nbgrader's instructor tools and the "Jupyter news" toast off. Run as root (a container, a
# JupyterHub image), Jupyter needs --allow-root: added when `id -u` is 0. LAB_ARGS passes more
# options, e.g. LAB_ARGS="--no-browser --ServerApp.ip=0.0.0.0".
LAB_ARGS ?=
LAB_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)
LEARNER_CONFIG := $(CURDIR)/jupyter/learner

.PHONY: lab
lab: $(STAMP) ## Open the course in JupyterLab as a learner sees it (no nbgrader tools; LAB_ARGS for more options)
	JUPYTER_CONFIG_PATH="$(LEARNER_CONFIG)$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}" \
	  $(BIN)/jupyter lab notebooks/ $(LAB_ROOT) $(LAB_ARGS)

.PHONY: lab-instructor
lab-instructor: $(STAMP) ## JupyterLab on the whole repository with nbgrader's tools (formgrader in a workspace)
	$(BIN)/jupyter lab $(LAB_ROOT) $(LAB_ARGS)

.PHONY: test-deps
test-deps: ## Install the Debian tools some tests use (bubblewrap sandbox, graphviz's dot) when root
	@missing=""; command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	command -v dot >/dev/null || missing="$$missing graphviz"; \
	if [ -z "$$missing" ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing) >/dev/null \
	    || echo "could not install$$missing: the tests that need them will say so" >&2; \
	else echo "missing$$missing (install them as root): the tests that need them will say so" >&2; fi

.PHONY: test
test: $(STAMP) test-deps ## Run the test suite (executes every chapter both ways, FAST; browser tests: make ci)
	COURSE_DEVICE=$(DEVICE) $(PY) -m pytest $(PYTEST_ARGS)

.PHONY: lint
lint: $(STAMP) ## Lint the packages, tests and notebooks with ruff
	$(BIN)/ruff check course_utils grader ci tests solutions

.PHONY: format
format: $(STAMP) ## Fix lint where safe and strip outputs/metadata from committed notebooks
	$(BIN)/ruff check --fix course_utils grader ci tests
	$(BIN)/course clean-notebooks

.PHONY: ci
ci: $(STAMP) ## What CI runs: lint, release in sync, tests, the browser test, every notebook both ways at full size
	$(MAKE) lint
	$(BIN)/course check-release
	$(MAKE) test
	$(MAKE) browser-deps
	COURSE_DEVICE=$(DEVICE) $(PY) -m pytest -m browser $(PYTEST_ARGS)
	$(PY) ci/run_notebooks.py --device $(DEVICE) --jobs $(JOBS)

.PHONY: browser-deps
browser-deps: $(STAMP) ## Install headless Chromium (apt) for the browser test when /usr/bin/chromium is missing
	@if [ -x /usr/bin/chromium ]; then \
	  echo "browser test uses /usr/bin/chromium"; \
	elif command -v apt-get >/dev/null; then \
	  sudo=$$([ "$$(id -u)" = 0 ] || echo "sudo -n"); \
	  $$sudo apt-get update -q && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; \
	else \
	  echo "no /usr/bin/chromium and no apt-get: install Chromium, or the browser test is skipped" >&2; \
	fi

.PHONY: bench
bench: $(STAMP) ## Grading throughput: plain nbgrader vs course grade's kernel and fork engines (40 submissions)
	$(PY) benchmarks/grading.py --students 40 --jobs $(JOBS)

.PHONY: clean
clean: ## Remove the grading workspace and caches (keeps .venv)
	rm -rf $(WORKDIR) ci-reports .pytest_cache .ruff_cache .hypothesis
