/*
 * cpu.c — the built-in heuristic CPU, levels 1..8.
 *
 * It plays from the same NetPlayer view a client gets.  Levels differ in
 *   - reaction delay: it sees the opponent as it was `delay` ticks ago,
 *   - decision cadence: it re-plans only every `period` ticks (in between it
 *     holds its stick and releases buttons),
 *   - aggression (chance to approach when out of range), spacing error,
 *     sloppiness (chance of a random/wrong decision), shield use, punishing,
 *     edgeguarding, and recovery quality (double jump + up-special timing).
 * All randomness comes from its own xorshift PRNG seeded at creation, so a CPU
 * match is a pure function of (levels, seeds, input stream).
 *
 * Reading the finisher: for every history frame it counts how long the
 * opponent had been in its side special (sb_age[]), and passes the delayed
 * count to the plan.  With the level's chance `read` it then shields the
 * startup inside its reach (held until the active window should be over, by
 * its own delay), jabs it out of the startup if close and fast enough, waits
 * outside instead of walking in, and once the active window is past dashes in
 * (if it can arrive before the 60-tick whiff ends) and jabs with ATTACK held,
 * so the sim buffers a follow-up jab.  The reaction delay still applies, so the
 * slow levels (read 0 at L1-L2, low at L3-L4) mostly cannot.
 *
 * The high-level choice (which plan this decision: recover, shield, edgeguard,
 * punish, hit, approach, ...) is not written here: it is prn_cpu_plan(),
 * compiled by the native build from parena/stdlib/brawlpit/cpu_mod.prn.  This
 * file keeps the level table, the reaction-delay buffer, the cadence, the PRNG
 * and the execution of each plan (stick vectors, hold times, recovery aiming).
 */
#include "cpu.h"

#include "cpu_mod.h" /* generated from parena/stdlib/brawlpit/cpu_mod.prn */

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ tuning
 * How the plans are carried out: stick pushes (fractions of full tilt), hold
 * times (ticks), distances (stage units).  The per-level numbers are LEVELS. */
#define HIST 64
#define EDGE BP_STAGE_HALF_WIDTH
#define WAIT_JITTER 2.0f        /* a decision waits cadence - 1 + [0, 2) ticks */
#define RESPAWN_DRIFT 0.3f      /* push while drifting off the respawn point */
#define LEDGE_JUMP_DRIFT 0.5f   /* push home while jumping from the ledge */
#define RECOVER_JUMP_HOLD 2     /* JUMP stays held after a recovery jump */
#define FUMBLE_UP_CHANCE 0.2f   /* a fumble pushes the stick up this often */
#define FUMBLE_SHIELD_HOLD 10   /* a fumbled shield stays up this long */
#define CENTER_DEAD_X 20.0f     /* drift to the centre only beyond this |x| */
#define CENTER_DRIFT 0.5f
#define SHIELD_HOLD_MIN 8       /* a shield is held SHIELD_HOLD_MIN + [0, SPREAD) ticks */
#define SHIELD_HOLD_SPREAD 10.0f
#define BLOCK_MARGIN 3          /* shield a finisher this long past its active window */
#define BLOCK_HOLD_MIN 4        /* and at least this long */
#define WHIFF_ATTACK_HOLD 20    /* ATTACK held after a whiff-punish jab (buffers the next) */
#define ANTI_AIR_JUMP_HOLD 4
#define EDGEGUARD_INSET 4.0f    /* the edgeguard stand point, inside the edge */
#define EDGEGUARD_SLACK 3.0f    /* close enough to the stand point */
#define EDGEGUARD_WALK 0.55f    /* push toward the stand point */
#define EDGEGUARD_FACE 0.25f    /* push that faces out without walking */
#define EDGEGUARD_PUSH 0.5f     /* push toward the edge with an edgeguard hit */
#define ATTACK_PUSH 0.4f        /* forward push with a jab or the finisher */
#define AIR_PUSH 0.5f           /* forward push with the anti-air jump and aerials */
#define BACK_OFF_PUSH 0.5f      /* push away from the opponent */
#define SHUFFLE_PUSH 0.4f
#define HOME_WALK 0.5f          /* push back from the edge */
#define APPROACH_RUN_DIST 40.0f /* approach at full tilt beyond this (or in the air) */
#define APPROACH_WALK 0.55f

