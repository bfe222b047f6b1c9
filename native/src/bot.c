/*
 * brawlpit_bot — plays BRAWLPIT matches with a .bpw policy, zero Python.
 *
 *   brawlpit_bot --server HOST:PORT --weights POLICY.bpw [--slot N] [--matches K]
 *                [--seed S] [--cpu-level L] [--repeat R] [--no-reset]
 *                [--arena ID | --new-arena] [--mode M] [--name NAME] [--trace FILE]
 *                [--deterministic]
 *   brawlpit_bot --help      (usage and one line per option on stdout, exit 0)
 *
 * Protocol v2 (docs/protocol.md): a server runs many matches ("arenas").  The
 * HELLO asks for BP_ARENA_ANY by default: the oldest arena of the server's
 * default mode with the wanted slot free, else a new one — so two bots started
 * against one server meet in one arena with no id exchanged.  --arena ID joins
 * that arena (BP_ARENA_JOIN, e.g. the id another client's WELCOME reported);
 * --new-arena always creates one (BP_ARENA_CREATE).  The HELLO leaves the
 * arena's mode, CPU, seed and speed to the server's defaults (the RESET sets
 * the CPU), except --mode realtime|fastforward|lockstep: the mode of the arena
 * it creates (and that ANY looks for).  stderr says where it landed:
 *   bot: joined HOST:PORT arena <id> slot <s> mode <m> session <hex>
 *
 * Identity: with --name NAME the bot sends IDENT(NAME, no ticket) after the
 * WELCOME and re-sends it every 100 ms until a PEER of its own slot shows
 * NAME; only then does it print its `joined` line, so a client that joins
 * after that line sees the name in its very first PEER (the line used to
 * come first: on a loaded machine a partner started on it could join before
 * the IDENT left, and see an unnamed client).  After that it re-sends the
 * IDENT every second: the server answers an IDENT that changes nothing with
 * both PEERs, so a PEER broadcast lost on the way (a full socket buffer on a
 * busy machine) is made good within a second.  With --name it also prints one stdout line per change of
 * the OTHER slot's PEER (the server sends PEERs on every join, leave, IDENT
 * and new match), before that match's result line (without --name stdout
 * carries the result lines only, as before):
 *   peer slot <s> kind <k> name <name> ticket <t>
 * k is BP_PEER_* (0 empty, 1 client, 2 CPU "cpu:L"); an empty name or ticket
 * is printed as `-`.
 *
 * Text from the network is escaped wherever the bot prints it (the PEER's
 * name and ticket, an ERROR's text): a backslash as `\\`, every byte outside
 * printable ASCII as `\xNN` (two lowercase hex digits), a field that is just
 * `-` as `\x2d` (`-` alone means empty), and in the ticket a space as `\x20`
 * (the ticket is the line's last token).  A rogue server therefore cannot
 * add a line (a fake `match ... winner ...`) or a terminal escape to what the
 * bot pool parses (brawlkit/botpool/procs.py undoes the escapes).
 *
 * HELLO -> WELCOME; then per match: reload the weights (a new blob replaces the
 * old one without a restart; SIGHUP reloads too; a reload that fails or that
 * this bot cannot play keeps the old weights), RESET(seed + k, cpu_level, nonce)
 * (skipped with --no-reset: the bot then plays whatever match the server
 * runs), and play: for every new SNAPSHOT of the current match (lockstep: each
 * one the server sends when it waits for us; realtime/fastforward: the
 * freshest after draining the socket) build the policy input the weights were
 * trained with (bp_input_from_snapshot, obs.c: the observation, and for layouts 2-3
 * also the command the bot sent last step, neutral at a match's start), run
 * bp_policy_forward, decode with bp_action_decode (docs/observation.md:
 * deterministic mean, clipped) and send one CMD {tick = snapshot tick, repeat = R}.
 *
 * --cpu-level L is the RESET's cpu_level: omitted = BP_CPU_KEEP (the server
 * keeps its CPU setting: a server started without --cpu-level keeps slot 1 for
 * a client); 0 = BP_CPU_NONE (the server drops its CPU, slot 1 waits for a
 * client); 1..8 = the built-in CPU in slot 1 (refused by the server while a
 * client holds slot 1).  Without --no-reset, when slot 1 is empty the RESET's
 * match starts in phase WAITING: the bot takes it as its match and waits until
 * it is PLAYING (a second client joins), however long that takes.
 *
 * Which match: the bot plays the newest match the server runs.  After its RESET
 * the first snapshot of a new match id is its match, whatever the phase; a
 * snapshot of an older match is stale and ignored; one of a newer match (the
 * server moved on: another client's RESET, or a re-sent RESET of ours whose
 * first answer was late) replaces the match being played, which is then
 * abandoned without a result line.  cmd_seq runs on across matches.
 *
 * Lost datagrams: after 100 ms without a new snapshot the bot re-sends the one
 * packet its state waits on, never one whose repetition changes anything:
 *   - its RESET, only while no snapshot of the RESET's match has been seen (a
 *     lost RESET, or a lost answer, is retried).  Each match's RESET carries a
 *     fresh random nonce and a retry re-sends the same datagram: the server
 *     applies a nonce once and answers a repeat with the current snapshot, so
 *     a retry never starts a second match.  Once the match is seen the RESET
 *     is not sent again;
 *   - its last CMD of the match, once it has sent one (the server treats a
 *     repeat as a retransmission and answers with a snapshot);
 *   - otherwise its HELLO (waiting for the match to start, or, with
 *     --no-reset, for the next match): the server re-sends the WELCOME, which
 *     shows it is alive.
 * Any answer (SNAPSHOT, WELCOME) resets the 10 s silence timer.
 *
 * Sampled weights (a version-3 blob, `export --sampled`) play the sampled
 * policy: bp_policy_sample with a stream seeded S + k at the start of match k
 * (the RESET's seed), one draw per decision, so a seeded match replays exactly
 * (NoiseStream in Python draws the same numbers).  --deterministic plays the
 * mean of any blob; a version-2 blob always plays its mean.
 *
 * The weights say how the policy was trained (docs/bpw.md): R defaults to the
 * blob's action_repeat (4 for a version-1 blob); --repeat R overrides it, with
 * a warning on stderr when it differs.  A reload that changes the action
 * repeat takes effect from the next match.  The bot builds the input layouts
 * obs.c knows (bp_input_dim: 1 = the BP_OBS_DIM-value observation, 2 = it plus
 * the player's previous command and own state, BP_INPUT_SELF_DIM values, 3 = layout 2
 * plus the match clock, BP_INPUT_CLOCK_DIM values) with BP_ACT_DIM outputs, and
 * refuses any other layout or size.
 *
 * stdout (flushed per line): one line per finished match, `match <id> winner
 * <w> ticks <t>`, and the `peer ...` lines above.
 * stderr, on every (re)load of the weights:
 *   weights <path>: bpw v<version>, input layout <L>, action repeat <R>, reward <name|unknown>,
 *   <deterministic|sampled>
 * --trace FILE writes one line per step: `<match> <tick> <sx> <sy> <buttons>
 * <in0> .. <inN-1>` (%.9g floats; the policy input of the weights' layout) so a
 * test can replay the inputs through the Python policy and compare the actions
 * step by step.
 * Exit: 0 after K matches (sends BYE) or after --help; 1 when the weights
 * cannot be loaded at start, or the server refuses HELLO (ERROR: e.g. no such
 * arena, the slot taken, the server's arena table full), a RESET (ERROR,
 * e.g. --cpu-level 1..8 while a client holds slot 1) or the --name IDENT
 * (ERROR); 2 on a usage error, an unresolvable server, or weights this bot
 * cannot play (input layout / sizes); 3 when the server is silent for 10 s.
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "brawlpit.h"
#include "obs.h"
#include "policy.h"

#define RESEND_S 0.1  /* re-send the awaited packet after this long without progress */
#define SILENT_S 10.0 /* give up when the server has said nothing for this long */
#define PEER_REFRESH_S 1.0 /* --name: re-send the confirmed IDENT (both PEERs come back) */

