# The two commands a newcomer types are `make run` and `make test`; both install what is
# missing first (scripts/install-deps.sh), then build.

BUILD      ?= build
TSAN_BUILD ?= build-tsan
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=

.PHONY: all deps build run test bench format clean

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/build.ninja: | deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# The service on the embedded store, with the demo page: http://127.0.0.1:8080/
# (FLOODGATE_LISTEN / FLOODGATE_STORE / a --config file change that; Ctrl-C stops it.)
run: build
	$(BUILD)/floodgate serve

# The concurrency tests are also built with ThreadSanitizer in their own tree; CTest in
# the main tree runs that binary too, so one summary line covers everything.
test: deps
	cmake -S . -B $(TSAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DFLOODGATE_SANITIZE=thread -DFLOODGATE_BUILD_BENCH=OFF
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target concurrency_test
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DFLOODGATE_TSAN_BINARY=$(CURDIR)/$(TSAN_BUILD)/tests/concurrency_test $(CMAKE_ARGS)
	cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Benchmarks: results go to bench/results/ (tables also printed).
bench: build
	@mkdir -p bench/results
	$(BUILD)/bench/memory_bench --rounds 5 --seconds 0.5 \
	  --markdown bench/results/memory.md --csv bench/results/memory.csv
	$(BUILD)/floodgate bench --policy gcra:1000/1s --keys 100000 --zipf 1.1 --threads 2 --duration 3s
	python3 bench/redis_bench.py --floodgate $(BUILD)/floodgate --lua lua --out bench/results
	python3 bench/http_bench.py --floodgate $(BUILD)/floodgate --out bench/results
	python3 bench/cluster_bench.py --floodgate $(BUILD)/floodgate --out bench/results
	$(BUILD)/bench/json_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf $(BUILD) $(TSAN_BUILD)
