# Croniq: `make run` starts a local demo on SQLite, `make test` runs the suite.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUN_STAMP := $(VENV)/.installed-run
CRONIQ_PORT ?= 8000

.PHONY: install install-run lock bytecode run test lint test-sqlite test-postgres postgres-processes-a-then-docker test-docker docker-engine bench chaos clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The packages install with uv, itself pinned and hash-checked in
# requirements/uv.txt: from a clean clone pip took 113 s (most of it one
# index request after another), uv 45 s with the same locks and hashes.
# --compile-bytecode does what pip does: where PYTHONDONTWRITEBYTECODE is
# set, no process the suite starts could cache the packages' bytecode.
$(BIN)/uv: $(BIN)/python requirements/uv.txt
	$(BIN)/python -m pip install --quiet --require-hashes -r requirements/uv.txt
	touch $(BIN)/uv
UV_INSTALL := $(BIN)/uv pip install --quiet --python $(BIN)/python --compile-bytecode

# Third-party packages come from the lock files, every version pinned and
# every file hash-checked; pyproject.toml keeps the ranges they are compiled
# from (`make lock`). Croniq's own packages then install editable with
# --no-deps, and `uv pip check` refuses a lock that misses what they require.
# What running needs: the server, the runner package (runner/) and honcho,
# which `make run` starts both with (the demo extra: requirements/run.txt).
$(RUN_STAMP): $(BIN)/uv pyproject.toml runner/pyproject.toml requirements/run.txt
	$(UV_INSTALL) --require-hashes -r requirements/run.txt
	$(UV_INSTALL) --no-deps -e '.[demo]' -e ./runner
	$(BIN)/uv pip check --quiet --python $(BIN)/python
	touch $(RUN_STAMP)

# And what developing needs: the test suite's and the linter's packages.
$(STAMP): $(RUN_STAMP) requirements/dev.txt
	$(UV_INSTALL) --require-hashes -r requirements/dev.txt
	touch $(STAMP)

install-run: $(RUN_STAMP)

install: $(STAMP)

# Compiles the lock files from pyproject.toml's ranges for the images' and
# CI's Python (3.11, Linux x86_64), with every file's hash. The development
# lock is resolved first and the others within it, so the images run the
# versions the suite tests. Pins already locked are kept while the ranges
# allow them: `make lock LOCK_ARGS=--upgrade` moves every package to its
# newest allowed release, `LOCK_ARGS="--upgrade-package django"` one.
UV_COMPILE := $(BIN)/uv pip compile --quiet --python-version 3.11 \
	--python-platform x86_64-unknown-linux-gnu --generate-hashes --custom-compile-command 'make lock'
LOCK_ARGS ?=
# The server requires croniq-runner, which is this checkout's runner/ (found
# there through pyproject.toml's tool.uv.sources): its requirements are
# locked, the package itself is left out (a directory has no hash) and
# installed from ./runner with --no-deps, as every install does.
OWN := --no-emit-package croniq-runner

lock: install
	$(UV_COMPILE) $(LOCK_ARGS) pyproject.toml --extra demo --extra dev $(OWN) -o requirements/dev.txt
	$(UV_COMPILE) pyproject.toml --extra demo -c requirements/dev.txt $(OWN) -o requirements/run.txt
	$(UV_COMPILE) pyproject.toml -c requirements/dev.txt $(OWN) -o requirements/server.txt
	$(UV_COMPILE) runner/pyproject.toml -c requirements/dev.txt -o runner/requirements.txt
	echo uv | $(UV_COMPILE) - -c requirements/dev.txt -o requirements/uv.txt

# Croniq's own modules compiled ahead. Where PYTHONDONTWRITEBYTECODE is set
# (CI machines, many images) no process writes them, and every process the
# suite starts (servers, loops, agents, manage.py) compiled some 130 modules
# from source: 0.24 s of the 1.05 s of CPU a start costs. Only what changed
# since the last run is compiled again.
bytecode: install
	@$(BIN)/python -m compileall -q -j 0 -x '/\.(venv|git)/' . > /dev/null