static volatile sig_atomic_t g_hup = 0;
static volatile sig_atomic_t g_stop = 0;
static void on_hup(int s) { (void)s; g_hup = 1; }
static void on_term(int s) { (void)s; g_stop = 1; }

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct {
    const char *server, *weights, *trace_path;
    int want_slot, matches, cpu_level, do_reset;
    int repeat_override; /* --repeat R, 0 = the blob's action_repeat */
    unsigned long seed;
    int arena_op;      /* BP_ARENA_ANY (default), _JOIN (--arena), _CREATE (--new-arena) */
    uint32_t arena_id; /* --arena ID */
    int mode;          /* --mode: BP_MODE_*, BP_MODE_DEFAULT = the server's */
    const char *name;  /* --name, or NULL (no IDENT) */
    int deterministic; /* --deterministic: the mean even of a sampled blob */
} Args;

/* one datagram as sent, kept for re-sending */
typedef struct {
    uint8_t buf[sizeof(NetHeader) + sizeof(NetIdent)]; /* the largest packet the bot sends */
    size_t len;
} Packet;

typedef struct {
    Args a;
    BpPolicy *pol;
    FILE *trace;
    NetWelcome wel;
    Packet hello;          /* our HELLO: re-sending it only re-sends the WELCOME */
    Packet retry;          /* what a stall re-sends (see "Lost datagrams" above) */
    int repeat;            /* action repeat of the match being played */
    BpNoise noise;         /* the sampling stream, seeded S + k at match k's start */
    uint64_t match_seed;   /* S + k: seeds the stream and picks a mixture's component */
    BpCommand prev;        /* the command sent last step (policy input layouts 2, 3) */
    uint32_t match_id, cmd_seq;
    uint32_t nonce_rng;    /* xorshift32 state of the HELLO / RESET nonces (random start) */
    double last_rx, last_tx;
    Packet ident;          /* our IDENT (--name), re-sent until a PEER shows the name */
    int ident_pending;
    double ident_tx;
    int have_other;        /* the other slot's last PEER was printed */
    NetPeer other;
    uint8_t early_snap[sizeof(SnapshotPacket)]; /* the newest SNAPSHOT seen while join() */
    int have_early;                             /* waited for the IDENT: play_match's first */
} Bot;

/* ------------------------------------------------------------ packets */

/* xorshift32 (the generator of sim.h; the bot does not link the sim) */
static uint32_t xorshift32(uint32_t *st)
{
    uint32_t x = *st;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *st = x;
    return x;
}

/* a random start for the nonces: /dev/urandom, else the clock and the pid (two
 * bots on one arena must not send the same RESET nonce) */
