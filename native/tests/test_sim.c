/*
 * test_sim.c — C checks for the simulation (run by `make -C native check`).
 *
 * White-box: includes sim.c so it can stage exact situations (positions,
 * percents) and check the physics, besides black-box replay determinism.
 */
#include "../src/sim.c"

#include <stdio.h>

#include "cpu.h"

#include "check.h"

static uint32_t trng = 12345u;
static uint32_t tr(void) { return rng_next(&trng); }
static float tu(void) { return (float)(tr() >> 8) / 16777216.0f * 2.0f - 1.0f; }

static BpInput rand_input(void) {
    BpInput in;
    in.stick_x = tu();
    in.stick_y = tu();
    in.buttons = tr() & BP_BTN_MASK;
    if (tr() % 3) in.buttons &= ~(uint32_t)BP_BTN_SHIELD;
    return in;
}

static const BpInput NEUTRAL = {0.0f, 0.0f, 0u};

/* ---------------------------------------------------------------- replay */
static void test_replay(void) {
    enum { N = 9000 };
    static BpInput stream[N][2];
    trng = 99u;
    for (int t = 0; t < N; t++) {
        /* inputs held for a few ticks, like a policy with repeat */
        if (t % 4 == 0) {
            stream[t][0] = rand_input();
            stream[t][1] = rand_input();
        } else {
            stream[t][0] = stream[t - 1][0];
            stream[t][1] = stream[t - 1][1];
        }
    }
    BpSim *a = bp_sim_create(), *b = bp_sim_create();
    bp_sim_reset(a, 777u, 5u);
    bp_sim_reset(b, 777u, 5u);
    uint8_t ba[128], bb[128];
    int same = 1, steps = 0;
    for (int t = 0; t < N && bp_sim_phase(a) == BP_PHASE_PLAYING; t++) {
        bp_sim_step(a, stream[t]);
        bp_sim_step(b, stream[t]);
        steps++;
        size_t na = bp_sim_snapshot(a, (uint32_t)t, 2, BP_MODE_LOCKSTEP, 0, ba, sizeof ba);
        size_t nb = bp_sim_snapshot(b, (uint32_t)t, 2, BP_MODE_LOCKSTEP, 0, bb, sizeof bb);
        if (na != 92 || nb != 92 || memcmp(ba, bb, 92) != 0) same = 0;
    }
    CHECK(same, "snapshots diverged for the same seed and inputs");
    CHECK(bp_sim_state_hash(a) == bp_sim_state_hash(b), "state hashes differ");
    CHECK(steps > 100, "only %d steps", steps);

    /* a copy taken mid-way continues identically */
    bp_sim_reset(a, 4242u, 1u);
    for (int t = 0; t < 1000; t++) bp_sim_step(a, stream[t]);
    bp_sim_copy(b, a);
    for (int t = 1000; t < 3000; t++) {
        bp_sim_step(a, stream[t]);
        bp_sim_step(b, stream[t]);
    }
    CHECK(bp_sim_state_hash(a) == bp_sim_state_hash(b), "copy diverged");

    /* different seeds give different matches (spawn jitter) */
    bp_sim_reset(a, 1u, 1u);
    bp_sim_reset(b, 2u, 1u);
    CHECK(bp_sim_state_hash(a) != bp_sim_state_hash(b), "seed has no effect");

    /* reset really resets */
    bp_sim_reset(a, 777u, 5u);
    bp_sim_reset(b, 777u, 5u);
    for (int t = 0; t < 500; t++) bp_sim_step(b, stream[t]);
    bp_sim_reset(b, 777u, 5u);
    CHECK(bp_sim_state_hash(a) == bp_sim_state_hash(b), "reset leaves state behind");
    bp_sim_destroy(a);
    bp_sim_destroy(b);

    /* CPU matches are deterministic too */
    uint32_t t1 = 0, t2 = 0;
    NetPlayer f1[2], f2[2];
    uint8_t w1 = bp_match_cpu_vs_cpu_ex(5, 4, 31337u, &t1, f1);
    uint8_t w2 = bp_match_cpu_vs_cpu_ex(5, 4, 31337u, &t2, f2);
    CHECK(w1 == w2 && t1 == t2 && memcmp(f1, f2, sizeof f1) == 0, "cpu match not deterministic");
    CHECK(w1 != BP_WINNER_NONE, "cpu match did not end");
}

