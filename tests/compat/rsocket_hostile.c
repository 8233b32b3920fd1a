/* A hostile rsocket peer: plain rdma_cm and verbs that speak the rsocket wire format (its
 * private data, WRITEs with immediate into the ring the listener offers) and then lie in it.
 * The listener is a real rsocket of this process. Checks that the largest honest message (a
 * whole ring half) arrives byte-exact, that an unknown control word is ignored, and that a
 * length no rsocket can send ends the connection with EPROTO (after the data that came before
 * it, and with nothing after it), without reading outside the ring; and that an idle socket
 * with SO_KEEPALIVE finds a peer whose QP went away without a word.
 *   usage: rsocket_hostile [seed] */
#include <endian.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"

/* librdmacm's rsocket private data and ring entries, as they travel. */
struct wire_sge {
  uint64_t addr;
  uint32_t key;
  uint32_t length;
};
struct conn_data {
  uint8_t version;
  uint8_t flags;
  uint16_t credits;
  uint8_t reserved[3];
  uint8_t iomap_size;
  struct wire_sge target_sgl;
  struct wire_sge data_buf;
};
enum { OP_DATA = 0, OP_CTRL = 7 };
static uint32_t msg(uint32_t op, uint32_t datum) { return op << 29 | (datum & 0x1fffffff); }

#define RING (64 * 1024) /* the peer's own ring: the listener's credit messages land here */
#define SBUF (1 << 20)
#define RQ 32

struct peer {
  struct rdma_event_channel *ch;
  struct rdma_cm_id *id;
  struct ibv_pd *pd;
  struct ibv_cq *cq;
  struct ibv_mr *rmr, *smr;
  uint8_t *ring, *sbuf;
  struct wire_sge targets[2];
  struct ibv_mr *tmr;
  uint64_t remote_addr; /* the listener's first ring half */
  uint32_t remote_key, half;
};

static struct sockaddr_in addr;
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int expect_event(struct peer *p, enum rdma_cm_event_type want, struct conn_data *reply) {
  struct rdma_cm_event *ev;
  if (rdma_get_cm_event(p->ch, &ev)) return -1;
  int ok = ev->event == want;
  if (!ok) printf("peer: cm event %s, expected %s\n", rdma_event_str(ev->event), rdma_event_str(want));
  if (ok && reply) {
    ok = ev->param.conn.private_data && ev->param.conn.private_data_len >= sizeof *reply;
    if (ok) memcpy(reply, ev->param.conn.private_data, sizeof *reply);
  }
  rdma_ack_cm_event(ev);
  return ok ? 0 : -1;
}

/* Connects to the listener as an rsocket of version 1 would; runs beside raccept. */
static void *peer_connect(void *arg) {
  struct peer *p = arg;
  int ok = (p->ch = rdma_create_event_channel()) && !rdma_create_id(p->ch, &p->id, NULL, RDMA_PS_TCP) &&
           !rdma_resolve_addr(p->id, NULL, (struct sockaddr *)&addr, 2000) &&
           !expect_event(p, RDMA_CM_EVENT_ADDR_RESOLVED, NULL) && !rdma_resolve_route(p->id, 2000) &&
           !expect_event(p, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL);
  ok = ok && (p->pd = ibv_alloc_pd(p->id->verbs)) && (p->cq = ibv_create_cq(p->id->verbs, 2 * RQ, NULL, NULL, 0));
  struct ibv_qp_init_attr qa = {.send_cq = p->cq, .recv_cq = p->cq, .qp_type = IBV_QPT_RC,
                                .cap = {.max_send_wr = RQ, .max_recv_wr = RQ, .max_send_sge = 1, .max_recv_sge = 1}};
  ok = ok && !rdma_create_qp(p->id, p->pd, &qa);
  p->ring = calloc(1, RING);
  p->sbuf = calloc(1, SBUF);
  int remote = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  ok = ok && p->ring && p->sbuf && (p->rmr = ibv_reg_mr(p->pd, p->ring, RING, remote)) &&
       (p->smr = ibv_reg_mr(p->pd, p->sbuf, SBUF, IBV_ACCESS_LOCAL_WRITE)) &&
       (p->tmr = ibv_reg_mr(p->pd, p->targets, sizeof p->targets, remote));
  for (int i = 0; ok && i < RQ; i++) {
    struct ibv_recv_wr wr = {.wr_id = 1}, *bad;
    ok = !ibv_post_recv(p->id->qp, &wr, &bad);
  }
  if (!ok) {
    printf("peer: setup failed: %s\n", strerror(errno));
    return NULL;
  }
  struct conn_data cd = {.version = 1, .credits = htobe16(RQ)};
  cd.target_sgl = (struct wire_sge){htobe64((uintptr_t)p->targets), htobe32(p->tmr->rkey), htobe32(2)};
  cd.data_buf = (struct wire_sge){htobe64((uintptr_t)p->ring), htobe32(p->rmr->rkey), htobe32(RING / 2)};
  struct rdma_conn_param cp = {.private_data = &cd, .private_data_len = sizeof cd, .responder_resources = 1,
                               .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7};
  struct conn_data reply;
  if (rdma_connect(p->id, &cp) || expect_event(p, RDMA_CM_EVENT_ESTABLISHED, &reply)) {
    printf("peer: connect failed: %s\n", strerror(errno));
    return NULL;
  }
  p->remote_addr = be64toh(reply.data_buf.addr);
  p->remote_key = be32toh(reply.data_buf.key);
  p->half = be32toh(reply.data_buf.length);
  return p;
}

