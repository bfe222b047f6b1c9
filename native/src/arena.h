/*
 * arena.h — the arena table of brawlpit_server (arena.c).
 *
 * One server process runs up to --max-arenas independent matches ("arenas").
 * This module is their bookkeeping, with no sockets and no match logic:
 *
 *   - the table, allocated once (bp_arenas_create): every arena slot with its
 *     simulation, so a full table refuses instead of growing memory;
 *   - arena ids: (generation << BP_ARENA_INDEX_BITS | index) + 1, so an id names
 *     its table slot (O(1) look-up) and a reclaimed slot's next arena gets a new
 *     id (a stale JOIN finds nothing instead of a stranger's match);
 *   - per mode, the active arenas in creation order, and the "open" arenas —
 *     one client, the other slot free (not a client's, not the CPU's) — in
 *     creation order, one list per (mode, free slot), so BP_ARENA_ANY takes the
 *     oldest match of its mode in O(1);
 *   - the address hash: client IPv4 address:port -> (arena, slot), open
 *     addressing with linear probing and backward-shift deletion, salted, at
 *     most 1/4 full: one look-up per datagram whatever the number of arenas;
 *   - session tokens: the xorshift32 stream of sim.h pushed through a keyed
 *     bijection (x * odd key) ^ key: unpredictable without the keys, non-zero,
 *     and unique until 2^32 - 1 tokens have been issued (xorshift32 visits
 *     every non-zero state once per period).
 *
 * The server (server.c) owns what happens inside an arena: it reads and writes
 * the match fields of BpArena and BpClient directly, and tells the table when
 * occupancy changes (bp_arena_attach / bp_arena_detach / bp_arena_refresh after
 * it adds or removes the CPU).  An arena with no client left is reclaimed by
 * the server at once (bp_arena_free), which also destroys its CPU.
 */
#ifndef BRAWLPIT_ARENA_H
#define BRAWLPIT_ARENA_H

#include <netinet/in.h>
#include <stdint.h>

#include "brawlpit.h"
#include "cpu.h"
#include "recorder.h"
#include "sim.h"

#define BP_ARENA_SLOTS 2        /* players per match */
#define BP_ARENA_MODES 3        /* BP_MODE_REALTIME, _FASTFORWARD, _LOCKSTEP */
#define BP_ARENA_INDEX_BITS 12  /* table index bits of an arena id */
#define BP_CMD_QUEUE_CAP 128    /* lockstep: commands queued per client */
/* seats of an arena in the address hash: slots 0, 1, then the spectators */
#define BP_ARENA_SEATS (BP_ARENA_SLOTS + BP_MAX_SPECTATORS)
#define BP_SEAT_IS_SPECTATOR(seat) ((seat) >= BP_ARENA_SLOTS)
#define BP_SEAT_SPECTATOR(i) (BP_ARENA_SLOTS + (i)) /* seat of spectator i */

_Static_assert((1 << BP_ARENA_INDEX_BITS) == BP_MAX_ARENAS, "arena ids carry the table index");

/* One client of an arena (a slot held by an address). */
typedef struct {
    int active;
    struct sockaddr_in addr;
    uint32_t session, nonce;
    int64_t last_rx_ns; /* monotonic time of its last datagram (client timeout) */
    UserCmd q[BP_CMD_QUEUE_CAP]; /* lockstep: FIFO of queued commands */
    unsigned qhead, qlen;
    int have_seq;
    uint32_t last_seq; /* newest cmd_seq accepted this match */
    uint32_t ack;      /* last cmd_seq applied to a tick */
    int have_held;     /* fastforward / realtime: the newest command, held */
    UserCmd held;
    char name[BP_NAME_LEN];     /* from IDENT ("" until one arrives), NUL-terminated */
    char ticket[BP_TICKET_LEN]; /* from IDENT ("" = anonymous), NUL-terminated */
    /* server.c, while it handles a BATCH naming this seat (batch_gen = that batch's):
     * the seat's SNAPSHOTs go into the answer's item batch_entry instead of its address */
    uint32_t batch_gen;
    int batch_entry;
} BpClient;

/* One spectator of an arena (BP_SLOT_SPECTATE): receives what the arena
 * sends, holds no slot, never keeps the arena alive. */
typedef struct {
    int active;
    struct sockaddr_in addr;
    uint32_t session, nonce;
    int64_t last_rx_ns;
} BpSpectator;