/* ---------------------------------------------------------------- snapshot */
static void test_snapshot(void) {
    BpSim *s = bp_sim_create();
    bp_sim_reset(s, 3u, 17u);
    uint8_t buf[92];
    CHECK(bp_sim_snapshot(s, 1, 2, 0, 0, buf, 91) == 0, "cap < 92 must fail");
    CHECK(bp_sim_snapshot(s, 9, 2, BP_MODE_FASTFORWARD, 55, buf, 92) == 92, "size");
    SnapshotPacket p;
    memcpy(&p, buf, sizeof p);
    CHECK(p.hdr.magic == BP_MAGIC && p.hdr.version == BP_PROTO_VERSION && p.hdr.type == BP_PKT_SNAPSHOT, "header");
    CHECK(p.hdr.seq == 9 && p.hdr.tick == 0, "seq/tick");
    CHECK(p.match.match_id == 17 && p.match.ticks_left == BP_MATCH_TICKS && p.match.phase == BP_PHASE_PLAYING &&
              p.match.winner == BP_WINNER_NONE && p.match.mode == BP_MODE_FASTFORWARD && p.match.ack_cmd_seq == 55,
          "match state");
    CHECK(p.players[0].facing == 1 && p.players[1].facing == -1, "facing");
    CHECK(p.players[0].x < 0 && p.players[1].x > 0 && p.players[0].y == 0.0f, "spawn");
    CHECK(p.players[0].stocks == BP_STOCKS && p.players[0].slot == 0 && p.players[1].slot == 1, "stocks/slot");
    CHECK(p.players[0].flags == BP_PLAYER_FLAG_ON_GROUND, "flags %u", p.players[0].flags);
    CHECK(p.players[0].shield == BP_SHIELD_MAX, "shield");
    bp_sim_destroy(s);
}

/* ---------------------------------------------------------------- physics */
static void run(BpSim *s, BpInput a, BpInput b, int n) {
    BpInput in[2] = {a, b};
    for (int i = 0; i < n; i++) bp_sim_step(s, in);
}

static void test_neutral_timeout(void) {
    BpSim *s = bp_sim_create();
    bp_sim_reset(s, 1u, 1u);
    float x0 = s->f[0].x;
    run(s, NEUTRAL, NEUTRAL, BP_MATCH_TICKS + 50);
    CHECK(bp_sim_phase(s) == BP_PHASE_OVER && bp_sim_tick(s) == BP_MATCH_TICKS, "timeout at %u", bp_sim_tick(s));
    CHECK(bp_sim_winner(s) == BP_WINNER_DRAW, "neutral match should draw, got %u", bp_sim_winner(s));
    CHECK(s->f[0].x == x0 && s->f[0].y == 0.0f && s->f[0].grounded, "idle fighter moved");
    CHECK(bp_sim_ticks_left(s) == 0, "ticks_left");
    bp_sim_destroy(s);
}

static void test_jump(void) {
    BpSim *s = bp_sim_create();
    bp_sim_reset(s, 1u, 1u);
    BpInput j = {0, 0, BP_BTN_JUMP};
    float apex = 0.0f;
    int landed_at = -1;
    for (int t = 0; t < 200; t++) {
        BpInput in[2] = {t < 6 ? j : NEUTRAL, NEUTRAL};
        bp_sim_step(s, in);
        if (s->f[0].y > apex) apex = s->f[0].y;
        if (t > 10 && s->f[0].grounded && landed_at < 0) landed_at = t;
    }
    CHECK(apex > 25.0f && apex < 40.0f, "full jump apex %.1f", apex);
    CHECK(landed_at > 0 && s->f[0].state == BP_AS_IDLE, "did not land (state %d)", s->f[0].state);
    /* short hop: tap */
    bp_sim_reset(s, 1u, 1u);
    apex = 0.0f;
    for (int t = 0; t < 100; t++) {
        BpInput in[2] = {t < 1 ? j : NEUTRAL, NEUTRAL};
        bp_sim_step(s, in);
        if (s->f[0].y > apex) apex = s->f[0].y;
    }
    CHECK(apex > 8.0f && apex < 20.0f, "short hop apex %.1f", apex);
    /* double jump goes higher than one jump */
    bp_sim_reset(s, 1u, 1u);
    apex = 0.0f;
    for (int t = 0; t < 200; t++) {
        int press = t < 5 || (t >= 20 && t < 22);
        BpInput in[2] = {press ? j : NEUTRAL, NEUTRAL};
        bp_sim_step(s, in);
        if (s->f[0].y > apex) apex = s->f[0].y;
    }
    CHECK(apex > 45.0f, "double jump apex %.1f", apex);
    bp_sim_destroy(s);
}

