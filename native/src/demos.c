/*
 * demos.c — the behaviour-cloning dataset builder: teacher-vs-opponent matches played
 * in process at simulation speed, written as (policy input, command) pairs.
 *
 * Build:  make -C native   (-> build/libbrawldemo.so: demos.c, sim.c, cpu.c, obs.c,
 *         policy.c and the generated PARENA modules cpu_mod.c and commander_mod.c;
 *         brawlkit/training/demos.py loads it)
 * Test:   pytest tests/test_demos.py
 *
 * A match.  bp_sim_reset(seed, 1); the teacher holds slot teacher_slot (or slot i % 2
 * for match i with BP_DEMO_SLOT_ALTERNATE), the opponent the other.  A CPU in slot k
 * is seeded exactly as bp_match_cpu_vs_cpu_ex seeds slot k (bp_demo_cpu_seed below),
 * so a CPU-vs-CPU collection at repeat 1 is that function's match, tick for tick (a
 * test holds the two together).  Then, for every tick t while the match plays:
 *
 *   1. A CPU teacher thinks: bp_cpu_think(teacher, sim, slot), sanitised
 *      (bp_input_sanitize: what the simulation would apply).  It is called on EVERY
 *      tick, decision or not, and its output is discarded between decisions.  Reading
 *      cpu.c, this is the only way its state advances as it would:
 *        - its state (history ring of both fighters as seen, reaction-delay index,
 *          wait/hold timers, up-special steer, recovery roll, PRNG) is a function of
 *          the simulation states it has been shown and of its own PRNG; its output is
 *          never read back (c->hold is its own last decision, not the applied input),
 *          so discarding outputs leaves its bookkeeping exactly as if they had been
 *          applied -- only the world it sees differs, which is the point;
 *        - sync_match() treats a tick gap (t > last_tick + 1) as a new match and
 *          clears history, wait and hold timers: calling it only on decision ticks
 *          would make another CPU (no reaction-delay history, a decision every call).
 *      A CPU opponent thinks every tick too, and its output is applied every tick (as
 *      the server's CPU slot plays).
 *   2. If t % R == 0 (R = action_repeat; from the match start, as the lockstep env's
 *      steps are) the teacher decides:
 *        - the SNAPSHOT bytes of the current state are made with bp_sim_snapshot(sim,
 *          seq 0, 2 players, BP_MODE_LOCKSTEP, ack 0) -- the server writes its packets
 *          with the same function; the header's seq/ack are the only fields a server
 *          would fill differently, and no input builder reads them;
 *        - the recorded input is bp_input_from_snapshot(those bytes, teacher slot,
 *          input_layout, prev) -- the env's fast lane and brawlpit_bot call exactly
 *          this -- where prev is the command EXECUTED at the previous decision (the
 *          neutral command at a match's first);
 *        - the label is the teacher's command: for a CPU, one command made of its
 *          outputs on the ticks since the previous decision by the label rule
 *          (BP_DEMO_LABEL_HELD: the tick-t output; _CARRY: it with every button
 *          pressed since OR-ed in; _LAST_PRESS: the output of the latest tick that
 *          pressed a button; demos.h spells them out); for a policy teacher bp_policy_forward
 *          on its own layout's input (same snapshot, same prev) then bp_action_decode,
 *          which is what brawlpit_bot plays;
 *        - the executed command is the label, or with probability beta (a draw from a
 *          xorshift32 seeded from beta_seed and the match seed) the student's
 *          deterministic command on the recorded input (DAgger); the label stays the
 *          teacher's either way;
 *        - the executed command is applied for the next R ticks (t .. t+R-1, or until
 *          the match ends).
 *      So the states recorded are the ones a perfect clone playing at repeat R visits.
 *   3. A policy opponent decides at t % Ro == 0 (Ro = opponent_repeat, 0 = its blob's
 *      action_repeat, as brawlpit_bot plays it), from its own layout's input with its
 *      own previous command, and holds it for Ro ticks.
 *   4. bp_sim_step.
 *
 * What the cadence loses (counted per match, CPU teacher only): a "press" is a maximal
 * run of ticks with one button set in the teacher's every-tick output; it is carried
 * when the label of the first decision at or after its first tick has the button (a
 * label carries at most one press per button), else dropped -- under HELD when no
 * decision tick falls inside the run (a CPU press usually lasts one tick, so at repeat
 * R most presses the CPU makes off the decision ticks never happen), under CARRY only
 * when a second press of the button came in the same window, under LAST_PRESS also
 * when a later press of another button took the window.  executed_presses counts the
 * presses of the stream the simulation applied to the teacher's slot: presses carried
 * into consecutive decisions merge into one held button (a button held across a
 * decision does not press again), so every rule executes fewer presses than the CPU
 * made.  final_snapshot is bp_sim_snapshot of the state the match ended in (what a
 * reward needs for the match's last step).
 *
 * Data layout (caller-provided buffers, BpDemoOutput in demos.h), row r = one decision:
 *   inputs[r * D .. r * D + D - 1]      float32, D = bp_input_dim(input_layout)
 *   actions[r * 6 .. r * 6 + 5]         float32 label: stick_x, stick_y, then +1 / -1 for
 *                                       jump, attack, special, shield (bp_demo_action_of)
 *   executed[r]                         BpCommand {f32 stick_x, f32 stick_y, u32 buttons}
 *   snapshots[r * 92 .. r * 92 + 91]    the SNAPSHOT the input was built from
 *   match[r], tick[r]                   u32: index into seeds[], tick of the decision
 *   student[r]                          u8: 1 if the executed command was the student's
 * Rows are in match order, then tick order; matches[i] is a BpDemoMatch.  Every write is
 * checked against row_capacity / match_capacity.
 */
