/*
 * vecstep.h — one call steps N lockstep clients of brawlpit_server: the fast lane of
 * brawlkit's BrawlpitVecEnv (brawlkit/env/fastlane.py; docs/architecture.md).
 *
 * Why: the per-env Python work of a step (decode the action, pack and send the CMD,
 * wait for and validate the SNAPSHOT, build the 79-value policy input) cost the
 * trainer more than the server's whole simulation.  Here it is one C call per vector
 * step, using the same twins the native bot plays with (bp_action_decode,
 * bp_input_from_snapshot), so the inputs are bit-identical to the Python builder's.
 * Everything that is not the common case (a lost datagram, a dead server, a reset,
 * free-running modes, input delay) stays in Python: a client the lane could not finish
 * within its time budget comes back BPV_PENDING with the CMD it sent, and Python's
 * receive loop (re-send, alive check, timeout error) finishes it.
 *
 * Build: part of build/libbrawlvec.so (native/Makefile), loaded with ctypes.
 */
#ifndef BRAWLPIT_VECSTEP_H
#define BRAWLPIT_VECSTEP_H

#include <stdint.h>

#include "brawlpit.h"
#include "obs.h"
#include "reward.h"

/* client status after bpv_step */
#define BPV_DONE 0     /* snapshot answering the step received, input built */
#define BPV_PENDING 1  /* not answered within the budget: Python's receive loop finishes it */
#define BPV_ERR_RECV 2 /* recv failed with an error other than "nothing yet" (errno in err) */
#define BPV_IDLE 3     /* not active: nothing sent or read */

/* The bytes of a CMD datagram (header + UserCmd). */
#define BPV_CMD_BYTES ((uint32_t)(sizeof(NetHeader) + sizeof(UserCmd)))

/* One client (one joined slot of one arena).  Python owns the array (ctypes mirror in
 * brawlkit/env/fastlane.py; a test checks the layout) and loads a client's fields from
 * its UdpClient when it enters the lane; the lane then keeps them current. */
typedef struct {
    /* in: whether this call steps it (0: skipped, BPV_IDLE); the connected UDP socket,
     * the session and slot WELCOME gave */
    int32_t active;
    int32_t fd;
    uint32_t session;
    int32_t slot;
    /* in: the socket its CMDs travel by in BATCHes (connected to its server; clients of
     * one server share it), or -1 = its own fd; its arena (WELCOME's arena_id) */
    int32_t bfd;
    uint32_t arena_id;
    /* in/out: header seq of the last datagram sent, CMD sequence number */
    uint32_t seq;
    uint32_t cmd_seq;
    /* in/out: match and tick of the newest snapshot (where this step starts) */
    uint32_t match_id;
    uint32_t tick;
    /* out: the tick the step's answer must reach (tick + repeat when sent) */
    uint32_t target;
    /* out: BPV_* status, errno of a recv error, datagrams read but not accepted
     * (stale ticks, other packet types, malformed: Python's loop would skip them too) */
    int32_t status;
    int32_t err;
    uint32_t skipped;
    /* out: the command sent this step (input layout 2's "previous command" next step) */
    BpCommand cmd;
    /* out: the CMD datagram sent (re-sent by Python if the answer is lost) */
    uint8_t cmd_pkt[sizeof(NetHeader) + sizeof(UserCmd)];
    /* in/out: the SNAPSHOT that answered the step (wire bytes); loaded with the env's
     * current snapshot when it enters the lane (the reward's "previous" state) */
    uint8_t snap[sizeof(SnapshotPacket)];
    /* in: 1 = compute this client's reward when the call is given weights (an env's own
     * client whose reward the lane can compute; reward.h) */
    int32_t rewarded;
    /* in/out: the reward's state between steps (loaded from Python's reward object) */
    BpRewardState rstate;
    /* out: this step's reward and its tiers (outcome, survival, activity, time_pressure,
     * streak), when rewarded */
    double reward;
    double tiers[BP_REWARD_TIERS];
} BpvClient;

