/*
 * vecstep.c — one call steps N lockstep clients (see vecstep.h for the why).
 *
 * Build:  make -C native   (-> build/libbrawlvec.so, with obs.c, policy.c and the
 *         generated commander posture; brawlkit/env/fastlane.py loads it)
 * Test:   pytest tests/test_fastlane.py (lane vs Python path, step for step)
 *
 * What a step does (bpv_step; or bpv_send, then bpv_ready until every answer is in, so
 * the caller works on the first answers while the server still ticks the rest), per
 * client, in this order:
 *   1. decode its action (bp_action_decode, the twin of brawlkit/env/actions.py) and
 *      send one CMD (header + UserCmd, docs/protocol.md) covering [tick, tick+repeat);
 *   2. after every client has sent, receive: each datagram is read whole (recv of up
 *      to RX_BYTES; anything longer is truncated and so fails the length check) and
 *      accepted only if it is exactly a SNAPSHOT of this protocol version, of the
 *      client's match, with tick >= start + repeat or phase OVER, and every float
 *      finite (bp_input_from_snapshot checks that while it builds the input);
 *      everything else is counted in `skipped` and dropped, as Python's loop does;
 *   3. busy-poll for spin_us (a spinning server answers within microseconds, and
 *      a sleep costs a wake-up), then poll(2) in slices of at most POLL_SLICE_MS until
 *      budget_us; whoever is still unanswered is left BPV_PENDING for Python.
 */
#define _POSIX_C_SOURCE 200809L

#include "vecstep.h"

#include "policy.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* largest datagram read: above every packet the protocol defines (a longer one is
 * truncated by recv and then refused by the length check) */
#define RX_BYTES 512
/* longest single sleep in poll(2), ms: bounds how stale the budget check can get */
#define POLL_SLICE_MS 10
/* at most this many clients are waited on per poll(2) call (the rest are still polled
 * without sleeping; a vec env has 2 clients per env at most) */
#define BPV_MAX_POLL 256

uint32_t bpv_client_size(void) { return (uint32_t)sizeof(BpvClient); }

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static void send_cmd(BpvClient *c, const float *action, uint32_t repeat)
{
    float sx, sy;
    uint32_t buttons;
    bp_action_decode(action, &sx, &sy, &buttons);
    c->cmd = (BpCommand){sx, sy, buttons};
    NetHeader h = {BP_MAGIC, BP_PROTO_VERSION, BP_PKT_CMD, ++c->seq, c->tick};
    UserCmd u = {c->session, c->tick, ++c->cmd_seq, sx, sy, buttons, (uint8_t)c->slot,
                 (uint8_t)repeat, 0};
    memcpy(c->cmd_pkt, &h, sizeof h);
    memcpy(c->cmd_pkt + sizeof h, &u, sizeof u);
    /* a refused send (ICMP from an earlier datagram, full buffer) is not fatal here:
     * the client stays unanswered and Python's loop re-sends and checks the server */
    (void)send(c->fd, c->cmd_pkt, BPV_CMD_BYTES, MSG_DONTWAIT);
}

/* read what client c has queued; 1 once the snapshot answering its step is in */
static int drain(BpvClient *c, int layout, float *input, const BpRewardWeights *rw)
{
    uint8_t buf[RX_BYTES];
    for (;;) {
        ssize_t n = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNREFUSED) {
                return 0; /* nothing (more) yet; a refused port is the alive check's business */
            }
            c->status = BPV_ERR_RECV;
            c->err = errno;
            return 0;
        }
        if ((size_t)n != sizeof(SnapshotPacket)) {
            c->skipped++;
            continue;
        }
        SnapshotPacket sp;
        memcpy(&sp, buf, sizeof sp);
        if (sp.hdr.magic != BP_MAGIC || sp.hdr.version != BP_PROTO_VERSION ||
            sp.hdr.type != BP_PKT_SNAPSHOT || sp.match.match_id != c->match_id ||
            !(sp.hdr.tick >= c->target || sp.match.phase == BP_PHASE_OVER)) {
            c->skipped++;
            continue;
        }
        if (bp_input_from_snapshot(buf, sizeof sp, c->slot, layout, &c->cmd, input) != BP_OBS_OK) {
            c->skipped++; /* non-finite float: Python's parser refuses it too */
            continue;
        }
        if (rw != NULL && c->rewarded) {
            SnapshotPacket prev;
            memcpy(&prev, c->snap, sizeof prev);
            c->reward = bp_reward_step(&prev, &sp, c->slot, (int32_t)(sp.hdr.tick - prev.hdr.tick), rw,
                                       &c->rstate, c->tiers);
        }
        memcpy(c->snap, buf, sizeof sp);
        c->tick = sp.hdr.tick;
        c->status = BPV_DONE;
        return 1;
    }
}

