/*
 * policy.c — .bpw loader (raw / LZ4 frame / shuffled LZ4) and MLP forward pass.
 * See policy.h for the format and the guarantees.  libc + libm + liblz4 only.
 */
#include "policy.h"

#include <errno.h>
#include <lz4frame.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 8-float vectors (GCC/Clang vector extensions): two SSE registers on the
 * x86-64 baseline, one AVX register in the avx2 clone.  Lane-wise IEEE mul and
 * add, no contraction (-std=c11 implies -ffp-contract=off), so every clone
 * gives bit-identical results. */
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
#define VW 8

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(BP_POLICY_NO_CLONES)
#define BP_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define BP_CLONES
#endif

typedef struct {
    int in, out, out_pad, act;
    float *w;  /* out x in, PyTorch row-major (reference path) */
    float *wt; /* in x out_pad, transposed, zero-padded (fast path) */
    float *b;  /* out_pad, zero-padded */
} BpLayer;

struct BpPolicy {
    int version, n_layers, obs_dim, act_dim, kind, max_pad;
    float *noise_std; /* act_dim stds of a v3 blob (inside mem), NULL: deterministic */
    int action_repeat, input_layout;
    char reward[BP_BPW_REWARD_LEN + 1]; /* "" = unknown (v1) */
    BpLayer layers[BP_POLICY_MAX_LAYERS];
    float *mem;        /* one allocation for all arrays */
    float *buf0, *buf1; /* scratch, max_pad floats each */
    /* a mixture (BPWM): its components (the fields above are component 0's
     * header, no weights of its own) and the one the current match plays */
    BpPolicy *mix[BP_BPW_MIX_MAX];
    int n_mix, active;
};

/* the policy whose weights play: a mixture's active component, else p itself */
static BpPolicy *playing(BpPolicy *p) { return p->n_mix ? p->mix[p->active] : p; }

/* ------------------------------------------------------------------ errors */

static _Thread_local char g_err[256];

static void set_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_err, sizeof g_err, fmt, ap);
    va_end(ap);
}

const char *bp_policy_last_error(void) { return g_err; }

static void copy_err(char *err, size_t errlen)
{
    if (err && errlen) {
        snprintf(err, errlen, "%s", g_err);
    }
}

/* ------------------------------------------------------------------ bytes */

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

