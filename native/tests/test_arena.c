/*
 * test_arena.c — C checks for the arena table of brawlpit_server (arena.c; run
 * by `make -C native check`): create, join by id, ANY matching (mode, free
 * slot, the oldest first, the CPU's slot), the bound, reclaim and reuse under a
 * new id, the address hash against a brute-force model through many inserts
 * and deletions, unique non-zero session tokens, spectator seats (bound, hash,
 * reclaim), IDENT text fields, and the match recorder (run-length, bound,
 * the file written and replayed).
 */
#define _GNU_SOURCE /* mkdtemp */
#include "arena.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <unistd.h>
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

static void test_spectators(void) {
    BpArenaTable *t = bp_arenas_create(2, ENTROPY);
    BpArena *a = seat_new(t, BP_MODE_LOCKSTEP, 0, 3000);
    int k[BP_MAX_SPECTATORS];
    for (int i = 0; i < BP_MAX_SPECTATORS; i++) {
        struct sockaddr_in ad = addr(0x7F000002u, (uint16_t)(3100 + i));
        k[i] = bp_arena_spectate(t, a, &ad, bp_arenas_session(t));
        CHECK(k[i] == i, "spectator %d at index %d", i, k[i]);
    }
    struct sockaddr_in extra = addr(0x7F000002u, 3199);
    CHECK(bp_arena_spectate(t, a, &extra, 1u) == -1, "the bound refuses one more");
    CHECK(bp_arena_spectators(a) == BP_MAX_SPECTATORS && bp_arena_clients(a) == 1, "spectators are no clients");
    int seat = -1;
    struct sockaddr_in s2 = addr(0x7F000002u, 3102);
    CHECK(bp_arena_by_addr(t, &s2, &seat) == a && seat == BP_SEAT_SPECTATOR(2) && BP_SEAT_IS_SPECTATOR(seat),
          "spectator found by address (seat %d)", seat);
    struct sockaddr_in p0 = addr(0x7F000001u, 3000);
    CHECK(bp_arena_by_addr(t, &p0, &seat) == a && seat == 0, "the player still slot 0");
    bp_arena_unspectate(t, a, 2);
    CHECK(bp_arena_by_addr(t, &s2, &seat) == NULL && bp_arena_spectators(a) == BP_MAX_SPECTATORS - 1, "left");
    CHECK(bp_arena_spectate(t, a, &extra, 2u) == 2, "its place reused");
    CHECK(bp_arena_any(t, BP_MODE_LOCKSTEP, BP_SLOT_ANY) == a, "still open for a second player");
    bp_arena_detach(t, a, 0);
    bp_arena_free(t, a); /* ends the spectators' sessions */
    CHECK(bp_arena_by_addr(t, &extra, &seat) == NULL, "reclaim removes the spectators from the hash");
    struct sockaddr_in s0 = addr(0x7F000002u, 3100);
    CHECK(bp_arena_by_addr(t, &s0, &seat) == NULL && bp_arenas_count(t) == 0, "all of them");
    BpArena *b = seat_new(t, BP_MODE_LOCKSTEP, 0, 3000);
    CHECK(b && bp_arena_spectators(b) == 0, "a new arena starts without spectators");
    bp_arenas_destroy(t);
}

static void test_text_fields(void) {
    char f[BP_NAME_LEN];
    memset(f, 0, sizeof f);
    CHECK(!bp_text_field_ok(f, sizeof f, 0) && bp_text_field_ok(f, sizeof f, 1), "empty");
    memcpy(f, "cpu:3 bot-x_y.z~", 16);
    CHECK(bp_text_field_ok(f, sizeof f, 0), "printable");
    f[3] = '\t';
    CHECK(!bp_text_field_ok(f, sizeof f, 0), "tab");
    f[3] = (char)0x80;
    CHECK(!bp_text_field_ok(f, sizeof f, 0), "high bit");
    memset(f, 0, sizeof f);
    memcpy(f, "ok", 2);
    f[10] = 'x';
    CHECK(!bp_text_field_ok(f, sizeof f, 0), "text after the NUL");
    memset(f, 'a', sizeof f);
    CHECK(!bp_text_field_ok(f, sizeof f, 0), "no NUL");
    f[sizeof f - 1] = 0;
    CHECK(bp_text_field_ok(f, sizeof f, 0), "31 characters");
}