typedef struct {
    int delay, period;
    float aggr, err, sloppy, shield, edgeguard, recover, punish, kill_pct, anti_air, read;
} Level;

/* index 0 = level 1 */
static const Level LEVELS[8] = {
    /* delay period aggr  err  sloppy shield edgeg recover punish kill anti_air read */
    {30, 12, 0.12f, 10.0f, 0.35f, 0.00f, 0.00f, 0.35f, 0.00f, 170.0f, 0.00f, 0.00f},
    {22, 9, 0.22f, 8.0f, 0.25f, 0.05f, 0.00f, 0.50f, 0.10f, 150.0f, 0.10f, 0.00f},
    {16, 7, 0.32f, 6.0f, 0.17f, 0.12f, 0.15f, 0.65f, 0.25f, 135.0f, 0.25f, 0.15f},
    {14, 6, 0.42f, 5.0f, 0.13f, 0.20f, 0.30f, 0.72f, 0.40f, 120.0f, 0.40f, 0.30f},
    {9, 4, 0.52f, 4.0f, 0.08f, 0.30f, 0.55f, 0.86f, 0.55f, 110.0f, 0.55f, 0.45f},
    {6, 3, 0.62f, 3.0f, 0.04f, 0.40f, 0.70f, 0.92f, 0.70f, 100.0f, 0.70f, 0.75f},
    {4, 2, 0.70f, 1.2f, 0.005f, 0.55f, 0.85f, 0.97f, 0.90f, 95.0f, 0.85f, 0.90f},
    {1, 1, 0.78f, 0.5f, 0.00f, 0.60f, 1.00f, 1.00f, 1.00f, 90.0f, 1.00f, 1.00f},
};

struct BpCpu {
    int level;
    Level p;
    uint32_t rng;
    NetPlayer hist[HIST][2];
    int sb_age[HIST];    /* per history frame: ticks the opponent had been in its side special, -1 none */
    uint32_t n, last_tick, match_id;
    int wait;            /* ticks until the next decision */
    BpInput hold;        /* stick held between decisions (buttons released) */
    uint32_t hold_btn;   /* buttons held between decisions (shield, full hop) */
    int hold_btn_ticks;  /* how long hold_btn stays held */
    int rec_good;        /* recovery quality rolled per offstage episode */
    int was_off;
    int upb_done;        /* we used up-special this airtime */
    int upb_steer;       /* ticks left holding the up-special aim */
    float upb_aim_x, upb_aim_y;
};

static uint32_t rng_next(uint32_t *st) { return bp_xorshift32(st); }
static float frand(BpCpu *c) { return (float)(rng_next(&c->rng) >> 8) * (1.0f / 16777216.0f); }
static float absf(float v) { return v < 0.0f ? -v : v; }
static float sgn(float v) { return v < 0.0f ? -1.0f : 1.0f; }

static uint32_t mix_seed(uint32_t seed, uint32_t salt) {
    uint32_t z = seed * 0x9E3779B9u + salt * 0x85EBCA6Bu + 0x632BE5ABu;
    z = (z ^ (z >> 16)) * 0x7FEB352Du;
    z = (z ^ (z >> 15)) * 0x846CA68Bu;
    z ^= z >> 16;
    return z ? z : 0x2545F491u;
}

uint32_t bp_cpu_match_seed(uint32_t match_seed) { return mix_seed(match_seed, 0xC0FFEEu); }

BpCpu *bp_cpu_create(int level, uint32_t seed) {
    if (level < BP_CPU_LEVEL_MIN || level > BP_CPU_LEVEL_MAX) return NULL;
    BpCpu *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->level = level;
    c->p = LEVELS[level - 1];
    bp_cpu_reset(c, seed);
    return c;
}

void bp_cpu_destroy(BpCpu *c) { free(c); }
int bp_cpu_level(const BpCpu *c) { return c ? c->level : 0; }

void bp_cpu_reset(BpCpu *c, uint32_t seed) {
    int level = c->level;
    Level p = c->p;
    memset(c, 0, sizeof *c);
    c->level = level;
    c->p = p;
    c->rng = mix_seed(seed, (uint32_t)level);
    c->last_tick = UINT32_MAX;
}