/* The lane's batching (docs/protocol.md "Batches"): the CMDs of every client with
 * bfd >= 0 leave in BATCH datagrams of at most max_items (1..BP_BATCH_MAX) per socket,
 * and their SNAPSHOTs come back in BATCH_SNAPs on that socket: one send and one receive
 * per step instead of one per client.  The counters are the lane's own.  Every lane
 * call takes a BpvBatch *b; NULL: every client on its own fd (bfd ignored). */
typedef struct {
    /* in: the lane's whole client array and its policy inputs (n_clients rows of
     * bp_input_dim(layout)): an item's tag is its client's row there, so an answer that
     * arrives during a call for other rows (a pipelined step's other half, sharing the
     * socket) is still taken, marked BPV_DONE for the call that waits on it */
    BpvClient *clients;
    float *inputs;
    uint32_t n_clients;
    /* in: items per BATCH (0 = BP_BATCH_MAX) */
    uint32_t max_items;
    /* in/out: the next BATCH's batch_seq */
    uint32_t seq;
    /* out (accumulated): BATCHes sent, BATCH_SNAPs read, SNAPSHOT items accepted, and
     * datagrams or items refused (malformed, unknown seat, not for a pending client) */
    uint64_t sent, replies, items, refused;
} BpvBatch;

/* sizeof(BpvClient), for the Python mirror's layout check */
uint32_t bpv_client_size(void);

/* Step clients c[0..n): decode actions[i*BP_ACT_DIM ..] (bp_action_decode), send each
 * client one CMD covering ticks [tick, tick + repeat), then receive until every client
 * holds a SNAPSHOT of its match with tick >= its start + repeat (or phase OVER) and
 * build its policy input of `layout` into inputs[i*dim ..] (dim = bp_input_dim(layout)).
 * Clients with active == 0 are skipped.  Busy-polls for spin_us microseconds, then sleeps in poll(); gives up after budget_us,
 * leaving unanswered clients BPV_PENDING.  Returns the number of clients not BPV_DONE,
 * or -1 if `layout` is unknown or n < 0 (nothing sent). */
int bpv_step(BpvClient *c, int n, const float *actions, uint32_t repeat, int layout, float *inputs,
             uint32_t spin_us, uint32_t budget_us, const BpRewardWeights *rw, BpvBatch *b);

/* The same in two halves, so the caller can work on the answers as they arrive while
 * the server still ticks the others: bpv_send sends every active client's CMD (status
 * BPV_PENDING); each bpv_ready waits until at least one pending client's answer is in,
 * takes every answer that is in by then (BPV_DONE, input built), writes their indices
 * to rows[0..k) (rows has room for n) and returns k >= 1 (with rw non-NULL, each answered
 * client with `rewarded` set also gets its reward, reward.h); -1 when none is pending; -2
 * when nothing arrived for budget_us (or a recv failed): the pending ones stay
 * BPV_PENDING for Python. */
void bpv_send(BpvClient *c, int n, const float *actions, uint32_t repeat, BpvBatch *b);
int bpv_ready(BpvClient *c, int n, int layout, float *inputs, uint32_t spin_us, uint32_t budget_us,
              int32_t *rows, const BpRewardWeights *rw, BpvBatch *b);

/* Re-send the CMD of every client still BPV_PENDING (a datagram lost either way: the
 * lockstep server answers a duplicate CMD with its current snapshot), batched as
 * bpv_send batches; returns how many. */
int bpv_resend(BpvClient *c, int n, BpvBatch *b);

/* Policy inputs of `layout` for n SNAPSHOT datagrams laid end to end (snaps[i *
 * sizeof(SnapshotPacket) ..]), each seen by slots[i] with previous command prev[i]
 * (what the lane builds, for callers whose snapshots come from elsewhere: the
 * in-process reference of `bench env`).  Returns the number of snapshots refused
 * (their rows untouched), or -1 for an unknown layout or NULL arguments. */
int bpv_inputs(const uint8_t *snaps, int n, const int32_t *slots, const BpCommand *prev, int layout,
               float *inputs);

#endif /* BRAWLPIT_VECSTEP_H */
