/*
 * brawlpit_bot — plays BRAWLPIT matches with a .bpw policy, zero Python.
 *
 *   brawlpit_bot --server HOST:PORT --weights POLICY.bpw [--slot N] [--matches K]
 *                [--seed S] [--cpu-level L] [--repeat R] [--no-reset] [--trace FILE]
 *
 * HELLO -> WELCOME; then per match: reload the weights (a new blob replaces the
 * old one without a restart; SIGHUP reloads too; a reload that fails or that
 * this bot cannot play keeps the old weights), RESET(seed + k, cpu_level)
 * (skipped with --no-reset: the bot then plays whatever match the server
 * runs), and play: for every new SNAPSHOT of the current match (lockstep: each
 * one the server sends when it waits for us; realtime/fastforward: the
 * freshest after draining the socket) build the observation with
 * bp_obs_from_snapshot (obs.c), run bp_policy_forward, decode with
 * bp_action_decode (docs/observation.md: deterministic mean, clipped) and send
 * one CMD {tick = snapshot tick, repeat = R}.  Lost datagrams: after 100 ms
 * without a new snapshot the last CMD/RESET/HELLO is re-sent.
 *
 * The weights say how the policy was trained (docs/bpw.md): R defaults to the
 * blob's action_repeat (4 for a version-1 blob); --repeat R overrides it, with
 * a warning on stderr when it differs.  A reload that changes the action
 * repeat takes effect from the next match.  The bot builds input layout
 * BP_INPUT_LAYOUT_OBS only (BP_OBS_DIM inputs, BP_ACT_DIM outputs) and refuses
 * any other layout or size.
 *
 * stdout: one line per finished match, `match <id> winner <w> ticks <t>`.
 * stderr, on every (re)load of the weights:
 *   weights <path>: bpw v<version>, input layout <L>, action repeat <R>, reward <name|unknown>
 * --trace FILE writes one line per step: `<match> <tick> <sx> <sy> <buttons>
 * <obs0> .. <obs30>` (%.9g floats) so a test can replay the observations
 * through the Python policy and compare the actions step by step.
 * Exit: 0 after K matches (sends BYE); 1 when the weights cannot be loaded at
 * start or the server refuses HELLO; 2 on a usage error, an unresolvable
 * server, or weights this bot cannot play (input layout / sizes); 3 when the
 * server is silent for 10 s.
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <errno.h>
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

#define RESEND_S 0.1  /* re-send the last packet after this long without progress */
#define SILENT_S 10.0 /* give up when the server has said nothing for this long */

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
} Args;

typedef struct {
    Args a;
    BpPolicy *pol;
    FILE *trace;
    NetWelcome wel;
    int repeat;            /* action repeat of the match being played */
    uint32_t match_id, cmd_seq;
    double last_rx, last_tx;
} Bot;

/* ------------------------------------------------------------ packets */

static int g_sock = -1;
static uint32_t g_seq = 0;
static uint8_t g_last[64];
static size_t g_last_len = 0;

static void send_pkt(uint8_t type, uint32_t tick, const void *payload, size_t plen)
{
    uint8_t buf[64];
    NetHeader h = {BP_MAGIC, BP_PROTO_VERSION, type, g_seq++, tick};
    memcpy(buf, &h, sizeof h);
    memcpy(buf + sizeof h, payload, plen);
    g_last_len = sizeof h + plen;
    memcpy(g_last, buf, g_last_len);
    if (send(g_sock, buf, g_last_len, 0) < 0 && errno != ECONNREFUSED) {
        perror("send");
    }
}

static void resend_last(void)
{
    if (g_last_len && send(g_sock, g_last, g_last_len, 0) < 0 && errno != ECONNREFUSED) {
        perror("send");
    }
}

