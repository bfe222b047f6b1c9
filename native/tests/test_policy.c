/*
 * test_policy.c — C checks of policy.c, run by `make -C native check-policy`
 * (plain and ASan builds).  The torch/numpy parity and the 10,000-blob fuzz
 * run live in tests/test_policy_native.py; this file checks what C alone can:
 * the tanh approximation's error, fast vs reference forward, every truncation
 * and header lie (format versions 1 and 2), the v2 header fields and their
 * refusals, the v3 noise section and the sampling stream (splitmix64's published
 * first output), LZ4 and shuffled round trips, the action decoder.
 */
#include <lz4frame.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

#include "check.h"

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static void putf(uint8_t *p, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    put32(p, u);
}

/* 31 -> 16 tanh -> 12 tanh -> 6 none, deterministic pseudo-random weights (the
 * same values for every header version) */
static const uint32_t DIMS[4] = {31, 16, 12, 6};

typedef struct {
    uint32_t version, action_repeat, input_layout;
    char reward[BP_BPW_REWARD_LEN]; /* copied verbatim (v2) */
} Hdr;

static const Hdr V1 = {1, 0, 0, ""};
static const Hdr V2 = {2, 8, BP_INPUT_LAYOUT_OBS, "tiered"};

static size_t header_bytes(uint32_t version)
{
    return version == 1 ? BP_POLICY_HEADER_V1_BYTES : BP_POLICY_HEADER_V2_BYTES;
}

static uint8_t *make_blob(const Hdr *h, size_t *n)
{
    size_t hb = header_bytes(h->version), total = hb + 12 * 3;
    for (int i = 0; i < 3; i++) {
        total += 4 * (DIMS[i] * DIMS[i + 1] + DIMS[i + 1]);
    }
    uint8_t *b = calloc(1, total);
    memcpy(b, "BPW1", 4);
    put32(b + 4, h->version);
    put32(b + 8, 3);
    put32(b + 12, 31);
    put32(b + 16, 6);
    if (h->version != 1) {
        put32(b + 20, h->action_repeat);
        put32(b + 24, h->input_layout);
        memcpy(b + 28, h->reward, BP_BPW_REWARD_LEN);
    }
    for (int i = 0; i < 3; i++) {
        put32(b + hb + 12 * i, DIMS[i]);
        put32(b + hb + 4 + 12 * i, DIMS[i + 1]);
        put32(b + hb + 8 + 12 * i, i < 2 ? 1 : 0);
    }
    uint32_t s = 7;
    for (size_t off = hb + 36; off < total; off += 4) {
        s = s * 1664525u + 1013904223u;
        putf(b + off, ((float)(s >> 8) / 16777216.0f - 0.5f) * 0.8f);
    }
    *n = total;
    return b;
}

static int refused(const uint8_t *b, size_t n, const char *want)
{
    char err[256] = "";
    uint8_t *copy = malloc(n ? n : 1); /* exact size: ASan catches over-reads */
    memcpy(copy, b, n);
    BpPolicy *p = bp_policy_load_mem(copy, n, err, sizeof err);
    free(copy);
    if (p) {
        bp_policy_free(p);
        return 0;
    }
    if (want && !strstr(err, want)) {
        fprintf(stderr, "  message '%s' lacks '%s'\n", err, want);
        return 0;
    }
    return 1;
}

static uint8_t *lz4(const uint8_t *src, size_t n, size_t *out_n)
{
    LZ4F_preferences_t prefs;
    memset(&prefs, 0, sizeof prefs);
    prefs.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
    prefs.frameInfo.contentSize = n;
    size_t cap = LZ4F_compressFrameBound(n, &prefs);
    uint8_t *out = malloc(cap);
    *out_n = LZ4F_compressFrame(out, cap, src, n, &prefs);
    return out;
}

