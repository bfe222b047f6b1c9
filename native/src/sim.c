/*
 * sim.c — BRAWLPIT: the deterministic two-fighter simulation.
 *
 * Coordinates: stage units, y up; a fighter's (x, y) is the bottom centre of
 * its body (BP_FIGHTER_HALF_WIDTH x BP_FIGHTER_HEIGHT).  The stage is a solid
 * block, top y = 0, |x| <= BP_STAGE_HALF_WIDTH, down to y = -BP_STAGE_DEPTH;
 * its sides are walls.  Velocities are units per tick (60 ticks/s).
 *
 * A fighter's velocity is split Melee-style into its own velocity (vx, vy:
 * walking, jumping, drift, gravity) and a knockback velocity (kvx, kvy) that
 * decays by G_KB_DECAY per tick along its launch direction; the position moves
 * by their sum, and NetPlayer reports the sum.
 *
 * Knockback (Melee): kb = ((((p/10 + p*d/20) * 200/(w+100) * 1.4) + 18)
 *                          * growth/100) + base
 * with p the victim's percent after the hit, d the move's damage and w the
 * weight; hitstun = floor(0.4 * kb) ticks; launch speed = 0.03 * kb.
 * Roughly: the jab never kills from mid-stage; the side special (the
 * finisher) kills from near the ledge at ~110-120% and from mid-stage later.
 *
 * Recovery budget: double jump (~26 units up) plus the up-special (61.6
 * units in a direction chosen with the stick at the end of its 5-tick
 * startup, any angle in the upper half plane), then helpless until landing or
 * ledge snap.  Air drift (1.0/tick) is slow against falling (2.0/tick), so
 * from much below y = -95, or far out and low, a fighter is lost.  Under the
 * stage block the way home is around the wall: an up-special into the block's
 * underside only bonks.
 *
 * Buttons JUMP/ATTACK/SPECIAL fire on a press, and again every
 * G_BTN_REPEAT ticks while held (a held button is buffered until the fighter
 * can act).  SHIELD is level-triggered (held = shield up).
 *
 * The side special (the finisher) is punishable: it is press-only (a held
 * SPECIAL that started one never auto-repeats into another; it may still
 * repeat into an up-special), and a whiff — its active window touched no
 * fighter, neither body nor shield — adds G_SIDE_WHIFF_LAG (18) ticks of
 * recovery: 14 + 4 + 24 = 42 ticks on hit/shield, 60 on a whiff; an aerial
 * whiff that lands takes G_SIDE_WHIFF_LAND_LAG (18) landing lag instead of
 * G_AERIAL_LAG.  Jab, aerial and up-special timings are unchanged.
 *
 * Determinism: only float arithmetic on plain IEEE binary32 (no libm calls,
 * build with -ffp-contract=off, never -ffast-math), a private xorshift PRNG
 * seeded by bp_sim_reset, and a zero-initialised state with no padding.
 */
#include "sim.h"

#include <stdlib.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "BRAWLPIT wire structs are little-endian; add byte swapping for this target"
#endif

/* ------------------------------------------------------------ tuning */
#define G_GRAVITY 0.10f
#define G_SPECIAL_GRAVITY 0.5f /* gravity factor during a side special (a floaty lunge) */
#define G_MAX_FALL 2.0f
#define G_FAST_FALL 2.8f
#define G_WALK_MAX 1.5f
#define G_RUN_STICK 0.6f /* |stick_x| >= this runs (and may run off the edge) */
#define G_GROUND_ACCEL 0.25f
#define G_FRICTION 0.12f
#define G_JUMPSQUAT 3
#define G_JUMP_V 2.5f
#define G_HOP_V 1.7f
#define G_DJUMP_V 2.3f
#define G_AIR_MAX 1.0f
#define G_AIR_ACCEL 0.07f
#define G_AIR_FRICTION 0.02f
#define G_HELPLESS_AIR_MAX 0.7f
#define G_HELPLESS_AIR_ACCEL 0.04f
#define G_DEADZONE 0.15f
#define G_BTN_REPEAT 12

#define G_KB_DECAY 0.051f
#define G_KB_SPEED 0.03f
#define G_HITSTUN_MULT 0.4f
#define G_GROUNDED_LAUNCH_VY 1.0f /* weaker vertical launches keep a grounded victim grounded */

#define G_UPB_STARTUP 5
#define G_UPB_TRAVEL 22
#define G_UPB_SPEED 2.8f /* 22 ticks x 2.8 = 61.6 units in the chosen direction */
#define G_HELPLESS_LAG 10
#define G_AERIAL_LAG 6
#define G_SHIELD_DROP_LAG 6
#define G_SIDE_WHIFF_LAG 18     /* extra recovery of a side special that touched nobody */
#define G_SIDE_WHIFF_LAND_LAG 18 /* landing lag of a whiffed aerial side special */

#define G_SHIELD_DRAIN 0.20f
#define G_SHIELD_REGEN 0.08f
#define G_SHIELD_DMG_MULT 1.5f
#define G_SHIELD_BREAK_TICKS 150
#define G_SHIELD_AFTER_BREAK 30.0f

#define G_LEDGE_HANG_Y -10.0f
#define G_LEDGE_MIN_TICKS 6
#define G_LEDGE_MAX_TICKS 300
#define G_LEDGE_INVULN 30
#define G_LEDGE_REGRAB 30
#define G_LEDGE_CLIMB_TICKS 20
#define G_LEDGE_JUMP_VY 2.6f
#define G_LEDGE_JUMP_VX 0.5f

#define G_DEAD_TICKS 40
#define G_RESPAWN_WAIT 90
#define G_RESPAWN_MIN_TICKS 6 /* earliest an input can drop a fighter off the respawn point */
#define G_RESPAWN_STICK 0.3f  /* |stick| that counts as input on the respawn point */
#define G_SPAWN_JITTER 4.0f

