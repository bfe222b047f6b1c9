/*
 * test_arena.c — C checks for the arena table of brawlpit_server (arena.c; run
 * by `make -C native check`): create, join by id, ANY matching (mode, free
 * slot, the oldest first, the CPU's slot), the bound, reclaim and reuse under a
 * new id, the address hash against a brute-force model through many inserts
 * and deletions, and unique non-zero session tokens.
 */
#include "arena.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define ENTROPY 0x1234567890ABCDEFull

static struct sockaddr_in addr(uint32_t ip, uint16_t port) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(ip);
    a.sin_port = htons(port);
    return a;
}

/* a new arena of `mode` with one client in `slot` */
static BpArena *seat_new(BpArenaTable *t, int mode, int slot, uint16_t port) {
    BpArena *a = bp_arena_new(t, mode);
    if (!a) return NULL;
    struct sockaddr_in ad = addr(0x7F000001u, port);
    bp_arena_attach(t, a, slot, &ad, bp_arenas_session(t));
    return a;
}

static void test_bounds(void) {
    CHECK(bp_arenas_create(0, ENTROPY) == NULL, "0 arenas");
    CHECK(bp_arenas_create(BP_MAX_ARENAS + 1, ENTROPY) == NULL, "past BP_MAX_ARENAS");
    BpArenaTable *t = bp_arenas_create(3, ENTROPY);
    CHECK(t && bp_arenas_max(t) == 3 && bp_arenas_count(t) == 0, "empty table");
    BpArena *a[3];
    for (int i = 0; i < 3; i++) a[i] = seat_new(t, BP_MODE_LOCKSTEP, 0, (uint16_t)(1000 + i));
    CHECK(a[0] && a[1] && a[2] && bp_arenas_count(t) == 3, "three arenas");
    CHECK(a[0]->id == 1 && a[1]->id == 2 && a[2]->id == 3, "ids %u %u %u", a[0]->id, a[1]->id, a[2]->id);
    CHECK(bp_arena_new(t, BP_MODE_LOCKSTEP) == NULL, "the bound refuses a fourth");
    CHECK(bp_arena_new(t, 7) == NULL, "bad mode");
    CHECK(bp_arena_by_id(t, 2) == a[1] && bp_arena_by_id(t, 4) == NULL && bp_arena_by_id(t, 0) == NULL,
          "by id");
    bp_arenas_destroy(t);
}

static void test_reclaim_and_reuse(void) {
    BpArenaTable *t = bp_arenas_create(2, ENTROPY);
    BpArena *a = seat_new(t, BP_MODE_LOCKSTEP, 0, 2000);
    BpArena *b = seat_new(t, BP_MODE_FASTFORWARD, 0, 2001);
    uint32_t old = a->id;
    BpSim *sim = a->sim;
    struct sockaddr_in ad = addr(0x7F000001u, 2000);
    int slot = -1;
    CHECK(bp_arena_by_addr(t, &ad, &slot) == a && slot == 0, "client found");
    bp_arena_detach(t, a, 0);
    CHECK(bp_arena_by_addr(t, &ad, &slot) == NULL && bp_arena_clients(a) == 0, "client gone");
    a->cpu = bp_cpu_create(3, 1u); /* freed by the reclaim */
    bp_arena_free(t, a);
    CHECK(bp_arenas_count(t) == 1 && bp_arena_by_id(t, old) == NULL, "reclaimed");
    BpArena *c = seat_new(t, BP_MODE_LOCKSTEP, 1, 2002);
    CHECK(c == a && c->sim == sim && c->cpu == NULL, "the slot and its sim are reused");
    CHECK(c->id != old && bp_arena_by_id(t, c->id) == c && bp_arena_by_id(t, old) == NULL,
          "a new id (%u, was %u)", c->id, old);
    CHECK(bp_arena_by_id(t, b->id) == b, "the neighbour untouched");
    CHECK(bp_arena_first(t, BP_MODE_LOCKSTEP) == c && bp_arena_next(t, c) == NULL, "lockstep list");
    CHECK(bp_arena_first(t, BP_MODE_FASTFORWARD) == b && bp_arena_first(t, BP_MODE_REALTIME) == NULL,
          "lists per mode");
    for (int i = 0; i < 5000; i++) { /* generations: ids stay unique per slot, never 0 */
        bp_arena_detach(t, c, 1);
        bp_arena_free(t, c);
        uint32_t prev = c->id;
        c = seat_new(t, BP_MODE_LOCKSTEP, 1, 2002);
        if (c->id == prev || c->id == 0 || bp_arena_by_id(t, c->id) != c) {
            CHECK(0, "reuse %d: id %u", i, c->id);
            break;
        }
    }
    bp_arenas_destroy(t);
}

