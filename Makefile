# rlm-sandbox: `make` fetches Pyodide, builds the binaries and prepares the
# caches; `make test` runs every test.
SHELL := /bin/bash
GO ?= go
export RLM_SANDBOX_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/rlm-sandbox
PYODIDE_VERSION := 314.0.7
PYODIDE_DIR := $(RLM_SANDBOX_CACHE)/pyodide-npm-$(PYODIDE_VERSION)
BINS := bin/rlm-sandbox bin/rlm-worker
RACE_PKGS := ./supervisor/... ./ipc/... ./runtime/internal/... ./tests/

.PHONY: all pyodide build prepare test test-python python-env soak bench bench-python check fuzz clean deploy-check image

all: build prepare

pyodide: $(PYODIDE_DIR)/.complete

$(PYODIDE_DIR)/.complete: scripts/fetch-pyodide.sh
	bash scripts/fetch-pyodide.sh

# The binaries are built with wazero patched by patches/wazero/ (see its
# README); go.mod has no replace, so `go test`, `go install` and importers
# of the packages get stock wazero.
PATCHED_MOD := build/go.patched.mod

$(PATCHED_MOD): scripts/patch-wazero.sh patches/wazero $(wildcard patches/wazero/*.patch) go.mod go.sum
	bash scripts/patch-wazero.sh

# CGO_ENABLED=0: the worker restricts all its threads with Landlock
# (syscall.AllThreadsSyscall), which a binary linked with cgo cannot.
build: $(PATCHED_MOD)
	CGO_ENABLED=0 $(GO) build -modfile=$(PATCHED_MOD) -o bin/ ./cmd/...

# Compiles Pyodide to native code (cached on disk) and the standard library
# to bytecode with the guest's own CPython.
prepare: pyodide build
	bin/rlm-sandbox prepare

# The tests of the wazero packages the patches touch, and the spec and fuzz
# regression tests of the code the compiler emits (patches 5-13 change it),
# run in the patched copy.
WAZERO_PATCH_TESTS := . ./internal/wasm/ ./internal/engine/wazevo/ ./internal/engine/wazevo/frontend/ ./internal/engine/wazevo/ssa/ ./internal/engine/wazevo/backend/regalloc/ ./internal/engine/wazevo/backend/isa/amd64/ ./internal/platform/ ./internal/integration_test/filecache/ ./internal/integration_test/spectest/v1/ ./internal/integration_test/spectest/v2/ ./internal/integration_test/fuzzcases/

test: all python-env
	$(GO) test -count=1 -timeout 20m ./...
	$(GO) test -count=1 -modfile=$(PATCHED_MOD) ./internal/wazeroinfo/
	cd "$$(sed -n 's|^replace github.com/tetratelabs/wazero => ./||p' $(PATCHED_MOD))" && \
		$(GO) test -count=1 -timeout 10m $(WAZERO_PATCH_TESTS)
	$(MAKE) --no-print-directory test-python

# The Python client (clients/python) in a venv under build/, with the DSPy
# release its dspy.RLM adapter follows. DSPy is optional: when PyPI cannot
# give it, a warning says so, the real-dspy.RLM test is skipped (saying
# why) and every other Python test runs.
PYTHON ?= python3
PYENV := build/pyenv
DSPY_VERSION := 3.4.1

python-env: $(PYENV)/.complete
	@$(PYENV)/bin/pip show dspy >/dev/null 2>&1 || \
		$(PYENV)/bin/pip install -q "dspy==$(DSPY_VERSION)" || \
		echo "warning: dspy==$(DSPY_VERSION) could not be installed from PyPI: the real dspy.RLM test will be skipped" >&2

$(PYENV)/.complete: clients/python/pyproject.toml
	$(PYTHON) -m venv $(PYENV)
	$(PYENV)/bin/pip install -q -e clients/python
	touch $@

# The client's tests, against the real bin/rlm-sandbox.
test-python: build python-env
	RLM_SANDBOX=$(CURDIR)/bin/rlm-sandbox $(PYENV)/bin/python -m unittest discover -v -s clients/python/tests -t clients/python/tests

# Round trips from Python (execute, llm_query, a dspy.RLM step), next to
# DSPy's default interpreter (Deno, from the deno package on PyPI).
bench-python: all python-env
	@$(PYENV)/bin/pip show deno >/dev/null 2>&1 || $(PYENV)/bin/pip install -q "deno>=2.4.5,<3" || \
		echo "warning: no Deno from PyPI: DSPy's default interpreter will not be measured" >&2
	RLM_SANDBOX=$(CURDIR)/bin/rlm-sandbox $(PYENV)/bin/python -m rlm_sandbox.bench

# The load, leak and chaos suite at full size (`make test` runs a short
# version of each case), and the escape and hostile-program tests; at most
# 10 minutes.
soak: all
	RLM_SOAK=1 $(GO) test -count=1 -timeout 10m -v -run 'TestSoak|TestSupervisorKilled|TestHostilePrograms|TestEscape|TestHardening' ./tests/

# The CPU benchmarks also run their rows under Node + Pyodide, the system
# rlm-sandbox replaces, from the same npm package (scripts/node-cpu-bench.mjs),
# and in native CPython, the python3 on PATH (scripts/native-cpu-bench.py).
NODE_PYODIDE := build/node-pyodide-$(PYODIDE_VERSION)

$(NODE_PYODIDE)/.complete: scripts/fetch-pyodide.sh
	PYODIDE_NODE_DIR=$(CURDIR)/$(NODE_PYODIDE) bash scripts/fetch-pyodide.sh

# The per-request rows, run a second time over 2,000 requests.
STEADY_BENCH := ExecutePass|ExecuteStatement|LLMQuery$$|LLMQueryBatched

# The direct-mode rows run twice: with stock wazero, as a program that
# imports this module runs them, and (named direct-patched) with the
# patched wazero the binaries run, whose direct mode keeps bounds checks.
#
# The output also goes to build/bench.txt, from which the last step prints
# the targets of the inner-loop and CPU work, a row each, against this run
# (internal/benchtable). pipefail: a benchmark that fails fails the target,
# whatever tee does.
BENCH_OUT := build/bench.txt

bench: .SHELLFLAGS := -o pipefail -c
bench: all $(NODE_PYODIDE)/.complete
	@mkdir -p build && : > $(BENCH_OUT)
	$(GO) test -run '^$$' -bench . -benchtime 20x -timeout 30m ./... | tee -a $(BENCH_OUT)
	$(GO) test -modfile=$(PATCHED_MOD) -run '^$$' -bench . -benchtime 20x -timeout 30m ./supervisor/ | tee -a $(BENCH_OUT)
	$(GO) test -modfile=$(PATCHED_MOD) -run '^$$' -bench RLMIteration -benchtime 20x -timeout 30m ./tests/ | tee -a $(BENCH_OUT)
	@echo "# the per-request rows again, over 2,000 requests (20 are mostly a sandbox's first ones)"
	$(GO) test -run '^$$' -bench '$(STEADY_BENCH)' -benchtime 2000x -timeout 30m ./supervisor/ | tee -a $(BENCH_OUT)
	$(GO) test -modfile=$(PATCHED_MOD) -run '^$$' -bench '$(STEADY_BENCH)' -benchtime 2000x -timeout 30m ./supervisor/ | tee -a $(BENCH_OUT)
	@echo
	$(GO) run ./internal/benchtable $(BENCH_OUT)

check: all
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "not gofmt-formatted:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) test -count=1 -race -short -timeout 20m $(RACE_PKGS)

# Validates deploy/*.yaml against the Kubernetes API types (deploy/check, a
# module of its own: its dependencies come from the Go proxy on first use)
# and the container's args against bin/rlm-sandbox. Not part of `make test`.
deploy-check: build
	cd deploy/check && $(GO) run . -cli ../../bin/rlm-sandbox ../*.yaml

# Builds the container image (needs a Docker engine and a registry for the
# base images) and runs `rlm-sandbox version` in it.
IMAGE ?= rlm-sandbox:dev
image:
	docker build -t $(IMAGE) .
	docker run --rm --network none $(IMAGE) version

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzDecodeFrame -fuzztime 30s ./ipc/
	$(GO) test -run '^$$' -fuzz FuzzDecodeMessage -fuzztime 30s ./ipc/

clean:
	rm -rf bin/ build/
