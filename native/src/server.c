/*
 * server.c — brawlpit_server: the BRAWLPIT UDP game server.
 *
 *   brawlpit_server --port N [--host 127.0.0.1] [--mode lockstep|fastforward|realtime]
 *                   [--speed X] [--cpu-level L] [--seed N] [--spin-us N] [--quiet]
 *   brawlpit_server --help      (usage and one line per option on stdout, exit 0)
 *
 * --spin-us N (lockstep): after each burst of datagrams, busy-poll up to N µs
 * for the next one before blocking in ppoll.  A lockstep round trip is
 * dominated by waking a sleeping process (on a VM, ~25 µs against ~10 µs
 * when the server is still awake); a client that answers within the window
 * skips that.  Costs up to N µs of CPU per step, so it only pays where a core
 * is spare: brawlkit turns it on only while the envs leave one core free
 * (its server launcher's auto_spin_us).  0 (the default) always blocks.
 *
 * Prints exactly one line `listening <port>` on stdout once bound (port 0 =
 * the kernel picks one), then serves until SIGTERM/SIGINT or until its parent
 * process dies.  A `stats rx=.. tx=.. dropped=.. <reason>=..` line goes to
 * stderr on SIGUSR1 and on exit.
 *
 * ======================================================================
 * WIRE FORMAT — the normative text is the top comment of brawlpit.h (and
 * docs/protocol.md); this is the server's reading of it, in the spirit of Quake
 * III's net_chan.c.
 * ======================================================================
 * Every datagram: NetHeader {u16 magic 0xB17E, u8 version, u8 type, u32 seq,
 * u32 tick}, little-endian, packed; then exactly one payload:
 *
 *   HELLO    20 B  {u8 want_slot (0, 1, 255 = any), u8 reserved[3], u32 nonce}
 *   WELCOME  36 B  {u32 session, u32 nonce (echo), u32 match_id, u8 slot,
 *                   u8 mode, u8 cpu_level, u8 stocks, u16 tick_hz, u16 0,
 *                   u32 match_ticks}
 *   CMD      40 B  UserCmd {u32 session, u32 tick, u32 cmd_seq, f32 stick_x,
 *                   f32 stick_y, u32 buttons, u8 slot, u8 repeat, u16 0}
 *   SNAPSHOT 92 B  MatchState {u32 match_id, u32 ticks_left, u8 phase,
 *                   u8 winner, u8 n_players, u8 mode, u32 ack_cmd_seq}
 *                   + NetPlayer[2] (32 B each)
 *   BYE      16 B  {u32 session}
 *   RESET    24 B  {u32 session, u32 seed, u8 cpu_level, u8 reserved[3]}
 *   ERROR    52 B  {u16 code, u16 0, char text[36] NUL-padded}
 *
 * Header fields written by the server: seq = its own packet counter (one
 * sequence over all packets it sends), tick = bp_sim_tick (ticks simulated
 * in the current match).  Client seq/tick in the header are not interpreted
 * (the UserCmd carries the tick that matters).
 *
 * Validation, in order (first failure = drop, counted by reason):
 *   len < 12 (bad_len) | magic (bad_magic) | version (bad_version) |
 *   type not HELLO/CMD/BYE/RESET (bad_type) | len != size of type (bad_len) |
 *   sender address not joined (not_joined; HELLO excepted) |
 *   session != the sender's token (bad_session) |
 *   CMD: slot != sender's slot (bad_slot), repeat not in 1..BP_MAX_REPEAT
 *   (bad_repeat), non-finite stick (bad_stick), tick > current +
 *   BP_MAX_CMD_LEAD (bad_tick), per-slot queue full (queue_full).
 *   Finite sticks are clamped to [-1, 1]; unknown button bits are masked.
 *   A CMD whose cmd_seq is not newer than the last one accepted from that
 *   slot in this match (retransmit) or that ends before the current tick is
 *   not queued (counted as dup / stale, not as drops) but, in lockstep or
 *   while not playing, still answered with a SNAPSHOT.
 * ERROR replies (at most one per packet, globally rate-limited, never for
 * garbage): HELLO that cannot be served (BP_ERR_FULL / BP_ERR_BAD_SLOT),
 * RESET with a wrong session from a joined address (BP_ERR_BAD_SESSION) or a
 * bad cpu_level (BP_ERR_BAD_REQUEST).
 *
 * Match flow: phase WAITING until both slots are filled (clients and/or the
 * CPU in slot 1); then PLAYING; OVER at the end (the final snapshot is
 * re-sent in answer to every CMD until a RESET).  RESET(seed, cpu_level)
 * restarts at tick 0 with match_id + 1, clears the command queues and the
 * per-slot cmd_seq/ack state (so a client may restart cmd_seq per match) and
 * sends a SNAPSHOT to every client.  A join or BYE also sends every client a
 * SNAPSHOT (phase change).  If a slot empties mid-match the match pauses
 * (WAITING) until it is filled again.
 *
 * Modes:
 *   lockstep     tick t is simulated when every client-held slot has a queued
 *                command with tick <= t < tick+repeat, or whose first queued
 *                command starts after t (neutral input: an input delay).  The
 *                CPU needs no commands.  Whenever the server stops to wait
 *                after advancing, every client gets one SNAPSHOT (tick = the
 *                next tick to simulate); a CMD that does not let it advance
 *                is answered with a SNAPSHOT to its sender only.
 *   fastforward  free-running at speed x 60 Hz (--speed 0 = unpaced), each
 *                slot's latest command held until replaced (tick/repeat only
 *                validated), a SNAPSHOT to every client after every tick.
 *   realtime     the same at 60 Hz.
 * MatchState.ack_cmd_seq = last cmd_seq whose input was applied to a tick,
 * for the receiving client's slot.  n_players = filled slots (clients + CPU).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cpu.h"
#include "sim.h"

#define QCAP 128
#define RX_BURST 256
#define ERR_RATE 50.0 /* ERROR packets per second (token bucket) */
#define IDLE_WAIT_NS 200000000LL     /* idle: wake up this often to check the parent */
#define PARENT_CHECK_NS 200000000LL  /* how often to check that the parent lives */
#define MAX_TICK_BURST 64            /* free-run: most ticks caught up in one go */
#define RESYNC_PERIODS 100           /* free-run: this far behind, drop the backlog */

