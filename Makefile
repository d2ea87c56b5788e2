# Builds libtq and the tq command, installs them, runs the C example and
# every test.
#
#   make                 build build/lib/{libtq.so*,libtq.a}
#   make cli             build the tq command (target/release/tq, from cli/)
#   make setup           install what the tests and examples need besides the
#                        Rust, Go and Node.js toolchains (tools/setup.sh);
#                        make test and make example run it first
#   make example         build and run examples/c and examples/go
#   make test-examples   build and run every example program
#   make test-docs       the code in the docs against the code: excerpts of the
#                        examples, C names, tq flags, make targets, binding
#                        names; the links in the Rust doc comments
#   make test            every test: Rust, PostgreSQL, the tq command, header, exported
#                        symbols, install and pkg-config, C (plain, static,
#                        C++, AddressSanitizer/UBSan, valgrind, panic
#                        injection), faults (disk full, I/O errors,
#                        descriptors), Go, torture, the Python and Node.js
#                        bindings, the SQLite extension, the packages of
#                        make dist installed without Rust, every example
#                        program, the docs' code
#   make test-cli        the tq command's tests alone
#   make ext             build tq's SQLite extension, build/lib/libtq_sqlite.so
#                        (from ext/sqlite, a crate of its own)
#   make test-ext        the extension from C (tests/ext: an amalgamation
#                        of 3.51.3 or later, and the sqlite3 shell's refusal
#                        of an older SQLite), Python (apsw), Go
#                        (mattn/go-sqlite3) and Node.js (better-sqlite3)
#   make test-postgres   the PostgreSQL backend against a throwaway server
#                        (the core and job suites, its own tests, and the
#                        Go, Python and Node.js bindings' PostgreSQL tests)
#   make test-torture    crash, power-loss and concurrency torture tests
#                        (TQ_TORTURE_SEED=N replays, TQ_TORTURE_SECONDS=N
#                        runs each scenario N seconds)
#   make install PREFIX=/usr/local DESTDIR=
#   make dist            every package a user installs, in build/dist: C
#                        tarball, Debian package, Python wheel and sdist, npm
#                        tarball, Go module, Rust crates; libtq built once for
#                        glibc 2.17 and later (tools/dist)
#   make test-dist       each package of make dist installed as its ecosystem
#                        installs it, without Rust, running its quick start
#   make bench           the throughput benchmark (see bench/README.md)
#   make bench-postgres  the PostgreSQL backend against SQLite, on a throwaway
#                        server over loopback, from one thread and from 1, 4
#                        and 16 processes (bench/postgres.rs); then against
#                        River, from 1, 4 and 16 workers (bench/river)
#   make test-go         the Go binding (bindings/go) and its examples:
#                        vet, tests under the race detector, a build
#                        through pkg-config against an installed libtq
#   make example-go      run the Go examples (examples/go)
#   make bench-go        the Go binding's benchmarks against the same loops in C,
#                        then Work against goqite (bench/goqite)
#   make test-python     the Python binding's tests (bindings/python)
#   make example-python  build and run examples/python
#   make bench-python    the Python binding against the prototype
#   make test-node       the Node.js binding's tests (bindings/node) and its
#                        examples (examples/node)
#   make example-node    run the Node.js examples (examples/node)
#   make pack-node       an npm tarball of the Node.js binding with libtq inside
#                        (build/node/tq-VERSION.tgz)
#   make bench-node      the Node.js binding against the same loops in C and
#                        plainjob, a queue on SQLite from npm (bench/node)

PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
CARGO ?= cargo

VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
BUILD := build
RELEASE := target/release

.PHONY: all setup lib cli example test test-rust test-postgres test-cli bench-postgres test-symbols test-install test-c test-faults test-torture bench install clean FORCE \
	test-go example-go bench-go
.PHONY: test-python example-python bench-python bench-serve
.PHONY: test-node example-node bench-node pack-node
.PHONY: test-examples test-docs
.PHONY: ext test-ext
.PHONY: dist test-dist

all: lib

