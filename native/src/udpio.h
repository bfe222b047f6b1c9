/*
 * udpio.h — batched UDP I/O for brawlpit_server (udpio.c).
 *
 * Receives up to BP_RX_BATCH datagrams per system call (recvmmsg) and queues
 * outgoing datagrams to send them together (sendmmsg) when the queue is full
 * or the caller flushes: with many arenas, one wake-up of the server handles
 * the commands of many matches and answers them in one call.  If the kernel
 * lacks recvmmsg / sendmmsg (ENOSYS), it falls back to recvfrom / sendto for
 * good.  The socket must be non-blocking.
 */
#ifndef BRAWLPIT_UDPIO_H
#define BRAWLPIT_UDPIO_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#define BP_RX_BATCH 64      /* datagrams received per call */
#define BP_TX_BATCH 128     /* datagrams queued before a forced flush */
#define BP_RX_DGRAM_MAX 8192 /* bytes kept of a received datagram (every valid one fits: a full BATCH 6164) */
#define BP_TX_DGRAM_MAX 248 /* the largest datagram the server sends (PEER: 244) */

typedef struct {
    uint8_t buf[BP_RX_DGRAM_MAX];
    size_t len; /* the datagram's real length: > BP_RX_DGRAM_MAX when truncated */
    struct sockaddr_in from;
    int from_ipv4; /* 0: the sender's address is not IPv4 */
} BpRxMsg;

typedef struct {
    uint8_t buf[BP_TX_DGRAM_MAX];
    size_t len;
    struct sockaddr_in to;
} BpTxMsg;

typedef struct {
    int fd;
    int no_mmsg; /* the kernel said ENOSYS: recvfrom / sendto */
    BpRxMsg rx[BP_RX_BATCH];
    BpTxMsg tx[BP_TX_BATCH];
    int ntx;
    uint64_t sent, send_failed;
} BpUdp;

void bp_udp_init(BpUdp *u, int fd);
/* Receive what is queued on the socket, up to BP_RX_BATCH datagrams, without
 * blocking, into u->rx[0..n-1].  Returns n (0 = nothing), or -1 on an error
 * other than "nothing to read" / EINTR. */
int bp_udp_recv(BpUdp *u);
/* Queue one datagram (len <= BP_TX_DGRAM_MAX; flushes first if the queue is
 * full).  Returns 0, or -1 when len is too large (counted as a failed send). */
int bp_udp_queue(BpUdp *u, const struct sockaddr_in *to, const void *buf, size_t len);
/* Send everything queued; each datagram the kernel refuses counts in send_failed. */
void bp_udp_flush(BpUdp *u);
/* Send one datagram of any size now, after what is queued (a BATCH_SNAP: larger than
 * a queue slot); counted in sent / send_failed like the rest. */
void bp_udp_send_now(BpUdp *u, const struct sockaddr_in *to, const void *buf, size_t len);

#endif /* BRAWLPIT_UDPIO_H */
