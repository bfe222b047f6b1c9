/*
 * arena.c — the arena table of brawlpit_server: ids, lists, the address hash,
 * session tokens.  The design is in arena.h's top comment.
 */
#include "arena.h"

#include <stdlib.h>
#include <string.h>

#define NO_LINK (-1)
#define OPEN_LISTS (BP_ARENA_MODES * BP_ARENA_SLOTS)
#define INDEX_MASK ((uint32_t)BP_MAX_ARENAS - 1u)
#define GEN_LIMIT (1u << (32 - BP_ARENA_INDEX_BITS)) /* generations per slot before wrapping */
#define HASH_LOAD_INV 4                              /* hash entries per possible client */
#define KEY_USED (1ull << 48)                        /* marks a used hash entry (ip:port below) */

typedef struct {
    uint64_t key; /* 0 = empty, else KEY_USED | ip << 16 | port */
    uint32_t ref; /* arena index * BP_ARENA_SEATS + seat */
} HashEntry;

struct BpArenaTable {
    int max, count;
    BpArena *a;
    uint32_t *gen;   /* per slot: generation of its current / next arena */
    int *free_stack; /* free slot indices; the top is reused first */
    int nfree;
    int head[BP_ARENA_MODES], tail[BP_ARENA_MODES];   /* active lists */
    int ohead[OPEN_LISTS], otail[OPEN_LISTS];         /* open lists */
    uint64_t serial;
    HashEntry *hash;
    uint32_t hmask;
    uint64_t salt;
    uint32_t tok, key_mul, key_xor; /* session tokens */
};

/* splitmix64 step: seeds and the hash's mixer */
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint32_t next_pow2(uint32_t v) {
    uint32_t p = 1;
    while (p < v) p <<= 1;
    return p;
}

/* ------------------------------------------------------------ create / destroy */
static int alloc_table(BpArenaTable *t, int max) {
    uint32_t hcap = next_pow2((uint32_t)(max * BP_ARENA_SEATS * HASH_LOAD_INV));
    t->a = calloc((size_t)max, sizeof *t->a);
    t->gen = calloc((size_t)max, sizeof *t->gen);
    t->free_stack = calloc((size_t)max, sizeof *t->free_stack);
    t->hash = calloc(hcap, sizeof *t->hash);
    if (!t->a || !t->gen || !t->free_stack || !t->hash) return -1;
    t->hmask = hcap - 1;
    for (int i = 0; i < max; i++) {
        t->a[i].sim = bp_sim_create();
        if (!t->a[i].sim) return -1;
        t->a[i].idx = i;
        t->free_stack[max - 1 - i] = i; /* slot 0 on top */
    }
    t->nfree = max;
    return 0;
}

static void seed_keys(BpArenaTable *t, uint64_t entropy) {
    uint64_t s = mix64(entropy + 0x9E3779B97F4A7C15ull);
    t->salt = mix64(s ^ 0xA5A5A5A5A5A5A5A5ull);
    t->key_mul = (uint32_t)(s >> 32) | 1u; /* odd: multiplication is a bijection */
    t->key_xor = (uint32_t)s;
    t->tok = (uint32_t)(mix64(s + 1) >> 16);
    if (!t->tok) t->tok = 1; /* xorshift32 must never hold 0 */
}

BpArenaTable *bp_arenas_create(int max_arenas, uint64_t entropy) {
    if (max_arenas < 1 || max_arenas > BP_MAX_ARENAS) return NULL;
    BpArenaTable *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->max = max_arenas;
    for (int m = 0; m < BP_ARENA_MODES; m++) t->head[m] = t->tail[m] = NO_LINK;
    for (int k = 0; k < OPEN_LISTS; k++) t->ohead[k] = t->otail[k] = NO_LINK;
    seed_keys(t, entropy);
    if (alloc_table(t, max_arenas) != 0) {
        bp_arenas_destroy(t);
        return NULL;
    }
    return t;
}

void bp_arenas_destroy(BpArenaTable *t) {
    if (!t) return;
    for (int i = 0; t->a && i < t->max; i++) {
        bp_cpu_destroy(t->a[i].cpu);
        bp_sim_destroy(t->a[i].sim);
        bp_rec_free(&t->a[i].rec);
    }
    free(t->a);
    free(t->gen);
    free(t->free_stack);
    free(t->hash);
    free(t);
}

int bp_arenas_count(const BpArenaTable *t) { return t->count; }
int bp_arenas_max(const BpArenaTable *t) { return t->max; }

/* ------------------------------------------------------------ occupancy */
int bp_arena_clients(const BpArena *a) { return a->cl[0].active + a->cl[1].active; }

int bp_arena_slot_free(const BpArena *a, int slot) {
    return !a->cl[slot].active && !(slot == 1 && a->cpu);
}

