# ratelimit: build, run and test the Redis module.
#   make run    install what is missing, build the release module, start Redis with redis.conf
#   make test   build the module and run every test (unit and against real redis-server)
#   make test-busy  the same `cargo test` with every core kept busy (.ci/busy): no test may
#               depend on how fast anything runs
#   make deps-examples  the HTTP middleware examples' packages (examples/middleware), pinned
#   make test-valkey  the same tests against Valkey 8.1, built from Debian's source package
#   make test-redis8  the same tests against Redis 8.0, built from Debian's source package
#   make test-unstable  the same tests against the newest Redis code (../shared/servers)
#   make test-valkey9  the same tests against Valkey 9.1.2 (../shared/servers)
#   make test-redis72, make test-redis74  the same tests against Redis 7.2.6 and 7.4.1 (../shared/servers)
#   make dist   the release tarballs for x86_64 and aarch64 Linux and SHA256SUMS, in target/dist/
#   make dist-check  builds the release files twice in two clones and compares them byte for byte
#   make deb    the Debian packages (amd64, arm64) beside them, checked by lintian
#   make test-deb  installs the amd64 package for real, uses it in a redis-server, purges it
#   make test-aarch64  the aarch64 module in an aarch64 Redis 7.2.6 under qemu-user: the smoke suite
#   make test-redisson  the real Redisson RRateLimiter (Java) and the module on the same limiters
#   make test-java  the Java library (java/): Redisson's RRateLimiter served by the module
#   make bench-java  that library against Redisson's own limiter, from Java (java/README.md)
#   make test-java-upstream REDISSON_TEST=.../RedissonRateLimiterTest.java  Redisson 4.7.0's own test
#               against the library and Redisson's own limiter, on Redis 7.0 and Valkey 9 (java/upstream/README.md)
#   make test-go  the Go package (go/, docs/go.md): redis_rate's own tests, an HTTP app on a server and a cluster
#   make bench-go  that package against go-redis/redis_rate's script, on Redis 7.0 and Valkey 9
#   make dist-go  the Go module's source zip and tarball in target/dist/ (make dist makes them too)
#   make dist-python, test-python, test-python-valkey9, bench-python  the limits storage (python/)
#   make test-monitoring  the Prometheus rules (promtool) and the Grafana dashboard's queries
#               through the real redis_exporter and Prometheus (monitoring/)
#   make bench  the module against the equivalent Lua script and plain INCR, side by side
#               (and redis-cell's CL.THROTTLE with REDIS_CELL=/path/to/libredis_cell.so)
#   make bench-onekey  the ONEKEY form against three keys, GCRA and the fixed-window, Redisson's and
#               limits' scripts: CPU, instructions and memory per limiter (bench/onekey.py)
#   make bench-resolve  resolving a request once: instructions per call and per served waiter,
#               this tree beside the builds of RESOLVE_BASES (bench/resolve_once.py)
#   make test-node  the Node package (node/): express-rate-limit's store, over a real server and cluster
#   make test-node-valkey9  the same against Valkey 9.1.2 (../shared/servers)
#   make dist-node  the Node package's npm tarball, in target/dist/
#   make bench-node  the Node store against rate-limit-redis's and rate-limiter-flexible's scripts
#   make test-node-upstream FLEXIBLE_REPO=<dir> RATE_LIMIT_REDIS_REPO=<dir>  rate-limiter-flexible's and
#               rate-limit-redis's own tests against the Node package (node/test/upstream/README.md)

REDIS_SERVER ?= redis-server
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
MODULE_DEBUG := target/debug/libratelimit.so
MODULE_RELEASE := target/release/libratelimit.so

.PHONY: deps deps-run deps-java deps-examples deps-shared examples-toolchains build release run test test-redisson \
	test-java test-java-upstream bench-java bench-config-cache bench-stats test-busy \
	test-valkey test-redis8 test-unstable test-valkey9 test-redis72 test-redis74 lint ci clean bench \
	deps-dist deps-aarch64 deps-deb dist dist-check deb test-deb test-aarch64 \
	deps-node test-node test-node-valkey9 dist-node bench-node \
	test-go bench-go dist-go \
	deps-monitoring test-monitoring