static uint32_t nonce_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint32_t s = (uint32_t)ts.tv_nsec ^ ((uint32_t)ts.tv_sec << 11) ^ ((uint32_t)getpid() << 16);
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        uint32_t r = 0;
        if (read(fd, &r, sizeof r) == (ssize_t)sizeof r) {
            s ^= r;
        }
        close(fd);
    }
    return s ? s : 1u; /* xorshift32 must never hold 0 */
}

/* the next nonce (HELLO, each match's RESET) */
static uint32_t next_nonce(Bot *b)
{
    if (!b->nonce_rng) {
        b->nonce_rng = nonce_seed();
    }
    return xorshift32(&b->nonce_rng);
}

static int g_sock = -1;
static uint32_t g_seq = 0;

static void send_packet(const Packet *p)
{
    if (p->len && send(g_sock, p->buf, p->len, 0) < 0 && errno != ECONNREFUSED) {
        perror("send");
    }
}

/* build, send and return one datagram */
static Packet send_pkt(uint8_t type, uint32_t tick, const void *payload, size_t plen)
{
    Packet p;
    NetHeader h = {BP_MAGIC, BP_PROTO_VERSION, type, g_seq++, tick};
    memcpy(p.buf, &h, sizeof h);
    memcpy(p.buf + sizeof h, payload, plen);
    p.len = sizeof h + plen;
    send_packet(&p);
    return p;
}

/* re-send b->retry when nothing moved for RESEND_S */
static void resend_if_stalled(Bot *b, double t)
{
    if (t - b->last_tx > RESEND_S) {
        send_packet(&b->retry);
        b->last_tx = t;
    }
}

/* receive one datagram (wait up to timeout_ms); returns length or 0 */
static size_t recv_pkt(uint8_t *buf, size_t cap, int timeout_ms)
{
    struct pollfd pfd = {g_sock, POLLIN, 0};
    if (timeout_ms > 0 && poll(&pfd, 1, timeout_ms) <= 0) {
        return 0;
    }
    ssize_t n = recv(g_sock, buf, cap, MSG_DONTWAIT);
    return n > 0 ? (size_t)n : 0;
}

static int is_type(const uint8_t *buf, size_t n, uint8_t type, size_t want)
{
    NetHeader h;
    if (n != want || n < sizeof h) {
        return 0;
    }
    memcpy(&h, buf, sizeof h);
    return h.magic == BP_MAGIC && h.version == BP_PROTO_VERSION && h.type == type;
}

/* Printable text of the n-byte network field f (up to its first NUL) into out
 * (cap bytes, ESC_CAP(n) always enough): printable ASCII as is, a backslash
 * as \\, every other byte as \xNN, with esc_space a space as \x20; an empty
 * field as "-" and a field that is just "-" as \x2d.  Returns out.  What the
 * bot prints from the network goes through here: one line stays one line. */
#define ESC_CAP(n) (4 * (n) + 1)
static const char *escape_field(const char *f, size_t n, int esc_space, char *out, size_t cap)
{
    size_t len = 0, o = 0;
    while (len < n && f[len]) {
        len++;
    }
    if (cap < 2) {
        if (cap) {
            out[0] = 0;
        }
        return out;
    }
    if (len == 0) {
        memcpy(out, "-", 2);
        return out;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)f[i];
        char one[5];
        size_t k = 1;
        if (ch == '\\') {
            memcpy(one, "\\\\", 2);
            k = 2;
        } else if (ch < 0x20 || ch > 0x7e || (esc_space && ch == ' ') || (len == 1 && ch == '-')) {
            snprintf(one, sizeof one, "\\x%02x", ch);
            k = 4;
        } else {
            one[0] = (char)ch;
        }
        if (o + k >= cap) {
            break; /* cap too small: cut at a whole escape, never mid-way */
        }
        memcpy(out + o, one, k);
        o += k;
    }
    out[o] = 0;
    return out;
}

/* an ERROR's code and escaped text on stderr: `bot: <what>: <code> <text>` */
static void print_error(const char *what, const NetError *e)
{
    char text[ESC_CAP(BP_ERROR_TEXT_LEN)];
    fprintf(stderr, "bot: %s: %u %s\n", what, e->code,
            escape_field(e->text, sizeof e->text, 0, text, sizeof text));
}

/* the NetError of an ERROR datagram (text NUL-terminated): 1, or 0 if buf is none */
static int as_error(const uint8_t *buf, size_t n, NetError *e)
{
    if (!is_type(buf, n, BP_PKT_ERROR, sizeof(NetHeader) + sizeof *e)) {
        return 0;
    }
    memcpy(e, buf + sizeof(NetHeader), sizeof *e);
    e->text[BP_ERROR_TEXT_LEN - 1] = 0;
    return 1;
}

/* ------------------------------------------------------------ weights */

/* these weights play sampled: a blob with noise, and no --deterministic */
static int plays_sampled(const Args *a, const BpPolicy *p)
{
    return bp_policy_noise_std(p) != NULL && !a->deterministic;
}

/* action repeat for these weights: --repeat, else what they were trained with */
static int weights_repeat(const Args *a, const BpPolicy *p)
{
    return a->repeat_override ? a->repeat_override : bp_policy_action_repeat(p);
}

/* 0 when this bot can play p (an input layout obs.c builds, matching sizes);
 * else prints why (naming the layout / dims, then `tail`) and returns -1 */
