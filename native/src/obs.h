/*
 * obs.h — the 31-dim observation and the policy input layouts (docs/observation.md),
 * C twin of the Python builder (brawlkit/env/observation.py).
 *
 * The exact arithmetic (operation order, clipping, tie rules) is written down
 * in docs/observation.md; obs.c follows it line by line and the parity check
 * (make -C native check-obs: python -m brawlkit parity) holds it and the
 * Python builder to 1e-6 (in practice bit-identical) over 10,000+ states.
 */
#ifndef BRAWLPIT_OBS_H
#define BRAWLPIT_OBS_H

#include <stddef.h>
#include <stdint.h>

#include "brawlpit.h"

/* error codes of bp_obs_from_snapshot (0 = ok) */
#define BP_OBS_OK 0
#define BP_OBS_ERR_NULL (-1)      /* NULL packet or output */
#define BP_OBS_ERR_LENGTH (-2)    /* not exactly sizeof(SnapshotPacket) bytes */
#define BP_OBS_ERR_MAGIC (-3)
#define BP_OBS_ERR_VERSION (-4)
#define BP_OBS_ERR_TYPE (-5)      /* not a SNAPSHOT */
#define BP_OBS_ERR_SLOT (-6)      /* slot not 0 or 1 */
#define BP_OBS_ERR_NONFINITE (-7) /* a NaN/inf float field (Python rejects it too) */
#define BP_OBS_ERR_LAYOUT (-8)    /* a policy input layout this build does not know */

/* Build the observation of `slot` from a raw SNAPSHOT datagram (wire bytes,
 * any alignment).  Returns BP_OBS_OK or a negative BP_OBS_ERR_*; on error
 * `out` is left untouched. */
int bp_obs_from_snapshot(const uint8_t *pkt, size_t len, int slot, float out[BP_OBS_DIM]);

/* Build the observation from already-decoded players and the match clock. */
void bp_obs_build(const NetPlayer *self, const NetPlayer *other, uint32_t ticks_left,
                  float out[BP_OBS_DIM]);

/* commander_posture index (0 neutral .. 4 recover), from the PARENA stdlib. */
int bp_obs_posture(const NetPlayer *self, const NetPlayer *other, uint32_t ticks_left);

/* The command a player sent last step, as the wire carries it (what input layouts 2 and 3
 * feed back to the policy).  A match starts with the neutral command {0, 0, 0}. */
typedef struct {
    float stick_x;
    float stick_y;
    uint32_t buttons;
} BpCommand;

/* Input size of policy input `layout` (docs/observation.md "Policy input layouts"):
 * BP_OBS_DIM for BP_INPUT_LAYOUT_OBS, BP_INPUT_SELF_DIM for BP_INPUT_LAYOUT_SELF,
 * BP_INPUT_CLOCK_DIM for BP_INPUT_LAYOUT_CLOCK; 0 for a layout this build does not know. */
int bp_input_dim(int layout);

/* Build the policy input of `layout` for `slot` from a raw SNAPSHOT datagram and the
 * command this player sent last step (`prev`; unused by layout 1, may then be NULL).
 * `out` holds bp_input_dim(layout) floats.  Returns BP_OBS_OK or a negative
 * BP_OBS_ERR_* (BP_OBS_ERR_LAYOUT for an unknown layout, BP_OBS_ERR_NONFINITE for a
 * non-finite previous stick); on error `out` is left untouched. */
int bp_input_from_snapshot(const uint8_t *pkt, size_t len, int slot, int layout,
                           const BpCommand *prev, float *out);

/* The same from already-decoded players (layout must be known; prev finite). */
void bp_input_build(const NetPlayer *self, const NetPlayer *other, uint32_t ticks_left,
                    int layout, const BpCommand *prev, float *out);

/* human-readable text of an error code */
const char *bp_obs_strerror(int err);

#endif /* BRAWLPIT_OBS_H */
