/*
 * server.c — brawlpit_server: the BRAWLPIT UDP game server.  One process, one
 * UDP socket, up to --max-arenas independent matches ("arenas").
 *
 *   brawlpit_server --port N [--host 127.0.0.1] [--mode lockstep|fastforward|realtime]
 *                   [--speed X] [--cpu-level L] [--seed N] [--spin-us N]
 *                   [--max-arenas N] [--client-timeout S] [--record DIR] [--quiet]
 *   brawlpit_server --help      (usage and one line per option on stdout, exit 0)
 *
 * --mode, --speed, --cpu-level and --seed are the defaults of the arenas that
 * clients create (a HELLO's BP_MODE_DEFAULT, BP_CPU_KEEP, speed 0, seed 0).
 * Each arena has its own sim, CPU, seed, mode, clients, queues and clock:
 * lockstep, fastforward and realtime arenas coexist, and a lockstep arena
 * ticks as soon as its own commands are in, never waiting for another.
 *
 * --spin-us N: after the last datagram, busy-poll (non-blocking recvmmsg) up
 * to N µs before blocking in ppoll.  A lockstep round trip is dominated by
 * waking a sleeping process (~22 µs on a VM); a client that answers within
 * the window skips that.  It spins only while datagrams keep coming and
 * blocks when idle; it costs a core while spinning, which pays when one
 * process serves many envs and the trainer keeps the other core.  0 (the
 * default) always blocks.  Spinning backs off by itself when the machine has no
 * core to spare: every SPIN_WINDOW_NS the server reads how often it was preempted
 * (getrusage's involuntary context switches) and how many threads the machine has
 * runnable right now (/proc/loadavg's "running" count, this one included); a spinning
 * window preempted more than SPIN_PREEMPT_MAX times, or more runnable threads than
 * cores it may use, means other work wants the cores, so it blocks for a back-off
 * (1 s, doubling to 8 s while the load lasts) and then tries again (spin_backoffs in
 * the stats line counts them).  The second signal catches what the first misses: a
 * server spinning on a core of its own while the trainer shares the other with the
 * load is never preempted, yet takes the core the trainer could have had.  A spinning server on a busy
 * machine only steals the core the trainer needs.  Blocking waits until the next tick of a playing
 * free-running arena or the next chore (parent check, client timeouts).
 *
 * --client-timeout S (default 120 s): a client silent for S seconds (no
 * datagram at all) loses its slot (clients_timed_out); an arena left with no
 * client is reclaimed at once (arenas_reclaimed), so are arenas whose last
 * client sent BYE.  0 = never.
 *
 * --record DIR: every match that simulated a tick is written as
 * DIR/<start_unix_ms>-a<arena>-m<match>.bpr (brawlpit.h BpReplayHeader, runs
 * of BpReplayRun, the final players; recorder.h) when it ends or is cut short
 * (RESET, a slot emptied, the arena reclaimed, shutdown).  Every tick goes
 * through arena_step, which records the inputs exactly as bp_sim_step gets
 * them.  A failed write is logged and counted (replays_failed), never fatal.
 *
 * Identity and spectators (docs/protocol.md): IDENT names a slot; PEER
 * packets (slot 0, slot 1) go to every client and spectator of the arena on a
 * join, a leave, a name change and every new match; an IDENT that changes
 * nothing is answered to its sender only.  A bad IDENT name / ticket is
 * dropped (bad_ident) with ERROR BAD_REQUEST.  Spectators (HELLO want_slot
 * BP_SLOT_SPECTATE, JOIN) sit in the address hash as seats 2..5 of their
 * arena, receive every broadcast, are refused CMD / RESET / IDENT (bad_slot,
 * ERROR BAD_SLOT), time out like clients and end with their arena.
 *
 * Prints exactly one line `listening <port>` on stdout once bound (port 0 =
 * the kernel picks one), then serves until SIGTERM/SIGINT or until its parent
 * process dies.  A `stats rx=.. tx=.. dropped=.. <reason>=..` line goes to
 * stderr on SIGUSR1 and on exit.
 *
 * ======================================================================
 * WIRE FORMAT (v2) — the normative text is docs/protocol.md (code form:
 * brawlpit.h); this is the server's reading of it, in the spirit of Quake
 * III's net_chan.c.
 * ======================================================================
 * Every datagram: NetHeader {u16 magic 0xB17E, u8 version 2, u8 type,
 * u32 seq, u32 tick}, little-endian, packed; then exactly one payload:
 *
 *   HELLO    32 B  {u8 want_slot (0, 1, 255 = any), u8 arena_op (0 create,
 *                   1 join, 2 any), u8 mode (255 = default), u8 cpu_level
 *                   (255 = default), u32 nonce, u32 arena_id (join), u32 seed
 *                   (create; 0 = default), f32 speed (create; 0 = default)}
 *   WELCOME  40 B  {u32 session, u32 nonce (echo), u32 match_id, u32 arena_id,
 *                   u8 slot, u8 mode, u8 cpu_level, u8 stocks, u16 tick_hz,
 *                   u16 0, u32 match_ticks}
 *   CMD      40 B  UserCmd {u32 session, u32 tick, u32 cmd_seq, f32 stick_x,
 *                   f32 stick_y, u32 buttons, u8 slot, u8 repeat, u16 0}
 *   SNAPSHOT 92 B  MatchState {u32 match_id, u32 ticks_left, u8 phase,
 *                   u8 winner, u8 n_players, u8 mode, u32 ack_cmd_seq}
 *                   + NetPlayer[2] (32 B each)
 *   BYE      16 B  {u32 session}
 *   IDENT   240 B  {u32 session, char name[32], char ticket[192]} NUL-padded
 *   PEER    244 B  {u32 arena_id, u8 slot, u8 kind, u16 0, char name[32],
 *                   char ticket[192]}
 *   RESET    28 B  {u32 session, u32 seed, u32 nonce, u8 cpu_level, u8 0[3]}
 *   ERROR    52 B  {u16 code, u16 0, char text[36] NUL-padded}
 *   BATCH    20 + k*48 B   {u16 count 1..128, u16 0, u32 batch_seq} + k x
 *                   ({u32 arena_id, u16 tag, u8 slot, u8 0} + a CMD datagram)
 *   BATCH_SNAP 20 + k*100 B  the same head (batch_seq echoed, count 0..128) + k x
 *                   ({arena_id, tag, slot, 0} + a SNAPSHOT datagram)
 *
 * A BATCH (handle_batch) is handled item by item as each CMD arriving from its seat's
 * own address (after checking the seat is held from the BATCH's IP, with that
 * session); the SNAPSHOTs those seats get meanwhile come back in one BATCH_SNAP, the
 * newest per seat.  A bad envelope is dropped whole (bad_len, bad_batch), a bad
 * item alone.
 *
 * Header fields written by the server: seq = its own packet counter (one
 * sequence over all packets it sends, all arenas), tick = ticks simulated in
 * the arena's current match (0 for an ERROR outside an arena).  Client
 * seq/tick in the header are not interpreted.
 *
 * Clients are known by address (ip:port; one session per address, looked up
 * in a hash); the session token must match.  HELLO from a seated address
 * re-sends its WELCOME (whatever the HELLO asks).  Otherwise: CREATE opens a
 * new arena (its mode, CPU, seed, speed from the HELLO or the defaults), JOIN
 * takes a slot of arena_id, ANY takes the oldest arena of the requested mode
 * with the wanted slot free, else creates one.  A slot held by the CPU is
 * taken.  RESET acts on the sender's arena; a RESET carrying the nonce of the
 * arena's last applied RESET is a retry: no new match, the sender gets the
 * current SNAPSHOT.  match_id counts per arena from 1.
 *
 * Validation, in order (first failure = drop, counted by reason):
 *   len < 12 or not IPv4 (bad_len) | magic (bad_magic) | version (bad_version;
 *   a v1 HELLO of exactly 20 bytes is answered with ERROR BP_ERR_VERSION in
 *   the v1 framing, which its client can read) | type not HELLO/CMD/BYE/RESET
 *   (bad_type) | len != size of type (bad_len) | sender address not seated
 *   (not_joined; HELLO excepted) | session != the sender's token
 *   (bad_session) | CMD: slot != sender's slot (bad_slot), repeat not in
 *   1..BP_MAX_REPEAT (bad_repeat), non-finite stick (bad_stick), tick >
 *   current + BP_MAX_CMD_LEAD (bad_tick), per-slot queue full (queue_full) |
 *   RESET: bad cpu_level (bad_request) | HELLO refused with an ERROR
 *   (hello_refused).  Finite sticks are clamped to [-1, 1]; unknown button
 *   bits are masked.  A CMD whose cmd_seq is not newer than the last one
 *   accepted from that slot in this match (retransmit) or that ends before
 *   the current tick is not queued (counted as dup / stale, not as drops)
 *   but, in lockstep or while not playing, still answered with a SNAPSHOT.
 * ERROR replies (at most one per packet, one token bucket for the whole
 * server, never for garbage): a HELLO that cannot be served, a RESET with a
 * wrong session from a seated address or a bad cpu_level, a v1 HELLO.
 *
 * Match flow, per arena: phase WAITING until both slots are filled (clients
 * and/or the CPU in slot 1); then PLAYING; OVER at the end (the final snapshot
 * is re-sent in answer to every CMD until a RESET).  RESET(seed, cpu_level,
 * nonce) restarts at tick 0 with match_id + 1, clears the command queues and
 * the per-slot cmd_seq/ack state and sends a SNAPSHOT to every client of the
 * arena.  A join, BYE or timeout also sends every remaining client a SNAPSHOT.
 * If a slot empties mid-match the match pauses (WAITING) until it is refilled.
 *
 * Modes (per arena):
 *   lockstep     tick t is simulated when every client-held slot has a queued
 *                command with tick <= t < tick+repeat, or whose first queued
 *                command starts after t (neutral input: an input delay).  The
 *                CPU needs no commands.  Whenever the arena stops to wait
 *                after advancing, its clients get one SNAPSHOT (tick = the
 *                next tick to simulate); a CMD that does not let it advance
 *                is answered with a SNAPSHOT to its sender only.
 *   fastforward  free-running at speed x 60 Hz (speed 0 = unpaced), each
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
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "arena.h"
#include "cpu.h"
#include "sim.h"
#include "udpio.h"

#define NS_PER_S 1000000000LL
#define ERR_RATE 50.0                /* ERROR packets per second (token bucket, burst as many) */
#define PARENT_CHECK_NS 200000000LL  /* how often to check that the parent lives */
#define SWEEP_MAX_NS 100000000LL     /* client timeouts are checked at least this often */
#define SWEEP_MIN_NS 1000000LL       /* ... and at most this often */
#define MAX_TICK_BURST 64            /* free-run: most ticks caught up in one go */
#define RESYNC_PERIODS 100           /* free-run: this far behind, drop the backlog */
#define SPEED_MAX 1e6                /* fastforward speed bound (multiples of 60 Hz) */
#define SPIN_US_MAX 100000           /* --spin-us bound, µs */
#define SPIN_WINDOW_NS 100000000LL   /* how often spinning checks it is not preempted */
#define SPIN_PREEMPT_MAX 5           /* involuntary switches per window that stop spinning */
#define SPIN_BACKOFF_MIN_NS 1000000000LL
#define SPIN_BACKOFF_MAX_NS 8000000000LL
#define CLIENT_TIMEOUT_S 120.0       /* --client-timeout default, seconds */
#define CLIENT_TIMEOUT_MAX_S 31536000.0 /* --client-timeout bound: a year */
#define DEFAULT_MAX_ARENAS 64        /* --max-arenas default */
#define PROTO_V1 1                   /* the previous protocol version ... */
#define V1_HELLO_BYTES 20            /* ... and its HELLO datagram: header + 8 bytes */

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
    D_BAD_IDENT,
    D_BAD_BATCH,
    D_COUNT
};
static const char *D_NAMES[D_COUNT] = {"bad_len",     "bad_magic",  "bad_version", "bad_type",   "not_joined",
                                       "bad_session", "bad_slot",   "bad_repeat",  "bad_stick",  "bad_tick",
                                       "queue_full",  "bad_request", "hello_refused", "bad_ident", "bad_batch"};

