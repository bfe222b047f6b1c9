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
 *
 * Batched (a BpvBatch given and the client's bfd >= 0, docs/protocol.md "Batches"):
 * step 1's CMDs leave together, up to max_items per BATCH datagram on the shared
 * socket, each item tagged with its client's row; step 2 reads BATCH_SNAPs from that
 * socket, each checked whole (type, count, exact length) and each item matched to its
 * client by tag and seat, then accepted by the same rules as a lone SNAPSHOT.  The
 * per-datagram system calls and the server's per-datagram work go from one per client
 * to one per batch: on 64 arenas, two datagrams per step instead of up to 256.
 */
#define _POSIX_C_SOURCE 200809L

#include "vecstep.h"

#include "policy.h"

#include <errno.h>
#include <stddef.h>
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
/* distinct batch sockets per call (a lane's clients on more servers go one by one) */
#define BPV_MAX_BFD 8
#define BATCH_ITEM_BYTES (sizeof(NetBatchItem) + BPV_CMD_BYTES)
#define SNAP_ITEM_BYTES (sizeof(NetBatchItem) + sizeof(SnapshotPacket))
#define BATCH_HEAD_BYTES (sizeof(NetHeader) + sizeof(NetBatch))
/* a whole BATCH_SNAP, + 1 so that a longer datagram shows as too long */
#define BATCH_RX_BYTES (BATCH_HEAD_BYTES + BP_BATCH_MAX * SNAP_ITEM_BYTES + 1)

uint32_t bpv_client_size(void) { return (uint32_t)sizeof(BpvClient); }

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* decode the action and build client c's CMD datagram (c->cmd_pkt) for this step */
static void build_cmd(BpvClient *c, const float *action, uint32_t repeat)
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
}

/* a refused send (ICMP from an earlier datagram, full buffer) is not fatal here: the
 * client stays unanswered and Python's loop re-sends and checks the server */
static void send_own(const BpvClient *c) { (void)send(c->fd, c->cmd_pkt, BPV_CMD_BYTES, MSG_DONTWAIT); }

/* ------------------------------------------------------------ batches */
/* one BATCH being filled for one socket */
typedef struct {
    int fd;
    uint16_t k;
    uint8_t buf[BATCH_HEAD_BYTES + BP_BATCH_MAX * BATCH_ITEM_BYTES];
} Outgoing;

typedef struct {
    Outgoing o[BPV_MAX_BFD];
    int n;
} Outbox;

static void flush_batch(Outgoing *o, BpvBatch *b)
{
    if (o->k == 0) {
        return;
    }
    NetHeader h = {BP_MAGIC, BP_PROTO_VERSION, BP_PKT_BATCH, b->seq, 0};
    NetBatch nb = {o->k, 0, b->seq++};
    memcpy(o->buf, &h, sizeof h);
    memcpy(o->buf + sizeof h, &nb, sizeof nb);
    (void)send(o->fd, o->buf, BATCH_HEAD_BYTES + (size_t)o->k * BATCH_ITEM_BYTES, MSG_DONTWAIT);
    b->sent++;
    o->k = 0;
}

/* Client c's CMD (built) into the BATCH of its socket, sending that BATCH once full; on
 * its own fd when it cannot go batched (no batching, a row beyond a tag, too many
 * sockets). */
static void post(Outbox *box, BpvClient *c, BpvBatch *b)
{
    ptrdiff_t row = b != NULL ? c - b->clients : -1;
    if (b == NULL || c->bfd < 0 || row < 0 || row >= (ptrdiff_t)b->n_clients || row > 0xFFFF) {
        send_own(c);
        return;
    }
    Outgoing *o = NULL;
    for (int j = 0; j < box->n && o == NULL; j++) {
        o = box->o[j].fd == c->bfd ? &box->o[j] : NULL;
    }
    if (o == NULL) {
        if (box->n == BPV_MAX_BFD) {
            send_own(c);
            return;
        }
        o = &box->o[box->n++];
        o->fd = c->bfd;
        o->k = 0;
    }
    uint8_t *it = o->buf + BATCH_HEAD_BYTES + (size_t)o->k * BATCH_ITEM_BYTES;
    NetBatchItem bi = {c->arena_id, (uint16_t)row, (uint8_t)c->slot, 0};
    memcpy(it, &bi, sizeof bi);
    memcpy(it + sizeof bi, c->cmd_pkt, BPV_CMD_BYTES);
    o->k++;
    uint32_t cap = b->max_items == 0 || b->max_items > BP_BATCH_MAX ? BP_BATCH_MAX : b->max_items;
    if (o->k >= cap) {
        flush_batch(o, b);
    }
}

