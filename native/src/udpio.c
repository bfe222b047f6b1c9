/*
 * udpio.c — batched UDP I/O for brawlpit_server (see udpio.h).
 */
#define _GNU_SOURCE
#include "udpio.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

void bp_udp_init(BpUdp *u, int fd) {
    memset(u, 0, sizeof *u);
    u->fd = fd;
}

/* the kernel's length and address into one received message */
static void rx_done(BpRxMsg *m, ssize_t len, socklen_t alen, int truncated) {
    m->len = (size_t)len;
    if (truncated && m->len <= BP_RX_DGRAM_MAX) m->len = BP_RX_DGRAM_MAX + 1;
    m->from_ipv4 = alen >= (socklen_t)sizeof m->from && m->from.sin_family == AF_INET;
}

static int recv_single(BpUdp *u) {
    int n = 0;
    while (n < BP_RX_BATCH) {
        BpRxMsg *m = &u->rx[n];
        socklen_t alen = sizeof m->from;
        memset(&m->from, 0, sizeof m->from);
        /* MSG_TRUNC: the real length of a longer datagram (udp(7)) */
        ssize_t len = recvfrom(u->fd, m->buf, sizeof m->buf, MSG_DONTWAIT | MSG_TRUNC,
                               (struct sockaddr *)&m->from, &alen);
        if (len < 0) break;
        rx_done(m, len, alen, (size_t)len > sizeof m->buf);
        n++;
    }
    return n;
}

int bp_udp_recv(BpUdp *u) {
    if (u->no_mmsg) return recv_single(u);
    struct mmsghdr hdr[BP_RX_BATCH];
    struct iovec iov[BP_RX_BATCH];
    memset(hdr, 0, sizeof hdr);
    for (int i = 0; i < BP_RX_BATCH; i++) {
        BpRxMsg *m = &u->rx[i];
        memset(&m->from, 0, sizeof m->from);
        iov[i].iov_base = m->buf;
        iov[i].iov_len = sizeof m->buf;
        hdr[i].msg_hdr.msg_name = &m->from;
        hdr[i].msg_hdr.msg_namelen = sizeof m->from;
        hdr[i].msg_hdr.msg_iov = &iov[i];
        hdr[i].msg_hdr.msg_iovlen = 1;
    }
    int n = recvmmsg(u->fd, hdr, BP_RX_BATCH, MSG_DONTWAIT | MSG_TRUNC, NULL);
    if (n < 0) {
        if (errno == ENOSYS) {
            u->no_mmsg = 1;
            return recv_single(u);
        }
        return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : -1;
    }
    for (int i = 0; i < n; i++)
        rx_done(&u->rx[i], (ssize_t)hdr[i].msg_len, hdr[i].msg_hdr.msg_namelen,
                (hdr[i].msg_hdr.msg_flags & MSG_TRUNC) != 0);
    return n;
}

int bp_udp_queue(BpUdp *u, const struct sockaddr_in *to, const void *buf, size_t len) {
    if (len > BP_TX_DGRAM_MAX) {
        u->send_failed++;
        return -1;
    }
    if (u->ntx == BP_TX_BATCH) bp_udp_flush(u);
    BpTxMsg *m = &u->tx[u->ntx++];
    memcpy(m->buf, buf, len);
    m->len = len;
    m->to = *to;
    return 0;
}

static void send_single(BpUdp *u, int from) {
    for (int i = from; i < u->ntx; i++) {
        BpTxMsg *m = &u->tx[i];
        ssize_t n = sendto(u->fd, m->buf, m->len, 0, (const struct sockaddr *)&m->to, sizeof m->to);
        if (n == (ssize_t)m->len)
            u->sent++;
        else
            u->send_failed++;
    }
}

void bp_udp_flush(BpUdp *u) {
    if (u->ntx == 0) return;
    struct mmsghdr hdr[BP_TX_BATCH];
    struct iovec iov[BP_TX_BATCH];
    memset(hdr, 0, sizeof(hdr[0]) * (size_t)u->ntx);
    for (int i = 0; i < u->ntx; i++) {
        iov[i].iov_base = u->tx[i].buf;
        iov[i].iov_len = u->tx[i].len;
        hdr[i].msg_hdr.msg_name = &u->tx[i].to;
        hdr[i].msg_hdr.msg_namelen = sizeof u->tx[i].to;
        hdr[i].msg_hdr.msg_iov = &iov[i];
        hdr[i].msg_hdr.msg_iovlen = 1;
    }
    int i = 0;
    while (i < u->ntx && !u->no_mmsg) {
        int n = sendmmsg(u->fd, &hdr[i], (unsigned)(u->ntx - i), 0);
        if (n > 0) {
            u->sent += (uint64_t)n;
            i += n;
        } else if (n < 0 && errno == ENOSYS) {
            u->no_mmsg = 1;
        } else {
            u->send_failed++; /* the datagram at i was refused: skip it */
            i++;
        }
    }
    if (i < u->ntx) send_single(u, i);
    u->ntx = 0;
}

void bp_udp_send_now(BpUdp *u, const struct sockaddr_in *to, const void *buf, size_t len) {
    bp_udp_flush(u);
    ssize_t n = sendto(u->fd, buf, len, 0, (const struct sockaddr *)to, sizeof *to);
    if (n == (ssize_t)len)
        u->sent++;
    else
        u->send_failed++;
}