/* what a new arena is made of (a HELLO resolved against the defaults) */
typedef struct {
    int mode, cpu_level;
    uint32_t seed;
    double speed;
} ArenaCfg;

static struct {
    int fd, quiet;
    ArenaCfg def;              /* --mode, --cpu-level, --seed, --speed */
    int max_arenas;
    int64_t spin_ns;           /* busy-poll this long after a datagram before blocking */
    int64_t spin_window_end;   /* end of the current preemption-check window */
    int64_t spin_off_until;    /* spinning backed off until then (a busy machine) */
    int64_t spin_backoff_ns;   /* the next back-off's length */
    long spin_ivcsw;           /* involuntary context switches at the window's start */
    int spun;                  /* this window spun at least once */
    uint64_t spin_backoffs;
    int cores;                 /* usable_cores() at start: the spin rule's "enough cores" */
    int64_t timeout_ns, sweep_ns; /* client timeout (0 = never) and how often to check it */
    int64_t now;               /* monotonic ns, read once per loop iteration */
    int64_t next_parent_check, next_sweep;
    uint32_t tx_seq;
    BpArenaTable *arenas;
    BpUdp udp;
    uint64_t rx, dropped, dup, stale, cnt[D_COUNT];
    uint64_t arenas_created, arenas_reclaimed, clients_timed_out, reset_retries;
    const char *record_dir;    /* --record DIR, or NULL */
    uint64_t replays_written, replays_failed;
    const BpArena *recent;     /* the arena handled last (its tick / match_id in stats) */
    uint32_t recent_tick, recent_match; /* ... kept once that arena is reclaimed */
    double err_tokens, err_last;
    pid_t ppid;
    uint64_t batches, batch_items;
    /* the BATCH being handled (handle_batch): while gen != 0, a SNAPSHOT for a seat
     * whose batch_gen == gen fills item[its batch_entry] of the answer */
    struct {
        uint32_t gen, last_gen;
        int n;                              /* entries: seats the batch names */
        NetBatchItem item[BP_BATCH_MAX];
        int filled[BP_BATCH_MAX];
        uint8_t snap[BP_BATCH_MAX][sizeof(SnapshotPacket)];
    } batch;
} S;

/* a BATCH of k items and a BATCH_SNAP of k items, in bytes */
#define BATCH_ITEM_BYTES (sizeof(NetBatchItem) + sizeof(NetHeader) + sizeof(UserCmd))
#define BATCH_SNAP_ITEM_BYTES (sizeof(NetBatchItem) + sizeof(SnapshotPacket))
#define BATCH_BYTES(k) (sizeof(NetHeader) + sizeof(NetBatch) + (size_t)(k) * BATCH_ITEM_BYTES)
#define BATCH_SNAP_BYTES(k) (sizeof(NetHeader) + sizeof(NetBatch) + (size_t)(k) * BATCH_SNAP_ITEM_BYTES)
_Static_assert(BATCH_BYTES(BP_BATCH_MAX) <= BP_RX_DGRAM_MAX, "a full BATCH fits a receive slot");

