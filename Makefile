# runtime: build with `make`, test with `make check`. Libraries come from Debian
# packages, found with pkg-config; nothing is vendored or downloaded.
CC      ?= cc
BUILD   ?= build
PKGS_D  := libevent libevent_openssl openssl jansson sqlite3 libseccomp libnftables libmnl
PKGS_C  := jansson openssl
WARN    := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wvla -Wswitch-enum -Wno-unused-parameter -Wno-format-truncation
HARDEN  := -D_FORTIFY_SOURCE=3 -fstack-protector-strong -fPIE
OPT     ?= -O2 -g
CFLAGS  += -std=gnu17 $(OPT) $(WARN) $(HARDEN) -D_GNU_SOURCE
LDFLAGS += -pie -Wl,-z,relro,-z,now
SAN     := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

# One folder per subsystem; each program lists the folders it is made of.
DAEMON_DIRS := common lifecycle proto keeper sandbox cgroup confine store accounts policy model dns sniff http httpd secrets mitm fingerprint review catalog dashboard mcp gateway egress connect api server meter idle daemon
CLI_DIRS    := common cli fingerprint review meter
srcs = $(foreach d,$(1),$(wildcard src/$(d)/*.c) $(wildcard src/$(d)/*.S))
objs = $(patsubst src/%,$(BUILD)/obj/%.o,$(basename $(call srcs,$(1))))

DAEMON_OBJS := $(call objs,$(DAEMON_DIRS))
CLI_OBJS    := $(call objs,$(CLI_DIRS))
# Unit tests link every subsystem but the program mains.
LIB_OBJS    := $(filter-out $(BUILD)/obj/daemon/% $(BUILD)/obj/cli/%,$(sort $(DAEMON_OBJS) $(CLI_OBJS)))
UNIT_SRCS   := $(wildcard tests/unit/*.c)

all: $(BUILD)/runtimed $(BUILD)/runtime $(BUILD)/gwcall $(BUILD)/bare-listener $(BUILD)/flood

# The version, in one place: VERSION's number, and the commit built from (git describe)
# when there is a git checkout, e.g. 0.1.0+eff1617-dirty. Only src/common/version.c
# holds it; it is compiled again when the text changes ($(BUILD)/version.txt).
VERSION_TEXT := $(shell cat VERSION)$(shell git describe --always --dirty 2>/dev/null | sed 's/^/+/')

$(BUILD)/version.txt: FORCE
	@mkdir -p $(dir $@)
	@echo '$(VERSION_TEXT)' | cmp -s - $@ || echo '$(VERSION_TEXT)' >$@

$(BUILD)/obj/common/version.o: src/common/version.c src/common/common.h $(BUILD)/version.txt
	@mkdir -p $(dir $@)
	@echo "  CC $<"
	@$(CC) $(CFLAGS) -DRUNTIME_VERSION='"$(VERSION_TEXT)"' -c $< -o $@

FORCE:

$(BUILD)/obj/%.o: src/%.c $(wildcard src/*/*.h src/*/*/*.h)
	@mkdir -p $(dir $@)
	@echo "  CC $<"
	@$(CC) $(CFLAGS) $(shell pkg-config --cflags $(PKGS_D) $(PKGS_C)) -c $< -o $@

# The catalog's data file is assembled into the daemon (src/catalog/data.S).
$(BUILD)/obj/%.o: src/%.S catalog/servers.json catalog/tools.json
	@mkdir -p $(dir $@)
	@echo "  AS $<"
	@$(CC) -I. -c $< -o $@

# The dashboard's files, built from ui/ (ui/dist is committed), carried in the daemon.
$(BUILD)/obj/dashboard/assets.o: $(wildcard ui/dist/*)

$(BUILD)/runtimed: $(DAEMON_OBJS)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(shell pkg-config --libs $(PKGS_D)) -lm

$(BUILD)/runtime: $(CLI_OBJS)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(shell pkg-config --libs $(PKGS_C)) -lm

# Every sandbox's pid 1 (src/sandbox/init/runtime-init.c): freestanding and static, a few
# pages; carried in the daemon (src/sandbox/init_image.S). No sanitizer or library flags.
$(BUILD)/runtime-init: src/sandbox/init/runtime-init.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu17 -O2 $(WARN) -static -nostdlib -ffreestanding -fno-stack-protector -fno-pie \
		-no-pie -fno-asynchronous-unwind-tables -s -Wl,--build-id=none -o $@ $<

# The gvisor driver's agent (inside gVisor) and shim (outside): static, so that they need
# nothing of the sandbox's /usr nor of the host's; carried in the daemon as the init is.
AGENT_HDRS := src/sandbox/agent/frame.h src/sandbox/agent/exec_path.h src/proto/proto.h src/common/common.h
$(BUILD)/runtime-agent $(BUILD)/runtime-shim: $(BUILD)/runtime-%: src/sandbox/agent/%.c $(AGENT_HDRS)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu17 -O2 $(WARN) -D_GNU_SOURCE -static -s -o $@ $<

$(BUILD)/obj/sandbox/init_image.o: src/sandbox/init_image.S $(BUILD)/runtime-init \
		$(BUILD)/runtime-agent $(BUILD)/runtime-shim
	@mkdir -p $(dir $@)
	@echo "  AS $<"
	@$(CC) -DINIT_IMAGE='"$(BUILD)/runtime-init"' -DAGENT_IMAGE='"$(BUILD)/runtime-agent"' \
		-DSHIM_IMAGE='"$(BUILD)/runtime-shim"' -c $< -o $@

# The benchmarks' gateway client (bench/gwcall.c): no library, so it costs the calls it times
# next to nothing.
$(BUILD)/gwcall: bench/gwcall.c
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $<

# bench/neighbour.sh's flood-bare reference: a listener that does the least (bench/bare-listener.c).
$(BUILD)/bare-listener: bench/bare-listener.c
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $<

# Its unauthenticated flood, from a generator that costs the machine little (bench/flood.c).
$(BUILD)/flood: bench/flood.c
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $<

$(BUILD)/unit: $(UNIT_SRCS) $(LIB_OBJS)
	$(CC) $(CFLAGS) $(LDFLAGS) -Isrc -o $@ $^ $(shell pkg-config --libs $(PKGS_D)) -lm

# The sanitizer build is a second tree under $(BUILD)/asan.
asan:
	$(MAKE) BUILD=$(BUILD)/asan OPT="-O1 -g $(SAN)" LDFLAGS="$(SAN)" all $(BUILD)/asan/unit

unit: $(BUILD)/unit
	$(BUILD)/unit

# Everything: unit tests plain and under ASan+UBSan, then the end-to-end,
# escape, egress, MCP, catalog and SDK suites against the real daemon (they need
# root), plain and sanitized; the sandbox suites once more under the gvisor driver, plain
# only (check-gvisor). The sanitized daemon checks for leaks when it stops
# (sanitized builds leave ptrace, which LeakSanitizer needs, to the server), and
# the tests' teardown fails on a report. Last, every benchmark in its short mode (bench-smoke).
# Runtime Cloud's official SDK, unmodified, in its own venv (scripts/install-deps): tests/cloud.
CLOUD_PYTHON ?= /opt/runtime-test/venv-cloud/bin/python
# Runtime Cloud's framework packages on it (docs/frameworks.md), in a venv of their own.
FRAMEWORKS_PYTHON ?= /opt/runtime-test/venv-frameworks/bin/python
check: all $(BUILD)/unit asan format-check ui-check
	scripts/include-graph >/dev/null
	tests/deps/check-deps.test.sh
	$(BUILD)/unit
	ASAN_OPTIONS=detect_leaks=1 $(BUILD)/asan/unit
	$(MAKE) fuzz-replay
	RUNTIME_BUILD=$(BUILD) tests/mitm/verify.sh
	RUNTIME_BUILD=$(BUILD) tests/run-e2e
	$(MAKE) check-gvisor
	RUNTIME_BUILD=$(BUILD) $(CLOUD_PYTHON) -m pytest -q -p no:cacheprovider tests/cloud
	RUNTIME_BUILD=$(BUILD) $(FRAMEWORKS_PYTHON) -m pytest -q -p no:cacheprovider \
		tests/cloud/test_frameworks.py
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 RUNTIME_BUILD=$(BUILD)/asan tests/run-e2e
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 RUNTIME_BUILD=$(BUILD)/asan \
		$(CLOUD_PYTHON) -m pytest -q -p no:cacheprovider tests/cloud
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 RUNTIME_BUILD=$(BUILD)/asan \
		$(FRAMEWORKS_PYTHON) -m pytest -q -p no:cacheprovider tests/cloud/test_frameworks.py
	$(MAKE) bench-smoke

# The sandbox suites a second time, every daemon's sandboxes under the gvisor driver
# (RUNTIME_DRIVER=gvisor: tests/e2e/lib.mjs starts runtimed --driver gvisor): the escape
# suite, the egress attack tests, the secret leak hunt and attacks, and the catalog
# servers' real tasks. The same tests as the ns pass, each difference of gVisor's made
# driver-aware where it is (tests/e2e/lib.mjs GVISOR). Against the plain build only, to keep
# CI under 45 minutes. Without runsc it is skipped, and fails under RUNTIME_REQUIRE_ALL (CI).
RUNSC_BIN     ?= /opt/runtime/bin/runsc
GVISOR_SUITES := tests/escape/*.test.mjs tests/egress/*.test.mjs tests/secrets/leak.test.mjs tests/e2e/exec.test.mjs \
	tests/secrets/attacks.test.mjs tests/catalog/*.test.mjs
check-gvisor: all
	@if [ ! -x $(RUNSC_BIN) ]; then \
		if [ -n "$$RUNTIME_REQUIRE_ALL" ]; then \
			echo "check-gvisor: $(RUNSC_BIN) is missing and RUNTIME_REQUIRE_ALL is set (scripts/install-deps installs it)" >&2; \
			exit 1; \
		fi; \
		echo "  GVISOR: skipped: no $(RUNSC_BIN) (scripts/install-runsc builds it)"; exit 0; \
	fi; \
	t0=$$(date +%s); \
	RUNTIME_BUILD=$(BUILD) RUNTIME_DRIVER=gvisor tests/run-e2e $(GVISOR_SUITES) && \
		echo "  GVISOR: the sandbox suites under gvisor passed in $$(( $$(date +%s) - t0 )) s"

# Every script in bench/ in its short mode (BENCH_SMOKE=1: every phase, tiny counts, figures
# not judged), one after another, against the plain build: so that none stops working
# unseen. Needs root, like the e2e suites. Each script's output goes to
# $(BUILD)/bench-smoke/NAME.log; a failure prints its tail.
BENCH_SCRIPTS := $(filter-out bench/lib.sh,$(wildcard bench/*.sh))
bench-smoke: all
	@mkdir -p $(BUILD)/bench-smoke
	@t0=$$(date +%s); for s in $(BENCH_SCRIPTS); do \
		n=$$(basename $$s .sh); t=$$(date +%s); \
		if BUILD=$(abspath $(BUILD)) BENCH_SMOKE=1 $$s >$(BUILD)/bench-smoke/$$n.log 2>&1; then \
			echo "  BENCH $$n: ok, $$(( $$(date +%s) - t )) s"; \
		else \
			echo "  BENCH $$n: FAILED after $$(( $$(date +%s) - t )) s; the end of $(BUILD)/bench-smoke/$$n.log:"; \
			tail -n 30 $(BUILD)/bench-smoke/$$n.log; exit 1; \
		fi; \
	done; echo "  BENCH all: $$(( $$(date +%s) - t0 )) s"

FORMATTED := src/*/*.c src/*/*.h src/sandbox/init/*.c src/sandbox/agent/*.c src/sandbox/agent/*.h tests/unit/*.c tests/unit/*.h tests/fuzz/*.c tests/fuzz/*.h bench/*.c

format:
	clang-format -i $(FORMATTED)

# Fails on any file that `make format` would change (clang-format 14, .clang-format).
# The dashboard (ui/): its types, its own tests (pure modules, and the page in Chromium
# against a mock), and ui/dist being exactly what its sources build (dist is committed:
# the daemon's build needs no npm). `make ui` rebuilds it.
ui:
	cd ui && node build.mjs

ui-check:
	cd ui && npm run --silent check && npm test --silent
	cd ui && node build.mjs >/dev/null
	@git diff --quiet -- ui/dist 2>/dev/null || \
		{ echo "ui-check: ui/dist is not what ui/src builds: run \`make ui\` and commit it" >&2; exit 1; }

format-check:
	@clang-format --dry-run --Werror $(FORMATTED) || \
		{ echo "format-check: run \`make format\` and commit the result" >&2; exit 1; }

clean:
	rm -rf $(BUILD)

# runtimed and runtime into $(PREFIX)/bin, the systemd unit (its ExecStart naming that
# runtimed) into /etc/systemd/system, the README into $(PREFIX)/share/doc/runtime (the
# unit's Documentation=); DESTDIR for a staging root. Then: systemctl daemon-reload &&
# systemctl enable --now runtimed.
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
DOCDIR  ?= $(PREFIX)/share/doc/runtime
UNITDIR ?= /etc/systemd/system

install: $(BUILD)/runtimed $(BUILD)/runtime
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(DOCDIR)
	install -m 0755 $(BUILD)/runtimed $(BUILD)/runtime $(DESTDIR)$(BINDIR)/
	sed -e 's|/usr/local/bin/runtimed|$(BINDIR)/runtimed|' \
	    -e 's|/usr/local/share/doc/runtime|$(DOCDIR)|' docs/runtimed.service \
	    >$(DESTDIR)$(UNITDIR)/runtimed.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/runtimed.service
	install -m 0644 README.md $(DESTDIR)$(DOCDIR)/README.md
	@echo "installed $(BINDIR)/runtimed, $(BINDIR)/runtime and $(UNITDIR)/runtimed.service;" \
	    "start it with: systemctl daemon-reload && systemctl enable --now runtimed"

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/runtimed $(DESTDIR)$(BINDIR)/runtime \
	    $(DESTDIR)$(UNITDIR)/runtimed.service $(DESTDIR)$(DOCDIR)/README.md
	-rmdir $(DESTDIR)$(DOCDIR) 2>/dev/null

.PHONY: all asan unit check check-gvisor format clean install uninstall bench-smoke ui ui-check FORCE

# Fuzz targets (libFuzzer, clang) for the parsers of untrusted input, in
# tests/fuzz/. The sources are compiled again by clang with coverage and
# ASan+UBSan into an archive, so each target links only what it calls.
# `make fuzz` builds $(BUILD)/fuzz/fuzz_*; `make fuzz-replay` runs each over its
# committed corpus only (fast, deterministic); tests/fuzz/run fuzzes for a while.
FUZZ_CC    ?= clang
FUZZERS    ?= $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_SAN   := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_FLAGS := -std=gnu17 -g -O1 $(FUZZ_SAN) -D_GNU_SOURCE $(WARN) -Wno-unknown-warning-option -Isrc
FUZZ_OBJS  := $(patsubst src/%.c,$(BUILD)/fuzz/obj/%.o,\
                $(filter-out src/daemon/% src/cli/%,$(wildcard src/*/*.c)))