## What the build, `make run` and the tests run, as tool=package pairs: apt installs the package
## only when the tool is missing (`libclang` stands for the library bindgen loads, found by file).
##   cc             build-essential: the linker cargo calls
##   libclang       libclang-dev: bindgen (redis-module's build) loads libclang.so or libclang-N.so
##   redis-server   redis-server: the server of `make run` and `make test`
## and for the tests on other servers and clients:
##   c++            build-essential: .ci/fetch-redis8 and .ci/fetch-valkey build Redis and Valkey
##                  (C, and C++ for fast_float)
##   dpkg-source    dpkg-dev: .ci/fetch-redis8 unpacks and patches Debian's source package
##   xz             xz-utils: .ci/fetch-valkey unpacks Debian's .orig.tar.xz (dpkg-dev brings it too)
##   javac, mvn     default-jdk-headless, maven: the Redisson interoperability suite
##   faketime       faketime (and its libfaketime): holds the clock of the GCRA references
##                  (Redis's GCRA build, redis-cell 0.5.0) still in tests/it/gcra_reference.rs
## and for `make bench`:
##   redis-benchmark  redis-tools: the pipelined throughput and the many-limiters burst
##   valgrind, callgrind_control  valgrind: instructions per call
RUN_NEEDS := cc=build-essential libclang=libclang-dev $(REDIS_SERVER)=redis-server
TEST_NEEDS := $(RUN_NEEDS) c++=build-essential dpkg-source=dpkg-dev xz=xz-utils \
	javac=default-jdk-headless mvn=maven faketime=faketime
BENCH_NEEDS := $(RUN_NEEDS) redis-benchmark=redis-tools valgrind=valgrind \
	callgrind_control=valgrind

## ls fails when any one of its globs matches nothing, so its output is what counts. A tool
## written as an absolute path stands for a file the package installs.
define install_missing
	@missing=""; \
	for pair in $(1); do \
		tool="$${pair%%=*}"; package="$${pair#*=}"; \
		if [ "$$tool" = libclang ]; then \
			ls /usr/lib/llvm-*/lib/libclang.so /usr/lib/llvm-*/lib/libclang-[0-9]*.so \
				/usr/lib/*/libclang.so /usr/lib/*/libclang-[0-9]*.so 2>/dev/null | grep -q . && continue; \
		elif [ "$${tool#/}" != "$$tool" ]; then \
			[ -e "$$tool" ] && continue; \
		else \
			command -v "$$tool" >/dev/null 2>&1 && continue; \
		fi; \
		case " $$missing " in *" $$package "*) ;; *) missing="$$missing $$package" ;; esac; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi
endef

## Everything the build and every test target need.
deps:
	$(call install_missing,$(TEST_NEEDS))

## What building the module and `make run` need.
deps-run:
	$(call install_missing,$(RUN_NEEDS))

build: deps-run
	cargo build

release: deps-run
	cargo build --release

run: release
	$(REDIS_SERVER) redis.conf

## cargo test does not build a cdylib for the integration tests: build it first. Each test target
## prints the server's version line first, so a log says which server the suite ran on.
## tests/it/middleware.rs runs the example apps: their packages come first.
test: deps build deps-examples deps-shared
	@$(REDIS_SERVER) --version
	cargo test
	$(MAKE) --no-print-directory test-redisson
	$(MAKE) --no-print-directory test-java
	$(MAKE) --no-print-directory test-node
	$(MAKE) --no-print-directory test-go
	$(MAKE) --no-print-directory test-python
	$(MAKE) --no-print-directory test-monitoring

## `cargo test` again with as many CPU-bound processes as cores (.ci/busy starts them and kills
## them after, also on failure): a test that needs an idle machine fails here.
test-busy: deps build deps-examples deps-shared
	@$(REDIS_SERVER) --version
	.ci/busy cargo test

## The GCRA references the tests compare with (Redis's GCRA build, redis-cell 0.5.0), built once
## from ../shared/servers under target/ before the test binaries run (which would otherwise
## build them themselves, several at once). A clone without ../shared skips them (the tests say
## so; under CI=true they fail instead).
deps-shared:
	@if [ -d ../shared/servers ]; then \
		.ci/fetch-shared redis-gcra >/dev/null && .ci/fetch-shared redis-cell >/dev/null; \
	else \
		echo "deps-shared: no ../shared/servers: the GCRA reference tests will be skipped"; \
	fi

## A JDK and Maven for the Redisson interop suite, only if they are missing.
deps-java:
	$(call install_missing,javac=default-jdk-headless mvn=maven)

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

## The Java library (java/README.md): its tests on Redisson 4.7.0, then the same compiled classes
## on Redisson 3.38.0 (the redisson3 profile), each summed up on a line as test-redisson does.
JAVA_ENV = RATELIMIT_MODULE="$$(realpath "$${CARGO_TARGET_DIR:-target}/$(1)/libratelimit.so")" \
	REDIS_SERVER="$$(case "$(REDIS_SERVER)" in */*) realpath "$(REDIS_SERVER)";; *) echo "$(REDIS_SERVER)";; esac)"
