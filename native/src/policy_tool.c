/*
 * brawlpit_policy — command-line front end of policy.c, used by tests and the
 * benchmark.
 *
 *   brawlpit_policy check BLOB
 *       exit 0 and one line "ok kind=K layers=N obs=O act=A version=V
 *       action_repeat=R input_layout=L reward="NAME" [in->out act]..." when the
 *       blob loads (reward="" = unknown; `"` and `\` in NAME are backslash-escaped),
 *       exit 1 and "refused: <reason>" otherwise.
 *   brawlpit_policy info BLOB
 *       the same facts as "key value" lines (kind, version, layers, obs_dim,
 *       act_dim, action_repeat, input_layout, reward (NAME or "unknown"), noise
 *       ("none", or "gaussian" and a "noise_std S0 S1 ..." line), then
 *       "layer I IN OUT ACT" per layer); exit 1 and "refused: <reason>" otherwise.
 *   brawlpit_policy forward [--ref | --sample SEED] BLOB OBS.f32 OUT.f32
 *       OBS.f32: N*obs_dim float32 (little-endian host); writes N*act_dim float32
 *       Gaussian means (unclipped).  --ref uses the scalar libm-tanhf path.
 *       --sample SEED: the sampled actions of a version-3 blob instead
 *       (bp_policy_sample, one stream seeded SEED, rows in order; clipped).
 *       --match SEED: the means of the component a mixture plays in the match
 *       of SEED (bp_policy_select; a single blob: itself).
 *   brawlpit_policy pick BLOB SEED COUNT
 *       one line per match seed SEED..SEED+COUNT-1: the component of the mixture
 *       BLOB that match plays (bp_policy_select; 0 for a single blob).
 *   brawlpit_policy decode ACT.f32 OUT.txt
 *       bp_action_decode on N*6 float32; one "sx sy buttons" line per action
 *       (floats printed with %.9g).
 *   brawlpit_policy bench BLOB N
 *       times N forwards (fast and reference path, best of 5 runs) and a
 *       dependent-add loop to estimate the clock; prints "key value" lines.
 *   brawlpit_policy fuzz
 *       reads records "u32 len (LE), len bytes" from stdin until EOF; loads each
 *       with bp_policy_load_mem, runs one forward on accepted ones, prints
 *       "<index> ok <kind>" or "<index> refused <reason>" per record, then
 *       "done <count>".  One process for thousands of blobs (ASan build).
 *   brawlpit_policy --help
 *       the usage and one line per command on stdout, exit 0.  A usage error
 *       prints the usage on stderr and exits 2.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "policy.h"

static const char *kind_name(int k)
{
    return k == BP_POLICY_KIND_RAW       ? "raw"
           : k == BP_POLICY_KIND_LZ4     ? "lz4"
           : k == BP_POLICY_KIND_MIXTURE ? "mixture"
                                         : "shuffle";
}

static const char USAGE[] = "usage: brawlpit_policy check BLOB\n"
                            "       brawlpit_policy info BLOB\n"
                            "       brawlpit_policy forward [--ref | --sample SEED | --match SEED] BLOB OBS.f32 OUT.f32\n"
                            "       brawlpit_policy pick BLOB SEED COUNT\n"
                            "       brawlpit_policy decode ACT.f32 OUT.txt\n"
                            "       brawlpit_policy bench BLOB N\n"
                            "       brawlpit_policy fuzz < records\n";

static int usage(void)
{
    fputs(USAGE, stderr);
    return 2;
}

static int help(void)
{
    fputs(USAGE, stdout);
    fputs("Command line of the .bpw policy loader and forward pass (docs/bpw.md).\n"
          "  check BLOB      load BLOB: one `ok ...` line (exit 0) or `refused: <reason>` (exit 1)\n"
          "  info BLOB       the blob's facts as `key value` lines, one `layer ...` line per layer\n"
          "  forward         N*obs_dim float32 in OBS.f32 -> N*act_dim Gaussian means in OUT.f32;\n"
          "                  --ref uses the scalar libm-tanhf path; --sample SEED: the sampled\n"
          "                  actions of a version-3 blob, one noise stream seeded SEED;\n"
          "                  --match SEED: a mixture's component for the match of SEED\n"
          "  pick            a mixture's component (0-based) for each match seed SEED..SEED+COUNT-1\n"
          "  decode          bp_action_decode of N*6 float32: one `sx sy buttons` line each\n"
          "  bench BLOB N    time N forwards (fast and reference path); `key value` lines\n"
          "  fuzz            load every `u32 len, len bytes` record from stdin; one line each\n"
          "  -h, --help      print this help and exit\n",
          stdout);
    return 0;
}

static uint8_t *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return NULL;
    }
    size_t cap = 1 << 16, len = 0;
    uint8_t *buf = malloc(cap);
    while (buf) {
        if (len == cap) {
            uint8_t *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + len, 1, cap - len, f);
        len += r;
        if (r == 0) {
            break;
        }
    }
    fclose(f);
    *n = len;
    return buf;
}

static const char *act_name(int act) { return act ? "tanh" : "none"; }

/* reward name as a double-quoted string ("" = unknown) */
static void print_quoted(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') {
            putchar('\\');
        }
        putchar(*s);
    }
    putchar('"');
}

