/*
 * obs.c — the 31-dim observation and the policy input layouts (docs/observation.md),
 * twin of the Python builder (brawlkit/env/observation.py).
 *
 * Same arithmetic, same order as the Python builder (docs/observation.md):
 * fields widened to double, +,-,*,/,sqrt and comparisons only,
 * explicit-comparison clipping, one (float) cast per value.  Build with
 * -ffp-contract=off and without -ffast-math (native/Makefile's BP_CFLAGS).
 * The posture comes from native/build/gen/commander_mod.c, generated from
 * parena/stdlib/brawlpit/commander_mod.prn.
 */
#include "obs.h"

#include <math.h>
#include <string.h>

#include "commander_mod.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "obs.c copies little-endian wire structs verbatim; add byte swaps for this host"
#endif

_Static_assert(PRN_POSTURE_COUNT == BP_POSTURE_COUNT, "commander_mod.prn posture count");
_Static_assert(BP_OBS_POSTURE_OFFSET + BP_POSTURE_COUNT == 21, "posture block is dims 16..20");
_Static_assert(PRN_POSTURE_NEUTRAL == 0 && PRN_POSTURE_AGGRESSIVE == 1 && PRN_POSTURE_PATIENT == 2 &&
                   PRN_POSTURE_EDGEGUARD == 3 && PRN_POSTURE_RECOVER == 4,
               "docs/observation.md one-hot order: neutral, aggressive, patient, edgeguard, recover");

#define D(x) ((double)(x))