enum {
    D_BAD_LEN,
    D_BAD_MAGIC,
    D_BAD_VERSION,
    D_BAD_TYPE,
    D_NOT_JOINED,
    D_BAD_SESSION,
    D_BAD_SLOT,
    D_BAD_REPEAT,
    D_BAD_STICK,
    D_BAD_TICK,
    D_QUEUE_FULL,
    D_BAD_REQUEST,
    D_HELLO_REFUSED,
    D_COUNT
};
static const char *D_NAMES[D_COUNT] = {"bad_len",     "bad_magic",  "bad_version", "bad_type",   "not_joined",
                                       "bad_session", "bad_slot",   "bad_repeat",  "bad_stick",  "bad_tick",
                                       "queue_full",  "bad_request", "hello_refused"};

typedef struct {
    int active;
    struct sockaddr_in addr;
    uint32_t session, nonce;
    UserCmd q[QCAP];
    unsigned qhead, qlen;
    int have_seq;
    uint32_t last_seq; /* newest cmd_seq accepted this match */
    uint32_t ack;      /* last cmd_seq applied to a tick */
    int have_held;     /* fastforward / realtime: latest command */
    UserCmd held;
} Client;

static struct {
    int fd, mode, quiet, cpu_level;
    double speed;
    int64_t spin_ns; /* lockstep: busy-poll this long after a datagram before blocking */
    uint32_t seed, match_id, tx_seq, tok_rng;
    BpSim *sim;
    BpCpu *cpu;
    Client cl[2];
    uint64_t rx, tx, tx_fail, dropped, dup, stale, cnt[D_COUNT];
    double err_tokens, err_last;
    pid_t ppid;
} S;