/* ------------------------------------------------------------ decisions */
static BpInput in_make(float sx, float sy, uint32_t b) {
    BpInput in = {sx, sy, b};
    return in;
}

static int is_dead(const NetPlayer *p) {
    return p->action_state == BP_AS_DEAD || p->action_state == BP_AS_RESPAWN;
}
/* Offstage recovery: drift home, double jump, then the up-special aimed at a
 * point just above the ledge corner (its travel is a fixed 61.6 units).
 * Below the stage block the way home is around its side: get outside the wall
 * first (an up-special into the block's underside only bonks its head). */
#define UPB_REACH 60.0f
static BpInput recover(BpCpu *c, const NetPlayer *me) {
    const float wall = EDGE + BP_FIGHTER_HALF_WIDTH;
    const float under = -BP_STAGE_DEPTH - BP_FIGHTER_HEIGHT; /* head touches the block */
    float s = sgn(me->x), toward = -s;
    float gxw = absf(me->x) - wall; /* gap to the wall, > 0 outside */
    float x = me->x, y = me->y;
    int good = c->rec_good;
    int below = y < under + 4.0f;
    if (me->action_state == BP_AS_HELPLESS || me->action_state == BP_AS_UPSPECIAL) {
        if (below && gxw < 3.0f) return in_make(s, 0.0f, 0);
        return in_make(toward, 0.0f, 0);
    }
    if (me->action_state != BP_AS_AIR) return in_make(toward, 0.0f, 0);
    float sx = toward;
    if (below && gxw < 4.0f && good) sx = s; /* get out from under the stage */
    if (!good && frand(c) < 0.3f) sx = 0.0f;  /* sloppy: forgets to drift */
    /* aim point: just above the ledge corner (or onto the stage if above it) */
    float tx = s * (EDGE + 1.0f), ty = 5.0f;
    if (y > 0.0f) tx = s * (EDGE - 12.0f), ty = y * 0.5f + 6.0f;
    float ax = tx - x, ay = ty - y;
    if (below && gxw < 2.0f) ax = 0.0f; /* straight up the wall */
    float dist2 = ax * ax + ay * ay;
    int in_reach = dist2 <= UPB_REACH * UPB_REACH;
    /* double jump: falling below the ledge line, or out of reach */
    if (me->jumps_left > 0 && me->vy < 0.0f) {
        float jump_below = good ? -6.0f : -30.0f - 30.0f * frand(c);
        if (y < jump_below || (good && !in_reach && y < 40.0f)) return in_make(sx, 0.0f, BP_BTN_JUMP);
    }
    if (!c->upb_done) {
        int use;
        if (good)
            use = in_reach && (me->jumps_left == 0 || y < -40.0f) && me->vy < 0.3f &&
                  (y < ty - 4.0f || absf(ax) > 30.0f);
        else
            use = (y < -20.0f && frand(c) < 0.2f) || y < -75.0f; /* early/late, any distance */
        if (use) {
            float ux = ax, uy = ay < 0.0f ? 0.0f : ay;
            if (!good) ux = toward * frand(c) * 60.0f, uy = 30.0f;
            float m = absf(ux) > absf(uy) ? absf(ux) : absf(uy);
            if (m < 1e-3f) ux = 0.0f, uy = 1.0f, m = 1.0f;
            c->upb_done = 1;
            c->upb_aim_x = ux / m;
            c->upb_aim_y = uy / m;
            c->upb_steer = 6; /* keep steering through the startup */
            return in_make(ux / m, 1.0f, BP_BTN_SPECIAL);
        }
    }
    return in_make(sx, 0.0f, 0);
}

/* ------------------------------------------------------------ the plan
 * Which plan to follow this decision is PARENA: prn_cpu_plan() is generated by
 * the build from parena/stdlib/brawlpit/cpu_mod.prn.  C only gathers its inputs
 * (our current state, the opponent as we saw it `delay` ticks ago, the level's
 * parameters, fresh rolls) and carries the chosen plan out (execute()). */
