/*
 * policy.h — loader and forward pass of the native policy blob (.bpw).
 * Twin of the Python exporter (brawlkit's export package); docs/bpw.md is
 * normative.
 *
 * Raw format (all integers u32 little-endian, floats IEEE-754 binary32 LE):
 *   header v2 (44 bytes, BP_POLICY_HEADER_V2_BYTES)
 *      0  "BPW1"         magic (the same for every version; `version` tells them apart)
 *      4  version        BP_BPW_VERSION (2)
 *      8  n_layers
 *     12  obs_dim        input size of the first layer = the policy input size
 *     16  act_dim
 *     20  action_repeat  ticks per decision the policy was trained with, 1..BP_MAX_REPEAT
 *     24  input_layout   which input the network expects: BP_INPUT_LAYOUT_OBS (1) =
 *                        the BP_OBS_DIM-value observation of docs/observation.md.
 *                        Any value >= 1 loads (up to INT32_MAX): whether a layout is
 *                        usable is the consumer's decision (brawlpit_bot knows 1).
 *     28  reward[16]     name of the reward preset it was trained with (informational):
 *                        printable ASCII 0x20..0x7E, then NUL padding; at least one
 *                        NUL, and only NULs after the first
 *   version 3: the v2 header and body, then a noise section: u32 kind
 *                (BP_BPW_NOISE_GAUSSIAN) and act_dim float32 std, each finite and in
 *                (0, BP_BPW_MAX_NOISE_STD]: the sampled policy (see "Sampling" below).
 *                The exporter writes 2 for the deterministic policy, 3 only with noise.
 *   header v1 (20 bytes): magic, version = 1, n_layers, obs_dim, act_dim; loads
 *                as action_repeat = BP_BPW_DEFAULT_REPEAT (4), input_layout =
 *                BP_INPUT_LAYOUT_OBS, reward = "" (unknown)
 *   layer table  n_layers x { u32 in, u32 out, u32 activation }      (12 bytes each)
 *                activation: 0 none, 1 tanh
 *   payload      per layer: weight out x in float32 row-major (PyTorch layout),
 *                then bias out float32
 * The input length must equal header + 12*n_layers + 4*sum(out*in + out) exactly
 * (version 3: plus 4 + 4*act_dim).
 * Limits: version 1..3, 1 <= n_layers <= BP_POLICY_MAX_LAYERS, every dim in
 * 1..BP_POLICY_MAX_DIM, layer[0].in == obs_dim, layer[i].in == layer[i-1].out,
 * last out == act_dim, raw size <= BP_POLICY_MAX_RAW_BYTES, every weight/bias
 * finite, and the v2 field rules above.
 *
 * Transport encodings, recognised by the first four bytes:
 *   "BPW1"        raw blob, as above
 *   04 22 4D 18   LZ4 frame (magic 0x184D2204) whose content is a raw blob
 *   "BPWS"        shuffled: u32 wrapper version (=1), u32 raw_len, then one LZ4
 *                 frame whose content is exactly raw_len bytes of
 *                 shuffled[k*n + i] = raw[4*i + k]  (n = raw_len/4, k = 0..3)
 *   "BPWM"        a mixture, not a wrapper: u32 version, u32 count K, then K x
 *                 {u32 length, one raw blob}; one component plays per match
 *                 (bp_policy_select below; brawlpit.h BP_BPW_MIX_*)
 * An LZ4 frame must end exactly at the end of the input and decompress to at
 * most BP_POLICY_MAX_RAW_BYTES; a corrupt frame (liblz4 verifies header and
 * content checksums) is refused.
 *
 * Corruption policy: any header/table/size error or truncation is refused with
 * a message naming the field and its value, without reading past the input.
 * Raw blobs carry no checksum, so a payload bit flip that keeps every value
 * finite is accepted (a different, valid network); a flip yielding NaN/Inf is
 * refused.
 *
 * Forward pass: libc/libm only.  At load time every weight matrix is copied
 * transposed (in x out) so the inner loop runs across outputs (vectorisable)
 * while each output is still summed in order bias + x0*w0 + x1*w1 + ...;
 * tanh is a clamped [13/6] rational approximation (max abs error < 1e-6 vs
 * libm tanh).  Parity with torch: max abs diff <= 1e-5 (tests/test_policy_native.py).
 * A policy handle owns scratch buffers: bp_policy_forward is not reentrant for
 * one handle (use one handle per thread).
 *
 * Sampling (docs/bpw.md, "Sampling"; the Python twin is NoiseStream in
 * brawlkit/export/actor.py): a BpNoise is a splitmix64 state; a uniform is
 * ((x >> 11) + 0.5) * 2^-53 of its next output x; each pair (u1, u2) gives
 * r = sqrt(-2 ln u1), r cos(2 pi u2), r sin(2 pi u2) (double, then float), the
 * last sine dropped when act_dim is odd.  bp_policy_sample: one decision draws
 * ceil(act_dim/2) pairs; out = clip(mean + std * z, -1, 1) in float.
 */
#ifndef BP_POLICY_H
#define BP_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "brawlpit.h" /* BP_BPW_*, BP_INPUT_LAYOUT_OBS, BP_MAX_REPEAT */