# The libraries under build/lib with the usual names: libtq.so.VERSION, the
# SONAME link the loader looks for, and the libtq.so link the linker uses.
# rustc's native-static-libs note names the system libraries a static link
# of libtq.a needs: they become tq.pc's Libs.private
# (build/native-static-libs), never typed by hand.
lib: $(BUILD)/lib/libtq.so
$(RELEASE)/libtq.so $(RELEASE)/libtq.a: FORCE
	mkdir -p $(BUILD)
	$(CARGO) rustc --release --locked --lib -- --print native-static-libs 2> $(BUILD)/lib-build.log; \
	status=$$?; cat $(BUILD)/lib-build.log >&2; exit $$status
	sed -n 's/^note: native-static-libs: //p' $(BUILD)/lib-build.log > $(BUILD)/native-static-libs.new
	if [ -s $(BUILD)/native-static-libs.new ]; then mv $(BUILD)/native-static-libs.new $(BUILD)/native-static-libs; \
	else rm $(BUILD)/native-static-libs.new; test -s $(BUILD)/native-static-libs || \
		{ echo "rustc named no native-static-libs: run make clean" >&2; exit 1; }; fi
$(BUILD)/lib/libtq.so: $(RELEASE)/libtq.so $(RELEASE)/libtq.a
	mkdir -p $(BUILD)/lib
	soname=$$(objdump -p $(RELEASE)/libtq.so | awk '$$1 == "SONAME" { print $$2 }'); \
	test -n "$$soname" || { echo "libtq.so has no SONAME" >&2; exit 1; }; \
	cp -f $(RELEASE)/libtq.so $(BUILD)/lib/libtq.so.$(VERSION); \
	if [ "$$soname" != "libtq.so.$(VERSION)" ]; then ln -sf libtq.so.$(VERSION) $(BUILD)/lib/$$soname; fi; \
	ln -sf libtq.so.$(VERSION) $(BUILD)/lib/libtq.so
	@# Without the debug sections of Rust's standard library, built with
	@# them, and the LLVM bitcode rustc embeds in every object for LTO.
	strip --strip-debug --remove-section=.llvmbc --remove-section=.llvmcmd -o $(BUILD)/lib/libtq.a $(RELEASE)/libtq.a

# tq's SQLite extension, a crate of its own in ext/sqlite (its own
# workspace and Cargo.lock), copied beside libtq, where the bindings look
# for it.
EXT_TARGET := target/ext-sqlite
ext: $(BUILD)/lib/libtq_sqlite.so
$(BUILD)/lib/libtq_sqlite.so: FORCE
	cd ext/sqlite && CARGO_TARGET_DIR=$(CURDIR)/$(EXT_TARGET) $(CARGO) build --locked --release
	mkdir -p $(BUILD)/lib
	cp -f $(EXT_TARGET)/release/libtq_sqlite.so $@

# The extension from each language, each with its own SQLite: C on the
# amalgamation libsqlite3-sys vendors (tests/ext), Python with apsw, Go with
# mattn/go-sqlite3 (tests/ext/go, a module of its own, so that the binding's
# module needs no SQLite driver) and Node.js with better-sqlite3 (tests/ext/node,
# its own npm packages).
test-ext: export TQ_SQLITE_EXTENSION = $(CURDIR)/$(BUILD)/lib/libtq_sqlite.so
test-ext: lib ext tests/ext/node/node_modules/.package-lock.json
	$(MAKE) -C tests/ext all TQ_LIBDIR=$(CURDIR)/$(BUILD)/lib TQ_INCLUDEDIR=$(CURDIR)/include
	$(IN_TREE_PYTHON) -m pytest -q -rs -p no:cacheprovider bindings/python/tests/test_sqlite_extension.py
	$(call GO_INTREE,tests/ext/go,vet) ./...
	@# -v: go test prints a skip and its reason only then.
	$(call GO_INTREE,tests/ext/go,test) -count=1 -v ./...
	cd tests/ext/node && $(IN_TREE_NODE) --test orders.test.js

# The tq command, a crate of its own in cli/ built on the Rust API.
cli: $(RELEASE)/tq
$(RELEASE)/tq: FORCE
	$(CARGO) build --release --locked -p tq-cli

# Debian packages (through sudo when not root, if it needs no password; else
# it names them and stops), pytest, and a check of the toolchains. Listed
# first where it is a prerequisite: make without -j makes prerequisites in
# the order listed.
setup:
	@CARGO='$(CARGO)' GO='$(GO)' NODE='$(NODE)' NPM='$(NPM)' PYTHON='$(PYTHON)' tools/setup.sh

example: setup lib
	$(MAKE) -C examples/c run TQ_LIBDIR=$(CURDIR)/$(BUILD)/lib TQ_INCLUDEDIR=$(CURDIR)/include
	$(MAKE) --no-print-directory example-go

test: setup test-rust test-postgres test-cli test-symbols test-install test-c test-faults test-go test-torture test-python test-node test-ext test-dist