void bpv_send(BpvClient *c, int n, const float *actions, uint32_t repeat)
{
    for (int i = 0; i < n; i++) {
        if (!c[i].active) {
            c[i].status = BPV_IDLE;
            continue;
        }
        c[i].target = c[i].tick + repeat;
        c[i].status = BPV_PENDING;
        c[i].err = 0;
        send_cmd(&c[i], actions + (size_t)i * BP_ACT_DIM, repeat);
    }
}

int bpv_ready(BpvClient *c, int n, int layout, float *inputs, uint32_t spin_us, uint32_t budget_us,
              int32_t *rows, const BpRewardWeights *rw)
{
    const int dim = bp_input_dim(layout);
    if (dim <= 0 || n <= 0 || c == NULL || inputs == NULL || rows == NULL) {
        return -1;
    }
    const double t0 = now_us();
    struct pollfd pfd[BPV_MAX_POLL];
    for (;;) {
        int m = 0, got = 0;
        for (int i = 0; i < n; i++) {
            if (c[i].status != BPV_PENDING) {
                continue;
            }
            if (drain(&c[i], layout, inputs + (size_t)i * dim, rw)) {
                rows[got++] = i;
                continue;
            }
            if (c[i].status == BPV_ERR_RECV) {
                c[i].status = BPV_PENDING; /* Python's loop reports it with context */
                return got > 0 ? got : -2;
            }
            if (m < BPV_MAX_POLL) {
                pfd[m++] = (struct pollfd){c[i].fd, POLLIN, 0};
            }
        }
        if (got > 0) {
            return got;
        }
        if (m == 0) {
            return -1;
        }
        const double dt = now_us() - t0;
        if (dt >= (double)budget_us) {
            return -2;
        }
        if (dt < (double)spin_us) {
            continue;
        }
        int ms = (int)(((double)budget_us - dt) / 1000.0) + 1;
        (void)poll(pfd, (nfds_t)m, ms < POLL_SLICE_MS ? ms : POLL_SLICE_MS);
    }
}

int bpv_resend(BpvClient *c, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (c[i].status == BPV_PENDING) {
            (void)send(c[i].fd, c[i].cmd_pkt, BPV_CMD_BYTES, MSG_DONTWAIT);
            k++;
        }
    }
    return k;
}

int bpv_step(BpvClient *c, int n, const float *actions, uint32_t repeat, int layout, float *inputs,
             uint32_t spin_us, uint32_t budget_us, const BpRewardWeights *rw)
{
    if (bp_input_dim(layout) <= 0 || n < 0 || (n > 0 && (c == NULL || actions == NULL || inputs == NULL))) {
        return -1;
    }
    int32_t rows[BPV_MAX_POLL];
    bpv_send(c, n, actions, repeat);
    for (int k = 0; k < n; k += BPV_MAX_POLL) { /* rows[] holds at most BPV_MAX_POLL */
        int m = n - k < BPV_MAX_POLL ? n - k : BPV_MAX_POLL;
        while (bpv_ready(c + k, m, layout, inputs + (size_t)k * bp_input_dim(layout), spin_us,
                         budget_us, rows, rw) > 0) {
        }
    }
    int left = 0;
    for (int i = 0; i < n; i++) {
        left += c[i].status == BPV_PENDING;
    }
    return left;
}

int bpv_inputs(const uint8_t *snaps, int n, const int32_t *slots, const BpCommand *prev, int layout,
               float *inputs)
{
    const int dim = bp_input_dim(layout);
    if (dim <= 0 || n < 0 || (n > 0 && (snaps == NULL || slots == NULL || prev == NULL || inputs == NULL))) {
        return -1;
    }
    int refused = 0;
    for (int i = 0; i < n; i++) {
        refused += bp_input_from_snapshot(snaps + (size_t)i * sizeof(SnapshotPacket), sizeof(SnapshotPacket),
                                          slots[i], layout, &prev[i], inputs + (size_t)i * dim) != BP_OBS_OK;
    }
    return refused;
}