test-java: build deps-java
	@rm -rf java/target/surefire-reports java/target/surefire-reports-redisson3
	@export $(call JAVA_ENV,debug); \
	mvn -q -B -f java/pom.xml test; rc=$$?; \
	if [ $$rc = 0 ]; then mvn -q -B -f java/pom.xml -P redisson3 -Dmaven.main.skip test; rc=$$?; fi; \
	for run in "4.7.0:surefire-reports" "3.38.0:surefire-reports-redisson3"; do \
		cat java/target/$${run#*:}/*.txt 2>/dev/null | awk -F'[:,] *' -v v="$${run%%:*}" \
			'/^Tests run:/ { n += $$2; f += $$4; e += $$6; s += $$8 } \
			END { printf "java library on Redisson %s: Tests run: %d, Failures: %d, Errors: %d, Skipped: %d\n", v, n, f, e, s }'; \
	done; \
	exit $$rc

## Redisson 4.7.0's own RedissonRateLimiterTest, unedited, from a Redisson checkout named by
## REDISSON_TEST (java/upstream/README.md; not in the repository, so not in CI): against
## Redisson's own limiter (the referee) and, with each getRateLimiter made NativeRateLimiters.get by
## sed, against the library, on $(REDIS_SERVER) (Debian's Redis 7.0) and Valkey 9.1.2 (built under
## target/valkey9 the first time): the four runs at once, 4 to 8 minutes. Needs a JDK 21 or later
## beside Java 17 (the test calls Thread.sleep(Duration)): UPSTREAM_JAVA_HOME, else the newest under
## /usr/lib/jvm.
test-java-upstream: build deps-java
	@valkey="$$(.ci/fetch-shared valkey9)" && \
		RATELIMIT_MODULE="$$(realpath "$${CARGO_TARGET_DIR:-target}/debug/libratelimit.so")" \
		REDISSON_TEST="$(REDISSON_TEST)" java/upstream/run redis7="$$(command -v $(REDIS_SERVER) || echo $(REDIS_SERVER))" valkey9="$$valkey"

## The Java library's bench on the release module: server CPU per call and client latency of the
## native limiter and Redisson's own, and how soon acquire() sees freed permits.
bench-java: release deps-java
	@export $(call JAVA_ENV,release); \
	mvn -q -B -f java/pom.xml test-compile exec:java $(BENCH_JAVA_ARGS)

## The same suite against Valkey 8.1 (the upstream tarball of Debian trixie's source package),
## built under target/valkey81 the first time (about 2 minutes on 2 cores).
test-valkey: deps build deps-examples deps-shared
	@server="$$(.ci/fetch-valkey)" && "$$server" --version && \
		REDIS_SERVER="$$server" cargo test

## The same suite against Redis 8.0 (Debian trixie's source package), built under target/redis8
## the first time (about 2 minutes on 2 cores).
test-redis8: deps build deps-examples deps-shared
	@server="$$(.ci/fetch-redis8)" && "$$server" --version && \
		REDIS_SERVER="$$server" cargo test

## The same suite against the newest Redis code (the `unstable` branch after 8.8) and Valkey 9.1.2,
## built from the sources kept beside the project in ../shared/servers under target/unstable and
## target/valkey9 the first time (about 2 minutes each on 2 cores). A clone without ../shared
## says so; `REDIS_SERVER=/path/to/server make test` runs the suite on any server binary.
test-unstable: deps build deps-examples deps-shared
	@server="$$(.ci/fetch-shared unstable)" && "$$server" --version && \
		REDIS_SERVER="$$server" cargo test

test-valkey9: deps build deps-examples deps-shared
	@server="$$(.ci/fetch-shared valkey9)" && "$$server" --version && \
		REDIS_SERVER="$$server" cargo test

## The same suite against Redis 7.2.6 (the last BSD-licensed line, the one most self-hosted
## fleets run) and 7.4.1 (the first with hash-field TTLs), built from ../shared/servers under
## target/redis72 and target/redis74 the first time (about 2 minutes each on 2 cores).
test-redis72: deps build deps-examples deps-shared
	@server="$$(.ci/fetch-shared redis72)" && "$$server" --version && \
		REDIS_SERVER="$$server" cargo test

test-redis74: deps build deps-examples deps-shared
	@server="$$(.ci/fetch-shared redis74)" && "$$server" --version && \
		REDIS_SERVER="$$server" cargo test

## Release files (packaging/), named with Cargo.toml's version. The modules are linked by
## cargo-zigbuild against glibc 2.17's symbol versions, so they load on every Linux from
## RHEL/CentOS 7 on; zig and cargo-zigbuild come from PyPI, pinned, in a venv under target/
## (python3-venv), and Rust's aarch64 standard library from rustup.
##   readelf   binutils: the glibc check reads the modules' symbol versions
##   lintian   lintian: checks the packages
##   aarch64-linux-gnu-gcc, /usr/aarch64-linux-gnu/include/stdio.h  gcc-aarch64-linux-gnu,
##             libc6-dev-arm64-cross: build the aarch64 redis-server of test-aarch64
##   qemu-aarch64  qemu-user: runs it
VERSION := $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' Cargo.toml | head -n 1)
ZIG_VENV := target/zig
ZIGBUILD_PINS := cargo-zigbuild==0.24.0 ziglang==0.17.0
DIST_NEEDS := $(RUN_NEEDS) readelf=binutils git=git
AARCH64_NEEDS := aarch64-linux-gnu-gcc=gcc-aarch64-linux-gnu \
	/usr/aarch64-linux-gnu/include/stdio.h=libc6-dev-arm64-cross qemu-aarch64=qemu-user

deps-dist: $(ZIG_VENV)/.installed
	$(call install_missing,$(DIST_NEEDS))
	@rustup target list --installed | grep -qx aarch64-unknown-linux-gnu || \
		rustup target add aarch64-unknown-linux-gnu

$(ZIG_VENV)/.installed: Makefile
	@python3 -c 'import ensurepip' 2>/dev/null || { $(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends python3-venv >/dev/null; }
	rm -rf $(ZIG_VENV)
	python3 -m venv $(ZIG_VENV)
	$(ZIG_VENV)/bin/pip install -q --disable-pip-version-check $(ZIGBUILD_PINS)
	touch $@

deps-aarch64:
	$(call install_missing,$(AARCH64_NEEDS))

deps-deb:
	$(call install_missing,lintian=lintian)

## The module's tarballs, then the Java library's jar and pom beside them, then SHA256SUMS of all.
dist: deps-dist deps-java
	ZIG_VENV=$(ZIG_VENV) packaging/dist
	packaging/dist-java
	packaging/dist-go
	$(MAKE) --no-print-directory dist-node
	$(MAKE) --no-print-directory dist-python
	packaging/checksums target/dist

dist-check: deps-dist
	ZIG_VENV=$(ZIG_VENV) packaging/dist-check

## lintian's errors fail the build; its warnings and notes are printed.
deb: dist deps-deb
	packaging/deb
	lintian --fail-on error target/dist/*.deb

test-deb: deb
	packaging/test-deb target/dist/redis-ratelimit_$(VERSION)-1_amd64.deb

## The aarch64 smoke suite: every example of the docs, run as written, and the version check.
## The tests run on this machine and talk to the aarch64 server over loopback; the server loads
## the very module the aarch64 tarball holds.
test-aarch64: dist deps-aarch64
	@server="$$(.ci/fetch-shared redis72-aarch64)" && "$$server" --version && \
		export REDIS_SERVER="$$server" && \
		export RATELIMIT_MODULE="$$(realpath target/dist-build/aarch64-unknown-linux-gnu/release/libratelimit.so)" && \
		cargo test --test it -- docs:: introspection::one_version_everywhere

lint:
	cargo fmt --check
	cargo clippy --all-targets -- -D warnings

ci: deps lint test test-redis8 test-unstable test-valkey test-valkey9 test-redis72 test-redis74 \
	test-aarch64 test-deb test-busy

## Builds the release module and benchmarks it against the Lua script and INCR on its own
## redis-server (bench/README.md). Prints the table and writes bench/results/latest.json.
## BENCH_ARGS=--quick for a short smoke run, BENCH_ARGS=--worst for only the worst-case table
## (one call on logs of 10k/100k/1M members), BENCH_ARGS=--many for only a limiter per user
## (500/1k/10k/200k/1M users at random), BENCH_ARGS=--gcra for only the GCRA drop-ins. Installs what
## it measures with when missing (redis-benchmark, valgrind for instructions per call; run by
## `cargo run --example bench` directly, a section without them says it skipped). REDIS_CELL=/path/to/
## libredis_cell.so also measures redis-cell's CL.THROTTLE in the same server (never vendored).
bench: release
	$(call install_missing,$(BENCH_NEEDS))
	RATELIMIT_MODULE="$$(realpath "$${CARGO_TARGET_DIR:-target}/release/libratelimit.so")" REDIS_SERVER="$(REDIS_SERVER)" \
		cargo run --release --example bench -- $(BENCH_ARGS)
	$(MAKE) bench-stats
	$(MAKE) bench-onekey
	$(MAKE) bench-resolve

## What the counting per group and the most-refused sketch cost: ratelimit.stats yes against no
## on one server, hot limiter and 200 000 at random, grant and refusal, time and instructions
## (bench/stats_overhead.py; docs/performance.md).
bench-stats: release $(EXAMPLES_VENV)/.installed
	$(call install_missing,$(BENCH_NEEDS))
	$(EXAMPLES_VENV)/bin/python bench/stats_overhead.py "$(REDIS_SERVER)" \
		"$$(realpath "$${CARGO_TARGET_DIR:-target}/release/libratelimit.so")"

## The config cache's rows of docs/performance.md by instructions (callgrind, a server of its own;
## bench/config_cache.py): one busy limiter, 500/1 000/10 000 at random, on and off.
bench-config-cache: release deps-examples
	$(call install_missing,$(BENCH_NEEDS))
	$(EXAMPLES_VENV)/bin/python bench/config_cache.py cg "$(REDIS_SERVER)" \
		"$$(realpath "$${CARGO_TARGET_DIR:-target}/release/libratelimit.so")"

## The monitoring files (docs/observability.md#prometheus-and-grafana): promtool checks the scrape
## job and the alerting rules and runs the rules' unit tests, then monitoring/test_e2e.py starts the debug module's redis-server, the real
## redis_exporter with monitoring/ratelimit.lua as its script and a real Prometheus scraping it,
## all on free loopback ports, and proves every query of the Grafana dashboard.
##   promtool, prometheus  prometheus (Debian): the rules' checks and the scraping server
##   redis_exporter        prometheus-redis-exporter (Debian)
MONITORING_NEEDS := promtool=prometheus prometheus=prometheus \
	prometheus-redis-exporter=prometheus-redis-exporter

deps-monitoring:
	$(call install_missing,$(MONITORING_NEEDS))

test-monitoring: deps-run deps-monitoring build
	@$(REDIS_SERVER) --version
	promtool check config monitoring/prometheus.yml
	promtool check rules monitoring/alerts.yml
	promtool test rules monitoring/alerts_test.yml
	python3 monitoring/test_e2e.py "$(REDIS_SERVER)" \
		"$$(realpath "$${CARGO_TARGET_DIR:-target}/debug/libratelimit.so")"

clean:
	cargo clean

## The Go package (go/README.md, docs/go.md), on $(REDIS_SERVER) with the debug module: go vet,
## then go/tests: redis_rate v10.0.1's own tests (from its module, go mod download) on the package, the same
## files on redis_rate itself on a plain server (the referee: its results are printed, not
## required), the net/http app on a server and on a 3-master cluster, a switch mid-flight. Go
## 1.21+ must be installed; go-redis, testify and redis_rate come from the Go module proxy,
## pinned by go.sum.
## A server path is made absolute without resolving links: Debian's redis-server is a link to
## redis-check-rdb, which acts by the name it is called with.
GO_ENV = RATELIMIT_MODULE="$$(realpath "$${CARGO_TARGET_DIR:-target}/$(1)/libratelimit.so")" \
	REDIS_SERVER="$$(case "$(2)" in */*) realpath -s "$(2)";; *) echo "$(2)";; esac)"