# After the others: the example programs, then the code in the docs.
test: test-examples test-docs

# Every example program, built and run. The docs may quote (excerpt) only
# the programs this runs: tests/docs/check_docs.py reads them from
# `make -n test-examples`, and fails when a program under examples/ is not
# among them.
test-examples: example example-python example-node

# The checker's own tests, then the checker on the docs, against the tq
# command's --help (hence cli); then the doc comments of both crates, private
# items included, with rustdoc's warnings (a broken link) as errors. One
# crate at a time: both are named tq, and would share one output page.
test-docs: cli
	$(PYTHON) -m pytest -q -p no:cacheprovider tests/docs
	$(PYTHON) tests/docs/check_docs.py --root $(CURDIR) --tq-binary $(RELEASE)/tq
	RUSTDOCFLAGS='-D warnings' $(CARGO) doc --no-deps --locked --document-private-items -p tq
	RUSTDOCFLAGS='-D warnings' $(CARGO) doc --no-deps --locked --document-private-items -p tq-cli

test-rust:
	$(CARGO) test --locked

# tests/postgres/cluster.sh starts a PostgreSQL server of its own on
# 127.0.0.1 (from the postgresql package), stopped and removed whatever the
# outcome. The core, job, control, results, schedules, dependencies and groups
# suites run their postgres:: variants on it, in a schema per test;
# tests/postgres.rs runs what only PostgreSQL does; the
# torture scenarios with PostgreSQL variants (workers killed, exclusive
# delivery) run theirs, one at a time like test-torture, and so does the
# network faults scenario, which restarts the server (cluster.sh restart,
# hence TQ_TEST_POSTGRES_DIR) and cuts its connections, and so does `tq
# work`'s test of a restart. Same profile as
# test-rust, so one build serves both. Then the Go and Python bindings'
# PostgreSQL tests (their options, a round trip), without the race
# detector (test-go runs them under it, the round trip skipped there for
# want of a server), and the Node.js binding's.
test-postgres: lib bindings/node/node_modules/.package-lock.json
	@dir=$$(mktemp -d /tmp/tq-postgres.XXXXXX) && \
	trap '$(CURDIR)/tests/postgres/cluster.sh stop "'"$$dir"'"' EXIT && \
	url=$$(tests/postgres/cluster.sh start "$$dir") && \
	echo "PostgreSQL test server: $$url" && \
	TQ_TEST_POSTGRES_URL=$$url $(CARGO) test --locked --lib --test queue --test jobs --test control --test results --test schedules --test dependencies --test groups postgres:: && \
	TQ_TEST_POSTGRES_URL=$$url $(CARGO) test --locked --test postgres && \
	TQ_TEST_POSTGRES_URL=$$url TQ_TEST_POSTGRES_DIR=$$dir $(CARGO) test --locked --test torture -- \
		--include-ignored --test-threads=1 --nocapture on_postgres && \
	export TQ_TEST_POSTGRES_URL=$$url TQ_TEST_POSTGRES_DIR=$$dir && \
	$(CARGO) test --locked -p tq-cli --test work postgres && \
	($(call GO_INTREE,bindings/go,test) -count=1 -run Postgres .) && \
	$(IN_TREE_PYTHON) -m pytest -q -p no:cacheprovider -k postgres bindings/python/tests && \
	cd bindings/node && $(IN_TREE_NODE) --test test/postgres.test.js

# Runs the built tq binary through every command.
test-cli:
	$(CARGO) test --locked -p tq-cli

# libtq.so must export tq_* functions and nothing else (no SQLite, no Rust).
test-symbols: lib
	@leaked=$$(nm -D --defined-only $(BUILD)/lib/libtq.so | awk '{ print $$3 }' | grep -v '^tq_' || true); \
	if [ -n "$$leaked" ]; then echo "libtq.so exports symbols other than tq_*:"; echo "$$leaked" | head -20; exit 1; fi; \
	count=$$(nm -D --defined-only $(BUILD)/lib/libtq.so | grep -c ' T tq_'); \
	echo "libtq.so exports $$count tq_* functions and nothing else"

