# The two commands a newcomer types are `make run` and `make test`; both install what is
# missing first (scripts/install-deps.sh), then build.

BUILD      ?= build
TSAN_BUILD ?= build-tsan
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc)
# Tests mostly wait (on redis-servers, processes, timers): twice as many as cores keep them busy.
TEST_JOBS  ?= $(shell echo $$(( $$(nproc) * 2 )))
CMAKE_ARGS ?=

.PHONY: all deps build run test bench package image format clean

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/build.ninja: | deps
	cmake --preset default -B $(BUILD) $(CMAKE_ARGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# The service on the embedded store, with the demo page: http://127.0.0.1:8080/
# (FLOODGATE_LISTEN / FLOODGATE_STORE / a --config file change that; Ctrl-C stops it.)
run: build
	$(BUILD)/floodgate serve

# Every test three times: in the optimised tree (all of them, browser and nginx included),
# in an AddressSanitizer + UndefinedBehaviorSanitizer tree built with clang (which also
# runs each libFuzzer harness for FUZZ_SECONDS from its seed corpus), and in a
# ThreadSanitizer tree, also clang (under g++'s TSan, protobuf's Struct maps, which
# Debian's uninstrumented libprotobuf fills, crashed; clang's runs every test). Both
# sanitizer trees compile at -O0 (CMakePresets.json). Any sanitizer report fails its test.
# The sanitizer trees skip what does not exercise our code under the sanitizer: the
# packaging tests (an outside project built against the installed library, the .deb, the
# .deb under systemd, the container image) and the browser tests. ASan's quarantine of
# freed memory is kept small, so that the chaos test's RSS bound still means something.
SANITIZED_SKIP = embed_example|demo_page_e2e|package_deb|package_systemd|package_image
FUZZ_SECONDS ?= 10
# tests/tsan_grpc.supp: races TSan reports inside Debian's gRPC and abseil (not built
# with TSan), where it cannot see their synchronisation; never our own code.
ASAN_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:quarantine_size_mb=8 UBSAN_OPTIONS=print_stacktrace=1
TSAN_ENV = TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$(CURDIR)/tests/tsan_grpc.supp
# scripts/ctest-tails.sh: ctest, and the end of each failed test's output again after its summary.
CTEST = $(CURDIR)/scripts/ctest-tails.sh --output-on-failure -j $(TEST_JOBS)
# The trees are the presets of CMakePresets.json (default, asan, tsan); -B keeps the
# BUILD / ASAN_BUILD / TSAN_BUILD overrides working.
# The benchmarks are not built here (`make bench` builds them): no test runs them.
# Each tree's tests run while the next tree compiles at idle CPU priority
# (scripts/test-while-building.sh): the tests mostly wait, the compiler fills the gaps.
test: deps
	cmake --preset default -B $(BUILD) -DFLOODGATE_BUILD_BENCH=OFF $(CMAKE_ARGS)
	cmake --preset asan -B $(ASAN_BUILD) -DFLOODGATE_FUZZ_SECONDS=$(FUZZ_SECONDS)
	cmake --preset tsan -B $(TSAN_BUILD)
	cmake --build $(BUILD) -j $(JOBS)
	scripts/test-while-building.sh $(ASAN_BUILD) $(JOBS) -- sh -c 'cd $(BUILD) && $(CTEST)'
	scripts/test-while-building.sh $(TSAN_BUILD) $(JOBS) -- \
	  sh -c 'cd $(ASAN_BUILD) && $(ASAN_ENV) $(CTEST) -E "$(SANITIZED_SKIP)"'
	cd $(TSAN_BUILD) && $(TSAN_ENV) $(CTEST) -E '$(SANITIZED_SKIP)'

# Benchmarks: every comparison (about 10 minutes on 2 cores), then the 10-minute soak,
# then bench/results/latest.md with tables and charts. bench/report.py says what each
# part measures; `python3 bench/report.py --no-soak` runs the comparisons alone.
bench: deps
	cmake --preset default -B $(BUILD) -DFLOODGATE_BUILD_BENCH=ON $(CMAKE_ARGS)
	cmake --build $(BUILD) -j $(JOBS)
	python3 bench/report.py --build $(BUILD) --out bench/results

# build/floodgate_<version>_<arch>.deb: the binary, the systemd unit, the config
# (cmake/packaging.cmake says what and why CPack). Only the binary is built for it.
package: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target floodgate_bin
	cd $(BUILD) && cpack

# The container image floodgate:<version> with podman, FROM scratch (Containerfile,
# scripts/build-image.sh); PODMAN_ARGS adds podman's global options (--storage-driver vfs).
VERSION = $(shell awk '/^project.floodgate VERSION/ {print $$3}' CMakeLists.txt)
PODMAN_ARGS ?=
image: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS) --target floodgate_bin
	PODMAN_ARGS="$(PODMAN_ARGS)" scripts/build-image.sh $(BUILD)/floodgate $(BUILD)/image floodgate:$(VERSION)

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf $(BUILD) $(TSAN_BUILD) $(ASAN_BUILD)