/* ------------------------------------------------------------ open lists */
static void open_unlink(BpArenaTable *t, BpArena *a) {
    if (a->open_key < 0) return;
    int k = a->open_key;
    if (a->open_prev != NO_LINK) t->a[a->open_prev].open_next = a->open_next;
    else t->ohead[k] = a->open_next;
    if (a->open_next != NO_LINK) t->a[a->open_next].open_prev = a->open_prev;
    else t->otail[k] = a->open_prev;
    a->open_key = a->open_prev = a->open_next = NO_LINK;
}

/* insert keeping creation order (walks back from the newest: an arena that
 * was just created goes to the tail at once) */
static void open_link(BpArenaTable *t, BpArena *a, int k) {
    int after = t->otail[k];
    while (after != NO_LINK && t->a[after].serial > a->serial) after = t->a[after].open_prev;
    int before = after == NO_LINK ? t->ohead[k] : t->a[after].open_next;
    a->open_key = k;
    a->open_prev = after;
    a->open_next = before;
    if (after != NO_LINK) t->a[after].open_next = a->idx;
    else t->ohead[k] = a->idx;
    if (before != NO_LINK) t->a[before].open_prev = a->idx;
    else t->otail[k] = a->idx;
}

/* the open list an arena belongs in: exactly one client and one free slot */
static int open_key_of(const BpArena *a) {
    int f0 = bp_arena_slot_free(a, 0), f1 = bp_arena_slot_free(a, 1);
    if (f0 == f1 || bp_arena_clients(a) != 1) return NO_LINK;
    return a->mode * BP_ARENA_SLOTS + (f0 ? 0 : 1);
}

void bp_arena_refresh(BpArenaTable *t, BpArena *a) {
    int k = open_key_of(a);
    if (k == a->open_key) return;
    open_unlink(t, a);
    if (k != NO_LINK) open_link(t, a, k);
}

BpArena *bp_arena_any(BpArenaTable *t, int mode, int want_slot) {
    if (mode < 0 || mode >= BP_ARENA_MODES) return NULL;
    int h0 = t->ohead[mode * BP_ARENA_SLOTS + 0], h1 = t->ohead[mode * BP_ARENA_SLOTS + 1];
    if (want_slot == 0) return h0 == NO_LINK ? NULL : &t->a[h0];
    if (want_slot == 1) return h1 == NO_LINK ? NULL : &t->a[h1];
    if (h0 == NO_LINK) return h1 == NO_LINK ? NULL : &t->a[h1];
    if (h1 == NO_LINK) return &t->a[h0];
    return t->a[h0].serial < t->a[h1].serial ? &t->a[h0] : &t->a[h1];
}

/* ------------------------------------------------------------ arenas */
BpArena *bp_arena_new(BpArenaTable *t, int mode) {
    if (t->nfree == 0 || mode < 0 || mode >= BP_ARENA_MODES) return NULL;
    int i = t->free_stack[--t->nfree];
    BpArena *a = &t->a[i];
    BpSim *sim = a->sim;
    BpReplayRun *runs = a->rec.runs; /* a recording buffer stays with its table slot */
    memset(a, 0, sizeof *a);
    a->sim = sim;
    a->rec.runs = runs;
    a->idx = i;
    a->id = ((t->gen[i] << BP_ARENA_INDEX_BITS) | (uint32_t)i) + 1u;
    a->serial = ++t->serial;
    a->mode = mode;
    a->open_key = a->open_prev = a->open_next = NO_LINK;
    a->prev = t->tail[mode];
    a->next = NO_LINK;
    if (a->prev != NO_LINK) t->a[a->prev].next = i;
    else t->head[mode] = i;
    t->tail[mode] = i;
    t->count++;
    return a;
}

void bp_arena_free(BpArenaTable *t, BpArena *a) {
    for (int i = 0; i < BP_MAX_SPECTATORS; i++) bp_arena_unspectate(t, a, i);
    open_unlink(t, a);
    if (a->prev != NO_LINK) t->a[a->prev].next = a->next;
    else t->head[a->mode] = a->next;
    if (a->next != NO_LINK) t->a[a->next].prev = a->prev;
    else t->tail[a->mode] = a->prev;
    bp_cpu_destroy(a->cpu);
    a->cpu = NULL;
    a->id = 0;
    /* the next arena of this slot gets another id (the last generation is
     * skipped: its last index would make the id wrap to 0) */
    t->gen[a->idx] = (t->gen[a->idx] + 1u) % (GEN_LIMIT - 1u);
    t->free_stack[t->nfree++] = a->idx;
    t->count--;
}

BpArena *bp_arena_by_id(BpArenaTable *t, uint32_t id) {
    if (id == 0) return NULL;
    uint32_t i = (id - 1u) & INDEX_MASK;
    if (i >= (uint32_t)t->max || t->a[i].id != id) return NULL;
    return &t->a[i];
}

BpArena *bp_arena_first(BpArenaTable *t, int mode) {
    if (mode < 0 || mode >= BP_ARENA_MODES || t->head[mode] == NO_LINK) return NULL;
    return &t->a[t->head[mode]];
}

BpArena *bp_arena_next(BpArenaTable *t, const BpArena *a) {
    return a->next == NO_LINK ? NULL : &t->a[a->next];
}