test-go: build
	@command -v go >/dev/null 2>&1 || { echo "test-go: go is missing: install Go 1.21 or newer"; exit 1; }
	@$(REDIS_SERVER) --version
	cd go && go vet ./...
	export $(call GO_ENV,debug,$(REDIS_SERVER)) && cd go/tests && go vet ./... && go test -count=1 -v ./...

## The Go package's bench (docs/go.md#cost) on the release module: server CPU per call and client
## p50/p99 beside go-redis/redis_rate's script, a hot key and 200 000 keys at random, on
## $(REDIS_SERVER) and Valkey 9.1.2 (built from ../shared/servers the first time).
## RATELIMIT_BENCH_CALLS (20 000) and RATELIMIT_BENCH_ROUNDS (3) size it.
bench-go: release
	@set -e; for server in "$(REDIS_SERVER)" "$$(.ci/fetch-shared valkey9)"; do \
		"$$server" --version; \
		(export $(call GO_ENV,release,$$server) RATELIMIT_BENCH=1 && \
			cd go/tests && go test -count=1 -run '^TestBench$$' -v -timeout 60m .); \
	done

## The Go module as a source zip (the Go module proxy's layout) and tarball, in target/dist/
## beside the module's tarballs, and SHA256SUMS again.
dist-go:
	packaging/dist-go

