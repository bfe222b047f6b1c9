/*
 * demos.h — the behaviour-cloning dataset builder (demos.c, libbrawldemo.so).
 *
 * Plays matches of a teacher (a CPU level or a .bpw policy) against an opponent
 * (likewise) in process and writes, per decision of the teacher, the policy input it
 * saw (built by obs.c, the code the env's fast lane and brawlpit_bot use), the
 * teacher's command as an action vector (the label), the command actually executed,
 * the SNAPSHOT bytes the input was built from, the match index and the tick.  The
 * cadence and the buffer layout are described in demos.c's header; the label rules
 * (BpDemoSettings.label_rule) below.
 *
 * Every structure here is plain C with natural alignment (no packing); the Python
 * mirror (brawlkit/training/demos.py) checks sizes at load (bp_demo_struct_size) and a
 * test checks every offset.
 */
#ifndef BRAWLPIT_DEMOS_H
#define BRAWLPIT_DEMOS_H

#include <stddef.h>
#include <stdint.h>

#include "brawlpit.h"
#include "obs.h"    /* BpCommand, bp_input_dim */
#include "policy.h" /* BpPolicy */

#ifdef __cplusplus
extern "C" {
#endif

/* error codes (0 = ok); bp_demo_strerror gives the text */
#define BP_DEMO_OK 0
#define BP_DEMO_ERR_NULL (-1)             /* NULL settings/output, or NULL seeds with matches */
#define BP_DEMO_ERR_TEACHER_LEVEL (-2)    /* CPU teacher outside BP_CPU_LEVEL_MIN..MAX */
#define BP_DEMO_ERR_OPPONENT_LEVEL (-3)   /* CPU opponent outside BP_CPU_LEVEL_MIN..MAX */
#define BP_DEMO_ERR_SLOT (-4)             /* teacher_slot not 0, 1 or BP_DEMO_SLOT_ALTERNATE */
#define BP_DEMO_ERR_REPEAT (-5)           /* action_repeat outside 1..BP_MAX_REPEAT */
#define BP_DEMO_ERR_OPPONENT_REPEAT (-6)  /* opponent_repeat neither 0 nor in 1..BP_MAX_REPEAT */
#define BP_DEMO_ERR_LAYOUT (-7)           /* input_layout this build does not build */
#define BP_DEMO_ERR_TEACHER_POLICY (-8)   /* teacher blob: unknown layout, obs_dim or act_dim mismatch */
#define BP_DEMO_ERR_OPPONENT_POLICY (-9)  /* opponent blob: likewise */
#define BP_DEMO_ERR_STUDENT_POLICY (-10)  /* student obs_dim != bp_input_dim(input_layout), act_dim */
#define BP_DEMO_ERR_BETA (-11)            /* beta not in [0, 1], or beta > 0 without a student */
#define BP_DEMO_ERR_KIND (-12)            /* a player kind unknown, or POLICY with a NULL policy */
#define BP_DEMO_ERR_MATCHES_CAP (-13)     /* match_capacity < n_matches */
#define BP_DEMO_ERR_ROWS_CAP (-14)        /* the decisions outgrew row_capacity */
#define BP_DEMO_ERR_NOMEM (-15)
#define BP_DEMO_ERR_OBS (-16)             /* the input builder refused a snapshot (a bug) */
#define BP_DEMO_ERR_LABEL_RULE (-17)      /* label_rule not a BP_DEMO_LABEL_* */

/* BpDemoPlayer.kind */
#define BP_DEMO_CPU 1
#define BP_DEMO_POLICY 2

/* BpDemoSettings.teacher_slot: match i puts the teacher in slot i % 2 */
#define BP_DEMO_SLOT_ALTERNATE 2

/* BpDemoSettings.label_rule: how a CPU teacher's every-tick output becomes the one
 * command per decision a policy at repeat R can send.  The teacher decides at the
 * ticks t with t % R == 0; o(u) is its (sanitised) output at tick u; the window of
 * the decision at t is the ticks t-R < u <= t (at the match's first decision, t = 0
 * alone).  The label at t is
 *   HELD        o(t): the decision tick's output, stick and buttons.  A button the CPU
 *               pressed only on ticks between two decisions never reaches the game.
 *   CARRY       the stick of o(t); as buttons the OR of o(u).buttons over the window:
 *               every press since the previous decision is made at this one, late by
 *               up to R-1 ticks, with the stick of tick t.
 *   LAST_PRESS  o(p), p the latest tick of the window on which the CPU pressed a
 *               button it did not hold on tick p-1 (its stick and all its buttons: a
 *               CPU press comes with the stick it meant it with); o(t) if there is none.
 * Under every rule the label is what is executed (held for the next R ticks) unless a
 * DAgger student's command is (beta), so the recorded states are the ones a perfect
 * clone of the labels visits.  At R = 1 the rules coincide.  A policy teacher has no
 * output between its decisions: every rule gives the same rows. */
#define BP_DEMO_LABEL_HELD 0
#define BP_DEMO_LABEL_CARRY 1
#define BP_DEMO_LABEL_LAST_PRESS 2

/* bytes of one stored SNAPSHOT: the datagram the server sends */
#define BP_DEMO_SNAPSHOT_BYTES sizeof(SnapshotPacket)

/* bp_demo_struct_size(which) */
#define BP_DEMO_STRUCT_PLAYER 0
#define BP_DEMO_STRUCT_SETTINGS 1
#define BP_DEMO_STRUCT_MATCH 2
#define BP_DEMO_STRUCT_OUTPUT 3

/* One side of the match: the built-in CPU at `level`, or a loaded .bpw (borrowed: the
 * caller frees it) played exactly as brawlpit_bot plays it (its own input layout, its
 * own previous command, bp_policy_forward + bp_action_decode). */
typedef struct {
    int32_t kind;     /* BP_DEMO_CPU or BP_DEMO_POLICY */
    int32_t level;    /* kind CPU: 1..8 */
    BpPolicy *policy; /* kind POLICY */
} BpDemoPlayer;

typedef struct {
    BpDemoPlayer teacher;
    BpDemoPlayer opponent;
    int32_t teacher_slot;    /* 0, 1 or BP_DEMO_SLOT_ALTERNATE */
    int32_t action_repeat;   /* R: the teacher decides at ticks t % R == 0, held R ticks */
    int32_t input_layout;    /* layout of the recorded inputs (BP_INPUT_LAYOUT_*) */
    int32_t opponent_repeat; /* a policy opponent's ticks per decision; 0 = its blob's */
    BpPolicy *student;       /* DAgger: NULL = none */
    double beta;             /* probability a decision executes the student's command */
    uint32_t beta_seed;      /* seeds the beta draws (with each match's seed) */
    int32_t label_rule;      /* BP_DEMO_LABEL_HELD (0), _CARRY or _LAST_PRESS */
} BpDemoSettings;

/* What one match gave. */
typedef struct {
    uint32_t seed;           /* the match seed (bp_sim_reset(seed, 1)) */
    uint32_t ticks;          /* ticks played */
    uint32_t first_row;      /* its rows: first_row .. first_row + rows - 1 */
    uint32_t rows;
    uint8_t teacher_slot;    /* 0 or 1 */
    uint8_t winner;          /* 0, 1 or BP_WINNER_DRAW (a slot, not "teacher") */
    uint8_t stocks[2];       /* final stocks, per slot */
    float damage[2];         /* final damage, per slot */
    uint32_t teacher_presses;          /* CPU teacher: presses in its every-tick output */
    uint32_t teacher_presses_dropped;  /* ... of which no label carries any tick (the rule's) */
    uint32_t student_decisions;        /* decisions that executed the student's command */
    uint32_t executed_presses;         /* presses in the teacher slot's applied stream */
    uint8_t final_snapshot[sizeof(SnapshotPacket)]; /* the state the match ended in */
} BpDemoMatch;

/* Caller-provided buffers.  A row array may be NULL (that field is not wanted); the
 * row count is bounded by row_capacity all the same.  On return n_rows / n_matches
 * say how much was written; after an error, only the matches completed before it
 * (rows of the unfinished match may have been written past n_rows). */
typedef struct {
    float *inputs;        /* row_capacity x bp_input_dim(input_layout) */
    float *actions;       /* row_capacity x BP_ACT_DIM: the label */
    BpCommand *executed;  /* row_capacity */
    uint8_t *snapshots;   /* row_capacity x BP_DEMO_SNAPSHOT_BYTES */
    uint32_t *match;      /* row_capacity: index into the seeds / matches */
    uint32_t *tick;       /* row_capacity */
    uint8_t *student;     /* row_capacity: 1 if the student's command was executed */
    size_t row_capacity;
    BpDemoMatch *matches; /* match_capacity */
    size_t match_capacity;
    size_t n_rows;        /* out */
    size_t n_matches;     /* out */
} BpDemoOutput;

/* Play n_matches matches (seeds[i] each) and write their decisions.  Returns BP_DEMO_OK
 * or a negative BP_DEMO_ERR_*; every argument is checked before anything is played.
 * Deterministic in (settings, seeds): the same call writes the same bytes. */
int bp_demo_collect(const BpDemoSettings *settings, const uint32_t *seeds, size_t n_matches,
                    BpDemoOutput *out);

/* Rows n_matches matches can give at action_repeat (each at most BP_MATCH_TICKS ticks
 * long, one row per R ticks): the row_capacity that can never overflow; 0 for a bad
 * repeat. */
size_t bp_demo_max_rows(int action_repeat, size_t n_matches);

/* The label of a command: stick_x, stick_y, then +1 / -1 per button (jump, attack,
 * special, shield), so that bp_action_decode (and Python's decode_action) gives back
 * exactly `cmd`. */
void bp_demo_action_of(const BpCommand *cmd, float out[BP_ACT_DIM]);

/* The seed bp_demo_collect gives a CPU in `slot` of the match seeded `match_seed`:
 * the seed bp_match_cpu_vs_cpu_ex gives that slot's CPU. */
uint32_t bp_demo_cpu_seed(uint32_t match_seed, int slot);

/* human-readable text of an error code */
const char *bp_demo_strerror(int err);

/* sizeof of BP_DEMO_STRUCT_*; 0 for an unknown one */
size_t bp_demo_struct_size(int which);

#ifdef __cplusplus
}
#endif

#endif /* BRAWLPIT_DEMOS_H */
