# contractd — every install and test step lives here so a fresh clone works.
export GOTOOLCHAIN := local
export GOFLAGS := -mod=mod
GO      ?= go
BIN     := bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
FUZZTIME ?= 20s

# The pinned JSON-Schema-Test-Suite lives beside the repository
# (../shared/data/json-schema-test-suite), never inside it, and contracts'
# suite test fails without it. A clone made elsewhere (git clone . /tmp/x)
# has no ../shared: it uses the copy beside the repository it was cloned
# from, when that is a local directory. Set CONTRACTD_JSON_SCHEMA_TEST_SUITE
# to use another copy.
ifeq ($(wildcard ../shared/data/json-schema-test-suite/tests),)
ORIGIN_SUITE := $(abspath $(shell git remote get-url origin 2>/dev/null)/../shared/data/json-schema-test-suite)
ifneq ($(wildcard $(ORIGIN_SUITE)/tests),)
export CONTRACTD_JSON_SCHEMA_TEST_SUITE ?= $(ORIGIN_SUITE)
endif
endif

.PHONY: all build test test-go test-e2e vet bench bench-engine bench-review bench-ratelimit bench-replicas bench-replay fuzz demo run clean deps deps-test soak soak-long

all: build

deps:
	$(GO) mod download

build: deps
	@mkdir -p $(BIN)
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/contractd ./cmd/contractd
	@if [ -d cmd/contractd-sim ]; then $(GO) build -trimpath -o $(BIN)/contractd-sim ./cmd/contractd-sim; fi

# vet also refuses unformatted Go files: gofmt's output is the only layout.
# It also fails when the build rewrote go.mod or go.sum (GOFLAGS=-mod=mod
# lets the go command do that, say for a module imported directly but
# marked indirect), so a clean clone stays clean and the fix is committed.
vet: deps
	@before="$$(cksum < go.mod) $$(cksum < go.sum)"; \
	echo '$(GO) vet ./...'; $(GO) vet ./... || exit 1; \
	echo 'cd e2e/openaigo && $(GO) vet ./...'; (cd e2e/openaigo && $(GO) vet ./...) || exit 1; \
	if [ "$$before" != "$$(cksum < go.mod) $$(cksum < go.sum)" ]; then \
		echo "vet: the build rewrote go.mod or go.sum; run go mod tidy and commit the result"; \
		git --no-pager diff -- go.mod go.sum 2>/dev/null; exit 1; fi
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './e2e/node/*')); \
	if [ -n "$$unformatted" ]; then echo "gofmt -l: not formatted:"; echo "$$unformatted"; exit 1; fi

# The README's test command: vet, every Go test with -race (unit, golden,
# fake-upstream, binary end-to-end), then the SDK end-to-end tests.
test: vet build test-go test-e2e

# What the Go tests need on the machine: a C compiler (-race needs cgo,
# which the go command turns off without one), headless Chromium for the
# reviewer page tests, PostgreSQL and Redis server binaries for the review
# store, rate limiter and replica tests (each installed from Debian's
# package when missing; the tests start their own throwaway servers through
# internal/testkit).
deps-test:
	@scripts/cc.sh
	@scripts/chromium.sh
	@scripts/postgres.sh install
	@scripts/redis.sh install

# deploy/ is its own module (the Kubernetes libraries stay out of the
# product's): its tests render the manifests and check them against the config.
# e2e/openaigo is too (the official Go SDK, openai-go, stays out of it): the
# binary driven by that SDK; its modules come through the module proxy as the
# product's do.
test-go: deps-test
	$(GO) test -race -count=1 -timeout 15m ./...
	cd deploy && $(GO) test -count=1 -timeout 10m ./...
	cd e2e/openaigo && $(GO) test -count=1 -timeout 10m ./...

test-e2e: build
	@if [ -f e2e/node/package.json ]; then scripts/e2e-node.sh; fi

# The contract engine against bare kaptinlin validation (docs/benchmarks.md).
bench-engine:
	$(GO) test -run '^$$' -bench 'BareValidateJSON|CheckSchemaOnly|CheckFull|CheckInvalid' -benchmem -cpu 1 -count 8 ./contracts/