#define N_ROLLS 16
#define SB_END 18 /* the side special's startup + active (sim.c MOVES[MV_SIDE]) */

static int choose_plan(BpCpu *c, const NetPlayer *me, const NetPlayer *op, int op_sb_age) {
    const Level *L = &c->p;
    double r[N_ROLLS]; /* drawn in a fixed order: argument evaluation order is unspecified */
    for (int i = 0; i < N_ROLLS; i++) r[i] = (double)frand(c);
    return prn_cpu_plan(me->x, me->y, me->action_state, me->facing, me->shield,
                        (me->flags & BP_PLAYER_FLAG_ON_GROUND) != 0, (me->flags & BP_PLAYER_FLAG_OFFSTAGE) != 0,
                        op->x, op->y, op->action_state, op->damage, op->facing,
                        (op->flags & BP_PLAYER_FLAG_ATTACKING) != 0, (op->flags & BP_PLAYER_FLAG_SHIELDING) != 0,
                        (op->flags & BP_PLAYER_FLAG_INVULNERABLE) != 0, (op->flags & BP_PLAYER_FLAG_OFFSTAGE) != 0,
                        op_sb_age, L->aggr, L->err, L->sloppy, L->shield, L->edgeguard, L->punish, L->kill_pct,
                        L->anti_air, L->read, (double)L->delay, r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10],
                        r[11], r[12], r[13], r[14], r[15]);
}

/* Plans carried out as one stick push and one press (every plan execute()
 * does not treat itself): stick_x = push toward `toward`; buttons pressed; and
 * hold_btn held for hold_ticks when hold_ticks > 0.  Missing plans (the wait
 * plans, IDLE) are all zero: a neutral input. */
enum { TOWARD_NOTHING = 0, TOWARD_HOME, TOWARD_OPPONENT, TOWARD_OP_SIDE };
typedef struct {
    int toward;
    float push;
    uint32_t buttons, hold_btn;
    int hold_ticks;
} Press;

static const Press PRESSES[PRN_PLAN_COUNT] = {
    [PRN_PLAN_RESPAWN_DRIFT] = {TOWARD_HOME, RESPAWN_DRIFT, 0, 0, 0},
    [PRN_PLAN_LEDGE_CLIMB] = {TOWARD_HOME, 1.0f, 0, 0, 0},
    [PRN_PLAN_LEDGE_JUMP] = {TOWARD_HOME, LEDGE_JUMP_DRIFT, BP_BTN_JUMP, 0, 0},
    [PRN_PLAN_LEDGE_ATTACK] = {TOWARD_NOTHING, 0.0f, BP_BTN_ATTACK, 0, 0}, /* attack getup */
    /* jab, and keep ATTACK held: the sim buffers the follow-up jab */
    [PRN_PLAN_PUNISH_WHIFF] = {TOWARD_OPPONENT, ATTACK_PUSH, BP_BTN_ATTACK, BP_BTN_ATTACK, WHIFF_ATTACK_HOLD},
    [PRN_PLAN_EDGEGUARD_FINISHER] = {TOWARD_OP_SIDE, EDGEGUARD_PUSH, BP_BTN_SPECIAL, 0, 0},
    [PRN_PLAN_EDGEGUARD_HIT] = {TOWARD_OP_SIDE, EDGEGUARD_PUSH, BP_BTN_ATTACK, 0, 0},
    [PRN_PLAN_PUNISH_FINISHER] = {TOWARD_OPPONENT, ATTACK_PUSH, BP_BTN_SPECIAL, 0, 0},
    [PRN_PLAN_SHIELD_PRESSURE] = {TOWARD_OPPONENT, ATTACK_PUSH, BP_BTN_SPECIAL, 0, 0},
    [PRN_PLAN_FINISHER] = {TOWARD_OPPONENT, ATTACK_PUSH, BP_BTN_SPECIAL, 0, 0},
    [PRN_PLAN_POKE_FINISHER] = {TOWARD_OPPONENT, ATTACK_PUSH, BP_BTN_SPECIAL, 0, 0},
    [PRN_PLAN_PUNISH_HIT] = {TOWARD_OPPONENT, ATTACK_PUSH, BP_BTN_ATTACK, 0, 0},
    [PRN_PLAN_HIT] = {TOWARD_OPPONENT, ATTACK_PUSH, BP_BTN_ATTACK, 0, 0},
    [PRN_PLAN_PUNISH_APPROACH] = {TOWARD_OPPONENT, 1.0f, 0, 0, 0},
    [PRN_PLAN_TURN_FROM_EDGE] = {TOWARD_OPPONENT, 1.0f, 0, 0, 0},
    [PRN_PLAN_BACK_OFF] = {TOWARD_OPPONENT, -BACK_OFF_PUSH, 0, 0, 0},
    [PRN_PLAN_ANTI_AIR] = {TOWARD_OPPONENT, AIR_PUSH, BP_BTN_JUMP, BP_BTN_JUMP, ANTI_AIR_JUMP_HOLD},
    [PRN_PLAN_AIR_ATTACK] = {TOWARD_OPPONENT, AIR_PUSH, BP_BTN_ATTACK, 0, 0},
    [PRN_PLAN_BACK_FROM_EDGE] = {TOWARD_HOME, HOME_WALK, 0, 0, 0},
    [PRN_PLAN_SHUFFLE] = {TOWARD_OPPONENT, -SHUFFLE_PUSH, 0, 0, 0},
};