static void test_walk_off_and_die(void) {
    BpSim *s = bp_sim_create();
    bp_sim_reset(s, 1u, 1u);
    BpInput walk = {-0.4f, 0, 0}, run_ = {-1.0f, 0, 0};
    run(s, walk, NEUTRAL, 200);
    CHECK(s->f[0].grounded && s->f[0].x == -EDGE, "slow walk should stop at the edge (x=%.1f)", s->f[0].x);
    int died = 0, respawned = 0, flagged_off = 0;
    for (int t = 0; t < 600 && !respawned; t++) {
        BpInput in[2] = {died ? NEUTRAL : run_, NEUTRAL};
        bp_sim_step(s, in);
        NetPlayer p[2];
        bp_sim_players(s, p);
        if (p[0].flags & BP_PLAYER_FLAG_OFFSTAGE) flagged_off = 1;
        if (!died && s->f[0].stocks == BP_STOCKS - 1) {
            died = 1;
            CHECK(s->f[0].state == BP_AS_DEAD && s->f[0].damage == 0.0f, "dead state");
        }
        if (died && s->f[0].state == BP_AS_RESPAWN) respawned = 1;
    }
    CHECK(flagged_off, "offstage flag never set");
    CHECK(died, "running off the stage must lose a stock");
    CHECK(respawned && s->f[0].y == BP_RESPAWN_Y && s->f[0].invuln > 0, "respawn");
    bp_sim_destroy(s);
}

/* A fresh match with fighter `slot` in the air at (x, y) in `state`, no jump left. */
static BpSim *airborne(int slot, int state, float x, float y, Fighter **f) {
    BpSim *s = bp_sim_create();
    bp_sim_reset(s, 1u, 1u);
    *f = &s->f[slot];
    (*f)->grounded = 0;
    set_state(*f, state);
    (*f)->x = x;
    (*f)->y = y;
    (*f)->jumps_left = 0;
    return s;
}

static void test_wall(void) {
    Fighter *f;
    /* below the stage top, outside the wall, drifting in */
    BpSim *s = airborne(0, BP_AS_AIR, -(EDGE + HW + 6.0f), -20.0f, &f);
    BpInput in0 = {1.0f, 0, 0};
    float minx = 0.0f;
    for (int t = 0; t < 20; t++) {
        run(s, in0, NEUTRAL, 1);
        if (-f->x < EDGE + HW - 1e-3f && f->y < 0.0f && f->y > -BP_STAGE_DEPTH) minx = f->x;
    }
    CHECK(minx == 0.0f, "passed through the side wall (x=%.2f)", minx);
    bp_sim_destroy(s);
}

static void test_ledge_snap(void) {
    Fighter *f;
    BpSim *s = airborne(1, BP_AS_HELPLESS, EDGE + 6.0f, 6.0f, &f);
    f->vy = -1.0f;
    run(s, NEUTRAL, NEUTRAL, 12);
    CHECK(f->state == BP_AS_LEDGE && f->x == EDGE + HW && f->jumps_left == 1, "no ledge snap (state %d)", f->state);
    CHECK(f->invuln > 0, "ledge invulnerability");
    /* climb */
    BpInput in = {-1.0f, 0, 0};
    run(s, NEUTRAL, in, 40);
    CHECK(f->grounded && absf(f->x) < EDGE && f->y == 0.0f, "climb failed state %d x %.1f", f->state, f->x);
    bp_sim_destroy(s);
}