## Fuzzes every command's parser and the decoders for a minute, then whole store jobs on an
## in-memory dataset for a minute (fuzz/README.md).
## Installs cargo-fuzz if missing; RUSTC_BOOTSTRAP=1 lets the stable toolchain run it.
.PHONY: fuzz
fuzz:
	command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz
	cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run --sanitizer none parse -- -max_total_time=60
	mkdir -p fuzz/corpus/store
	cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run --sanitizer none store corpus/store seeds/store -- -max_total_time=60

## The Node package (node/README.md): ratelimit-node, express-rate-limit's store on the module.
## Its packages (express, express-rate-limit, ioredis, node-redis, TypeScript for the types check,
## and rate-limit-redis and rate-limiter-flexible, which the bench compares with) at the versions
## node/package-lock.json pins (`npm ci`); node_modules is redone only when the lock file changes.
## The tests (node's own runner) start their own servers with the debug module, on free ports.
NODE_PKG := node
deps-node: $(NODE_PKG)/node_modules/.package-lock.json
	@command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || \
		{ echo "deps-node: node and npm are missing: install Node 20"; exit 1; }

$(NODE_PKG)/node_modules/.package-lock.json: $(NODE_PKG)/package-lock.json
	cd $(NODE_PKG) && npm ci --no-audit --no-fund