static volatile sig_atomic_t g_stop, g_stats;
static void on_signal(int sig) {
    if (sig == SIGUSR1)
        g_stats = 1;
    else
        g_stop = 1;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void logf_(const char *fmt, ...) {
    if (S.quiet) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "brawlpit_server: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void print_stats(void) {
    fprintf(stderr, "stats rx=%llu tx=%llu dropped=%llu", (unsigned long long)S.rx, (unsigned long long)S.tx,
            (unsigned long long)S.dropped);
    for (int i = 0; i < D_COUNT; i++) fprintf(stderr, " %s=%llu", D_NAMES[i], (unsigned long long)S.cnt[i]);
    fprintf(stderr, " dup=%llu stale=%llu tx_fail=%llu tick=%u match_id=%u\n", (unsigned long long)S.dup,
            (unsigned long long)S.stale, (unsigned long long)S.tx_fail, bp_sim_tick(S.sim), S.match_id);
    fflush(stderr);
}

static void drop(int reason) {
    S.dropped++;
    S.cnt[reason]++;
}

/* session tokens: from their own xorshift32 stream (seeded from the clock and
 * the pid in main), not part of the deterministic match */
static uint32_t new_session(void) {
    uint32_t t;
    do {
        uint32_t a = bp_xorshift32(&S.tok_rng);
        uint32_t b = bp_xorshift32(&S.tok_rng);
        t = a ^ (b << 7);
    } while (t == 0 || (S.cl[0].active && t == S.cl[0].session) || (S.cl[1].active && t == S.cl[1].session));
    return t;
}

/* ------------------------------------------------------------ sending */
static void send_raw(const struct sockaddr_in *to, const void *buf, size_t len) {
    ssize_t n = sendto(S.fd, buf, len, 0, (const struct sockaddr *)to, sizeof *to);
    if (n == (ssize_t)len)
        S.tx++;
    else
        S.tx_fail++;
}

static void fill_header(NetHeader *h, uint8_t type) {
    h->magic = BP_MAGIC;
    h->version = BP_PROTO_VERSION;
    h->type = type;
    h->seq = S.tx_seq++;
    h->tick = bp_sim_tick(S.sim);
}

static int slot_filled(int slot) { return S.cl[slot].active || (slot == 1 && S.cpu); }
static int all_filled(void) { return slot_filled(0) && slot_filled(1); }
static int n_players(void) { return slot_filled(0) + slot_filled(1); }
static int playing(void) { return all_filled() && bp_sim_phase(S.sim) == BP_PHASE_PLAYING; }

static void send_snapshot(int slot) {
    Client *c = &S.cl[slot];
    if (!c->active) return;
    uint8_t buf[sizeof(SnapshotPacket)];
    size_t n = bp_sim_snapshot(S.sim, S.tx_seq++, (uint8_t)n_players(), (uint8_t)S.mode, c->ack, buf, sizeof buf);
    if (!all_filled() && bp_sim_phase(S.sim) == BP_PHASE_PLAYING) {
        SnapshotPacket *p = (SnapshotPacket *)buf;
        p->match.phase = BP_PHASE_WAITING;
    }
    send_raw(&c->addr, buf, n);
}

static void broadcast_snapshot(void) {
    for (int i = 0; i < 2; i++) send_snapshot(i);
}

static void send_error(const struct sockaddr_in *to, uint16_t code, const char *text) {
    double t = now_s();
    S.err_tokens += (t - S.err_last) * ERR_RATE;
    S.err_last = t;
    if (S.err_tokens > ERR_RATE) S.err_tokens = ERR_RATE;
    if (S.err_tokens < 1.0) return;
    S.err_tokens -= 1.0;
    struct {
        NetHeader h;
        NetError e;
    } __attribute__((packed)) p;
    memset(&p, 0, sizeof p);
    fill_header(&p.h, BP_PKT_ERROR);
    p.e.code = code;
    strncpy(p.e.text, text, BP_ERROR_TEXT_LEN - 1);
    send_raw(to, &p, sizeof p);
}

static void send_welcome(int slot) {
    Client *c = &S.cl[slot];
    struct {
        NetHeader h;
        NetWelcome w;
    } __attribute__((packed)) p;
    memset(&p, 0, sizeof p);
    fill_header(&p.h, BP_PKT_WELCOME);
    p.w.session = c->session;
    p.w.nonce = c->nonce;
    p.w.match_id = S.match_id;
    p.w.slot = (uint8_t)slot;
    p.w.mode = (uint8_t)S.mode;
    p.w.cpu_level = (uint8_t)(S.cpu ? bp_cpu_level(S.cpu) : 0);
    p.w.stocks = BP_STOCKS;
    p.w.tick_hz = BP_TICK_HZ;
    p.w.match_ticks = BP_MATCH_TICKS;
    send_raw(&c->addr, &p, sizeof p);
}

/* ------------------------------------------------------------ match control */
static void clear_cmds(Client *c) {
    c->qhead = c->qlen = 0;
    c->have_seq = 0;
    c->last_seq = 0;
    c->ack = 0;
    c->have_held = 0;
}

static int64_t g_next_tick_ns;

static int set_cpu(int level) {
    if (level == BP_CPU_KEEP) return 0;
    if (level == BP_CPU_NONE) {
        bp_cpu_destroy(S.cpu);
        S.cpu = NULL;
        S.cpu_level = 0;
        return 0;
    }
    if (level < BP_CPU_LEVEL_MIN || level > BP_CPU_LEVEL_MAX) return -1;
    if (S.cl[1].active) return -1;
    bp_cpu_destroy(S.cpu);
    S.cpu = bp_cpu_create(level, bp_cpu_match_seed(S.seed));
    S.cpu_level = level;
    return S.cpu ? 0 : -1;
}

static void start_match(uint32_t seed, uint32_t match_id) {
    S.seed = seed;
    S.match_id = match_id;
    bp_sim_reset(S.sim, seed, match_id);
    if (S.cpu) bp_cpu_reset(S.cpu, bp_cpu_match_seed(seed));
    for (int i = 0; i < 2; i++) clear_cmds(&S.cl[i]);
    g_next_tick_ns = now_ns();
}

/* ------------------------------------------------------------ lockstep */
static void q_pop(Client *c) {
    c->qhead = (c->qhead + 1) % QCAP;
    c->qlen--;
}
static UserCmd *q_front(Client *c) { return &c->q[c->qhead]; }

/* Input for tick t from slot's queue: 1 = ready (input, applied seq set), 0 = wait. */
static int ls_peek(Client *c, uint32_t t, BpInput *in, int *applied, uint32_t *seq) {
    while (c->qlen) {
        UserCmd *f = q_front(c);
        if ((uint64_t)f->tick + f->repeat <= t)
            q_pop(c);
        else
            break;
    }
    if (!c->qlen) return 0;
    UserCmd *f = q_front(c);
    if (f->tick > t) {
        *in = (BpInput){0.0f, 0.0f, 0u};
        *applied = 0;
        return 1;
    }
    *in = (BpInput){f->stick_x, f->stick_y, f->buttons};
    *applied = 1;
    *seq = f->cmd_seq;
    return 1;
}

static int ls_advance(void) {
    int n = 0;
    while (playing()) {
        uint32_t t = bp_sim_tick(S.sim);
        BpInput in[2] = {{0, 0, 0}, {0, 0, 0}};
        int applied[2] = {0, 0};
        uint32_t seq[2] = {0, 0};
        int ok = 1;
        for (int i = 0; i < 2 && ok; i++)
            if (S.cl[i].active) ok = ls_peek(&S.cl[i], t, &in[i], &applied[i], &seq[i]);
        if (!ok) break;
        if (S.cpu && !S.cl[1].active) in[1] = bp_cpu_think(S.cpu, S.sim, 1);
        bp_sim_step(S.sim, in);
        for (int i = 0; i < 2; i++)
            if (applied[i]) S.cl[i].ack = seq[i];
        n++;
    }
    return n;
}

/* ------------------------------------------------------------ packet handlers */
static int find_client(const struct sockaddr_in *a) {
    for (int i = 0; i < 2; i++)
        if (S.cl[i].active && S.cl[i].addr.sin_port == a->sin_port && S.cl[i].addr.sin_addr.s_addr == a->sin_addr.s_addr)
            return i;
    return -1;
}

static void handle_hello(const struct sockaddr_in *from, const uint8_t *buf) {
    NetHello h;
    memcpy(&h, buf + sizeof(NetHeader), sizeof h);
    int slot = find_client(from);
    if (slot >= 0) { /* lost WELCOME: send it again */
        S.cl[slot].nonce = h.nonce;
        send_welcome(slot);
        return;
    }
    int want = h.want_slot;
    if (want != 0 && want != 1 && want != BP_SLOT_ANY) {
        drop(D_HELLO_REFUSED);
        send_error(from, BP_ERR_BAD_SLOT, "bad slot (want 0, 1 or 255)");
        return;
    }
    if (want == BP_SLOT_ANY) {
        if (!slot_filled(0))
            slot = 0;
        else if (!slot_filled(1))
            slot = 1;
        else {
            drop(D_HELLO_REFUSED);
            send_error(from, BP_ERR_FULL, "server full");
            return;
        }
    } else {
        if (want == 1 && S.cpu) {
            drop(D_HELLO_REFUSED);
            send_error(from, BP_ERR_BAD_SLOT, "slot 1 is the CPU");
            return;
        }
        if (S.cl[want].active) {
            drop(D_HELLO_REFUSED);
            send_error(from, BP_ERR_FULL, "slot taken");
            return;
        }
        slot = want;
    }
    Client *c = &S.cl[slot];
    memset(c, 0, sizeof *c);
    c->active = 1;
    c->addr = *from;
    c->session = new_session();
    c->nonce = h.nonce;
    clear_cmds(c);
    send_welcome(slot);
    logf_("slot %d joined from %s:%u", slot, inet_ntoa(from->sin_addr), ntohs(from->sin_port));
    g_next_tick_ns = now_ns();
    if (S.mode == BP_MODE_LOCKSTEP) ls_advance();
    broadcast_snapshot();
}

static int auth(const struct sockaddr_in *from, uint32_t session, int *slot) {
    *slot = find_client(from);
    if (*slot < 0) {
        drop(D_NOT_JOINED);
        return 0;
    }
    if (session != S.cl[*slot].session) {
        drop(D_BAD_SESSION);
        return 0;
    }
    return 1;
}

static void handle_cmd(const struct sockaddr_in *from, const uint8_t *buf) {
    UserCmd u;
    memcpy(&u, buf + sizeof(NetHeader), sizeof u);
    int slot;
    if (!auth(from, u.session, &slot)) return;
    Client *c = &S.cl[slot];
    if (u.slot != slot) { drop(D_BAD_SLOT); return; }
    if (u.repeat < 1 || u.repeat > BP_MAX_REPEAT) { drop(D_BAD_REPEAT); return; }
    if (!isfinite(u.stick_x) || !isfinite(u.stick_y)) { drop(D_BAD_STICK); return; }
    uint32_t t = bp_sim_tick(S.sim);
    if ((uint64_t)u.tick > (uint64_t)t + BP_MAX_CMD_LEAD) { drop(D_BAD_TICK); return; }
    u.stick_x = u.stick_x < -1.0f ? -1.0f : (u.stick_x > 1.0f ? 1.0f : u.stick_x);
    u.stick_y = u.stick_y < -1.0f ? -1.0f : (u.stick_y > 1.0f ? 1.0f : u.stick_y);
    u.buttons &= BP_BTN_MASK;

    int fresh = !c->have_seq || (int32_t)(u.cmd_seq - c->last_seq) > 0;
    if (bp_sim_phase(S.sim) != BP_PHASE_PLAYING) { /* over: answer with the final snapshot */
        if (fresh) {
            c->have_seq = 1;
            c->last_seq = u.cmd_seq;
        } else {
            S.dup++;
        }
        send_snapshot(slot);
        return;
    }
    if (S.mode == BP_MODE_LOCKSTEP) {
        int queued = 0;
        if (!fresh)
            S.dup++;
        else if ((uint64_t)u.tick + u.repeat <= t)
            S.stale++;
        else if (c->qlen >= QCAP)
            drop(D_QUEUE_FULL);
        else {
            c->q[(c->qhead + c->qlen) % QCAP] = u;
            c->qlen++;
            queued = 1;
        }
        if (fresh) {
            c->have_seq = 1;
            c->last_seq = u.cmd_seq;
        }
        int n = queued ? ls_advance() : 0;
        if (n > 0)
            broadcast_snapshot();
        else
            send_snapshot(slot);
        return;
    }
    /* fastforward / realtime: hold the newest command */
    if (fresh) {
        c->have_seq = 1;
        c->last_seq = u.cmd_seq;
        c->held = u;
        c->have_held = 1;
    } else {
        S.dup++;
    }
    if (!playing()) send_snapshot(slot);
}

static void handle_bye(const struct sockaddr_in *from, const uint8_t *buf) {
    NetBye b;
    memcpy(&b, buf + sizeof(NetHeader), sizeof b);
    int slot;
    if (!auth(from, b.session, &slot)) return;
    memset(&S.cl[slot], 0, sizeof S.cl[slot]);
    logf_("slot %d left", slot);
    broadcast_snapshot();
}

static void handle_reset(const struct sockaddr_in *from, const uint8_t *buf) {
    NetReset r;
    memcpy(&r, buf + sizeof(NetHeader), sizeof r);
    int slot = find_client(from);
    if (slot < 0) { drop(D_NOT_JOINED); return; }
    if (r.session != S.cl[slot].session) {
        drop(D_BAD_SESSION);
        send_error(from, BP_ERR_BAD_SESSION, "bad session");
        return;
    }
    int lvl = r.cpu_level;
    int valid = lvl == BP_CPU_KEEP || lvl == BP_CPU_NONE || (lvl >= BP_CPU_LEVEL_MIN && lvl <= BP_CPU_LEVEL_MAX);
    if (!valid || (lvl >= BP_CPU_LEVEL_MIN && lvl <= BP_CPU_LEVEL_MAX && S.cl[1].active)) {
        drop(D_BAD_REQUEST);
        send_error(from, BP_ERR_BAD_REQUEST, valid ? "slot 1 held by a client" : "bad cpu_level");
        return;
    }
    S.seed = r.seed;
    set_cpu(lvl);
    start_match(r.seed, S.match_id + 1);
    logf_("reset by slot %d: match %u seed %u cpu %d", slot, S.match_id, r.seed, S.cpu_level);
    if (S.mode == BP_MODE_LOCKSTEP) ls_advance(); /* no-op: queues are empty */
    broadcast_snapshot();
}

static void handle_packet(const struct sockaddr_in *from, const uint8_t *buf, size_t len) {
    S.rx++;
    if (len < sizeof(NetHeader)) { drop(D_BAD_LEN); return; }
    NetHeader h;
    memcpy(&h, buf, sizeof h);
    if (h.magic != BP_MAGIC) { drop(D_BAD_MAGIC); return; }
    if (h.version != BP_PROTO_VERSION) { drop(D_BAD_VERSION); return; }
    size_t want;
    switch (h.type) {
    case BP_PKT_HELLO:
        want = sizeof(NetHello);
        break;
    case BP_PKT_CMD:
        want = sizeof(UserCmd);
        break;
    case BP_PKT_BYE:
        want = sizeof(NetBye);
        break;
    case BP_PKT_RESET:
        want = sizeof(NetReset);
        break;
    default:
        { drop(D_BAD_TYPE); return; }
    }
    if (len != sizeof(NetHeader) + want) { drop(D_BAD_LEN); return; }
    switch (h.type) {
    case BP_PKT_HELLO:
        handle_hello(from, buf);
        break;
    case BP_PKT_CMD:
        handle_cmd(from, buf);
        break;
    case BP_PKT_BYE:
        handle_bye(from, buf);
        break;
    default:
        handle_reset(from, buf);
        break;
    }
}

/* ------------------------------------------------------------ free-running tick */
static void ff_tick(void) {
    BpInput in[2] = {{0, 0, 0}, {0, 0, 0}};
    for (int i = 0; i < 2; i++) {
        Client *c = &S.cl[i];
        if (c->active && c->have_held) {
            in[i] = (BpInput){c->held.stick_x, c->held.stick_y, c->held.buttons};
            c->ack = c->held.cmd_seq;
        }
    }
    if (S.cpu && !S.cl[1].active) in[1] = bp_cpu_think(S.cpu, S.sim, 1);
    bp_sim_step(S.sim, in);
    broadcast_snapshot();
}

/* ------------------------------------------------------------ serving */
/* Wait until the socket is readable, at most wait_ns; with spin, first
 * busy-poll until spin_until.  1 = readable, 0 = timeout or signal, -1 = error. */
static int wait_readable(int64_t wait_ns, int spin, int64_t spin_until) {
    struct timespec ts;
    ts.tv_sec = (time_t)(wait_ns / 1000000000LL);
    ts.tv_nsec = (long)(wait_ns % 1000000000LL);
    struct pollfd pfd = {S.fd, POLLIN, 0};
    int pr = 0;
    if (spin) {
        while ((pr = poll(&pfd, 1, 0)) == 0 && now_ns() < spin_until) {
        }
    }
    if (pr == 0) pr = ppoll(&pfd, 1, &ts, NULL);
    if (pr < 0 && errno != EINTR) {
        perror("ppoll");
        return -1;
    }
    return pr > 0 && (pfd.revents & POLLIN) ? 1 : 0;
}

/* handle up to RX_BURST queued datagrams */
static void drain_socket(void) {
    static uint8_t rbuf[2048];
    for (int k = 0; k < RX_BURST; k++) {
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        ssize_t n = recvfrom(S.fd, rbuf, sizeof rbuf, 0, (struct sockaddr *)&from, &fl);
        if (n < 0) break;
        if (fl < sizeof from || from.sin_family != AF_INET) {
            S.rx++;
            drop(D_BAD_LEN);
            continue;
        }
        handle_packet(&from, rbuf, (size_t)n);
    }
}

static void stats_if_asked(void) {
    if (g_stats) {
        g_stats = 0;
        print_stats();
    }
}

/* 0 once the parent process is gone (checked every PARENT_CHECK_NS) */
static int parent_alive(int64_t now, int64_t *last_check) {
    if (now - *last_check > PARENT_CHECK_NS) {
        *last_check = now;
        if (getppid() != S.ppid) {
            logf_("parent died, exiting");
            return 0;
        }
    }
    return 1;
}

/* lockstep: the sim advances only inside the packet handlers */
static void serve_lockstep(void) {
    int64_t last_parent_check = now_ns();
    int64_t last_rx_ns = 0;
    while (!g_stop) {
        int r = wait_readable(IDLE_WAIT_NS, S.spin_ns > 0, last_rx_ns + S.spin_ns);
        if (r < 0) break;
        if (r > 0) {
            drain_socket();
            last_rx_ns = now_ns();
        }
        stats_if_asked();
        if (!parent_alive(now_ns(), &last_parent_check)) break;
    }
}

/* free-run: the ticks due at `now` (period 0 = unpaced: one per wake-up) */
static void run_due_ticks(int64_t period, int64_t now) {
    if (period == 0) {
        ff_tick();
        return;
    }
    int burst = 0;
    while (playing() && now >= g_next_tick_ns && burst < MAX_TICK_BURST) {
        ff_tick();
        g_next_tick_ns += period;
        burst++;
    }
    if (now - g_next_tick_ns > RESYNC_PERIODS * period) g_next_tick_ns = now; /* fell far behind */
}

/* fastforward / realtime: tick on the clock, handle datagrams in between */
static void serve_free_run(void) {
    const int64_t period = S.speed > 0.0 ? (int64_t)(1e9 / (BP_TICK_HZ * S.speed)) : 0;
    int64_t last_parent_check = now_ns();
    while (!g_stop) {
        int64_t wait_ns = IDLE_WAIT_NS;
        if (playing()) {
            wait_ns = g_next_tick_ns - now_ns();
            if (wait_ns < 0) wait_ns = 0;
        }
        int r = wait_readable(wait_ns, 0, 0);
        if (r < 0) break;
        if (r > 0) drain_socket();
        stats_if_asked();
        int64_t now = now_ns();
        if (playing()) run_due_ticks(period, now);
        if (!parent_alive(now, &last_parent_check)) break;
    }
}

/* ------------------------------------------------------------ main */
#define ARGS_HELP (-1) /* parse_args: --help was printed */

static void usage(FILE *f, const char *argv0) {
    fprintf(f,
            "usage: %s --port N [--host 127.0.0.1] [--mode lockstep|fastforward|realtime]\n"
            "          [--speed X] [--cpu-level L] [--seed N] [--spin-us N] [--quiet]\n",
            argv0);
}

static int help(const char *argv0) {
    usage(stdout, argv0);
    fputs("The BRAWLPIT UDP game server (docs/protocol.md).  Prints `listening <port>` once bound.\n"
          "  --port N       UDP port, 0..65535; 0 lets the kernel choose (required)\n"
          "  --host A       IPv4 address to bind (default 127.0.0.1)\n"
          "  --mode M       lockstep (default), fastforward or realtime\n"
          "  --speed X      fastforward pace in multiples of 60 Hz, 0 = unpaced (default 1)\n"
          "  --cpu-level L  0 = no CPU (default); 1..8 = the built-in CPU takes slot 1\n"
          "  --seed N       seed of the first match (decimal, 0x hex or 0 octal; default 0)\n"
          "  --spin-us N    lockstep: busy-poll up to N us for the next command, 0..100000\n"
          "                 (default 0: always block)\n"
          "  --quiet        no log lines on stderr (the stats line is still printed)\n"
          "  -h, --help     print this help and exit\n",
          stdout);
    return ARGS_HELP;
}

static int parse_mode(const char *v) {
    if (!strcmp(v, "lockstep")) return BP_MODE_LOCKSTEP;
    if (!strcmp(v, "fastforward")) return BP_MODE_FASTFORWARD;
    if (!strcmp(v, "realtime")) return BP_MODE_REALTIME;
    return -1;
}

/* one option with its value into S / host / port; 0, or -1 if invalid */
static int parse_option(const char *a, const char *v, const char **host, long *port) {
    char *end = NULL;
    if (!strcmp(a, "--port")) {
        *port = strtol(v, &end, 10);
        return (*end || *port < 0 || *port > 65535) ? -1 : 0;
    }
    if (!strcmp(a, "--host")) {
        *host = v;
        return 0;
    }
    if (!strcmp(a, "--mode")) {
        S.mode = parse_mode(v);
        return S.mode < 0 ? -1 : 0;
    }
    if (!strcmp(a, "--speed")) {
        S.speed = strtod(v, &end);
        return (*end || !(S.speed >= 0.0) || S.speed > 1e6) ? -1 : 0;
    }
    if (!strcmp(a, "--spin-us")) {
        long us = strtol(v, &end, 10);
        S.spin_ns = (int64_t)us * 1000;
        return (*end || us < 0 || us > 100000) ? -1 : 0;
    }
    if (!strcmp(a, "--cpu-level")) {
        long l = strtol(v, &end, 10);
        S.cpu_level = (int)l;
        return (*end || l < 0 || l > BP_CPU_LEVEL_MAX) ? -1 : 0;
    }
    if (!strcmp(a, "--seed")) {
        S.seed = (uint32_t)strtoul(v, &end, 0);
        return *end ? -1 : 0;
    }
    return -1;
}

/* 0, ARGS_HELP after printing the help, or 2 after printing the usage */
static int parse_args(int argc, char **argv, const char **host, long *port) {
    S.mode = BP_MODE_LOCKSTEP;
    S.speed = 1.0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return help(argv[0]);
        if (!strcmp(argv[i], "--quiet")) {
            S.quiet = 1;
            continue;
        }
        if (i + 1 >= argc || parse_option(argv[i], argv[i + 1], host, port) != 0) {
            usage(stderr, argv[0]);
            return 2;
        }
        i++;
    }
    if (*port < 0) {
        usage(stderr, argv[0]);
        return 2;
    }
    if (S.mode == BP_MODE_REALTIME) S.speed = 1.0;
    return 0;
}