static volatile sig_atomic_t g_stop, g_stats;
static void on_signal(int sig) {
    if (sig == SIGUSR1)
        g_stats = 1;
    else
        g_stop = 1;
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
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

static const char *mode_name(int mode) {
    return mode == BP_MODE_LOCKSTEP ? "lockstep" : (mode == BP_MODE_FASTFORWARD ? "fastforward" : "realtime");
}

static void print_stats(void) {
    uint32_t tick = S.recent ? bp_sim_tick(S.recent->sim) : S.recent_tick;
    uint32_t match = S.recent ? S.recent->match_id : S.recent_match;
    fprintf(stderr, "stats rx=%llu tx=%llu dropped=%llu", (unsigned long long)S.rx,
            (unsigned long long)S.udp.sent, (unsigned long long)S.dropped);
    for (int i = 0; i < D_COUNT; i++) fprintf(stderr, " %s=%llu", D_NAMES[i], (unsigned long long)S.cnt[i]);
    fprintf(stderr, " dup=%llu stale=%llu tx_fail=%llu tick=%u match_id=%u", (unsigned long long)S.dup,
            (unsigned long long)S.stale, (unsigned long long)S.udp.send_failed, tick, match);
    fprintf(stderr, " arenas_active=%d arenas_created=%llu arenas_reclaimed=%llu clients_timed_out=%llu"
            " reset_retries=%llu replays_written=%llu replays_failed=%llu spin_backoffs=%llu"
            " batches=%llu batch_items=%llu\n",
            bp_arenas_count(S.arenas),
            (unsigned long long)S.arenas_created, (unsigned long long)S.arenas_reclaimed,
            (unsigned long long)S.clients_timed_out, (unsigned long long)S.reset_retries,
            (unsigned long long)S.replays_written, (unsigned long long)S.replays_failed,
            (unsigned long long)S.spin_backoffs, (unsigned long long)S.batches,
            (unsigned long long)S.batch_items);
    fflush(stderr);
}

static void drop(int reason) {
    S.dropped++;
    S.cnt[reason]++;
}

/* ------------------------------------------------------------ sending */
static void fill_header(NetHeader *h, uint8_t type, const BpArena *a) {
    h->magic = BP_MAGIC;
    h->version = BP_PROTO_VERSION;
    h->type = type;
    h->seq = S.tx_seq++;
    h->tick = a ? bp_sim_tick(a->sim) : 0;
}

static int slot_filled(const BpArena *a, int slot) { return a->cl[slot].active || (slot == 1 && a->cpu); }
static int all_filled(const BpArena *a) { return slot_filled(a, 0) && slot_filled(a, 1); }
static int n_players(const BpArena *a) { return slot_filled(a, 0) + slot_filled(a, 1); }
static int playing(const BpArena *a) { return all_filled(a) && bp_sim_phase(a->sim) == BP_PHASE_PLAYING; }

/* the arena's SNAPSHOT datagram for one receiver acknowledging `ack`, into buf */
static size_t build_snapshot(const BpArena *a, uint32_t ack, uint8_t buf[sizeof(SnapshotPacket)]) {
    size_t n = bp_sim_snapshot(a->sim, S.tx_seq++, (uint8_t)n_players(a), (uint8_t)a->mode, ack, buf,
                               sizeof(SnapshotPacket));
    if (!all_filled(a) && bp_sim_phase(a->sim) == BP_PHASE_PLAYING) {
        SnapshotPacket *p = (SnapshotPacket *)buf;
        p->match.phase = BP_PHASE_WAITING;
    }
    return n;
}

/* the arena's SNAPSHOT to one address, acknowledging `ack` */
static void send_snapshot_to(const BpArena *a, const struct sockaddr_in *to, uint32_t ack) {
    uint8_t buf[sizeof(SnapshotPacket)];
    size_t n = build_snapshot(a, ack, buf);
    bp_udp_queue(&S.udp, to, buf, n);
}

/* to a client's address, or, while a BATCH naming it is handled, into its item of the
 * answer (a later one replaces an earlier: the newest state and ack are what count) */
static void send_snapshot(const BpArena *a, int slot) {
    const BpClient *c = &a->cl[slot];
    if (!c->active) return;
    if (S.batch.gen != 0 && c->batch_gen == S.batch.gen) {
        build_snapshot(a, c->ack, S.batch.snap[c->batch_entry]);
        S.batch.filled[c->batch_entry] = 1;
        return;
    }
    send_snapshot_to(a, &c->addr, c->ack);
}

/* to every client of the arena: both slots, then the spectators (ack 0) */
static void broadcast_snapshot(const BpArena *a) {
    for (int i = 0; i < BP_ARENA_SLOTS; i++) send_snapshot(a, i);
    for (int k = 0; k < BP_MAX_SPECTATORS; k++)
        if (a->spec[k].active) send_snapshot_to(a, &a->spec[k].addr, 0);
}

/* 1 if the token bucket lets one more ERROR out */
static int error_allowed(void) {
    double t = (double)S.now / (double)NS_PER_S;
    S.err_tokens += (t - S.err_last) * ERR_RATE;
    S.err_last = t;
    if (S.err_tokens > ERR_RATE) S.err_tokens = ERR_RATE;
    if (S.err_tokens < 1.0) return 0;
    S.err_tokens -= 1.0;
    return 1;
}

/* ERROR (rate-limited) in protocol `version` (the v1 framing of NetError is the
 * same, so an old client can read why it is refused) */
static void send_error_v(const struct sockaddr_in *to, const BpArena *a, uint16_t code, const char *text,
                         uint8_t version) {
    if (!error_allowed()) return;
    struct {
        NetHeader h;
        NetError e;
    } __attribute__((packed)) p;
    memset(&p, 0, sizeof p);
    fill_header(&p.h, BP_PKT_ERROR, a);
    p.h.version = version;
    p.e.code = code;
    strncpy(p.e.text, text, BP_ERROR_TEXT_LEN - 1);
    bp_udp_queue(&S.udp, to, &p, sizeof p);
}

static void send_error(const struct sockaddr_in *to, const BpArena *a, uint16_t code, const char *text) {
    send_error_v(to, a, code, text, BP_PROTO_VERSION);
}

/* WELCOME to the client in `seat` (a slot, or a spectator: slot BP_SLOT_SPECTATE) */
static void send_welcome(const BpArena *a, int seat) {
    int spect = BP_SEAT_IS_SPECTATOR(seat);
    const struct sockaddr_in *to = spect ? &a->spec[seat - BP_ARENA_SLOTS].addr : &a->cl[seat].addr;
    uint32_t session = spect ? a->spec[seat - BP_ARENA_SLOTS].session : a->cl[seat].session;
    uint32_t nonce = spect ? a->spec[seat - BP_ARENA_SLOTS].nonce : a->cl[seat].nonce;
    struct {
        NetHeader h;
        NetWelcome w;
    } __attribute__((packed)) p;
    memset(&p, 0, sizeof p);
    fill_header(&p.h, BP_PKT_WELCOME, a);
    p.w.session = session;
    p.w.nonce = nonce;
    p.w.match_id = a->match_id;
    p.w.arena_id = a->id;
    p.w.slot = (uint8_t)(spect ? BP_SLOT_SPECTATE : seat);
    p.w.mode = (uint8_t)a->mode;
    p.w.cpu_level = (uint8_t)(a->cpu ? bp_cpu_level(a->cpu) : 0);
    p.w.stocks = BP_STOCKS;
    p.w.tick_hz = BP_TICK_HZ;
    p.w.match_ticks = BP_MATCH_TICKS;
    bp_udp_queue(&S.udp, to, &p, sizeof p);
}

/* ------------------------------------------------------------ PEER */
/* PEER of `slot` of arena a to one address: who holds it (a client with the
 * name / ticket of its IDENT, the CPU as "cpu:L", or nobody) */
static void send_peer(const BpArena *a, int slot, const struct sockaddr_in *to) {
    struct {
        NetHeader h;
        NetPeer p;
    } __attribute__((packed)) p;
    memset(&p, 0, sizeof p);
    fill_header(&p.h, BP_PKT_PEER, a);
    p.p.arena_id = a->id;
    p.p.slot = (uint8_t)slot;
    const BpClient *c = &a->cl[slot];
    if (c->active) {
        p.p.kind = BP_PEER_CLIENT;
        memcpy(p.p.name, c->name, BP_NAME_LEN);
        memcpy(p.p.ticket, c->ticket, BP_TICKET_LEN);
    } else if (slot == 1 && a->cpu) {
        p.p.kind = BP_PEER_CPU;
        snprintf(p.p.name, BP_NAME_LEN, "cpu:%d", a->cpu_level);
    } else {
        p.p.kind = BP_PEER_EMPTY;
    }
    bp_udp_queue(&S.udp, to, &p, sizeof p);
}

/* both PEERs (slot 0, then slot 1) to one address */
static void send_peers_to(const BpArena *a, const struct sockaddr_in *to) {
    for (int s = 0; s < BP_ARENA_SLOTS; s++) send_peer(a, s, to);
}

/* both PEERs to every client of the arena: who occupies a slot changed, or a new match */
static void broadcast_peers(const BpArena *a) {
    for (int i = 0; i < BP_ARENA_SLOTS; i++)
        if (a->cl[i].active) send_peers_to(a, &a->cl[i].addr);
    for (int k = 0; k < BP_MAX_SPECTATORS; k++)
        if (a->spec[k].active) send_peers_to(a, &a->spec[k].addr);
}

/* ------------------------------------------------------------ recording (--record) */
static uint64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* the recording's slot names: whoever holds each slot now (an emptied slot
 * keeps the name it had) */
static void rec_note_names(BpArena *a) {
    for (int s = 0; s < BP_ARENA_SLOTS; s++) {
        if (a->cl[s].active)
            memcpy(a->rec.names[s], a->cl[s].name, BP_NAME_LEN);
        else if (s == 1 && a->cpu)
            snprintf(a->rec.names[s], BP_NAME_LEN, "cpu:%d", a->cpu_level);
    }
}

/* write the arena's recording if it holds ticks not yet written: at phase
 * over (complete), or when the match is cut short (RESET, a slot emptied, the
 * arena reclaimed, shutdown).  A match that goes on after a cut is written
 * again under the same name, with the ticks since.  Failures are logged and
 * counted (replays_failed), never fatal. */
static void rec_flush(BpArena *a) {
    BpRecorder *r = &a->rec;
    if (!S.record_dir || !r->dirty) return;
    r->dirty = 0;
    if (r->broken) {
        S.replays_failed++;
        logf_("arena %u: match %u not recorded (out of memory)", a->id, a->match_id);
        return;
    }
    rec_note_names(a);
    BpReplayHeader h;
    memset(&h, 0, sizeof h);
    h.seed = a->seed;
    h.match_id = a->match_id;
    h.arena_id = a->id;
    h.mode = (uint8_t)a->mode;
    h.cpu_level = (uint8_t)(a->cpu ? a->cpu_level : 0);
    h.complete = bp_sim_phase(a->sim) == BP_PHASE_OVER;
    h.winner = bp_sim_winner(a->sim);
    h.final_hash = bp_sim_state_hash(a->sim);
    memcpy(h.name0, r->names[0], BP_NAME_LEN);
    memcpy(h.name1, r->names[1], BP_NAME_LEN);
    NetPlayer players[2];
    bp_sim_players(a->sim, players);
    char path[512];
    if (bp_rec_write(r, S.record_dir, &h, players, path, sizeof path) != 0) {
        S.replays_failed++;
        logf_("arena %u: recording of match %u failed: %s: %s", a->id, a->match_id, path, strerror(errno));
        return;
    }
    S.replays_written++;
    logf_("arena %u: match %u recorded: %s (%u ticks%s)", a->id, a->match_id, path, r->n_ticks,
          h.complete ? ", complete" : ", cut short");
}