static void test_tanh(void)
{
    double worst = 0, at = 0;
    for (double x = -12.0; x <= 12.0; x += 3e-6) {
        float xf = (float)x;
        double e = fabs((double)bp_policy_tanh(xf) - tanh((double)xf));
        if (e > worst) {
            worst = e;
            at = xf;
        }
    }
    printf("tanh approx: max abs err %.3g at x=%.6f\n", worst, at);
    CHECK(worst < 1e-6, "tanh approximation error %g", worst);
    CHECK(bp_policy_tanh(INFINITY) == bp_policy_tanh(100.0f), "tanh(inf)");
    CHECK(isnan(bp_policy_tanh(NAN)), "tanh(nan)");
    CHECK(bp_policy_tanh(0.0f) == 0.0f, "tanh(0)");
}

static void test_forward(const uint8_t *b, size_t n)
{
    char err[256];
    BpPolicy *p = bp_policy_load_mem(b, n, err, sizeof err);
    CHECK(p != NULL, "load: %s", err);
    if (!p) {
        return;
    }
    CHECK(bp_policy_obs_dim(p) == 31 && bp_policy_act_dim(p) == 6 && bp_policy_n_layers(p) == 3,
          "dims");
    double worst = 0;
    uint32_t s = 99;
    for (int t = 0; t < 2000; t++) {
        float x[31], y1[6], y2[6];
        for (int i = 0; i < 31; i++) {
            s = s * 1664525u + 1013904223u;
            x[i] = ((float)(s >> 8) / 16777216.0f - 0.5f) * 4.0f;
        }
        bp_policy_forward(p, x, y1);
        bp_policy_forward_ref(p, x, y2);
        for (int j = 0; j < 6; j++) {
            double e = fabs((double)y1[j] - (double)y2[j]);
            worst = e > worst ? e : worst;
        }
    }
    printf("fast vs reference forward: max abs diff %.3g\n", worst);
    CHECK(worst < 2e-6, "fast vs ref %g", worst);
    bp_policy_free(p);
}

/* truncations and lies common to both versions; hb = header bytes (table offset) */
static void test_refusals(const uint8_t *good, size_t n, int hb)
{
    /* every truncation */
    int all = 1;
    for (size_t k = 0; k < n; k++) {
        all &= refused(good, k, NULL);
    }
    CHECK(all, "some truncation accepted (header %d)", hb);
    CHECK(refused(good, n - 4, "truncated payload"), "truncated payload message");
    CHECK(refused(good, (size_t)hb + 4, "truncated layer table"), "truncated table message");
    uint8_t *b = malloc(n + 8);
    memcpy(b, good, n);
    memset(b + n, 0, 8);
    CHECK(refused(b, n + 4, "trailing"), "trailing data");
#define MUT(off, val, want)                                                  \
    do {                                                                     \
        memcpy(b, good, n);                                                  \
        put32(b + (off), (val));                                             \
        CHECK(refused(b, n, want), "header %d: mutation off=%d val=%u", hb, (off), (unsigned)(val)); \
    } while (0)
    MUT(0, 0x32575042u, "magic"); /* "BPW2" */
    MUT(4, 4, "unknown version 4");
    MUT(4, 0, "unknown version 0");
    MUT(4, 0xFFFFFFFFu, "unknown version");
    MUT(8, 0, "n_layers");
    MUT(8, 17, "n_layers");
    MUT(8, 0xFFFFFFFFu, "n_layers");
    MUT(8, 2, "act_dim");
    MUT(8, 4, "");
    MUT(12, 30, "obs_dim");
    MUT(12, 0, "obs_dim");
    MUT(16, 7, "act_dim");
    MUT(hb + 0, 0xFFFFFFFFu, "dims");
    MUT(hb + 4, 17, "previous layer out");
    MUT(hb + 8, 2, "activation");
    MUT(hb + 16, 13, "previous layer out");
    MUT(hb + 12, 15, "previous layer out");
    MUT(hb + 24, 0x40000000u, "");
    MUT(hb + 36, 0x7FC00000u, "non-finite");
    MUT((int)n - 4, 0x7F800000u, "non-finite");
#undef MUT
    /* a payload value flip that stays finite is accepted (documented) */
    memcpy(b, good, n);
    b[hb + 40] ^= 0x01;
    CHECK(!refused(b, n, NULL), "finite payload flip should be accepted");
    free(b);
}

