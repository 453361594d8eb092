# runtime: build with `make`, test with `make check`. Libraries come from Debian
# packages, found with pkg-config; nothing is vendored or downloaded.
CC      ?= cc
BUILD   ?= build
PKGS_D  := libevent jansson sqlite3 libseccomp
PKGS_C  := libcurl jansson
WARN    := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wvla -Wno-unused-parameter -Wno-format-truncation
HARDEN  := -D_FORTIFY_SOURCE=3 -fstack-protector-strong -fPIE
OPT     ?= -O2 -g
CFLAGS  += -std=gnu17 $(OPT) $(WARN) $(HARDEN) -D_GNU_SOURCE
LDFLAGS += -pie -Wl,-z,relro,-z,now
SAN     := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

# One folder per subsystem; each program lists the folders it is made of.
DAEMON_DIRS := common proto keeper sandbox cgroup confine store policy dns sniff egress api server daemon
CLI_DIRS    := common cli
srcs = $(foreach d,$(1),$(wildcard src/$(d)/*.c))
objs = $(patsubst src/%.c,$(BUILD)/obj/%.o,$(call srcs,$(1)))

DAEMON_OBJS := $(call objs,$(DAEMON_DIRS))
CLI_OBJS    := $(call objs,$(CLI_DIRS))
# Unit tests link every subsystem but the program mains.
LIB_OBJS    := $(filter-out $(BUILD)/obj/daemon/% $(BUILD)/obj/cli/%,$(DAEMON_OBJS))
UNIT_SRCS   := $(wildcard tests/unit/*.c)

all: $(BUILD)/runtimed $(BUILD)/runtime

$(BUILD)/obj/%.o: src/%.c $(wildcard src/*/*.h)
	@mkdir -p $(dir $@)
	@echo "  CC $<"
	@$(CC) $(CFLAGS) $(shell pkg-config --cflags $(PKGS_D) $(PKGS_C)) -c $< -o $@

$(BUILD)/runtimed: $(DAEMON_OBJS)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(shell pkg-config --libs $(PKGS_D)) -lm

$(BUILD)/runtime: $(CLI_OBJS)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(shell pkg-config --libs $(PKGS_C))

$(BUILD)/unit: $(UNIT_SRCS) $(LIB_OBJS)
	$(CC) $(CFLAGS) $(LDFLAGS) -Isrc -o $@ $^ $(shell pkg-config --libs $(PKGS_D)) -lm

# The sanitizer build is a second tree under $(BUILD)/asan.
asan:
	$(MAKE) BUILD=$(BUILD)/asan OPT="-O1 -g $(SAN)" LDFLAGS="$(SAN)" all $(BUILD)/asan/unit

unit: $(BUILD)/unit
	$(BUILD)/unit

# Everything: unit tests plain and under ASan+UBSan, then the end-to-end and
# escape suites against the real daemon (they need root).
check: all $(BUILD)/unit asan
	$(BUILD)/unit
	ASAN_OPTIONS=detect_leaks=1 $(BUILD)/asan/unit
	tests/run-e2e

format:
	clang-format -i src/*/*.c src/*/*.h tests/unit/*.c

clean:
	rm -rf $(BUILD)

.PHONY: all asan unit check format clean