#define G_FACE_STICK 0.2f        /* |stick_x| beyond this turns the fighter around */
#define G_LEDGE_STICK 0.5f       /* stick push that climbs / drops from the ledge */
#define G_LEDGE_CLIMB_INSET 10.0f /* a ledge climb ends this far inside the edge */
#define G_JUMP_STICK_VX 0.3f     /* share of stick_x added to vx at jump take-off */
#define G_SIDE_LUNGE_VX 0.8f     /* grounded side special: forward speed while active */
#define G_ATTACK_DRIFT 0.5f      /* air acceleration factor during an aerial move */
#define G_UPB_STARTUP_DAMP 0.8f  /* vx multiplier per up-special startup tick */
#define G_UPB_NEUTRAL_N2 0.04f   /* stick length^2 below which the up-special goes straight up */
#define G_UPB_END_VX 0.4f        /* share of the up-special velocity kept into helpless */
#define G_UPB_END_VY 0.35f

#define HW BP_FIGHTER_HALF_WIDTH
#define HT BP_FIGHTER_HEIGHT
#define EDGE BP_STAGE_HALF_WIDTH

typedef struct {
    int startup, active, recovery;
    float dmg, base, growth;
    float ux, uy;         /* launch direction for a facing of +1 */
    float x0, x1, y0, y1; /* hitbox relative to (x, y), x mirrored by facing */
} Move;

enum { MV_NONE = 0, MV_JAB, MV_AIR, MV_SIDE, MV_COUNT };

static const Move MOVES[MV_COUNT] = {
    [MV_NONE] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
    /* jab / tilt: fast, weak, 35 degrees */
    [MV_JAB] = {4, 3, 12, 6.0f, 10.0f, 55.0f, 0.819152f, 0.573576f, 2.0f, 14.0f, 3.0f, 12.0f},
    /* aerial: a bit stronger, flatter, bigger box: the edgeguard tool */
    [MV_AIR] = {5, 4, 14, 8.0f, 14.0f, 62.0f, 0.906308f, 0.422618f, 1.0f, 14.0f, 0.0f, 13.0f},
    /* side special: slow, strong, long reach, 40 degrees: the finisher */
    [MV_SIDE] = {14, 4, 24, 15.0f, 30.0f, 78.0f, 0.766044f, 0.642788f, 3.0f, 22.0f, 2.0f, 12.0f},
};

/* All fields 4 bytes wide, so the struct has no padding (hash-safe). */
typedef struct {
    float x, y, vx, vy, kvx, kvy, kux, kuy;
    float damage, shield;
    int32_t stocks, facing, state, timer;
    int32_t grounded, hitstun, lag, move, move_hit;
    int32_t jumps_left, upb_used, sideb_used, fastfall;
    int32_t invuln, ledge_side, regrab, ledge_invuln_ok, edge_stop;
    int32_t side_lock; /* SPECIAL still held since it started a side special */
    float upb_vx, upb_vy;
    uint32_t buttons, prev_buttons;
    int32_t btn_age[3];
} Fighter;

struct BpSim {
    Fighter f[2];
    uint32_t seed, match_id, tick, rng;
    uint32_t phase, winner;
};

_Static_assert(sizeof(Fighter) % 4 == 0, "Fighter must be padding-free");

/* ------------------------------------------------------------ helpers */
static uint32_t rng_next(uint32_t *st) { return bp_xorshift32(st); }