static int playable(const char *path, const BpPolicy *p, const char *tail)
{
    int layout = bp_policy_input_layout(p), dim = bp_input_dim(layout);
    if (dim == 0) {
        fprintf(stderr,
                "bot: weights %s refused: input layout %d is not one this bot can build "
                "(it builds input layouts %d, %d and %d: the %d-value observation, it plus "
                "the player's own state, %d values, and that plus the match clock, %d)%s\n",
                path, layout, BP_INPUT_LAYOUT_OBS, BP_INPUT_LAYOUT_SELF, BP_INPUT_LAYOUT_CLOCK,
                BP_OBS_DIM, BP_INPUT_SELF_DIM, BP_INPUT_CLOCK_DIM, tail);
        return -1;
    }
    if (bp_policy_obs_dim(p) != dim || bp_policy_act_dim(p) != BP_ACT_DIM) {
        fprintf(stderr,
                "bot: weights %s refused: obs_dim %d / act_dim %d, but input layout %d has "
                "%d inputs and the bot sends %d action values%s\n",
                path, bp_policy_obs_dim(p), bp_policy_act_dim(p), layout, dim, BP_ACT_DIM,
                tail);
        return -1;
    }
    return 0;
}

static void print_weights(const Args *a, const BpPolicy *p)
{
    const char *reward = bp_policy_reward(p);
    int trained = bp_policy_action_repeat(p);
    fprintf(stderr, "weights %s: bpw v%d, input layout %d, action repeat %d, reward %s, %s",
            a->weights, bp_policy_version(p), bp_policy_input_layout(p), trained,
            reward[0] ? reward : "unknown", plays_sampled(a, p) ? "sampled" : "deterministic");
    if (bp_policy_mix_count(p) > 1) {
        fprintf(stderr, ", a mixture of %d (one per match)", bp_policy_mix_count(p));
    }
    fputc('\n', stderr);
    if (a->repeat_override && a->repeat_override != trained) {
        fprintf(stderr,
                "bot: warning: --repeat %d overrides action repeat %d the weights were "
                "trained with\n",
                a->repeat_override, trained);
    }
}

/* Load a->weights.  Returns the new policy (the old one freed), or NULL with
 * *why = 1 (cannot load) / 2 (this bot cannot play it); the old one is then
 * kept by the caller. */
static BpPolicy *load_weights(const Args *a, int have_old, int *why)
{
    const char *tail = have_old ? "; keeping the previous weights" : "";
    char err[256];
    BpPolicy *p = bp_policy_load_file(a->weights, err, sizeof err);
    if (!p) {
        fprintf(stderr, "bot: weights %s refused (%s)%s\n", a->weights, err, tail);
        *why = 1;
        return NULL;
    }
    if (playable(a->weights, p, tail) != 0) {
        bp_policy_free(p);
        *why = 2;
        return NULL;
    }
    print_weights(a, p);
    return p;
}

/* (re)load between or during matches (a refused blob keeps the old weights).
 * The new weights play at once; their action repeat applies from the next
 * match (main sets b->repeat at each match start). */
static void reload(Bot *b, int mid_match)
{
    int why = 0;
    BpPolicy *p = load_weights(&b->a, b->pol != NULL, &why);
    if (!p) {
        return;
    }
    bp_policy_free(b->pol);
    b->pol = p;
    bp_policy_select(b->pol, b->match_seed); /* a mixture: this match's component */
    if (mid_match && weights_repeat(&b->a, p) != b->repeat) {
        fprintf(stderr, "bot: action repeat %d takes effect from the next match (this one keeps %d)\n",
                weights_repeat(&b->a, p), b->repeat);
    }
}

/* ------------------------------------------------------------ set-up */

#define ARGS_HELP (-1) /* parse_args: --help was printed */

static const char USAGE[] =
    "usage: brawlpit_bot --server HOST:PORT --weights POLICY.bpw [--slot N]\n"
    "       [--matches K] [--seed S] [--cpu-level L] [--repeat R] [--no-reset]\n"
    "       [--arena ID | --new-arena] [--mode M] [--name NAME] [--trace FILE]\n"
    "       [--deterministic]\n";

static int usage(void)
{
    fputs(USAGE, stderr);
    return 2;
}

static int help(void)
{
    fputs(USAGE, stdout);
    fputs("Plays BRAWLPIT matches on a brawlpit_server with a .bpw policy, no Python.\n"
          "  --server HOST:PORT  the server's UDP address (required)\n"
          "  --weights FILE      the .bpw policy, any encoding; reloaded at every match\n"
          "                      and on SIGHUP (required)\n"
          "  --slot N            ask for slot 0 or 1 (default: the first free slot)\n"
          "  --matches K         play K matches, then send BYE and exit (default 1)\n"
          "  --seed S            seed of the first RESET; match k uses S + k (default 1)\n"
          "  --cpu-level L       CPU of the RESET: 1..8 the built-in CPU in slot 1, 0 none\n"
          "                      (slot 1 waits for a client); omitted: the server keeps\n"
          "                      its setting\n"
          "  --repeat R          ticks per command, 1..64 (default: the blob's action repeat)\n"
          "  --no-reset          send no RESET: play the matches the server runs\n"
          "  --arena ID          join that arena (default: the oldest arena with the slot\n"
          "                      free, else a new one)\n"
          "  --new-arena         always create a new arena\n"
          "  --mode M            mode of the arena it creates (and ANY looks for): lockstep,\n"
          "                      fastforward or realtime (default: the server's --mode)\n"
          "  --name NAME         player name sent in IDENT (1..31 printable ASCII characters)\n"
          "  --trace FILE        one line per step: match, tick, action, observation\n"
          "  --deterministic     play the mean of a sampled (version-3) blob; without it\n"
          "                      such a blob plays sampled, match k's noise seeded S + k\n"
          "  -h, --help          print this help and exit\n",
          stdout);
    return ARGS_HELP;
}

