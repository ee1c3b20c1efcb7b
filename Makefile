# Two entry points (see README): `make run` serves memdir, `make test` runs the suite.
# Both create .venv on first use; a change to pyproject.toml reinstalls.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench docs clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,embeddings]'
	@# The CLI starts many times a turn: keep its bytecode compiled even where
	@# PYTHONDONTWRITEBYTECODE is set (an editable install ships no .pyc).
	$(BIN)/python -m compileall -q src
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/memdir serve --http 127.0.0.1:8765

test: $(STAMP) lint
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests bench docs
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

docs: $(STAMP)
	$(BIN)/python docs/gen_cli.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