#include "demos.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "sim.h"

_Static_assert(BP_ACT_DIM == 6, "the label is stick x, stick y and four buttons");
_Static_assert(sizeof(SnapshotPacket) == 92, "a SNAPSHOT is 92 bytes (docs/protocol.md)");

#define N_BUTTONS 4
static const uint32_t BUTTONS[N_BUTTONS] = {BP_BTN_JUMP, BP_BTN_ATTACK, BP_BTN_SPECIAL, BP_BTN_SHIELD};

/* cpu.c's mix_seed (static there): the seeds bp_match_cpu_vs_cpu_ex gives its CPUs,
 * mix_seed(seed, 101u) for slot 0 and mix_seed(seed, 202u) for slot 1.  Copied, not
 * shared, because cpu.c does not export it; tests/test_demos.py holds the copy to the
 * original (a CPU-vs-CPU collection at repeat 1 = bp_match_cpu_vs_cpu_ex's match). */
static uint32_t mix_seed(uint32_t seed, uint32_t salt)
{
    uint32_t z = seed * 0x9E3779B9u + salt * 0x85EBCA6Bu + 0x632BE5ABu;
    z = (z ^ (z >> 16)) * 0x7FEB352Du;
    z = (z ^ (z >> 15)) * 0x846CA68Bu;
    z ^= z >> 16;
    return z ? z : 0x2545F491u;
}

uint32_t bp_demo_cpu_seed(uint32_t match_seed, int slot) { return mix_seed(match_seed, slot == 0 ? 101u : 202u); }

/* the beta draws' PRNG state for one match (never 0: mix_seed never returns 0) */
static uint32_t beta_state(uint32_t beta_seed, uint32_t match_seed)
{
    return mix_seed(mix_seed(beta_seed, 303u) ^ match_seed, 404u);
}

/* uniform in [0, 1) with 24 bits */
static double unit_draw(uint32_t *st) { return (double)(bp_xorshift32(st) >> 8) * (1.0 / 16777216.0); }