/* Stage a hit: attacker slot 0 at ax facing +1 using move `btn` (stick_y 0),
 * victim slot 1 at vx with percent p.  Returns 1 if the knockback itself
 * carried the victim through the side or top blast line (a KO no recovery
 * could prevent; the victim gives no input), stores the max |dx| moved. */
static int staged_hit(float ax, float vxp, float p, uint32_t btn, float *moved, float *kb_dmg) {
    BpSim *s = bp_sim_create();
    bp_sim_reset(s, 1u, 1u);
    s->f[0].x = ax;
    s->f[0].facing = 1;
    s->f[1].x = vxp;
    s->f[1].damage = p;
    float x0 = vxp, far = 0.0f;
    int died = 0;
    for (int t = 0; t < 400; t++) {
        BpInput a = {0, 0, t == 0 ? btn : 0u};
        BpInput in[2] = {a, NEUTRAL};
        bp_sim_step(s, in);
        if (s->f[1].stocks < BP_STOCKS) {
            died = far > BP_BLAST_X - vxp - 40.0f; /* left through the side/top, not by falling */
            break;
        }
        if (absf(s->f[1].x - x0) > far) far = absf(s->f[1].x - x0);
    }
    if (moved) *moved = far;
    if (kb_dmg) *kb_dmg = s->f[1].damage;
    bp_sim_destroy(s);
    return died;
}

static void test_knockback(void) {
    float moved = 0, d = 0;
    int died = staged_hit(0.0f, 10.0f, 0.0f, BP_BTN_ATTACK, &moved, &d);
    CHECK(!died && d > 0.0f && moved < 10.0f, "jab at 0%%: died=%d moved %.1f dmg %.1f", died, moved, d);
    float moved_hi = 0;
    died = staged_hit(0.0f, 10.0f, 100.0f, BP_BTN_ATTACK, &moved_hi, NULL);
    CHECK(!died && moved_hi > moved * 2.0f, "knockback must grow with percent (%.1f vs %.1f)", moved_hi, moved);
    /* the finisher near the ledge: no KO at 30%, KO at 130% */
    died = staged_hit(55.0f, 68.0f, 30.0f, BP_BTN_SPECIAL, &moved, NULL);
    CHECK(!died, "side special KO'd at 30%%");
    died = staged_hit(55.0f, 68.0f, 130.0f, BP_BTN_SPECIAL, &moved, NULL);
    CHECK(died, "side special near the ledge should KO at 130%% (moved %.1f)", moved);
    /* mid-stage at 60%: survives */
    died = staged_hit(-20.0f, -7.0f, 60.0f, BP_BTN_SPECIAL, &moved, NULL);
    CHECK(!died, "side special mid-stage KO'd at 60%%");
}

static void test_shield(void) {
    BpSim *s = bp_sim_create();
    bp_sim_reset(s, 1u, 1u);
    s->f[0].x = 0.0f;
    s->f[0].facing = 1;
    s->f[1].x = 10.0f;
    BpInput sh = {0, 0, BP_BTN_SHIELD};
    run(s, NEUTRAL, sh, 2);
    CHECK(s->f[1].state == BP_AS_SHIELD, "shield up");
    BpInput atk = {0, 0, BP_BTN_ATTACK};
    BpInput in[2] = {atk, sh};
    bp_sim_step(s, in);
    run(s, NEUTRAL, sh, 20);
    CHECK(s->f[1].damage == 0.0f && s->f[1].shield < BP_SHIELD_MAX - 5.0f, "shield should absorb (dmg %.1f sh %.1f)",
          s->f[1].damage, s->f[1].shield);
    /* holding it long breaks it */
    int broke = 0;
    for (int t = 0; t < 400; t++) {
        run(s, NEUTRAL, sh, 1);
        if (s->f[1].state == BP_AS_SHIELDBREAK) broke = 1;
    }
    CHECK(broke, "holding the shield never broke it");
    bp_sim_destroy(s);
}

/* The finisher: 42 ticks when it connects, G_SIDE_WHIFF_LAG more when it
 * whiffs; press-only (a held SPECIAL does not auto-repeat into another one). */
