/*
 * reward.h — the tiered reward of one env step in C: the twin of
 * brawlkit/env/rewards.py's TieredReward (docs/rewards.md), for the vec env's fast lane.
 *
 * Why a C copy: at tens of thousands of env steps a second the trainer cannot afford a
 * Python call per env per step; the lane computes every arena's reward in the same C
 * call that receives its snapshot.  The arithmetic is TieredReward.__call__'s, line for
 * line, in double precision (Python floats) from the snapshot's binary32 fields, and a
 * test steps the lane and the Python path side by side and compares every tier
 * (tests/test_fastlane.py).  The outcome-only preset is the same function with the
 * shaping weights at zero.  Weights come from Python (one declaration: TierWeights),
 * including the derived half-life, so no constant is typed twice.
 */
#ifndef BRAWLPIT_REWARD_H
#define BRAWLPIT_REWARD_H

#include <stdint.h>

#include "brawlpit.h"

/* the tiers, in the order of TieredReward's dict */
#define BP_REWARD_TIERS 5

/* TierWeights (brawlkit/env/rewards.py) as the lane needs them; filled by Python
 * (brawlkit/env/fastlane.py lane_reward) */
typedef struct {
    double damage_dealt;
    double damage_taken;
    double stock_taken;
    double stock_lost;
    double win;
    double loss;
    double draw;
    double on_stage_per_s;
    double offstage_per_s;
    double idle_per_s;
    double grace_ticks;        /* idle_grace_s * TICK_HZ */
    double engage_distance;
    double time_pressure_start;
    double half_life;          /* time_pressure_half_life(match_ticks, time_pressure_start) */
    double streak_unit;
    int32_t interval_ticks;    /* round(streak_interval_s * TICK_HZ), at least 1 */
    int32_t streak_cap_index;
    int32_t match_ticks;
    int32_t reserved;
} BpRewardWeights;

/* Per-env state between steps (TieredReward's _life_start, _intervals_paid, _last_engage). */
typedef struct {
    int32_t life_start;
    int32_t intervals_paid;
    int32_t last_engage;
    int32_t reserved;
} BpRewardState;

/* TieredReward.reset: the state at a match's first snapshot. */
void bp_reward_reset(const SnapshotPacket *first, const BpRewardWeights *w, BpRewardState *st);

/* The reward of the step prev -> cur from `slot`'s side over `ticks_elapsed` ticks;
 * tiers[0..5) = outcome, survival, activity, time_pressure, streak; returns their sum.
 * Updates st. */
double bp_reward_step(const SnapshotPacket *prev, const SnapshotPacket *cur, int slot,
                      int32_t ticks_elapsed, const BpRewardWeights *w, BpRewardState *st,
                      double tiers[BP_REWARD_TIERS]);

#endif /* BRAWLPIT_REWARD_H */