NODE_ENV_FOR = RATELIMIT_MODULE="$$(realpath "$${CARGO_TARGET_DIR:-target}/$(1)/libratelimit.so")"

test-node: build deps-node
	@"$(REDIS_SERVER)" --version
	@export $(call NODE_ENV_FOR,debug) REDIS_SERVER="$(REDIS_SERVER)"; cd $(NODE_PKG) && npm test --silent

test-node-valkey9: build deps-node
	@server="$$(.ci/fetch-shared valkey9)" && "$$server" --version && \
		export $(call NODE_ENV_FOR,debug) REDIS_SERVER="$$server" && cd $(NODE_PKG) && npm test --silent

## rate-limiter-flexible's own RateLimiterRedis tests and rate-limit-redis's own store test,
## unedited, against this package (node/test/upstream/README.md; not in CI: the files come from
## the upstream repositories, which CI cannot reach): FLEXIBLE_REPO and RATE_LIMIT_REDIS_REPO name
## a checkout or a git directory of each. Their dev dependencies (mocha, chai, sinon, jest, ...) at
## the versions node/test/upstream/package-lock.json pins, in target/node-upstream/.
.PHONY: test-node-upstream
NODE_UPSTREAM_DEPS := target/node-upstream
$(NODE_UPSTREAM_DEPS)/node_modules/.package-lock.json: $(NODE_PKG)/test/upstream/package-lock.json $(NODE_PKG)/test/upstream/package.json
	@mkdir -p $(NODE_UPSTREAM_DEPS)
	cp $^ $(NODE_UPSTREAM_DEPS)/
	cd $(NODE_UPSTREAM_DEPS) && npm ci --no-audit --no-fund

test-node-upstream: build deps-node $(NODE_UPSTREAM_DEPS)/node_modules/.package-lock.json
	@test -n "$(FLEXIBLE_REPO)" && test -n "$(RATE_LIMIT_REDIS_REPO)" || \
		{ echo "test-node-upstream: set FLEXIBLE_REPO and RATE_LIMIT_REDIS_REPO (node/test/upstream/README.md)"; exit 1; }
	@"$(REDIS_SERVER)" --version
	@export $(call NODE_ENV_FOR,debug) REDIS_SERVER="$(REDIS_SERVER)"; \
		node $(NODE_PKG)/test/upstream/run.js --flexible "$(FLEXIBLE_REPO)" \
			--rate-limit-redis "$(RATE_LIMIT_REDIS_REPO)" --deps $(NODE_UPSTREAM_DEPS)/node_modules

## `npm pack`: the package's files only (package.json's "files"), types included.
dist-node:
	@mkdir -p target/dist
	cd $(NODE_PKG) && npm pack --silent --pack-destination ../target/dist