void bp_demo_action_of(const BpCommand *cmd, float out[BP_ACT_DIM])
{
    out[0] = cmd->stick_x;
    out[1] = cmd->stick_y;
    for (int k = 0; k < N_BUTTONS; k++)
        out[2 + k] = (cmd->buttons & BUTTONS[k]) ? 1.0f : -1.0f;
}

size_t bp_demo_max_rows(int action_repeat, size_t n_matches)
{
    if (action_repeat < 1 || action_repeat > BP_MAX_REPEAT)
        return 0;
    size_t per = ((size_t)BP_MATCH_TICKS + (size_t)action_repeat - 1) / (size_t)action_repeat;
    if (n_matches > SIZE_MAX / per)
        return 0;
    return per * n_matches;
}

size_t bp_demo_struct_size(int which)
{
    switch (which) {
    case BP_DEMO_STRUCT_PLAYER: return sizeof(BpDemoPlayer);
    case BP_DEMO_STRUCT_SETTINGS: return sizeof(BpDemoSettings);
    case BP_DEMO_STRUCT_MATCH: return sizeof(BpDemoMatch);
    case BP_DEMO_STRUCT_OUTPUT: return sizeof(BpDemoOutput);
    default: return 0;
    }
}

const char *bp_demo_strerror(int err)
{
    switch (err) {
    case BP_DEMO_OK: return "ok";
    case BP_DEMO_ERR_NULL: return "NULL settings, output or seeds";
    case BP_DEMO_ERR_TEACHER_LEVEL: return "teacher CPU level outside BP_CPU_LEVEL_MIN..BP_CPU_LEVEL_MAX";
    case BP_DEMO_ERR_OPPONENT_LEVEL: return "opponent CPU level outside BP_CPU_LEVEL_MIN..BP_CPU_LEVEL_MAX";
    case BP_DEMO_ERR_SLOT: return "teacher_slot must be 0, 1 or BP_DEMO_SLOT_ALTERNATE";
    case BP_DEMO_ERR_REPEAT: return "action_repeat outside 1..BP_MAX_REPEAT";
    case BP_DEMO_ERR_OPPONENT_REPEAT: return "opponent_repeat must be 0 (the blob's) or in 1..BP_MAX_REPEAT";
    case BP_DEMO_ERR_LAYOUT: return "unknown policy input layout";
    case BP_DEMO_ERR_TEACHER_POLICY:
        return "teacher policy: unknown input layout, or obs_dim/act_dim do not match it";
    case BP_DEMO_ERR_OPPONENT_POLICY:
        return "opponent policy: unknown input layout, or obs_dim/act_dim do not match it";
    case BP_DEMO_ERR_STUDENT_POLICY:
        return "student policy: obs_dim is not the input size of input_layout, or act_dim is not BP_ACT_DIM";
    case BP_DEMO_ERR_BETA: return "beta must be in [0, 1], and 0 without a student";
    case BP_DEMO_ERR_KIND: return "player kind must be BP_DEMO_CPU or BP_DEMO_POLICY with a policy";
    case BP_DEMO_ERR_MATCHES_CAP: return "match buffer smaller than the number of matches";
    case BP_DEMO_ERR_ROWS_CAP: return "row buffer too small for the decisions played";
    case BP_DEMO_ERR_NOMEM: return "out of memory";
    case BP_DEMO_ERR_OBS: return "the input builder refused a snapshot";
    case BP_DEMO_ERR_LABEL_RULE: return "label_rule must be BP_DEMO_LABEL_HELD, _CARRY or _LAST_PRESS";
    default: return "unknown error";
    }
}

/* ------------------------------------------------------------ argument checks */
/* A policy plays its own blob's layout: that layout must be known and the network must
 * read exactly its input and write BP_ACT_DIM values. */
static int policy_playable(const BpPolicy *p)
{
    int dim = bp_input_dim(bp_policy_input_layout(p));
    return dim > 0 && bp_policy_obs_dim(p) == dim && bp_policy_act_dim(p) == BP_ACT_DIM;
}

