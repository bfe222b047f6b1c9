/*
 * recorder.h — match recordings of brawlpit_server --record DIR (recorder.c).
 *
 * A recording is what replays a match bit for bit: the seed and match id the
 * sim was reset with, and the inputs of both slots exactly as passed to
 * bp_sim_step (the CPU's included), run-length encoded: one BpReplayRun per
 * stretch of ticks with identical inputs.  A match lasts at most
 * BP_MATCH_TICKS ticks, so at most that many runs: the buffer is allocated
 * once, on an arena slot's first recorded tick, and reused by every later
 * match of that slot (bounded memory, no allocation per tick).
 *
 * The file (brawlpit.h "replays", docs/replays.md): BpReplayHeader, n_runs
 * BpReplayRun, then the final NetPlayer players[2].  It is written to a
 * temporary name in the same directory, fsync'ed and renamed, so the final
 * name never holds half a file; a failed write leaves no file behind.
 */
#ifndef BRAWLPIT_RECORDER_H
#define BRAWLPIT_RECORDER_H

#include <stddef.h>
#include <stdint.h>

#include "brawlpit.h"
#include "sim.h"

#define BP_REC_MAX_RUNS BP_MATCH_TICKS /* runs of one match: at most one per tick */

typedef struct {
    BpReplayRun *runs;      /* BP_REC_MAX_RUNS, allocated on first use, then kept */
    uint32_t n_runs, n_ticks;
    uint64_t start_unix_ms; /* wall clock at the match's first recorded tick */
    int dirty;              /* ticks recorded since the last write */
    int broken;             /* out of memory / past the bound: this match is not recorded */
    char names[2][BP_NAME_LEN]; /* who played each slot (kept when the slot empties) */
} BpRecorder;

/* Forget the current match (a new one starts); the buffer is kept. */
void bp_rec_clear(BpRecorder *r);
/* Append one tick's inputs.  0, or -1 (out of memory or more than
 * BP_REC_MAX_RUNS runs: r->broken is set and later ticks are ignored). */
int bp_rec_add(BpRecorder *r, const BpInput in[2]);
/* Free the buffer. */
void bp_rec_free(BpRecorder *r);

/* The file name of a recording: "<start_unix_ms>-a<arena_id>-m<match_id>.bpr".
 * Returns what snprintf returns. */
int bp_rec_name(char *out, size_t cap, uint64_t start_unix_ms, uint32_t arena_id, uint32_t match_id);

/* Write the recording as dir/<bp_rec_name>: `h` carries seed, match_id,
 * arena_id, mode, cpu_level, complete, winner, final_hash, name0/1; magic,
 * version, header_size, n_ticks, n_runs and start_unix_ms are filled here.
 * Temp file + fsync + rename.  0, or -1 with errno set (no file left behind);
 * the written path goes to path_out (may be NULL). */
int bp_rec_write(const BpRecorder *r, const char *dir, const BpReplayHeader *h, const NetPlayer players[2],
                 char *path_out, size_t path_cap);

#endif /* BRAWLPIT_RECORDER_H */
