# Two entry points (see README): `make run` serves memdir, `make test` runs the suite.
# Both create .venv on first use; a change to pyproject.toml reinstalls.
# `make test-fast` is the quick lane: the suite without the tests marked slow (real
# server processes, process storms, stress, bench smoke), in parallel too.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The real agent host the tests drive (README's MCP block, hooks): Claude Code from npm.
CLAUDE_VERSION := 2.1.332
CLAUDE := $(VENV)/node/node_modules/.bin/claude
# The second host: the Codex CLI from npm (docs/codex.md), in the same node prefix.
CODEX_VERSION := 0.171.0
CODEX := $(VENV)/node/node_modules/.bin/codex
# The memory browser's end-to-end tests (tests/test_ui.py) drive Debian's Chromium through
# Playwright (its own browser download cannot work here): installed when it is absent.
CHROMIUM := /usr/bin/chromium

# pytest-xdist workers: one per core (2 here). Tests that start many processes at once
# share the xdist group "processes" (loadgroup): they take turns on one worker.
WORKERS ?= auto
PYTEST := PATH="$(CURDIR)/$(VENV)/node/node_modules/.bin:$(CURDIR)/$(BIN):$$PATH" $(BIN)/pytest -n $(WORKERS) --dist loadgroup

.PHONY: run test test-fast test-postgres lint bench docs clean postgres iproute2

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,embeddings,postgres]'
	@# The CLI starts many times a turn: keep its bytecode compiled even where
	@# PYTHONDONTWRITEBYTECODE is set (an editable install ships no .pyc).
	$(BIN)/python -m compileall -q src
	touch $(STAMP)

$(CLAUDE): Makefile
	npm install --no-audit --no-fund --silent --prefix $(VENV)/node @anthropic-ai/claude-code@$(CLAUDE_VERSION)
	touch $(CLAUDE)

$(CODEX): Makefile
	npm install --no-audit --no-fund --silent --prefix $(VENV)/node @openai/codex@$(CODEX_VERSION)
	touch $(CODEX)

$(CHROMIUM):
	apt-get update -q
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium

run: $(STAMP)
	$(BIN)/memdir serve --http 127.0.0.1:8765

