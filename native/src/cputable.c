/*
 * cputable.c — brawlpit_cputable: CPU level vs level win-rate table.
 *
 *   brawlpit_cputable [--games N] [--seed S] [--min L] [--max L] [--adjacent] [--json] [--strict]
 *
 * Plays N full matches (in-process, no sockets) for each ordered pair of
 * levels (row vs column), alternating slots between games to cancel any slot
 * bias; a game's seed is a function of (seed, game index) only, so the table
 * is reproducible.  Cell = row's score = (wins + draws/2) / N.  With
 * --adjacent only the pairs (L+1 vs L) are played.  --json prints one JSON
 * object on the last line of stdout.  --strict: exit 1 unless every
 * adjacent score is >= 0.60.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu.h"

typedef struct {
    int wins, draws, losses;
    double ticks;
} Cell;

static Cell play(int a, int b, int games, uint32_t seed) {
    Cell c = {0, 0, 0, 0.0};
    for (int g = 0; g < games; g++) {
        uint32_t s = seed * 1000003u + (uint32_t)g * 7919u + 1u;
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

int main(int argc, char **argv) {
    int games = 50, lo = 1, hi = 8, adjacent = 0, json = 0, strict = 0;
    uint32_t seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--games") && i + 1 < argc)
            games = atoi(argv[++i]);
        else if (!strcmp(a, "--seed") && i + 1 < argc)
            seed = (uint32_t)strtoul(argv[++i], NULL, 0);
        else if (!strcmp(a, "--min") && i + 1 < argc)
            lo = atoi(argv[++i]);
        else if (!strcmp(a, "--max") && i + 1 < argc)
            hi = atoi(argv[++i]);
        else if (!strcmp(a, "--adjacent"))
            adjacent = 1;
        else if (!strcmp(a, "--json"))
            json = 1;
        else if (!strcmp(a, "--strict"))
            strict = 1;
        else {
            fprintf(stderr,
                    "usage: %s [--games N] [--seed S] [--min L] [--max L] [--adjacent] [--json] [--strict]\n",
                    argv[0]);
            return 2;
        }
    }
    if (games < 1 || lo < BP_CPU_LEVEL_MIN || hi > BP_CPU_LEVEL_MAX || lo > hi) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    static Cell tab[9][9];
    static int done[9][9];
    for (int a = lo; a <= hi; a++)
        for (int b = lo; b <= hi; b++) {
            if (a == b) continue;
            if (adjacent && a != b + 1) continue;
            if (done[b][a]) { /* mirror of an already played pair */
                Cell m = tab[b][a];
                tab[a][b] = (Cell){m.losses, m.draws, m.wins, m.ticks};
            } else {
                tab[a][b] = play(a, b, games, seed + (uint32_t)(a < b ? a * 16 + b : b * 16 + a));
            }
            done[a][b] = 1;
        }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);

    int ok = 1;
    double min_adj = 1.0;
    for (int a = lo + 1; a <= hi; a++) {
        double sc = score(&tab[a][a - 1]);
        if (sc < min_adj) min_adj = sc;
        if (sc < 0.6) ok = 0;
    }
    printf("CPU win-rate table: row's score vs column ((wins + draws/2) / %d games, slots alternated)\n", games);
    printf("row\\col");
    for (int b = lo; b <= hi; b++) printf("   L%d ", b);
    printf("\n");
    for (int a = lo; a <= hi; a++) {
        printf("  L%d   ", a);
        for (int b = lo; b <= hi; b++) {
            if (a == b || !done[a][b])
                printf("    - ");
            else
                printf(" %4.2f ", score(&tab[a][b]));
        }
        printf("\n");
    }
    printf("adjacent (L+1 vs L): wins/draws/losses, score, mean ticks\n");
    for (int a = lo + 1; a <= hi; a++) {
        Cell *c = &tab[a][a - 1];
        printf("  L%d vs L%d: %2d/%2d/%2d  %.2f  %6.0f\n", a, a - 1, c->wins, c->draws, c->losses, score(c),
               c->ticks);
    }
    printf("min adjacent score %.2f (%s 0.60)  [%.1f s]\n", min_adj, ok ? ">=" : "<", secs);
    if (json) {
        printf("{\"games\": %d, \"seed\": %u, \"min_level\": %d, \"max_level\": %d, \"adjacent_only\": %s, "
               "\"min_adjacent_score\": %.4f, \"adjacent_ok\": %s, \"seconds\": %.3f, \"table\": {",
               games, seed, lo, hi, adjacent ? "true" : "false", min_adj, ok ? "true" : "false", secs);
        int first = 1;
        for (int a = lo; a <= hi; a++)
            for (int b = lo; b <= hi; b++) {
                if (a == b || !done[a][b]) continue;
                Cell *c = &tab[a][b];
                printf("%s\"%d_vs_%d\": {\"wins\": %d, \"draws\": %d, \"losses\": %d, \"score\": %.4f, "
                       "\"mean_ticks\": %.1f}",
                       first ? "" : ", ", a, b, c->wins, c->draws, c->losses, score(c), c->ticks);
                first = 0;
            }
        printf("}}\n");
    }
    return (strict && !ok) ? 1 : 0;
}