static uint8_t byte_at(size_t i) { return (uint8_t)(i * 2654435761u >> 11) ^ (uint8_t)seed; }

/* One WRITE with immediate: len bytes into the listener's ring at off, the immediate as given. */
static int peer_write(struct peer *p, uint32_t off, uint32_t len, uint32_t imm) {
  for (uint32_t i = 0; i < len; i++) p->sbuf[i] = byte_at(off + i);
  struct ibv_sge sg = {(uintptr_t)p->sbuf, len, p->smr->lkey};
  struct ibv_send_wr wr = {.wr_id = 2, .sg_list = &sg, .num_sge = len ? 1 : 0, .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
                           .send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(imm)},
                     *bad;
  wr.wr.rdma.remote_addr = p->remote_addr + off;
  wr.wr.rdma.rkey = p->remote_key;
  if (ibv_post_send(p->id->qp, &wr, &bad)) return -1;
  const double give_up = now_s() + 10;
  while (now_s() < give_up) {
    struct ibv_wc wc;
    int n = ibv_poll_cq(p->cq, 1, &wc);
    if (n < 0) return -1;
    if (n == 1 && wc.wr_id == 2) return wc.status == IBV_WC_SUCCESS ? 0 : -1;
    if (n == 1 && wc.status == IBV_WC_SUCCESS) { /* the listener's credits: give the WQE back */
      struct ibv_recv_wr rwr = {.wr_id = 1}, *rbad;
      if (ibv_post_recv(p->id->qp, &rwr, &rbad)) return -1;
    }
  }
  return -1;
}

static void peer_close(struct peer *p) {
  if (p->id) {
    rdma_disconnect(p->id);
    if (p->id->qp) rdma_destroy_qp(p->id);
  }
  if (p->tmr) ibv_dereg_mr(p->tmr);
  if (p->smr) ibv_dereg_mr(p->smr);
  if (p->rmr) ibv_dereg_mr(p->rmr);
  if (p->cq) ibv_destroy_cq(p->cq);
  if (p->pd) ibv_dealloc_pd(p->pd);
  if (p->id) rdma_destroy_id(p->id);
  if (p->ch) rdma_destroy_event_channel(p->ch);
  free(p->ring);
  free(p->sbuf);
  memset(p, 0, sizeof *p);
}

/* The listener's side of a new connection from a hostile peer: -1 if it did not connect. */
static int accept_peer(int l, struct peer *p) {
  pthread_t t;
  void *ret = NULL;
  memset(p, 0, sizeof *p);
  pthread_create(&t, NULL, peer_connect, p);
  int s = raccept(l, NULL, NULL);
  pthread_join(t, &ret);
  CHECK(s >= 0 && ret == p, "connect: raccept %d, peer %s", s, ret ? "connected" : "failed");
  if (s >= 0 && ret != p) rclose(s);
  return ret == p ? s : -1;
}

