# native/obs.mk — the C observation builder, its PARENA-generated posture, the
# parity tool and check.  Included by native/Makefile (`include obs.mk`,
# `check: check-obs`); standalone: make -C native -f obs.mk [check-obs].
#
# Everything here computes floats that must match brawlkit/observation.py bit for
# bit: -ffp-contract=off (no FMA contraction), no -ffast-math.

OBS_MK_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
OBS_ROOT := $(abspath $(OBS_MK_DIR)/..)
PYTHON ?= $(if $(wildcard $(OBS_ROOT)/.venv/bin/python),$(OBS_ROOT)/.venv/bin/python,python3)
CC ?= cc
OBS_BUILD := $(OBS_MK_DIR)/build
OBS_GEN := $(OBS_BUILD)/gen
OBS_CFLAGS := -std=c11 -O2 -Wall -Wextra -Werror -ffp-contract=off \
              -I$(OBS_MK_DIR)/include -I$(OBS_MK_DIR)/src -I$(OBS_GEN)
PARENA_STDLIB := $(OBS_ROOT)/parena/stdlib/brawlpit
PARENA_SRC := $(wildcard $(OBS_ROOT)/brawlkit/parena/*.py)
OBS_HEADER := $(OBS_MK_DIR)/include/brawlpit.h
PARITY_STATES ?= 12000

# Objects other targets (bot, server) link for the observation: obs.o + posture.
OBS_OBJS := $(OBS_BUILD)/obs.o $(OBS_BUILD)/commander_mod.o

# every PARENA stdlib module, generated and compile-checked (cpu_mod's C is
# linked into the server, libbrawlpit.so, cputable and test_sim by native/Makefile)
PARENA_MODS := $(basename $(notdir $(wildcard $(PARENA_STDLIB)/*.prn)))
PARENA_GEN_OBJS := $(PARENA_MODS:%=$(OBS_BUILD)/prn_%.o)

.PHONY: obs check-obs obs-clean parena-gen

obs: $(OBS_BUILD)/brawlpit_obs

parena-gen: $(PARENA_GEN_OBJS)

$(OBS_BUILD)/prn_%.o: $(OBS_GEN)/%.c $(OBS_GEN)/%.h
	$(CC) $(OBS_CFLAGS) -c $< -o $@

# generated sources are kept (not make intermediates)
.PRECIOUS: $(OBS_GEN)/%.c $(OBS_GEN)/%.h

# PARENA -> C, from the repo root so `brawlkit` imports with a bare python3
$(OBS_GEN)/%.c $(OBS_GEN)/%.h: $(PARENA_STDLIB)/%.prn $(PARENA_SRC) $(OBS_HEADER)
	@mkdir -p $(OBS_GEN)
	cd $(OBS_ROOT) && $(PYTHON) -m brawlkit.parena compile $(PARENA_STDLIB)/$*.prn --emit c \
	  --header $(abspath $(OBS_HEADER)) -o $(abspath $(OBS_GEN))/$*

$(OBS_BUILD)/commander_mod.o: $(OBS_GEN)/commander_mod.c $(OBS_GEN)/commander_mod.h
	$(CC) $(OBS_CFLAGS) -c $< -o $@

$(OBS_BUILD)/obs.o: $(OBS_MK_DIR)/src/obs.c $(OBS_MK_DIR)/src/obs.h $(OBS_HEADER) \
                    $(OBS_GEN)/commander_mod.h
	@mkdir -p $(OBS_BUILD)
	$(CC) $(OBS_CFLAGS) -c $< -o $@

$(OBS_BUILD)/obs_tool.o: $(OBS_MK_DIR)/src/obs_tool.c $(OBS_MK_DIR)/src/obs.h $(OBS_HEADER)
	@mkdir -p $(OBS_BUILD)
	$(CC) $(OBS_CFLAGS) -c $< -o $@

$(OBS_BUILD)/brawlpit_obs: $(OBS_BUILD)/obs_tool.o $(OBS_OBJS)
	$(CC) $(OBS_CFLAGS) $^ -o $@ -lm

# permanent parity check: C vs Python builder over $(PARITY_STATES) states
check-obs: $(OBS_BUILD)/brawlpit_obs
	cd $(OBS_ROOT) && $(PYTHON) -m brawlkit.parity --states $(PARITY_STATES) \
	  --obs-bin $(abspath $(OBS_BUILD))/brawlpit_obs

obs-clean:
	rm -rf $(OBS_GEN) $(OBS_OBJS) $(PARENA_GEN_OBJS) $(OBS_BUILD)/obs_tool.o $(OBS_BUILD)/brawlpit_obs