/* v as a whole decimal integer in [lo, hi] into *out: 0, or -1 */
static int parse_int(const char *v, long lo, long hi, int *out)
{
    char *end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi) {
        return -1;
    }
    *out = (int)x;
    return 0;
}

/* one option k with its value v: 0, or -1 when unknown or invalid */
static int parse_option(Args *a, const char *k, const char *v, int *repeat)
{
    if (!strcmp(k, "--server")) {
        a->server = v;
    } else if (!strcmp(k, "--weights")) {
        a->weights = v;
    } else if (!strcmp(k, "--name")) {
        size_t n = strlen(v);
        if (n == 0 || n >= BP_NAME_LEN) {
            return -1;
        }
        for (size_t i = 0; i < n; i++) {
            if ((unsigned char)v[i] < 0x20 || (unsigned char)v[i] > 0x7e) {
                return -1;
            }
        }
        a->name = v;
    } else if (!strcmp(k, "--mode")) {
        if (!strcmp(v, "lockstep")) {
            a->mode = BP_MODE_LOCKSTEP;
        } else if (!strcmp(v, "fastforward")) {
            a->mode = BP_MODE_FASTFORWARD;
        } else if (!strcmp(v, "realtime")) {
            a->mode = BP_MODE_REALTIME;
        } else {
            return -1;
        }
    } else if (!strcmp(k, "--trace")) {
        a->trace_path = v;
    } else if (!strcmp(k, "--seed")) {
        char *end = NULL;
        a->seed = strtoul(v, &end, 10);
        return (end == v || *end) ? -1 : 0;
    } else if (!strcmp(k, "--slot")) {
        int s;
        if (parse_int(v, 0, BP_SLOT_ANY, &s) != 0 || (s > 1 && s != BP_SLOT_ANY)) {
            return -1;
        }
        a->want_slot = s;
    } else if (!strcmp(k, "--matches")) {
        return parse_int(v, 1, 1000000000L, &a->matches);
    } else if (!strcmp(k, "--cpu-level")) {
        int l;
        if (parse_int(v, 0, BP_CPU_KEEP, &l) != 0 || (l > BP_CPU_LEVEL_MAX && l != BP_CPU_KEEP)) {
            return -1;
        }
        a->cpu_level = l;
    } else if (!strcmp(k, "--repeat")) {
        return parse_int(v, 1, BP_MAX_REPEAT, repeat);
    } else if (!strcmp(k, "--arena")) {
        char *end = NULL;
        errno = 0;
        unsigned long id = strtoul(v, &end, 10);
        if (end == v || *end || errno || v[0] == '-' || id == 0 || id > UINT32_MAX) {
            return -1;
        }
        a->arena_op = BP_ARENA_JOIN;
        a->arena_id = (uint32_t)id;
    } else {
        return -1;
    }
    return 0;
}

/* 0, ARGS_HELP (after printing the help), or usage() */
static int parse_args(int argc, char **argv, Args *a)
{
    *a = (Args){NULL, NULL, NULL, BP_SLOT_ANY, 1, BP_CPU_KEEP, 1, 0, 1, BP_ARENA_ANY, 0,
                BP_MODE_DEFAULT, NULL, 0};
    int repeat = 0, new_arena = 0;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        if (!strcmp(k, "-h") || !strcmp(k, "--help")) {
            return help();
        }
        if (!strcmp(k, "--no-reset")) {
            a->do_reset = 0;
            continue;
        }
        if (!strcmp(k, "--deterministic")) {
            a->deterministic = 1;
            continue;
        }
        if (!strcmp(k, "--new-arena")) {
            new_arena = 1;
            continue;
        }
        if (i + 1 >= argc || parse_option(a, k, argv[i + 1], &repeat) != 0) {
            return usage();
        }
        i++;
    }
    if (!a->server || !a->weights || (new_arena && a->arena_op == BP_ARENA_JOIN)) {
        return usage();
    }
    if (new_arena) {
        a->arena_op = BP_ARENA_CREATE;
    }
    a->repeat_override = repeat;
    return 0;
}

/* UDP socket connected to HOST:PORT; 0, or 2 */
static int connect_server(const char *server)
{
    char host[256];
    const char *colon = strrchr(server, ':');
    if (!colon || (size_t)(colon - server) >= sizeof host) {
        return usage();
    }
    memcpy(host, server, (size_t)(colon - server));
    host[colon - server] = 0;
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_DGRAM;
    if (getaddrinfo(host, colon + 1, &hints, &ai) != 0 || !ai) {
        fprintf(stderr, "bot: cannot resolve %s\n", server);
        return 2;
    }
    g_sock = socket(AF_INET, SOCK_DGRAM, 0);
    if (g_sock < 0 || connect(g_sock, ai->ai_addr, ai->ai_addrlen) < 0) {
        perror("bot: socket/connect");
        return 2;
    }
    freeaddrinfo(ai);
    return 0;
}