static int equal_to_stream(const uint8_t *buf, uint32_t off, uint32_t len) {
  for (uint32_t i = 0; i < len; i++)
    if (buf[i] != byte_at(off + i)) return 0;
  return 1;
}

static uint8_t got[1 << 20];

/* The largest message an rsocket sends fills a ring half: it arrives whole. */
static void honest_half(int l) {
  struct peer p;
  int s = accept_peer(l, &p);
  if (s < 0) return;
  CHECK(p.half > 0 && p.half <= sizeof got, "ring half %u", p.half);
  CHECK(peer_write(&p, 0, p.half, msg(OP_DATA, p.half)) == 0, "write a ring half");
  ssize_t n = rrecv(s, got, p.half, MSG_WAITALL);
  CHECK(n == (ssize_t)p.half && equal_to_stream(got, 0, p.half), "rrecv of a ring half: %zd", n);
  CHECK(rclose(s) == 0, "rclose");
  peer_close(&p);
}

/* A control word librdmacm does not define takes a receive and nothing else. */
static void unknown_control(int l) {
  struct peer p;
  int s = accept_peer(l, &p);
  if (s < 0) return;
  uint32_t len = 1 + rand() % 1000;
  CHECK(peer_write(&p, 0, 0, msg(OP_CTRL, 5)) == 0, "unknown control word");
  CHECK(peer_write(&p, 0, len, msg(OP_DATA, len)) == 0, "data");
  ssize_t n = rrecv(s, got, sizeof got, 0);
  CHECK(n == (ssize_t)len && equal_to_stream(got, 0, len), "rrecv after an unknown control word: %zd of %u", n, len);
  CHECK(rclose(s) == 0, "rclose");
  peer_close(&p);
}

/* A length longer than a ring half (the peer wrote 16 bytes) cannot come from an rsocket:
 * data before it is read, then the socket fails with EPROTO and takes nothing more. A forged
 * length of 0 stands for one byte past the ring half the listener offered. */
static void forged_length(int l, uint32_t forged, int data_before) {
  struct peer p;
  int s = accept_peer(l, &p);
  if (s < 0) return;
  if (!forged) forged = p.half + 1;
  uint32_t before = data_before ? 1 + rand() % 1000 : 0;
  if (before) CHECK(peer_write(&p, 0, before, msg(OP_DATA, before)) == 0, "data before");
  CHECK(peer_write(&p, before, 16, msg(OP_DATA, forged)) == 0, "forged length %#x", forged);
  CHECK(peer_write(&p, before + 16, 100, msg(OP_DATA, 100)) == 0, "data after");
  if (before) {
    ssize_t n = rrecv(s, got, sizeof got, 0);
    CHECK(n == (ssize_t)before && equal_to_stream(got, 0, before), "data before the forged length: %zd of %u", n,
          before);
  }
  errno = 0;
  ssize_t n = rrecv(s, got, sizeof got, 0);
  CHECK(n == -1 && errno == EPROTO, "rrecv after a forged length %#x: %zd (%s)", forged, n, strerror(errno));
  struct pollfd pf = {s, POLLIN | POLLOUT, 0};
  CHECK(rpoll(&pf, 1, 0) == 1 && (pf.revents & POLLERR), "rpoll revents %#x", pf.revents);
  errno = 0;
  n = rsend(s, got, 10, 0);
  CHECK(n == -1 && errno == EPROTO, "rsend on the failed socket: %zd (%s)", n, strerror(errno));
  int err = 0;
  socklen_t elen = sizeof err;
  CHECK(rgetsockopt(s, SOL_SOCKET, SO_ERROR, &err, &elen) == 0 && err == EPROTO, "SO_ERROR %d", err);
  errno = 0;
  n = rrecv(s, got, sizeof got, MSG_DONTWAIT);
  CHECK(n == -1 && errno == ECONNRESET, "rrecv once the error was taken: %zd (%s)", n, strerror(errno));
  CHECK(rclose(s) == 0, "rclose");
  peer_close(&p);
}