/* every tick of every arena goes through here: recorded as passed, then simulated */
static void arena_step(BpArena *a, const BpInput in[2]) {
    if (S.record_dir) {
        if (a->rec.n_ticks == 0 && !a->rec.broken) {
            a->rec.start_unix_ms = wall_ms();
            rec_note_names(a);
        }
        bp_rec_add(&a->rec, in);
    }
    bp_sim_step(a->sim, in);
    if (S.record_dir && bp_sim_phase(a->sim) == BP_PHASE_OVER) rec_flush(a);
}

/* ------------------------------------------------------------ match control */
static void clear_cmds(BpClient *c) {
    c->qhead = c->qlen = 0;
    c->have_seq = 0;
    c->last_seq = 0;
    c->ack = 0;
    c->have_held = 0;
}

/* the CPU of slot 1: BP_CPU_KEEP, BP_CPU_NONE or a level; 0, or -1 (refused) */
static int set_cpu(BpArena *a, int level) {
    if (level == BP_CPU_KEEP) return 0;
    if (level == BP_CPU_NONE) {
        bp_cpu_destroy(a->cpu);
        a->cpu = NULL;
        a->cpu_level = 0;
        return 0;
    }
    if (level < BP_CPU_LEVEL_MIN || level > BP_CPU_LEVEL_MAX) return -1;
    if (a->cl[1].active) return -1;
    bp_cpu_destroy(a->cpu);
    a->cpu = bp_cpu_create(level, bp_cpu_match_seed(a->seed));
    a->cpu_level = a->cpu ? level : 0;
    return a->cpu ? 0 : -1;
}

static void start_match(BpArena *a, uint32_t seed, uint32_t match_id) {
    rec_flush(a); /* the previous match, cut short by this one */
    bp_rec_clear(&a->rec);
    a->seed = seed;
    a->match_id = match_id;
    bp_sim_reset(a->sim, seed, match_id);
    if (a->cpu) bp_cpu_reset(a->cpu, bp_cpu_match_seed(seed));
    for (int i = 0; i < BP_ARENA_SLOTS; i++) clear_cmds(&a->cl[i]);
    a->next_tick_ns = S.now;
}

/* ------------------------------------------------------------ lockstep */
static void q_pop(BpClient *c) {
    c->qhead = (c->qhead + 1) % BP_CMD_QUEUE_CAP;
    c->qlen--;
}
static UserCmd *q_front(BpClient *c) { return &c->q[c->qhead]; }

