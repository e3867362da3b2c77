# swedojo: `make demo` shows the pipeline end to end; `make test` runs every suite (Docker included).
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: demo test bench system-deps test-deps docker-up install clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# torch first, pinned: on this machine the CPU build lies on disk; elsewhere pip takes the normal wheel.
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[test,ray]'
	touch $(STAMP)

install: $(STAMP)

# SWE-bench's own harness for the parity tests: a large dependency tree, needed by `make test` only.
PARITY := $(VENV)/.parity-installed
$(PARITY): $(STAMP) pyproject.toml
	$(BIN)/pip install -q -e '.[test,parity]'
	touch $(PARITY)

# What the local sandbox needs (bubblewrap, libseccomp, util-linux): the embedded default, so `demo` needs it too.
system-deps:
	bash scripts/system_deps.sh

# What only the tests need besides: Debian's chromium, the browser the report's test drives (`demo` does without).
test-deps:
	bash scripts/system_deps.sh test

# Start a Docker Engine where none answers, and build the locally made base image (cached by tag).
docker-up: system-deps
	bash scripts/ensure_docker.sh

demo: $(STAMP) system-deps
	$(BIN)/dojo demo

test: $(STAMP) $(PARITY) docker-up test-deps
	$(BIN)/lint-imports
	SWEDOJO_REQUIRE_DOCKER=1 SWEDOJO_REQUIRE_PARITY=1 SWEDOJO_REQUIRE_TOOLCHAINS=1 $(BIN)/python -m pytest -q

bench: $(STAMP) docker-up
	@for b in benchmarks/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