/* One arena: one match at a time, its clients and its CPU. */
typedef struct {
    uint32_t id;     /* 0 = this table slot is free */
    uint64_t serial; /* creation order (ANY takes the oldest) */
    int mode;        /* BP_MODE_*, fixed for the arena's life */
    BpClient cl[BP_ARENA_SLOTS];
    BpSpectator spec[BP_MAX_SPECTATORS];
    BpSim *sim; /* allocated with the table, reused by every arena of this slot */
    BpCpu *cpu; /* the built-in CPU in slot 1, or NULL */
    int cpu_level;
    uint32_t seed, match_id;
    int have_reset;       /* a RESET was applied (reset_nonce is valid) */
    uint32_t reset_nonce; /* nonce of the last applied RESET */
    double speed;         /* free-running: multiple of BP_TICK_HZ, 0 = unpaced */
    int64_t period_ns;    /* free-running: ns per tick, 0 = unpaced */
    int64_t next_tick_ns; /* free-running: when the next tick is due */
    BpRecorder rec;       /* --record: the current match's inputs (its buffer kept by the slot) */
    /* table bookkeeping, arena.c only */
    int idx, prev, next;                /* active list of its mode */
    int open_key, open_prev, open_next; /* open list (mode * 2 + free slot), or -1 */
} BpArena;

typedef struct BpArenaTable BpArenaTable;

/* A table of max_arenas (1..BP_MAX_ARENAS) arena slots, each with its sim;
 * `entropy` seeds the session keys, the token stream and the hash salt.
 * NULL on a bad size or out of memory. */
BpArenaTable *bp_arenas_create(int max_arenas, uint64_t entropy);
void bp_arenas_destroy(BpArenaTable *t); /* frees every sim and CPU */
int bp_arenas_count(const BpArenaTable *t); /* arenas in use */
int bp_arenas_max(const BpArenaTable *t);

/* A new arena of `mode` (0..BP_ARENA_MODES-1) with no client and a fresh id, or
 * NULL when the table is full.  The match fields are zero except sim. */
BpArena *bp_arena_new(BpArenaTable *t, int mode);
/* Reclaim an arena: it must have no client.  Destroys its CPU and ends its
 * spectators' sessions; the slot (and its sim) is reused by a later
 * bp_arena_new, under a new id. */
void bp_arena_free(BpArenaTable *t, BpArena *a);

BpArena *bp_arena_by_id(BpArenaTable *t, uint32_t id); /* NULL: no such arena */
/* The oldest open arena of `mode` whose slot want_slot (0, 1) is free, or with
 * either slot free for BP_SLOT_ANY; NULL if none. */
BpArena *bp_arena_any(BpArenaTable *t, int mode, int want_slot);
/* The arena and seat of the client at addr, or NULL: *slot is a slot (0, 1)
 * or, BP_SEAT_IS_SPECTATOR, BP_SEAT_SPECTATOR(i) for spectator i. */
BpArena *bp_arena_by_addr(BpArenaTable *t, const struct sockaddr_in *addr, int *slot);

/* Seat a client at addr in `slot` (which must be free, and addr not seated
 * anywhere): the BpClient is cleared, active, with addr and session. */
BpClient *bp_arena_attach(BpArenaTable *t, BpArena *a, int slot, const struct sockaddr_in *addr,
                          uint32_t session);
/* Free a slot held by a client (the BpClient is cleared). */
void bp_arena_detach(BpArenaTable *t, BpArena *a, int slot);
/* Seat a spectator at addr (not seated anywhere): its index, or -1 when the
 * arena has BP_MAX_SPECTATORS already. */
int bp_arena_spectate(BpArenaTable *t, BpArena *a, const struct sockaddr_in *addr, uint32_t session);
/* Remove spectator i (the BpSpectator is cleared). */
void bp_arena_unspectate(BpArenaTable *t, BpArena *a, int i);
int bp_arena_spectators(const BpArena *a);

/* Re-file the arena in the open lists after its CPU changed. */
void bp_arena_refresh(BpArenaTable *t, BpArena *a);

int bp_arena_clients(const BpArena *a);             /* slots held by clients */
int bp_arena_slot_free(const BpArena *a, int slot); /* no client, not the CPU's */

/* Active arenas of one mode in creation order: first, then next until NULL. */
BpArena *bp_arena_first(BpArenaTable *t, int mode);
BpArena *bp_arena_next(BpArenaTable *t, const BpArena *a);

/* 1 when the n-byte field f is NUL-padded printable ASCII (0x20..0x7e) with at
 * least one NUL (so at most n - 1 characters), and non-empty unless allow_empty
 * (NetIdent name / ticket) */
int bp_text_field_ok(const char *f, size_t n, int allow_empty);

/* A fresh session token: non-zero, unique (see the top comment). */
uint32_t bp_arenas_session(BpArenaTable *t);

#endif /* BRAWLPIT_ARENA_H */
