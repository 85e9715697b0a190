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
#   make test-monitoring  the Prometheus rules (promtool) and the Grafana dashboard's queries
#               through the real redis_exporter and Prometheus (monitoring/)
#   make bench  the module against the equivalent Lua script and plain INCR, side by side
#               (and redis-cell's CL.THROTTLE with REDIS_CELL=/path/to/libredis_cell.so)

REDIS_SERVER ?= redis-server
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
MODULE_DEBUG := target/debug/libratelimit.so
MODULE_RELEASE := target/release/libratelimit.so

.PHONY: deps deps-run deps-java deps-examples deps-shared examples-toolchains build release run test test-redisson \
	test-java bench-java bench-config-cache bench-stats test-busy \
	test-valkey test-redis8 test-unstable test-valkey9 test-redis72 test-redis74 lint ci clean bench \
	deps-dist deps-aarch64 deps-deb dist dist-check deb test-deb test-aarch64 \
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

dist: deps-dist
	ZIG_VENV=$(ZIG_VENV) packaging/dist

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

ci: deps lint test test-monitoring test-redis8 test-unstable test-valkey test-valkey9 test-redis72 test-redis74 \
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

## Fuzzes the argument parsers and the permit-log member decoder for a minute (fuzz/README.md).
## Installs cargo-fuzz if missing; RUSTC_BOOTSTRAP=1 lets the stable toolchain run it.
.PHONY: fuzz
fuzz:
	command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz
	cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run --sanitizer none parse -- -max_total_time=60