static void test_recorder(void) {
    BpRecorder r;
    memset(&r, 0, sizeof r);
    bp_rec_clear(&r);
    BpInput in[2] = {{0.5f, -1.0f, 3u}, {0.0f, 0.0f, 0u}};
    for (int i = 0; i < 10; i++) bp_rec_add(&r, in);
    in[1].stick_x = -0.0f; /* another bit pattern: another run */
    bp_rec_add(&r, in);
    CHECK(r.n_runs == 2 && r.n_ticks == 11 && r.runs[0].count == 10 && r.runs[1].count == 1 && r.dirty,
          "runs %u ticks %u", r.n_runs, r.n_ticks);
    /* the bound: a new input every tick fills BP_REC_MAX_RUNS runs, one more is refused */
    bp_rec_clear(&r);
    for (int i = 0; i < BP_REC_MAX_RUNS; i++) {
        BpInput v[2] = {{(float)i, 0.0f, 0u}, {0.0f, 0.0f, 0u}};
        bp_rec_add(&r, v);
    }
    BpInput v[2] = {{-1.0f, 0.0f, 0u}, {0.0f, 0.0f, 0u}};
    CHECK(r.n_runs == BP_REC_MAX_RUNS && !r.broken, "full");
    CHECK(bp_rec_add(&r, v) == -1 && r.broken, "past the bound: broken, not grown");
    /* a real match recorded, written, read back and replayed */
    bp_rec_clear(&r);
    BpSim *sim = bp_sim_create();
    bp_sim_reset(sim, 42u, 3u);
    uint32_t st = 7u;
    for (int i = 0; i < 2000 && bp_sim_phase(sim) == BP_PHASE_PLAYING; i++) {
        if (i % 6 == 0) {
            for (int p = 0; p < 2; p++) {
                in[p].stick_x = (float)(bp_xorshift32(&st) % 201) / 100.0f - 1.0f;
                in[p].stick_y = (float)(bp_xorshift32(&st) % 201) / 100.0f - 1.0f;
                in[p].buttons = bp_xorshift32(&st) & BP_BTN_MASK;
            }
        }
        bp_rec_add(&r, in);
        bp_sim_step(sim, in);
    }
    char dir[] = "/tmp/bp_test_recXXXXXX";
    CHECK(mkdtemp(dir) != NULL, "temp dir");
    BpReplayHeader h;
    memset(&h, 0, sizeof h);
    h.seed = 42u;
    h.match_id = 3u;
    h.arena_id = 9u;
    h.final_hash = bp_sim_state_hash(sim);
    r.start_unix_ms = 1234567u;
    NetPlayer players[2];
    bp_sim_players(sim, players);
    char path[512];
    CHECK(bp_rec_write(&r, dir, &h, players, path, sizeof path) == 0, "written");
    CHECK(strstr(path, "/1234567-a9-m3.bpr") != NULL, "named %s", path);
    FILE *f = fopen(path, "rb");
    BpReplayHeader back;
    CHECK(f && fread(&back, sizeof back, 1, f) == 1, "read back");
    CHECK(!memcmp(back.magic, "BPRP", 4) && back.version == BP_REPLAY_VERSION &&
              back.header_size == BP_REPLAY_HEADER_SIZE && back.n_runs == r.n_runs && back.n_ticks == r.n_ticks,
          "header");
    BpSim *re = bp_sim_create();
    bp_sim_reset(re, back.seed, back.match_id);
    for (uint32_t i = 0; f && i < back.n_runs; i++) {
        BpReplayRun run;
        if (fread(&run, sizeof run, 1, f) != 1) break;
        BpInput ri[2] = {{run.sx0, run.sy0, run.buttons0}, {run.sx1, run.sy1, run.buttons1}};
        for (uint32_t k = 0; k < run.count; k++) bp_sim_step(re, ri);
    }
    NetPlayer tail[2];
    CHECK(f && fread(tail, sizeof tail, 1, f) == 1 && fgetc(f) == EOF, "players trailer, then the end");
    CHECK(bp_sim_state_hash(re) == back.final_hash && !memcmp(tail, players, sizeof tail), "replays bit for bit");
    if (f) fclose(f);
    unlink(path);
    /* a directory that does not exist: -1, nothing left behind */
    rmdir(dir);
    CHECK(bp_rec_write(&r, dir, &h, players, path, sizeof path) == -1, "missing directory fails");
    bp_sim_destroy(re);
    bp_sim_destroy(sim);
    bp_rec_free(&r);
    CHECK(r.runs == NULL, "freed");
}

int main(void) {
    test_spectators();
    test_text_fields();
    test_recorder();
    test_bounds();
    test_reclaim_and_reuse();
    test_any();
    test_hash_model();
    test_sessions();
    return check_report("test_arena");
}