static void test_misc_refusals(void)
{
    CHECK(refused((const uint8_t *)"BP", 2, "truncated"), "tiny");
    CHECK(refused((const uint8_t *)"XXXXYYYY", 8, "unknown blob magic"), "bad magic");
    char err[256];
    CHECK(bp_policy_load_file("/nonexistent/x.bpw", err, sizeof err) == NULL &&
              strstr(err, "cannot open"),
          "missing file");
    CHECK(strstr(bp_policy_last_error(), "cannot open") != NULL, "last_error");
}

/* the fields a loaded policy reports */
static void check_fields(const uint8_t *b, size_t n, int version, int repeat, int layout,
                         const char *reward)
{
    char err[256];
    BpPolicy *p = bp_policy_load_mem(b, n, err, sizeof err);
    CHECK(p != NULL, "v%d load: %s", version, err);
    if (!p) {
        return;
    }
    CHECK(bp_policy_version(p) == version, "version %d, want %d", bp_policy_version(p), version);
    CHECK(bp_policy_action_repeat(p) == repeat, "action_repeat %d, want %d",
          bp_policy_action_repeat(p), repeat);
    CHECK(bp_policy_input_layout(p) == layout, "input_layout %d, want %d",
          bp_policy_input_layout(p), layout);
    CHECK(!strcmp(bp_policy_reward(p), reward), "reward '%s', want '%s'", bp_policy_reward(p),
          reward);
    CHECK(bp_policy_obs_dim(p) == 31 && bp_policy_act_dim(p) == 6 && bp_policy_n_layers(p) == 3,
          "dims");
    bp_policy_free(p);
}

/* v2 with its header bytes 20..43 replaced (the rest of V2's blob unchanged) */
static int v2_with(uint32_t repeat, uint32_t layout, const char reward[BP_BPW_REWARD_LEN],
                   const char *want_refusal)
{
    Hdr h = V2;
    h.action_repeat = repeat;
    h.input_layout = layout;
    memcpy(h.reward, reward, BP_BPW_REWARD_LEN);
    size_t n;
    uint8_t *b = make_blob(&h, &n);
    int ok = refused(b, n, want_refusal);
    free(b);
    return ok;
}

static void test_versions(const uint8_t *v1, size_t n1, const uint8_t *v2, size_t n2)
{
    check_fields(v1, n1, 1, BP_BPW_DEFAULT_REPEAT, BP_INPUT_LAYOUT_OBS, "");
    check_fields(v2, n2, 2, 8, BP_INPUT_LAYOUT_OBS, "tiered");
    /* same weights, same outputs, whatever the header version */
    char err[256];
    BpPolicy *a = bp_policy_load_mem(v1, n1, err, sizeof err);
    BpPolicy *b = bp_policy_load_mem(v2, n2, err, sizeof err);
    if (a && b) {
        float x[31], y1[6], y2[6];
        for (int i = 0; i < 31; i++) {
            x[i] = (float)(i % 5) * 0.3f - 0.6f;
        }
        bp_policy_forward(a, x, y1);
        bp_policy_forward(b, x, y2);
        CHECK(!memcmp(y1, y2, sizeof y1), "v1 and v2 blobs of the same weights differ");
    }
    bp_policy_free(a);
    bp_policy_free(b);
}