/* the unit direction (-1 or +1; 0 for TOWARD_NOTHING) of a Press */
static float toward(int which, const NetPlayer *me, const NetPlayer *op) {
    switch (which) {
    case TOWARD_HOME: return -sgn(me->x);
    case TOWARD_OPPONENT: return sgn(op->x - me->x);
    case TOWARD_OP_SIDE: return sgn(op->x); /* the side the opponent is on (off) */
    default: return 0.0f;
    }
}

static BpInput exec_press(int plan, const NetPlayer *me, const NetPlayer *op, uint32_t *hold_btn,
                          int *hold_ticks) {
    if (plan < 0 || plan >= PRN_PLAN_COUNT) return in_make(0, 0, 0);
    const Press *p = &PRESSES[plan];
    if (p->hold_ticks > 0) *hold_btn = p->hold_btn, *hold_ticks = p->hold_ticks;
    return in_make(toward(p->toward, me, op) * p->push, 0, p->buttons);
}

static BpInput exec_recover(BpCpu *c, const NetPlayer *me, uint32_t *hold_btn, int *hold_ticks) {
    BpInput out = recover(c, me);
    if (out.buttons & BP_BTN_JUMP) *hold_btn = BP_BTN_JUMP, *hold_ticks = RECOVER_JUMP_HOLD;
    return out;
}

/* a random stick and button */
static BpInput exec_fumble(BpCpu *c, uint32_t *hold_btn, int *hold_ticks) {
    static const uint32_t rb[6] = {0, 0, BP_BTN_ATTACK, BP_BTN_JUMP, BP_BTN_SPECIAL, BP_BTN_SHIELD};
    float sx = frand(c) * 2.0f - 1.0f;
    float sy = frand(c) < FUMBLE_UP_CHANCE ? 1.0f : 0.0f;
    uint32_t b = rb[rng_next(&c->rng) % (uint32_t)(sizeof rb / sizeof rb[0])];
    if (b == BP_BTN_SHIELD) *hold_btn = BP_BTN_SHIELD, *hold_ticks = FUMBLE_SHIELD_HOLD;
    return in_make(sx, sy, b);
}

static BpInput exec_shield(BpCpu *c, uint32_t *hold_btn, int *hold_ticks) {
    *hold_btn = BP_BTN_SHIELD;
    *hold_ticks = SHIELD_HOLD_MIN + (int)(frand(c) * SHIELD_HOLD_SPREAD);
    return in_make(0, 0, BP_BTN_SHIELD);
}

/* shield until the finisher's active window (as we estimate it) is over */
static BpInput exec_block_finisher(const BpCpu *c, int op_sb_age, uint32_t *hold_btn, int *hold_ticks) {
    int left = SB_END + BLOCK_MARGIN - (op_sb_age + c->p.delay);
    *hold_btn = BP_BTN_SHIELD;
    *hold_ticks = left < BLOCK_HOLD_MIN ? BLOCK_HOLD_MIN : left;
    return in_make(0, 0, BP_BTN_SHIELD);
}

