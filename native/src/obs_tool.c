/*
 * brawlpit_obs — build policy inputs for a file of snapshot records (parity tool).
 *
 *   brawlpit_obs [--layout L] IN OUT     (IN / OUT may be "-" for stdin / stdout)
 *
 * IN  is a sequence of 108-byte records: u8 slot, u8 reserved[3] (0), the 92 raw
 *     bytes of one SNAPSHOT datagram exactly as on the wire, then the command the
 *     player sent last step (f32 stick_x, f32 stick_y, u32 buttons; little-endian;
 *     only layouts 2 and 3 read it).
 * OUT gets, per record, bp_input_dim(L) float32 (little-endian) from
 *     bp_input_from_snapshot(); L defaults to 1 (the 31-value observation).  The
 *     output buffer is NaN-filled before each call, so a value the builder forgets
 *     to write shows up as NaN.
 * Exit 0 on success; 1 (with "brawlpit_obs: record N: reason" on stderr) if a
 * record is rejected or truncated; 2 on usage/IO error.
 * `python -m brawlkit parity` writes IN, runs this, and compares with Python.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "obs.h"

#define SNAP_AT 4
#define PREV_AT (SNAP_AT + (int)sizeof(SnapshotPacket))
#define REC_SIZE (PREV_AT + 12)

static int usage(FILE *f, const char *argv0)
{
    fprintf(f,
            "usage: %s [--layout L] IN OUT\n"
            "  IN   %d-byte records: u8 slot, 3 zero bytes, a SNAPSHOT datagram, the previous\n"
            "       command (f32 stick_x, f32 stick_y, u32 buttons)\n"
            "  OUT  per record, the layout's input as float32 (layout 1: %d, 2: %d, 3: %d)\n"
            "  --layout L  policy input layout (default 1)\n",
            argv0, REC_SIZE, BP_OBS_DIM, BP_INPUT_SELF_DIM, BP_INPUT_CLOCK_DIM);
    return f == stdout ? 0 : 2;
}

static FILE *open_arg(const char *path, const char *mode, FILE *std)
{
    FILE *f = strcmp(path, "-") == 0 ? std : fopen(path, mode);
    if (!f)
        perror(path);
    return f;
}

/* one record -> one input row; 0 ok, 1 rejected */
static int build_one(const unsigned char *rec, long n, int layout, float *in)
{
    BpCommand prev;
    memcpy(&prev.stick_x, rec + PREV_AT, 4);
    memcpy(&prev.stick_y, rec + PREV_AT + 4, 4);
    memcpy(&prev.buttons, rec + PREV_AT + 8, 4);
    for (int i = 0; i < BP_INPUT_MAX_DIM; i++)
        in[i] = NAN;
    int rc = bp_input_from_snapshot(rec + SNAP_AT, sizeof(SnapshotPacket), rec[0], layout, &prev, in);
    if (rc != BP_OBS_OK) {
        fprintf(stderr, "brawlpit_obs: record %ld: %s\n", n, bp_obs_strerror(rc));
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    int layout = BP_INPUT_LAYOUT_OBS, a = 1;
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))
        return usage(stdout, argv[0]);
    if (argc > 2 && !strcmp(argv[1], "--layout")) {
        layout = atoi(argv[2]);
        a = 3;
    }
    if (argc - a != 2)
        return usage(stderr, argv[0]);
    const int dim = bp_input_dim(layout);
    if (dim == 0) {
        fprintf(stderr, "brawlpit_obs: unknown policy input layout %d\n", layout);
        return 2;
    }
    FILE *in = open_arg(argv[a], "rb", stdin), *out = open_arg(argv[a + 1], "wb", stdout);
    if (!in || !out)
        return 2;
    unsigned char rec[REC_SIZE];
    float row[BP_INPUT_MAX_DIM];
    for (long n = 0;; n++) {
        size_t got = fread(rec, 1, sizeof rec, in);
        if (got == 0)
            break;
        if (got != sizeof rec) {
            fprintf(stderr, "brawlpit_obs: record %ld: truncated (%zu of %d bytes)\n", n, got,
                    REC_SIZE);
            return 1;
        }
        if (build_one(rec, n, layout, row))
            return 1;
        if (fwrite(row, sizeof(float), (size_t)dim, out) != (size_t)dim) {
            perror("brawlpit_obs: write");
            return 2;
        }
    }
    if (out != stdout && fclose(out) != 0) {
        perror(argv[a + 1]);
        return 2;
    }
    fflush(stdout);
    return 0;
}