/* The blob at `path`, or NULL after printing "refused: <why>" to `out` (stdout for
 * check/info, whose callers parse the verdict; stderr for the others). */
static BpPolicy *load_or_say(const char *path, FILE *out)
{
    char err[256];
    BpPolicy *p = bp_policy_load_file(path, err, sizeof err);
    if (!p) fprintf(out, "refused: %s\n", err);
    return p;
}

static int cmd_check(const char *blob)
{
    BpPolicy *p = load_or_say(blob, stdout);
    if (!p) return 1;
    printf("ok kind=%s layers=%d obs=%d act=%d version=%d action_repeat=%d input_layout=%d reward=",
           kind_name(bp_policy_kind(p)), bp_policy_n_layers(p), bp_policy_obs_dim(p),
           bp_policy_act_dim(p), bp_policy_version(p), bp_policy_action_repeat(p),
           bp_policy_input_layout(p));
    print_quoted(bp_policy_reward(p));
    for (int i = 0; i < bp_policy_n_layers(p); i++) {
        int in, out, act;
        bp_policy_layer(p, i, &in, &out, &act);
        printf(" [%d->%d %s]", in, out, act_name(act));
    }
    printf("\n");
    bp_policy_free(p);
    return 0;
}

static int cmd_info(const char *blob)
{
    BpPolicy *p = load_or_say(blob, stdout);
    if (!p) return 1;
    const char *reward = bp_policy_reward(p);
    printf("kind %s\nversion %d\nlayers %d\nobs_dim %d\nact_dim %d\n", kind_name(bp_policy_kind(p)),
           bp_policy_version(p), bp_policy_n_layers(p), bp_policy_obs_dim(p), bp_policy_act_dim(p));
    printf("action_repeat %d\ninput_layout %d\nreward %s\n", bp_policy_action_repeat(p),
           bp_policy_input_layout(p), reward[0] ? reward : "unknown");
    const float *std = bp_policy_noise_std(p);
    printf("noise %s\n", std ? "gaussian" : "none");
    if (std) {
        printf("noise_std");
        for (int i = 0; i < bp_policy_act_dim(p); i++) {
            printf(" %.9g", (double)std[i]);
        }
        printf("\n");
    }
    for (int i = 0; i < bp_policy_n_layers(p); i++) {
        int in, out, act;
        bp_policy_layer(p, i, &in, &out, &act);
        printf("layer %d %d %d %s\n", i, in, out, act_name(act));
    }
    bp_policy_free(p);
    return 0;
}

#define FWD_MEAN 0
#define FWD_REF 1
#define FWD_SAMPLE 2
#define FWD_MATCH 3

static int cmd_pick(const char *blob, uint64_t seed, long count)
{
    BpPolicy *p = load_or_say(blob, stderr);
    if (!p) return 1;
    for (long i = 0; i < count; i++) {
        printf("%d\n", bp_policy_select(p, seed + (uint64_t)i));
    }
    bp_policy_free(p);
    return 0;
}