static float rdf32(const uint8_t *p)
{
    uint32_t u = rd32(p);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ------------------------------------------------------------------ LZ4 */

#define LZ4_FIRST_CAP ((size_t)64 << 10) /* first output size when the frame states none */

/* the growing output of a decompression */
typedef struct {
    uint8_t *p;
    size_t cap, len;
} OutBuf;

/* Read the frame header: *consumed = its size, *cap = the first output size
 * (the stated content size + 1, so that "more than the limit" is detectable,
 * else LZ4_FIRST_CAP).  0, or -1 (g_err set). */
static int lz4_frame_header(LZ4F_dctx *dctx, const uint8_t *src, size_t n, const char *what,
                            size_t *consumed, size_t *cap)
{
    LZ4F_frameInfo_t info;
    memset(&info, 0, sizeof info);
    *consumed = n;
    size_t r = LZ4F_getFrameInfo(dctx, &info, src, consumed);
    if (LZ4F_isError(r)) {
        set_err("bpw: %s: bad LZ4 frame header (%s)", what, LZ4F_getErrorName(r));
        return -1;
    }
    if (info.contentSize > BP_POLICY_MAX_RAW_BYTES) {
        set_err("bpw: %s: LZ4 content size %llu exceeds limit %u", what,
                (unsigned long long)info.contentSize, BP_POLICY_MAX_RAW_BYTES);
        return -1;
    }
    *cap = info.contentSize ? (size_t)info.contentSize + 1 : LZ4_FIRST_CAP;
    return 0;
}

/* Double the output, up to one byte more than the limit.  0, or -1. */
static int outbuf_grow(OutBuf *o, const char *what)
{
    const size_t hard_cap = (size_t)BP_POLICY_MAX_RAW_BYTES + 1;
    size_t ncap = o->cap * 2 > hard_cap ? hard_cap : o->cap * 2;
    uint8_t *nd = realloc(o->p, ncap);
    if (!nd) {
        set_err("bpw: %s: out of memory", what);
        return -1;
    }
    o->p = nd;
    o->cap = ncap;
    return 0;
}

/* Decompress src[*pos..n) into o until the frame ends (checksums verified by
 * liblz4); *pos = the first byte after it.  0, or -1 (g_err set). */
static int lz4_frame_body(LZ4F_dctx *dctx, const uint8_t *src, size_t n, size_t *pos,
                          const char *what, OutBuf *o)
{
    for (;;) {
        size_t dst_sz = o->cap - o->len, src_sz = n - *pos;
        size_t r = LZ4F_decompress(dctx, o->p + o->len, &dst_sz, src + *pos, &src_sz, NULL);
        if (LZ4F_isError(r)) {
            set_err("bpw: %s: corrupt LZ4 frame (%s)", what, LZ4F_getErrorName(r));
            return -1;
        }
        *pos += src_sz;
        o->len += dst_sz;
        if (o->len > BP_POLICY_MAX_RAW_BYTES) {
            set_err("bpw: %s: decompressed size exceeds limit %u", what,
                    BP_POLICY_MAX_RAW_BYTES);
            return -1;
        }
        if (r == 0) {
            return 0; /* frame complete */
        }
        if (o->len == o->cap) {
            if (outbuf_grow(o, what) != 0) {
                return -1;
            }
            continue;
        }
        if (*pos >= n) {
            set_err("bpw: %s: truncated LZ4 frame", what);
            return -1;
        }
        if (src_sz == 0 && dst_sz == 0) {
            set_err("bpw: %s: LZ4 decoder made no progress", what);
            return -1;
        }
    }
}

/* Decompress one LZ4 frame that must span exactly src[0..n).  Output is
 * malloc'ed, at most BP_POLICY_MAX_RAW_BYTES.  Returns 0 or -1 (g_err set). */
static int lz4_frame_decode(const uint8_t *src, size_t n, const char *what, uint8_t **out,
                            size_t *out_len)
{
    LZ4F_dctx *dctx = NULL;
    OutBuf o = {NULL, 0, 0};
    size_t pos = 0;
    *out = NULL;
    *out_len = 0;
    if (LZ4F_isError(LZ4F_createDecompressionContext(&dctx, LZ4F_VERSION))) {
        set_err("bpw: %s: cannot create LZ4 context", what);
        return -1;
    }
    int rc = lz4_frame_header(dctx, src, n, what, &pos, &o.cap);
    if (rc == 0 && !(o.p = malloc(o.cap))) {
        set_err("bpw: %s: out of memory", what);
        rc = -1;
    }
    if (rc == 0) {
        rc = lz4_frame_body(dctx, src, n, &pos, what, &o);
    }
    if (rc == 0 && pos != n) {
        set_err("bpw: %s: %zu trailing bytes after LZ4 frame", what, n - pos);
        rc = -1;
    }
    if (rc == 0) {
        *out = o.p;
        *out_len = o.len;
        o.p = NULL;
    }
    free(o.p);
    LZ4F_freeDecompressionContext(dctx);
    return rc;
}

/* ------------------------------------------------------------------ raw */

static size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

/* What the header and the layer table say, validated. */
typedef struct {
    uint32_t version, n_layers, obs_dim, act_dim, action_repeat, input_layout;
    size_t header_bytes;
    char reward[BP_BPW_REWARD_LEN + 1];
    uint32_t in[BP_POLICY_MAX_LAYERS], out[BP_POLICY_MAX_LAYERS], act[BP_POLICY_MAX_LAYERS];
} BpwLayout;

/* v2 reward name: printable ASCII, then NUL padding (at least one NUL, nothing
 * but NULs after the first). */
static int parse_reward(const uint8_t *r, char *name)
{
    int len = -1;
    for (int i = 0; i < BP_BPW_REWARD_LEN; i++) {
        if (len < 0 && r[i] == 0) {
            len = i;
        } else if (len < 0 && (r[i] < 0x20 || r[i] > 0x7E)) {
            set_err("bpw: reward field byte %d is 0x%02x (not printable ASCII)", i, r[i]);
            return -1;
        } else if (len >= 0 && r[i] != 0) {
            set_err("bpw: reward field has junk 0x%02x at byte %d after its NUL", r[i], i);
            return -1;
        }
    }
    if (len < 0) {
        set_err("bpw: reward field not NUL-terminated (%d bytes without a NUL)",
                BP_BPW_REWARD_LEN);
        return -1;
    }
    memcpy(name, r, (size_t)len);
    name[len] = 0;
    return 0;
}

/* The v2-only fields (bytes 20..43). */
static int parse_header_v2(const uint8_t *d, BpwLayout *h)
{
    h->action_repeat = rd32(d + 20);
    h->input_layout = rd32(d + 24);
    if (h->action_repeat < 1 || h->action_repeat > BP_MAX_REPEAT) {
        set_err("bpw: action_repeat %u outside 1..%d", h->action_repeat, BP_MAX_REPEAT);
        return -1;
    }
    if (h->input_layout < 1 || h->input_layout > INT32_MAX) {
        set_err("bpw: input_layout %u outside 1..%d", h->input_layout, (int)INT32_MAX);
        return -1;
    }
    return parse_reward(d + 28, h->reward);
}

/* Magic, version, sizes; the v2 fields, or the v1 defaults. */
static int parse_header(const uint8_t *d, size_t n, BpwLayout *h)
{
    if (n < 8) {
        set_err("bpw: truncated header (%zu bytes < %d)", n, BP_POLICY_HEADER_V1_BYTES);
        return -1;
    }
    if (memcmp(d, "BPW1", 4) != 0) {
        set_err("bpw: bad magic %02x %02x %02x %02x (want BPW1)", d[0], d[1], d[2], d[3]);
        return -1;
    }
    h->version = rd32(d + 4);
    if (h->version < 1 || h->version > BP_BPW_VERSION) {
        set_err("bpw: unknown version %u (this loader knows 1..%d)", h->version,
                BP_BPW_VERSION);
        return -1;
    }
    h->header_bytes = h->version == 1 ? BP_POLICY_HEADER_V1_BYTES : BP_POLICY_HEADER_V2_BYTES;
    if (n < h->header_bytes) {
        set_err("bpw: truncated v%u header (%zu bytes < %zu)", h->version, n, h->header_bytes);
        return -1;
    }
    h->n_layers = rd32(d + 8);
    h->obs_dim = rd32(d + 12);
    h->act_dim = rd32(d + 16);
    if (h->n_layers < 1 || h->n_layers > BP_POLICY_MAX_LAYERS) {
        set_err("bpw: n_layers %u outside 1..%d", h->n_layers, BP_POLICY_MAX_LAYERS);
        return -1;
    }
    if (h->obs_dim < 1 || h->obs_dim > BP_POLICY_MAX_DIM || h->act_dim < 1 ||
        h->act_dim > BP_POLICY_MAX_DIM) {
        set_err("bpw: obs_dim %u / act_dim %u outside 1..%d", h->obs_dim, h->act_dim,
                BP_POLICY_MAX_DIM);
        return -1;
    }
    if (h->version == 1) {
        h->action_repeat = BP_BPW_DEFAULT_REPEAT;
        h->input_layout = BP_INPUT_LAYOUT_OBS;
        h->reward[0] = 0;
        return 0;
    }
    return parse_header_v2(d, h);
}

/* The layer table: chained dims, known activations; the exact blob size. */
static int parse_table(const uint8_t *d, size_t n, BpwLayout *h)
{
    size_t table_end = h->header_bytes + 12 * (size_t)h->n_layers;
    if (n < table_end) {
        set_err("bpw: truncated layer table (%zu bytes < %zu)", n, table_end);
        return -1;
    }
    uint64_t total = table_end;
    uint32_t prev = h->obs_dim;
    for (uint32_t i = 0; i < h->n_layers; i++) {
        const uint8_t *e = d + h->header_bytes + 12 * (size_t)i;
        uint32_t in = rd32(e), out = rd32(e + 4), act = rd32(e + 8);
        if (in < 1 || in > BP_POLICY_MAX_DIM || out < 1 || out > BP_POLICY_MAX_DIM) {
            set_err("bpw: layer %u dims in=%u out=%u outside 1..%d", i, in, out,
                    BP_POLICY_MAX_DIM);
            return -1;
        }
        if (in != prev) {
            set_err("bpw: layer %u in=%u != %s=%u", i, in,
                    i == 0 ? "obs_dim" : "previous layer out", prev);
            return -1;
        }
        if (act != BP_POLICY_ACT_NONE && act != BP_POLICY_ACT_TANH) {
            set_err("bpw: layer %u unknown activation %u", i, act);
            return -1;
        }
        h->in[i] = in;
        h->out[i] = out;
        h->act[i] = act;
        total += 4 * ((uint64_t)in * out + out);
        prev = out;
    }
    if (prev != h->act_dim) {
        set_err("bpw: last layer out=%u != act_dim=%u", prev, h->act_dim);
        return -1;
    }
    const uint64_t payload_end = total;
    if (h->version == 3) {
        total += 4 + 4 * (uint64_t)h->act_dim; /* the noise section */
    }
    if (total > BP_POLICY_MAX_RAW_BYTES) {
        set_err("bpw: table implies %llu bytes > limit %u", (unsigned long long)total,
                BP_POLICY_MAX_RAW_BYTES);
        return -1;
    }
    if (n < total) {
        set_err("bpw: truncated %s (%zu bytes, table says %llu)",
                n < payload_end ? "payload" : "noise section", n, (unsigned long long)total);
        return -1;
    }
    if (n > total) {
        set_err("bpw: size mismatch (%zu bytes, table says %llu; trailing data)", n,
                (unsigned long long)total);
        return -1;
    }
    return 0;
}

/* One aligned allocation: per layer w (out*in), wt (in*out_pad), b (out_pad),
 * each rounded to 16 floats (64 bytes), plus two scratch buffers. */
static BpPolicy *alloc_policy(const BpwLayout *h, int kind)
{
    size_t floats = 0, max_pad = round_up(h->obs_dim, VW);
    for (uint32_t i = 0; i < h->n_layers; i++) {
        size_t op = round_up(h->out[i], VW);
        floats += round_up((size_t)h->in[i] * h->out[i], 16) +
                  round_up((size_t)h->in[i] * op, 16) + round_up(op, 16);
        max_pad = op > max_pad ? op : max_pad;
    }
    floats += 2 * round_up(max_pad, 16);
    if (h->version == 3) {
        floats += round_up(h->act_dim, 16);
    }
    size_t bytes = round_up(floats * sizeof(float), 64);
    BpPolicy *p = calloc(1, sizeof *p);
    float *mem = aligned_alloc(64, bytes);
    if (!p || !mem) {
        free(p);
        free(mem);
        set_err("bpw: out of memory");
        return NULL;
    }
    memset(mem, 0, bytes);
    p->mem = mem;
    p->version = (int)h->version;
    p->n_layers = (int)h->n_layers;
    p->obs_dim = (int)h->obs_dim;
    p->act_dim = (int)h->act_dim;
    p->action_repeat = (int)h->action_repeat;
    p->input_layout = (int)h->input_layout;
    memcpy(p->reward, h->reward, sizeof p->reward);
    p->kind = kind;
    p->max_pad = (int)max_pad;
    float *cur = mem;
    for (uint32_t i = 0; i < h->n_layers; i++) {
        BpLayer *L = &p->layers[i];
        L->in = (int)h->in[i];
        L->out = (int)h->out[i];
        L->out_pad = (int)round_up(h->out[i], VW);
        L->act = (int)h->act[i];
        L->w = cur;
        cur += round_up((size_t)L->in * L->out, 16);
        L->wt = cur;
        cur += round_up((size_t)L->in * L->out_pad, 16);
        L->b = cur;
        cur += round_up((size_t)L->out_pad, 16);
    }
    p->buf0 = cur;
    cur += round_up(max_pad, 16);
    p->buf1 = cur;
    cur += round_up(max_pad, 16);
    p->noise_std = h->version == 3 ? cur : NULL;
    return p;
}

/* Weights (row-major, also stored transposed) and biases of every layer;
 * src has exactly the bytes parse_table counted. */
static int load_payload(BpPolicy *p, const uint8_t *src)
{
    for (int i = 0; i < p->n_layers; i++) {
        BpLayer *L = &p->layers[i];
        for (int o = 0; o < L->out; o++) {
            for (int k = 0; k < L->in; k++) {
                float v = rdf32(src);
                src += 4;
                if (!isfinite(v)) {
                    set_err("bpw: layer %d has non-finite weight [%d][%d]", i, o, k);
                    return -1;
                }
                L->w[(size_t)o * L->in + k] = v;
                L->wt[(size_t)k * L->out_pad + o] = v;
            }
        }
        for (int o = 0; o < L->out; o++) {
            float v = rdf32(src);
            src += 4;
            if (!isfinite(v)) {
                set_err("bpw: layer %d has non-finite bias [%d]", i, o);
                return -1;
            }
            L->b[o] = v;
        }
    }
    if (p->noise_std) { /* v3: u32 kind, then act_dim stds */
        uint32_t kind = rd32(src);
        src += 4;
        if (kind != BP_BPW_NOISE_GAUSSIAN) {
            set_err("bpw: unknown noise kind %u (this loader knows %d: diagonal Gaussian)", kind,
                    BP_BPW_NOISE_GAUSSIAN);
            return -1;
        }
        for (int i = 0; i < p->act_dim; i++) {
            float v = rdf32(src);
            src += 4;
            if (!(isfinite(v) && v > 0.0f && v <= BP_BPW_MAX_NOISE_STD)) {
                set_err("bpw: noise std[%d] = %g outside (0, %g]", i, (double)v,
                        (double)BP_BPW_MAX_NOISE_STD);
                return -1;
            }
            p->noise_std[i] = v;
        }
    }
    return 0;
}

static BpPolicy *parse_raw(const uint8_t *d, size_t n, int kind)
{
    BpwLayout h;
    memset(&h, 0, sizeof h);
    if (parse_header(d, n, &h) != 0 || parse_table(d, n, &h) != 0) {
        return NULL;
    }
    BpPolicy *p = alloc_policy(&h, kind);
    if (p && load_payload(p, d + h.header_bytes + 12 * (size_t)h.n_layers) != 0) {
        bp_policy_free(p);
        p = NULL;
    }
    return p;
}

/* ------------------------------------------------------------------ public load */

static BpPolicy *load_lz4(const uint8_t *d, size_t len)
{
    uint8_t *raw = NULL;
    size_t raw_len = 0;
    BpPolicy *p = NULL;
    if (lz4_frame_decode(d, len, "lz4", &raw, &raw_len) == 0) {
        p = parse_raw(raw, raw_len, BP_POLICY_KIND_LZ4);
    }
    free(raw);
    return p;
}

/* "BPWS": u32 wrapper version, u32 raw_len, one LZ4 frame of the byte planes */
static BpPolicy *load_shuffled(const uint8_t *d, size_t len)
{
    if (len < 12) {
        set_err("bpw: truncated BPWS header (%zu bytes < 12)", len);
        return NULL;
    }
    if (rd32(d + 4) != BP_POLICY_SHUFFLE_VERSION) {
        set_err("bpw: unknown BPWS version %u (this loader knows %d)", rd32(d + 4),
                BP_POLICY_SHUFFLE_VERSION);
        return NULL;
    }
    uint32_t raw_len = rd32(d + 8);
    if (raw_len % 4 || raw_len < BP_POLICY_HEADER_V1_BYTES || raw_len > BP_POLICY_MAX_RAW_BYTES) {
        set_err("bpw: BPWS raw_len %u invalid", raw_len);
        return NULL;
    }
    uint8_t *sh = NULL, *raw = NULL;
    size_t sh_len = 0;
    BpPolicy *p = NULL;
    if (lz4_frame_decode(d + 12, len - 12, "shuffle", &sh, &sh_len) != 0) {
        goto out;
    }
    if (sh_len != raw_len) {
        set_err("bpw: BPWS raw_len %u != decompressed %zu", raw_len, sh_len);
        goto out;
    }
    raw = malloc(raw_len);
    if (!raw) {
        set_err("bpw: out of memory");
        goto out;
    }
    size_t nw = raw_len / 4;
    for (size_t i = 0; i < nw; i++) {
        for (size_t k = 0; k < 4; k++) {
            raw[4 * i + k] = sh[k * nw + i];
        }
    }
    p = parse_raw(raw, raw_len, BP_POLICY_KIND_SHUFFLE);
out:
    free(raw);
    free(sh);
    return p;
}

/* "BPWM" (docs/bpw.md, "Mixtures"): u32 version, u32 count K, then K x {u32 length
 * (a multiple of 4), one raw BPW1 blob}; every component parsed and checked as a
 * blob is, all agreeing on what the bot plays them with, nothing after the last */
static BpPolicy *load_mixture(const uint8_t *d, size_t len)
{
    if (len < 12) {
        set_err("bpw: truncated BPWM header (%zu bytes < 12)", len);
        return NULL;
    }
    uint32_t ver = rd32(d + 4), k = rd32(d + 8);
    if (ver != BP_BPW_MIX_VERSION) {
        set_err("bpw: unknown BPWM version %u (this loader knows %d)", ver, BP_BPW_MIX_VERSION);
        return NULL;
    }
    if (k < 2 || k > BP_BPW_MIX_MAX) {
        set_err("bpw: BPWM count %u outside 2..%d", k, BP_BPW_MIX_MAX);
        return NULL;
    }
    BpPolicy *m = calloc(1, sizeof *m);
    if (!m) {
        set_err("bpw: out of memory");
        return NULL;
    }
    size_t pos = 12;
    for (uint32_t i = 0; i < k; i++) {
        if (len - pos < 4) {
            set_err("bpw: BPWM truncated before component %u's length", i);
            goto fail;
        }
        uint32_t n = rd32(d + pos);
        pos += 4;
        if (n % 4 || n > len - pos) {
            set_err("bpw: BPWM component %u's length %u invalid (%zu bytes left)", i, n, len - pos);
            goto fail;
        }
        if (n < 4 || memcmp(d + pos, "BPW1", 4) != 0) {
            set_err("bpw: BPWM component %u is not a raw BPW1 blob", i);
            goto fail;
        }
        BpPolicy *c = parse_raw(d + pos, n, BP_POLICY_KIND_RAW);
        if (!c) {
            goto fail;
        }
        m->mix[m->n_mix++] = c;
        pos += n;
        const BpPolicy *c0 = m->mix[0];
        if (c->obs_dim != c0->obs_dim || c->act_dim != c0->act_dim ||
            c->version != c0->version || c->action_repeat != c0->action_repeat ||
            c->input_layout != c0->input_layout) {
            set_err("bpw: BPWM component %u disagrees with component 0 (obs_dim, act_dim, "
                    "version, action repeat and input layout must agree)", i);
            goto fail;
        }
    }
    if (pos != len) {
        set_err("bpw: BPWM has %zu bytes after its last component", len - pos);
        goto fail;
    }
    const BpPolicy *c0 = m->mix[0];
    m->version = c0->version;
    m->n_layers = c0->n_layers;
    m->obs_dim = c0->obs_dim;
    m->act_dim = c0->act_dim;
    m->kind = BP_POLICY_KIND_MIXTURE;
    m->noise_std = c0->noise_std;
    m->action_repeat = c0->action_repeat;
    m->input_layout = c0->input_layout;
    memcpy(m->reward, c0->reward, sizeof m->reward);
    return m;
fail:
    bp_policy_free(m);
    return NULL;
}

BpPolicy *bp_policy_load_mem(const void *data, size_t len, char *err, size_t errlen)
{
    const uint8_t *d = data;
    BpPolicy *p = NULL;
    g_err[0] = 0;
    if (!d && len) {
        set_err("bpw: NULL buffer");
    } else if (len < 4) {
        set_err("bpw: truncated (%zu bytes, no magic)", len);
    } else if (memcmp(d, "BPW1", 4) == 0) {
        p = parse_raw(d, len, BP_POLICY_KIND_RAW);
    } else if (rd32(d) == 0x184D2204u) {
        p = load_lz4(d, len);
    } else if (memcmp(d, "BPWS", 4) == 0) {
        p = load_shuffled(d, len);
    } else if (memcmp(d, "BPWM", 4) == 0) {
        p = load_mixture(d, len);
    } else {
        set_err("bpw: unknown blob magic %02x %02x %02x %02x (want BPW1, LZ4 frame, BPWS or BPWM)",
                d[0], d[1], d[2], d[3]);
    }
    if (!p) {
        copy_err(err, errlen);
    }
    return p;
}

BpPolicy *bp_policy_load_file(const char *path, char *err, size_t errlen)
{
    g_err[0] = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        set_err("bpw: cannot open %s: %s", path, strerror(errno));
        copy_err(err, errlen);
        return NULL;
    }
    size_t cap = 64 << 10, n = 0;
    uint8_t *buf = malloc(cap);
    BpPolicy *p = NULL;
    if (!buf) {
        set_err("bpw: out of memory");
        goto out;
    }
    for (;;) {
        if (n == cap) {
            if (cap > BP_POLICY_MAX_FILE_BYTES) {
                set_err("bpw: %s larger than %u bytes", path, BP_POLICY_MAX_FILE_BYTES);
                goto out;
            }
            uint8_t *nb = realloc(buf, cap * 2);
            if (!nb) {
                set_err("bpw: out of memory");
                goto out;
            }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) {
            if (ferror(f)) {
                set_err("bpw: read error on %s", path);
                goto out;
            }
            break;
        }
    }
    if (n > BP_POLICY_MAX_FILE_BYTES) {
        set_err("bpw: %s larger than %u bytes", path, BP_POLICY_MAX_FILE_BYTES);
        goto out;
    }
    p = bp_policy_load_mem(buf, n, NULL, 0);
out:
    free(buf);
    fclose(f);
    if (!p) {
        copy_err(err, errlen);
    }
    return p;
}

