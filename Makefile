# Strata's two commands:
#   make demo   builds strata and strata-gui, then runs the user's day on the default scenario
#   make test   builds, then runs every test: the whole suite, then the sanitizer suite
# Both first install missing Debian packages (tools/install-deps.sh, idempotent).

PRESET ?= release
BUILD_DIR := build/$(PRESET)
STRATA := $(BUILD_DIR)/cli/strata
JOBS ?= $(shell nproc)

# The sanitizer suite builds apart, with clang (docs/testing.md): the unit tests of
# core, plan, sim, topologies, runtime and the loaders under ASan and UBSan, and a
# libFuzzer target per input loader run FUZZ_SECONDS each. One build serves both.
SANITIZER_PRESET ?= fuzz
FUZZ_SECONDS ?= 30

.PHONY: all deps build test test-sanitizers demo clean

all: build

deps:
	@./tools/install-deps.sh

build: deps
	@cmake --preset $(PRESET) >/dev/null
	@cmake --build --preset $(PRESET) -j $(JOBS)

test: build
	@ctest --preset $(PRESET) -j $(JOBS) --timeout 600
	@$(MAKE) --no-print-directory test-sanitizers

test-sanitizers: deps
	@cmake --preset $(SANITIZER_PRESET) -DSTRATA_FUZZ_SECONDS=$(FUZZ_SECONDS) >/dev/null
	@cmake --build --preset $(SANITIZER_PRESET) -j $(JOBS)
	@ctest --preset $(SANITIZER_PRESET) -j $(JOBS)

# The demo builds only the two programs it runs, not the tests.
DEMO_TARGETS ?= strata strata-gui

demo: deps
	@cmake --preset $(PRESET) >/dev/null
	@cmake --build --preset $(PRESET) -j $(JOBS) --target $(DEMO_TARGETS)
	@./tools/demo.sh $(STRATA)

clean:
	rm -rf build