/* Until the listener's first message (its credits and second ring half) has reached the peer.
 * That is its last one; it is done once its ACK is back (peer_linger). */
static int peer_wait_credits(struct peer *p) {
  const double give_up = now_s() + 10;
  while (now_s() < give_up) {
    struct ibv_wc wc;
    int n = ibv_poll_cq(p->cq, 1, &wc);
    if (n < 0) return -1;
    if (n == 1) return wc.wr_id == 1 && wc.status == IBV_WC_SUCCESS ? 0 : -1;
  }
  return -1;
}

/* The peer's receive completion says the listener's message arrived, not that the listener
 * has its ACK: the peer's QP stays up for the listener's whole retry span, so that an ACK lost
 * on the way is answered again when the listener resends (a duplicate is ACKed once more). */
static void peer_linger(struct peer *p) {
  struct ibv_qp_attr a;
  struct ibv_qp_init_attr ia;
  double span = 1.0; /* timeout 14 (67 ms) x 8 sends, with room */
  if (!ibv_query_qp(p->id->qp, &a, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT, &ia) && a.timeout)
    span = 2.0 * (a.retry_cnt + 1) * 4.096e-6 * (double)(1ull << a.timeout);
  const double until = now_s() + span;
  while (now_s() < until) {
    struct ibv_wc wc;
    if (ibv_poll_cq(p->cq, 1, &wc) <= 0) {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
  }
}

/* A peer whose QP goes away without a word (no DISCONNECT, no DREQ: its cm id stays) while the
 * connection is idle: a socket with SO_KEEPALIVE finds out at its next keepalive, which the
 * peer's device drops; one without it hears nothing. */
static void keepalive_finds_a_dead_peer(int l, int keepalive) {
  struct peer p;
  int s = accept_peer(l, &p);
  if (s < 0) return;
  int on = 1, idle = 1;
  if (keepalive)
    CHECK(rsetsockopt(s, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on) == 0 &&
              rsetsockopt(s, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle) == 0,
          "SO_KEEPALIVE, TCP_KEEPIDLE 1 s");
  errno = 0;
  CHECK(rrecv(s, got, sizeof got, MSG_DONTWAIT) == -1 && errno == EAGAIN, "nothing to read yet: EAGAIN");
  CHECK(peer_wait_credits(&p) == 0, "the listener's credits reached the peer");
  peer_linger(&p);
  rdma_destroy_qp(p.id);
  struct pollfd pf = {s, POLLIN, 0};
  if (!keepalive) {
    CHECK(rpoll(&pf, 1, 3000) == 0, "without keepalive an idle socket does not notice (revents %#x)", pf.revents);
  } else {
    int n = rpoll(&pf, 1, 30000); /* a bound: the keepalive goes after 1 to 2 s */
    CHECK(n == 1 && (pf.revents & POLLERR), "rpoll wakes with POLLERR (%d, revents %#x)", n, pf.revents);
    errno = 0;
    ssize_t r = rrecv(s, got, sizeof got, 0);
    CHECK(r == -1 && errno == ETIMEDOUT, "rrecv: ETIMEDOUT, as TCP's keepalive says it (%zd, %s)", r, strerror(errno));
  }
  CHECK(rclose(s) == 0, "rclose");
  peer_close(&p);
}

int main(int argc, char **argv) {
  seed = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 0) : (unsigned)time(NULL);
  seeded = 1;
  srand(seed);
  int l = rsocket(AF_INET, SOCK_STREAM, 0);
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof addr;
  if (l < 0 || rbind(l, (struct sockaddr *)&addr, sizeof addr) || rlisten(l, 4) ||
      rgetsockname(l, (struct sockaddr *)&addr, &alen)) {
    printf("listener: %s\n", strerror(errno));
    return 1;
  }
  honest_half(l);
  unknown_control(l);
  forged_length(l, 0x1fffffff, 0);     /* the largest an immediate carries */
  forged_length(l, 0, 1);              /* one past the ring half, after data */
  keepalive_finds_a_dead_peer(l, 0);
  keepalive_finds_a_dead_peer(l, 1);
  rclose(l);
  printf("rsocket_hostile: %d passed, %d failed\n", passed, failed);
  return failed != 0;
}