void bp_policy_free(BpPolicy *p)
{
    if (p) {
        for (int i = 0; i < p->n_mix; i++) {
            bp_policy_free(p->mix[i]);
        }
        free(p->mem);
        free(p);
    }
}

int bp_policy_mix_count(const BpPolicy *p) { return p->n_mix ? p->n_mix : 1; }

int bp_policy_select(BpPolicy *p, uint64_t match_seed)
{
    if (!p->n_mix) {
        return 0;
    }
    BpNoise n;
    bp_noise_seed(&n, match_seed ^ (uint64_t)BP_BPW_MIX_SALT);
    int k = (int)(bp_noise_uniform(&n) * p->n_mix);
    p->active = k < p->n_mix ? k : p->n_mix - 1;
    return p->active;
}

int bp_policy_obs_dim(const BpPolicy *p) { return p->obs_dim; }
int bp_policy_act_dim(const BpPolicy *p) { return p->act_dim; }
int bp_policy_n_layers(const BpPolicy *p) { return p->n_layers; }
int bp_policy_kind(const BpPolicy *p) { return p->kind; }
int bp_policy_version(const BpPolicy *p) { return p->version; }
int bp_policy_action_repeat(const BpPolicy *p) { return p->action_repeat; }
int bp_policy_input_layout(const BpPolicy *p) { return p->input_layout; }
const char *bp_policy_reward(const BpPolicy *p) { return p->reward; }
const float *bp_policy_noise_std(const BpPolicy *p)
{
    return p->n_mix ? p->mix[p->active]->noise_std : p->noise_std;
}