/* re-send the last packet when nothing moved for RESEND_S */
static void resend_if_stalled(Bot *b, double t)
{
    if (t - b->last_tx > RESEND_S) {
        resend_last();
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

/* ------------------------------------------------------------ weights */

/* action repeat for these weights: --repeat, else what they were trained with */
static int weights_repeat(const Args *a, const BpPolicy *p)
{
    return a->repeat_override ? a->repeat_override : bp_policy_action_repeat(p);
}

/* 0 when this bot can play p (an input layout it builds, matching sizes);
 * else prints why (naming the layout / dims, then `tail`) and returns -1 */
static int playable(const char *path, const BpPolicy *p, const char *tail)
{
    int layout = bp_policy_input_layout(p);
    if (layout != BP_INPUT_LAYOUT_OBS) {
        fprintf(stderr,
                "bot: weights %s refused: input layout %d is not one this bot can build "
                "(it builds input layout %d, the %d-value observation)%s\n",
                path, layout, BP_INPUT_LAYOUT_OBS, BP_OBS_DIM, tail);
        return -1;
    }
    if (bp_policy_obs_dim(p) != BP_OBS_DIM || bp_policy_act_dim(p) != BP_ACT_DIM) {
        fprintf(stderr,
                "bot: weights %s refused: obs_dim %d / act_dim %d, but input layout %d has "
                "%d inputs and the bot sends %d action values%s\n",
                path, bp_policy_obs_dim(p), bp_policy_act_dim(p), layout, BP_OBS_DIM,
                BP_ACT_DIM, tail);
        return -1;
    }
    return 0;
}

static void print_weights(const Args *a, const BpPolicy *p)
{
    const char *reward = bp_policy_reward(p);
    int trained = bp_policy_action_repeat(p);
    fprintf(stderr, "weights %s: bpw v%d, input layout %d, action repeat %d, reward %s\n",
            a->weights, bp_policy_version(p), bp_policy_input_layout(p), trained,
            reward[0] ? reward : "unknown");
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
    if (mid_match && weights_repeat(&b->a, p) != b->repeat) {
        fprintf(stderr, "bot: action repeat %d takes effect from the next match (this one keeps %d)\n",
                weights_repeat(&b->a, p), b->repeat);
    }
}

/* ------------------------------------------------------------ set-up */

static int usage(void)
{
    fprintf(stderr, "usage: brawlpit_bot --server HOST:PORT --weights POLICY.bpw [--slot N]\n"
                    "       [--matches K] [--seed S] [--cpu-level L] [--repeat R] [--no-reset]\n"
                    "       [--trace FILE]\n");
    return 2;
}

/* 0, or usage() */
static int parse_args(int argc, char **argv, Args *a)
{
    *a = (Args){NULL, NULL, NULL, BP_SLOT_ANY, 1, BP_CPU_KEEP, 1, 0, 1};
    int repeat = 0, repeat_given = 0;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(k, "--no-reset")) {
            a->do_reset = 0;
            continue;
        }
        if (!v) {
            return usage();
        }
        i++;
        if (!strcmp(k, "--server")) {
            a->server = v;
        } else if (!strcmp(k, "--weights")) {
            a->weights = v;
        } else if (!strcmp(k, "--slot")) {
            a->want_slot = atoi(v);
        } else if (!strcmp(k, "--matches")) {
            a->matches = atoi(v);
        } else if (!strcmp(k, "--seed")) {
            a->seed = strtoul(v, NULL, 10);
        } else if (!strcmp(k, "--cpu-level")) {
            a->cpu_level = atoi(v);
        } else if (!strcmp(k, "--repeat")) {
            repeat = atoi(v);
            repeat_given = 1;
        } else if (!strcmp(k, "--trace")) {
            a->trace_path = v;
        } else {
            return usage();
        }
    }
    if (!a->server || !a->weights || a->matches < 1 ||
        (repeat_given && (repeat < 1 || repeat > BP_MAX_REPEAT)) ||
        (a->want_slot != BP_SLOT_ANY && (a->want_slot < 0 || a->want_slot > 1)) ||
        a->cpu_level < 0 || a->cpu_level > 255) {
        return usage();
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

/* HELLO until our WELCOME (into b->wel): 0, 1 (refused) or 3 (silent) */
static int join(Bot *b)
{
    uint8_t buf[512];
    NetHello hello = {(uint8_t)b->a.want_slot, {0, 0, 0}, (uint32_t)getpid()};
    send_pkt(BP_PKT_HELLO, 0, &hello, sizeof hello);
    b->last_rx = b->last_tx = now_s();
    for (;;) {
        size_t n = recv_pkt(buf, sizeof buf, 100);
        if (is_type(buf, n, BP_PKT_WELCOME, sizeof(NetHeader) + sizeof b->wel)) {
            memcpy(&b->wel, buf + sizeof(NetHeader), sizeof b->wel);
            if (b->wel.nonce == hello.nonce) {
                break;
            }
        } else if (is_type(buf, n, BP_PKT_ERROR, sizeof(NetHeader) + sizeof(NetError))) {
            NetError e;
            memcpy(&e, buf + sizeof(NetHeader), sizeof e);
            e.text[BP_ERROR_TEXT_LEN - 1] = 0;
            fprintf(stderr, "bot: server refused HELLO: %u %s\n", e.code, e.text);
            return 1;
        }
        double t = now_s();
        if (t - b->last_rx > SILENT_S || g_stop) {
            fprintf(stderr, "bot: no WELCOME from %s\n", b->a.server);
            return 3;
        }
        resend_if_stalled(b, t);
    }
    fprintf(stderr, "bot: joined %s slot %d mode %u session %08x\n", b->a.server, b->wel.slot,
            b->wel.mode, b->wel.session);
    b->match_id = b->wel.match_id;
    return 0;
}

/* ------------------------------------------------------------ one match */

/* the freshest SNAPSHOT among everything queued (waits up to 50 ms): 1 if any */
static int recv_freshest(uint8_t snap[sizeof(SnapshotPacket)])
{
    uint8_t buf[512];
    int have = 0;
    size_t n = recv_pkt(buf, sizeof buf, 50);
    while (n) {
        if (is_type(buf, n, BP_PKT_SNAPSHOT, sizeof(SnapshotPacket))) {
            memcpy(snap, buf, sizeof(SnapshotPacket));
            have = 1;
        }
        n = recv_pkt(buf, sizeof buf, 0);
    }
    return have;
}

static void trace_step(Bot *b, uint32_t tick, float sx, float sy, uint32_t buttons,
                       const float obs[BP_OBS_DIM])
{
    fprintf(b->trace, "%u %u %.9g %.9g %u", b->match_id, tick, (double)sx, (double)sy, buttons);
    for (int i = 0; i < BP_OBS_DIM; i++) {
        fprintf(b->trace, " %.9g", (double)obs[i]);
    }
    fputc('\n', b->trace);
}

/* observation -> policy -> CMD for the snapshot of tick `tick`; 1 if sent, 0
 * if the snapshot was rejected */
static int act(Bot *b, const uint8_t snap[sizeof(SnapshotPacket)], uint32_t tick, double t)
{
    float obs[BP_OBS_DIM], a[BP_ACT_DIM], sx, sy;
    uint32_t buttons;
    int orc = bp_obs_from_snapshot(snap, sizeof(SnapshotPacket), b->wel.slot, obs);
    if (orc != BP_OBS_OK) {
        fprintf(stderr, "bot: snapshot rejected: %s\n", bp_obs_strerror(orc));
        return 0;
    }
    bp_policy_forward(b->pol, obs, a);
    bp_action_decode(a, &sx, &sy, &buttons);
    UserCmd cmd = {b->wel.session, tick, ++b->cmd_seq, sx, sy, buttons, b->wel.slot,
                   (uint8_t)b->repeat, 0};
    send_pkt(BP_PKT_CMD, tick, &cmd, sizeof cmd);
    b->last_tx = t;
    if (b->trace) {
        trace_step(b, tick, sx, sy, buttons, obs);
    }
    return 1;
}

/* Is this snapshot the match we are waiting for?  With RESET: the new match
 * id; without: any playing match (a new one after the first). */
static int is_fresh_match(const Bot *b, const SnapshotPacket *sp, uint32_t old_match, int played)
{
    if (b->a.do_reset) {
        return sp->match.match_id != old_match;
    }
    return sp->match.phase == BP_PHASE_PLAYING && (played == 0 || sp->match.match_id != old_match);
}

/* RESET(seed + played, cpu_level) */
static void send_reset(Bot *b, int played)
{
    NetReset rs = {b->wel.session, (uint32_t)(b->a.seed + (unsigned long)played),
                   (uint8_t)b->a.cpu_level, {0, 0, 0}};
    send_pkt(BP_PKT_RESET, 0, &rs, sizeof rs);
    b->last_tx = now_s();
}

/* Play one match from RESET (or the next match) to its end.  Returns 0 when
 * it ended, or 3 when the server went silent; g_stop ends it early (0). */
static int play_match(Bot *b, int played)
{
    if (b->a.do_reset) {
        send_reset(b, played);
    }
    const uint32_t old_match = b->match_id;
    int started = 0;
    uint32_t next_tick = 0; /* first tick not yet covered by our commands */
    b->last_rx = now_s();
    while (!g_stop) {
        if (g_hup) {
            g_hup = 0;
            reload(b, 1);
        }
        uint8_t snap[sizeof(SnapshotPacket)];
        int have = recv_freshest(snap);
        double t = now_s();
        if (!have) {
            if (t - b->last_rx > SILENT_S) {
                fprintf(stderr, "bot: server silent for 10 s\n");
                g_stop = 1;
                return 3;
            }
            resend_if_stalled(b, t);
            continue;
        }
        b->last_rx = t;
        SnapshotPacket sp;
        memcpy(&sp, snap, sizeof sp);
        if (!started) {
            if (!is_fresh_match(b, &sp, old_match, played)) {
                resend_if_stalled(b, t);
                continue;
            }
            started = 1;
            b->match_id = sp.match.match_id;
            next_tick = 0;
            b->cmd_seq = 0;
        }
        if (sp.match.match_id != b->match_id) {
            continue; /* stale packet of an older match */
        }
        if (sp.match.phase == BP_PHASE_OVER) {
            printf("match %u winner %u ticks %u\n", b->match_id, sp.match.winner, sp.hdr.tick);
            fflush(stdout);
            return 0;
        }
        if (sp.match.phase != BP_PHASE_PLAYING) {
            resend_if_stalled(b, t);
            continue;
        }
        if (sp.hdr.tick < next_tick && b->wel.mode == BP_MODE_LOCKSTEP) {
            continue; /* a duplicate answer to a re-sent CMD: state not advanced yet */
        }
        if (act(b, snap, sp.hdr.tick, t)) {
            next_tick = sp.hdr.tick + (uint32_t)b->repeat;
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
        return rc;
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