static void flush_all(Outbox *box, BpvBatch *b)
{
    for (int j = 0; j < box->n; j++) {
        flush_batch(&box->o[j], b);
    }
}

/* ------------------------------------------------------------ receiving */
/* 1 if the datagram (len bytes) is the SNAPSHOT answering client c's step: its input
 * built, its reward computed (rw, when rewarded), c's state moved on, BPV_DONE;
 * otherwise 0 and counted in c->skipped (stale, another match, malformed, non-finite) */
static int take_snapshot(BpvClient *c, const uint8_t *buf, size_t len, int layout, float *input,
                  const BpRewardWeights *rw)
{
    SnapshotPacket sp;
    if (len != sizeof sp) {
        c->skipped++;
        return 0;
    }
    memcpy(&sp, buf, sizeof sp);
    if (sp.hdr.magic != BP_MAGIC || sp.hdr.version != BP_PROTO_VERSION || sp.hdr.type != BP_PKT_SNAPSHOT ||
        sp.match.match_id != c->match_id || !(sp.hdr.tick >= c->target || sp.match.phase == BP_PHASE_OVER)) {
        c->skipped++;
        return 0;
    }
    if (bp_input_from_snapshot(buf, sizeof sp, c->slot, layout, &c->cmd, input) != BP_OBS_OK) {
        c->skipped++; /* non-finite float: Python's parser refuses it too */
        return 0;
    }
    if (rw != NULL && c->rewarded) {
        SnapshotPacket prev;
        memcpy(&prev, c->snap, sizeof prev);
        c->reward = bp_reward_step(&prev, &sp, c->slot, (int32_t)(sp.hdr.tick - prev.hdr.tick), rw, &c->rstate,
                                   c->tiers);
    }
    memcpy(c->snap, buf, sizeof sp);
    c->tick = sp.hdr.tick;
    c->status = BPV_DONE;
    return 1;
}

/* read what client c has queued on its own fd; 1 once the snapshot answering its step is in */
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
        if (take_snapshot(c, buf, (size_t)n, layout, input, rw)) {
            return 1;
        }
    }
}

/* The row of b->clients that BATCH_SNAP item `it` (read on socket fd) answers, or -1:
 * its tag when that row holds the seat, else a search (a tag never lies, but a row may
 * have been re-admitted with another seat since). */
static long item_row(const BpvBatch *b, int fd, const NetBatchItem *it)
{
    const BpvClient *all = b->clients;
    if (it->tag < b->n_clients) {
        const BpvClient *c = &all[it->tag];
        if (c->bfd == fd && c->arena_id == it->arena_id && c->slot == (int32_t)it->slot) {
            return it->tag;
        }
    }
    for (uint32_t r = 0; r < b->n_clients; r++) {
        if (all[r].bfd == fd && all[r].arena_id == it->arena_id && all[r].slot == (int32_t)it->slot) {
            return (long)r;
        }
    }
    return -1;
}

/* Read every BATCH_SNAP queued on socket fd and take each answer for a pending client
 * (any row of b's array); the rows in [lo, lo + n) taken go to rows[*got ...] as
 * indices from lo.  0, or -1 (errno in *err) on a receive error. */
static int drain_batch(int fd, BpvBatch *b, int layout, const BpRewardWeights *rw, ptrdiff_t lo, int n,
                       int32_t *rows, int *got, int *err)
{
    uint8_t buf[BATCH_RX_BYTES];
    const int dim = bp_input_dim(layout);
    for (;;) {
        ssize_t len = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (len < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNREFUSED) {
                return 0;
            }
            *err = errno;
            return -1;
        }
        NetHeader h;
        NetBatch nb;
        if ((size_t)len < BATCH_HEAD_BYTES) {
            b->refused++;
            continue;
        }
        memcpy(&h, buf, sizeof h);
        memcpy(&nb, buf + sizeof h, sizeof nb);
        if (h.magic != BP_MAGIC || h.version != BP_PROTO_VERSION || h.type != BP_PKT_BATCH_SNAP ||
            nb.count > BP_BATCH_MAX || (size_t)len != BATCH_HEAD_BYTES + (size_t)nb.count * SNAP_ITEM_BYTES) {
            b->refused++;
            continue;
        }
        b->replies++;
        for (int i = 0; i < nb.count; i++) {
            const uint8_t *p = buf + BATCH_HEAD_BYTES + (size_t)i * SNAP_ITEM_BYTES;
            NetBatchItem it;
            memcpy(&it, p, sizeof it);
            long r = item_row(b, fd, &it);
            if (r < 0) {
                b->refused++;
                continue;
            }
            BpvClient *c = &b->clients[r];
            if (c->status != BPV_PENDING) {
                c->skipped++; /* a late or repeated answer */
                continue;
            }
            if (!take_snapshot(c, p + sizeof it, sizeof(SnapshotPacket), layout, b->inputs + (size_t)r * (size_t)dim, rw)) {
                continue;
            }
            b->items++;
            if (r >= lo && r < lo + n) {
                rows[(*got)++] = (int32_t)(r - lo);
            }
        }
    }
}