static int check_player(const BpDemoPlayer *pl, int err_level, int err_policy)
{
    if (pl->kind == BP_DEMO_CPU)
        return pl->level < BP_CPU_LEVEL_MIN || pl->level > BP_CPU_LEVEL_MAX ? err_level : BP_DEMO_OK;
    if (pl->kind != BP_DEMO_POLICY || !pl->policy)
        return BP_DEMO_ERR_KIND;
    return policy_playable(pl->policy) ? BP_DEMO_OK : err_policy;
}

static int check_settings(const BpDemoSettings *s)
{
    int rc = check_player(&s->teacher, BP_DEMO_ERR_TEACHER_LEVEL, BP_DEMO_ERR_TEACHER_POLICY);
    if (rc)
        return rc;
    rc = check_player(&s->opponent, BP_DEMO_ERR_OPPONENT_LEVEL, BP_DEMO_ERR_OPPONENT_POLICY);
    if (rc)
        return rc;
    if (s->teacher_slot != 0 && s->teacher_slot != 1 && s->teacher_slot != BP_DEMO_SLOT_ALTERNATE)
        return BP_DEMO_ERR_SLOT;
    if (s->action_repeat < 1 || s->action_repeat > BP_MAX_REPEAT)
        return BP_DEMO_ERR_REPEAT;
    if (s->opponent_repeat != 0 && (s->opponent_repeat < 1 || s->opponent_repeat > BP_MAX_REPEAT))
        return BP_DEMO_ERR_OPPONENT_REPEAT;
    if (bp_input_dim(s->input_layout) == 0)
        return BP_DEMO_ERR_LAYOUT;
    if (s->student && (bp_policy_obs_dim(s->student) != bp_input_dim(s->input_layout) ||
                       bp_policy_act_dim(s->student) != BP_ACT_DIM))
        return BP_DEMO_ERR_STUDENT_POLICY;
    if (!(s->beta >= 0.0 && s->beta <= 1.0) || (s->beta > 0.0 && !s->student)) /* NaN fails */
        return BP_DEMO_ERR_BETA;
    if (s->label_rule != BP_DEMO_LABEL_HELD && s->label_rule != BP_DEMO_LABEL_CARRY &&
        s->label_rule != BP_DEMO_LABEL_LAST_PRESS)
        return BP_DEMO_ERR_LABEL_RULE;
    return BP_DEMO_OK;
}

/* ------------------------------------------------------------ one side */
typedef struct {
    const BpDemoPlayer *def;
    BpCpu *cpu;      /* kind CPU */
    int layout;      /* kind POLICY: its blob's layout */
    int repeat;      /* kind POLICY opponent: ticks per decision */
    BpCommand prev;  /* the command it executed at its previous decision */
    BpCommand cur;   /* what it applies this tick */
} Side;

static BpCommand command_of(BpInput in)
{
    BpInput s = bp_input_sanitize(in);
    return (BpCommand){s.stick_x, s.stick_y, s.buttons};
}

/* a policy's deterministic command for `slot` from the snapshot (brawlpit_bot's act()) */
static int policy_command(BpPolicy *p, int layout, const uint8_t *snap, int slot, const BpCommand *prev,
                          BpCommand *cmd)
{
    float in[BP_INPUT_MAX_DIM], a[BP_ACT_DIM];
    int rc = bp_input_from_snapshot(snap, sizeof(SnapshotPacket), slot, layout, prev, in);
    if (rc != BP_OBS_OK)
        return BP_DEMO_ERR_OBS;
    bp_policy_forward(p, in, a);
    bp_action_decode(a, &cmd->stick_x, &cmd->stick_y, &cmd->buttons);
    return BP_DEMO_OK;
}

/* ------------------------------------------------------------ press accounting */
/* A press (a run of ticks with a button set in the CPU teacher's every-tick output)
 * is carried when the label of the first decision at or after its first tick has
 * that button; a label carries at most one press per button, so of several presses
 * started since the previous decision all but one are dropped, all of them when the
 * label lacks the button or the match ends first. */
