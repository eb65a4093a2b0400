# Two commands from a fresh clone:  `make up` (install + run)  and  `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TS := clients/typescript

.PHONY: install up test test-all lint protos bench clean

install: $(VENV)/.installed $(TS)/node_modules/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

# The TypeScript client's dependencies, from the npm registry (its tests are part of the
# suite: tests/polyglot).
$(TS)/node_modules/.installed: $(TS)/package-lock.json
	npm ci --prefix $(TS) --no-audit --no-fund --loglevel=error
	touch $@

## Start the embedded PostgreSQL and every service; Ctrl-C stops all of them.
up: install
	$(BIN)/episodic up

## The test suite (real PostgreSQL, real gRPC processes); slow benchmarks excluded.
test: install
	$(BIN)/pytest -q -n 2 --dist loadfile

test-all: install
	$(BIN)/pytest -q -n 2 --dist loadfile -m ''

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/buf lint
	$(BIN)/buf format -d --exit-code
	$(BIN)/mypy

## Regenerate the gRPC stubs (Python and TypeScript) after editing proto/.
protos: install
	$(BIN)/python -m episodic.devtools.protogen
	npm --prefix $(TS) run --silent generate

## On release: record proto/ as the released contracts. tests/test_contracts.py runs
## `buf breaking` against this image, so a later change that breaks clients fails the tests.
.PHONY: proto-baseline
proto-baseline: install
	$(BIN)/buf build --exclude-source-info -o proto/baseline/episodic-v1.binpb

clean:
	rm -rf $(VENV) .episodic

## Regenerate the README's configuration table from the settings.
docs: install
	$(BIN)/python -m episodic.devtools.config_table --write
	$(BIN)/python -m episodic.store.distribution --write