static float rng_unit(uint32_t *st) { /* [-1, 1) */
    return (float)(rng_next(st) >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

static float clampf(float v, float lo, float hi) { return v < lo ? lo : (v > hi ? hi : v); }
static float absf(float v) { return v < 0.0f ? -v : v; }
static float signf(float v) { return v < 0.0f ? -1.0f : 1.0f; }

/* sqrt by Newton iterations in plain float arithmetic (bit-reproducible
 * everywhere, unlike a libm call that may differ between builds). */
static float approx_sqrt(float v) {
    if (v <= 0.0f) return 0.0f;
    float r = v > 1.0f ? v : 1.0f;
    for (int i = 0; i < 20; i++) r = 0.5f * (r + v / r);
    return r;
}

static float approach(float v, float target, float step) {
    if (v < target) return v + step > target ? target : v + step;
    if (v > target) return v - step < target ? target : v - step;
    return v;
}

BpInput bp_input_sanitize(BpInput in) {
    BpInput o;
    o.stick_x = (in.stick_x == in.stick_x) ? clampf(in.stick_x, -1.0f, 1.0f) : 0.0f;
    o.stick_y = (in.stick_y == in.stick_y) ? clampf(in.stick_y, -1.0f, 1.0f) : 0.0f;
    o.buttons = in.buttons & BP_BTN_MASK;
    return o;
}

static void set_state(Fighter *f, int st) {
    f->state = st;
    f->timer = 0;
}

static const int BTN_BITS[3] = {BP_BTN_JUMP, BP_BTN_ATTACK, BP_BTN_SPECIAL};
enum { B_JUMP = 0, B_ATTACK = 1, B_SPECIAL = 2 };

static void update_buttons(Fighter *f, uint32_t buttons) {
    f->prev_buttons = f->buttons;
    f->buttons = buttons;
    for (int b = 0; b < 3; b++) {
        int now = (buttons & (uint32_t)BTN_BITS[b]) != 0;
        int before = (f->prev_buttons & (uint32_t)BTN_BITS[b]) != 0;
        if (!now) {
            f->btn_age[b] = G_BTN_REPEAT;
            if (b == B_SPECIAL) f->side_lock = 0;
        }
        else if (before && f->btn_age[b] < 100000)
            f->btn_age[b]++;
    }
}

static int fire_ready(const Fighter *f, int b) {
    return (f->buttons & (uint32_t)BTN_BITS[b]) && f->btn_age[b] >= G_BTN_REPEAT;
}
static void consume(Fighter *f, int b) { f->btn_age[b] = 0; }
/* The side special is press-only: a held SPECIAL that started one never
 * auto-repeats into another (it may still repeat into an up-special). */
static int side_ready(const Fighter *f) { return fire_ready(f, B_SPECIAL) && !f->side_lock; }
static void consume_side(Fighter *f) {
    consume(f, B_SPECIAL);
    f->side_lock = 1;
}
static int held(const Fighter *f, uint32_t bit) { return (f->buttons & bit) != 0; }

static float spawn_x(int slot) { return slot == 0 ? -BP_SPAWN_X : BP_SPAWN_X; }

static void fighter_init(Fighter *f, int slot, uint32_t *rng) {
    memset(f, 0, sizeof *f);
    f->x = spawn_x(slot) + rng_unit(rng) * G_SPAWN_JITTER;
    f->y = BP_SPAWN_Y;
    f->shield = BP_SHIELD_MAX;
    f->stocks = BP_STOCKS;
    f->facing = slot == 0 ? 1 : -1;
    f->state = BP_AS_IDLE;
    f->grounded = 1;
    f->jumps_left = 1;
    f->ledge_invuln_ok = 1;
    for (int b = 0; b < 3; b++) f->btn_age[b] = G_BTN_REPEAT;
}

/* ------------------------------------------------------------ lifecycle */
BpSim *bp_sim_create(void) {
    BpSim *s = calloc(1, sizeof *s);
    if (s) bp_sim_reset(s, 0, 0);
    return s;
}

void bp_sim_destroy(BpSim *s) { free(s); }

void bp_sim_reset(BpSim *s, uint32_t seed, uint32_t match_id) {
    memset(s, 0, sizeof *s);
    s->seed = seed;
    s->match_id = match_id;
    /* splitmix-style scramble so nearby seeds diverge; never zero */
    uint32_t z = seed * 0x9E3779B9u + 0x7F4A7C15u;
    z = (z ^ (z >> 16)) * 0x85EBCA6Bu;
    z = (z ^ (z >> 13)) * 0xC2B2AE35u;
    z ^= z >> 16;
    s->rng = z ? z : 0x6D2B79F5u;
    fighter_init(&s->f[0], 0, &s->rng);
    fighter_init(&s->f[1], 1, &s->rng);
    s->phase = BP_PHASE_PLAYING;
    s->winner = BP_WINNER_NONE;
}

void bp_sim_copy(BpSim *dst, const BpSim *src) { memcpy(dst, src, sizeof *dst); }

uint64_t bp_sim_state_hash(const BpSim *s) {
    const unsigned char *p = (const unsigned char *)s;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof *s; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

uint32_t bp_sim_tick(const BpSim *s) { return s->tick; }
uint32_t bp_sim_ticks_left(const BpSim *s) {
    return s->tick >= BP_MATCH_TICKS ? 0 : BP_MATCH_TICKS - s->tick;
}
uint8_t bp_sim_phase(const BpSim *s) { return (uint8_t)s->phase; }
uint8_t bp_sim_winner(const BpSim *s) { return (uint8_t)s->winner; }
uint32_t bp_sim_match_id(const BpSim *s) { return s->match_id; }

/* ------------------------------------------------------------ moves */

static void start_move(Fighter *f, int mv, int st, const BpInput *in) {
    if (absf(in->stick_x) > 0.3f) f->facing = in->stick_x < 0.0f ? -1 : 1;
    f->move = mv;
    f->move_hit = 0;
    set_state(f, st);
    if (mv == MV_SIDE && !f->grounded) {
        f->sideb_used = 1;
        f->vy = 0.3f; /* a small stall: a horizontal recovery aid */
        f->fastfall = 0;
    }
}

static void start_upb(Fighter *f) {
    set_state(f, BP_AS_UPSPECIAL);
    f->upb_used = 1;
    f->fastfall = 0;
    f->move = MV_NONE;
}

static void air_drift(Fighter *f, float sx, float vmax, float accel) {
    if (absf(sx) < G_DEADZONE) {
        f->vx = approach(f->vx, 0.0f, G_AIR_FRICTION);
        return;
    }
    float target = sx * vmax;
    if ((target > 0.0f && f->vx < target) || (target < 0.0f && f->vx > target))
        f->vx = approach(f->vx, target, accel);
    else
        f->vx = approach(f->vx, target, G_AIR_FRICTION);
}

static void ground_friction(Fighter *f) { f->vx = approach(f->vx, 0.0f, G_FRICTION); }

static void on_land(Fighter *f) {
    f->grounded = 1;
    f->y = 0.0f;
    f->vy = 0.0f;
    f->kvy = 0.0f;
    f->kuy = 0.0f;
    f->jumps_left = 1;
    f->upb_used = 0;
    f->sideb_used = 0;
    f->fastfall = 0;
    f->ledge_invuln_ok = 1;
    switch (f->state) {
    case BP_AS_AIR:
    case BP_AS_JUMPSQUAT:
        set_state(f, BP_AS_IDLE);
        break;
    case BP_AS_ATTACK:
    case BP_AS_SPECIAL:
        f->lag = (f->move == MV_SIDE && !f->move_hit) ? G_SIDE_WHIFF_LAND_LAG : G_AERIAL_LAG;
        f->move = MV_NONE;
        set_state(f, BP_AS_LAG);
        break;
    case BP_AS_HELPLESS:
    case BP_AS_UPSPECIAL:
        f->lag = G_HELPLESS_LAG;
        set_state(f, BP_AS_LAG);
        break;
    default: /* HITSTUN and stun states stay; they end on their timers */
        break;
    }
}

/* ------------------------------------------------------------ control */
static void ground_actionable(Fighter *f, const BpInput *in) {
    f->edge_stop = 1;
    if (held(f, BP_BTN_SHIELD) && f->shield > 0.0f) {
        set_state(f, BP_AS_SHIELD);
        ground_friction(f);
        return;
    }
    if (fire_ready(f, B_JUMP)) {
        consume(f, B_JUMP);
        set_state(f, BP_AS_JUMPSQUAT);
        return;
    }
    if (fire_ready(f, B_SPECIAL) && in->stick_y > 0.5f) {
        consume(f, B_SPECIAL);
        start_upb(f);
        return;
    }
    if (side_ready(f) && in->stick_y <= 0.5f) {
        consume_side(f);
        start_move(f, MV_SIDE, BP_AS_SPECIAL, in);
        return;
    }
    if (fire_ready(f, B_ATTACK)) {
        consume(f, B_ATTACK);
        start_move(f, MV_JAB, BP_AS_ATTACK, in);
        return;
    }
    float sx = in->stick_x;
    if (absf(sx) >= G_DEADZONE) {
        f->vx = approach(f->vx, sx * G_WALK_MAX, G_GROUND_ACCEL);
        if (absf(sx) > G_FACE_STICK) f->facing = sx < 0.0f ? -1 : 1;
        f->edge_stop = absf(sx) < G_RUN_STICK;
    } else {
        ground_friction(f);
    }
    int moving = absf(f->vx) > 0.05f || absf(sx) >= G_DEADZONE;
    if (f->state != (moving ? BP_AS_WALK : BP_AS_IDLE)) set_state(f, moving ? BP_AS_WALK : BP_AS_IDLE);
}

static void air_actionable(Fighter *f, const BpInput *in) {
    if (fire_ready(f, B_JUMP) && f->jumps_left > 0) {
        consume(f, B_JUMP);
        f->jumps_left--;
        f->vy = G_DJUMP_V;
        f->vx = in->stick_x * G_AIR_MAX;
        f->fastfall = 0;
        return;
    }
    if (fire_ready(f, B_SPECIAL)) {
        if (in->stick_y > 0.5f) {
            if (!f->upb_used) {
                consume(f, B_SPECIAL);
                start_upb(f);
                return;
            }
        } else if (!f->sideb_used && !f->side_lock) {
            consume_side(f);
            start_move(f, MV_SIDE, BP_AS_SPECIAL, in);
            return;
        }
    }
    if (fire_ready(f, B_ATTACK)) {
        consume(f, B_ATTACK);
        start_move(f, MV_AIR, BP_AS_ATTACK, in);
        air_drift(f, in->stick_x, G_AIR_MAX, G_AIR_ACCEL);
        return;
    }
    air_drift(f, in->stick_x, G_AIR_MAX, G_AIR_ACCEL);
    if (in->stick_y < -0.6f && f->vy <= 0.0f) f->fastfall = 1;
}

static void actionable(Fighter *f, const BpInput *in) {
    if (f->grounded)
        ground_actionable(f, in);
    else {
        if (f->state != BP_AS_AIR) set_state(f, BP_AS_AIR);
        air_actionable(f, in);
    }
}

static void to_neutral(Fighter *f) { set_state(f, f->grounded ? BP_AS_IDLE : BP_AS_AIR); }

/* One tick of control per action state (the timer has already advanced). */
static void ctl_dead(Fighter *f) {
    if (f->stocks > 0 && f->timer >= G_DEAD_TICKS) {
        set_state(f, BP_AS_RESPAWN);
        f->invuln = BP_RESPAWN_INVULN_TICKS;
    }
}

static void ctl_respawn(Fighter *f, const BpInput *in) {
    int input = absf(in->stick_x) >= G_RESPAWN_STICK || absf(in->stick_y) >= G_RESPAWN_STICK ||
                (in->buttons != 0);
    if (f->timer >= G_RESPAWN_WAIT || (f->timer >= G_RESPAWN_MIN_TICKS && input)) {
        set_state(f, BP_AS_AIR);
        f->grounded = 0;
        f->jumps_left = 1;
        f->upb_used = 0;
        f->sideb_used = 0;
    }
}

static void ctl_ledge(Fighter *f, const BpInput *in) {
    int s_ = f->ledge_side;
    if (f->timer >= G_LEDGE_MAX_TICKS) {
        set_state(f, BP_AS_AIR);
        f->regrab = G_LEDGE_REGRAB;
        return;
    }
    if (f->timer < G_LEDGE_MIN_TICKS) return;
    if (fire_ready(f, B_JUMP)) {
        consume(f, B_JUMP);
        set_state(f, BP_AS_AIR);
        f->vy = G_LEDGE_JUMP_VY;
        f->vx = -(float)s_ * G_LEDGE_JUMP_VX;
        f->regrab = G_LEDGE_REGRAB;
    } else if (in->stick_x * (float)(-s_) > G_LEDGE_STICK || in->stick_y > G_LEDGE_STICK ||
               fire_ready(f, B_ATTACK)) {
        if (fire_ready(f, B_ATTACK)) consume(f, B_ATTACK);
        set_state(f, BP_AS_LEDGECLIMB);
    } else if (in->stick_x * (float)s_ > G_LEDGE_STICK || in->stick_y < -G_LEDGE_STICK) {
        set_state(f, BP_AS_AIR);
        f->regrab = G_LEDGE_REGRAB;
    }
}

static void ctl_ledge_climb(Fighter *f) {
    if (f->timer >= G_LEDGE_CLIMB_TICKS) {
        f->x = (float)f->ledge_side * (EDGE - G_LEDGE_CLIMB_INSET);
        f->y = 0.0f;
        f->vx = f->vy = 0.0f;
        f->grounded = 1;
        f->facing = -f->ledge_side;
        f->ledge_side = 0;
        set_state(f, BP_AS_IDLE);
    }
}

static void ctl_hitstun(Fighter *f, const BpInput *in) {
    if (f->hitstun > 0) f->hitstun--;
    if (f->hitstun > 0) {
        if (f->grounded) ground_friction(f);
        return;
    }
    to_neutral(f);
    actionable(f, in);
}

static void ctl_shieldbreak(Fighter *f) {
    ground_friction(f);
    if (f->timer >= G_SHIELD_BREAK_TICKS) {
        f->shield = G_SHIELD_AFTER_BREAK;
        to_neutral(f);
    }
}

static void ctl_shieldstun(Fighter *f) {
    ground_friction(f);
    if (f->timer >= f->lag) {
        if (held(f, BP_BTN_SHIELD)) {
            set_state(f, BP_AS_SHIELD);
        } else {
            f->lag = G_SHIELD_DROP_LAG;
            set_state(f, BP_AS_LAG);
        }
    }
}

static void ctl_shield(Fighter *f) {
    ground_friction(f);
    if (!f->grounded) {
        to_neutral(f);
        return;
    }
    if (fire_ready(f, B_JUMP)) { /* jump out of shield */
        consume(f, B_JUMP);
        set_state(f, BP_AS_JUMPSQUAT);
    } else if (!held(f, BP_BTN_SHIELD)) {
        f->lag = G_SHIELD_DROP_LAG;
        set_state(f, BP_AS_LAG);
    }
}

static void ctl_lag(Fighter *f, const BpInput *in) {
    if (f->grounded) ground_friction(f);
    if (f->timer >= f->lag) {
        to_neutral(f);
        actionable(f, in);
    }
}

static void ctl_jumpsquat(Fighter *f, const BpInput *in) {
    ground_friction(f);
    if (f->timer >= G_JUMPSQUAT) {
        f->grounded = 0;
        f->vy = held(f, BP_BTN_JUMP) ? G_JUMP_V : G_HOP_V;
        f->vx = clampf(f->vx + in->stick_x * G_JUMP_STICK_VX, -G_WALK_MAX, G_WALK_MAX);
        set_state(f, BP_AS_AIR);
    }
}

/* ATTACK / SPECIAL: a move runs startup + active + recovery ticks */
static void ctl_move(Fighter *f, const BpInput *in) {
    const Move *m = &MOVES[f->move];
    if (f->grounded) {
        if (f->move == MV_SIDE && f->timer >= m->startup && f->timer < m->startup + m->active)
            f->vx = (float)f->facing * G_SIDE_LUNGE_VX;
        else
            ground_friction(f);
    } else {
        air_drift(f, in->stick_x, G_AIR_MAX, G_AIR_ACCEL * G_ATTACK_DRIFT);
    }
    int recovery = m->recovery;
    if (f->move == MV_SIDE && !f->move_hit) recovery += G_SIDE_WHIFF_LAG; /* whiffed: punishable */
    if (f->timer >= m->startup + m->active + recovery) {
        f->move = MV_NONE;
        to_neutral(f);
    }
}

/* The up-special's direction, from the stick at the end of its startup: any
 * angle in the upper half plane (neutral = straight up). */
static void upb_aim(Fighter *f, const BpInput *in) {
    float sx = in->stick_x, sy = in->stick_y < 0.0f ? 0.0f : in->stick_y;
    float n2 = sx * sx + sy * sy;
    if (n2 < G_UPB_NEUTRAL_N2) {
        sx = 0.0f;
        sy = 1.0f;
    } else {
        float n = approx_sqrt(n2);
        sx /= n;
        sy /= n;
    }
    f->upb_vx = sx * G_UPB_SPEED;
    f->upb_vy = sy * G_UPB_SPEED;
    if (absf(sx) > G_FACE_STICK) f->facing = sx < 0.0f ? -1 : 1;
}

static void ctl_upspecial(Fighter *f, const BpInput *in) {
    if (f->timer < G_UPB_STARTUP) {
        f->vx *= G_UPB_STARTUP_DAMP;
        f->vy = 0.0f;
        f->kvx = f->kvy = 0.0f;
        if (f->timer == G_UPB_STARTUP - 1) upb_aim(f, in);
    } else if (f->timer < G_UPB_STARTUP + G_UPB_TRAVEL) {
        f->grounded = 0;
        f->vx = f->upb_vx;
        f->vy = f->upb_vy;
        f->kvx = f->kvy = 0.0f;
    } else {
        f->vx = f->upb_vx * G_UPB_END_VX;
        f->vy = f->upb_vy * G_UPB_END_VY;
        set_state(f, BP_AS_HELPLESS);
    }
}

static void control(BpSim *s, int i, const BpInput *in) {
    Fighter *f = &s->f[i];
    f->timer++;
    f->edge_stop = 1;
    switch (f->state) {
    case BP_AS_DEAD: ctl_dead(f); return;
    case BP_AS_RESPAWN: ctl_respawn(f, in); return;
    case BP_AS_LEDGE: ctl_ledge(f, in); return;
    case BP_AS_LEDGECLIMB: ctl_ledge_climb(f); return;
    case BP_AS_HITSTUN: ctl_hitstun(f, in); return;
    case BP_AS_SHIELDBREAK: ctl_shieldbreak(f); return;
    case BP_AS_SHIELDSTUN: ctl_shieldstun(f); return;
    case BP_AS_SHIELD: ctl_shield(f); return;
    case BP_AS_LAG: ctl_lag(f, in); return;
    case BP_AS_JUMPSQUAT: ctl_jumpsquat(f, in); return;
    case BP_AS_ATTACK:
    case BP_AS_SPECIAL: ctl_move(f, in); return;
    case BP_AS_UPSPECIAL: ctl_upspecial(f, in); return;
    case BP_AS_HELPLESS: air_drift(f, in->stick_x, G_HELPLESS_AIR_MAX, G_HELPLESS_AIR_ACCEL); return;
    default: actionable(f, in); return; /* IDLE, WALK, AIR */
    }
}

/* ------------------------------------------------------------ physics */
static int uses_gravity(const Fighter *f) {
    switch (f->state) {
    case BP_AS_DEAD:
    case BP_AS_RESPAWN:
    case BP_AS_LEDGE:
    case BP_AS_LEDGECLIMB:
        return 0;
    case BP_AS_UPSPECIAL:
        return 0;
    default:
        return !f->grounded;
    }
}

static void decay_kb(Fighter *f) {
    if (f->kvx != 0.0f) {
        float d = G_KB_DECAY * f->kux;
        if (f->grounded) d += G_FRICTION;
        f->kvx = absf(f->kvx) <= d ? 0.0f : f->kvx - signf(f->kvx) * d;
    }
    if (f->kvy != 0.0f) {
        float d = G_KB_DECAY * f->kuy;
        f->kvy = absf(f->kvy) <= d ? 0.0f : f->kvy - signf(f->kvy) * d;
    }
}

static int ledge_taken(const BpSim *s, int i, int side) {
    const Fighter *o = &s->f[1 - i];
    return (o->state == BP_AS_LEDGE || o->state == BP_AS_LEDGECLIMB) && o->ledge_side == side;
}

static void try_ledge(BpSim *s, int i) {
    Fighter *f = &s->f[i];
    if (f->grounded || f->regrab > 0) return;
    if (f->state != BP_AS_AIR && f->state != BP_AS_HELPLESS) return;
    if (f->vy + f->kvy > 0.0f) return; /* only while falling */
    float ax = absf(f->x);
    if (ax < EDGE || ax > EDGE + BP_LEDGE_GRAB_X) return;
    if (f->y > 0.0f || f->y < -BP_LEDGE_GRAB_Y) return;
    int side = f->x < 0.0f ? -1 : 1;
    if (ledge_taken(s, i, side)) return;
    set_state(f, BP_AS_LEDGE);
    f->ledge_side = side;
    f->x = (float)side * (EDGE + HW);
    f->y = G_LEDGE_HANG_Y;
    f->vx = f->vy = f->kvx = f->kvy = 0.0f;
    f->facing = -side;
    f->jumps_left = 1;
    f->upb_used = 0;
    f->sideb_used = 0;
    f->fastfall = 0;
    f->move = MV_NONE;
    if (f->ledge_invuln_ok) {
        if (f->invuln < G_LEDGE_INVULN) f->invuln = G_LEDGE_INVULN;
        f->ledge_invuln_ok = 0;
    }
}

/* states the physics step leaves alone (their control step places them) */
static int physics_frozen(const Fighter *f) {
    switch (f->state) {
    case BP_AS_DEAD:
    case BP_AS_RESPAWN:
    case BP_AS_LEDGE:
    case BP_AS_LEDGECLIMB:
        return 1;
    default:
        return 0;
    }
}

static void apply_gravity(Fighter *f) {
    if (!uses_gravity(f)) return;
    if (f->fastfall && f->vy <= 0.0f)
        f->vy = -G_FAST_FALL;
    else {
        f->vy -= (f->state == BP_AS_SPECIAL) ? G_GRAVITY * G_SPECIAL_GRAVITY : G_GRAVITY;
        if (f->vy < -G_MAX_FALL) f->vy = -G_MAX_FALL;
    }
}

/* A grounded fighter past the edge: stopped at it (walking, no knockback), or
 * off it (its grounded states become AIR). */
static void edge_check(Fighter *f) {
    if (!(absf(f->x) > EDGE)) return;
    if (f->edge_stop && absf(f->kvx) == 0.0f) {
        f->x = signf(f->x) * EDGE;
        f->vx = 0.0f;
        return;
    }
    f->grounded = 0; /* off the edge */
    switch (f->state) {
    case BP_AS_IDLE:
    case BP_AS_WALK:
    case BP_AS_SHIELD:
    case BP_AS_LAG:
    case BP_AS_SHIELDSTUN:
    case BP_AS_SHIELDBREAK:
        set_state(f, BP_AS_AIR);
        break;
    default:
        break;
    }
}

/* After moving, a grounded fighter stays on the stage top unless it walked
 * off the edge or was launched upwards; 1 if it is still grounded. */
static int stay_grounded(Fighter *f) {
    edge_check(f);
    if (f->grounded) {
        if (f->y > 0.0f && f->vy + f->kvy > 0.0f)
            f->grounded = 0; /* launched */
        else {
            f->y = 0.0f;
            if (f->vy < 0.0f) f->vy = 0.0f;
        }
    }
    return f->grounded;
}

/* An airborne fighter that moved from (px, py): landing on the stage top, or
 * the stage block's walls and underside; 1 if it landed. */
static int collide_stage(Fighter *f, float px, float py) {
    float ax = absf(f->x);
    if (py >= 0.0f && f->y < 0.0f && ax <= EDGE) {
        on_land(f);
        return 1;
    }
    if (f->y < 0.0f && f->y + HT > -BP_STAGE_DEPTH && ax < EDGE + HW) {
        if (py + HT <= -BP_STAGE_DEPTH) { /* came from below: head bonk */
            f->y = -BP_STAGE_DEPTH - HT;
            if (f->vy > 0.0f) f->vy = 0.0f;
            f->kvy = 0.0f;
        } else { /* from the side: wall */
            float side = px != 0.0f ? signf(px) : signf(f->x);
            f->x = side * (EDGE + HW);
            f->vx = 0.0f;
            f->kvx = 0.0f;
        }
    }
    return 0;
}

/* One tick of motion: gravity, move by own + knockback velocity, knockback
 * decay, then the stage (ground, edge, landing, walls, underside, ledge). */
static void physics(BpSim *s, int i) {
    Fighter *f = &s->f[i];
    if (physics_frozen(f)) return;
    apply_gravity(f);
    float px = f->x, py = f->y;
    f->x += f->vx + f->kvx;
    f->y += f->vy + f->kvy;
    decay_kb(f);
    if (f->grounded && stay_grounded(f)) return;
    if (collide_stage(f, px, py)) return;
    try_ledge(s, i);
}

static void push_apart(BpSim *s) {
    Fighter *a = &s->f[0], *b = &s->f[1];
    if (!a->grounded || !b->grounded) return;
    if (a->state == BP_AS_DEAD || b->state == BP_AS_DEAD) return;
    float dx = b->x - a->x;
    float ov = 2.0f * HW - absf(dx);
    if (ov <= 0.0f) return;
    float push = ov * 0.5f;
    if (push > 0.6f) push = 0.6f;
    float dir = dx < 0.0f ? -1.0f : 1.0f; /* dx == 0: slot 0 goes left */
    a->x -= dir * push;
    b->x += dir * push;
}

/* ------------------------------------------------------------ hits */
static int active_move(const Fighter *f) {
    if (f->state != BP_AS_ATTACK && f->state != BP_AS_SPECIAL) return MV_NONE;
    if (f->move_hit || f->move == MV_NONE) return MV_NONE;
    const Move *m = &MOVES[f->move];
    if (f->timer >= m->startup && f->timer < m->startup + m->active) return f->move;
    return MV_NONE;
}

static int hittable(const Fighter *v) {
    if (v->invuln > 0) return 0;
    switch (v->state) {
    case BP_AS_DEAD:
    case BP_AS_RESPAWN:
    case BP_AS_LEDGECLIMB:
        return 0;
    default:
        return 1;
    }
}

static int hit_overlaps(const Fighter *a, const Fighter *v, const Move *m) {
    float fac = (float)a->facing;
    float hx0 = a->x + fac * m->x0, hx1 = a->x + fac * m->x1;
    if (hx0 > hx1) {
        float t = hx0;
        hx0 = hx1;
        hx1 = t;
    }
    float hy0 = a->y + m->y0, hy1 = a->y + m->y1;
    return hx1 >= v->x - HW && hx0 <= v->x + HW && hy1 >= v->y && hy0 <= v->y + HT;
}

static void apply_hit(Fighter *a, Fighter *v, const Move *m) {
    float dir = (float)a->facing;
    if (v->state == BP_AS_SHIELD || v->state == BP_AS_SHIELDSTUN) {
        v->shield -= m->dmg * G_SHIELD_DMG_MULT;
        if (v->shield <= 0.0f) {
            v->shield = 0.0f;
            set_state(v, BP_AS_SHIELDBREAK);
            v->vx = 0.0f;
        } else {
            v->lag = (int)(m->dmg * 0.5f) + 2;
            set_state(v, BP_AS_SHIELDSTUN);
            v->vx = dir * (0.4f + m->dmg * 0.05f);
        }
        return;
    }
    v->damage += m->dmg;
    if (v->damage > BP_DAMAGE_MAX) v->damage = BP_DAMAGE_MAX;
    float p = v->damage, d = m->dmg;
    float kb = (((p / 10.0f + p * d / 20.0f) * (200.0f / (BP_FIGHTER_WEIGHT + 100.0f)) * 1.4f) + 18.0f) *
                   (m->growth / 100.0f) +
               m->base;
    float spd = kb * G_KB_SPEED;
    v->kux = m->ux;
    v->kuy = m->uy;
    v->kvx = spd * m->ux * dir;
    v->kvy = spd * m->uy;
    if (v->grounded && v->kvy < G_GROUNDED_LAUNCH_VY) {
        v->kvy = 0.0f;
        v->kuy = 0.0f;
    } else {
        v->grounded = 0;
    }
    v->vx = 0.0f;
    v->vy = 0.0f;
    v->hitstun = (int)(kb * G_HITSTUN_MULT);
    if (v->hitstun < 1) v->hitstun = 1;
    if (v->state == BP_AS_LEDGE) v->regrab = G_LEDGE_REGRAB;
    v->ledge_side = 0;
    v->move = MV_NONE;
    v->fastfall = 0;
    v->upb_used = 0; /* getting hit restores the recovery move */
    set_state(v, BP_AS_HITSTUN);
}

static void resolve_hits(BpSim *s) {
    int mv[2] = {MV_NONE, MV_NONE};
    for (int a = 0; a < 2; a++) {
        int m = active_move(&s->f[a]);
        if (m != MV_NONE && hittable(&s->f[1 - a]) && hit_overlaps(&s->f[a], &s->f[1 - a], &MOVES[m]))
            mv[a] = m;
    }
    /* both decided on the pre-hit state: trades are symmetric */
    for (int a = 0; a < 2; a++)
        if (mv[a] != MV_NONE) s->f[a].move_hit = 1;
    for (int a = 0; a < 2; a++)
        if (mv[a] != MV_NONE) apply_hit(&s->f[a], &s->f[1 - a], &MOVES[mv[a]]);
}

/* ------------------------------------------------------------ stocks, end */
static void check_blast(BpSim *s, int i) {
    Fighter *f = &s->f[i];
    if (f->state == BP_AS_DEAD) return;
    if (f->x >= -BP_BLAST_X && f->x <= BP_BLAST_X && f->y <= BP_BLAST_TOP && f->y >= BP_BLAST_BOTTOM) return;
    f->stocks = f->stocks > 0 ? f->stocks - 1 : 0;
    uint32_t st = s->rng;
    float jitter = rng_unit(&st) * G_SPAWN_JITTER;
    s->rng = st;
    int32_t stocks = f->stocks;
    uint32_t buttons = f->buttons, prev = f->prev_buttons;
    int32_t age[3] = {f->btn_age[0], f->btn_age[1], f->btn_age[2]};
    int32_t side_lock = f->side_lock;
    memset(f, 0, sizeof *f);
    f->side_lock = side_lock;
    f->stocks = stocks;
    f->buttons = buttons;
    f->prev_buttons = prev;
    memcpy(f->btn_age, age, sizeof age);
    f->x = spawn_x(i) + jitter;
    f->y = BP_RESPAWN_Y;
    f->facing = i == 0 ? 1 : -1;
    f->shield = BP_SHIELD_MAX;
    f->jumps_left = 1;
    f->ledge_invuln_ok = 1;
    set_state(f, BP_AS_DEAD);
}

static void update_timers(Fighter *f) {
    if (f->invuln > 0) f->invuln--;
    if (f->regrab > 0) f->regrab--;
    if (f->state == BP_AS_SHIELD) {
        f->shield -= G_SHIELD_DRAIN;
        if (f->shield <= 0.0f) {
            f->shield = 0.0f;
            set_state(f, BP_AS_SHIELDBREAK);
        }
    } else if (f->state != BP_AS_SHIELDSTUN && f->state != BP_AS_SHIELDBREAK) {
        f->shield += G_SHIELD_REGEN;
        if (f->shield > BP_SHIELD_MAX) f->shield = BP_SHIELD_MAX;
    }
}

static void check_end(BpSim *s) {
    const Fighter *a = &s->f[0], *b = &s->f[1];
    if (a->stocks == 0 || b->stocks == 0) {
        s->phase = BP_PHASE_OVER;
        s->winner = (a->stocks == 0 && b->stocks == 0) ? BP_WINNER_DRAW : (a->stocks == 0 ? 1u : 0u);
        return;
    }
    if (s->tick >= BP_MATCH_TICKS) {
        s->phase = BP_PHASE_OVER;
        if (a->stocks != b->stocks)
            s->winner = a->stocks > b->stocks ? 0u : 1u;
        else if (a->damage != b->damage)
            s->winner = a->damage < b->damage ? 0u : 1u;
        else
            s->winner = BP_WINNER_DRAW;
    }
}

void bp_sim_step(BpSim *s, const BpInput in[2]) {
    if (s->phase != BP_PHASE_PLAYING) return;
    BpInput ins[2];
    for (int i = 0; i < 2; i++) {
        ins[i] = bp_input_sanitize(in ? in[i] : (BpInput){0.0f, 0.0f, 0u});
        update_buttons(&s->f[i], ins[i].buttons);
    }
    for (int i = 0; i < 2; i++) control(s, i, &ins[i]);
    for (int i = 0; i < 2; i++) physics(s, i);
    push_apart(s);
    resolve_hits(s);
    for (int i = 0; i < 2; i++) check_blast(s, i);
    for (int i = 0; i < 2; i++) update_timers(&s->f[i]);
    s->tick++;
    check_end(s);
}

/* ------------------------------------------------------------ views */
static void fill_player(const Fighter *f, int slot, NetPlayer *o) {
    memset(o, 0, sizeof *o);
    o->x = f->x;
    o->y = f->y;
    o->vx = f->vx + f->kvx;
    o->vy = f->vy + f->kvy;
    o->damage = clampf(f->damage, 0.0f, BP_DAMAGE_MAX);
    o->shield = clampf(f->shield, 0.0f, BP_SHIELD_MAX);
    o->stocks = (uint8_t)(f->stocks < 0 ? 0 : f->stocks);
    o->facing = (int8_t)(f->facing < 0 ? -1 : 1);
    int dead = f->state == BP_AS_DEAD || f->state == BP_AS_RESPAWN;
    uint8_t fl = 0;
    if (f->grounded && !dead) fl |= BP_PLAYER_FLAG_ON_GROUND;
    if (f->state == BP_AS_SHIELD || f->state == BP_AS_SHIELDSTUN) fl |= BP_PLAYER_FLAG_SHIELDING;
    if (f->state == BP_AS_HITSTUN) fl |= BP_PLAYER_FLAG_HITSTUN;
    if (f->state == BP_AS_ATTACK || f->state == BP_AS_SPECIAL) fl |= BP_PLAYER_FLAG_ATTACKING;
    if (f->invuln > 0 || dead || f->state == BP_AS_LEDGECLIMB) fl |= BP_PLAYER_FLAG_INVULNERABLE;
    if (absf(f->x) > EDGE || f->y < 0.0f) fl |= BP_PLAYER_FLAG_OFFSTAGE;
    o->flags = fl;
    o->action_state = (uint8_t)f->state;
    int hs = f->state == BP_AS_HITSTUN ? f->hitstun : 0;
    o->hitstun_ticks = (uint16_t)(hs < 0 ? 0 : (hs > 65535 ? 65535 : hs));
    o->jumps_left = (uint8_t)(f->jumps_left < 0 ? 0 : f->jumps_left);
    o->slot = (uint8_t)slot;
}

void bp_sim_players(const BpSim *s, NetPlayer out[2]) {
    for (int i = 0; i < 2; i++) fill_player(&s->f[i], i, &out[i]);
}

size_t bp_sim_snapshot(const BpSim *s, uint32_t seq, uint8_t n_players, uint8_t mode,
                       uint32_t ack_cmd_seq, uint8_t *buf, size_t cap) {
    if (!buf || cap < sizeof(SnapshotPacket)) return 0;
    SnapshotPacket p;
    memset(&p, 0, sizeof p);
    p.hdr.magic = BP_MAGIC;
    p.hdr.version = BP_PROTO_VERSION;
    p.hdr.type = BP_PKT_SNAPSHOT;
    p.hdr.seq = seq;
    p.hdr.tick = s->tick;
    p.match.match_id = s->match_id;
    p.match.ticks_left = bp_sim_ticks_left(s);
    p.match.phase = (uint8_t)s->phase;
    p.match.winner = (uint8_t)s->winner;
    p.match.n_players = n_players;
    p.match.mode = mode;
    p.match.ack_cmd_seq = ack_cmd_seq;
    bp_sim_players(s, p.players);
    memcpy(buf, &p, sizeof p);
    return sizeof p;
}