typedef struct {
    int on[N_BUTTONS];          /* the button was set on the previous tick */
    uint32_t pending[N_BUTTONS]; /* presses started since the previous decision */
    uint32_t presses, dropped;
} Presses;

static void presses_tick(Presses *p, uint32_t buttons)
{
    for (int k = 0; k < N_BUTTONS; k++) {
        const int on = (buttons & BUTTONS[k]) != 0;
        p->pending[k] += on && !p->on[k];
        p->presses += on && !p->on[k];
        p->on[k] = on;
    }
}

/* a decision's label judges the presses pending; `end`: the match ended (no label) */
static void presses_judge(Presses *p, uint32_t label_buttons, int end)
{
    for (int k = 0; k < N_BUTTONS; k++) {
        const uint32_t carried = !end && (label_buttons & BUTTONS[k]) && p->pending[k] > 0;
        p->dropped += p->pending[k] - carried;
        p->pending[k] = 0;
    }
}

/* The rule's label of a CPU teacher at a decision (header: BP_DEMO_LABEL_*): `now` is
 * its tick-t output, `carried` the OR of its buttons since the previous decision,
 * `pressed` its output on the latest tick since then that pressed a new button. */
static BpCommand rule_label(int rule, BpCommand now, uint32_t carried, const BpCommand *pressed)
{
    if (rule == BP_DEMO_LABEL_CARRY)
        now.buttons |= carried;
    else if (rule == BP_DEMO_LABEL_LAST_PRESS && pressed)
        return *pressed;
    return now;
}

/* rising edges of `buttons` against the previous tick's `*prev` (which it updates) */
static uint32_t count_edges(uint32_t *prev, uint32_t buttons)
{
    uint32_t n = 0;
    for (int k = 0; k < N_BUTTONS; k++)
        n += (buttons & BUTTONS[k]) && !(*prev & BUTTONS[k]);
    *prev = buttons;
    return n;
}

/* ------------------------------------------------------------ the collector */
typedef struct {
    const BpDemoSettings *s;
    BpDemoOutput *out;
    BpSim *sim;
    Side side[2]; /* [0] teacher, [1] opponent */
    int dim;
} Run;

static int write_row(Run *r, uint32_t match, uint32_t tick, const float *input, const BpCommand *label,
                     const BpCommand *exec, int from_student, const uint8_t *snap)
{
    BpDemoOutput *o = r->out;
    if (o->n_rows >= o->row_capacity)
        return BP_DEMO_ERR_ROWS_CAP;
    size_t i = o->n_rows;
    if (o->inputs)
        memcpy(o->inputs + i * (size_t)r->dim, input, (size_t)r->dim * sizeof(float));
    if (o->actions)
        bp_demo_action_of(label, o->actions + i * BP_ACT_DIM);
    if (o->executed)
        o->executed[i] = *exec;
    if (o->snapshots)
        memcpy(o->snapshots + i * BP_DEMO_SNAPSHOT_BYTES, snap, BP_DEMO_SNAPSHOT_BYTES);
    if (o->match)
        o->match[i] = match;
    if (o->tick)
        o->tick[i] = tick;
    if (o->student)
        o->student[i] = (uint8_t)(from_student != 0);
    o->n_rows = i + 1;
    return BP_DEMO_OK;
}

/* The teacher's decision at tick t (see the header): record the input, make the label
 * (`think` = a CPU teacher's label by the rule, already made), choose what is executed,
 * write the row.  On return T->cur is the command to hold. */
