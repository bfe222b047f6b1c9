/*
 * cpu.h — BRAWLPIT's built-in CPU opponent, levels 1..8 (cpu.c).
 *
 * The CPU sees only what a client sees (NetPlayer of both fighters), with a
 * per-level reaction delay on its view of the opponent, and draws all its
 * randomness from its own seeded PRNG, so a CPU match is deterministic.
 */
#ifndef BRAWLPIT_CPU_H
#define BRAWLPIT_CPU_H

#include <stdint.h>

#include "sim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct BpCpu BpCpu;

BpCpu *bp_cpu_create(int level, uint32_t seed); /* NULL if level outside 1..8 */
void bp_cpu_destroy(BpCpu *c);
void bp_cpu_reset(BpCpu *c, uint32_t seed); /* forget history, reseed */
int bp_cpu_level(const BpCpu *c);
/* Decide this tick's input for `slot`; call once per tick, before stepping. */
BpInput bp_cpu_think(BpCpu *c, const BpSim *s, int slot);

/* The CPU seed the server uses for a match seeded `match_seed` (so an
 * in-process replay of a server match can build the identical CPU). */
uint32_t bp_cpu_match_seed(uint32_t match_seed);

/* slot 1 = cpu1 (slot 0 = *in0 every tick, neutral if NULL); steps up to
 * n_ticks, stops at match end; returns ticks stepped. */
int bp_sim_step_cpu(BpSim *s, const BpInput *in0, BpCpu *cpu1, int n_ticks);
/* A full match CPU(level0) in slot 0 vs CPU(level1) in slot 1; returns the
 * winner (0, 1 or BP_WINNER_DRAW).  Deterministic in (levels, seed). */
uint8_t bp_match_cpu_vs_cpu(int level0, int level1, uint32_t seed);
/* Same, also reporting final stocks/damage and ticks (any pointer may be NULL). */
uint8_t bp_match_cpu_vs_cpu_ex(int level0, int level1, uint32_t seed, uint32_t *ticks,
                               NetPlayer out_final[2]);

#ifdef __cplusplus
}
#endif

#endif /* BRAWLPIT_CPU_H */