run: install-run
	DEBUG=1 $(BIN)/python manage.py migrate --no-input
	DEBUG=1 CRONIQ_PORT=$(CRONIQ_PORT) $(BIN)/python manage.py demo_setup --env-file .croniq/demo.env \
		--url http://127.0.0.1:$(CRONIQ_PORT)/
	PATH="$(CURDIR)/$(BIN):$$PATH" DEBUG=1 CRONIQ_PORT=$(CRONIQ_PORT) \
		$(BIN)/honcho -e .croniq/demo.env -f Procfile start

# mypy checks the typed core: the modules pyproject.toml's [tool.mypy] lists.
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# Both backends side by side, each in four runs: the tests that start real
# processes, in two shares (PROCESS_A, PROCESS_B), and the rest, in two
# shares (REST_A and the others; PostgreSQL's deselect the tests of SQLite
# alone). Measured on two cores, the rest is CPU in the pytest process
# itself, while the process tests mostly wait on their processes' instants,
# timeouts and leases. The whole run is about 37 minutes of CPU: the runs
# are cut so that none is left alone at the end with a core idle. More
# workers (pytest-xdist) would only queue for the same two cores. Every run
# and the Docker base image's build (it mostly downloads) start at once
# (-j9: one slot each), and -O prints each run's output whole when it ends;
# image builds and containers come after the shortest run, the first share
# of the process tests on PostgreSQL, so that they share the machine with
# the rest rather than end the run alone.
PROCESS_TESTS := tests/e2e tests/chaos tests/conformance
# Each run ends with its slowest tests, where CI's minutes go.
PYTEST_ARGS ?= --durations=25
# The shares hold about the same wait: the chaos and conformance suites
# and the e2e modules from a to c, then the other e2e modules.
PROCESS_A := tests/chaos tests/conformance $(sort $(wildcard tests/e2e/test_[a-c]*.py))
PROCESS_B := $(filter-out $(PROCESS_A),$(sort $(wildcard tests/e2e/test_*.py)))
# The rest runs at a lower priority: it is mostly CPU in the pytest
# process, while the process tests wait on real instants, leases and
# timeouts, which a machine busy with the rest stretched until a lease
# lapsed; it takes the CPU they leave.
REST_NICE := nice -n 10
# The rest's first share: about half its CPU (the scheduler's upgrade tests
# are most of it); the second share is everything else.
REST_A := tests/scheduler tests/agent tests/calendars tests/cli tests/core tests/secrets \
	tests/sign_in tests/sso tests/projects

.PHONY: test-sqlite-processes test-sqlite-rest test-postgres-processes test-postgres-rest
.PHONY: test-sqlite-processes-a test-sqlite-processes-b test-sqlite-rest-a test-sqlite-rest-b
.PHONY: test-postgres-processes-a test-postgres-processes-b test-postgres-rest-a test-postgres-rest-b

# The linters run beside the tests (mypy from a clean clone waits some 15 s
# on its cache files); a lint failure fails `make test` all the same.
test: install
	@$(MAKE) --no-print-directory -j10 -O lint test-sqlite-processes test-sqlite-rest \
		postgres-processes-a-then-docker test-postgres-processes-b test-postgres-rest

postgres-processes-a-then-docker: test-postgres-processes-a docker-engine
	@$(MAKE) --no-print-directory test-docker

# Alone (no -j) the runs go one after the other.
test-sqlite: test-sqlite-processes test-sqlite-rest

test-sqlite-processes: test-sqlite-processes-a test-sqlite-processes-b

test-sqlite-processes-a: bytecode
	@echo "=== tests that start processes, on SQLite (share A)"
	env -u DATABASE_URL $(BIN)/python -m pytest -m "not docker" $(PROCESS_A) $(PYTEST_ARGS)

test-sqlite-processes-b: bytecode
	@echo "=== tests that start processes, on SQLite (share B)"
	env -u DATABASE_URL $(BIN)/python -m pytest -m "not docker" $(PROCESS_B) $(PYTEST_ARGS)

test-sqlite-rest: test-sqlite-rest-a test-sqlite-rest-b

test-sqlite-rest-a: bytecode
	@echo "=== the rest of the suite, on SQLite (share A)"
	env -u DATABASE_URL $(REST_NICE) $(BIN)/python -m pytest -m "not docker" $(REST_A) $(PYTEST_ARGS)