static void test_any(void) {
    BpArenaTable *t = bp_arenas_create(8, ENTROPY);
    CHECK(bp_arena_any(t, BP_MODE_LOCKSTEP, BP_SLOT_ANY) == NULL, "nothing to join");
    BpArena *ff = seat_new(t, BP_MODE_FASTFORWARD, 0, 3000);
    BpArena *s1 = seat_new(t, BP_MODE_LOCKSTEP, 1, 3001); /* waits for slot 0 */
    BpArena *s0 = seat_new(t, BP_MODE_LOCKSTEP, 0, 3002); /* waits for slot 1 */
    BpArena *cpu = bp_arena_new(t, BP_MODE_LOCKSTEP);
    cpu->cpu = bp_cpu_create(2, 1u);
    struct sockaddr_in ad = addr(0x7F000001u, 3003);
    bp_arena_attach(t, cpu, 0, &ad, 1); /* full: client + CPU */
    CHECK(bp_arena_any(t, BP_MODE_LOCKSTEP, BP_SLOT_ANY) == s1, "the oldest of the mode");
    CHECK(bp_arena_any(t, BP_MODE_LOCKSTEP, 0) == s1, "slot 0 free");
    CHECK(bp_arena_any(t, BP_MODE_LOCKSTEP, 1) == s0, "slot 1 free");
    CHECK(bp_arena_any(t, BP_MODE_FASTFORWARD, 1) == ff && bp_arena_any(t, BP_MODE_FASTFORWARD, 0) == NULL,
          "fastforward");
    CHECK(bp_arena_any(t, BP_MODE_REALTIME, BP_SLOT_ANY) == NULL, "no realtime arena");
    /* s1 fills up: the next oldest; the CPU leaving opens the CPU arena */
    ad = addr(0x7F000001u, 3004);
    bp_arena_attach(t, s1, 0, &ad, 2);
    CHECK(bp_arena_any(t, BP_MODE_LOCKSTEP, BP_SLOT_ANY) == s0, "full arenas are skipped");
    bp_cpu_destroy(cpu->cpu);
    cpu->cpu = NULL;
    bp_arena_refresh(t, cpu);
    CHECK(bp_arena_any(t, BP_MODE_LOCKSTEP, 1) == s0, "creation order, not opening order");
    bp_arena_detach(t, s0, 0);
    bp_arena_free(t, s0);
    CHECK(bp_arena_any(t, BP_MODE_LOCKSTEP, 1) == cpu, "the CPU's slot opened");
    /* a client of the older s1 leaves: s1 is open again, ahead of cpu */
    bp_arena_detach(t, s1, 1);
    CHECK(bp_arena_any(t, BP_MODE_LOCKSTEP, 1) == s1, "re-opened in creation order");
    CHECK(bp_arena_any(t, BP_MODE_LOCKSTEP, 0) == NULL, "slot 0 held everywhere");
    bp_arena_detach(t, s1, 0);
    CHECK(bp_arena_any(t, BP_MODE_LOCKSTEP, 1) == cpu, "an empty arena is not open");
    bp_arenas_destroy(t);
}

/* random seat / leave against a brute-force model of who sits where */
static void test_hash_model(void) {
    enum { MAXA = 256, ROUNDS = 200000, PORTS = 700 };
    BpArenaTable *t = bp_arenas_create(MAXA, 99u);
    static int where[PORTS]; /* arena idx * 2 + slot, or -1 */
    static BpArena *arena_of[PORTS];
    for (int p = 0; p < PORTS; p++) where[p] = -1;
    uint32_t rng = 7u;
    int bad = 0;
    for (int r = 0; r < ROUNDS && !bad; r++) {
        int p = (int)(bp_xorshift32(&rng) % PORTS);
        struct sockaddr_in ad = addr(0x0A000000u + (uint32_t)(p % 5), (uint16_t)(40000 + p));
        int slot = -1;
        BpArena *got = bp_arena_by_addr(t, &ad, &slot);
        if (where[p] < 0) {
            bad |= got != NULL;
            BpArena *a = bp_arena_new(t, BP_MODE_LOCKSTEP);
            if (!a) continue; /* full: fine */
            bp_arena_attach(t, a, 0, &ad, 1);
            where[p] = a->idx * 2;
            arena_of[p] = a;
        } else {
            bad |= got != arena_of[p] || slot != where[p] % 2;
            bp_arena_detach(t, arena_of[p], 0);
            bp_arena_free(t, arena_of[p]);
            where[p] = -1;
        }
    }
    CHECK(!bad, "hash disagrees with the model");
    for (int p = 0; p < PORTS; p++) {
        struct sockaddr_in ad = addr(0x0A000000u + (uint32_t)(p % 5), (uint16_t)(40000 + p));
        int slot = -1;
        BpArena *got = bp_arena_by_addr(t, &ad, &slot);
        if ((where[p] < 0) != (got == NULL)) bad = 1;
    }
    CHECK(!bad, "final contents disagree with the model");
    bp_arenas_destroy(t);
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static void test_sessions(void) {
    enum { N = 1000000 };
    BpArenaTable *t = bp_arenas_create(1, 5u), *u = bp_arenas_create(1, 6u);
    uint32_t *s = malloc(N * sizeof *s);
    for (int i = 0; i < N; i++) s[i] = bp_arenas_session(t);
    uint32_t first_u = bp_arenas_session(u);
    CHECK(first_u != s[0], "other entropy, other tokens");
    qsort(s, N, sizeof *s, cmp_u32);
    int dup = 0;
    for (int i = 1; i < N; i++) dup += s[i] == s[i - 1];
    CHECK(s[0] != 0 && dup == 0, "zero %u, %d duplicates", s[0], dup);
    free(s);
    bp_arenas_destroy(t);
    bp_arenas_destroy(u);
}

int main(void) {
    test_bounds();
    test_reclaim_and_reuse();
    test_any();
    test_hash_model();
    test_sessions();
    return check_report("test_arena");
}