#define BP_POLICY_HEADER_V1_BYTES 20
#define BP_POLICY_HEADER_V2_BYTES 44
#define BP_POLICY_SHUFFLE_VERSION 1
#define BP_POLICY_MAX_LAYERS 16
#define BP_POLICY_MAX_DIM 4096
#define BP_POLICY_MAX_RAW_BYTES (16u << 20)
/* largest input accepted by bp_policy_load_file (LZ4 worst case is ~raw + 0.4%) */
#define BP_POLICY_MAX_FILE_BYTES (BP_POLICY_MAX_RAW_BYTES + (1u << 20))

#define BP_POLICY_ACT_NONE 0
#define BP_POLICY_ACT_TANH 1

#define BP_POLICY_KIND_RAW 0
#define BP_POLICY_KIND_LZ4 1
#define BP_POLICY_KIND_SHUFFLE 2
#define BP_POLICY_KIND_MIXTURE 3 /* "BPWM": several raw blobs, one played per match */

typedef struct BpPolicy BpPolicy;

/* Load from a memory buffer / a file (any encoding).  NULL on failure; the
 * reason is then in bp_policy_last_error() (thread-local) and, if err != NULL,
 * copied to err (errlen bytes, NUL-terminated). */
BpPolicy *bp_policy_load_mem(const void *data, size_t len, char *err, size_t errlen);
BpPolicy *bp_policy_load_file(const char *path, char *err, size_t errlen);
void bp_policy_free(BpPolicy *p);
const char *bp_policy_last_error(void);

int bp_policy_obs_dim(const BpPolicy *p);
int bp_policy_act_dim(const BpPolicy *p);
int bp_policy_n_layers(const BpPolicy *p);
/* BP_POLICY_KIND_* of the blob this policy was loaded from */
int bp_policy_kind(const BpPolicy *p);
/* 1, 2 or 3: the format version of the blob */
int bp_policy_version(const BpPolicy *p);
/* ticks per decision the policy was trained with (v1 blobs: BP_BPW_DEFAULT_REPEAT) */
int bp_policy_action_repeat(const BpPolicy *p);
/* the input the network expects (BP_INPUT_LAYOUT_OBS, ...; v1 blobs: BP_INPUT_LAYOUT_OBS);
 * may be a layout this build does not know: the caller checks */
int bp_policy_input_layout(const BpPolicy *p);
/* reward preset it was trained with, NUL-terminated printable ASCII; "" = unknown
 * (always for v1).  Valid as long as the policy. */
const char *bp_policy_reward(const BpPolicy *p);
/* layer i: in, out, activation (returns 0, or -1 when i is out of range) */
int bp_policy_layer(const BpPolicy *p, int i, int *in, int *out, int *activation);

/* Gaussian mean (unclipped) of obs[obs_dim] into out[act_dim]. */
void bp_policy_forward(BpPolicy *p, const float *obs, float *out);
/* Reference path: PyTorch-layout weights, scalar loops, libm tanhf.  Slower;
 * kept for tests and the benchmark. */
void bp_policy_forward_ref(BpPolicy *p, const float *obs, float *out);

/* the noise section of a version-3 blob (act_dim stds), or NULL: deterministic */
const float *bp_policy_noise_std(const BpPolicy *p);

/* A mixture ("BPWM", docs/bpw.md "Mixtures"; BP_POLICY_KIND_MIXTURE) holds several
 * policies and plays one per match.  The accessors above answer for all of them
 * (they agree); forward, sample, layer and noise_std use the active one.
 * bp_policy_mix_count: how many (1 for a single blob).  bp_policy_select: make the
 * one the match of match_seed plays active — k = floor(u * K), u the first
 * bp_noise_uniform of a stream seeded match_seed ^ BP_BPW_MIX_SALT, as Python's
 * mixture_pick — and return k (always 0 for a single blob). */
int bp_policy_mix_count(const BpPolicy *p);
int bp_policy_select(BpPolicy *p, uint64_t match_seed);

#define BP_NOISE_TWO_PI 6.283185307179586 /* the double nearest 2 pi, as Python's 2 * math.pi */

/* the sampling rule's stream (a splitmix64 state) */
typedef struct {
    uint64_t state;
} BpNoise;

void bp_noise_seed(BpNoise *n, uint64_t seed);
/* next uniform in (0, 1) */
double bp_noise_uniform(BpNoise *n);
/* dim standard normals (ceil(dim/2) Box-Muller pairs) into z */
void bp_noise_normals(BpNoise *n, float *z, int dim);
/* The sampled action of a v3 blob into out[act_dim]: clip(mean + std * z, -1, 1)
 * with z the next normals of noise; for a blob without noise, the unclipped mean
 * (as bp_policy_forward: nothing is drawn). */
void bp_policy_sample(BpPolicy *p, const float *obs, BpNoise *noise, float *out);

/* Clamped rational tanh used by bp_policy_forward (exposed for tests). */
float bp_policy_tanh(float x);

/* Action decoding (docs/observation.md), identical to the Python decode_action:
 * stick = clip(a[0..1], -1, 1) (NaN -> 0); button bit i set iff a[2+i] > 0
 * (BP_BTN_JUMP=1, ATTACK=2, SPECIAL=4, SHIELD=8). */
void bp_action_decode(const float a[6], float *sx, float *sy, uint32_t *buttons);

#endif /* BP_POLICY_H */