static void install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_hup;
    sigaction(SIGHUP, &sa, NULL);
    sa.sa_handler = on_term;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static int await_ident(Bot *b);

/* HELLO until our WELCOME (into b->wel), then with --name until the server
 * shows our name (await_ident); only then the `joined` line.  0, 1 (refused)
 * or 3 (silent) */
static int join(Bot *b)
{
    uint8_t buf[512];
    /* mode, CPU, seed and speed: the server's defaults (the RESET sets CPU and seed) */
    NetHello hello = {(uint8_t)b->a.want_slot, (uint8_t)b->a.arena_op, (uint8_t)b->a.mode,
                      BP_CPU_KEEP, next_nonce(b), b->a.arena_id, 0, 0.0f};
    b->retry = b->hello = send_pkt(BP_PKT_HELLO, 0, &hello, sizeof hello);
    b->last_rx = b->last_tx = now_s();
    for (;;) {
        size_t n = recv_pkt(buf, sizeof buf, 100);
        NetError e;
        if (is_type(buf, n, BP_PKT_WELCOME, sizeof(NetHeader) + sizeof b->wel)) {
            memcpy(&b->wel, buf + sizeof(NetHeader), sizeof b->wel);
            if (b->wel.nonce == hello.nonce) {
                break;
            }
        } else if (as_error(buf, n, &e)) {
            print_error("server refused HELLO", &e);
            return 1;
        }
        double t = now_s();
        if (t - b->last_rx > SILENT_S || g_stop) {
            fprintf(stderr, "bot: no WELCOME from %s\n", b->a.server);
            return 3;
        }
        resend_if_stalled(b, t);
    }
    b->match_id = b->wel.match_id;
    if (b->a.name) {
        NetIdent id;
        memset(&id, 0, sizeof id);
        id.session = b->wel.session;
        memcpy(id.name, b->a.name, strlen(b->a.name)); /* parse_args: < BP_NAME_LEN */
        b->ident = send_pkt(BP_PKT_IDENT, 0, &id, sizeof id);
        b->ident_pending = 1;
        b->ident_tx = now_s();
        int rc = await_ident(b);
        if (rc != 0 || g_stop) {
            return rc;
        }
    }
    fprintf(stderr, "bot: joined %s arena %u slot %d mode %u session %08x\n", b->a.server,
            b->wel.arena_id, b->wel.slot, b->wel.mode, b->wel.session);
    return 0;
}

/* ------------------------------------------------------------ one match */

enum { RX_SNAPSHOT = 1, RX_WELCOME = 2, RX_ERROR = 4, RX_PEER = 8 };

/* one PEER: confirms our IDENT (own slot), or a line on stdout when the other
 * slot's occupant changed */
static void on_peer(Bot *b, const uint8_t *buf)
{
    NetPeer p;
    memcpy(&p, buf + sizeof(NetHeader), sizeof p);
    p.name[BP_NAME_LEN - 1] = 0;
    p.ticket[BP_TICKET_LEN - 1] = 0;
    if (p.arena_id != b->wel.arena_id || p.slot > 1) {
        return;
    }
    if (p.slot == b->wel.slot) {
        if (b->ident_pending && p.kind == BP_PEER_CLIENT && !strcmp(p.name, b->a.name)) {
            b->ident_pending = 0;
        }
        return;
    }
    if (!b->a.name) {
        return;
    }
    if (b->have_other && p.kind == b->other.kind && !strcmp(p.name, b->other.name) &&
        !strcmp(p.ticket, b->other.ticket)) {
        return;
    }
    b->have_other = 1;
    b->other = p;
    char name[ESC_CAP(BP_NAME_LEN)], ticket[ESC_CAP(BP_TICKET_LEN)];
    printf("peer slot %u kind %u name %s ticket %s\n", p.slot, p.kind,
           escape_field(p.name, sizeof p.name, 0, name, sizeof name),
           escape_field(p.ticket, sizeof p.ticket, 1, ticket, sizeof ticket));
    fflush(stdout);
}

/* --name: re-send the IDENT every RESEND_S until a PEER of our slot shows the
 * name, then every PEER_REFRESH_S (its answer, both PEERs, replaces any PEER
 * broadcast that was lost) */
static void ident_refresh(Bot *b, double t)
{
    if (b->a.name && t - b->ident_tx > (b->ident_pending ? RESEND_S : PEER_REFRESH_S)) {
        send_packet(&b->ident);
        b->ident_tx = t;
    }
}

/* Drain the socket (waiting up to 50 ms for the first datagram): the freshest
 * SNAPSHOT into snap, an ERROR into *err.  Returns the RX_* bits of what came
 * (RX_WELCOME: the answer to a HELLO probe, proof that the server is alive). */
static int recv_all(Bot *b, uint8_t snap[sizeof(SnapshotPacket)], NetError *err)
{
    uint8_t buf[512];
    int got = 0;
    size_t n = recv_pkt(buf, sizeof buf, 50);
    while (n) {
        if (is_type(buf, n, BP_PKT_SNAPSHOT, sizeof(SnapshotPacket))) {
            memcpy(snap, buf, sizeof(SnapshotPacket));
            got |= RX_SNAPSHOT;
        } else if (is_type(buf, n, BP_PKT_WELCOME, sizeof(NetHeader) + sizeof(NetWelcome))) {
            got |= RX_WELCOME;
        } else if (is_type(buf, n, BP_PKT_PEER, sizeof(NetHeader) + sizeof(NetPeer))) {
            on_peer(b, buf);
            got |= RX_PEER;
        } else if (as_error(buf, n, err)) {
            got |= RX_ERROR;
        }
        n = recv_pkt(buf, sizeof buf, 0);
    }
    return got;
}

