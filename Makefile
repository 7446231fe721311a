# make demo: set up .venv and run the example kernels on every usable device.
# make test: set up .venv, run the tests and the conformance suite on every usable backend.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# every distribution in the repo: core first, then each backend, plugin and the suite
PACKAGES := . $(patsubst %/pyproject.toml,%,$(wildcard backends/*/pyproject.toml plugins/*/pyproject.toml conformance/pyproject.toml))
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?= -q
# test processes side by side: one a core (pytest-xdist's "auto"); JOBS=1 runs them in one
JOBS ?= auto
# PoCL (the OpenCL CPU driver) keeps the kernels it compiled here, so repeated runs stay fast
export POCL_CACHE_DIR ?= $(CURDIR)/.cache/pocl

.PHONY: demo test test-all setup clean conformance conformance-simulated bench-cpu bench-opencl test-distributed

setup: $(STAMP)

$(STAMP): pyproject.toml $(wildcard backends/*/pyproject.toml plugins/*/pyproject.toml conformance/pyproject.toml)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip setuptools wheel
	$(BIN)/python -m pip install -q $(foreach p,$(PACKAGES),-e $(p)) pytest pytest-xdist scipy mpmath
	@touch $@

demo: $(STAMP)
	$(BIN)/anytile backends
	@echo
	$(BIN)/anytile demo

# make test-all verifies the IR after every pass and IR-producing stage (ANYTILE_VERIFY=1)
test-all: export ANYTILE_VERIFY ?= 1
TEST_PATHS = tests $(wildcard backends/*/tests plugins/*/tests conformance/tests)
PARALLEL = $(if $(filter 1,$(JOBS)),,-n $(JOBS))

# under 15 minutes on 2 cores: every test but those marked slow (Hopper's copy unit and
# warpgroup MMA on the host GPU simulator), and the quick conformance suite on every usable
# backend; AMD's lowering on the simulator takes half the quick cases at each wave size
test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS) $(PARALLEL) -m "not slow" $(TEST_PATHS)
	$(MAKE) --no-print-directory -j2 -O conformance conformance-simulated

# everything: the slow tests too, and the simulated suites whole (NVIDIA's widths as well)
test-all: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS) $(PARALLEL) $(TEST_PATHS)
	$(MAKE) --no-print-directory -j2 -O conformance conformance-simulated SIMULATED_SHARDS=
	ANYTILE_GPU_SIMULATOR=1 $(BIN)/anytile conformance --backend gpusim --quick

# the GPU lowerings on the host simulator (opt-in test devices): AMD's at waves of 64 and 32
SIMULATED_SHARDS ?= yes
conformance-simulated: $(STAMP)
	ANYTILE_GPU_SIMULATOR=1 $(BIN)/anytile conformance --backend amdsim64 --quick $(if $(SIMULATED_SHARDS),--shard 0/2)
	ANYTILE_GPU_SIMULATOR=1 $(BIN)/anytile conformance --backend amdsim32 --quick $(if $(SIMULATED_SHARDS),--shard 1/2)

# examples/distributed_layernorm.py under torchrun (gloo, two CPU ranks): needs torch, which
# anytile does not depend on, so `make test` skips it; this target installs it first
TORCH_SPEC ?= torch
test-distributed: $(STAMP)
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q "$(TORCH_SPEC)"
	$(BIN)/python -m pytest $(PYTEST_ARGS) tests/runtime/test_distributed_example.py

conformance: $(STAMP)
	$(BIN)/python .ci/conformance_all.py --quick

clean:
	rm -rf $(VENV) build *.egg-info core/*.egg-info

bench-opencl: $(STAMP)
	@mkdir -p .cache
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(BIN)/python benchmarks/opencl.py --out .cache/opencl_results.md

bench-cpu: $(STAMP)
	@mkdir -p .cache
	$(BIN)/python -m pip install -q numba
	$(BIN)/python benchmarks/cpu.py --out .cache/cpu_results.md
