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
# pytest processes in `make test` (pytest-xdist; each test file stays in one of them, so a module's
# batch is graded once); 1 runs one process
TEST_JOBS ?= 2
XDIST := $(if $(filter-out 0 1,$(TEST_JOBS)),-n $(TEST_JOBS) --dist loadfile)

BIN := $(VENV)/bin
PY := $(BIN)/python
STAMP := $(VENV)/.installed
export PATH := $(abspath $(BIN)):$(PATH)
export PYDEVD_DISABLE_FILE_VALIDATION := 1

# Installing: a line per phase with its time, the installers' own output in $(LOG). torch comes
# from pip (TORCH_SPEC: a wheel pip finds, e.g. on this machine's disk or a PyTorch index); the
# rest from uv (UV_VERSION, from PyPI into the venv) held to constraints.txt and to the torch just
# installed, or from pip when INSTALLER=pip or when uv fails.
INSTALLER ?= uv
UV_VERSION ?= 0.13.9
LOG := $(VENV)/install.log
PIP_QUIET := --progress-bar off --disable-pip-version-check
TORCH_PIN = $(PY) -c 'import importlib.metadata as m; print("torch==" + m.version("torch"))'
# `phase TAG LABEL QUIET CMD...`: says LABEL, runs CMD (its output into $(LOG) when QUIET is 1),
# says "still ..." after every 10 s without a line, and ends with how long it took; a quiet phase
# that fails shows the end of $(LOG).
PHASE = set -o pipefail; phase() { \
  local tag=$$1 label=$$2 quiet=$$3 t0=$$SECONDS rc=0 line; shift 3; echo "[$$tag] $$label"; \
  if [ "$$quiet" = 1 ]; then \
    "$$@" >>"$(LOG)" 2>&1 & local pid=$$! n=0; \
    while kill -0 $$pid 2>/dev/null; do sleep 0.5; n=$$((n + 1)); \
      [ $$((n % 20)) = 0 ] && kill -0 $$pid 2>/dev/null && echo "[$$tag]   ... still working ($$((SECONDS - t0)) s)"; done; \
    wait $$pid || rc=$$?; \
  else \
    { "$$@" 2>&1; } | while :; do \
      if IFS= read -r -t 10 line; then printf '%s\n' "$$line"; \
      elif [ $$? -gt 128 ]; then [ -n "$$line" ] && printf '%s' "$$line" || echo "[$$tag]   ... still working ($$((SECONDS - t0)) s)"; \
      else [ -n "$$line" ] && printf '%s\n' "$$line"; break; fi; done || rc=$$?; \
  fi; \
  if [ $$rc = 0 ]; then echo "[$$tag]   done in $$((SECONDS - t0)) s"; \
  else echo "[$$tag]   FAILED after $$((SECONDS - t0)) s (exit $$rc)"; [ "$$quiet" = 1 ] && tail -n 15 "$(LOG)" | cut -c1-200 | sed 's/^/    /'; fi; \
  return $$rc; }