static int cmd_forward(int mode, uint64_t seed, const char *blob, const char *obs_path,
                       const char *out_path)
{
    BpPolicy *p = load_or_say(blob, stderr);
    if (!p) return 1;
    if (mode == FWD_SAMPLE && !bp_policy_noise_std(p)) {
        fprintf(stderr, "%s: --sample needs a version-3 blob (it has no noise section)\n", blob);
        bp_policy_free(p);
        return 2;
    }
    BpNoise noise;
    bp_noise_seed(&noise, seed);
    if (mode == FWD_MATCH) {
        bp_policy_select(p, seed);
    }
    size_t n = 0;
    uint8_t *obs = read_all(obs_path, &n);
    int od = bp_policy_obs_dim(p), ad = bp_policy_act_dim(p);
    if (!obs || n % ((size_t)od * 4)) {
        fprintf(stderr, "%s: size %zu is not a multiple of obs_dim*4=%d\n", obs_path, n, od * 4);
        free(obs);
        bp_policy_free(p);
        return 2;
    }
    size_t rows = n / ((size_t)od * 4);
    float *x = malloc((size_t)od * sizeof(float));
    float *y = malloc((rows ? rows : 1) * (size_t)ad * sizeof(float));
    for (size_t r = 0; r < rows; r++) {
        memcpy(x, obs + r * (size_t)od * 4, (size_t)od * 4);
        if (mode == FWD_REF) {
            bp_policy_forward_ref(p, x, y + r * (size_t)ad);
        } else if (mode == FWD_SAMPLE) {
            bp_policy_sample(p, x, &noise, y + r * (size_t)ad);
        } else {
            bp_policy_forward(p, x, y + r * (size_t)ad);
        }
    }
    FILE *f = fopen(out_path, "wb");
    int rc = 0;
    if (!f || fwrite(y, sizeof(float), rows * (size_t)ad, f) != rows * (size_t)ad) {
        perror(out_path);
        rc = 2;
    }
    if (f) {
        fclose(f);
    }
    free(x);
    free(y);
    free(obs);
    bp_policy_free(p);
    return rc;
}