static double clip(double v, double lo, double hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

/* time to the blast zone by linear extrapolation, normalised to (0, 1] */
static double time_to_blast(double x, double y, double vx, double vy)
{
    const double bx = D(BP_BLAST_X), bt = D(BP_BLAST_TOP), bb = D(BP_BLAST_BOTTOM);
    const double hor = D(BP_OBS_BLAST_HORIZON_TICKS);
    double t = hor, c;
    if (!(-bx < x && x < bx && bb < y && y < bt))
        return 0.0;
    if (vx > 0.0) {
        c = (bx - x) / vx;
        if (c < t)
            t = c;
    } else if (vx < 0.0) {
        c = (-bx - x) / vx;
        if (c < t)
            t = c;
    }
    if (vy > 0.0) {
        c = (bt - y) / vy;
        if (c < t)
            t = c;
    } else if (vy < 0.0) {
        c = (bb - y) / vy;
        if (c < t)
            t = c;
    }
    return t / hor;
}

static void player_block(const NetPlayer *p, float out[8])
{
    out[0] = (float)clip(D(p->x) / D(BP_OBS_POS_X_SCALE), -1.0, 1.0);
    out[1] = (float)clip(D(p->y) / D(BP_OBS_POS_Y_SCALE), -1.0, 1.0);
    out[2] = (float)clip(D(p->vx) / D(BP_OBS_VEL_SCALE), -1.0, 1.0);
    out[3] = (float)clip(D(p->vy) / D(BP_OBS_VEL_SCALE), -1.0, 1.0);
    out[4] = (float)clip(D(p->damage) / D(BP_OBS_DAMAGE_SCALE), 0.0, 1.0);
    out[5] = (float)clip(D(p->stocks) / D(BP_STOCKS), 0.0, 1.0);
    out[6] = (float)clip(D(p->shield) / D(BP_SHIELD_MAX), 0.0, 1.0);
    out[7] = p->facing < 0 ? -1.0f : 1.0f;
}

int bp_obs_posture(const NetPlayer *s, const NetPlayer *o, uint32_t ticks_left)
{
    return prn_commander_posture(D(s->x), D(s->y), D(s->vx), D(s->vy), D(s->damage),
                                 D(s->stocks), D(o->x), D(o->y), D(o->vx), D(o->vy),
                                 D(o->damage), D(o->stocks), D(ticks_left));
}

void bp_obs_build(const NetPlayer *s, const NetPlayer *o, uint32_t ticks_left,
                  float out[BP_OBS_DIM])
{
    player_block(s, out + 0);
    player_block(o, out + 8);

    const int posture = bp_obs_posture(s, o, ticks_left);
    for (int k = 0; k < BP_POSTURE_COUNT; k++)
        out[BP_OBS_POSTURE_OFFSET + k] = k == posture ? 1.0f : 0.0f;

    const double sx = D(s->x), sy = D(s->y), ox = D(o->x), oy = D(o->y);
    const double dx = ox - sx;
    const double dy = oy - sy;
    const double dvx = D(o->vx) - D(s->vx);
    const double dvy = D(o->vy) - D(s->vy);
    const double d = sqrt(dx * dx + dy * dy);
    out[21] = (float)clip(dx / D(BP_OBS_DIST_SCALE), -1.0, 1.0);
    out[22] = (float)clip(dy / D(BP_OBS_DIST_SCALE), -1.0, 1.0);
    out[23] = (float)clip(d / D(BP_OBS_DIST_SCALE), 0.0, 1.0);
    if (d == 0.0)
        out[24] = 0.0f;
    else
        out[24] = (float)clip((-(dvx * dx + dvy * dy) / d) / D(BP_OBS_CLOSING_SCALE), -1.0, 1.0);
    out[25] = (float)time_to_blast(sx, sy, D(s->vx), D(s->vy));
    out[26] = (float)time_to_blast(ox, oy, D(o->vx), D(o->vy));
    out[27] = (dx == 0.0 || (dx > 0.0) == (s->facing >= 0)) ? 1.0f : -1.0f;
    out[28] = (dx == 0.0 || (dx < 0.0) == (o->facing >= 0)) ? 1.0f : -1.0f;
    out[29] = (float)clip((D(s->damage) - D(o->damage)) / D(BP_OBS_DAMAGE_DIFF_SCALE), -1.0, 1.0);
    out[30] = (float)clip((D(s->stocks) - D(o->stocks)) / D(BP_STOCKS), -1.0, 1.0);
}

/* ---------------------------------------------------------------- policy input layouts */
_Static_assert(BP_INPUT_PREV_OFFSET == BP_OBS_DIM, "layout 2 starts with the observation");
_Static_assert(BP_INPUT_FLAGS_OFFSET == BP_INPUT_PREV_OFFSET + BP_ACT_DIM, "prev command: 6");
_Static_assert(BP_INPUT_JUMP_OFFSET == BP_INPUT_FLAGS_OFFSET + 6, "six flag bits");
_Static_assert(BP_INPUT_HITSTUN_OFFSET == BP_INPUT_JUMP_OFFSET + 1, "jump: 1");
_Static_assert(BP_INPUT_SELF_STATE_OFFSET == BP_INPUT_HITSTUN_OFFSET + 1, "hitstun: 1");
_Static_assert(BP_INPUT_OTHER_STATE_OFFSET == BP_INPUT_SELF_STATE_OFFSET + BP_AS_COUNT,
               "own action state one-hot");
_Static_assert(BP_INPUT_SELF_DIM == BP_INPUT_OTHER_STATE_OFFSET + BP_AS_COUNT,
               "other's action state one-hot ends layout 2");
_Static_assert(BP_INPUT_CLOCK_OFFSET == BP_INPUT_SELF_DIM && BP_INPUT_CLOCK_DIM == BP_INPUT_SELF_DIM + 1,
               "layout 3 is layout 2 and one clock value");
_Static_assert(BP_INPUT_MAX_DIM >= BP_INPUT_CLOCK_DIM && BP_INPUT_MAX_DIM >= BP_INPUT_SELF_DIM &&
                   BP_INPUT_MAX_DIM >= BP_OBS_DIM,
               "BP_INPUT_MAX_DIM holds every layout");

int bp_input_dim(int layout)
{
    switch (layout) {
    case BP_INPUT_LAYOUT_OBS: return BP_OBS_DIM;
    case BP_INPUT_LAYOUT_SELF: return BP_INPUT_SELF_DIM;
    case BP_INPUT_LAYOUT_CLOCK: return BP_INPUT_CLOCK_DIM;
    default: return 0;
    }
}

/* action_state one-hot; a value outside 0..BP_AS_COUNT-1 (never sent by the server)
 * gives all zeros, in both languages */
static void state_one_hot(uint8_t state, float out[BP_AS_COUNT])
{
    for (int k = 0; k < BP_AS_COUNT; k++)
        out[k] = k == (int)state ? 1.0f : 0.0f;
}

static void self_block(const NetPlayer *s, const NetPlayer *o, const BpCommand *prev, float *out)
{
    static const uint32_t buttons[4] = {BP_BTN_JUMP, BP_BTN_ATTACK, BP_BTN_SPECIAL, BP_BTN_SHIELD};
    static const uint8_t flags[6] = {BP_PLAYER_FLAG_ON_GROUND, BP_PLAYER_FLAG_SHIELDING,
                                     BP_PLAYER_FLAG_HITSTUN, BP_PLAYER_FLAG_ATTACKING,
                                     BP_PLAYER_FLAG_INVULNERABLE, BP_PLAYER_FLAG_OFFSTAGE};
    float *pv = out + BP_INPUT_PREV_OFFSET;
    pv[0] = (float)clip(D(prev->stick_x), -1.0, 1.0);
    pv[1] = (float)clip(D(prev->stick_y), -1.0, 1.0);
    for (int k = 0; k < 4; k++)
        pv[2 + k] = (prev->buttons & buttons[k]) ? 1.0f : -1.0f;
    for (int k = 0; k < 6; k++)
        out[BP_INPUT_FLAGS_OFFSET + k] = (s->flags & flags[k]) ? 1.0f : 0.0f;
    out[BP_INPUT_JUMP_OFFSET] = (float)clip(D(s->jumps_left), 0.0, 1.0);
    out[BP_INPUT_HITSTUN_OFFSET] =
        (float)clip(D(s->hitstun_ticks) / D(BP_INPUT_HITSTUN_SCALE), 0.0, 1.0);
    state_one_hot(s->action_state, out + BP_INPUT_SELF_STATE_OFFSET);
    state_one_hot(o->action_state, out + BP_INPUT_OTHER_STATE_OFFSET);
}

/* layouts 2 and 3 carry the self block, the only part that reads the previous command;
 * the one place C says which layouts need `prev` (Python: build_input_values) */
static int layout_reads_prev(int layout)
{
    return layout == BP_INPUT_LAYOUT_SELF || layout == BP_INPUT_LAYOUT_CLOCK;
}

void bp_input_build(const NetPlayer *s, const NetPlayer *o, uint32_t ticks_left, int layout,
                    const BpCommand *prev, float *out)
{
    bp_obs_build(s, o, ticks_left, out);
    if (layout_reads_prev(layout))
        self_block(s, o, prev, out);
    if (layout == BP_INPUT_LAYOUT_CLOCK)
        out[BP_INPUT_CLOCK_OFFSET] = (float)clip(D(ticks_left) / D(BP_MATCH_TICKS), 0.0, 1.0);
}

static int player_finite(const NetPlayer *p)
{
    return isfinite(p->x) && isfinite(p->y) && isfinite(p->vx) && isfinite(p->vy) &&
           isfinite(p->damage) && isfinite(p->shield);
}

int bp_obs_from_snapshot(const uint8_t *pkt, size_t len, int slot, float out[BP_OBS_DIM])
{
    return bp_input_from_snapshot(pkt, len, slot, BP_INPUT_LAYOUT_OBS, NULL, out);
}

int bp_input_from_snapshot(const uint8_t *pkt, size_t len, int slot, int layout,
                           const BpCommand *prev, float *out)
{
    SnapshotPacket snap;
    if (!pkt || !out)
        return BP_OBS_ERR_NULL;
    if (bp_input_dim(layout) == 0)
        return BP_OBS_ERR_LAYOUT;
    if (layout_reads_prev(layout)) {
        if (!prev)
            return BP_OBS_ERR_NULL;
        if (!isfinite(prev->stick_x) || !isfinite(prev->stick_y))
            return BP_OBS_ERR_NONFINITE;
    }
    if (len != sizeof(SnapshotPacket))
        return BP_OBS_ERR_LENGTH;
    memcpy(&snap, pkt, sizeof snap);
    if (snap.hdr.magic != BP_MAGIC)
        return BP_OBS_ERR_MAGIC;
    if (snap.hdr.version != BP_PROTO_VERSION)
        return BP_OBS_ERR_VERSION;
    if (snap.hdr.type != BP_PKT_SNAPSHOT)
        return BP_OBS_ERR_TYPE;
    if (slot != 0 && slot != 1)
        return BP_OBS_ERR_SLOT;
    NetPlayer self, other;
    memcpy(&self, &snap.players[slot], sizeof self);
    memcpy(&other, &snap.players[1 - slot], sizeof other);
    if (!player_finite(&self) || !player_finite(&other))
        return BP_OBS_ERR_NONFINITE;
    bp_input_build(&self, &other, snap.match.ticks_left, layout, prev, out);
    return BP_OBS_OK;
}

const char *bp_obs_strerror(int err)
{
    switch (err) {
    case BP_OBS_OK: return "ok";
    case BP_OBS_ERR_NULL: return "NULL argument";
    case BP_OBS_ERR_LENGTH: return "not a 92-byte SNAPSHOT";
    case BP_OBS_ERR_MAGIC: return "bad magic";
    case BP_OBS_ERR_VERSION: return "wrong protocol version";
    case BP_OBS_ERR_TYPE: return "not a SNAPSHOT packet";
    case BP_OBS_ERR_SLOT: return "slot must be 0 or 1";
    case BP_OBS_ERR_NONFINITE: return "non-finite float field";
    case BP_OBS_ERR_LAYOUT: return "unknown policy input layout";
    default: return "unknown error";
    }
}
