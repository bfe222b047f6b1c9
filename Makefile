# brawlkit — the README's commands.  `make test` and `make train` each do all
# set-up themselves on a fresh machine: Debian packages (installed when run as
# root, otherwise named), the .venv, pinned requirements, the native build.
SHELL := /bin/bash
PY ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
VPY := $(abspath $(VENV))/bin/python
STAMP := $(VENV)/.installed
WHEELS := $(wildcard /opt/wheels)
PIP_FLAGS := $(if $(WHEELS),--find-links $(WHEELS),)
export OMP_NUM_THREADS ?= 1

.PHONY: all setup sysdeps testdeps build wheelhouse lint test test-fast test-busy pytest check train lab clean ray

all: build

# Debian packages the native build needs (headers only; runtimes ship with Debian).
sysdeps:
	@missing=""; \
	[ -f /usr/include/lz4frame.h ] || missing="$$missing liblz4-dev"; \
	command -v cc >/dev/null || missing="$$missing gcc"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  else \
	    echo "missing Debian packages:$$missing"; \
	    echo "run: sudo apt-get update && sudo apt-get install -y$$missing"; exit 1; \
	  fi; \
	fi

# chromium, the headless browser of the league page's test (tests/test_league_page.py,
# driven by pip's playwright with executable_path: no browser download); only the tests
# need it, so `make train` and `make build` do not pull it in. Without root a missing
# chromium is named, not fatal: only that test skips, saying so.
testdeps:
	@if ! command -v chromium >/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages: chromium"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	  else \
	    echo "missing Debian package: chromium (the league page's browser test skips without it)"; \
	    echo "run: sudo apt-get update && sudo apt-get install -y chromium"; \
	  fi; \
	fi

$(STAMP): requirements.txt pyproject.toml
	@$(PY) -c 'import sys; assert sys.version_info[:2] >= (3, 11), "brawlkit needs Python >= 3.11"'
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q $(PIP_FLAGS) -r requirements.txt
	$(VPY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $(STAMP)

setup: sysdeps $(STAMP)

# the pinned requirements as local files: the Colab-bootstrap test installs a fresh
# clone from here (tests talk only to 127.0.0.1; this download is set-up, like pip's)
WHEELHOUSE := .cache/wheelhouse
$(WHEELHOUSE)/.complete: requirements.txt $(STAMP)
	$(VPY) -m pip download -q $(PIP_FLAGS) -d $(WHEELHOUSE) pip setuptools wheel -r requirements.txt
	touch $@

wheelhouse: $(WHEELHOUSE)/.complete

# Ray, the optional extra of `train --ray` (docs/distributed.md); `make test` gets it from
# requirements.txt already (tests/test_ray.py)
ray: setup
	$(VPY) -m pip install -q $(PIP_FLAGS) "ray==$$(sed -n 's/^ray==//p' requirements.txt)"

build: setup
	$(MAKE) -C native PYTHON=$(VPY)

lint: setup
	$(VPY) -m ruff check brawlkit tests colab_bootstrap.py
	$(VPY) -m mypy brawlkit

check: build
	$(MAKE) -C native check PYTHON=$(VPY)

# the language-model extra (requirements-llm.txt: policy serve/train --hf, tests/test_move_hf.py):
# the tests install it, `make build` and `make train` do not (pip keeps the pinned torch: it satisfies them)
LLM_STAMP := $(VENV)/.installed-llm
$(LLM_STAMP): requirements-llm.txt $(STAMP)
	$(VPY) -m pip install -q $(PIP_FLAGS) -r requirements-llm.txt
	touch $@

pytest: build wheelhouse testdeps $(LLM_STAMP)
	BRAWLKIT_TEST_WHEELHOUSE=$(abspath $(WHEELHOUSE)) $(VPY) -m pytest -q --durations=30 tests

# the unit tier only (no servers, no training, no notebooks): well under a minute
test-fast: build
	$(VPY) -m pytest -q -m "not servers and not training and not notebooks" tests

test: build lint check pytest

# the whole suite on a busy machine: `make pytest` with BUSY (default 2) CPU-bound loops
# beside it, so a test that passes only on an idle machine shows (a timing assumption is
# a defect in the test or the code). The loops end with the recipe's shell: on success,
# on a failure, on Ctrl-C, and even when that shell is killed (each loop spins only while
# its parent is the shell that started it).
BUSY ?= 2
test-busy: build wheelhouse testdeps
	@pids=""; trap 'kill $$pids 2>/dev/null' EXIT; trap 'exit 130' INT TERM; \
	for i in $$(seq $(BUSY)); do \
	  $(VPY) -c 'import os; p = os.getppid()'$$'\n''while os.getppid() == p: pass' & \
	  pids="$$pids $$!"; \
	done; \
	echo "test-busy: $(BUSY) busy loop(s) (pid$$pids) beside make pytest"; \
	start=$$(date +%s); rc=0; $(MAKE) --no-print-directory pytest || rc=$$?; \
	echo "test-busy: make pytest exited $$rc after $$(( $$(date +%s) - start )) s"; exit $$rc

# a short league, started from replays: a clone of the CPU (imitate: CPU 8 as the teacher,
# docs/imitation.md) that Main continues (--init-from) as the chosen recipe does — Main
# alone against the fixed ladder, its own generations (PFSP) and itself, on 64 arenas of
# one server (TrainConfig's defaults: the fast trainer's width) — on runs/league, its Elo drift
# notebook, and Main's newest generation judged on 50 fresh matches against cpu:5 (the
# verdict is the last line). TRAIN_ARGS: more generations, e.g. TRAIN_ARGS="--generations
# 20 ..."; ROLES: e.g. ROLES=main,main_exploiter,league_exploiter for all three;
# IMITATE_ARGS: imitate flags over the clone's shipped settings
# (brawlkit/training/imitation.py CLONE_ARGS: the chosen recipe's clone,
# configs/learn/chosen.toml; it is most of the bot). `imitate --ensure` builds the clone in
# runs/imitate when absent or built otherwise, and reuses it else: the same clone
# train_role.ipynb and colab_bootstrap.py start from.
IMITATE_ARGS ?=
ROLES ?= main
TRAIN_ARGS ?= --generations 2 --steps-per-generation 500000 --kl-coef 0.02 \
  --kl-decay-steps 500000 --eval-levels 3,5 --eval-episodes 6
train: build
	mkdir -p runs
	$(VPY) -m brawlkit imitate --ensure --run-dir runs/imitate $(IMITATE_ARGS)
	$(VPY) -m brawlkit league run --league-dir runs/league --runs-root runs --roles $(ROLES) -- \
	  --init-from runs/imitate/gen_0000.zip $(TRAIN_ARGS)
	$(VPY) -m papermill notebooks/elo_drift.ipynb runs/elo_drift.ipynb -p league_dir runs/league
	$(VPY) -m brawlkit league report --league-dir runs/league --vs cpu:5 --matches 50

# JupyterLab on the notebooks (LAB_ARGS, e.g. LAB_ARGS="--no-browser --port 8890");
# as root (containers, Colab-like boxes) Jupyter refuses to start without --allow-root
lab: build
	$(VPY) -m jupyter lab --notebook-dir=notebooks $(if $(filter 0,$(shell id -u)),--allow-root,) $(LAB_ARGS)

clean:
	$(MAKE) -C native clean
	rm -rf $(VENV) runs .cache .pytest_cache .mypy_cache .ruff_cache