/* refusals of the v2 fields, and their edge values that load */
static void test_v2_fields(const uint8_t *v2)
{
    /* a truncated v2 header names itself */
    CHECK(refused(v2, 30, "truncated v2 header"), "truncated v2 header");
    CHECK(refused(v2, 20, "truncated v2 header"), "v2 header cut at the v1 size");
    CHECK(refused(v2, 7, "truncated header"), "header without version");

    /* action_repeat 1..64 */
    const char tiered[BP_BPW_REWARD_LEN] = "tiered";
    CHECK(v2_with(0, 1, tiered, "action_repeat 0"), "action_repeat 0");
    CHECK(v2_with(BP_MAX_REPEAT + 1, 1, tiered, "action_repeat 65"), "action_repeat 65");
    CHECK(v2_with(0xFFFFFFFFu, 1, tiered, "action_repeat"), "action_repeat 2^32-1");
    CHECK(!v2_with(1, 1, tiered, NULL) && !v2_with(BP_MAX_REPEAT, 1, tiered, NULL),
          "action_repeat 1 and 64 load");
    /* input_layout >= 1; an unknown layout is the consumer's business */
    CHECK(v2_with(4, 0, tiered, "input_layout 0"), "input_layout 0");
    CHECK(v2_with(4, 0x80000000u, tiered, "input_layout"), "input_layout > INT32_MAX");
    Hdr h = V2;
    h.input_layout = 7;
    size_t n;
    uint8_t *blob = make_blob(&h, &n);
    check_fields(blob, n, 2, 8, 7, "tiered");
    free(blob);

    /* reward: printable ASCII, >= 1 NUL, nothing but NULs after the first */
    const char full[BP_BPW_REWARD_LEN] = {'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h',
                                          'i', 'j', 'k', 'l', 'm', 'n', 'o', 'p'};
    CHECK(v2_with(4, 1, full, "reward field not NUL-terminated"), "reward without NUL");
    const char ctrl[BP_BPW_REWARD_LEN] = "tie\tred";
    CHECK(v2_with(4, 1, ctrl, "reward field byte 3 is 0x09"), "reward with a tab");
    const char high[BP_BPW_REWARD_LEN] = "caf\xc3\xa9";
    CHECK(v2_with(4, 1, high, "reward field byte 3 is 0xc3"), "reward with UTF-8");
    const char del[BP_BPW_REWARD_LEN] = "\x7f";
    CHECK(v2_with(4, 1, del, "reward field byte 0 is 0x7f"), "reward with DEL");
    const char junk[BP_BPW_REWARD_LEN] = {'a', 'b', 0, 'c'};
    CHECK(v2_with(4, 1, junk, "reward field has junk 0x63 at byte 3"), "reward junk after NUL");
    const char junk_end[BP_BPW_REWARD_LEN] = {'x', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    CHECK(v2_with(4, 1, junk_end, "reward field has junk 0x01 at byte 15"), "reward last byte");
    const char longest[BP_BPW_REWARD_LEN] = "llm_fighting ~1";
    const char empty[BP_BPW_REWARD_LEN] = {0};
    const char spaced[BP_BPW_REWARD_LEN] = " a b ";
    const struct {
        const char *bytes, *want;
    } ok[3] = {{longest, "llm_fighting ~1"}, {empty, ""}, {spaced, " a b "}};
    for (int i = 0; i < 3; i++) {
        h = V2;
        memcpy(h.reward, ok[i].bytes, BP_BPW_REWARD_LEN);
        blob = make_blob(&h, &n);
        check_fields(blob, n, 2, 8, 1, ok[i].want);
        free(blob);
    }
}

/* p (from an encoded blob) reports the header fields of the raw blob good */
static int same_header(const BpPolicy *p, const uint8_t *good, size_t n)
{
    if (!p) {
        return 0;
    }
    char err[256];
    BpPolicy *r = bp_policy_load_mem(good, n, err, sizeof err);
    int same = r && bp_policy_version(p) == bp_policy_version(r) &&
               bp_policy_action_repeat(p) == bp_policy_action_repeat(r) &&
               bp_policy_input_layout(p) == bp_policy_input_layout(r) &&
               !strcmp(bp_policy_reward(p), bp_policy_reward(r));
    bp_policy_free(r);
    return same;
}

static void test_lz4(const uint8_t *good, size_t n)
{
    size_t cn;
    uint8_t *c = lz4(good, n, &cn);
    char err[256];
    BpPolicy *p = bp_policy_load_mem(c, cn, err, sizeof err);
    CHECK(p && bp_policy_kind(p) == BP_POLICY_KIND_LZ4, "lz4 load: %s", err);
    CHECK(same_header(p, good, n), "lz4 blob reports other header fields than the raw one");
    bp_policy_free(p);
    int all = 1;
    for (size_t k = 0; k < cn; k++) {
        all &= refused(c, k, NULL);
    }
    CHECK(all, "some lz4 truncation accepted");
    int flips_ok = 1;
    for (size_t k = 4; k < cn; k++) {
        c[k] ^= 0x10;
        flips_ok &= refused(c, cn, NULL);
        c[k] ^= 0x10;
    }
    CHECK(flips_ok, "some lz4 bit flip accepted");
    uint8_t *c2 = malloc(cn + 3);
    memcpy(c2, c, cn);
    memset(c2 + cn, 0, 3);
    CHECK(refused(c2, cn + 3, "trailing"), "lz4 trailing bytes");
    free(c2);
    free(c);

    /* shuffled wrapper */
    uint8_t *sh = malloc(n);
    size_t nw = n / 4;
    for (size_t i = 0; i < nw; i++) {
        for (size_t k = 0; k < 4; k++) {
            sh[k * nw + i] = good[4 * i + k];
        }
    }
    c = lz4(sh, n, &cn);
    uint8_t *w = malloc(cn + 12);
    memcpy(w, "BPWS", 4);
    put32(w + 4, 1);
    put32(w + 8, (uint32_t)n);
    memcpy(w + 12, c, cn);
    p = bp_policy_load_mem(w, cn + 12, err, sizeof err);
    CHECK(p && bp_policy_kind(p) == BP_POLICY_KIND_SHUFFLE, "shuffle load: %s", err);
    CHECK(same_header(p, good, n), "shuffled blob reports other header fields than the raw one");
    if (p) {
        BpPolicy *r = bp_policy_load_mem(good, n, err, sizeof err);
        float x[31] = {0.5f, -0.25f}, y1[6], y2[6];
        bp_policy_forward(p, x, y1);
        bp_policy_forward(r, x, y2);
        CHECK(!memcmp(y1, y2, sizeof y1), "shuffled blob differs from raw");
        bp_policy_free(r);
    }
    bp_policy_free(p);
    put32(w + 8, (uint32_t)n + 4);
    CHECK(refused(w, cn + 12, "raw_len"), "shuffle raw_len lie");
    put32(w + 8, (uint32_t)n);
    put32(w + 4, 2);
    CHECK(refused(w, cn + 12, "BPWS version"), "shuffle version");
    free(w);
    free(c);
    free(sh);
}

static void test_decode(void)
{
    float a[6] = {1.5f, -2.0f, 0.1f, 0.0f, -0.0f, 1e-30f}, sx, sy;
    uint32_t b;
    bp_action_decode(a, &sx, &sy, &b);
    CHECK(sx == 1.0f && sy == -1.0f && b == (1u | 8u), "decode 1: %g %g %u", sx, sy, b);
    float c[6] = {NAN, 0.25f, NAN, 1.0f, 1.0f, -1.0f};
    bp_action_decode(c, &sx, &sy, &b);
    CHECK(sx == 0.0f && sy == 0.25f && b == (2u | 4u), "decode 2: %g %g %u", sx, sy, b);
}

/* v2's blob as version 3 with a noise section (kind, 6 stds) appended */
static uint8_t *make_v3(const uint8_t *v2, size_t n2, uint32_t kind, const float std[6],
                        size_t *n)
{
    uint8_t *b = malloc(n2 + 4 + 24);
    memcpy(b, v2, n2);
    put32(b + 4, 3);
    put32(b + n2, kind);
    for (int i = 0; i < 6; i++) {
        putf(b + n2 + 4 + 4 * i, std[i]);
    }
    *n = n2 + 4 + 24;
    return b;
}

/* the v3 noise section: loads and is reported; every bad kind / std / size refused;
 * the sampler draws splitmix64's published stream and adds std * z to the mean */
static void test_v3_noise(const uint8_t *v2, size_t n2)
{
    const float std[6] = {0.5f, 0.25f, 1.0f, 2.0f, 0.125f, 100.0f};
    size_t n;
    uint8_t *b = make_v3(v2, n2, BP_BPW_NOISE_GAUSSIAN, std, &n);
    char err[256];
    BpPolicy *p = bp_policy_load_mem(b, n, err, sizeof err);
    CHECK(p != NULL, "v3 load: %s", err);
    if (p) {
        CHECK(bp_policy_version(p) == 3, "v3 version %d", bp_policy_version(p));
        const float *got = bp_policy_noise_std(p);
        CHECK(got && !memcmp(got, std, sizeof std), "v3 noise std not as written");
        float x[31], mean[6], a[6], z[6];
        for (int i = 0; i < 31; i++) {
            x[i] = (float)(i % 3) * 0.4f - 0.4f;
        }
        bp_policy_forward(p, x, mean);
        BpNoise s1, s2;
        bp_noise_seed(&s1, 99);
        bp_noise_seed(&s2, 99);
        bp_policy_sample(p, x, &s1, a);
        bp_noise_normals(&s2, z, 6);
        for (int i = 0; i < 6; i++) {
            float v = mean[i] + std[i] * z[i];
            v = v < -1.0f ? -1.0f : (v > 1.0f ? 1.0f : v);
            CHECK(a[i] == v, "sample[%d] %g != clip(mean + std*z) %g", i, (double)a[i], (double)v);
        }
        CHECK(s1.state == s2.state, "one decision draws ceil(6/2) pairs");
    }
    bp_policy_free(p);
    /* v2 blobs have no noise; bp_policy_sample then plays the mean and draws nothing */
    p = bp_policy_load_mem(v2, n2, err, sizeof err);
    if (p) {
        CHECK(bp_policy_noise_std(p) == NULL, "v2 blob reports noise");
        float x[31] = {0}, mean[6], a[6];
        BpNoise s = {5};
        bp_policy_forward(p, x, mean);
        bp_policy_sample(p, x, &s, a);
        CHECK(!memcmp(mean, a, sizeof a) && s.state == 5, "v2 sample is not the mean");
    }
    bp_policy_free(p);
    /* refusals */
    CHECK(refused(b, n - 4, "truncated noise section"), "v3 missing a std");
    CHECK(refused(b, n2, "truncated noise section"), "v3 without its section");
    CHECK(refused(v2, n2 - 4, "truncated payload"), "v2 payload cut");
    uint8_t *longer = calloc(1, n + 4);
    memcpy(longer, b, n);
    CHECK(refused(longer, n + 4, "trailing data"), "v3 with trailing bytes");
    free(longer);
    free(b);
    b = make_v3(v2, n2, 2, std, &n);
    CHECK(refused(b, n, "unknown noise kind 2"), "noise kind 2");
    free(b);
    const float bad[4] = {0.0f, -0.5f, 100.5f, NAN};
    for (int k = 0; k < 4; k++) {
        float s2[6];
        memcpy(s2, std, sizeof s2);
        s2[3] = bad[k];
        b = make_v3(v2, n2, BP_BPW_NOISE_GAUSSIAN, s2, &n);
        CHECK(refused(b, n, "noise std[3]"), "noise std %g", (double)bad[k]);
        free(b);
    }
    /* splitmix64 from state 0: first output 0xE220A8397B1DCDAF (Vigna's reference) */
    BpNoise s = {0};
    double u = bp_noise_uniform(&s);
    CHECK(u == ((double)(0xE220A8397B1DCDAFull >> 11) + 0.5) * 0x1p-53,
          "splitmix64 first uniform %.17g", u);
    CHECK(s.state == 0x9E3779B97F4A7C15ull, "splitmix64 state after one draw");
}

int main(void)
{
    size_t n1, n2;
    uint8_t *v1 = make_blob(&V1, &n1);
    uint8_t *v2 = make_blob(&V2, &n2);
    test_tanh();
    test_forward(v1, n1);
    test_forward(v2, n2);
    test_refusals(v1, n1, BP_POLICY_HEADER_V1_BYTES);
    test_refusals(v2, n2, BP_POLICY_HEADER_V2_BYTES);
    test_misc_refusals();
    test_versions(v1, n1, v2, n2);
    test_v2_fields(v2);
    test_v3_noise(v2, n2);
    test_lz4(v1, n1);
    test_lz4(v2, n2);
    test_decode();
    free(v1);
    free(v2);
    return check_report("test_policy");
}