static int teacher_decides(Run *r, BpDemoMatch *m, uint32_t index, uint32_t t, int ts,
                           const uint8_t *snap, BpCommand think, uint32_t *beta_rng)
{
    const BpDemoSettings *s = r->s;
    Side *T = &r->side[0];
    float input[BP_INPUT_MAX_DIM];
    if (bp_input_from_snapshot(snap, sizeof(SnapshotPacket), ts, s->input_layout, &T->prev, input) !=
        BP_OBS_OK)
        return BP_DEMO_ERR_OBS;
    BpCommand label = think;
    if (T->def->kind == BP_DEMO_POLICY && T->layout == s->input_layout) { /* the same input */
        float a[BP_ACT_DIM];
        bp_policy_forward(T->def->policy, input, a);
        bp_action_decode(a, &label.stick_x, &label.stick_y, &label.buttons);
    } else if (T->def->kind == BP_DEMO_POLICY) {
        int rc = policy_command(T->def->policy, T->layout, snap, ts, &T->prev, &label);
        if (rc)
            return rc;
    }
    BpCommand exec = label;
    int from_student = 0;
    if (s->student && unit_draw(beta_rng) < s->beta) {
        float a[BP_ACT_DIM];
        bp_policy_forward(s->student, input, a);
        bp_action_decode(a, &exec.stick_x, &exec.stick_y, &exec.buttons);
        from_student = 1;
        m->student_decisions++;
    }
    int rc = write_row(r, index, t, input, &label, &exec, from_student, snap);
    if (rc)
        return rc;
    T->prev = T->cur = exec;
    m->rows++;
    return BP_DEMO_OK;
}

/* the match record's end-of-match fields */
static void finish_match(Run *r, BpDemoMatch *m, const Presses *pr)
{
    NetPlayer fin[2];
    bp_sim_players(r->sim, fin);
    m->ticks = bp_sim_tick(r->sim);
    m->winner = bp_sim_winner(r->sim);
    for (int k = 0; k < 2; k++) {
        m->stocks[k] = fin[k].stocks;
        m->damage[k] = fin[k].damage;
    }
    m->teacher_presses = pr->presses;
    m->teacher_presses_dropped = pr->dropped;
    bp_sim_snapshot(r->sim, 0, 2, BP_MODE_LOCKSTEP, 0, m->final_snapshot, sizeof m->final_snapshot);
}

static int play_match(Run *r, uint32_t index, uint32_t seed, int ts)
{
    const BpDemoSettings *s = r->s;
    const int os = 1 - ts, R = s->action_repeat;
    Side *T = &r->side[0], *O = &r->side[1];
    const int t_cpu = T->def->kind == BP_DEMO_CPU, o_cpu = O->def->kind == BP_DEMO_CPU;
    uint32_t beta_rng = beta_state(s->beta_seed, seed);
    Presses pr;
    memset(&pr, 0, sizeof pr);
    BpDemoMatch m;
    memset(&m, 0, sizeof m);
    m.seed = seed;
    m.first_row = (uint32_t)r->out->n_rows;
    m.teacher_slot = (uint8_t)ts;

    bp_sim_reset(r->sim, seed, 1);
    const BpCommand neutral = {0.0f, 0.0f, 0u};
    for (int k = 0; k < 2; k++) {
        r->side[k].prev = r->side[k].cur = neutral;
        if (r->side[k].cpu)
            bp_cpu_reset(r->side[k].cpu, bp_demo_cpu_seed(seed, k == 0 ? ts : os));
    }

    uint8_t snap[sizeof(SnapshotPacket)];
    uint32_t carried = 0, last_out = 0, applied = 0; /* teacher's since the last decision; its
                                                      * last tick's; the slot's applied */
    BpCommand pressed = neutral; /* the teacher's output on its latest pressing tick */
    int have_pressed = 0;
    while (bp_sim_phase(r->sim) == BP_PHASE_PLAYING) {
        const uint32_t t = bp_sim_tick(r->sim);
        const int decide = t % (uint32_t)R == 0;
        const int o_decide = !o_cpu && t % (uint32_t)O->repeat == 0;
        BpCommand think = neutral;
        if (t_cpu) { /* the rule's inputs (header), then at a decision the label */
            BpCommand now = command_of(bp_cpu_think(T->cpu, r->sim, ts));
            if (now.buttons & ~last_out)
                pressed = now, have_pressed = 1;
            last_out = now.buttons;
            carried |= now.buttons;
            presses_tick(&pr, now.buttons);
            think = rule_label(s->label_rule, now, carried, have_pressed ? &pressed : NULL);
            if (decide) {
                presses_judge(&pr, think.buttons, 0);
                carried = 0, have_pressed = 0;
            }
        }
        if (o_cpu)
            O->cur = command_of(bp_cpu_think(O->cpu, r->sim, os));
        if (decide || o_decide)
            bp_sim_snapshot(r->sim, 0, 2, BP_MODE_LOCKSTEP, 0, snap, sizeof snap);
        if (decide) {
            int rc = teacher_decides(r, &m, index, t, ts, snap, think, &beta_rng);
            if (rc)
                return rc;
        }
        if (o_decide) {
            int rc = policy_command(O->def->policy, O->layout, snap, os, &O->prev, &O->cur);
            if (rc)
                return rc;
            O->prev = O->cur;
        }
        BpInput in[2];
        in[ts] = (BpInput){T->cur.stick_x, T->cur.stick_y, T->cur.buttons};
        in[os] = (BpInput){O->cur.stick_x, O->cur.stick_y, O->cur.buttons};
        m.executed_presses += count_edges(&applied, bp_input_sanitize(in[ts]).buttons);
        bp_sim_step(r->sim, in);
    }
    presses_judge(&pr, 0, 1);
    finish_match(r, &m, &pr);
    r->out->matches[r->out->n_matches++] = m; /* bounded: match_capacity >= n_matches, checked */
    return BP_DEMO_OK;
}

