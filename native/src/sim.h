/*
 * sim.h — BRAWLPIT deterministic simulation (sim.c).
 *
 * Same seed + same input stream => bit-identical state and snapshot bytes,
 * whichever process runs it (server, libbrawlpit.so, tools).  No wall clock,
 * no rand(), no uninitialised memory: the only randomness is the sim's own
 * PRNG, seeded by bp_sim_reset.  Exported from libbrawlpit.so for ctypes.
 */
#ifndef BRAWLPIT_SIM_H
#define BRAWLPIT_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "brawlpit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One tick of one player's controller: sticks in [-1, 1] (clamped by the
 * sim; NaN counts as 0), buttons = BP_BTN_* bits. */
typedef struct {
    float stick_x, stick_y;
    uint32_t buttons;
} BpInput;

/* xorshift32: the one PRNG of the simulation and the CPU (deterministic,
 * seeded per match; a zero state must never be passed). */
static inline uint32_t bp_xorshift32(uint32_t *st) {
    uint32_t x = *st;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *st = x;
    return x;
}

typedef struct BpSim BpSim; /* opaque */

BpSim *bp_sim_create(void); /* already reset with seed 0, match_id 0 */
void bp_sim_destroy(BpSim *s);
void bp_sim_reset(BpSim *s, uint32_t seed, uint32_t match_id);
void bp_sim_step(BpSim *s, const BpInput in[2]); /* one tick; no-op once over */
uint32_t bp_sim_tick(const BpSim *s);            /* ticks simulated since reset */
uint32_t bp_sim_ticks_left(const BpSim *s);
uint8_t bp_sim_phase(const BpSim *s); /* BP_PHASE_PLAYING or BP_PHASE_OVER */
uint8_t bp_sim_winner(const BpSim *s); /* 0, 1, BP_WINNER_DRAW, BP_WINNER_NONE */
uint32_t bp_sim_match_id(const BpSim *s);
void bp_sim_players(const BpSim *s, NetPlayer out[2]);

/* Full 92-byte SNAPSHOT packet (header, MatchState, both players); returns
 * bytes written, or 0 if cap < sizeof(SnapshotPacket). */
size_t bp_sim_snapshot(const BpSim *s, uint32_t seq, uint8_t n_players, uint8_t mode,
                       uint32_t ack_cmd_seq, uint8_t *buf, size_t cap);

/* Exact copy of the whole state (for search / rollback / tests). */
void bp_sim_copy(BpSim *dst, const BpSim *src);
/* FNV-1a hash over the full internal state: equal hashes <=> (practically)
 * bit-identical states.  Used by the replay-determinism tests. */
uint64_t bp_sim_state_hash(const BpSim *s);

/* Sanitise an input: NaN -> 0, clamp sticks to [-1, 1], mask buttons. */
BpInput bp_input_sanitize(BpInput in);

#ifdef __cplusplus
}
#endif

#endif /* BRAWLPIT_SIM_H */