# Installs into a staging directory and builds the example from there
# through pkg-config alone, as a user of an installed libtq would.
STAGING := $(CURDIR)/$(BUILD)/staging
STAGED_PKG_CONFIG := PKG_CONFIG_SYSROOT_DIR=$(STAGING) PKG_CONFIG_LIBDIR=$(STAGING)/usr/lib/pkgconfig pkg-config
test-install: lib
	rm -rf $(STAGING) $(BUILD)/installed.db*
	$(MAKE) --no-print-directory install DESTDIR=$(STAGING) PREFIX=/usr
	soname=$$(objdump -p $(STAGING)/usr/lib/libtq.so | awk '$$1 == "SONAME" { print $$2 }'); \
	test -e $(STAGING)/usr/lib/$$soname && test -e $(STAGING)/usr/include/tq.h && test -e $(STAGING)/usr/lib/libtq.a
	$(CC) -Wall -Wextra -Werror -pedantic -std=c11 -o $(BUILD)/workers-installed examples/c/workers.c \
		$$($(STAGED_PKG_CONFIG) --cflags --libs tq) -pthread
	LD_LIBRARY_PATH=$(STAGING)/usr/lib $(BUILD)/workers-installed $(BUILD)/installed.db
	@# Static: libtq.a with the system libraries of `pkg-config --static`.
	rm -f $(BUILD)/installed.db*
	$(CC) -Wall -Wextra -Werror -pedantic -std=c11 -o $(BUILD)/workers-static examples/c/workers.c \
		$$($(STAGED_PKG_CONFIG) --static --cflags --libs tq | sed 's/-ltq/-Wl,-Bstatic -ltq -Wl,-Bdynamic/') -pthread
	! objdump -p $(BUILD)/workers-static | grep -q 'NEEDED.*libtq'
	$(BUILD)/workers-static $(BUILD)/installed.db
	$(STAGING)/usr/bin/tq --version
	$(STAGING)/usr/bin/tq stats $(BUILD)/installed.db

test-c: lib
	$(MAKE) -C tests/c all TQ_LIBDIR=$(CURDIR)/$(BUILD)/lib TQ_INCLUDEDIR=$(CURDIR)/include

# Disk full, injected I/O errors (strace), file-descriptor hygiene, and a
# host program that uses its own SQLite beside libtq.
test-faults: lib
	$(MAKE) -C tests/faults all TQ_LIBDIR=$(CURDIR)/$(BUILD)/lib TQ_INCLUDEDIR=$(CURDIR)/include

# tests/torture: producers and workers killed, power loss through a
# test-only VFS, exclusive delivery with fails, heartbeats and two named
# queues, zombie workers and clock jumps (libfaketime, Debian package
# faketime; skipped with the reason when missing), many openers, the WAL's
# size under readers. One test at a time: the scenarios time leases and
# fill the machine's two cores themselves.
test-torture:
	$(CARGO) test --locked --test torture -- --include-ignored --test-threads=1 --nocapture

bench:
	$(CARGO) bench --locked --bench throughput

# tq serve on a file of a million tasks (each page's answer time), and
# the workers of a file while its dashboard is read, against alone.
bench-serve: export TQ_BENCH_DIR ?= $(CURDIR)/target/bench-tmp
bench-serve:
	$(CARGO) bench --locked -p tq-cli --bench dashboard

# The server's data lives under /tmp (the server's user must reach it, which
# a work tree under a private home may not allow): where /tmp is a tmpfs,
# its flushes cost nothing and the comparison with the SQLite files under
# TQ_BENCH_DIR favours PostgreSQL. Then tq, through its Go binding, against
# River on the same server (bench/river, a Go module of its own that fetches
# River from the module proxy).
bench-postgres: export TQ_BENCH_DIR ?= $(CURDIR)/target/bench-tmp
bench-postgres: lib
	@mkdir -p $(TQ_BENCH_DIR) && dir=$$(mktemp -d /tmp/tq-postgres-bench.XXXXXX) && \
	trap 'tests/postgres/cluster.sh stop "'"$$dir"'"' EXIT && \
	url=$$(tests/postgres/cluster.sh start "$$dir") && \
	TQ_BENCH_POSTGRES_URL=$$url $(CARGO) bench --locked --bench postgres && \
	export TQ_BENCH_POSTGRES_URL=$$url && ($(call GO_INTREE,bench/river,run) .)

# The Go binding links the in-tree static library under the tq_intree tag.
# Go does not notice when libtq.a or tq.h change, so their hash goes into
# CGO_CFLAGS (as a macro nobody reads), which Go does key its cache on.
GO ?= go
GO_INTREE = cd $(1) && CGO_CFLAGS="-O2 -g -DTQ_BUILD_HASH=$$(cat $(CURDIR)/$(RELEASE)/libtq.a $(CURDIR)/include/tq.h | sha256sum | cut -c1-16)" \
	$(GO) $(2) -tags tq_intree
