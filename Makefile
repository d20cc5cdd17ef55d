# Ember: every target installs what it needs. Python 3.11+ and (for tests) apt-get as root.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
EMBER := $(BIN)/ember
TEST_DB ?= ember_test
STAMP := $(VENV)/.installed

.PHONY: setup db migrate demo test pgtap pytest lint bench clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[dev,embed]'
	@touch $@

## setup: virtual environment, packages, pgTAP, Chromium, and the embedded database
setup: $(STAMP)
	@$(EMBER) setup-pgtap
	@$(EMBER) setup-chromium

## db: start the embedded PostgreSQL (or use $$DATABASE_URL) and print its URL
db: $(STAMP)
	@if [ -n "$${DATABASE_URL:-}" ]; then echo "using DATABASE_URL"; else $(EMBER) db start; fi

## migrate: apply new migrations, then re-apply functions/ (against $$DATABASE_URL if set)
migrate: $(STAMP)
	@$(EMBER) migrate

## demo: Ember's whole job on the sample corpus, offline; prints the report's path last
demo: $(STAMP)
	@$(EMBER) demo

## test: a fresh test database, then pg_prove over pgtap/ and pytest over tests/
test: setup
	@$(MAKE) --no-print-directory pgtap pytest

# pg_prove reads an "=" in --dbname as an option hash, so the embedded server's passfile goes
# through PGPASSFILE instead of the URL's query.
pgtap: $(STAMP)
	@url=$$($(EMBER) testdb --name $(TEST_DB)); \
	case "$$url" in *'?passfile='*) export PGPASSFILE="$${url#*\?passfile=}"; url="$${url%%\?*}";; esac; \
	psql_bin=$$($(BIN)/python -c 'from ember.embedded import bin_dir; print(bin_dir() / "psql")'); \
	pg_prove --psql-bin "$$psql_bin" --dbname "$$url" --ext .sql pgtap/

pytest: $(STAMP)
	@$(BIN)/pytest -q

## lint: sqlfluff over db/ and functions/, ruff and mypy --strict over Python
lint: $(STAMP)
	@$(BIN)/sqlfluff lint db functions
	@$(BIN)/ruff check worker tests
	@$(BIN)/ruff format --check worker tests
	@$(BIN)/mypy

## bench: run every bench/b*.py (each in its own scratch database) and write docs/benchmarks.md
bench: $(STAMP)
	@$(BIN)/python bench/run.py

## clean: stop the embedded database and remove it, the venv and caches
clean:
	@if [ -x $(EMBER) ]; then $(EMBER) db stop || true; fi
	rm -rf .ember $(VENV) .pytest_cache .ruff_cache .hypothesis worker/*.egg-info