## Command time and server CPU per call (INFO commandstats, INFO cpu) and client p50/p99 of the four
## stores on one server, hot key and 200 000 keys at random, in ROUNDS (5) rounds with the stores'
## order rotated each round (node/bench/README.md); BENCH_NODE_ARGS=--quick for a short run. On Valkey 9: REDIS_SERVER="$$(.ci/fetch-shared valkey9)" make bench-node.
bench-node: release deps-node
	@"$(REDIS_SERVER)" --version
	@export $(call NODE_ENV_FOR,release) REDIS_SERVER="$(REDIS_SERVER)"; \
		node $(NODE_PKG)/bench/bench.js $(BENCH_NODE_ARGS)
## Python: the `limits` storage on the module (python/, docs/python.md). A venv under target/
## with the pinned test requirements; `dist-python` writes the wheel and the sdist to
## target/dist/; `test-python` builds the module and the release files, installs each file in a
## fresh venv (metadata checked), then runs, on that wheel, the package's tests (a real server
## and a real 3-master cluster; Flask-Limiter and SlowAPI apps) and limits' own storage and
## strategy tests (python/upstream) on $(REDIS_SERVER); `test-python-valkey9` on Valkey 9.1.2.
## limits' tests measure real time with margins of 30 to 200 ms: each may run 3 times (flaky's
## --force-flaky), as limits reruns those it marks flaky; a real difference fails all 3.
## `bench-python` measures it against limits' own Redis storage (python/bench.py).
.PHONY: dist-python test-python test-python-valkey9 bench-python
PYTHON_VENV := target/python-venv
PYTHON_DIST := target/dist
PYTHON_WHEEL := $(PYTHON_DIST)/ratelimit_limits-1.0.0-py3-none-any.whl
PYTHON_SDIST := $(PYTHON_DIST)/ratelimit_limits-1.0.0.tar.gz
## test-python tests release files built for it alone: `make dist` empties target/dist/ first, and
## CI builds the release files while the tests run.
PYTHON_TEST_DIST := target/python-dist
PYTHON_TEST_WHEEL := $(PYTHON_TEST_DIST)/ratelimit_limits-1.0.0-py3-none-any.whl
PYTHON_TEST_SDIST := $(PYTHON_TEST_DIST)/ratelimit_limits-1.0.0.tar.gz

## limits' own test files, from its sdist on PyPI (python/upstream/README.md), with our conftest.py
## and pytest.ini beside them.
LIMITS_UPSTREAM := target/limits-upstream
LIMITS_TESTS := tests/__init__.py tests/utils.py tests/test_storage.py tests/test_strategy.py \
	tests/aio/__init__.py tests/aio/test_storage.py tests/aio/test_strategy.py LICENSE.txt
$(LIMITS_UPSTREAM)/.unpacked: python/upstream/limits-sdist.txt python/upstream/conftest.py python/upstream/pytest.ini
	rm -rf $(LIMITS_UPSTREAM) target/limits-sdist
	python3 -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
		--require-hashes -r python/upstream/limits-sdist.txt -d target/limits-sdist
	mkdir -p $(LIMITS_UPSTREAM)
	tar -xzf target/limits-sdist/limits-*.tar.gz -C $(LIMITS_UPSTREAM) --strip-components=1 \
		$(addprefix limits-$(LIMITS_VERSION)/,$(LIMITS_TESTS))
	cp python/upstream/conftest.py python/upstream/pytest.ini $(LIMITS_UPSTREAM)/
	touch $@
LIMITS_VERSION = $(shell sed -n 's/^limits==\([^ ]*\) .*/\1/p' python/upstream/limits-sdist.txt)

$(PYTHON_VENV)/.installed: python/requirements-test.txt
	python3 -m venv $(PYTHON_VENV)
	$(PYTHON_VENV)/bin/pip install -q --disable-pip-version-check -r $<
	touch $@

