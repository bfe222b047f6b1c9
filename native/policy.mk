# policy.mk — native policy blob loader/forward (policy.c), its CLI, the ASan
# fuzz build, the C tests and the native bot.  Included by native/Makefile
# (`include policy.mk`); also usable alone: make -C native -f policy.mk <target>.
# Variables are prefixed BPW_ so they never clash with the including Makefile.

BPW_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
BPW_CC ?= cc
BPW_CFLAGS ?= -std=c11 -O2 -Wall -Wextra -Werror -ffp-contract=off -Iinclude -Isrc
BPW_ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all -g
BPW_LIBS := -llz4 -lm
BPW_DEPS := src/policy.c src/policy.h

.PHONY: policy check-policy policy-asan bot

policy: build/brawlpit_policy build/libbpwpolicy.so

build/brawlpit_policy: src/policy_tool.c $(BPW_DEPS)
	@mkdir -p build
	$(BPW_CC) $(BPW_CFLAGS) -o $@ src/policy_tool.c src/policy.c $(BPW_LIBS)

build/libbpwpolicy.so: $(BPW_DEPS)
	@mkdir -p build
	$(BPW_CC) $(BPW_CFLAGS) -fPIC -shared -o $@ src/policy.c $(BPW_LIBS)

policy-asan: build/asan/brawlpit_policy

build/asan/brawlpit_policy: src/policy_tool.c $(BPW_DEPS)
	@mkdir -p build/asan
	$(BPW_CC) $(BPW_CFLAGS) -O1 $(BPW_ASAN_FLAGS) -o $@ src/policy_tool.c src/policy.c $(BPW_LIBS)

build/test_policy: tests/test_policy.c $(BPW_DEPS)
	@mkdir -p build
	$(BPW_CC) $(BPW_CFLAGS) -o $@ tests/test_policy.c src/policy.c $(BPW_LIBS)

build/asan/test_policy: tests/test_policy.c $(BPW_DEPS)
	@mkdir -p build/asan
	$(BPW_CC) $(BPW_CFLAGS) -O1 $(BPW_ASAN_FLAGS) -o $@ tests/test_policy.c src/policy.c $(BPW_LIBS)

check-policy: build/test_policy build/asan/test_policy build/brawlpit_policy build/asan/brawlpit_policy
	./build/test_policy
	./build/asan/test_policy

# ---- the native bot: needs the observation objects of obs.mk (OBS_OBJS).
# native/Makefile must include obs.mk before policy.mk; standalone use pulls it in.
ifndef OBS_OBJS
include $(BPW_DIR)/obs.mk
endif

bot: build/brawlpit_bot

build/brawlpit_bot: src/bot.c $(BPW_DEPS) src/obs.h include/brawlpit.h $(OBS_OBJS)
	@mkdir -p build
	$(BPW_CC) $(BPW_CFLAGS) -o $@ src/bot.c src/policy.c $(OBS_OBJS) $(BPW_LIBS)
