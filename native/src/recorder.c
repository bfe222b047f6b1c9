/*
 * recorder.c — run-length match recordings and their atomic file writer
 * (design in recorder.h).
 */
#define _GNU_SOURCE
#include "recorder.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REC_MAGIC "BPRP" /* BP_REPLAY_MAGIC as bytes */
#define REC_PATH_MAX 4096

_Static_assert(sizeof(REC_MAGIC) - 1 == sizeof(((BpReplayHeader *)0)->magic), "magic is 4 bytes");

void bp_rec_clear(BpRecorder *r) {
    r->n_runs = r->n_ticks = 0;
    r->start_unix_ms = 0;
    r->dirty = r->broken = 0;
    memset(r->names, 0, sizeof r->names);
}

void bp_rec_free(BpRecorder *r) {
    free(r->runs);
    r->runs = NULL;
    bp_rec_clear(r);
}

int bp_rec_add(BpRecorder *r, const BpInput in[2]) {
    if (r->broken) return -1;
    BpReplayRun run = {1, in[0].stick_x, in[0].stick_y, in[0].buttons, in[1].stick_x, in[1].stick_y, in[1].buttons};
    const size_t inputs = sizeof run - offsetof(BpReplayRun, sx0);
    if (r->n_runs > 0) {
        BpReplayRun *last = &r->runs[r->n_runs - 1];
        /* bit for bit: the same input to the sim (also -0.0 vs 0.0) */
        if (memcmp(&last->sx0, &run.sx0, inputs) == 0) {
            last->count++;
            r->n_ticks++;
            r->dirty = 1;
            return 0;
        }
    }
    if (!r->runs) r->runs = malloc(sizeof *r->runs * BP_REC_MAX_RUNS);
    if (!r->runs || r->n_runs >= BP_REC_MAX_RUNS) {
        r->broken = 1;
        return -1;
    }
    r->runs[r->n_runs++] = run;
    r->n_ticks++;
    r->dirty = 1;
    return 0;
}

int bp_rec_name(char *out, size_t cap, uint64_t start_unix_ms, uint32_t arena_id, uint32_t match_id) {
    return snprintf(out, cap, "%llu-a%u-m%u.bpr", (unsigned long long)start_unix_ms, arena_id, match_id);
}

/* all of buf to fd: 0, or -1 */
static int write_all(int fd, const void *buf, size_t len) {
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int bp_rec_write(const BpRecorder *r, const char *dir, const BpReplayHeader *h, const NetPlayer players[2],
                 char *path_out, size_t path_cap) {
    char name[128], path[REC_PATH_MAX], tmp[REC_PATH_MAX];
    bp_rec_name(name, sizeof name, r->start_unix_ms, h->arena_id, h->match_id);
    int n1 = snprintf(path, sizeof path, "%s/%s", dir, name);
    int n2 = snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
    if (n1 < 0 || n2 < 0 || (size_t)n1 >= sizeof path || (size_t)n2 >= sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (path_out && path_cap) snprintf(path_out, path_cap, "%s", path);
    BpReplayHeader hd = *h;
    memcpy(hd.magic, REC_MAGIC, sizeof hd.magic);
    hd.version = BP_REPLAY_VERSION;
    hd.header_size = (uint16_t)sizeof hd;
    hd.n_ticks = r->n_ticks;
    hd.n_runs = r->n_runs;
    hd.start_unix_ms = r->start_unix_ms;
    memset(hd.reserved, 0, sizeof hd.reserved);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    int ok = write_all(fd, &hd, sizeof hd) == 0 &&
             (r->n_runs == 0 || write_all(fd, r->runs, sizeof *r->runs * r->n_runs) == 0) &&
             write_all(fd, players, sizeof(NetPlayer) * 2) == 0 && fsync(fd) == 0;
    int saved = errno;
    if (close(fd) != 0 && ok) {
        ok = 0;
        saved = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ok = 0;
        saved = errno;
    }
    if (!ok) {
        unlink(tmp);
        errno = saved;
        return -1;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* the rename itself, durable */
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}