int bp_policy_layer(const BpPolicy *p, int i, int *in, int *out, int *activation)
{
    if (p->n_mix) {
        p = p->mix[p->active];
    }
    if (i < 0 || i >= p->n_layers) {
        return -1;
    }
    *in = p->layers[i].in;
    *out = p->layers[i].out;
    *activation = p->layers[i].act;
    return 0;
}

/* ------------------------------------------------------------------ tanh */

/* Clamped [13/6] rational approximation of tanh (the coefficients Eigen and
 * XLA use for float); max abs error vs libm tanh ~1e-7 on the float line
 * (tests/test_policy.c measures it).  Same arithmetic in the scalar and the
 * vector form, so both round identically. */
#define TANH_CLAMP 7.90531110763549805f
#define A1 4.89352455891786e-03f
#define A3 6.37261928875436e-04f
#define A5 1.48572235717979e-05f
#define A7 5.12229709037114e-08f
#define A9 -8.60467152213735e-11f
#define A11 2.00018790482477e-13f
#define A13 -2.76076847742355e-16f
#define B0 4.89352518554385e-03f
#define B2 2.26843463243900e-03f
#define B4 1.18534705686654e-04f
#define B6 1.19825839466702e-06f

float bp_policy_tanh(float x)
{
    if (x != x) {
        return x;
    }
    x = x > TANH_CLAMP ? TANH_CLAMP : x;
    x = x < -TANH_CLAMP ? -TANH_CLAMP : x;
    float x2 = x * x;
    float p = x2 * A13 + A11;
    p = x2 * p + A9;
    p = x2 * p + A7;
    p = x2 * p + A5;
    p = x2 * p + A3;
    p = x2 * p + A1;
    p = x * p;
    float q = x2 * B6 + B4;
    q = x2 * q + B2;
    q = x2 * q + B0;
    return p / q;
}