$(STAMP): pyproject.toml $(CONSTRAINTS)
	@$(PHASE); t0=$$SECONDS; mkdir -p $(VENV); : > $(LOG); \
	echo "[setup] $(VENV) for the first time (1-3 minutes); the installers' output goes to $(LOG)"; \
	phase "setup 1/3" "virtual environment: $(PYTHON) -m venv $(VENV)" 1 $(PYTHON) -m venv $(VENV) || exit 1; \
	phase "setup 2/3" "$(TORCH_SPEC) with pip (a ~700 MB wheel: 20-60 s)" 1 $(PY) -m pip install $(PIP_QUIET) $(TORCH_SPEC) || exit 1; \
	$(TORCH_PIN) > $(VENV)/torch-pin.txt || exit 1; torch=$$(cat $(VENV)/torch-pin.txt); \
	if [ "$(INSTALLER)" = uv ] && phase "setup 3/3" "the course and its tools with uv $(UV_VERSION), keeping $$torch (about 30 s)" 1 \
	     sh -c '$(PY) -m pip install $(PIP_QUIET) uv==$(UV_VERSION) && $(BIN)/uv pip install --python $(PY) --compile-bytecode \
	            -c $(VENV)/torch-pin.txt $(if $(CONSTRAINTS),-c $(CONSTRAINTS),) -e ".[grader,dev]"'; then :; \
	else \
	  [ "$(INSTALLER)" = uv ] && echo "[setup]   uv did not finish (see $(LOG)): pip installs the same instead"; \
	  phase "setup 3/3" "the course and its tools with pip, keeping $$torch (1-2 minutes)" 1 $(PY) -m pip install $(PIP_QUIET) \
	    -c $(VENV)/torch-pin.txt $(if $(CONSTRAINTS),-c $(CONSTRAINTS),) -e ".[grader,dev]" || exit 1; \
	fi; \
	if [ "$$($(TORCH_PIN))" != "$$torch" ]; then echo "[setup] torch changed from $$torch to $$($(TORCH_PIN)): see $(LOG)" >&2; exit 1; fi; \
	echo "[setup] $(VENV) ready in $$((SECONDS - t0)) s: $$torch and $$(ls -d $(VENV)/lib/python*/site-packages/*.dist-info | wc -l) packages, $$(du -sh $(VENV) | cut -f1)"
	@touch $@

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: venv
venv: $(STAMP) ## Create .venv: torch (TORCH_VERSION, default 2.13.0) + the course, editable

.PHONY: lock
lock: $(STAMP) ## Rewrite constraints.txt from .venv (after a deliberate upgrade there, and a green make test)
	@{ sed -n '/^#/p' constraints.txt; $(PY) -m pip list --format=freeze --exclude-editable --disable-pip-version-check \
	  | grep -v -i -E '^(torch|pytorch-foundations|pip|setuptools|wheel|uv)==' | sort -f; } > constraints.txt.new
	mv constraints.txt.new constraints.txt

.PHONY: demo
demo: $(STAMP) ## Main job: release the course, then auto-grade the sample class into $(WORKDIR)/
	@$(PHASE); t0=$$SECONDS; \
	phase "demo 1/4" "release the course: solutions/ -> notebooks/ (what learners get)" 0 $(BIN)/course release && \
	rm -rf $(WORKDIR)/samples && \
	phase "demo 2/4" "a sample class: per chapter a perfect, a partial, an untouched and a broken notebook" 0 \
	  $(BIN)/course samples $(WORKDIR)/samples && \
	phase "demo 3/4" "grade it, $(JOBS) at a time, each notebook in a sandbox (each chapter's solution runs first)" 0 \
	  $(BIN)/course grade $(WORKDIR)/samples --workdir $(WORKDIR) --jobs $(JOBS) && \
	phase "demo 4/4" "feedback pages, one per student and chapter" 0 $(BIN)/course feedback --workdir $(WORKDIR) && \
	echo "[demo] done in $$((SECONDS - t0)) s. Open $(WORKDIR)/report/report.html (the class report);" \
	  "$(WORKDIR)/course-feedback/ holds what each learner gets, $(WORKDIR)/course-grades.csv the grades."

.PHONY: release
release: $(STAMP) ## Write notebooks/ (student release) from solutions/
	$(BIN)/course release

.PHONY: check-release
check-release: $(STAMP) ## Fail if notebooks/ is stale or leaks a solution or hidden test
	$(BIN)/course check-release