static int cmd_decode(const char *act_path, const char *out_path)
{
    size_t n = 0;
    uint8_t *a = read_all(act_path, &n);
    if (!a || n % 24) {
        fprintf(stderr, "%s: size %zu is not a multiple of 24\n", act_path, n);
        free(a);
        return 2;
    }
    FILE *f = fopen(out_path, "w");
    if (!f) {
        perror(out_path);
        free(a);
        return 2;
    }
    for (size_t r = 0; r < n / 24; r++) {
        float v[6], sx, sy;
        uint32_t b;
        memcpy(v, a + r * 24, 24);
        bp_action_decode(v, &sx, &sy, &b);
        fprintf(f, "%.9g %.9g %u\n", (double)sx, (double)sy, b);
    }
    fclose(f);
    free(a);
    return 0;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* ~1 cycle per dependent register-register add (add-immediate chains can be
 * folded at rename on recent cores, so the increment is a register) */
static double clock_ghz(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    double best = 0;
    for (int t = 0; t < 5; t++) {
        uint64_t x = 0, one = 1;
        const long iters = 20000000;
        double t0 = now_ns();
        for (long i = 0; i < iters; i++) {
            __asm__ volatile("add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0"
                             : "+r"(x)
                             : "r"(one));
        }
        double dt = now_ns() - t0;
        double ghz = 4.0 * (double)iters / dt;
        if (ghz > best) {
            best = ghz;
        }
    }
    return best;
#else
    return 0.0;
#endif
}

static double bench_one(BpPolicy *p, int ref, long n, const float *obs, int n_obs, float *sink)
{
    int od = bp_policy_obs_dim(p);
    float y[BP_POLICY_MAX_DIM];
    double best = 1e30;
    for (int t = 0; t < 5; t++) {
        double t0 = now_ns();
        for (long i = 0; i < n; i++) {
            const float *x = obs + (size_t)(i % n_obs) * od;
            if (ref) {
                bp_policy_forward_ref(p, x, y);
            } else {
                bp_policy_forward(p, x, y);
            }
            *sink += y[0];
        }
        double dt = (now_ns() - t0) / (double)n;
        if (dt < best) {
            best = dt;
        }
    }
    return best;
}

static int cmd_bench(const char *blob, long n)
{
    BpPolicy *p = load_or_say(blob, stderr);
    if (!p) return 1;
    enum { NOBS = 64 };
    int od = bp_policy_obs_dim(p);
    float *obs = malloc((size_t)NOBS * od * sizeof(float));
    uint32_t s = 12345;
    for (int i = 0; i < NOBS * od; i++) {
        s = s * 1664525u + 1013904223u;
        obs[i] = (float)((s >> 8) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
    }
    float sink = 0;
    bench_one(p, 0, n / 10 + 1, obs, NOBS, &sink); /* warm-up */
    double fast = bench_one(p, 0, n, obs, NOBS, &sink);
    double ref = bench_one(p, 1, n / 4 + 1, obs, NOBS, &sink);
    double ghz = clock_ghz();
    printf("fast_ns_per_forward %.2f\n", fast);
    printf("ref_ns_per_forward %.2f\n", ref);
    printf("clock_ghz %.3f\n", ghz);
    printf("sink %g\n", (double)sink);
    free(obs);
    bp_policy_free(p);
    return 0;
}

static int read_exact(uint8_t *buf, size_t n)
{
    return fread(buf, 1, n, stdin) == n ? 0 : -1;
}

static int cmd_fuzz(void)
{
    long idx = 0;
    uint8_t hdr[4];
    float obs[BP_POLICY_MAX_DIM], out[BP_POLICY_MAX_DIM];
    for (int i = 0; i < BP_POLICY_MAX_DIM; i++) {
        obs[i] = (float)((i % 7) - 3) * 0.25f;
    }
    while (read_exact(hdr, 4) == 0) {
        uint32_t len = (uint32_t)hdr[0] | (uint32_t)hdr[1] << 8 | (uint32_t)hdr[2] << 16 |
                       (uint32_t)hdr[3] << 24;
        if (len > BP_POLICY_MAX_FILE_BYTES) {
            fprintf(stderr, "fuzz: record %ld too large (%u)\n", idx, len);
            return 2;
        }
        /* exact-size allocation so ASan sees any read past the blob's end */
        uint8_t *buf = malloc(len ? len : 1);
        if (!buf || (len && read_exact(buf, len) != 0)) {
            fprintf(stderr, "fuzz: short record %ld\n", idx);
            free(buf);
            return 2;
        }
        char err[256];
        BpPolicy *p = bp_policy_load_mem(buf, len, err, sizeof err);
        if (p) {
            bp_policy_forward(p, obs, out);
            bp_policy_forward_ref(p, obs, out);
            BpNoise noise = {(uint64_t)idx};
            bp_policy_sample(p, obs, &noise, out);
            printf("%ld ok %s\n", idx, kind_name(bp_policy_kind(p)));
            bp_policy_free(p);
        } else {
            printf("%ld refused %s\n", idx, err);
        }
        free(buf);
        idx++;
    }
    printf("done %ld\n", idx);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        return usage();
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help")) {
        return help();
    }
    if (!strcmp(cmd, "check") && argc == 3) {
        return cmd_check(argv[2]);
    }
    if (!strcmp(cmd, "info") && argc == 3) {
        return cmd_info(argv[2]);
    }
    if (!strcmp(cmd, "forward") && argc == 5) {
        return cmd_forward(FWD_MEAN, 0, argv[2], argv[3], argv[4]);
    }
    if (!strcmp(cmd, "forward") && argc == 6 && !strcmp(argv[2], "--ref")) {
        return cmd_forward(FWD_REF, 0, argv[3], argv[4], argv[5]);
    }
    if (!strcmp(cmd, "pick") && argc == 5) {
        char *e1, *e2;
        unsigned long long seed = strtoull(argv[3], &e1, 10);
        long count = strtol(argv[4], &e2, 10);
        if (!*argv[3] || *e1 || argv[3][0] == '-' || !*argv[4] || *e2 || count < 1) {
            return usage();
        }
        return cmd_pick(argv[2], (uint64_t)seed, count);
    }
    if (!strcmp(cmd, "forward") && argc == 7 && !strcmp(argv[2], "--match")) {
        char *end;
        unsigned long long seed = strtoull(argv[3], &end, 10);
        if (!*argv[3] || *end || argv[3][0] == '-') {
            return usage();
        }
        return cmd_forward(FWD_MATCH, (uint64_t)seed, argv[4], argv[5], argv[6]);
    }
    if (!strcmp(cmd, "forward") && argc == 7 && !strcmp(argv[2], "--sample")) {
        char *end = NULL;
        unsigned long long seed = strtoull(argv[3], &end, 10);
        if (!*argv[3] || *end || argv[3][0] == '-') {
            return usage();
        }
        return cmd_forward(FWD_SAMPLE, (uint64_t)seed, argv[4], argv[5], argv[6]);
    }
    if (!strcmp(cmd, "decode") && argc == 4) {
        return cmd_decode(argv[2], argv[3]);
    }
    if (!strcmp(cmd, "bench") && argc == 4) {
        long n = strtol(argv[3], NULL, 10);
        return cmd_bench(argv[2], n > 0 ? n : 100000);
    }
    if (!strcmp(cmd, "fuzz") && argc == 2) {
        return cmd_fuzz();
    }
    return usage();
}
