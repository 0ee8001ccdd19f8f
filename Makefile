# Two entry points, both usable on a fresh machine with Python 3.11 and pip:
#   make demo   installs into .venv/ and runs the workflow on the bundled sample
#   make test   installs into .venv/ and runs the linters and the test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
CORES ?= 2

.PHONY: install demo test lint pytest clean

install: $(INSTALLED)

$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --editable '.[dev]'
	touch $@

demo: $(INSTALLED)
	$(BIN)/snakemake --snakefile workflow/Snakefile --cores $(CORES) --quiet rules
	@echo
	@echo "Per-direction scores:"
	@ls -1 runs/*/scores.csv

lint: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/snakefmt --check workflow
	$(BIN)/snakemake --snakefile workflow/Snakefile --lint --cores 1

pytest: $(INSTALLED)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test: lint pytest

clean:
	rm -rf $(VENV) .snakemake runs logs
