# Ember: every target installs what it needs. Python 3.11+ and (for tests) apt-get as root.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
EMBER := $(BIN)/ember
TEST_DB ?= ember_test
# One stamp per part of the environment (scripts/install.py says what each holds): the demo
# needs only the base, so a newcomer's first `make demo` never waits for torch or the linters.
BASE := $(VENV)/.installed-base
PART = $(VENV)/.installed-$(1)

# Every install reads a lock, requirements/PART.txt: exact versions with sha256 hashes.
LOCK = requirements/$(1).txt

.PHONY: setup db migrate demo test pgtap pytest lint bench embedder clean lock test-latest test-long test-citus

$(BASE): pyproject.toml setup.py scripts/install.py $(call LOCK,base)
	@$(PYTHON) scripts/install.py $(VENV) base
	@rm -f $(VENV)/.installed-test $(VENV)/.installed-lint $(VENV)/.installed-embed
	@touch $@

$(VENV)/.installed-%: $(BASE) requirements/%.txt
	@$(PYTHON) scripts/install.py $(VENV) $*
	@touch $@

## lock: re-resolve requirements/*.txt to the newest versions allowed (UPGRADE="a b": only those)
lock:
	@$(PYTHON) scripts/lock.py $(if $(UPGRADE),--upgrade $(UPGRADE))

## test-latest: the whole suite against the newest versions allowed, in a throwaway environment
test-latest:
	@$(PYTHON) scripts/test_latest.py

## setup: the test environment: packages, the embedder, pgTAP, objdump, Chromium, the database
setup: $(call PART,test) $(call PART,embed)
	@$(EMBER) setup-test-tools

## embedder: the optional embedder (torch on the CPU, about 1 GB), for vector search
embedder: $(call PART,embed)

## db: start the embedded PostgreSQL (or use $$DATABASE_URL) and print its URL
db: $(BASE)
	@if [ -n "$${DATABASE_URL:-}" ]; then echo "using DATABASE_URL"; else $(EMBER) db start; fi

## migrate: apply new migrations, then re-apply functions/ (against $$DATABASE_URL if set)
migrate: $(BASE)
	@$(EMBER) migrate

## demo: Ember's whole job on the sample corpus, offline; prints the report's path last
demo: $(BASE)
	@$(EMBER) demo

## test: a fresh test database, then pg_prove over pgtap/ and pytest over tests/
test:
	@$(PYTHON) scripts/debian_packages.py
	@$(MAKE) --no-print-directory setup
	@$(MAKE) --no-print-directory pgtap pytest

# pg_prove reads an "=" in --dbname as an option hash, so the embedded server's passfile goes
# through PGPASSFILE instead of the URL's query.
pgtap: $(call PART,test)
	@url=$$($(EMBER) testdb --name $(TEST_DB)); \
	case "$$url" in *'?passfile='*) export PGPASSFILE="$${url#*\?passfile=}"; url="$${url%%\?*}";; esac; \
	psql_bin=$$($(BIN)/python -c 'from ember.embedded import bin_dir; print(bin_dir() / "psql")'); \
	pg_prove --psql-bin "$$psql_bin" --dbname "$$url" --ext .sql pgtap/

pytest: $(call PART,test) $(call PART,embed)
	@$(BIN)/pytest -q

## test-long: the stage-two schedule (pgtap/097_cutover_stage_two_schedule) at STEPS steps (default 2000), SEEDS seeds
STEPS ?= 2000
SEEDS ?= 0.4242 0.1 0.7
test-long: $(call PART,test)
	@$(MAKE) --no-print-directory setup
	@url=$$($(EMBER) testdb --name $(TEST_DB)); \
	case "$$url" in *'?passfile='*) export PGPASSFILE="$${url#*\?passfile=}"; url="$${url%%\?*}";; esac; \
	psql_bin=$$($(BIN)/python -c 'from ember.embedded import bin_dir; print(bin_dir() / "psql")'); \
	for seed in $(SEEDS); do \
		out=$$(pg_prove --verbose --psql-bin "$$psql_bin" --dbname "$$url" --set steps=$(STEPS) \
			--set seed=$$seed pgtap/097_cutover_stage_two_schedule.sql 2>&1); status=$$?; \
		printf '%s\n' "$$out" | grep -E '^(# seed|not ok|#  |Result)'; \
		[ $$status -eq 0 ] || exit 1; \
	done

## test-citus: Ember on a Citus cluster (a coordinator, two workers), built from ../shared/citus or CITUS_PG_CONFIG
test-citus: $(call PART,test)
	@$(BIN)/python -m ember.citus
	@$(BIN)/pytest -q -p no:cacheprovider tests_citus

## lint: sqlfluff over db/ and functions/, ruff and mypy --strict over Python
lint: $(call PART,lint)
	@$(BIN)/sqlfluff lint db functions
	@$(BIN)/ruff check worker tests tests_citus
	@$(BIN)/ruff format --check worker tests tests_citus
	@$(BIN)/mypy

## bench: run every bench/b*.py (each in its own scratch database) and write docs/benchmarks.md
bench: $(call PART,test) $(call PART,embed)
	@$(BIN)/python bench/run.py

## clean: stop the embedded database and remove it, the venv and caches
clean:
	@if [ -x $(EMBER) ]; then $(EMBER) db stop || true; fi
	rm -rf .ember $(VENV) build .pytest_cache .ruff_cache .hypothesis worker/*.egg-info
