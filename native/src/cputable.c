/*
 * cputable.c — brawlpit_cputable: CPU level vs level win-rate table.
 *
 *   brawlpit_cputable [--games N] [--seed S] [--min L] [--max L] [--adjacent] [--json] [--strict]
 *   brawlpit_cputable --help      (usage and one line per option on stdout, exit 0)
 *
 * Plays N full matches (in-process, no sockets) for each ordered pair of
 * levels (row vs column), alternating slots between games to cancel any slot
 * bias; a game's seed is a function of (seed, game index) only, so the table
 * is reproducible.  Cell = row's score = (wins + draws/2) / N.  With
 * --adjacent only the pairs (L+1 vs L) are played.  --json prints one JSON
 * object on the last line of stdout.  --strict: exit 1 unless every
 * adjacent score is >= 0.60.  Exit 2 on a usage error (usage on stderr).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu.h"

/* ---------------------------------------------------------------- tuning */
#define GAME_SEED_MUL 1000003u /* game seed = seed * MUL + game * STEP + 1 */
#define GAME_SEED_STEP 7919u
#define PAIR_SEED_STRIDE 16    /* pair (lo, hi) adds lo * STRIDE + hi to the seed */
#define STRICT_MIN_SCORE 0.6   /* --strict: every adjacent score at least this */
#define ARGS_HELP (-1)         /* parse_args: --help was printed */

typedef struct {
    int wins, draws, losses;
    double ticks;
} Cell;

typedef struct {
    int games, lo, hi, adjacent, json, strict;
    uint32_t seed;
} Options;

/* the played table: tab[a][b] = row a against column b, done[a][b] = played */
typedef struct {
    Cell tab[BP_CPU_LEVEL_MAX + 1][BP_CPU_LEVEL_MAX + 1];
    int done[BP_CPU_LEVEL_MAX + 1][BP_CPU_LEVEL_MAX + 1];
    double seconds;
} Table;

static Cell play(int a, int b, int games, uint32_t seed) {
    Cell c = {0, 0, 0, 0.0};
    for (int g = 0; g < games; g++) {
        uint32_t s = seed * GAME_SEED_MUL + (uint32_t)g * GAME_SEED_STEP + 1u;
        int a_slot = g & 1;
        uint32_t ticks = 0;
        uint8_t w = a_slot == 0 ? bp_match_cpu_vs_cpu_ex(a, b, s, &ticks, NULL)
                                : bp_match_cpu_vs_cpu_ex(b, a, s, &ticks, NULL);
        c.ticks += ticks;
        if (w == BP_WINNER_DRAW)
            c.draws++;
        else if (w == a_slot)
            c.wins++;
        else
            c.losses++;
    }
    c.ticks /= games > 0 ? games : 1;
    return c;
}

static double score(const Cell *c) {
    int n = c->wins + c->draws + c->losses;
    return n ? (c->wins + 0.5 * c->draws) / n : 0.0;
}

/* ---------------------------------------------------------------- options */
static const char USAGE[] =
    "usage: brawlpit_cputable [--games N] [--seed S] [--min L] [--max L] [--adjacent] [--json]\n"
    "                         [--strict]\n";

static int usage(void) {
    fputs(USAGE, stderr);
    return 2;
}

static int help(void) {
    fputs(USAGE, stdout);
    fputs("Plays the built-in CPU levels against each other (in-process matches, slots\n"
          "alternated) and prints the row level's score (wins + draws/2) / games.\n"
          "  --games N    matches per pair of levels (default 50)\n"
          "  --seed S     seed of the table (decimal, 0x hex or 0 octal; default 1)\n"
          "  --min L      lowest level played, 1..8 (default 1)\n"
          "  --max L      highest level played, 1..8 (default 8)\n"
          "  --adjacent   play only the pairs L+1 vs L\n"
          "  --json       also print one JSON object on the last line of stdout\n"
          "  --strict     exit 1 unless every adjacent score is >= 0.60\n"
          "  -h, --help   print this help and exit\n",
          stdout);
    return ARGS_HELP;
}

/* one option with a value; 0, or -1 when unknown */
static int parse_value(Options *o, const char *k, const char *v) {
    if (!strcmp(k, "--games"))
        o->games = atoi(v);
    else if (!strcmp(k, "--seed"))
        o->seed = (uint32_t)strtoul(v, NULL, 0);
    else if (!strcmp(k, "--min"))
        o->lo = atoi(v);
    else if (!strcmp(k, "--max"))
        o->hi = atoi(v);
    else
        return -1;
    return 0;
}