GO_STAGING := $(CURDIR)/$(BUILD)/go-staging

# Every run is under the race detector (the benchmarks too, 50 operations
# each, to keep them working), so the standard library is built once for it.
test-go: lib
	$(call GO_INTREE,bindings/go,vet) ./...
	$(call GO_INTREE,bindings/go,test) -race -count=1 -bench . -benchtime 50x ./...
	@# go test prints skips only with -v: say which test skips and why.
	@[ -n "$$TQ_TEST_POSTGRES_URL" ] || echo "skipped the TestPostgres round trips (push, results, schedules, task context): TQ_TEST_POSTGRES_URL is not set (make test-postgres runs it)"
	$(call GO_INTREE,examples/go,vet) ./...
	$(call GO_INTREE,examples/go,test) -race -count=1 ./...
	@# tq_system: pkg-config finds libtq installed in a staging directory.
	rm -rf $(GO_STAGING)
	$(MAKE) --no-print-directory install DESTDIR=$(GO_STAGING) PREFIX=/usr
	cd bindings/go && PKG_CONFIG_SYSROOT_DIR=$(GO_STAGING) PKG_CONFIG_LIBDIR=$(GO_STAGING)/usr/lib/pkgconfig \
		LD_LIBRARY_PATH=$(GO_STAGING)/usr/lib $(GO) test -tags tq_system -race -count=1 -run 'TestVersion|TestPushPullFinish|TestProcessesShareOneFile|TestPullReturnsPromptlyWhenCancelled' .

# The examples' queue files go to build/, with their -wal and -shm.
example-go: lib
	rm -f $(BUILD)/go-workers.db* $(BUILD)/go-quickstart.db*
	$(call GO_INTREE,examples/go,run) ./quickstart $(CURDIR)/$(BUILD)/go-quickstart.db
	$(call GO_INTREE,examples/go,run) ./workers $(CURDIR)/$(BUILD)/go-workers.db
	$(call GO_INTREE,examples/go,run) ./httpservice -selftest

# Runs of 3 s, three of each, on files under TQ_BENCH_DIR (as for `make bench`);
# then Work against goqite, a SQLite queue for Go (bench/goqite, a Go module of
# its own that fetches goqite and mattn/go-sqlite3 from the module proxy).
bench-go: export TQ_BENCH_DIR ?= $(CURDIR)/target/bench-tmp
bench-go: lib
	$(call GO_INTREE,bindings/go,test) -run '^$$' -bench . -benchtime 3s -count 3 .
	$(call GO_INTREE,bench/goqite,run) .

# The Python binding, run from the source tree against build/lib.
PYTHON ?= python3
IN_TREE_PYTHON := TQ_LIBRARY=$(CURDIR)/$(BUILD)/lib/libtq.so PYTHONPATH=$(CURDIR)/bindings/python $(PYTHON)

# ext: the extension's tests find it beside libtq, and must not find an old build.
test-python: lib ext
	$(IN_TREE_PYTHON) -m pytest -q -rs -p no:cacheprovider bindings/python/tests

example-python: lib
	rm -f $(BUILD)/blog_example.db $(BUILD)/blog_example.db-wal $(BUILD)/blog_example.db-shm $(BUILD)/python-quickstart.db*
	$(IN_TREE_PYTHON) examples/python/quickstart.py $(BUILD)/python-quickstart.db
	$(IN_TREE_PYTHON) examples/python/blog_example.py $(BUILD)/blog_example.db

# persist-queue, a peer queue on SQLite, from PyPI, runs in the same run.
bench-python: lib
	$(PYTHON) -m pip install --quiet --disable-pip-version-check 'persist-queue==1.1.0'
	$(IN_TREE_PYTHON) bench/python_bench.py

# The Node.js binding, run from the source tree against build/lib. Each
# folder's npm packages are installed (npm ci) from its package-lock.json
# when the lock is newer than what is installed; the examples and the
# benchmark link the binding (file:../../bindings/node), so it comes first.
NODE ?= node
NPM ?= npm
IN_TREE_NODE := TQ_LIBRARY=$(CURDIR)/$(BUILD)/lib/libtq.so $(NODE)
NODE_BINDING_MODULES := bindings/node/node_modules/.package-lock.json
%/node_modules/.package-lock.json: %/package-lock.json
	cd $* && $(NPM) ci --no-audit --no-fund
examples/node/node_modules/.package-lock.json bench/node/node_modules/.package-lock.json: $(NODE_BINDING_MODULES)
tests/ext/node/node_modules/.package-lock.json: $(NODE_BINDING_MODULES)