/* --name, after the WELCOME: until a PEER of our slot shows the name (the
 * IDENT re-sent every RESEND_S), the other slot's PEERs printed as they come
 * and the newest SNAPSHOT kept for play_match (in lockstep the server may not
 * send another).  0 (confirmed, or g_stop), 1 (the server answered ERROR: it
 * refused the name) or 3 (silent for SILENT_S) */
static int await_ident(Bot *b)
{
    b->last_rx = now_s();
    while (b->ident_pending && !g_stop) {
        uint8_t snap[sizeof(SnapshotPacket)];
        NetError err;
        int rx = recv_all(b, snap, &err);
        double t = now_s();
        if (rx) {
            b->last_rx = t;
        }
        if (rx & RX_SNAPSHOT) {
            memcpy(b->early_snap, snap, sizeof snap);
            b->have_early = 1;
        }
        if (rx & RX_ERROR) {
            print_error("server refused IDENT", &err);
            return 1;
        }
        if (t - b->last_rx > SILENT_S) {
            fprintf(stderr, "bot: no PEER with our name from %s\n", b->a.server);
            return 3;
        }
        if (b->ident_pending) {
            ident_refresh(b, t);
        }
    }
    return 0;
}

static void trace_step(Bot *b, uint32_t tick, float sx, float sy, uint32_t buttons,
                       const float *in, int dim)
{
    fprintf(b->trace, "%u %u %.9g %.9g %u", b->match_id, tick, (double)sx, (double)sy, buttons);
    for (int i = 0; i < dim; i++) {
        fprintf(b->trace, " %.9g", (double)in[i]);
    }
    fputc('\n', b->trace);
}

/* policy input -> policy -> CMD for the snapshot of tick `tick` (it becomes the
 * packet a stall re-sends, and the previous command of the next input); 1 if
 * sent, 0 if the snapshot was rejected */
static int act(Bot *b, const uint8_t snap[sizeof(SnapshotPacket)], uint32_t tick, double t)
{
    float in[BP_INPUT_MAX_DIM], a[BP_ACT_DIM], sx, sy;
    uint32_t buttons;
    const int layout = bp_policy_input_layout(b->pol);
    int orc = bp_input_from_snapshot(snap, sizeof(SnapshotPacket), b->wel.slot, layout, &b->prev, in);
    if (orc != BP_OBS_OK) {
        fprintf(stderr, "bot: snapshot rejected: %s\n", bp_obs_strerror(orc));
        return 0;
    }
    if (plays_sampled(&b->a, b->pol)) {
        bp_policy_sample(b->pol, in, &b->noise, a);
    } else {
        bp_policy_forward(b->pol, in, a);
    }
    bp_action_decode(a, &sx, &sy, &buttons);
    b->prev = (BpCommand){sx, sy, buttons};
    UserCmd cmd = {b->wel.session, tick, ++b->cmd_seq, sx, sy, buttons, b->wel.slot,
                   (uint8_t)b->repeat, 0};
    b->retry = send_pkt(BP_PKT_CMD, tick, &cmd, sizeof cmd);
    b->last_tx = t;
    if (b->trace) {
        trace_step(b, tick, sx, sy, buttons, in, bp_input_dim(layout));
    }
    return 1;
}

/* RESET(seed + played, cpu_level, a fresh nonce); the same datagram is re-sent
 * on a stall until its match is seen (the server applies a nonce once) */
static void send_reset(Bot *b, int played)
{
    NetReset rs = {b->wel.session, (uint32_t)(b->a.seed + (unsigned long)played), next_nonce(b),
                   (uint8_t)b->a.cpu_level, {0, 0, 0}};
    b->retry = send_pkt(BP_PKT_RESET, 0, &rs, sizeof rs);
    b->last_tx = now_s();
}

/* progress through one match */
typedef struct {
    int played;         /* matches finished before this one */
    uint32_t old_match; /* the match the server ran before */
    int started;        /* b->match_id is this match (a snapshot of it was seen) */
    uint32_t next_tick; /* first tick not yet covered by our commands */
} Match;

/* match id a is newer than b (ids are serial numbers; they may wrap) */
static int newer(uint32_t a, uint32_t b) { return (int32_t)(a - b) > 0; }

/* Is this snapshot the match we are waiting for?  With RESET: a new match id,
 * in any phase (WAITING while slot 1 is empty); without: any playing match (a
 * new one after the first). */
static int is_fresh_match(const Bot *b, const SnapshotPacket *sp, const Match *m)
{
    if (b->a.do_reset) {
        return sp->match.match_id != m->old_match;
    }
    return sp->match.phase == BP_PHASE_PLAYING &&
           (m->played == 0 || sp->match.match_id != m->old_match);
}

/* take match `id` as ours, from its start.  From now on a stall re-sends the
 * HELLO probe (until our first CMD), never the RESET: each one starts yet
 * another match. */