/* 0, ARGS_HELP (help printed) or 2 (usage error, usage printed) */
static int parse_args(int argc, char **argv, Options *o) {
    *o = (Options){50, BP_CPU_LEVEL_MIN, BP_CPU_LEVEL_MAX, 0, 0, 0, 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            return help();
        if (!strcmp(a, "--adjacent"))
            o->adjacent = 1;
        else if (!strcmp(a, "--json"))
            o->json = 1;
        else if (!strcmp(a, "--strict"))
            o->strict = 1;
        else if (i + 1 < argc && parse_value(o, a, argv[i + 1]) == 0)
            i++;
        else
            return usage();
    }
    if (o->games < 1 || o->lo < BP_CPU_LEVEL_MIN || o->hi > BP_CPU_LEVEL_MAX || o->lo > o->hi) {
        fprintf(stderr, "bad arguments\n");
        return usage();
    }
    return 0;
}

/* ---------------------------------------------------------------- the table */
/* every pair the options ask for (a mirrored pair reuses the played one) */
static void play_table(const Options *o, Table *t) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int a = o->lo; a <= o->hi; a++)
        for (int b = o->lo; b <= o->hi; b++) {
            if (a == b) continue;
            if (o->adjacent && a != b + 1) continue;
            if (t->done[b][a]) { /* mirror of an already played pair */
                Cell m = t->tab[b][a];
                t->tab[a][b] = (Cell){m.losses, m.draws, m.wins, m.ticks};
            } else {
                uint32_t pair = (uint32_t)(a < b ? a * PAIR_SEED_STRIDE + b : b * PAIR_SEED_STRIDE + a);
                t->tab[a][b] = play(a, b, o->games, o->seed + pair);
            }
            t->done[a][b] = 1;
        }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    t->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
}

/* the lowest adjacent (L+1 vs L) score; *ok = every one >= STRICT_MIN_SCORE */
static double min_adjacent(const Options *o, const Table *t, int *ok) {
    double min_adj = 1.0;
    *ok = 1;
    for (int a = o->lo + 1; a <= o->hi; a++) {
        double sc = score(&t->tab[a][a - 1]);
        if (sc < min_adj) min_adj = sc;
        if (sc < STRICT_MIN_SCORE) *ok = 0;
    }
    return min_adj;
}

static void print_table(const Options *o, const Table *t) {
    printf("CPU win-rate table: row's score vs column ((wins + draws/2) / %d games, slots alternated)\n",
           o->games);
    printf("row\\col");
    for (int b = o->lo; b <= o->hi; b++) printf("   L%d ", b);
    printf("\n");
    for (int a = o->lo; a <= o->hi; a++) {
        printf("  L%d   ", a);
        for (int b = o->lo; b <= o->hi; b++) {
            if (a == b || !t->done[a][b])
                printf("    - ");
            else
                printf(" %4.2f ", score(&t->tab[a][b]));
        }
        printf("\n");
    }
}

static void print_adjacent(const Options *o, const Table *t, double min_adj, int ok) {
    printf("adjacent (L+1 vs L): wins/draws/losses, score, mean ticks\n");
    for (int a = o->lo + 1; a <= o->hi; a++) {
        const Cell *c = &t->tab[a][a - 1];
        printf("  L%d vs L%d: %2d/%2d/%2d  %.2f  %6.0f\n", a, a - 1, c->wins, c->draws, c->losses, score(c),
               c->ticks);
    }
    printf("min adjacent score %.2f (%s 0.60)  [%.1f s]\n", min_adj, ok ? ">=" : "<", t->seconds);
}

static void print_json(const Options *o, const Table *t, double min_adj, int ok) {
    printf("{\"games\": %d, \"seed\": %u, \"min_level\": %d, \"max_level\": %d, \"adjacent_only\": %s, "
           "\"min_adjacent_score\": %.4f, \"adjacent_ok\": %s, \"seconds\": %.3f, \"table\": {",
           o->games, o->seed, o->lo, o->hi, o->adjacent ? "true" : "false", min_adj, ok ? "true" : "false",
           t->seconds);
    int first = 1;
    for (int a = o->lo; a <= o->hi; a++)
        for (int b = o->lo; b <= o->hi; b++) {
            if (a == b || !t->done[a][b]) continue;
            const Cell *c = &t->tab[a][b];
            printf("%s\"%d_vs_%d\": {\"wins\": %d, \"draws\": %d, \"losses\": %d, \"score\": %.4f, "
                   "\"mean_ticks\": %.1f}",
                   first ? "" : ", ", a, b, c->wins, c->draws, c->losses, score(c), c->ticks);
            first = 0;
        }
    printf("}}\n");
}

int main(int argc, char **argv) {
    Options o;
    int rc = parse_args(argc, argv, &o);
    if (rc != 0) return rc == ARGS_HELP ? 0 : rc;
    static Table t;
    play_table(&o, &t);
    int ok;
    double min_adj = min_adjacent(&o, &t, &ok);
    print_table(&o, &t);
    print_adjacent(&o, &t, min_adj, ok);
    if (o.json) print_json(&o, &t, min_adj, ok);
    return (o.strict && !ok) ? 1 : 0;
}