/* macros, not functions: passing 32-byte vectors by value trips -Wpsabi */
#define VSPLAT(f) ((v8f){(f), (f), (f), (f), (f), (f), (f), (f)})
#define VSELECT(m, a, b) ((v8f)(((v8i)(a) & (m)) | ((v8i)(b) & ~(m))))

/* ------------------------------------------------------------------ forward */

/* y[0..64) = b + sum_k x[k] * wt[k][0..64), k in order: 8 accumulators kept in
 * registers (one ymm each in the avx2 clone), one dependency chain per lane. */
BP_CLONES
static void dense_block64(const float *restrict wt, int in, int stride, const float *restrict x,
                          const float *restrict b, float *restrict y)
{
    v8f a0, a1, a2, a3, a4, a5, a6, a7;
    memcpy(&a0, b + 0, 32);
    memcpy(&a1, b + 8, 32);
    memcpy(&a2, b + 16, 32);
    memcpy(&a3, b + 24, 32);
    memcpy(&a4, b + 32, 32);
    memcpy(&a5, b + 40, 32);
    memcpy(&a6, b + 48, 32);
    memcpy(&a7, b + 56, 32);
    for (int k = 0; k < in; k++, wt += stride) {
        const v8f xk = VSPLAT(x[k]);
        v8f w0, w1, w2, w3, w4, w5, w6, w7;
        memcpy(&w0, wt + 0, 32);
        memcpy(&w1, wt + 8, 32);
        memcpy(&w2, wt + 16, 32);
        memcpy(&w3, wt + 24, 32);
        memcpy(&w4, wt + 32, 32);
        memcpy(&w5, wt + 40, 32);
        memcpy(&w6, wt + 48, 32);
        memcpy(&w7, wt + 56, 32);
        a0 += xk * w0;
        a1 += xk * w1;
        a2 += xk * w2;
        a3 += xk * w3;
        a4 += xk * w4;
        a5 += xk * w5;
        a6 += xk * w6;
        a7 += xk * w7;
    }
    memcpy(y + 0, &a0, 32);
    memcpy(y + 8, &a1, 32);
    memcpy(y + 16, &a2, 32);
    memcpy(y + 24, &a3, 32);
    memcpy(y + 32, &a4, 32);
    memcpy(y + 40, &a5, 32);
    memcpy(y + 48, &a6, 32);
    memcpy(y + 56, &a7, 32);
}