static void begin_match(Bot *b, Match *m, uint32_t id)
{
    if (m->started) {
        fprintf(stderr, "bot: match %u replaced by match %u; playing that one\n", b->match_id, id);
    }
    m->started = 1;
    m->next_tick = 0;
    b->match_id = id;
    b->prev = (BpCommand){0.0f, 0.0f, 0}; /* a match starts from the neutral command */
    b->retry = b->hello;
}

/* One SNAPSHOT of the match being waited for or played: 1 when it reports the
 * end of our match (the result line is printed), else 0. */
static int on_snapshot(Bot *b, Match *m, const uint8_t snap[sizeof(SnapshotPacket)], double t)
{
    SnapshotPacket sp;
    memcpy(&sp, snap, sizeof sp);
    if (!m->started ? is_fresh_match(b, &sp, m) : newer(sp.match.match_id, b->match_id)) {
        begin_match(b, m, sp.match.match_id);
    }
    if (!m->started) {
        resend_if_stalled(b, t); /* our RESET may be lost: re-send it */
        return 0;
    }
    if (sp.match.match_id != b->match_id) {
        return 0; /* stale packet of an older match */
    }
    if (sp.match.phase == BP_PHASE_OVER) {
        printf("match %u winner %u ticks %u\n", b->match_id, sp.match.winner, sp.hdr.tick);
        fflush(stdout);
        return 1;
    }
    if (sp.match.phase != BP_PHASE_PLAYING) {
        resend_if_stalled(b, t); /* WAITING for a player: probe, never RESET */
        return 0;
    }
    if (sp.hdr.tick < m->next_tick && b->wel.mode == BP_MODE_LOCKSTEP) {
        return 0; /* a duplicate answer to a re-sent CMD: state not advanced yet */
    }
    if (act(b, snap, sp.hdr.tick, t)) {
        m->next_tick = sp.hdr.tick + (uint32_t)b->repeat;
    }
    return 0;
}

/* Play one match from RESET (or the next match) to its end.  Returns 0 when
 * it ended, 1 when the server refused the RESET, 3 when the server went
 * silent; g_stop ends it early (0). */
static int play_match(Bot *b, int played)
{
    Match m = {played, b->match_id, 0, 0};
    if (b->a.do_reset) {
        send_reset(b, played);
    } else {
        b->retry = b->hello; /* probe until the next match runs */
    }
    b->last_rx = now_s();
    while (!g_stop) {
        if (g_hup) {
            g_hup = 0;
            reload(b, 1);
        }
        uint8_t snap[sizeof(SnapshotPacket)];
        NetError err;
        int rx = recv_all(b, snap, &err);
        if (b->have_early && !(rx & RX_SNAPSHOT)) { /* seen while join() awaited the IDENT */
            memcpy(snap, b->early_snap, sizeof snap);
            rx |= RX_SNAPSHOT;
        }
        b->have_early = 0;
        double t = now_s();
        if (rx) {
            b->last_rx = t;
        }
        ident_refresh(b, t);
        if ((rx & RX_ERROR) && b->a.do_reset && !m.started) {
            print_error("server refused RESET", &err);
            g_stop = 1;
            return 1;
        }
        if (rx & RX_SNAPSHOT) {
            if (on_snapshot(b, &m, snap, t)) {
                return 0;
            }
        } else if (t - b->last_rx > SILENT_S) {
            fprintf(stderr, "bot: server silent for 10 s\n");
            g_stop = 1;
            return 3;
        } else {
            resend_if_stalled(b, t);
        }
    }
    return 0;
}

/* ------------------------------------------------------------ main */

int main(int argc, char **argv)
{
    Bot b;
    memset(&b, 0, sizeof b);
    int rc = parse_args(argc, argv, &b.a);
    if (rc != 0) {
        return rc == ARGS_HELP ? 0 : rc;
    }
    if ((rc = connect_server(b.a.server)) != 0) {
        return rc;
    }
    b.trace = b.a.trace_path ? fopen(b.a.trace_path, "w") : NULL;
    if (b.a.trace_path && !b.trace) {
        perror(b.a.trace_path);
        return 2;
    }
    install_signals();
    int why = 0;
    if (!(b.pol = load_weights(&b.a, 0, &why))) {
        return why;
    }
    if ((rc = join(&b)) != 0) {
        return rc;
    }
    int played = 0;
    while (played < b.a.matches && !g_stop) {
        /* match start: reload the weights (just loaded for the first one); a
         * new action repeat applies from here */
        if (played > 0 || g_hup) {
            g_hup = 0;
            reload(&b, 0);
        }
        b.repeat = weights_repeat(&b.a, b.pol);
        b.match_seed = (uint64_t)(b.a.seed + (unsigned long)played);
        bp_noise_seed(&b.noise, b.match_seed);
        int comp = bp_policy_select(b.pol, b.match_seed);
        if (bp_policy_mix_count(b.pol) > 1) {
            fprintf(stderr, "bot: match %d (seed %llu) plays mixture component %d\n", played,
                    (unsigned long long)b.match_seed, comp);
        }
        rc = play_match(&b, played);
        if (!g_stop) {
            played++;
        }
    }
    NetBye bye = {b.wel.session};
    send_pkt(BP_PKT_BYE, 0, &bye, sizeof bye);
    if (b.trace) {
        fclose(b.trace);
    }
    bp_policy_free(b.pol);
    close(g_sock);
    return rc;
}