# `make dist`: what a release publishes, in dist/: the course's wheel and sdist (course_utils, which
# the setup cell installs in Colab from the tag, and the grader) and the student notebooks as a zip,
# named by pyproject's [tool.course] tag. Built offline (the setuptools in .venv). Publishing a release:
# `make check-release`, commit, `git tag <tag>` on that commit, push it with its tag, then `make dist`.
.PHONY: dist
dist: $(STAMP) ## Build what a release publishes into dist/: wheel, sdist and the notebooks' zip
	rm -rf dist build
	$(BIN)/uv build --python $(PY) --no-build-isolation --offline --sdist --wheel --out-dir dist
	tag=$$($(PY) -c 'from grader.prepare import publish; print(publish.current().tag)') && \
	  $(PY) -m zipfile -c dist/pytorch-foundations-notebooks-$$tag.zip notebooks/ && ls -l dist

.PHONY: notebooks
notebooks: $(STAMP) ## Execute every chapter with papermill: solutions pass, releases fail each test
	$(PY) ci/run_notebooks.py --device $(DEVICE) --jobs $(JOBS) $(if $(FAST),--fast,)

# `make site`: the course as a static website in build/site/html/ (open index.html, or serve the folder),
# built offline with Sphinx + myst-nb from the release executed by papermill (ci/website.py): every
# statement, demo output and picture, an "Open in Colab" link per chapter, search; no solution or
# hidden test (the build reads every page back and fails on a leak). Executions are cached by content
# in build/site/executed/, so a rebuild runs only the chapters that changed. FAST=1 executes at small sizes.
.PHONY: site
site: $(STAMP) ## Build the course as a static website (build/site/html/), offline, leak-checked
	$(PY) ci/website.py --device $(DEVICE) --jobs $(JOBS) $(if $(FAST),--fast,)

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
	COURSE_DEVICE=$(DEVICE) $(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

.PHONY: lint
lint: $(STAMP) ## Lint the packages, tests and notebooks with ruff
	$(BIN)/ruff check course_utils grader ci tests solutions

.PHONY: format
format: $(STAMP) ## Fix lint where safe and strip outputs/metadata from committed notebooks
	$(BIN)/ruff check --fix course_utils grader ci tests
	$(BIN)/course clean-notebooks

.PHONY: ci
ci: $(STAMP) ## What CI runs: lint, release in sync, tests, the site, the browser tests, every notebook both ways at full size
	$(MAKE) lint
	$(BIN)/course check-release
	$(MAKE) test
	$(MAKE) site FAST=1
	$(MAKE) browser-deps
	COURSE_DEVICE=$(DEVICE) $(PY) -m pytest -m browser $(PYTEST_ARGS)
	$(PY) ci/run_notebooks.py --device $(DEVICE) --jobs $(JOBS)

# `make gpu-check` on a GPU machine (no network needed once .venv exists): every chapter at full size on
# CUDA, the sample class graded by both engines on CUDA and by the fork engine on the CPU (same grades
# required), the CUDA tests; steps at once where safe, each timed out, 8 minutes in all; one summary table
# (ci-reports/gpu-check/). Without a GPU it says so and runs its CPU mode. GPU_CHECK_ARGS passes more
# options, e.g. GPU_CHECK_ARGS="01 02 --serial".
GPU_CHECK_ARGS ?=

.PHONY: gpu-check
gpu-check: $(STAMP) ## Check a GPU machine in one command (8 min): notebooks on CUDA, both engines vs the CPU, CUDA tests
	$(PY) ci/gpu_check.py $(GPU_CHECK_ARGS)

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

.PHONY: architecture
architecture: $(STAMP) ## Redraw docs/architecture.svg, the grader's import graph by stage (ci/architecture.py; needs dot)
	$(PY) ci/architecture.py

.PHONY: bench
bench: $(STAMP) ## Grading throughput: plain nbgrader vs course grade's kernel and fork engines (40 submissions)
	$(PY) benchmarks/grading.py --students 40 --jobs $(JOBS)

.PHONY: clean
clean: ## Remove the grading workspace and caches (keeps .venv)
	rm -rf $(WORKDIR) ci-reports .pytest_cache .ruff_cache .hypothesis build dist