static int is_batched(const BpvClient *c, const BpvBatch *b) { return b != NULL && c->bfd >= 0; }

void bpv_send(BpvClient *c, int n, const float *actions, uint32_t repeat, BpvBatch *b)
{
    Outbox box;
    box.n = 0; /* (not zeroed: 50 KB per call; only the used part is written) */
    for (int i = 0; i < n; i++) {
        if (!c[i].active) {
            c[i].status = BPV_IDLE;
            continue;
        }
        c[i].target = c[i].tick + repeat;
        c[i].status = BPV_PENDING;
        c[i].err = 0;
        build_cmd(&c[i], actions + (size_t)i * BP_ACT_DIM, repeat);
        post(&box, &c[i], b);
    }
    flush_all(&box, b);
}

int bpv_ready(BpvClient *c, int n, int layout, float *inputs, uint32_t spin_us, uint32_t budget_us,
              int32_t *rows, const BpRewardWeights *rw, BpvBatch *b)
{
    const int dim = bp_input_dim(layout);
    if (dim <= 0 || n <= 0 || c == NULL || inputs == NULL || rows == NULL) {
        return -1;
    }
    if (b != NULL && (b->clients == NULL || b->inputs == NULL || c < b->clients ||
                      c + n > b->clients + b->n_clients)) {
        return -1; /* the rows must lie in the batch's array */
    }
    const ptrdiff_t lo = b != NULL ? c - b->clients : 0;
    const double t0 = now_us();
    struct pollfd pfd[BPV_MAX_POLL];
    for (;;) {
        int m = 0, got = 0, nb = 0;
        int bfds[BPV_MAX_BFD];
        for (int i = 0; i < n; i++) { /* the batch sockets first: they answer most clients */
            if (c[i].status != BPV_PENDING || !is_batched(&c[i], b)) {
                continue;
            }
            int seen = 0;
            for (int j = 0; j < nb; j++) {
                seen |= bfds[j] == c[i].bfd;
            }
            if (!seen && nb < BPV_MAX_BFD) {
                bfds[nb++] = c[i].bfd;
            }
        }
        for (int j = 0; j < nb; j++) {
            int err = 0;
            if (drain_batch(bfds[j], b, layout, rw, lo, n, rows, &got, &err) < 0) {
                for (int i = 0; i < n; i++) { /* Python's loop reports it with context */
                    if (c[i].status == BPV_PENDING && c[i].bfd == bfds[j]) {
                        c[i].err = err;
                    }
                }
                return got > 0 ? got : -2;
            }
            if (m < BPV_MAX_POLL) {
                pfd[m++] = (struct pollfd){bfds[j], POLLIN, 0};
            }
        }
        int pending = 0;
        for (int i = 0; i < n; i++) {
            if (c[i].status != BPV_PENDING) {
                continue;
            }
            if (is_batched(&c[i], b)) {
                pending++;
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
            pending++;
            if (m < BPV_MAX_POLL) {
                pfd[m++] = (struct pollfd){c[i].fd, POLLIN, 0};
            }
        }
        if (got > 0) {
            return got;
        }
        if (pending == 0) {
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

int bpv_resend(BpvClient *c, int n, BpvBatch *b)
{
    Outbox box;
    box.n = 0; /* (not zeroed: 50 KB per call; only the used part is written) */
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (c[i].status == BPV_PENDING) {
            post(&box, &c[i], b);
            k++;
        }
    }
    flush_all(&box, b);
    return k;
}

int bpv_step(BpvClient *c, int n, const float *actions, uint32_t repeat, int layout, float *inputs,
             uint32_t spin_us, uint32_t budget_us, const BpRewardWeights *rw, BpvBatch *b)
{
    if (bp_input_dim(layout) <= 0 || n < 0 || (n > 0 && (c == NULL || actions == NULL || inputs == NULL))) {
        return -1;
    }
    int32_t rows[BPV_MAX_POLL];
    bpv_send(c, n, actions, repeat, b);
    for (int k = 0; k < n; k += BPV_MAX_POLL) { /* rows[] holds at most BPV_MAX_POLL */
        int m = n - k < BPV_MAX_POLL ? n - k : BPV_MAX_POLL;
        while (bpv_ready(c + k, m, layout, inputs + (size_t)k * bp_input_dim(layout), spin_us,
                         budget_us, rows, rw, b) > 0) {
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