/* same for 8 outputs */
BP_CLONES
static void dense_block8(const float *restrict wt, int in, int stride, const float *restrict x,
                         const float *restrict b, float *restrict y)
{
    v8f a0;
    memcpy(&a0, b, 32);
    for (int k = 0; k < in; k++, wt += stride) {
        v8f w0;
        memcpy(&w0, wt, 32);
        a0 += VSPLAT(x[k]) * w0;
    }
    memcpy(y, &a0, 32);
}

BP_CLONES
static void tanh_inplace(float *y, int n_pad)
{
    const v8f c = VSPLAT(TANH_CLAMP), nc = VSPLAT(-TANH_CLAMP);
    for (int o = 0; o < n_pad; o += VW) {
        /* same operations, same order as bp_policy_tanh */
        v8f t;
        memcpy(&t, y + o, 32);
        t = VSELECT(t > c, c, t);
        t = VSELECT(t < nc, nc, t);
        v8f x2 = t * t;
        v8f p = x2 * VSPLAT(A13) + VSPLAT(A11);
        p = x2 * p + VSPLAT(A9);
        p = x2 * p + VSPLAT(A7);
        p = x2 * p + VSPLAT(A5);
        p = x2 * p + VSPLAT(A3);
        p = x2 * p + VSPLAT(A1);
        p = t * p;
        v8f q = x2 * VSPLAT(B6) + VSPLAT(B4);
        q = x2 * q + VSPLAT(B2);
        q = x2 * q + VSPLAT(B0);
        t = p / q;
        memcpy(y + o, &t, 32);
    }
}

