/*
 * brawlpit_obs — build observations for a file of snapshot records (parity tool).
 *
 *   brawlpit_obs IN OUT        (either may be "-" for stdin / stdout)
 *
 * IN  is a sequence of 96-byte records:  u8 slot, u8 reserved[3] (0),
 *     then the 92 raw bytes of one SNAPSHOT datagram, exactly as on the wire.
 * OUT gets, per record, BP_OBS_DIM float32 (little-endian, 124 bytes) from
 *     bp_obs_from_snapshot().  The output buffer is NaN-filled before each
 *     call, so a dimension the builder forgets to write shows up as NaN.
 * Exit 0 on success; 1 (with "brawlpit_obs: record N: reason" on stderr) if a
 * record is rejected or IN's size is not a multiple of 96; 2 on usage/IO error.
 * `python -m brawlkit parity` writes IN, runs this, and compares with Python.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "obs.h"

#define REC_SIZE (4 + (int)sizeof(SnapshotPacket))

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s IN OUT   (96-byte records in, %d float32 per record out)\n",
                argv[0], BP_OBS_DIM);
        return 2;
    }
    FILE *in = strcmp(argv[1], "-") == 0 ? stdin : fopen(argv[1], "rb");
    if (!in) {
        perror(argv[1]);
        return 2;
    }
    FILE *out = strcmp(argv[2], "-") == 0 ? stdout : fopen(argv[2], "wb");
    if (!out) {
        perror(argv[2]);
        return 2;
    }
    unsigned char rec[REC_SIZE];
    float obs[BP_OBS_DIM];
    long n = 0;
    for (;;) {
        size_t got = fread(rec, 1, sizeof rec, in);
        if (got == 0)
            break;
        if (got != sizeof rec) {
            fprintf(stderr, "brawlpit_obs: record %ld: truncated (%zu of %d bytes)\n", n, got,
                    REC_SIZE);
            return 1;
        }
        for (int i = 0; i < BP_OBS_DIM; i++)
            obs[i] = NAN;
        int rc = bp_obs_from_snapshot(rec + 4, sizeof(SnapshotPacket), rec[0], obs);
        if (rc != BP_OBS_OK) {
            fprintf(stderr, "brawlpit_obs: record %ld: %s\n", n, bp_obs_strerror(rc));
            return 1;
        }
        if (fwrite(obs, sizeof(float), BP_OBS_DIM, out) != BP_OBS_DIM) {
            perror("brawlpit_obs: write");
            return 2;
        }
        n++;
    }
    if (out != stdout && fclose(out) != 0) {
        perror(argv[2]);
        return 2;
    }
    fflush(stdout);
    return 0;
}