/* Input for tick t from slot's queue: 1 = ready (input, applied seq set), 0 = wait. */
static int ls_peek(BpClient *c, uint32_t t, BpInput *in, int *applied, uint32_t *seq) {
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

/* simulate every tick whose input is in; returns the number of ticks */
static int ls_advance(BpArena *a) {
    int n = 0;
    while (playing(a)) {
        uint32_t t = bp_sim_tick(a->sim);
        BpInput in[2] = {{0, 0, 0}, {0, 0, 0}};
        int applied[2] = {0, 0};
        uint32_t seq[2] = {0, 0};
        int ok = 1;
        for (int i = 0; i < 2 && ok; i++)
            if (a->cl[i].active) ok = ls_peek(&a->cl[i], t, &in[i], &applied[i], &seq[i]);
        if (!ok) break;
        if (a->cpu && !a->cl[1].active) in[1] = bp_cpu_think(a->cpu, a->sim, 1);
        arena_step(a, in);
        for (int i = 0; i < 2; i++)
            if (applied[i]) a->cl[i].ack = seq[i];
        n++;
    }
    return n;
}

/* ------------------------------------------------------------ arena life */
static void note_arena(const BpArena *a) { S.recent = a; }

/* a new arena configured by cfg, its first match started; NULL if none is free */
static BpArena *arena_open(const ArenaCfg *cfg) {
    BpArena *a = bp_arena_new(S.arenas, cfg->mode);
    if (!a) return NULL;
    a->speed = cfg->mode == BP_MODE_REALTIME ? 1.0 : cfg->speed;
    a->period_ns = a->speed > 0.0 ? (int64_t)(1e9 / (BP_TICK_HZ * a->speed)) : 0;
    a->seed = cfg->seed;
    if (cfg->cpu_level > 0 && set_cpu(a, cfg->cpu_level) != 0) {
        bp_arena_free(S.arenas, a);
        return NULL;
    }
    start_match(a, cfg->seed, 1);
    S.arenas_created++;
    logf_("arena %u: created, mode %s cpu %d seed %u speed %g", a->id, mode_name(a->mode), a->cpu_level,
          a->seed, a->speed);
    return a;
}

static void arena_close(BpArena *a) {
    if (S.recent == a) {
        S.recent_tick = bp_sim_tick(a->sim);
        S.recent_match = a->match_id;
        S.recent = NULL;
    }
    logf_("arena %u: closed (no client left%s)", a->id, bp_arena_spectators(a) ? "; its spectators' sessions end" : "");
    bp_arena_free(S.arenas, a);
    S.arenas_reclaimed++;
}

/* a client leaves (BYE or timeout): the others see a SNAPSHOT (WAITING), an
 * arena with no client left is reclaimed */
static void client_leave(BpArena *a, int slot, const char *how) {
    logf_("arena %u: slot %d %s", a->id, slot, how);
    rec_flush(a); /* cut short (paused, or the arena goes) */
    bp_arena_detach(S.arenas, a, slot);
    if (bp_arena_clients(a) == 0) {
        arena_close(a);
        return;
    }
    broadcast_peers(a);
    broadcast_snapshot(a);
}

/* ------------------------------------------------------------ HELLO */
static void refuse_hello(const struct sockaddr_in *from, int code, const char *why) {
    drop(D_HELLO_REFUSED);
    send_error(from, NULL, (uint16_t)code, why);
}

static int valid_cpu_level(int l) {
    return l == BP_CPU_KEEP || l == BP_CPU_NONE || (l >= BP_CPU_LEVEL_MIN && l <= BP_CPU_LEVEL_MAX);
}

/* 0 when the HELLO's fields are well-formed, else an ERROR code and *why */
static int hello_invalid(const NetHello *h, const char **why) {
    if (h->want_slot != 0 && h->want_slot != 1 && h->want_slot != BP_SLOT_ANY && h->want_slot != BP_SLOT_SPECTATE) {
        *why = "bad slot (want 0, 1 or 255)";
        return BP_ERR_BAD_SLOT;
    }
    if (h->arena_op > BP_ARENA_ANY)
        *why = "bad arena_op";
    else if (h->mode != BP_MODE_DEFAULT && h->mode >= BP_ARENA_MODES)
        *why = "bad mode";
    else if (!valid_cpu_level(h->cpu_level))
        *why = "bad cpu_level";
    else if (!isfinite(h->speed) || h->speed < 0.0f || h->speed > SPEED_MAX)
        *why = "bad speed";
    else if (h->want_slot == BP_SLOT_SPECTATE && h->arena_op != BP_ARENA_JOIN)
        *why = "spectate needs arena_op join";
    else
        return 0;
    return BP_ERR_BAD_REQUEST;
}

static ArenaCfg resolve_cfg(const NetHello *h) {
    ArenaCfg c = S.def;
    if (h->mode != BP_MODE_DEFAULT) c.mode = h->mode;
    if (h->cpu_level != BP_CPU_KEEP) c.cpu_level = h->cpu_level;
    if (h->seed != 0) c.seed = h->seed;
    if (h->speed > 0.0f) c.speed = h->speed;
    return c;
}

/* the slot of arena a for want_slot, or -1 with *why (BP_ERR_FULL) */
static int free_slot(const BpArena *a, int want, const char **why) {
    if (want == BP_SLOT_ANY) {
        for (int s = 0; s < BP_ARENA_SLOTS; s++)
            if (bp_arena_slot_free(a, s)) return s;
        *why = "arena full";
        return -1;
    }
    if (want == 1 && a->cpu) {
        *why = "slot 1 is the CPU";
        return -1;
    }
    if (a->cl[want].active) {
        *why = "slot taken";
        return -1;
    }
    return want;
}

/* a new arena for this HELLO, or NULL with *code / *why */
static BpArena *create_for(const NetHello *h, int *slot, int *code, const char **why) {
    ArenaCfg cfg = resolve_cfg(h);
    BpArena *a = NULL;
    if (h->want_slot == 1 && cfg.cpu_level > 0) {
        *code = BP_ERR_BAD_SLOT;
        *why = "slot 1 is the CPU";
    } else if (!(a = arena_open(&cfg))) {
        *code = BP_ERR_ARENAS_FULL;
        *why = "server full: max arenas";
    }
    *slot = h->want_slot == BP_SLOT_ANY ? 0 : h->want_slot;
    return a;
}

/* the arena and slot a (valid) HELLO asks for, or NULL with *code / *why */
static BpArena *pick_arena(const NetHello *h, int *slot, int *code, const char **why) {
    BpArena *a = NULL;
    if (h->arena_op == BP_ARENA_JOIN) {
        a = bp_arena_by_id(S.arenas, h->arena_id);
        if (!a) {
            *code = BP_ERR_NO_ARENA;
            *why = "no such arena";
        } else if ((*slot = free_slot(a, h->want_slot, why)) < 0) {
            *code = BP_ERR_FULL;
            a = NULL;
        }
        return a;
    }
    if (h->arena_op == BP_ARENA_ANY) {
        a = bp_arena_any(S.arenas, resolve_cfg(h).mode, h->want_slot);
        if (a && (*slot = free_slot(a, h->want_slot, why)) >= 0) return a;
    }
    return create_for(h, slot, code, why);
}

static void seat(BpArena *a, int slot, const struct sockaddr_in *from, uint32_t nonce) {
    BpClient *c = bp_arena_attach(S.arenas, a, slot, from, bp_arenas_session(S.arenas));
    c->nonce = nonce;
    c->last_rx_ns = S.now;
    send_welcome(a, slot);
    logf_("arena %u: slot %d joined from %s:%u", a->id, slot, inet_ntoa(from->sin_addr), ntohs(from->sin_port));
    a->next_tick_ns = S.now;
    broadcast_peers(a);
    if (a->mode == BP_MODE_LOCKSTEP) ls_advance(a);
    broadcast_snapshot(a);
}

/* a spectator (want_slot BP_SLOT_SPECTATE, arena_op JOIN): WELCOME (slot 254),
 * both PEERs and the current SNAPSHOT; then everything the arena broadcasts */
static void spectate(const NetHello *h, const struct sockaddr_in *from) {
    BpArena *a = bp_arena_by_id(S.arenas, h->arena_id);
    if (!a) {
        refuse_hello(from, BP_ERR_NO_ARENA, "no such arena");
        return;
    }
    int k = bp_arena_spectate(S.arenas, a, from, bp_arenas_session(S.arenas));
    if (k < 0) {
        refuse_hello(from, BP_ERR_FULL, "spectators full");
        return;
    }
    a->spec[k].nonce = h->nonce;
    a->spec[k].last_rx_ns = S.now;
    note_arena(a);
    send_welcome(a, BP_SEAT_SPECTATOR(k));
    send_peers_to(a, from);
    send_snapshot_to(a, from, 0);
    logf_("arena %u: spectator %d joined from %s:%u", a->id, k, inet_ntoa(from->sin_addr), ntohs(from->sin_port));
}

static void handle_hello(const struct sockaddr_in *from, const uint8_t *buf) {
    NetHello h;
    memcpy(&h, buf + sizeof(NetHeader), sizeof h);
    int slot, code;
    const char *why = NULL;
    BpArena *a = bp_arena_by_addr(S.arenas, from, &slot);
    if (a && BP_SEAT_IS_SPECTATOR(slot)) { /* a spectator's keep-alive (or lost WELCOME) */
        BpSpectator *sp = &a->spec[slot - BP_ARENA_SLOTS];
        sp->nonce = h.nonce;
        sp->last_rx_ns = S.now;
        note_arena(a);
        send_welcome(a, slot);
        send_peers_to(a, from);
        return;
    }
    if (a) { /* a lost WELCOME: send it again, whatever this HELLO asks */
        a->cl[slot].nonce = h.nonce;
        a->cl[slot].last_rx_ns = S.now;
        note_arena(a);
        send_welcome(a, slot);
        return;
    }
    if ((code = hello_invalid(&h, &why)) != 0) {
        refuse_hello(from, code, why);
        return;
    }
    if (h.want_slot == BP_SLOT_SPECTATE) {
        spectate(&h, from);
        return;
    }
    if (!(a = pick_arena(&h, &slot, &code, &why))) {
        refuse_hello(from, code, why);
        return;
    }
    note_arena(a);
    seat(a, slot, from, h.nonce);
}

/* ------------------------------------------------------------ CMD, BYE, RESET */
/* the session token of seat `seat` of arena a */
static uint32_t seat_session(const BpArena *a, int seat) {
    return BP_SEAT_IS_SPECTATOR(seat) ? a->spec[seat - BP_ARENA_SLOTS].session : a->cl[seat].session;
}

static void seat_heard(BpArena *a, int seat) {
    if (BP_SEAT_IS_SPECTATOR(seat))
        a->spec[seat - BP_ARENA_SLOTS].last_rx_ns = S.now;
    else
        a->cl[seat].last_rx_ns = S.now;
}

/* a spectator sent what only a player may (CMD, RESET, IDENT): dropped as
 * bad_slot and answered ERROR BAD_SLOT */
static void spectator_refused(const struct sockaddr_in *from, const BpArena *a) {
    drop(D_BAD_SLOT);
    send_error(from, a, BP_ERR_BAD_SLOT, "spectators hold no slot");
}

/* the sender's arena and seat if it is seated and its session matches (its
 * clock of silence restarts), else NULL (counted).  A spectator's seat is
 * returned only with allow_spectator; otherwise it is refused (BAD_SLOT). */
static BpArena *auth_seat(const struct sockaddr_in *from, uint32_t session, int *slot, int allow_spectator) {
    BpArena *a = bp_arena_by_addr(S.arenas, from, slot);
    if (!a) {
        drop(D_NOT_JOINED);
        return NULL;
    }
    if (session != seat_session(a, *slot)) {
        drop(D_BAD_SESSION);
        return NULL;
    }
    seat_heard(a, *slot);
    note_arena(a);
    if (BP_SEAT_IS_SPECTATOR(*slot) && !allow_spectator) {
        spectator_refused(from, a);
        return NULL;
    }
    return a;
}

static BpArena *auth(const struct sockaddr_in *from, uint32_t session, int *slot) {
    return auth_seat(from, session, slot, 0);
}

/* the CMD's fields checked and normalised in place: 0, or the drop reason */
static int cmd_invalid(UserCmd *u, int slot, uint32_t t) {
    if (u->slot != slot) return D_BAD_SLOT;
    if (u->repeat < 1 || u->repeat > BP_MAX_REPEAT) return D_BAD_REPEAT;
    if (!isfinite(u->stick_x) || !isfinite(u->stick_y)) return D_BAD_STICK;
    if ((uint64_t)u->tick > (uint64_t)t + BP_MAX_CMD_LEAD) return D_BAD_TICK;
    u->stick_x = u->stick_x < -1.0f ? -1.0f : (u->stick_x > 1.0f ? 1.0f : u->stick_x);
    u->stick_y = u->stick_y < -1.0f ? -1.0f : (u->stick_y > 1.0f ? 1.0f : u->stick_y);
    u->buttons &= BP_BTN_MASK;
    return 0;
}

static void note_seq(BpClient *c, const UserCmd *u, int fresh) {
    if (fresh) {
        c->have_seq = 1;
        c->last_seq = u->cmd_seq;
    } else {
        S.dup++;
    }
}

static void lockstep_cmd(BpArena *a, int slot, const UserCmd *u, int fresh) {
    BpClient *c = &a->cl[slot];
    int queued = 0;
    if (!fresh)
        S.dup++;
    else if ((uint64_t)u->tick + u->repeat <= bp_sim_tick(a->sim))
        S.stale++;
    else if (c->qlen >= BP_CMD_QUEUE_CAP)
        drop(D_QUEUE_FULL);
    else {
        c->q[(c->qhead + c->qlen) % BP_CMD_QUEUE_CAP] = *u;
        c->qlen++;
        queued = 1;
    }
    if (fresh) {
        c->have_seq = 1;
        c->last_seq = u->cmd_seq;
    }
    if (queued && ls_advance(a) > 0)
        broadcast_snapshot(a);
    else
        send_snapshot(a, slot);
}

static void handle_cmd(const struct sockaddr_in *from, const uint8_t *buf) {
    UserCmd u;
    memcpy(&u, buf + sizeof(NetHeader), sizeof u);
    int slot, bad;
    BpArena *a = auth(from, u.session, &slot);
    if (!a) return;
    if ((bad = cmd_invalid(&u, slot, bp_sim_tick(a->sim))) != 0) {
        drop(bad);
        return;
    }
    BpClient *c = &a->cl[slot];
    int fresh = !c->have_seq || (int32_t)(u.cmd_seq - c->last_seq) > 0;
    if (bp_sim_phase(a->sim) != BP_PHASE_PLAYING) { /* over: answer with the final snapshot */
        note_seq(c, &u, fresh);
        send_snapshot(a, slot);
        return;
    }
    if (a->mode == BP_MODE_LOCKSTEP) {
        lockstep_cmd(a, slot, &u, fresh);
        return;
    }
    note_seq(c, &u, fresh); /* fastforward / realtime: hold the newest command */
    if (fresh) {
        c->held = u;
        c->have_held = 1;
    }
    if (!playing(a)) send_snapshot(a, slot);
}

/* ------------------------------------------------------------ BATCH */
/* The seat a BATCH item commands, or NULL with *why the drop reason: its datagram must
 * be a CMD of this version, for a seated client of that arena and slot, from the host
 * that client joined from (the batch's sender stands in for the client's own socket,
 * so its address is checked down to the IP) and with that client's session. */
static BpArena *batch_seat(const struct sockaddr_in *from, const NetBatchItem *it, const uint8_t *dg,
                           int *why) {
    NetHeader h;
    UserCmd u;
    memcpy(&h, dg, sizeof h);
    memcpy(&u, dg + sizeof h, sizeof u);
    if (h.magic != BP_MAGIC) { *why = D_BAD_MAGIC; return NULL; }
    if (h.version != BP_PROTO_VERSION) { *why = D_BAD_VERSION; return NULL; }
    if (h.type != BP_PKT_CMD) { *why = D_BAD_TYPE; return NULL; }
    if (it->slot >= BP_ARENA_SLOTS) { *why = D_BAD_SLOT; return NULL; }
    BpArena *a = bp_arena_by_id(S.arenas, it->arena_id);
    const BpClient *c = a ? &a->cl[it->slot] : NULL;
    if (!c || !c->active || c->addr.sin_addr.s_addr != from->sin_addr.s_addr) { *why = D_NOT_JOINED; return NULL; }
    if (u.session != c->session) { *why = D_BAD_SESSION; return NULL; }
    return a;
}

/* A BATCH: each item's CMD is handled exactly as if it had come from its client's own
 * address, in order; every SNAPSHOT those seats get meanwhile is collected, and one
 * BATCH_SNAP goes back to the sender with one item per seat that got one (the newest).
 * A malformed envelope is dropped whole (bad_len, bad_batch); a bad item alone, counted
 * by its reason, while the others go on. */
static void handle_batch(const struct sockaddr_in *from, const uint8_t *buf, size_t len) {
    NetBatch b;
    if (len < sizeof(NetHeader) + sizeof b) { drop(D_BAD_LEN); return; }
    memcpy(&b, buf + sizeof(NetHeader), sizeof b);
    if (b.count < 1 || b.count > BP_BATCH_MAX) { drop(D_BAD_BATCH); return; }
    if (len != BATCH_BYTES(b.count)) { drop(D_BAD_LEN); return; }
    S.batches++;
    uint32_t gen = ++S.batch.last_gen;
    if (gen == 0) gen = ++S.batch.last_gen; /* 0 means "no batch" */
    const uint8_t *items = buf + sizeof(NetHeader) + sizeof b;
    BpArena *seat[BP_BATCH_MAX];
    int slot[BP_BATCH_MAX];
    S.batch.n = 0;
    for (int i = 0; i < b.count; i++) { /* first every seat, so a broadcast to one named later is kept */
        NetBatchItem it;
        memcpy(&it, items + (size_t)i * BATCH_ITEM_BYTES, sizeof it);
        int why = 0;
        seat[i] = batch_seat(from, &it, items + (size_t)i * BATCH_ITEM_BYTES + sizeof it, &why);
        if (!seat[i]) {
            drop(why);
            continue;
        }
        slot[i] = it.slot;
        BpClient *c = &seat[i]->cl[it.slot];
        if (c->batch_gen != gen) {
            c->batch_gen = gen;
            c->batch_entry = S.batch.n;
            S.batch.filled[S.batch.n++] = 0;
        }
        S.batch.item[c->batch_entry] = (NetBatchItem){it.arena_id, it.tag, it.slot, 0};
    }
    S.batch.gen = gen;
    for (int i = 0; i < b.count; i++) {
        if (!seat[i]) continue;
        const uint8_t *dg = items + (size_t)i * BATCH_ITEM_BYTES;
        S.batch_items++;
        handle_cmd(&seat[i]->cl[slot[i]].addr, dg + sizeof(NetBatchItem));
    }
    S.batch.gen = 0;
    static uint8_t out[BATCH_SNAP_BYTES(BP_BATCH_MAX)];
    NetHeader h;
    fill_header(&h, BP_PKT_BATCH_SNAP, NULL);
    NetBatch ob = {0, 0, b.batch_seq};
    uint8_t *p = out + sizeof h + sizeof ob;
    for (int e = 0; e < S.batch.n; e++) {
        if (!S.batch.filled[e]) continue;
        memcpy(p, &S.batch.item[e], sizeof(NetBatchItem));
        memcpy(p + sizeof(NetBatchItem), S.batch.snap[e], sizeof(SnapshotPacket));
        p += BATCH_SNAP_ITEM_BYTES;
        ob.count++;
    }
    memcpy(out, &h, sizeof h);
    memcpy(out + sizeof h, &ob, sizeof ob);
    bp_udp_send_now(&S.udp, from, out, BATCH_SNAP_BYTES(ob.count));
}

static void handle_bye(const struct sockaddr_in *from, const uint8_t *buf) {
    NetBye b;
    memcpy(&b, buf + sizeof(NetHeader), sizeof b);
    int slot;
    BpArena *a = auth_seat(from, b.session, &slot, 1);
    if (!a) return;
    if (BP_SEAT_IS_SPECTATOR(slot)) {
        logf_("arena %u: spectator %d left", a->id, slot - BP_ARENA_SLOTS);
        bp_arena_unspectate(S.arenas, a, slot - BP_ARENA_SLOTS);
        return;
    }
    client_leave(a, slot, "left");
}

/* 0 if a RESET may set this cpu_level in arena a, else the ERROR text */
static const char *reset_refusal(const BpArena *a, int lvl) {
    if (!valid_cpu_level(lvl)) return "bad cpu_level";
    if (lvl >= BP_CPU_LEVEL_MIN && lvl <= BP_CPU_LEVEL_MAX && a->cl[1].active) return "slot 1 held by a client";
    return NULL;
}

static void handle_reset(const struct sockaddr_in *from, const uint8_t *buf) {
    NetReset r;
    memcpy(&r, buf + sizeof(NetHeader), sizeof r);
    int slot;
    BpArena *a = bp_arena_by_addr(S.arenas, from, &slot);
    if (!a) { drop(D_NOT_JOINED); return; }
    if (r.session != seat_session(a, slot)) {
        drop(D_BAD_SESSION);
        send_error(from, a, BP_ERR_BAD_SESSION, "bad session");
        return;
    }
    seat_heard(a, slot);
    note_arena(a);
    if (BP_SEAT_IS_SPECTATOR(slot)) {
        spectator_refused(from, a);
        return;
    }
    if (a->have_reset && r.nonce == a->reset_nonce) { /* a retry: already applied */
        S.reset_retries++;
        send_snapshot(a, slot);
        return;
    }
    const char *why = reset_refusal(a, r.cpu_level);
    if (why) {
        drop(D_BAD_REQUEST);
        send_error(from, a, BP_ERR_BAD_REQUEST, why);
        return;
    }
    rec_flush(a); /* the match this RESET cuts short, with its own seed and CPU */
    a->seed = r.seed;
    set_cpu(a, r.cpu_level);
    bp_arena_refresh(S.arenas, a); /* the CPU's slot may have opened or closed */
    start_match(a, r.seed, a->match_id + 1);
    a->have_reset = 1;
    a->reset_nonce = r.nonce;
    logf_("arena %u: reset by slot %d: match %u seed %u cpu %d", a->id, slot, a->match_id, r.seed, a->cpu_level);
    broadcast_peers(a); /* whom this match is against (the CPU may have changed) */
    if (a->mode == BP_MODE_LOCKSTEP) ls_advance(a); /* no-op: queues are empty */
    broadcast_snapshot(a);
}

/* IDENT: the player's name and ticket for its slot.  A bad name or ticket is
 * dropped (bad_ident) and answered with ERROR BAD_REQUEST; a change is
 * announced to the whole arena, an IDENT that changes nothing is answered with
 * both PEERs to its sender (so a client re-sends IDENT until it sees its name). */
static void handle_ident(const struct sockaddr_in *from, const uint8_t *buf) {
    NetIdent id;
    memcpy(&id, buf + sizeof(NetHeader), sizeof id);
    int slot;
    BpArena *a = auth(from, id.session, &slot);
    if (!a) return;
    const char *why = !bp_text_field_ok(id.name, BP_NAME_LEN, 0)       ? "bad name"
                      : !bp_text_field_ok(id.ticket, BP_TICKET_LEN, 1) ? "bad ticket"
                                                                      : NULL;
    if (why) {
        drop(D_BAD_IDENT);
        send_error(from, a, BP_ERR_BAD_REQUEST, why);
        return;
    }
    BpClient *c = &a->cl[slot];
    if (!strcmp(c->name, id.name) && !strcmp(c->ticket, id.ticket)) {
        send_peers_to(a, from);
        return;
    }
    memcpy(c->name, id.name, BP_NAME_LEN);
    memcpy(c->ticket, id.ticket, BP_TICKET_LEN);
    logf_("arena %u: slot %d is \"%s\"%s", a->id, slot, c->name, c->ticket[0] ? " (with a ticket)" : "");
    broadcast_peers(a);
}

/* ------------------------------------------------------------ one datagram */
/* the payload size of a server-bound type, or 0 */
static size_t payload_size(uint8_t type) {
    switch (type) {
    case BP_PKT_HELLO: return sizeof(NetHello);
    case BP_PKT_CMD: return sizeof(UserCmd);
    case BP_PKT_BYE: return sizeof(NetBye);
    case BP_PKT_RESET: return sizeof(NetReset);
    case BP_PKT_IDENT: return sizeof(NetIdent);
    default: return 0;
    }
}

/* another version: dropped; a v1 HELLO learns why, in v1 framing */
static void other_version(const struct sockaddr_in *from, const NetHeader *h, size_t len) {
    drop(D_BAD_VERSION);
    if (h->version == PROTO_V1 && h->type == BP_PKT_HELLO && len == V1_HELLO_BYTES)
        send_error_v(from, NULL, BP_ERR_VERSION, "protocol v1; server speaks v2", PROTO_V1);
}

static void handle_packet(const BpRxMsg *m) {
    S.rx++;
    if (!m->from_ipv4 || m->len < sizeof(NetHeader)) { drop(D_BAD_LEN); return; }
    NetHeader h;
    memcpy(&h, m->buf, sizeof h);
    if (h.magic != BP_MAGIC) { drop(D_BAD_MAGIC); return; }
    if (h.version != BP_PROTO_VERSION) { other_version(&m->from, &h, m->len); return; }
    if (h.type == BP_PKT_BATCH) { handle_batch(&m->from, m->buf, m->len); return; }
    size_t want = payload_size(h.type);
    if (want == 0) { drop(D_BAD_TYPE); return; }
    if (m->len != sizeof(NetHeader) + want) { drop(D_BAD_LEN); return; }
    switch (h.type) {
    case BP_PKT_HELLO: handle_hello(&m->from, m->buf); break;
    case BP_PKT_CMD: handle_cmd(&m->from, m->buf); break;
    case BP_PKT_BYE: handle_bye(&m->from, m->buf); break;
    case BP_PKT_IDENT: handle_ident(&m->from, m->buf); break;
    default: handle_reset(&m->from, m->buf); break;
    }
}

/* ------------------------------------------------------------ free-running arenas */
static void ff_tick(BpArena *a) {
    BpInput in[2] = {{0, 0, 0}, {0, 0, 0}};
    for (int i = 0; i < 2; i++) {
        BpClient *c = &a->cl[i];
        if (c->active && c->have_held) {
            in[i] = (BpInput){c->held.stick_x, c->held.stick_y, c->held.buttons};
            c->ack = c->held.cmd_seq;
        }
    }
    if (a->cpu && !a->cl[1].active) in[1] = bp_cpu_think(a->cpu, a->sim, 1);
    arena_step(a, in);
    broadcast_snapshot(a);
}

/* the ticks due now (period 0 = unpaced: one per loop iteration) */
static void run_due_ticks(BpArena *a) {
    if (a->period_ns == 0) {
        ff_tick(a);
        return;
    }
    int burst = 0;
    while (playing(a) && S.now >= a->next_tick_ns && burst < MAX_TICK_BURST) {
        ff_tick(a);
        a->next_tick_ns += a->period_ns;
        burst++;
    }
    if (S.now - a->next_tick_ns > RESYNC_PERIODS * a->period_ns) a->next_tick_ns = S.now; /* far behind */
}

/* tick every playing free-running arena that is due; returns when the next
 * tick is due (INT64_MAX: none is playing) */
static int64_t tick_free_arenas(void) {
    static const int FREE_MODES[] = {BP_MODE_REALTIME, BP_MODE_FASTFORWARD};
    int64_t due = INT64_MAX;
    for (int m = 0; m < 2; m++) {
        for (BpArena *a = bp_arena_first(S.arenas, FREE_MODES[m]); a; a = bp_arena_next(S.arenas, a)) {
            if (!playing(a)) continue;
            run_due_ticks(a);
            int64_t next = a->period_ns ? a->next_tick_ns : S.now;
            if (playing(a) && next < due) due = next;
        }
    }
    return due;
}

/* ------------------------------------------------------------ chores */
/* remove every client silent for longer than the timeout */
static void sweep_timeouts(void) {
    for (int m = 0; m < BP_ARENA_MODES; m++) {
        BpArena *next;
        for (BpArena *a = bp_arena_first(S.arenas, m); a; a = next) {
            next = bp_arena_next(S.arenas, a);
            for (int k = 0; k < BP_MAX_SPECTATORS; k++) {
                if (a->spec[k].active && S.now - a->spec[k].last_rx_ns > S.timeout_ns) {
                    S.clients_timed_out++;
                    logf_("arena %u: spectator %d timed out", a->id, k);
                    bp_arena_unspectate(S.arenas, a, k);
                }
            }
            for (int s = 0; s < BP_ARENA_SLOTS && a->id; s++) {
                if (a->cl[s].active && S.now - a->cl[s].last_rx_ns > S.timeout_ns) {
                    S.clients_timed_out++;
                    client_leave(a, s, "timed out");
                }
            }
        }
    }
}

/* stats on request, the parent check, client timeouts.  Returns when the next
 * chore is due, or -1 once the parent is gone. */
static int64_t chores(void) {
    if (g_stats) {
        g_stats = 0;
        print_stats();
    }
    if (S.now >= S.next_parent_check) {
        S.next_parent_check = S.now + PARENT_CHECK_NS;
        if (getppid() != S.ppid) {
            logf_("parent died, exiting");
            return -1;
        }
    }
    int64_t next = S.next_parent_check;
    if (S.timeout_ns > 0 && bp_arenas_count(S.arenas) > 0) {
        if (S.now >= S.next_sweep) {
            sweep_timeouts();
            S.next_sweep = S.now + S.sweep_ns;
        }
        if (S.next_sweep < next) next = S.next_sweep;
    }
    return next;
}

/* ------------------------------------------------------------ serving */
/* block until the socket is readable or `until` (monotonic ns); 0, or -1 on error */
static int block_until(int64_t until) {
    int64_t wait = until - now_ns();
    if (wait <= 0) return 0;
    struct timespec ts = {(time_t)(wait / NS_PER_S), (long)(wait % NS_PER_S)};
    struct pollfd pfd = {S.fd, POLLIN, 0};
    if (ppoll(&pfd, 1, &ts, NULL) < 0 && errno != EINTR) {
        perror("ppoll");
        return -1;
    }
    return 0;
}

static long involuntary_switches(void) {
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_nivcsw : 0;
}

/* Threads runnable on the machine now, this one included (/proc/loadavg's fourth
 * field, "running/total"), or 0 where that file is missing or unreadable. */
static int machine_runnable(void) {
    int fd = open("/proc/loadavg", O_RDONLY);
    if (fd < 0) return 0;
    char buf[128];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = '\0';
    double l1, l5, l15;
    int running = 0, total = 0;
    return sscanf(buf, "%lf %lf %lf %d/%d", &l1, &l5, &l15, &running, &total) == 5 ? running : 0;
}

/* Cores this process may run on (its affinity mask; the online count without one). */
static int usable_cores(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* May the loop busy-poll now?  --spin-us, unless the machine has shown it has no core
 * to spare (see --spin-us above): preempted too often in a window that spun, or more
 * threads runnable than there are cores. */
static int may_spin(void) {
    if (S.spin_ns <= 0 || S.now < S.spin_off_until) return 0;
    if (S.now >= S.spin_window_end) {
        long sw = involuntary_switches();
        int crowded = machine_runnable() > S.cores;
        if ((S.spun && sw - S.spin_ivcsw > SPIN_PREEMPT_MAX) || crowded) {
            S.spin_backoffs++;
            S.spin_off_until = S.now + S.spin_backoff_ns;
            S.spin_backoff_ns = S.spin_backoff_ns * 2 > SPIN_BACKOFF_MAX_NS ? SPIN_BACKOFF_MAX_NS
                                                                            : S.spin_backoff_ns * 2;
        } else if (S.spun) {
            S.spin_backoff_ns = SPIN_BACKOFF_MIN_NS; /* a quiet window: the load is gone */
        }
        S.spin_ivcsw = sw;
        S.spun = 0;
        S.spin_window_end = S.now + SPIN_WINDOW_NS;
        if (S.now < S.spin_off_until) return 0;
    }
    S.spun = 1;
    return 1;
}

/* one loop: free-running ticks, chores, one batch of datagrams, then spin or
 * block.  The sim of a lockstep arena advances only inside the handlers. */
static void serve(void) {
    int64_t last_rx = 0;
    int heard = 0;
    while (!g_stop) {
        S.now = now_ns();
        int64_t due = tick_free_arenas();
        int64_t chore = chores();
        bp_udp_flush(&S.udp);
        if (chore < 0) break;
        int n = bp_udp_recv(&S.udp);
        if (n < 0) {
            perror("recvmmsg");
            break;
        }
        for (int i = 0; i < n; i++) {
            handle_packet(&S.udp.rx[i]);
            /* an answer leaves as soon as it is ready, not after the whole batch: a
             * client stepping N arenas starts on the first snapshot while this loop
             * ticks the next arena (free-running broadcasts still leave in one batch) */
            if (S.udp.ntx > 0 && i + 1 < n) bp_udp_flush(&S.udp);
        }
        bp_udp_flush(&S.udp);
        if (n > 0) {
            last_rx = S.now;
            heard = 1;
            continue;
        }
        if (heard && S.now - last_rx < S.spin_ns && may_spin()) continue; /* busy-poll */
        if (block_until(due < chore ? due : chore) < 0) break;
    }
}

/* ------------------------------------------------------------ main */
#define ARGS_HELP (-1) /* parse_args: --help was printed */

static void usage(FILE *f, const char *argv0) {
    fprintf(f,
            "usage: %s --port N [--host 127.0.0.1] [--mode lockstep|fastforward|realtime]\n"
            "          [--speed X] [--cpu-level L] [--seed N] [--spin-us N]\n"
            "          [--max-arenas N] [--client-timeout S] [--record DIR] [--quiet]\n",
            argv0);
}

static int help(const char *argv0) {
    usage(stdout, argv0);
    fputs("The BRAWLPIT UDP game server (docs/protocol.md): many matches (arenas) in one\n"
          "process.  Prints `listening <port>` once bound.\n"
          "  --port N            UDP port, 0..65535; 0 lets the kernel choose (required)\n"
          "  --host A            IPv4 address to bind (default 127.0.0.1)\n"
          "  --mode M            arenas' default mode: lockstep (default), fastforward, realtime\n"
          "  --speed X           default fastforward pace in multiples of 60 Hz, 0 = unpaced\n"
          "                      (default 1)\n"
          "  --cpu-level L       default CPU: 0 = none (default); 1..8 = the built-in CPU in slot 1\n"
          "  --seed N            default seed of an arena's first match (decimal, 0x hex or 0\n"
          "                      octal; default 0)\n"
          "  --spin-us N         busy-poll up to N us after the last datagram before blocking,\n"
          "                      0..100000 (default 0: always block)\n"
          "  --max-arenas N      concurrent arenas, 1..4096 (default 64); more are refused\n"
          "  --client-timeout S  seconds of silence before a client loses its slot, may be\n"
          "                      fractional; 0 = never (default 120)\n"
          "  --record DIR        write every match as DIR/<start_ms>-a<arena>-m<match>.bpr\n"
          "                      (created if missing; docs/replays.md)\n"
          "  --quiet             no log lines on stderr (the stats line is still printed)\n"
          "  -h, --help          print this help and exit\n",
          stdout);
    return ARGS_HELP;
}

static int parse_mode(const char *v) {
    if (!strcmp(v, "lockstep")) return BP_MODE_LOCKSTEP;
    if (!strcmp(v, "fastforward")) return BP_MODE_FASTFORWARD;
    if (!strcmp(v, "realtime")) return BP_MODE_REALTIME;
    return -1;
}

/* v as a whole decimal integer in [lo, hi]: 0, or -1 */
static int parse_long(const char *v, long lo, long hi, long *out) {
    char *end = NULL;
    errno = 0;
    *out = strtol(v, &end, 10);
    return (end == v || *end || errno || *out < lo || *out > hi) ? -1 : 0;
}

/* v as a finite number in [lo, hi]: 0, or -1 */
static int parse_double(const char *v, double lo, double hi, double *out) {
    char *end = NULL;
    *out = strtod(v, &end);
    return (end == v || *end || !(*out >= lo) || !(*out <= hi)) ? -1 : 0;
}

/* one option of the arenas' defaults or limits into S: 0, -1 (invalid), 1 (not one of them) */
static int parse_arena_option(const char *a, const char *v) {
    long l;
    double d;
    if (!strcmp(a, "--mode")) return (S.def.mode = parse_mode(v)) < 0 ? -1 : 0;
    if (!strcmp(a, "--speed")) return parse_double(v, 0.0, SPEED_MAX, &S.def.speed);
    if (!strcmp(a, "--cpu-level")) {
        if (parse_long(v, 0, BP_CPU_LEVEL_MAX, &l) != 0) return -1;
        S.def.cpu_level = (int)l;
        return 0;
    }
    if (!strcmp(a, "--seed")) {
        char *end = NULL;
        S.def.seed = (uint32_t)strtoul(v, &end, 0);
        return (end == v || *end) ? -1 : 0;
    }
    if (!strcmp(a, "--max-arenas")) {
        if (parse_long(v, 1, BP_MAX_ARENAS, &l) != 0) return -1;
        S.max_arenas = (int)l;
        return 0;
    }
    if (!strcmp(a, "--client-timeout")) {
        if (parse_double(v, 0.0, CLIENT_TIMEOUT_MAX_S, &d) != 0) return -1;
        S.timeout_ns = (int64_t)(d * (double)NS_PER_S);
        return 0;
    }
    return 1;
}

/* one option with its value into S / host / port; 0, or -1 if unknown or invalid */
static int parse_option(const char *a, const char *v, const char **host, long *port) {
    long l;
    int r = parse_arena_option(a, v);
    if (r <= 0) return r;
    if (!strcmp(a, "--port")) return parse_long(v, 0, 65535, port);
    if (!strcmp(a, "--host")) {
        *host = v;
        return 0;
    }
    if (!strcmp(a, "--record")) {
        S.record_dir = v;
        return v[0] ? 0 : -1;
    }
    if (!strcmp(a, "--spin-us")) {
        if (parse_long(v, 0, SPIN_US_MAX, &l) != 0) return -1;
        S.spin_ns = (int64_t)l * 1000;
        return 0;
    }
    return -1;
}

/* 0, ARGS_HELP after printing the help, or 2 after printing the usage */
static int parse_args(int argc, char **argv, const char **host, long *port) {
    S.def = (ArenaCfg){BP_MODE_LOCKSTEP, 0, 0, 1.0};
    S.max_arenas = DEFAULT_MAX_ARENAS;
    S.spin_backoff_ns = SPIN_BACKOFF_MIN_NS;
    S.cores = usable_cores();
    S.timeout_ns = (int64_t)(CLIENT_TIMEOUT_S * (double)NS_PER_S);
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
    S.sweep_ns = S.timeout_ns / 4;
    if (S.sweep_ns > SWEEP_MAX_NS) S.sweep_ns = SWEEP_MAX_NS;
    if (S.sweep_ns < SWEEP_MIN_NS) S.sweep_ns = SWEEP_MIN_NS;
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

/* --record DIR: created if missing, must be a writable directory; 0, or -1 (printed) */
static int check_record_dir(const char *dir) {
    struct stat st;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "brawlpit_server: --record %s: %s\n", dir, strerror(errno));
        return -1;
    }
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || access(dir, W_OK | X_OK) != 0) {
        fprintf(stderr, "brawlpit_server: --record %s: not a writable directory\n", dir);
        return -1;
    }
    return 0;
}

