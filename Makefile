# Convenience wrapper around CMake.
#   make run    build (Release) and run the headline layer with its timing line
#   make test   install missing test dependencies, build with -Werror, run every test
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all build run test deps bench clean

all: build

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DCONVPOOL_WERROR=ON $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

run: build
	./$(BUILD)/bin/convpool --show-tiling

deps:
	sh scripts/install-deps.sh

test: deps build
	cd $(BUILD) && ctest --output-on-failure -j 1

bench: build
	./$(BUILD)/bin/convpool-bench

clean:
	rm -rf $(BUILD)