/* ------------------------------------------------------------ address hash */
static uint64_t addr_key(const struct sockaddr_in *addr) {
    return KEY_USED | ((uint64_t)addr->sin_addr.s_addr << 16) | (uint64_t)addr->sin_port;
}

static uint32_t home_of(const BpArenaTable *t, uint64_t key) {
    return (uint32_t)mix64(key ^ t->salt) & t->hmask;
}

/* the entry holding key, or the empty entry where it would go */
static uint32_t hash_find(const BpArenaTable *t, uint64_t key) {
    uint32_t i = home_of(t, key);
    while (t->hash[i].key && t->hash[i].key != key) i = (i + 1) & t->hmask;
    return i;
}

/* backward-shift deletion: no tombstones, probe chains stay short */
static void hash_delete(BpArenaTable *t, uint32_t i) {
    uint32_t j = i;
    for (;;) {
        j = (j + 1) & t->hmask;
        if (!t->hash[j].key) break;
        uint32_t home = home_of(t, t->hash[j].key);
        /* j's entry may move into the hole i unless its home lies in (i, j] */
        int stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (stays) continue;
        t->hash[i] = t->hash[j];
        i = j;
    }
    t->hash[i].key = 0;
    t->hash[i].ref = 0;
}

/* the address now answers for seat `seat` of arena `a` (a slot or BP_SEAT_SPECTATOR(k)) */
static void hash_put(BpArenaTable *t, const struct sockaddr_in *addr, const BpArena *a, int seat) {
    uint32_t i = hash_find(t, addr_key(addr));
    t->hash[i].key = addr_key(addr);
    t->hash[i].ref = (uint32_t)(a->idx * BP_ARENA_SEATS + seat);
}

/* the address answers for nothing any more */
static void hash_forget(BpArenaTable *t, const struct sockaddr_in *addr) {
    uint32_t i = hash_find(t, addr_key(addr));
    if (t->hash[i].key) hash_delete(t, i);
}

BpArena *bp_arena_by_addr(BpArenaTable *t, const struct sockaddr_in *addr, int *slot) {
    uint32_t i = hash_find(t, addr_key(addr));
    if (!t->hash[i].key) return NULL;
    *slot = (int)(t->hash[i].ref % BP_ARENA_SEATS);
    return &t->a[t->hash[i].ref / BP_ARENA_SEATS];
}

/* ------------------------------------------------------------ clients */
BpClient *bp_arena_attach(BpArenaTable *t, BpArena *a, int slot, const struct sockaddr_in *addr,
                          uint32_t session) {
    hash_put(t, addr, a, slot);
    BpClient *c = &a->cl[slot];
    memset(c, 0, sizeof *c);
    c->active = 1;
    c->addr = *addr;
    c->session = session;
    bp_arena_refresh(t, a);
    return c;
}

void bp_arena_detach(BpArenaTable *t, BpArena *a, int slot) {
    BpClient *c = &a->cl[slot];
    if (!c->active) return;
    hash_forget(t, &c->addr);
    memset(c, 0, sizeof *c);
    bp_arena_refresh(t, a);
}

/* ------------------------------------------------------------ spectators */
int bp_arena_spectate(BpArenaTable *t, BpArena *a, const struct sockaddr_in *addr, uint32_t session) {
    for (int k = 0; k < BP_MAX_SPECTATORS; k++) {
        BpSpectator *sp = &a->spec[k];
        if (sp->active) continue;
        hash_put(t, addr, a, BP_SEAT_SPECTATOR(k));
        memset(sp, 0, sizeof *sp);
        sp->active = 1;
        sp->addr = *addr;
        sp->session = session;
        return k;
    }
    return -1;
}

void bp_arena_unspectate(BpArenaTable *t, BpArena *a, int k) {
    BpSpectator *sp = &a->spec[k];
    if (!sp->active) return;
    hash_forget(t, &sp->addr);
    memset(sp, 0, sizeof *sp);
}

int bp_arena_spectators(const BpArena *a) {
    int n = 0;
    for (int k = 0; k < BP_MAX_SPECTATORS; k++) n += a->spec[k].active;
    return n;
}

/* ------------------------------------------------------------ sessions */
uint32_t bp_arenas_session(BpArenaTable *t) {
    uint32_t s;
    do {
        s = (bp_xorshift32(&t->tok) * t->key_mul) ^ t->key_xor;
    } while (s == 0);
    return s;
}

/* ------------------------------------------------------------ identity */
int bp_text_field_ok(const char *f, size_t n, int allow_empty) {
    size_t len = 0;
    while (len < n && f[len] != 0) {
        unsigned char ch = (unsigned char)f[len];
        if (ch < 0x20 || ch > 0x7e) return 0;
        len++;
    }
    if (len == n || (len == 0 && !allow_empty)) return 0; /* no NUL / empty */
    for (size_t i = len; i < n; i++)
        if (f[i] != 0) return 0; /* NUL-padded, no text after the NUL */
    return 1;
}