static int side_special_length(float victim_x, uint32_t hold_ticks, int *n_started) {
    BpSim *s = bp_sim_create();
    bp_sim_reset(s, 1u, 1u);
    s->f[0].x = 0.0f;
    s->f[0].facing = 1;
    s->f[1].x = victim_x;
    int len = -1, started = 0, prev = s->f[0].state;
    for (int t = 0; t < 300; t++) {
        BpInput a = {0, 0, (uint32_t)t < hold_ticks ? BP_BTN_SPECIAL : 0u};
        BpInput in[2] = {a, NEUTRAL};
        bp_sim_step(s, in);
        int st = s->f[0].state;
        if (st == BP_AS_SPECIAL && prev != BP_AS_SPECIAL) started++;
        if (st != BP_AS_SPECIAL && prev == BP_AS_SPECIAL && len < 0) len = t;
        prev = st;
    }
    if (n_started) *n_started = started;
    bp_sim_destroy(s);
    return len;
}

static void test_side_special_lag(void) {
    const Move *m = &MOVES[MV_SIDE];
    int total = m->startup + m->active + m->recovery, n = 0;
    int hit = side_special_length(15.0f, 1, NULL);
    int whiff = side_special_length(70.0f, 1, NULL);
    CHECK(hit == total, "side special on hit lasts %d ticks, want %d", hit, total);
    CHECK(whiff == total + G_SIDE_WHIFF_LAG, "whiffed side special lasts %d ticks, want %d", whiff,
          total + G_SIDE_WHIFF_LAG);
    side_special_length(70.0f, 250, &n);
    CHECK(n == 1, "a held SPECIAL started %d side specials (press-only: 1)", n);
}

/* Recovery is a decision: from just below the ledge the up-special gets back,
 * from deep below it does not. */
static int try_recover(float x, float y, int jumps) {
    BpSim *s = bp_sim_create();
    bp_sim_reset(s, 1u, 1u);
    Fighter *f = &s->f[0];
    f->grounded = 0;
    set_state(f, BP_AS_AIR);
    f->x = x;
    f->y = y;
    f->jumps_left = jumps;
    int safe = 0;
    for (int t = 0; t < 300; t++) {
        BpInput in = {0.0f, 0.0f, 0u};
        if (jumps && t < 2) in.buttons = BP_BTN_JUMP;
        if (t >= 16 && t < 24) { /* up-special, aimed up and slightly in */
            in.stick_x = x < 0 ? 0.2f : -0.2f;
            in.stick_y = 1.0f;
            in.buttons = t < 18 ? BP_BTN_SPECIAL : 0u;
        }
        if (t >= 24) in.stick_x = x < 0 ? 0.6f : -0.6f;
        BpInput ins[2] = {in, NEUTRAL};
        bp_sim_step(s, ins);
        if (f->stocks < BP_STOCKS) break;
        if (f->state == BP_AS_LEDGE || (f->grounded && f->y == 0.0f)) {
            safe = 1;
            break;
        }
    }
    bp_sim_destroy(s);
    return safe;
}

static void test_recovery(void) {
    CHECK(try_recover(-(EDGE + 8.0f), -40.0f, 1), "recovery from just below the ledge failed");
    CHECK(!try_recover(-(EDGE + 8.0f), -100.0f, 0), "recovered from the bottom blast line");
    CHECK(!try_recover(-(EDGE + 110.0f), -10.0f, 0), "recovered from far out with no jump");
}

static void test_sanitize(void) {
    BpSim *s = bp_sim_create();
    bp_sim_reset(s, 5u, 1u);
    BpInput bad = {0.0f / 0.0f, 1e30f, 0xFFFFFFFFu};
    BpInput in[2] = {bad, bad};
    for (int t = 0; t < 300; t++) bp_sim_step(s, in);
    NetPlayer p[2];
    bp_sim_players(s, p);
    CHECK(p[0].x == p[0].x && p[1].y == p[1].y, "NaN leaked into the state");
    bp_sim_destroy(s);
}

int main(void) {
    test_replay();
    test_snapshot();
    test_neutral_timeout();
    test_jump();
    test_walk_off_and_die();
    test_wall();
    test_ledge_snap();
    test_knockback();
    test_shield();
    test_side_special_lag();
    test_recovery();
    test_sanitize();
    return check_report("test_sim");
}