static void dense_fast(const BpLayer *L, const float *restrict x, float *restrict y)
{
    int o = 0;
    for (; o + 64 <= L->out_pad; o += 64) {
        dense_block64(L->wt + o, L->in, L->out_pad, x, L->b + o, y + o);
    }
    for (; o < L->out_pad; o += VW) {
        dense_block8(L->wt + o, L->in, L->out_pad, x, L->b + o, y + o);
    }
    if (L->act == BP_POLICY_ACT_TANH) {
        tanh_inplace(y, L->out_pad);
    }
}

void bp_policy_forward(BpPolicy *p, const float *obs, float *out)
{
    p = playing(p);
    const float *x = obs;
    float *bufs[2] = {p->buf0, p->buf1};
    for (int i = 0; i < p->n_layers; i++) {
        float *y = bufs[i & 1];
        dense_fast(&p->layers[i], x, y);
        x = y;
    }
    memcpy(out, x, (size_t)p->act_dim * sizeof(float));
}

void bp_policy_forward_ref(BpPolicy *p, const float *obs, float *out)
{
    p = playing(p);
    const float *x = obs;
    float *bufs[2] = {p->buf0, p->buf1};
    for (int i = 0; i < p->n_layers; i++) {
        const BpLayer *L = &p->layers[i];
        float *y = bufs[i & 1];
        for (int o = 0; o < L->out; o++) {
            const float *w = L->w + (size_t)o * L->in;
            float acc = L->b[o];
            for (int k = 0; k < L->in; k++) {
                acc += x[k] * w[k];
            }
            y[o] = L->act == BP_POLICY_ACT_TANH ? tanhf(acc) : acc;
        }
        x = y;
    }
    memcpy(out, x, (size_t)p->act_dim * sizeof(float));
}