test-sqlite-rest-b: bytecode
	@echo "=== the rest of the suite, on SQLite (share B)"
	env -u DATABASE_URL $(REST_NICE) $(BIN)/python -m pytest -m "not docker" \
		$(addprefix --ignore=,$(PROCESS_TESTS) $(REST_A)) $(PYTEST_ARGS)

test-postgres: test-postgres-processes test-postgres-rest

test-postgres-processes: test-postgres-processes-a test-postgres-processes-b

test-postgres-rest: test-postgres-rest-a test-postgres-rest-b

# The PostgreSQL runs side by side each need a test database of their own
# (pytest-django names it test_ and the URL's database): a share's URL names
# CRONIQ_TEST_POSTGRES_URL's database with _processes_a, _processes_b,
# _rest_a or _rest_b after it.
test-postgres-processes-a: bytecode
	@$(call postgres-run,processes_a,tests that start processes,,$(PROCESS_A))

test-postgres-processes-b: bytecode
	@$(call postgres-run,processes_b,tests that start processes,,$(PROCESS_B))

test-postgres-rest-a: bytecode
	@$(call postgres-run,rest_a,the rest of the suite,$(REST_NICE),$(REST_A))

test-postgres-rest-b: bytecode
	@$(call postgres-run,rest_b,the rest of the suite,$(REST_NICE),$(addprefix --ignore=,$(PROCESS_TESTS) $(REST_A)))

define postgres-run
	if [ -n "$$CRONIQ_TEST_POSTGRES_URL" ]; then \
		echo "=== $(2), on PostgreSQL ($(1))"; \
		CRONIQ_TEST_DATABASE_URL="$${CRONIQ_TEST_POSTGRES_URL}_$(1)" \
			$(3) $(BIN)/python -m pytest -m "not docker" $(4) $(PYTEST_ARGS); \
	else \
		echo "=== CRONIQ_TEST_POSTGRES_URL not set: PostgreSQL run skipped"; \
	fi
endef

# Builds both images from a clean checkout and runs them and the README's
# compose commands; deploy/docker-base.sh first starts the engine and, with
# no image registry, builds the base image from Debian packages.
# Outside CI a machine without Docker (or root) still runs `make test`: the
# Docker tests then skip and say why; in CI they must run.
docker-engine:
	@echo "=== Docker engine and base image"
	@deploy/docker-base.sh || [ -z "$$CI" ] || exit 1

test-docker: bytecode docker-engine
	@echo "=== Docker images and compose"
	env -u DATABASE_URL $(BIN)/python -m pytest -m docker tests/docker $(PYTEST_ARGS)

bench: install
	$(BIN)/python bench/run_all.py

chaos: install
	CRONIQ_CHAOS_PROFILE=long $(BIN)/python -m pytest -m chaos tests/chaos

clean:
	rm -rf $(VENV) .croniq croniq.sqlite3*

# The unit tier (no e2e, chaos or Docker tests) on SQLite, on the newest
# Django Croniq supports, which needs Python 3.12: a venv of its own, its
# packages resolved from pyproject.toml's ranges with Django pinned (the lock
# files keep 5.2 LTS for Python 3.11). Not part of `make test`.
# A python3.12 on PATH, or pyenv's newest 3.12.
PYTHON_LATEST ?= $(shell PYENV_VERSION=$$(pyenv latest 3.12 2>/dev/null) pyenv which python3.12 \
	2>/dev/null || command -v python3.12)
DJANGO_LATEST ?= 6.1
LATEST_VENV ?= .venv-django61

.PHONY: test-django-latest

$(LATEST_VENV)/.installed: pyproject.toml runner/pyproject.toml | $(STAMP)
	rm -rf $(LATEST_VENV)
	$(PYTHON_LATEST) -m venv $(LATEST_VENV)
	echo "django==$(DJANGO_LATEST)" > $(LATEST_VENV)/django.txt
	$(BIN)/uv pip install --quiet --python $(LATEST_VENV)/bin/python \
		-e '.[dev]' -e ./runner --override $(LATEST_VENV)/django.txt
	touch $@

test-django-latest: $(LATEST_VENV)/.installed
	@echo "=== unit tier on Django $(DJANGO_LATEST)"
	env -u DATABASE_URL $(LATEST_VENV)/bin/python -m pytest \
		-m "not e2e and not chaos and not docker" $(PYTEST_ARGS)