test-node: lib $(NODE_BINDING_MODULES) examples/node/node_modules/.package-lock.json
	cd bindings/node && $(IN_TREE_NODE) --test test/*.test.js

# The npm tarball of `make dist`'s node/ folder, carrying build/lib's
# libtq instead of the glibc 2.17 build (build/node/tq-VERSION.tgz).
pack-node: lib
	tools/dist/node.sh $(BUILD)/lib $(BUILD)/node

# The examples' queue files go to build/, with their -wal and -shm.
example-node: lib examples/node/node_modules/.package-lock.json
	rm -f $(BUILD)/node-workers.db* $(BUILD)/node-quickstart.db*
	$(IN_TREE_NODE) examples/node/quickstart.js $(BUILD)/node-quickstart.db
	$(IN_TREE_NODE) examples/node/workers.js $(BUILD)/node-workers.db
	$(IN_TREE_NODE) examples/node/httpservice.js --selftest

# The C loops are built against build/lib; files go under TQ_BENCH_DIR.
bench-node: export TQ_BENCH_DIR ?= $(CURDIR)/target/bench-tmp
bench-node: lib bench/node/node_modules/.package-lock.json
	mkdir -p $(BUILD)/node-bench
	$(CC) -O2 -Wall -Wextra -Werror -pedantic -std=c11 -Iinclude -o $(BUILD)/node-bench/c_loops bench/node/c_loops.c \
		-L$(BUILD)/lib -ltq -Wl,-rpath,$(CURDIR)/$(BUILD)/lib
	$(IN_TREE_NODE) --expose-gc bench/node/bench.js

# Every artifact a user installs, in build/dist, one folder per ecosystem,
# from one build of libtq and tq for glibc 2.17 and later
# (tools/dist/build.sh), with a SHA256SUMS of them all: c/ (a tarball to
# unpack under any prefix), deb/ (a Debian package), python/ (a manylinux
# wheel carrying libtq, and an sdist that builds it with cargo), node/ (an npm tarball
# carrying libtq, installed with no script), go/ (the Go module with
# libtq.a inside, and a file:// module proxy serving it), rust/ (the crates, as `cargo
# package` makes them).
DIST := $(BUILD)/dist
DIST_STAGE := $(BUILD)/dist-stage
dist: lib
	tools/dist/build.sh $(DIST_STAGE)
	rm -rf $(DIST)
	tools/dist/c.sh $(DIST_STAGE) $(DIST)
	tools/dist/python.sh $(DIST_STAGE)/lib $(DIST)/python
	tools/dist/node.sh $(DIST_STAGE)/lib $(DIST)/node
	tools/dist/go.sh $(DIST_STAGE)/lib $(DIST)/go
	tools/dist/rust.sh $(DIST)
	@# go/module is the folder a release copies into the Go module's repository; the proxy's zip holds the same files.
	cd $(DIST) && find . -type f ! -name SHA256SUMS ! -path './go/module/*' | LC_ALL=C sort | xargs sha256sum > SHA256SUMS
	@cd $(DIST) && du -b $$(find . -type f ! -path './go/module/*' | LC_ALL=C sort) | awk '{ printf "%12d  %s\n", $$1, $$2 }'

# Each artifact of build/dist installed as its ecosystem installs it, on a
# PATH without Rust, running its language's quick start (tests/dist).
test-dist: dist
	tests/dist/c.sh $(DIST)
	tests/dist/python.sh $(DIST)
	tests/dist/node.sh $(DIST)
	tests/dist/go.sh $(DIST)
	tests/dist/rust.sh

install: lib cli
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR)
	install -m 755 $(RELEASE)/tq $(DESTDIR)$(BINDIR)/tq
	cp -P $(BUILD)/lib/libtq.so* $(DESTDIR)$(LIBDIR)/
	install -m 644 $(BUILD)/lib/libtq.a $(DESTDIR)$(LIBDIR)/libtq.a
	install -m 644 include/tq.h $(DESTDIR)$(INCLUDEDIR)/tq.h
	sed -e 's|@PREFIX@|$(PREFIX)|; s|@LIBDIR@|$(LIBDIR)|; s|@INCLUDEDIR@|$(INCLUDEDIR)|; s|@VERSION@|$(VERSION)|' \
		-e "s|@LIBS_PRIVATE@|$$(cat $(BUILD)/native-static-libs)|" \
		tq.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/tq.pc

clean:
	rm -rf $(BUILD)
	$(CARGO) clean