/* ------------------------------------------------------------------ action */

static float clip_stick(float v)
{
    if (v != v) {
        return 0.0f;
    }
    return v < -1.0f ? -1.0f : (v > 1.0f ? 1.0f : v);
}

void bp_action_decode(const float a[6], float *sx, float *sy, uint32_t *buttons)
{
    *sx = clip_stick(a[0]);
    *sy = clip_stick(a[1]);
    uint32_t b = 0;
    for (int i = 0; i < 4; i++) {
        if (a[2 + i] > 0.0f) {
            b |= 1u << i;
        }
    }
    *buttons = b;
}

/* ------------------------------------------------------------------ sampling */

/* splitmix64 (Steele, Lea & Flood 2014): the state counts up by a fixed odd
 * increment and each output is the state through a mixer */
static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void bp_noise_seed(BpNoise *n, uint64_t seed) { n->state = seed; }

double bp_noise_uniform(BpNoise *n)
{
    return ((double)(splitmix64(&n->state) >> 11) + 0.5) * 0x1p-53;
}

void bp_noise_normals(BpNoise *n, float *z, int dim)
{
    for (int i = 0; i < dim; i += 2) {
        double u1 = bp_noise_uniform(n), u2 = bp_noise_uniform(n);
        double r = sqrt(-2.0 * log(u1)), ang = BP_NOISE_TWO_PI * u2;
        z[i] = (float)(r * cos(ang));
        if (i + 1 < dim) {
            z[i + 1] = (float)(r * sin(ang));
        }
    }
}

void bp_policy_sample(BpPolicy *p, const float *obs, BpNoise *noise, float *out)
{
    p = playing(p);
    bp_policy_forward(p, obs, out);
    if (!p->noise_std) {
        return;
    }
    float z[BP_POLICY_MAX_DIM];
    bp_noise_normals(noise, z, p->act_dim);
    for (int i = 0; i < p->act_dim; i++) {
        float v = out[i] + p->noise_std[i] * z[i]; /* float32 mul, then add: no contraction */
        out[i] = v < -1.0f ? -1.0f : (v > 1.0f ? 1.0f : v);
    }
}