static void install_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* S.fd bound to host:port; *bound = the port the kernel gave.  0, 1 (socket or
 * bind failed) or 2 (bad host). */
static int open_socket(const char *host, long port, unsigned *bound) {
    S.fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (S.fd < 0) {
        perror("socket");
        return 1;
    }
    int buf = 1 << 20;
    setsockopt(S.fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    setsockopt(S.fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
        fprintf(stderr, "bad --host %s (IPv4 address expected)\n", host);
        return 2;
    }
    if (bind(S.fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        perror("bind");
        return 1;
    }
    socklen_t alen = sizeof addr;
    getsockname(S.fd, (struct sockaddr *)&addr, &alen);
    *bound = ntohs(addr.sin_port);
    return 0;
}

/* session tokens: unpredictable, not part of the deterministic match */
static void seed_tokens(void) {
    S.tok_rng = (uint32_t)now_ns() ^ ((uint32_t)getpid() << 16) ^ 0xA5A5F00Du;
    if (!S.tok_rng) S.tok_rng = 1;
    for (int i = 0; i < 8; i++) bp_xorshift32(&S.tok_rng);
}

static const char *mode_name(int mode) {
    return mode == BP_MODE_LOCKSTEP ? "lockstep" : (mode == BP_MODE_FASTFORWARD ? "fastforward" : "realtime");
}

int main(int argc, char **argv) {
    const char *host = "127.0.0.1";
    long port = -1;
    unsigned bound = 0;
    int rc = parse_args(argc, argv, &host, &port);
    if (rc != 0) return rc == ARGS_HELP ? 0 : rc;

    /* die with the parent (the Python launcher): no orphans */
    S.ppid = getppid();
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != S.ppid) return 0;
    prctl(PR_SET_TIMERSLACK, 1000UL);
    install_signals();
    if ((rc = open_socket(host, port, &bound)) != 0) return rc;

    seed_tokens();
    S.err_tokens = ERR_RATE;
    S.err_last = now_s();
    S.sim = bp_sim_create();
    if (!S.sim) return 1;
    if (S.cpu_level > 0 && set_cpu(S.cpu_level) != 0) return 1;
    start_match(S.seed, 1);

    printf("listening %u\n", bound);
    fflush(stdout);
    logf_("mode %s speed %g cpu %d seed %u", mode_name(S.mode), S.speed, S.cpu_level, S.seed);
    g_next_tick_ns = now_ns();
    if (S.mode == BP_MODE_LOCKSTEP)
        serve_lockstep();
    else
        serve_free_run();
    print_stats();
    bp_cpu_destroy(S.cpu);
    bp_sim_destroy(S.sim);
    close(S.fd);
    return 0;
}
