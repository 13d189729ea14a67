# The two commands of a fresh clone:
#   make demo   a real sync of examples/ from git into a local control plane
#   make test   lint, type-check, import contracts and the whole test suite, its files
#               spread over the cores (each worker with a control plane of its own)
# Both create the virtualenv and build (once) or find the control plane themselves.
# CONTRIBUTING.md says what each needs, and where each prints how long it took.
# `make test-fast` runs the tests that need no cluster.
# `make bench` measures gitopsd against kubectl and its targets, on a bare control plane
# and on one with controllers, and writes BENCHMARKS.md, with how long the run took (not
# part of `make test`). `make bench PEERS=flux` first builds Flux's controllers (once, a
# few minutes) and measures them beside gitopsd: make cannot take `--peers flux` itself
# (it reads options as its own), so PEERS passes it on. Plain `make bench` measures Flux
# too when it is already built.
# `make mutation` runs the pure core's unit tests against mutants of its modules (mutmut) and
# writes the share each module's tests kill to MUTATION.md, with how long the run took (not
# part of `make test`; docs/testing.md says how to read it).
# `make crd` writes config/crd/gitsyncs.yaml from gitopsd/gitsync/schema.py, and
# gitsyncsets.yaml from gitopsd/gitsyncsets/schema.py (a test fails when they disagree).
# `make schemas` writes gitopsd/validation/kubernetes.json, the built-in kinds' schemas that
# `gitopsd validate` checks against, from the OpenAPI spec of the k8s.io/kubernetes module
# tests/controlplane/kube/go.sum pins (needs Go; a test fails when the two disagree).
# `make lock` resolves pyproject.toml's ranges anew into requirements/runtime.txt (the
# image's) and requirements/dev.txt (CI's and the tests'), each pin with its hashes.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Two pytest workers per core, at most four: the suite mostly waits on real time (one worker
# per core left the cores half idle), and each worker starts a control plane of its own.
WORKERS ?= $(shell n=$$(nproc); echo $$(( 2 * n < 4 ? 2 * n : 4 )))

.PHONY: test test-fast demo bench mutation crd schemas lint lock control-plane prometheus alertmanager browser sshd shells image-tools clean

# The locked set, hashes required, then gitopsd itself without resolving anything again.
$(BIN)/.installed: pyproject.toml requirements/dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --require-hashes --requirement requirements/dev.txt
	$(BIN)/pip install --quiet --no-deps --editable .
	touch $@

lock:
	$(PYTHON) -m venv $(VENV)-lock
	$(VENV)-lock/bin/pip install --quiet pip-tools
	CUSTOM_COMPILE_COMMAND="make lock" $(VENV)-lock/bin/pip-compile --quiet --upgrade \
		--generate-hashes --strip-extras --allow-unsafe --no-emit-find-links \
		--output-file requirements/runtime.txt pyproject.toml
	CUSTOM_COMPILE_COMMAND="make lock" $(VENV)-lock/bin/pip-compile --quiet --upgrade \
		--generate-hashes --strip-extras --allow-unsafe --no-emit-find-links --extra dev \
		--output-file requirements/dev.txt pyproject.toml
	rm -rf $(VENV)-lock

control-plane:
	tests/controlplane/provide.sh >/dev/null

prometheus:
	tests/prometheus/provide.sh >/dev/null

browser:
	tests/browser/provide.sh >/dev/null

alertmanager:
	tests/alertmanager/provide.sh >/dev/null

sshd:
	tests/sshd/provide.sh >/dev/null

shells:
	tests/shells/provide.sh >/dev/null

image-tools: control-plane
	tests/image/provide.sh >/dev/null

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	@# known vulnerabilities of the locked set (OSV); one line, and a pass, when offline
	$(BIN)/python -m tests.supply_chain.advisories requirements/dev.txt

# Lint runs beside the tests, on the core they leave free most of the time; its output
# follows theirs, and either failing fails the target.
test: $(BIN)/.installed control-plane prometheus alertmanager browser sshd shells image-tools
	@echo "lint (ruff, mypy --strict, import contracts, dependency audit) runs beside the tests; its output follows"
	@$(MAKE) --no-print-directory lint > $(VENV)/lint.log 2>&1 & linting=$$!; \
	$(BIN)/pytest --numprocesses $(WORKERS) --dist loadfile --no-loadscope-reorder --durations 25; tested=$$?; \
	wait $$linting; linted=$$?; cat $(VENV)/lint.log; \
	test $$tested -eq 0 -a $$linted -eq 0

test-fast: $(BIN)/.installed shells
	$(BIN)/pytest --numprocesses $(WORKERS) -m "not cluster and not image" --durations 10

demo: $(BIN)/.installed control-plane
	$(BIN)/python -m tests.demo $(ARGS)

bench: $(BIN)/.installed control-plane
	$(BIN)/python -m tests.bench $(if $(PEERS),--peers $(PEERS)) $(ARGS)

mutation: $(BIN)/.installed
	$(BIN)/python -m tests.mutation $(ARGS)

crd: $(BIN)/.installed
	$(BIN)/python -m gitopsd.gitsync.schema > config/crd/gitsyncs.yaml
	$(BIN)/python -m gitopsd.gitsyncsets.schema > config/crd/gitsyncsets.yaml

schemas: $(BIN)/.installed
	$(BIN)/python -m tests.kubernetes_schemas > gitopsd/validation/kubernetes.json.partial
	mv gitopsd/validation/kubernetes.json.partial gitopsd/validation/kubernetes.json

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