/* entropy for session tokens and the address hash: /dev/urandom, else the
 * clock and the pid (tokens are not part of the deterministic match) */
static uint64_t entropy(void) {
    uint64_t e = (uint64_t)now_ns() ^ ((uint64_t)getpid() << 32) ^ 0xA5A5F00Dull;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        uint64_t r = 0;
        if (read(fd, &r, sizeof r) == (ssize_t)sizeof r) e ^= r;
        close(fd);
    }
    return e;
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
    if (S.record_dir && check_record_dir(S.record_dir) != 0) return 2;
    if ((rc = open_socket(host, port, &bound)) != 0) return rc;
    S.arenas = bp_arenas_create(S.max_arenas, entropy());
    if (!S.arenas) {
        fprintf(stderr, "brawlpit_server: out of memory for %d arenas\n", S.max_arenas);
        return 1;
    }
    bp_udp_init(&S.udp, S.fd);
    S.now = now_ns();
    S.err_tokens = ERR_RATE;
    S.err_last = (double)S.now / (double)NS_PER_S;
    S.next_parent_check = S.now + PARENT_CHECK_NS;

    printf("listening %u\n", bound);
    fflush(stdout);
    logf_("defaults: mode %s speed %g cpu %d seed %u; max arenas %d, client timeout %gs, spin %lld us",
          mode_name(S.def.mode), S.def.speed, S.def.cpu_level, S.def.seed, S.max_arenas,
          (double)S.timeout_ns / (double)NS_PER_S, (long long)(S.spin_ns / 1000));
    serve();
    bp_udp_flush(&S.udp);
    for (int m = 0; m < BP_ARENA_MODES; m++) /* shutdown cuts every match short */
        for (BpArena *a = bp_arena_first(S.arenas, m); a; a = bp_arena_next(S.arenas, a)) rec_flush(a);
    print_stats();
    bp_arenas_destroy(S.arenas);
    close(S.fd);
    return 0;
}