static int setup_side(Side *sd, const BpDemoPlayer *def, int repeat_override)
{
    memset(sd, 0, sizeof *sd);
    sd->def = def;
    if (def->kind == BP_DEMO_CPU) {
        sd->cpu = bp_cpu_create(def->level, 1u);
        return sd->cpu ? BP_DEMO_OK : BP_DEMO_ERR_NOMEM;
    }
    sd->layout = bp_policy_input_layout(def->policy);
    sd->repeat = repeat_override ? repeat_override : bp_policy_action_repeat(def->policy);
    return BP_DEMO_OK;
}

int bp_demo_collect(const BpDemoSettings *settings, const uint32_t *seeds, size_t n_matches,
                    BpDemoOutput *out)
{
    if (!settings || !out || (n_matches > 0 && !seeds))
        return BP_DEMO_ERR_NULL;
    out->n_rows = 0;
    out->n_matches = 0;
    int rc = check_settings(settings);
    if (rc)
        return rc;
    if (n_matches > 0 && (!out->matches || out->match_capacity < n_matches))
        return BP_DEMO_ERR_MATCHES_CAP;
    if (n_matches > UINT32_MAX)
        return BP_DEMO_ERR_MATCHES_CAP; /* match[] holds u32 indices */

    Run r;
    memset(&r, 0, sizeof r);
    r.s = settings;
    r.out = out;
    r.dim = bp_input_dim(settings->input_layout);
    r.sim = bp_sim_create();
    if (!r.sim)
        return BP_DEMO_ERR_NOMEM;
    rc = setup_side(&r.side[0], &settings->teacher, 0);
    if (!rc)
        rc = setup_side(&r.side[1], &settings->opponent, settings->opponent_repeat);
    for (size_t i = 0; !rc && i < n_matches; i++) {
        int ts = settings->teacher_slot == BP_DEMO_SLOT_ALTERNATE ? (int)(i % 2) : settings->teacher_slot;
        size_t first = out->n_rows;
        rc = play_match(&r, (uint32_t)i, seeds[i], ts);
        if (rc)
            out->n_rows = first; /* only whole matches count */
    }
    bp_cpu_destroy(r.side[0].cpu);
    bp_cpu_destroy(r.side[1].cpu);
    bp_sim_destroy(r.sim);
    return rc;
}