static BpInput exec_drift_center(const NetPlayer *me) {
    if (absf(me->x) > CENTER_DEAD_X) return in_make(-sgn(me->x) * CENTER_DRIFT, 0, 0);
    return in_make(0, 0, 0);
}

static BpInput exec_edgeguard_position(const NetPlayer *me, const NetPlayer *op) {
    float side = sgn(op->x);
    float stand = side * (EDGE - EDGEGUARD_INSET);
    if (absf(me->x - stand) > EDGEGUARD_SLACK) return in_make(sgn(stand - me->x) * EDGEGUARD_WALK, 0, 0);
    return in_make(side * EDGEGUARD_FACE, 0, 0); /* face out, stay */
}

static BpInput exec_approach(const NetPlayer *me, const NetPlayer *op) {
    float dx = op->x - me->x;
    float face = sgn(dx);
    int me_ground = (me->flags & BP_PLAYER_FLAG_ON_GROUND) != 0;
    return in_make(!me_ground || absf(dx) > APPROACH_RUN_DIST ? face : face * APPROACH_WALK, 0, 0);
}

/* A plan's stick and buttons; buttons to keep held go to *hold_btn for *hold_ticks. */
static BpInput execute(BpCpu *c, int plan, const NetPlayer *me, const NetPlayer *op, int op_sb_age,
                       uint32_t *hold_btn, int *hold_ticks) {
    switch (plan) {
    case PRN_PLAN_RECOVER: return exec_recover(c, me, hold_btn, hold_ticks);
    case PRN_PLAN_FUMBLE: return exec_fumble(c, hold_btn, hold_ticks);
    case PRN_PLAN_DRIFT_CENTER: return exec_drift_center(me);
    case PRN_PLAN_SHIELD: return exec_shield(c, hold_btn, hold_ticks);
    case PRN_PLAN_BLOCK_FINISHER: return exec_block_finisher(c, op_sb_age, hold_btn, hold_ticks);
    case PRN_PLAN_EDGEGUARD_POSITION: return exec_edgeguard_position(me, op);
    case PRN_PLAN_APPROACH: return exec_approach(me, op);
    default: return exec_press(plan, me, op, hold_btn, hold_ticks);
    }
}

/* A new match (or a jump in time): forget the past. */
static void sync_match(BpCpu *c, const BpSim *s) {
    uint32_t t = bp_sim_tick(s);
    uint32_t mid = bp_sim_match_id(s);
    if (c->last_tick == UINT32_MAX || t < c->last_tick || mid != c->match_id || t > c->last_tick + 1) {
        c->n = 0;
        c->wait = 0;
        c->hold_btn_ticks = 0;
        c->upb_done = 0;
        c->upb_steer = 0;
        c->was_off = 0;
    }
    c->last_tick = t;
    c->match_id = mid;
}

/* this tick's view into the history, with the opponent's side-special age */
static void record(BpCpu *c, const NetPlayer now[2], int slot) {
    memcpy(c->hist[c->n % HIST], now, sizeof c->hist[0]);
    int prev = c->n > 0 ? c->sb_age[(c->n - 1) % HIST] : -1;
    c->sb_age[c->n % HIST] = now[1 - slot].action_state == BP_AS_SPECIAL ? prev + 1 : -1;
    c->n++;
}

/* history index of the opponent as we see it: `delay` ticks ago (or the oldest we have) */
static uint32_t delayed(const BpCpu *c) {
    uint32_t d = (uint32_t)c->p.delay;
    if (d >= c->n) d = c->n - 1;
    return (c->n - 1 - d) % HIST;
}

/* Bookkeeping on our own (current) state; 1 while we are offstage. */
static int track_self(BpCpu *c, const NetPlayer *me) {
    int off = (me->flags & BP_PLAYER_FLAG_OFFSTAGE) && !(me->flags & BP_PLAYER_FLAG_ON_GROUND) && !is_dead(me);
    if ((me->flags & BP_PLAYER_FLAG_ON_GROUND) || me->action_state == BP_AS_LEDGE ||
        me->action_state == BP_AS_HITSTUN || is_dead(me))
        c->upb_done = 0;
    if (off && !c->was_off) c->rec_good = frand(c) < c->p.recover;
    c->was_off = off;
    return off;
}