# The PostgreSQL the suite starts (tests/pg_server.py: initdb + pg_ctl, nothing assumed
# running) comes from Debian's postgresql-15, installed when no initdb is found.
PG_INITDB := $(firstword $(wildcard /usr/lib/postgresql/*/bin/initdb) $(shell command -v initdb))

postgres:
ifeq ($(PG_INITDB),)
	apt-get install -y -q postgresql-15 || (apt-get update -q && apt-get install -y -q postgresql-15)
endif

# The three-host team test (tests/test_team_hosts.py, W1) makes network namespaces with
# iproute2's `ip` (as root): installed when it is missing; the test fails without it.
IP := $(shell command -v ip)

iproute2:
ifeq ($(IP),)
	apt-get install -y -q iproute2 || (apt-get update -q && apt-get install -y -q iproute2)
endif

# The PostgreSQL lane (W1): the tier tests again with only a database URL changed (each
# test a fresh database of the suite's server, named by MEMDIR_DATABASE_URL and by
# `[storage] url` in the state dir's config.toml as a user names it: tests/storeconfig.py),
# memory.db's own tests left out (-m "not sqlite_only"): the tiers through the library, and
# through the front ends that reach them (the CLI, the MCP server and its surface, Claude
# Code's and Codex's hooks and MCP calls, the real hosts' end-to-end sessions, whose memdir
# finds the store in config.toml, memorize markers, boot, the importers, export/import, the
# browser's data, setup, the X1 and X2 guards, the memory root's settings, state dirs,
# limits, corrupt files, a full disk and a read-only mount).
# The store contract, tests/test_postgres.py and the three-host test (tests/test_team_hosts.py,
# a server of its own) run in the main suite; `make test-postgres` runs the last two after
# the lane. Left out, for time (each passes on PostgreSQL; seconds on it, 2 workers, at a
# load of 5): test_concurrency.py (~135 s: process storms), test_shutdown.py (~130 s),
# test_ui.py (~105 s, Chromium), test_hostile.py (~100 s), test_markers_surfaces.py
# (~65 s: every CLI read surface, a process each) and test_http_access.py (~40 s: the HTTP
# server's access rules, a server each); the files with nothing of the store in
# them (test_layers, test_public_types, test_signatures, test_readme, test_docs, test_query,
# test_eval, test_standin, test_hints, test_fuzz_cli, test_vector_worker,
# test_embedding_models, test_forkserver, test_bench_smoke, test_locomo_smoke); and
# test_search_bounded.py, test_watched.py and test_stress.py, sqlite_only throughout.
PG_LANE := tests/test_facts.py tests/test_entries.py tests/test_hot.py tests/test_tasks.py \
	tests/test_daily.py tests/test_sessions.py tests/test_validity.py tests/test_heartbeat.py \
	tests/test_procedures.py tests/test_get.py tests/test_recall.py tests/test_search.py \
	tests/test_search_context.py tests/test_duplicates.py tests/test_duplicates_x5.py \
	tests/test_distill.py tests/test_doctor.py tests/test_embedding.py \
	tests/test_cli.py tests/test_mcp.py tests/test_mcp_surface.py tests/test_mcp_codex.py \
	tests/test_hooks.py tests/test_hooks_codex.py tests/test_markers.py tests/test_boot.py \
	tests/test_importers.py tests/test_archive.py tests/test_browse.py tests/test_tools.py \
	tests/test_x1_confinement.py tests/test_secrets.py tests/test_secrets_x2.py \
	tests/test_settings_paths.py tests/test_state_dir.py tests/test_limits.py \
	tests/test_setup_claude_code.py tests/test_setup_codex.py \
	tests/test_corrupt.py tests/test_faults.py \
	tests/test_e2e_claude.py tests/test_e2e_claude_hooks.py tests/test_e2e_codex.py

# The pgvector lane (Q2): the semantic, hybrid and vector tests again on the PostgreSQL 16
# with pgvector that the pgserver wheel (the dev extra) bundles, where the server ranks;
# the lane above keeps Debian's PostgreSQL 15, which has no pgvector (the Python ranking).
# tests/test_pgvector.py, in the main suite, compares the two. ~30 s.
PGVECTOR_LANE := tests/test_search.py tests/test_search_context.py tests/test_store_contract.py \
	tests/test_duplicates.py tests/test_embedding.py tests/test_vector_worker.py \
	-k "semantic or hybrid or vector or embed or similar or context"

test: $(STAMP) $(CLAUDE) $(CODEX) $(CHROMIUM) postgres iproute2 lint
	$(PYTEST)
	MEMDIR_TEST_BACKEND=postgres $(PYTEST) -q -m "not sqlite_only" $(PG_LANE)
	MEMDIR_TEST_BACKEND=pgvector $(PYTEST) -q -m "not sqlite_only" $(PGVECTOR_LANE)

test-postgres: $(STAMP) postgres iproute2
	MEMDIR_TEST_BACKEND=postgres $(PYTEST) -q -m "not sqlite_only" $(PG_LANE)
	MEMDIR_TEST_BACKEND=pgvector $(PYTEST) -q -m "not sqlite_only" $(PGVECTOR_LANE)
	$(PYTEST) -q tests/test_postgres.py tests/test_team_hosts.py tests/test_pgvector.py

test-fast: $(STAMP) $(CLAUDE) $(CODEX) $(CHROMIUM) postgres
	$(PYTEST) -q -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check src tests bench docs
	$(BIN)/ruff format --check src tests bench docs
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache  # the layer rule and no import cycles (.importlinter)

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

docs: $(STAMP)
	$(BIN)/python docs/gen.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
