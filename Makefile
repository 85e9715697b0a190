# ratelimit: build, run and test the Redis module.
#   make run    install what is missing, build the release module, start Redis with redis.conf
#   make test   build the module and run every test (unit and against real redis-server)
#   make deps-examples  the HTTP middleware examples' packages (examples/middleware), pinned
#   make test-valkey  the same tests against Valkey 8.0
#   make test-redisson  the real Redisson RRateLimiter (Java) and the module on the same limiters
#   make bench  the module against the equivalent Lua script and plain INCR, side by side

REDIS_SERVER ?= redis-server
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
MODULE_DEBUG := target/debug/libratelimit.so
MODULE_RELEASE := target/release/libratelimit.so

.PHONY: deps deps-java deps-examples examples-toolchains build release run test test-redisson test-valkey lint ci clean bench

## Installs redis-server (the test and run server) and libclang-dev (bindgen needs it to build
## redis-module) with apt, only if they are missing.
deps:
	@missing=""; \
	command -v $(REDIS_SERVER) >/dev/null 2>&1 || missing="$$missing redis-server"; \
	ls /usr/lib/llvm-*/lib/libclang.so /usr/lib/llvm-*/lib/libclang-[0-9]*.so /usr/lib/*/libclang.so /usr/lib/*/libclang-[0-9]*.so 2>/dev/null | grep -q . || missing="$$missing libclang-dev"; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; \
	fi

build: deps
	cargo build

release: deps
	cargo build --release

run: release
	$(REDIS_SERVER) redis.conf

## cargo test does not build a cdylib for the integration tests: build it first.
## tests/middleware.rs runs the example apps: their packages come first.
test: build deps-examples
	cargo test
	$(MAKE) --no-print-directory test-redisson

## Java 17 and Maven for the Redisson interop suite, with apt, only if they are missing.
deps-java:
	@command -v mvn >/dev/null 2>&1 && command -v javac >/dev/null 2>&1 || { \
		echo "installing: maven openjdk-17-jdk-headless"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq maven openjdk-17-jdk-headless >/dev/null; }

## The packages of the HTTP middleware examples (docs/application-guide.md), at the versions their
## lock files pin, from PyPI, npm, the Go module proxy and Maven Central: redis-py in a venv under
## target/, ioredis in node_modules, go-redis in the Go module cache, Jedis in
## examples/middleware/java/target/lib (mvn package also compiles the Java example). Python 3,
## Node 20, Go and Java 17 + Maven must be installed; the venv and node_modules are redone only
## when their requirements change.
EXAMPLES := examples/middleware
EXAMPLES_VENV := target/examples-venv

deps-examples: examples-toolchains deps-java $(EXAMPLES_VENV)/.installed $(EXAMPLES)/node/node_modules/.package-lock.json
	cd $(EXAMPLES)/go && go mod download
	mvn -q -B -f $(EXAMPLES)/java/pom.xml package

examples-toolchains:
	@for tool in python3 node npm go; do \
		command -v $$tool >/dev/null 2>&1 || { echo "deps-examples: $$tool is missing: install Python 3, Node 20, Go 1.26"; exit 1; }; \
	done

$(EXAMPLES_VENV)/.installed: $(EXAMPLES)/python/requirements.txt
	python3 -m venv $(EXAMPLES_VENV)
	$(EXAMPLES_VENV)/bin/pip install -q --disable-pip-version-check -r $<
	touch $@

$(EXAMPLES)/node/node_modules/.package-lock.json: $(EXAMPLES)/node/package-lock.json
	cd $(EXAMPLES)/node && npm ci --no-audit --no-fund

## The Redisson interop suite (tests/redisson/README.md): Maven runs it quietly; the last line is
## Surefire's summary, added up from its per-class reports (on a line of its own: Maven ends
## its quiet output with two colour-reset codes and no newline).
test-redisson: build deps-java
	@rm -rf tests/redisson/target/surefire-reports
	@RATELIMIT_MODULE="$$(realpath "$${CARGO_TARGET_DIR:-target}/debug/libratelimit.so")" REDIS_SERVER="$(REDIS_SERVER)" \
		mvn -q -B -f tests/redisson/pom.xml test; rc=$$?; \
	cat tests/redisson/target/surefire-reports/*.txt 2>/dev/null | awk -F'[:,] *' \
		'/^Tests run:/ { n += $$2; f += $$4; e += $$6; s += $$8 } \
		END { printf "\nredisson interop: Tests run: %d, Failures: %d, Errors: %d, Skipped: %d\n", n, f, e, s }'; \
	exit $$rc

## The same suite against Valkey 8.0 (Debian bookworm-backports), unpacked under target/valkey.
test-valkey: build deps-examples
	REDIS_SERVER="$$(.ci/fetch-valkey)" cargo test

lint:
	cargo fmt --check
	cargo clippy --all-targets -- -D warnings

ci: deps lint test test-valkey

## Builds the release module and benchmarks it against the Lua script and INCR on its own
## redis-server (bench/README.md). Prints the table and writes bench/results/latest.json.
## BENCH_ARGS=--quick for a short smoke run, BENCH_ARGS=--worst for only the worst-case table
## (one call on logs of 10k/100k/1M members).
bench: release
	RATELIMIT_MODULE="$$(realpath "$${CARGO_TARGET_DIR:-target}/release/libratelimit.so")" REDIS_SERVER="$(REDIS_SERVER)" \
		cargo run --release --example bench -- $(BENCH_ARGS)

clean:
	cargo clean

## Fuzzes the argument parsers and the permit-log member decoder for a minute (fuzz/README.md).
## Installs cargo-fuzz if missing; RUSTC_BOOTSTRAP=1 lets the stable toolchain run it.
.PHONY: fuzz
fuzz:
	command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz
	cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run --sanitizer none parse -- -max_total_time=60
