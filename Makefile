# Two commands from a fresh clone:  `make up` (install + run)  and  `make test`.
# `make up` needs only Python 3.11+; `make test` also needs Node 20+ and npm (the
# TypeScript client's tests are part of the suite).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TS := clients/typescript

.PHONY: install install-python up test test-all test-citus lint protos java-stubs bench clean image image-test lock docs docs-build docs-serve

## Everything the suite needs: the Python side, and the TypeScript client's npm packages.
install: install-python $(TS)/node_modules/.installed

## The Python side alone (.[dev] into the venv): all `make up`, `make lint` and `make docs*` need.
install-python: $(VENV)/.installed

# Every version from the lock (requirements/dev.txt, hashes checked: the versions the image
# ships), then the project itself, editable. `make lock` after changing pyproject.toml.
$(VENV)/.installed: pyproject.toml requirements/dev.txt requirements/build.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --require-hashes -r requirements/build.txt
	$(BIN)/python -m pip install --quiet --require-hashes -r requirements/dev.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	$(MAKE) --no-print-directory clean-moved
	touch $@

# A folder a package moved out of (shared/episodic/cli and ops/replay went to tools/) keeps
# its __pycache__ in a clone that pulls the move; Python would import that folder as an
# empty namespace package before the editable install's finder (it comes last) maps the
# name to tools/, and `episodic` would fail. Such folders (no .py left) are removed.
.PHONY: clean-moved
clean-moved:
	@for cache in $$(find shared/episodic -type d -name __pycache__); do \
		ls "$${cache%/__pycache__}"/*.py >/dev/null 2>&1 || rm -rf "$$cache"; \
	done; find shared/episodic -mindepth 1 -type d -empty -delete

# The TypeScript client's dependencies, from the npm registry (its tests are part of the
# suite: tests/polyglot).
$(TS)/node_modules/.installed: $(TS)/package-lock.json
	npm ci --prefix $(TS) --no-audit --no-fund --loglevel=error
	touch $@

## Start the embedded PostgreSQL and every service; Ctrl-C stops all of them.
up: install-python
	$(BIN)/episodic up

## The test suite (real PostgreSQL, real gRPC processes); slow benchmarks excluded.
test: install
	$(BIN)/pytest -q -n 2 --dist loadfile

## The Citus tier: the tests marked `citus`, on a coordinator and two workers (Citus built
## once from ../shared/vendor, about a minute; needs gcc and make).
test-citus: install
	EPISODIC_TEST_CITUS=1 $(BIN)/pytest -q -m citus

test-all: install
	$(BIN)/pytest -q -n 2 --dist loadfile -m ''

lint: install-python
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/buf lint
	$(BIN)/buf format -d --exit-code
	$(BIN)/mypy

## Regenerate the gRPC stubs after editing proto/: Python, Go and TypeScript (committed), and
## the Java stubs where their generators are (not committed; see java-stubs).
protos: install
	$(BIN)/python -m episodic.devtools.protogen
	npm --prefix $(TS) run --silent generate

## Generate the Java stubs into clients/stubs/java (ignored by git): the messages by Debian's
## protoc for its protobuf-java (PROTOC=… for another), the service classes by
## grpc_java_plugin. clients/stubs/README.md names the packages.
java-stubs: install-python
	$(BIN)/python -m episodic.devtools.protogen --lang java

## On release: record proto/ as the released contracts. tests/test_contracts.py runs
## `buf breaking` against this image, so a later change that breaks clients fails the tests.
.PHONY: proto-baseline
proto-baseline: install-python
	$(BIN)/buf build --exclude-source-info -o proto/baseline/episodic-v1.binpb

clean:
	rm -rf $(VENV) .episodic

## Regenerate the documentation's reference pages from the sources (gRPC API, configuration,
## CLI, metrics) and the Citus guide's list of cross-dataset statements; tests/test_docs.py
## fails when they are stale.
docs: install-python
	$(BIN)/python -m episodic.devtools.reference --write
	$(BIN)/python -m episodic.store.distribution --write

## Build the documentation site into site/ (strict: a broken link or page fails). Offline.
docs-build: install-python
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --site-dir site

## Serve the documentation site on http://127.0.0.1:8000, rebuilt on every change.
docs-serve: install-python
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs serve --dev-addr 127.0.0.1:8000

## Container images, built with podman (installed from Debian's packages if missing) on a
## base made from Debian's packages (no registry): $(IMAGE):$(TAG), the services, and
## $(IMAGE):$(TAG)-embedded, which serves with `docker run` alone. Docs: guides/kubernetes.md.
IMAGE ?= episodic
TAG ?= dev
image:
	IMAGE=$(IMAGE) TAG=$(TAG) containers/build.sh

## The images' smoke test (tests/image): the demo loop in the embedded image, and the
## services as separate containers against a PostgreSQL outside them.
image-test: image install-python
	EPISODIC_TEST_IMAGE=$(IMAGE):$(TAG) $(BIN)/pytest -q -p no:xdist tests/image

## Regenerate the lock files (requirements/) after changing a dependency in pyproject.toml.
lock: install-python
	$(BIN)/python -m pip install --quiet uv==0.13.9
	UV=$(BIN)/uv requirements/lock.sh
