/*
 * brawlpit_bot — plays BRAWLPIT matches with a .bpw policy, zero Python.
 *
 *   brawlpit_bot --server HOST:PORT --weights POLICY.bpw [--slot N] [--matches K]
 *                [--seed S] [--cpu-level L] [--repeat R] [--no-reset] [--trace FILE]
 *
 * HELLO -> WELCOME; then per match: reload the weights (a new blob replaces the
 * old one without a restart; SIGHUP reloads too, a failed reload keeps the old
 * weights), RESET(seed + k, cpu_level) (skipped with --no-reset: the bot then
 * plays whatever match the server runs), and play: for every new SNAPSHOT of the
 * current match (lockstep: each one the server sends when it waits for us;
 * realtime/fastforward: the freshest after draining the socket) build the
 * observation with bp_obs_from_snapshot (obs.c), run bp_policy_forward, decode
 * with bp_action_decode (DESIGN §6, deterministic mean clipped) and send one
 * CMD {tick = snapshot tick, repeat = R (default 4)}.  Lost datagrams: after
 * 100 ms without a new snapshot the last CMD/RESET/HELLO is re-sent.
 * Prints one line per finished match: `match <id> winner <w> ticks <t>`.
 * --trace FILE writes one line per step: `<match> <tick> <sx> <sy> <buttons>
 * <obs0> .. <obs30>` (%.9g floats) so a test can replay the observations
 * through the Python policy and compare the actions step by step.
 * Exit 0 after K matches (sends BYE), 3 when the server is silent for 10 s.
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

static BpPolicy *reload(BpPolicy *old, const char *path)
{
    char err[256];
    BpPolicy *p = bp_policy_load_file(path, err, sizeof err);
    if (!p) {
        fprintf(stderr, "bot: weights %s refused (%s)%s\n", path, err,
                old ? "; keeping the previous weights" : "");
        return old;
    }
    if (bp_policy_obs_dim(p) != BP_OBS_DIM || bp_policy_act_dim(p) != BP_ACT_DIM) {
        fprintf(stderr, "bot: weights %s have obs=%d act=%d, need %d/%d\n", path,
                bp_policy_obs_dim(p), bp_policy_act_dim(p), BP_OBS_DIM, BP_ACT_DIM);
        bp_policy_free(p);
        return old;
    }
    bp_policy_free(old);
    fprintf(stderr, "bot: loaded weights %s\n", path);
    return p;
}

static int usage(void)
{
    fprintf(stderr, "usage: brawlpit_bot --server HOST:PORT --weights POLICY.bpw [--slot N]\n"
                    "       [--matches K] [--seed S] [--cpu-level L] [--repeat R] [--no-reset]\n"
                    "       [--trace FILE]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *server = NULL, *weights = NULL, *trace_path = NULL;
    int want_slot = BP_SLOT_ANY, matches = 1, cpu_level = BP_CPU_KEEP, repeat = 4, do_reset = 1;
    unsigned long seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--no-reset")) {
            do_reset = 0;
            continue;
        }
        if (!v) {
            return usage();
        }
        i++;
        if (!strcmp(a, "--server")) {
            server = v;
        } else if (!strcmp(a, "--weights")) {
            weights = v;
        } else if (!strcmp(a, "--slot")) {
            want_slot = atoi(v);
        } else if (!strcmp(a, "--matches")) {
            matches = atoi(v);
        } else if (!strcmp(a, "--seed")) {
            seed = strtoul(v, NULL, 10);
        } else if (!strcmp(a, "--cpu-level")) {
            cpu_level = atoi(v);
        } else if (!strcmp(a, "--repeat")) {
            repeat = atoi(v);
        } else if (!strcmp(a, "--trace")) {
            trace_path = v;
        } else {
            return usage();
        }
    }
    if (!server || !weights || matches < 1 || repeat < 1 || repeat > BP_MAX_REPEAT ||
        (want_slot != BP_SLOT_ANY && (want_slot < 0 || want_slot > 1)) || cpu_level < 0 ||
        cpu_level > 255) {
        return usage();
    }
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
    FILE *trace = trace_path ? fopen(trace_path, "w") : NULL;
    if (trace_path && !trace) {
        perror(trace_path);
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_hup;
    sigaction(SIGHUP, &sa, NULL);
    sa.sa_handler = on_term;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    BpPolicy *pol = reload(NULL, weights);
    if (!pol) {
        return 1;
    }

    /* ---- join */
    uint8_t buf[512];
    NetHello hello = {(uint8_t)want_slot, {0, 0, 0}, (uint32_t)getpid()};
    NetWelcome wel;
    send_pkt(BP_PKT_HELLO, 0, &hello, sizeof hello);
    double last_rx = now_s(), last_tx = now_s();
    for (;;) {
        size_t n = recv_pkt(buf, sizeof buf, 100);
        if (is_type(buf, n, BP_PKT_WELCOME, sizeof(NetHeader) + sizeof wel)) {
            memcpy(&wel, buf + sizeof(NetHeader), sizeof wel);
            if (wel.nonce == hello.nonce) {
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
        if (t - last_rx > 10.0 || g_stop) {
            fprintf(stderr, "bot: no WELCOME from %s\n", server);
            return 3;
        }
        if (t - last_tx > 0.1) {
            resend_last();
            last_tx = t;
        }
    }
    const int slot = wel.slot;
    const uint32_t session = wel.session;
    fprintf(stderr, "bot: joined %s slot %d mode %u session %08x\n", server, slot, wel.mode,
            session);

    uint32_t match_id = wel.match_id, cmd_seq = 0;
    int played = 0, rc = 0;
    while (played < matches && !g_stop) {
        /* ---- match start: reload weights, RESET */
        pol = reload(pol, weights);
        g_hup = 0;
        int started = 0;
        if (do_reset) {
            NetReset rs = {session, (uint32_t)(seed + (unsigned long)played), (uint8_t)cpu_level,
                           {0, 0, 0}};
            send_pkt(BP_PKT_RESET, 0, &rs, sizeof rs);
            last_tx = now_s();
        }
        uint32_t old_match = match_id;
        uint32_t next_tick = 0; /* first tick not yet covered by our commands */
        last_rx = now_s();
        for (;;) {
            if (g_stop) {
                break;
            }
            if (g_hup) {
                pol = reload(pol, weights);
                g_hup = 0;
            }
            /* freshest snapshot among everything queued */
            uint8_t snap[sizeof(SnapshotPacket)];
            int have = 0;
            size_t n = recv_pkt(buf, sizeof buf, 50);
            while (n) {
                if (is_type(buf, n, BP_PKT_SNAPSHOT, sizeof(SnapshotPacket))) {
                    memcpy(snap, buf, sizeof snap);
                    have = 1;
                }
                n = recv_pkt(buf, sizeof buf, 0);
            }
            double t = now_s();
            if (!have) {
                if (t - last_rx > 10.0) {
                    fprintf(stderr, "bot: server silent for 10 s\n");
                    rc = 3;
                    g_stop = 1;
                } else if (t - last_tx > 0.1) {
                    resend_last();
                    last_tx = t;
                }
                continue;
            }
            last_rx = t;
            SnapshotPacket sp;
            memcpy(&sp, snap, sizeof sp);
            if (!started) {
                /* with RESET: wait for the new match id; without: any playing match */
                int fresh = do_reset ? sp.match.match_id != old_match
                                     : (sp.match.phase == BP_PHASE_PLAYING &&
                                        (played == 0 || sp.match.match_id != old_match));
                if (!fresh) {
                    if (t - last_tx > 0.1) {
                        resend_last();
                        last_tx = t;
                    }
                    continue;
                }
                started = 1;
                match_id = sp.match.match_id;
                next_tick = 0;
                cmd_seq = 0;
            }
            if (sp.match.match_id != match_id) {
                continue; /* stale packet of an older match */
            }
            if (sp.match.phase == BP_PHASE_OVER) {
                printf("match %u winner %u ticks %u\n", match_id, sp.match.winner, sp.hdr.tick);
                fflush(stdout);
                break;
            }
            if (sp.match.phase != BP_PHASE_PLAYING) {
                if (t - last_tx > 0.1) {
                    resend_last();
                    last_tx = t;
                }
                continue;
            }
            if (sp.hdr.tick < next_tick && wel.mode == BP_MODE_LOCKSTEP) {
                /* a duplicate answer to a re-sent CMD: state not advanced yet */
                continue;
            }
            float obs[BP_OBS_DIM], act[BP_ACT_DIM], sx, sy;
            uint32_t buttons;
            int orc = bp_obs_from_snapshot(snap, sizeof snap, slot, obs);
            if (orc != BP_OBS_OK) {
                fprintf(stderr, "bot: snapshot rejected: %s\n", bp_obs_strerror(orc));
                continue;
            }
            bp_policy_forward(pol, obs, act);
            bp_action_decode(act, &sx, &sy, &buttons);
            UserCmd cmd = {session, sp.hdr.tick, ++cmd_seq, sx, sy, buttons,
                           (uint8_t)slot, (uint8_t)repeat, 0};
            send_pkt(BP_PKT_CMD, sp.hdr.tick, &cmd, sizeof cmd);
            last_tx = t;
            next_tick = sp.hdr.tick + (uint32_t)repeat;
            if (trace) {
                fprintf(trace, "%u %u %.9g %.9g %u", match_id, sp.hdr.tick, (double)sx,
                        (double)sy, buttons);
                for (int i = 0; i < BP_OBS_DIM; i++) {
                    fprintf(trace, " %.9g", (double)obs[i]);
                }
                fputc('\n', trace);
            }
        }
        if (!g_stop) {
            played++;
        }
    }
    NetBye bye = {session};
    send_pkt(BP_PKT_BYE, 0, &bye, sizeof bye);
    if (trace) {
        fclose(trace);
    }
    bp_policy_free(pol);
    close(g_sock);
    return rc;
}
