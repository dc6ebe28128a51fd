# kmirror: build, test and demo. See README.md and docs/testing.md.
SHELL := /bin/bash
GO ?= go
# Run folder of the two shared Kafka clusters that "make test" starts;
# by default one per invocation, so concurrent runs do not share brokers.
TEST_RUN_DIR ?=
TEST_TIMEOUT ?= 30m
# Tests marked t.Parallel that may run at once in one package: the e2e tests
# mostly wait on brokers, so more than the two cores.
TEST_PARALLEL ?= 4
# Extra go test flags, e.g. TEST_FLAGS='-run TestRoundTrip -v'.
TEST_FLAGS ?=
PKGS ?= ./...
# make test runs the longest packages first, so that the rest fill the
# other slot beside them: two test binaries at once, one per core. Three
# (ci15) made every package slower (e2e 13m30s, passthrough 8m41s against
# 9m06s and 2m50s with two) and the whole run longer.
TEST_P ?= 2
TEST_PKGS ?= ./e2e ./robustness ./internal/passthrough ./mirrorclient ./internal/topicsync ./internal/testkafka ./internal/clients ./internal/checkpoint ./...
# Tests make test leaves to another target: bench/harness TestQuickKB, the
# benchmark harness's smoke run (kmirror twice and Apache MM2 on a 100k
# record workload, 3-4 min of both cores beside e2e), runs in make
# bench-quick and before every make bench. It guards the harness, not data.
TEST_SKIP ?= ^TestQuickKB$$

.PHONY: setup build test test-times test-compat test-robustness test-soak fmt-check vet fuzz demo bench bench-quick clean distclean dashboard-screenshot

build:
	$(GO) build -o bin/kmirror ./cmd/kmirror

fmt-check:
	@files="$$(gofmt -l .)"; if [ -n "$$files" ]; then \
		echo "gofmt needed on:"; echo "$$files"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

# Fuzzes every Go fuzz target (func FuzzX in a _test.go file) for FUZZ_EXECS
# inputs each (a count, not a duration: Go 1.26's coordinator can fail a
# target with a bare "context deadline exceeded" when a -fuzztime duration
# ends under load, golang/go#75804; a count has no deadline to race): the decoders of bytes from outside (record batches, internal-topic
# records, properties, JAAS, Connect JSON). go test -fuzz takes one package
# and one target at a time. A crash leaves its input in the package's
# testdata/fuzz/FuzzX/, which plain go test then runs as a test case.
FUZZ_EXECS ?= 20000
fuzz:
	@start=$$(date +%s); \
	for f in $$(grep -rl --include='*_test.go' '^func Fuzz' internal cmd mirrorclient | sort); do \
		for t in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$f"); do \
			echo "fuzz $$t ./$$(dirname "$$f") for $(FUZZ_EXECS) inputs"; \
			if ! out=$$($(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZ_EXECS)x "./$$(dirname "$$f")" 2>&1); then \
				echo "$$out"; exit 1; fi; \
		done; \
	done; \
	echo "fuzzing took $$(( $$(date +%s) - start ))s"

# Unit and integration tests. Integration tests run on real Kafka brokers:
# two single-node clusters shared through KMIRROR_TEST_CLUSTERS, torn down
# whatever happens (tests that need more start their own).
# Installs what is missing (kcat, Java, Maven, Go modules, Kafka jars).
setup:
	scripts/setup

test: setup fmt-check vet fuzz
	@if [ "$${KMIRROR_SKIP_INTEGRATION:-}" = 1 ]; then \
		echo "!!! KMIRROR_SKIP_INTEGRATION=1: integration tests will be SKIPPED !!!"; \
		exec $(GO) test -race -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) $(PKGS); \
	fi; \
	dir="$(TEST_RUN_DIR)"; dir="$${dir:-$(CURDIR)/.run/test-$$$$}"; rc=1; \
	trap 'scripts/kafka-local down --dir "$$dir"; \
		if [ $$rc = 0 ]; then rm -rf "$$dir"; else echo "broker logs kept in $$dir"; fi' EXIT; \
	scripts/kafka-local down --dir "$$dir" >/dev/null; \
	scripts/kafka-local up --clusters 2 --nodes 1 --dir "$$dir" || exit 1; \
	start=$$(date +%s); mkdir -p .run; $(GO) build -o bin/test-times ./cmd/test-times || exit 1; \
	set -o pipefail; KMIRROR_TEST_CLUSTERS="$$dir/clusters.json" \
		$(GO) test -json -race -timeout $(TEST_TIMEOUT) -p $(TEST_P) -parallel $(TEST_PARALLEL) -skip '$(TEST_SKIP)' $(TEST_FLAGS) $(TEST_PKGS) 2>&1 | tee .run/last-test.json | bin/test-times; rc=$$?; \
	echo "go test took $$(( $$(date +%s) - start ))s"; exit $$rc