/* A decision: choose a plan, carry it out, keep its stick (and held buttons)
 * until the next one. */
static BpInput decide(BpCpu *c, const NetPlayer *me, const NetPlayer *op, int op_sb_age) {
    uint32_t hold_btn = 0;
    int hold_ticks = 0;
    BpInput out = execute(c, choose_plan(c, me, op, op_sb_age), me, op, op_sb_age, &hold_btn, &hold_ticks);
    if (hold_ticks > 0) {
        c->hold_btn = hold_btn;
        c->hold_btn_ticks = hold_ticks;
        if (c->wait < hold_ticks) c->wait = hold_ticks;
    } else {
        c->hold_btn_ticks = 0;
    }
    c->hold = out;
    c->hold.buttons = 0;
    return out;
}

BpInput bp_cpu_think(BpCpu *c, const BpSim *s, int slot) {
    BpInput out = {0.0f, 0.0f, 0u};
    if (!c || !s || slot < 0 || slot > 1) return out;
    sync_match(c, s);
    NetPlayer now[2];
    bp_sim_players(s, now);
    record(c, now, slot);
    uint32_t k = delayed(c);
    const NetPlayer *me = &now[slot];
    const NetPlayer *op = &c->hist[k][1 - slot];
    int op_sb_age = c->sb_age[k];
    int off = track_self(c, me);

    if (c->upb_steer > 0) { /* the up-special reads its angle at the end of startup */
        c->upb_steer--;
        c->wait = 0;
        return in_make(c->upb_aim_x, c->upb_aim_y, 0);
    }
    uint32_t held = 0;
    if (c->hold_btn_ticks > 0) {
        c->hold_btn_ticks--;
        held = c->hold_btn;
    }
    if (c->wait > 0) { /* between decisions: hold the stick */
        c->wait--;
        out = c->hold;
        out.buttons = held;
        return out;
    }
    /* offstage: recovery is urgent, decide at a faster cadence */
    int cadence = off ? (c->p.period + 1) / 2 : c->p.period;
    c->wait = cadence - 1 + (int)(frand(c) * WAIT_JITTER);
    return decide(c, me, op, op_sb_age);
}

/* ------------------------------------------------------------ helpers */
int bp_sim_step_cpu(BpSim *s, const BpInput *in0, BpCpu *cpu1, int n_ticks) {
    int n = 0;
    while (n < n_ticks && bp_sim_phase(s) == BP_PHASE_PLAYING) {
        BpInput in[2];
        in[0] = in0 ? *in0 : (BpInput){0.0f, 0.0f, 0u};
        in[1] = cpu1 ? bp_cpu_think(cpu1, s, 1) : (BpInput){0.0f, 0.0f, 0u};
        bp_sim_step(s, in);
        n++;
    }
    return n;
}

uint8_t bp_match_cpu_vs_cpu_ex(int level0, int level1, uint32_t seed, uint32_t *ticks, NetPlayer out_final[2]) {
    BpSim *s = bp_sim_create();
    BpCpu *a = bp_cpu_create(level0, mix_seed(seed, 101u));
    BpCpu *b = bp_cpu_create(level1, mix_seed(seed, 202u));
    uint8_t w = BP_WINNER_NONE;
    if (s && a && b) {
        bp_sim_reset(s, seed, 1);
        while (bp_sim_phase(s) == BP_PHASE_PLAYING) {
            BpInput in[2];
            in[0] = bp_cpu_think(a, s, 0);
            in[1] = bp_cpu_think(b, s, 1);
            bp_sim_step(s, in);
        }
        w = bp_sim_winner(s);
        if (ticks) *ticks = bp_sim_tick(s);
        if (out_final) bp_sim_players(s, out_final);
    }
    bp_cpu_destroy(a);
    bp_cpu_destroy(b);
    bp_sim_destroy(s);
    return w;
}

uint8_t bp_match_cpu_vs_cpu(int level0, int level1, uint32_t seed) {
    return bp_match_cpu_vs_cpu_ex(level0, level1, seed, NULL, NULL);
}