dist-python: $(PYTHON_VENV)/.installed
	rm -rf python/build python/src/*.egg-info $(PYTHON_WHEEL) $(PYTHON_SDIST)
	$(PYTHON_VENV)/bin/python -m build -q --outdir $(PYTHON_DIST) python
	rm -rf python/build python/src/*.egg-info

test-python: build $(PYTHON_VENV)/.installed $(LIMITS_UPSTREAM)/.unpacked
	$(MAKE) --no-print-directory dist-python PYTHON_DIST=$(PYTHON_TEST_DIST)
	$(PYTHON_VENV)/bin/python python/testing/check_dist.py $(PYTHON_TEST_WHEEL) $(PYTHON_TEST_SDIST)
	$(PYTHON_VENV)/bin/pip install -q --disable-pip-version-check --force-reinstall --no-deps $(PYTHON_TEST_WHEEL)
	@"$(REDIS_SERVER)" --version
	cd python && REDIS_SERVER="$(REDIS_SERVER)" RATELIMIT_MODULE="$(CURDIR)/$(MODULE_DEBUG)" \
		../$(PYTHON_VENV)/bin/python -m pytest -q tests
	cd $(LIMITS_UPSTREAM) && REDIS_SERVER="$(REDIS_SERVER)" \
		RATELIMIT_MODULE="$(CURDIR)/$(MODULE_DEBUG)" RATELIMIT_PYTHON_TESTING="$(CURDIR)/python/testing" \
		$(CURDIR)/$(PYTHON_VENV)/bin/python -m pytest -q -m ratelimit --force-flaky --max-runs=3

test-python-valkey9:
	@server="$$(.ci/fetch-shared valkey9)" && $(MAKE) --no-print-directory test-python REDIS_SERVER="$$server"

bench-python: release $(PYTHON_VENV)/.installed
	@server="$$(.ci/fetch-shared valkey9)" && \
		PYTHONPATH=python/src RATELIMIT_MODULE="$(CURDIR)/$(MODULE_RELEASE)" \
		$(PYTHON_VENV)/bin/python python/bench.py "$(REDIS_SERVER)" "$$server"

## The ONEKEY form (issue 29) beside the three-key form, the module's GCRA and the scripts users
## run today (rate-limit-redis's fixed window and limits' moving window, read from their installed
## packages at run time; Redisson's as bench/tryacquire.lua), on one server in one run: server CPU
## per call (hot key, 200 000 and 1 000 000 keys at random), instructions per call (callgrind),
## memory per limiter, and where ONEKEY's instructions go (bench/onekey.py, bench/README.md).
## 5.5 min on 2 cores at a load average of 11-21 (9 min at 30-35), most of it making the
## 1 000 000 limiters; PARTS=cpu,instructions,memory,profile picks parts. Also run by `make bench`.
.PHONY: bench-onekey
bench-onekey: release deps-node $(PYTHON_VENV)/.installed
	$(call install_missing,$(BENCH_NEEDS))
	@"$(REDIS_SERVER)" --version
	$(PYTHON_VENV)/bin/python bench/onekey.py "$(REDIS_SERVER)" \
		"$$(realpath "$${CARGO_TARGET_DIR:-target}/release/libratelimit.so")"

## Resolving a request once, by instructions (callgrind; bench/resolve_once.py, bench/README.md):
## ACQUIRE with and without TICKET, CANCEL and SETRATE KEEPSTATE with the config cache off,
## TRYACQUIRE and ALLOW hot and over 200 000 limiters at random, and a waiter served (config
## cache off and on), for the release build of each git revision in RESOLVE_BASES and of this
## tree, side by side in one run. The default base is the parent of the change that resolved a
## request once; each base is built once, under target/resolve-base/.
RESOLVE_BASES ?= 692a6ae^
RESOLVE_BASE_DIR := target/resolve-base
.PHONY: bench-resolve
bench-resolve: release $(EXAMPLES_VENV)/.installed
	$(call install_missing,$(BENCH_NEEDS))
	@"$(REDIS_SERVER)" --version
	set -e; modules=""; for rev in $(RESOLVE_BASES); do \
		sha="$$(git rev-parse --short "$$rev")"; so="$(RESOLVE_BASE_DIR)/$$sha.so"; \
		if [ ! -f "$$so" ]; then \
			rm -rf "$(RESOLVE_BASE_DIR)/src-$$sha" && mkdir -p "$(RESOLVE_BASE_DIR)/src-$$sha"; \
			git archive "$$sha" | tar -x -C "$(RESOLVE_BASE_DIR)/src-$$sha"; \
			CARGO_TARGET_DIR="$(CURDIR)/$(RESOLVE_BASE_DIR)/target" cargo build --release \
				--manifest-path "$(RESOLVE_BASE_DIR)/src-$$sha/Cargo.toml"; \
			cp "$(RESOLVE_BASE_DIR)/target/release/libratelimit.so" "$$so"; \
		fi; \
		modules="$$modules $$(realpath "$$so")"; \
	done; \
	$(EXAMPLES_VENV)/bin/python bench/resolve_once.py "$(REDIS_SERVER)" $$modules \
		"$$(realpath "$${CARGO_TARGET_DIR:-target}/release/libratelimit.so")"