# The 20 slowest tests and packages of the last "make test" (.run/last-test.json).
test-times:
	@$(GO) run ./cmd/test-times -quiet < .run/last-test.json

# Compatibility matrix (docs/compatibility.md): every source version into
# every target version, each case on clusters of its own (about 15 min).
# make test runs only 2.8.2 -> 4.x.
COMPAT_SOURCES ?= 0.11.0.3,1.1.1,2.8.2,3.9.1,4.3.1
COMPAT_TARGETS ?= 3.9.1,4.3.1
test-compat: setup
	KMIRROR_COMPAT_SOURCES=$(COMPAT_SOURCES) KMIRROR_COMPAT_TARGETS=$(COMPAT_TARGETS) \
		$(GO) test -race -count=1 -timeout 60m $(TEST_FLAGS) -run 'TestLegacySource|TestLegacyCutover' -v ./e2e/

# Robustness run (robustness/, docs/robustness.md): two 3-node clusters of
# its own, kmirror workers behind TCP proxies, traffic, and faults drawn
# from SEED (printed at the start; it reproduces the run) for DURATION,
# then every record, checkpoint and synced offset checked. make test runs
# the default, SEED=22 DURATION=3m (about 4 minutes in all).
SEED ?= 22
DURATION ?= 3m
ROBUSTNESS_TIMEOUT ?= 3h
test-robustness: setup
	KMIRROR_ROBUSTNESS_SEED=$(SEED) KMIRROR_ROBUSTNESS_DURATION=$(DURATION) \
		$(GO) test -race -count=1 -timeout $(ROBUSTNESS_TIMEOUT) $(TEST_FLAGS) -run 'TestRobustness$$' -v ./robustness/

# Soak (docs/robustness.md): a robustness run of SOAK_DURATION under steady
# load with a fault every SOAK_FAULT_GAP; workers' RSS, goroutines, open
# files and metric series sampled every 10 s, slopes logged, plotted into
# docs/robustness-soak.png.
SOAK_DURATION ?= 30m
SOAK_FAULT_GAP ?= 2m
test-soak: setup
	KMIRROR_ROBUSTNESS_SEED=$(SEED) KMIRROR_SOAK_DURATION=$(SOAK_DURATION) KMIRROR_SOAK_FAULT_GAP=$(SOAK_FAULT_GAP) \
		KMIRROR_SOAK_PLOT=$(CURDIR)/docs/robustness-soak.png \
		$(GO) test -race -count=1 -timeout $(ROBUSTNESS_TIMEOUT) $(TEST_FLAGS) -run 'TestSoak$$' -v ./robustness/

# Runs e2e/TestDashboard (headless Chromium) and keeps its screenshot as
# docs/img/dashboard.png, which docs/operations.md shows.
dashboard-screenshot: setup
	KMIRROR_DASHBOARD_SCREENSHOT=$(CURDIR)/docs/img/dashboard.png \
		$(GO) test -race -count=1 -run 'TestDashboard$$' -v ./e2e/

# Demo on local clusters; scripts/demo holds the steps.
demo: setup
	scripts/demo

# kmirror vs Apache MirrorMaker 2 on local clusters (bench/run, about 35 min);
# writes docs/benchmarks.md and .png. BENCH_FLAGS='--quick --runs 1' for a smoke run.
BENCH_FLAGS ?=
bench: bench-quick
	bench/run $(BENCH_FLAGS)

# The benchmark harness's smoke test (bench/harness TestQuickKB): every
# replicator gets every record of a small kb workload to the target.
bench-quick: setup
	$(GO) test -race -count=1 -run '^TestQuickKB$$' -v ./bench/harness/

# Stops every node started under .run, then removes build and run output.
# The Kafka jars in .cache stay; distclean removes them too.
clean:
	@if [ -d .run ]; then scripts/kafka-local down --dir .run; fi
	rm -rf bin .run

distclean: clean
	rm -rf .cache
