# Strata's two commands:
#   make demo   builds strata and strata-gui, then runs the user's day on the default scenario
#   make test   builds, then runs every test
# Both first install missing Debian packages (tools/install-deps.sh, idempotent).

PRESET ?= release
BUILD_DIR := build/$(PRESET)
STRATA := $(BUILD_DIR)/cli/strata
JOBS ?= $(shell nproc)

.PHONY: all deps build test demo clean

all: build

deps:
	@./tools/install-deps.sh

build: deps
	@cmake --preset $(PRESET) >/dev/null
	@cmake --build --preset $(PRESET) -j $(JOBS)

test: build
	@ctest --preset $(PRESET) -j $(JOBS) --timeout 600

# The demo builds only the two programs it runs, not the tests.
DEMO_TARGETS ?= strata strata-gui

demo: deps
	@cmake --preset $(PRESET) >/dev/null
	@cmake --build --preset $(PRESET) -j $(JOBS) --target $(DEMO_TARGETS)
	@./tools/demo.sh $(STRATA)

clean:
	rm -rf build