$(BUILD)/fuzz/obj/%.o: src/%.c $(wildcard src/*/*.h)
	@mkdir -p $(dir $@)
	@echo "  CC (fuzz) $<"
	@$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link $(shell pkg-config --cflags $(PKGS_D)) \
		-c $< -o $@

# The keeper's fuzz target links the sandbox's init image: the plain build's blob, as is.
FUZZ_OBJS  += $(BUILD)/fuzz/obj/sandbox/init_image.o
$(BUILD)/fuzz/obj/sandbox/init_image.o: $(BUILD)/obj/sandbox/init_image.o
	@mkdir -p $(dir $@)
	@cp $< $@

$(BUILD)/fuzz/libruntime.a: $(FUZZ_OBJS)
	@rm -f $@
	@ar rcs $@ $^

$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(BUILD)/fuzz/libruntime.a
	@echo "  FUZZ $@"
	@$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer $(shell pkg-config --cflags $(PKGS_D)) \
		-o $@ $^ $(shell pkg-config --libs $(PKGS_D)) -lm

$(BUILD)/fuzz/gen_corpus: tests/fuzz/gen_corpus.c $(wildcard src/*/*.h)
	@mkdir -p $(dir $@)
	@$(FUZZ_CC) -std=gnu17 -g -O1 -D_GNU_SOURCE $(WARN) -Wno-unknown-warning-option -Isrc -o $@ $<

fuzz: $(foreach f,$(FUZZERS),$(BUILD)/fuzz/fuzz_$(f)) $(BUILD)/fuzz/gen_corpus

fuzz-replay: fuzz
	@for f in $(FUZZERS); do \
		echo "  REPLAY tests/fuzz/corpus/$$f"; \
		$(BUILD)/fuzz/fuzz_$$f -runs=0 tests/fuzz/corpus/$$f/ >$(BUILD)/fuzz/replay-$$f.log 2>&1 \
			|| { cat $(BUILD)/fuzz/replay-$$f.log; exit 1; }; \
		grep -a -m 1 DONE $(BUILD)/fuzz/replay-$$f.log || tail -n 1 $(BUILD)/fuzz/replay-$$f.log; \
	done

.PHONY: fuzz fuzz-replay