# The review store on the needs_review path: sqlite vs store none, and the
# valid path, at concurrency 16; five interleaved rounds (docs/benchmarks.md).
bench-review:
	$(GO) test -c -o bin/proxy.test ./proxy/
	cd proxy && for i in 1 2 3 4 5; do ../bin/proxy.test -test.run '^$$' -test.bench 'ReviewPath$$' -test.benchtime 3000x; ../bin/proxy.test -test.run '^$$' -test.bench ReviewPathPaced -test.benchtime 2000x; done
	$(GO) test -run '^$$' -bench 'SQLiteCreate|PostgresCreate' -benchtime 3000x -count 5 ./review/

# The Redis rate-limit store against the memory store and no limit, whole
# requests at concurrency 1 and 16, then the limiter step alone; five
# interleaved rounds on a throwaway local Redis; then c16 with GOMAXPROCS=1,
# which leaves a core to redis-server (docs/benchmarks.md).
bench-ratelimit:
	@scripts/redis.sh install
	$(GO) test -c -o bin/proxy.test ./proxy/
	cd proxy && for i in 1 2 3 4 5; do ../bin/proxy.test -test.run '^$$' -test.bench 'RateLimit(Path|Allow|Paced)|RedisRoundTrip' -test.benchtime 3000x; done
	cd proxy && for i in 1 2 3 4 5; do ../bin/proxy.test -test.run '^$$' -test.bench 'RateLimitPath/(memory|redis)/c=16' -test.benchtime 3000x -test.cpu 1; done

# One contractd replica against three on one PostgreSQL (the built binary,
# by absolute path: go test runs in ./e2e; three interleaved rounds;
# docs/benchmarks.md).
bench-replicas: build
	CONTRACTD_E2E_BIN=$(CURDIR)/$(BIN)/contractd $(GO) test -run '^$$' -bench Replicas -benchtime 3000x ./e2e/
# contractd replay: per core (outputs per CPU-second, in process and the
# binary at GOMAXPROCS=1) against the judge alone, and the binary's peak RSS
# over 10k and 1M-line audits generated in a temp dir (docs/benchmarks.md).
bench-replay:
	$(GO) test -run '^$$' -bench 'ReplayJudge' -benchtime 2s -count 5 -cpu 1 ./cmd/contractd-bench/
	$(GO) test -run '^$$' -bench 'ReplayOffline' -benchtime 3x -count 5 -cpu 1 ./cmd/contractd-bench/
	$(GO) test -run '^$$' -bench 'ReplayBinary' -benchtime 1x -count 3 -timeout 60m ./cmd/contractd-bench/

# Side by side: the mock upstream directly, a bare proxy hop, and contractd
# validating, at concurrency 1/16/64; then the engine and review benchmarks.
bench: build
	$(GO) run ./cmd/contractd-bench -bin bin/contractd -runs 3
	$(MAKE) bench-engine
	$(MAKE) bench-review
	$(MAKE) bench-ratelimit
	$(MAKE) bench-replicas

# The limits under load that docs/security.md promises (slow uploads, large
# bodies and replies), against the real binary and the baseline commit built
# from git (a full clone), loopback only,
# about 4 minutes (docs/benchmarks.md). CI runs it after make test.
soak:
	$(GO) test -tags soak -count=1 -timeout 12m -v -run TestSoak ./test/soak/

# A long soak at a low steady rate (about 27 requests/s) of the real binary,
# sampled every 30 s for anything that grows without bound: SOAK_MODE sqlite
# (one contractd) or replicas (two, on a throwaway PostgreSQL and Redis), for
# SOAK_DUR (docs/benchmarks.md, "Limits under load", session 14). Not run by
# make test or make soak.
SOAK_MODE ?= sqlite
SOAK_DUR  ?= 17m
soak-long: build
	scripts/soak-long.sh $(SOAK_MODE) $(SOAK_DUR)

# Each fuzz target for FUZZTIME (go test runs one -fuzz target at a time).
fuzz:
	@scripts/fuzz.sh $(FUZZTIME)

demo: build
	@scripts/demo.sh

run: build
	@scripts/run.sh

clean:
	rm -rf $(BIN)
