/*
 * reward.c — TieredReward of brawlkit/env/rewards.py in C (see reward.h for why).
 * Every line below mirrors TieredReward.__call__; keep them in step (the parity test
 * in tests/test_fastlane.py compares both on real matches).
 */
#include "reward.h"

#include <math.h>

static int64_t fibonacci(int n)
{
    int64_t a = 0, b = 1;
    for (int i = 0; i < n; i++) {
        int64_t t = a + b;
        a = b;
        b = t;
    }
    return a;
}

static int32_t clock_of(const SnapshotPacket *s, const BpRewardWeights *w)
{
    return w->match_ticks - (int32_t)s->match.ticks_left;
}

void bp_reward_reset(const SnapshotPacket *first, const BpRewardWeights *w, BpRewardState *st)
{
    const int32_t t = clock_of(first, w);
    st->life_start = t;
    st->intervals_paid = 0;
    st->last_engage = t;
}

/* match_outcome(): +1 win, -1 loss, 0 draw, 2 none (not over or no winner) */
static int outcome_of(const SnapshotPacket *s, int slot)
{
    if (s->match.phase != BP_PHASE_OVER) {
        return 2;
    }
    if (s->match.winner == BP_WINNER_DRAW) {
        return 0;
    }
    if (s->match.winner == slot) {
        return 1;
    }
    if (s->match.winner == 1 - slot) {
        return -1;
    }
    return 2;
}

static double time_pressure(uint32_t ticks_left, const BpRewardWeights *w)
{
    double t = (double)ticks_left;
    if (t < 0.0) {
        t = 0.0;
    }
    if (t > (double)w->match_ticks) {
        t = (double)w->match_ticks;
    }
    return pow(0.5, t / w->half_life);
}

double bp_reward_step(const SnapshotPacket *prev, const SnapshotPacket *cur, int slot,
                      int32_t ticks_elapsed, const BpRewardWeights *w, BpRewardState *st,
                      double tiers[BP_REWARD_TIERS])
{
    const double dt_s = (double)(ticks_elapsed > 0 ? ticks_elapsed : 0) / (double)BP_TICK_HZ;
    const int32_t now = clock_of(cur, w);
    const NetPlayer *me0 = &prev->players[slot], *me = &cur->players[slot];
    const NetPlayer *op0 = &prev->players[1 - slot], *op = &cur->players[1 - slot];
    const int cur_over = cur->match.phase == BP_PHASE_OVER;

    /* tier 1 */
    double dealt = 0.0, taken = 0.0;
    if (op->stocks == op0->stocks) {
        const double d = (double)op->damage - (double)op0->damage;
        dealt = d > 0.0 ? d : 0.0;
    }
    if (me->stocks == me0->stocks) {
        const double d = (double)me->damage - (double)me0->damage;
        taken = d > 0.0 ? d : 0.0;
    }
    double outcome = w->damage_dealt * dealt - w->damage_taken * taken;
    outcome += w->stock_taken * (double)(op0->stocks > op->stocks ? op0->stocks - op->stocks : 0);
    outcome -= w->stock_lost * (double)(me0->stocks > me->stocks ? me0->stocks - me->stocks : 0);
    if (cur_over && prev->match.phase != BP_PHASE_OVER) {
        const int res = outcome_of(cur, slot);
        if (res == 1) {
            outcome += w->win;
        } else if (res == -1) {
            outcome -= w->loss;
        } else if (res == 0) {
            outcome -= w->draw;
        }
    }

    /* tier 2 */
    double survival = 0.0;
    if (me->stocks > 0 && me->action_state != BP_AS_DEAD && me->action_state != BP_AS_RESPAWN) {
        survival = (me->flags & BP_PLAYER_FLAG_OFFSTAGE) ? -w->offstage_per_s * dt_s
                                                         : w->on_stage_per_s * dt_s;
    }

    /* tiers 3 + 4 */
    const int lost_stock = me->stocks < me0->stocks;
    if (dealt > 0.0 || op->stocks < op0->stocks || lost_stock) {
        st->last_engage = now;
    }
    double activity = 0.0, pressure = 0.0;
    const double dx = (double)op->x - (double)me->x, dy = (double)op->y - (double)me->y;
    if ((double)(now - st->last_engage) > w->grace_ticks && !cur_over &&
        dx * dx + dy * dy > w->engage_distance * w->engage_distance) {
        const double m = time_pressure(cur->match.ticks_left, w);
        activity = -w->idle_per_s * w->time_pressure_start * dt_s;
        pressure = -w->idle_per_s * (m - w->time_pressure_start) * dt_s;
    }

    /* tier 5 */
    double streak = 0.0;
    if (lost_stock) {
        st->life_start = now;
        st->intervals_paid = 0;
    } else if (me->stocks > 0) {
        const int32_t interval = w->interval_ticks > 0 ? w->interval_ticks : 1;
        const int32_t k = (int32_t)floor((double)(now - st->life_start) / (double)interval);
        while (st->intervals_paid < k) {
            st->intervals_paid++;
            const int idx = st->intervals_paid < w->streak_cap_index ? st->intervals_paid
                                                                      : w->streak_cap_index;
            streak += w->streak_unit * (double)fibonacci(idx);
        }
    }

    tiers[0] = outcome;
    tiers[1] = survival;
    tiers[2] = activity;
    tiers[3] = pressure;
    tiers[4] = streak;
    return 0.0 + outcome + survival + activity + pressure + streak;
}
