/* rdma-check: an RC exchange where every byte is checked on both sides, written against plain
 * libibverbs so that the same binary runs on uroce (through uroce-run) and on any other RoCE
 * device, e.g. Linux Soft-RoCE. The client does RDMA WRITE (multi-packet), WRITE with
 * immediate, SEND with immediate, SEND, RDMA READ, FETCH_AND_ADD and CMP_AND_SWAP; it checks the
 * READ data and the atomic results, the server checks everything that landed in its memory and
 * its receive completions, and reports over TCP. With -w (both sides) a memory window follows:
 * the server binds a type 2 window over part of its memory (IBV_WR_BIND_MW), the client WRITEs
 * and READs through it, invalidates it with SEND_WITH_INV (the server's receive must name its
 * rkey), and a last WRITE through it must fail with REM_ACCESS_ERR, writing nothing.
 *   server: rdma-check [-d DEV] [-g GID_INDEX] [-p PORT] [-m MTU] [-w]
 *   client: rdma-check [-d DEV] [-g GID_INDEX] [-p PORT] [-m MTU] [-w] SERVER_IP
 * Exit 0 and "rdma-check: all checks passed" when both sides agree. */
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { kRegion = 1 << 20, kReadOff = 0, kReadLen = 65536, kWriteOff = 256 << 10, kWriteLen = 100000,
       kWimmOff = kWriteOff + kWriteLen, kWimmLen = 5000, kAtomicOff = 512 << 10, kRecvOff = 600 << 10,
       kRecvLen = 16384, kSendImmLen = 3000, kSendLen = 10000, kMwOff = 768 << 10, kMwLen = 20000,
       kMwAt = 4096 /* where in the window the client writes */, kInvLen = 64 };

static int windows;  /* -w */
static int rxe;      /* the device is Linux Soft-RoCE */

static char failure[256];
#define FAIL(...) do { if (!failure[0]) snprintf(failure, sizeof failure, __VA_ARGS__); } while (0)

static uint8_t pat(uint32_t i, int k) { return (uint8_t)(i * 31u + (uint32_t)k * 7u + (i >> 11)); }
static void fill(uint8_t* p, uint32_t n, int k) { for (uint32_t i = 0; i < n; ++i) p[i] = pat(i, k); }
static int same(const uint8_t* p, uint32_t n, int k) {
  for (uint32_t i = 0; i < n; ++i)
    if (p[i] != pat(i, k)) return 0;
  return 1;
}
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}
static int poll_one(struct ibv_cq* cq, struct ibv_wc* wc) {
  double end = now() + 60;
  for (unsigned spins = 0;; ++spins) {
    if (ibv_poll_cq(cq, 1, wc) == 1) return 1;
    if ((spins & 1023) == 1023) {
      if (now() > end) return 0;
      sched_yield();
    }
  }
}
static int xfer(int fd, void* b, size_t n, int rd) {
  char* p = b;
  while (n) {
    ssize_t r = rd ? read(fd, p, n) : write(fd, p, n);
    if (r <= 0) return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}
struct dest { uint32_t qpn, psn, rkey; uint64_t addr; uint8_t gid[16]; };

struct res {
  struct ibv_context* ctx;
  struct ibv_pd* pd;
  struct ibv_mr* mr;
  struct ibv_mr* bind_mr;  /* -w: the memory windows may be bound to */
  struct ibv_mw* mw;
  struct ibv_cq* cq;
  struct ibv_qp* qp;
  uint8_t* mem;
  union ibv_gid gid;
  int fd;
  struct dest me, peer;
};

static int open_resources(struct res* r, const char* devname, int gidx) {
  int n;
  struct ibv_device** list = ibv_get_device_list(&n);
  struct ibv_device* dev = NULL;
  for (int i = 0; list && i < n; ++i)
    if (!devname || !strcmp(ibv_get_device_name(list[i]), devname)) { dev = list[i]; break; }
  if (!dev) { fprintf(stderr, "rdma-check: no device\n"); return 1; }
  rxe = !strncmp(ibv_get_device_name(dev), "rxe", 3);
  r->ctx = ibv_open_device(dev);
  r->pd = r->ctx ? ibv_alloc_pd(r->ctx) : NULL;
  r->mem = aligned_alloc(4096, kRegion);
  memset(r->mem, 0, kRegion);
  r->mr = r->pd ? ibv_reg_mr(r->pd, r->mem, kRegion, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                                      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC) : NULL;
  if (windows && r->pd) {
    r->bind_mr = ibv_reg_mr(r->pd, r->mem + kMwOff, 65536, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
    r->mw = ibv_alloc_mw(r->pd, IBV_MW_TYPE_2);
    if (!r->bind_mr || !r->mw) { fprintf(stderr, "rdma-check: memory window setup failed\n"); return 1; }
  }
  r->cq = r->ctx ? ibv_create_cq(r->ctx, 64, NULL, NULL, 0) : NULL;
  struct ibv_qp_init_attr qa = {.send_cq = r->cq, .recv_cq = r->cq, .qp_type = IBV_QPT_RC,
                                .cap = {.max_send_wr = 32, .max_recv_wr = 32, .max_send_sge = 1, .max_recv_sge = 1}};
  r->qp = r->cq ? ibv_create_qp(r->pd, &qa) : NULL;
  if (!r->qp || !r->mr || ibv_query_gid(r->ctx, 1, gidx, &r->gid)) { fprintf(stderr, "rdma-check: setup failed\n"); return 1; }
  return 0;
}

/* Out of band: one TCP connection; both sides send their destination. */
static int exchange(struct res* r, const char* server, int port) {
  int fd;
  if (!server) {
    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (bind(ls, (struct sockaddr*)&a, sizeof a) || listen(ls, 1)) { perror("listen"); return 1; }
    fd = accept(ls, NULL, NULL);
    close(ls);
  } else {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, server, &a.sin_addr);
    fd = -1;
    for (int i = 0; i < 300 && fd < 0; ++i) {
      fd = socket(AF_INET, SOCK_STREAM, 0);
      if (connect(fd, (struct sockaddr*)&a, sizeof a)) { close(fd); fd = -1; usleep(100000); }
    }
  }
  if (fd < 0) { fprintf(stderr, "rdma-check: no out-of-band connection\n"); return 1; }
  r->fd = fd;
  srand48(getpid() * 7919 + time(NULL));
  struct dest me = {r->qp->qp_num, (uint32_t)lrand48() & 0xffffff, r->mr->rkey, (uintptr_t)r->mem, {0}};
  memcpy(me.gid, r->gid.raw, 16);
  r->me = me;
  if (xfer(fd, &r->me, sizeof r->me, 0) || xfer(fd, &r->peer, sizeof r->peer, 1)) { fprintf(stderr, "exchange failed\n"); return 1; }
  return 0;
}

/* RESET -> INIT -> RTR -> RTS, as ibv_rc_pingpong does it. */
static int connect_qp(struct res* r, int gidx, enum ibv_mtu mtu) {
  struct ibv_qp_attr at = {.qp_state = IBV_QPS_INIT, .port_num = 1,
                           .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                              IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC};
  int rc = ibv_modify_qp(r->qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  memset(&at, 0, sizeof at);
  at.qp_state = IBV_QPS_RTR;
  at.path_mtu = mtu;
  at.dest_qp_num = r->peer.qpn;
  at.rq_psn = r->peer.psn;
  at.max_dest_rd_atomic = 4;
  at.min_rnr_timer = 12;
  at.ah_attr.is_global = 1;
  memcpy(at.ah_attr.grh.dgid.raw, r->peer.gid, 16);
  at.ah_attr.grh.sgid_index = (uint8_t)gidx;
  at.ah_attr.grh.hop_limit = 64;
  at.ah_attr.port_num = 1;
  rc = rc || ibv_modify_qp(r->qp, &at, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                           IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  memset(&at, 0, sizeof at);
  at.qp_state = IBV_QPS_RTS;
  at.sq_psn = r->me.psn;
  at.timeout = 14;
  at.retry_cnt = 7;
  at.rnr_retry = 7;
  at.max_rd_atomic = 4;
  rc = rc || ibv_modify_qp(r->qp, &at, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                           IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
  if (rc) { fprintf(stderr, "rdma-check: modify_qp failed\n"); return 1; }
  return 0;
}

/* The server receives WRITE_WITH_IMM, SEND_WITH_IMM and SEND, in that order, then checks its
 * memory and reports. */
/* -w: binds the type 2 window over [kMwOff, kMwOff + kMwLen) for remote WRITE and READ; its rkey. */
static uint32_t bind_window(struct res* r) {
  const uint32_t rkey = ibv_inc_rkey(r->mw->rkey);
  struct ibv_send_wr w = {.wr_id = 50, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED}, *bad;
  w.bind_mw.mw = r->mw;
  w.bind_mw.rkey = rkey;
  w.bind_mw.bind_info = (struct ibv_mw_bind_info){.mr = r->bind_mr, .addr = (uintptr_t)(r->mem + kMwOff),
                                                  .length = kMwLen,
                                                  .mw_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
  struct ibv_wc wc;
  if (ibv_post_send(r->qp, &w, &bad) || !poll_one(r->cq, &wc) || wc.status != IBV_WC_SUCCESS ||
      wc.opcode != IBV_WC_BIND_MW)
    FAIL("bind_mw failed");
  return rkey;
}

static int run_server(struct res* r) {
  struct ibv_wc wc;
  char msg[256] = "";
  const int receives = windows ? 4 : 3;
  for (uint64_t i = 0; i < (uint64_t)receives; ++i) {
    struct ibv_sge s = {(uintptr_t)(r->mem + kRecvOff + i * kRecvLen), kRecvLen, r->mr->lkey};
    struct ibv_recv_wr w = {.wr_id = 10 + i, .sg_list = &s, .num_sge = 1}, *bad;
    if (ibv_post_recv(r->qp, &w, &bad)) FAIL("post_recv");
  }
  uint32_t mw_rkey = windows ? bind_window(r) : 0;
  if (xfer(r->fd, "R", 1, 0) || (windows && xfer(r->fd, &mw_rkey, 4, 0))) return 1;  /* receives posted: go */
  uint32_t want_len[3] = {kWimmLen, kSendImmLen, kSendLen}, want_imm[3] = {0x1001, 0x1002, 0};
  for (int i = 0; i < 3; ++i) {
    if (!poll_one(r->cq, &wc)) { FAIL("receive %d never completed", i); break; }
    if (wc.status != IBV_WC_SUCCESS || wc.wr_id != (uint64_t)(10 + i) || wc.byte_len != want_len[i])
      FAIL("receive %d: status %s wr_id %lu len %u", i, ibv_wc_status_str(wc.status), (unsigned long)wc.wr_id, wc.byte_len);
    int imm = (wc.wc_flags & IBV_WC_WITH_IMM) != 0;
    if (imm != (want_imm[i] != 0) || (imm && ntohl(wc.imm_data) != want_imm[i])) FAIL("receive %d: immediate", i);
    if (i == 0 && wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM) FAIL("write-with-imm opcode");
  }
  if (windows) {  /* the SEND with invalidate */
    if (!poll_one(r->cq, &wc)) FAIL("the SEND with invalidate never completed");
    /* rxe (Linux 6.1) reports the kernel's IB_WC_WITH_INVALIDATE, 1 << 2, as it is: libibverbs'
     * IBV_WC_IP_CSUM_OK. The rkey is right either way, and the client's last WRITE proves the
     * window gone. */
    else if (wc.status != IBV_WC_SUCCESS || wc.wr_id != 13 || wc.byte_len != kInvLen ||
             !(wc.wc_flags & (IBV_WC_WITH_INV | (rxe ? 1u << 2 : 0))) || wc.invalidated_rkey != mw_rkey)
      FAIL("SEND with invalidate: status %s, flags %#x, invalidated rkey %#x of %#x", ibv_wc_status_str(wc.status),
           wc.wc_flags, wc.invalidated_rkey, mw_rkey);
  }
  char done;
  if (xfer(r->fd, &done, 1, 1)) FAIL("client vanished");
  uint8_t* mem = r->mem;
  if (!same(mem + kWriteOff, kWriteLen, 2)) FAIL("RDMA WRITE data differs");
  if (!same(mem + kWimmOff, kWimmLen, 3)) FAIL("WRITE with immediate data differs");
  if (!same(mem + kRecvOff + kRecvLen, kSendImmLen, 4)) FAIL("SEND with immediate data differs");
  if (!same(mem + kRecvOff + 2 * kRecvLen, kSendLen, 5)) FAIL("SEND data differs");
  uint64_t counter;
  memcpy(&counter, mem + kAtomicOff, 8);
  if (counter != 777) FAIL("atomic counter is %lu, not 777", (unsigned long)counter);
  if (windows && !same(mem + kMwOff + kMwAt, kMwLen - kMwAt, 6)) FAIL("data written through the window differs");
  snprintf(msg, sizeof msg, "%s", failure[0] ? failure : "server-ok");
  xfer(r->fd, msg, sizeof msg, 0);
  printf("rdma-check server: %s\n", msg);
  return failure[0] ? 1 : 0;
}

/* Posts one signaled request and waits for its successful completion. */
static int post_and_wait(struct res* r, struct ibv_send_wr* w) {
  struct ibv_send_wr* bad;
  struct ibv_wc wc;
  if (ibv_post_send(r->qp, w, &bad)) return 0;
  if (!poll_one(r->cq, &wc)) return 0;
  if (wc.status != IBV_WC_SUCCESS) FAIL("wr %lu: %s", (unsigned long)w->wr_id, ibv_wc_status_str(wc.status));
  return wc.status == IBV_WC_SUCCESS;
}

/* WRITE (multi-packet), WRITE with immediate, SEND with immediate, SEND, each a new pattern. */
static void client_writes_and_sends(struct res* r, uint8_t* src) {
  struct { enum ibv_wr_opcode op; uint32_t len, imm; uint64_t raddr; int k; } steps[] = {
      {IBV_WR_RDMA_WRITE, kWriteLen, 0, r->peer.addr + kWriteOff, 2},
      {IBV_WR_RDMA_WRITE_WITH_IMM, kWimmLen, 0x1001, r->peer.addr + kWimmOff, 3},
      {IBV_WR_SEND_WITH_IMM, kSendImmLen, 0x1002, 0, 4},
      {IBV_WR_SEND, kSendLen, 0, 0, 5},
  };
  for (int i = 0; i < 4 && !failure[0]; ++i) {
    fill(src, steps[i].len, steps[i].k);
    struct ibv_sge s = {(uintptr_t)src, steps[i].len, r->mr->lkey};
    struct ibv_send_wr w = {.wr_id = (uint64_t)i, .sg_list = &s, .num_sge = 1, .opcode = steps[i].op,
                            .send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(steps[i].imm)};
    w.wr.rdma.remote_addr = steps[i].raddr;
    w.wr.rdma.rkey = r->peer.rkey;
    if (!post_and_wait(r, &w)) FAIL("step %d failed", i);
  }
}

/* READ back the peer's pattern; FETCH_AND_ADD 5 four times, then CMP_AND_SWAP 20 -> 777. */
static void client_read_and_atomics(struct res* r, uint8_t* src) {
  memset(src, 0, kReadLen);
  struct ibv_sge rs = {(uintptr_t)src, kReadLen, r->mr->lkey};
  struct ibv_send_wr rw = {.wr_id = 9, .sg_list = &rs, .num_sge = 1, .opcode = IBV_WR_RDMA_READ,
                           .send_flags = IBV_SEND_SIGNALED};
  rw.wr.rdma.remote_addr = r->peer.addr + kReadOff;
  rw.wr.rdma.rkey = r->peer.rkey;
  if (!post_and_wait(r, &rw)) FAIL("READ failed");
  else if (!same(src, kReadLen, 1)) FAIL("READ data differs");
  uint64_t* res = (uint64_t*)(r->mem + kAtomicOff + 64);
  for (int i = 0; i < 5 && !failure[0]; ++i) {
    struct ibv_sge as = {(uintptr_t)res, 8, r->mr->lkey};
    struct ibv_send_wr aw = {.wr_id = 20 + (uint64_t)i, .sg_list = &as, .num_sge = 1,
                             .opcode = i < 4 ? IBV_WR_ATOMIC_FETCH_AND_ADD : IBV_WR_ATOMIC_CMP_AND_SWP,
                             .send_flags = IBV_SEND_SIGNALED};
    aw.wr.atomic.remote_addr = r->peer.addr + kAtomicOff;
    aw.wr.atomic.rkey = r->peer.rkey;
    aw.wr.atomic.compare_add = i < 4 ? 5 : 20;
    aw.wr.atomic.swap = 777;
    if (!post_and_wait(r, &aw)) FAIL("atomic %d failed", i);
    else if (*res != (uint64_t)(i < 4 ? 5 * i : 20)) FAIL("atomic %d returned %lu", i, (unsigned long)*res);
  }
}

/* -w: WRITE and READ through the peer's window, SEND with invalidate, then a WRITE that must fail. */
static void client_window(struct res* r, uint8_t* src, uint32_t rkey) {
  const uint32_t len = kMwLen - kMwAt;
  fill(src, len, 6);
  struct ibv_sge s = {(uintptr_t)src, len, r->mr->lkey};
  struct ibv_send_wr w = {.wr_id = 30, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
                          .send_flags = IBV_SEND_SIGNALED};
  w.wr.rdma.remote_addr = r->peer.addr + kMwOff + kMwAt;
  w.wr.rdma.rkey = rkey;
  if (!post_and_wait(r, &w)) FAIL("WRITE through the window failed");
  memset(src, 0, len);
  w.wr_id = 31;
  w.opcode = IBV_WR_RDMA_READ;
  if (!failure[0] && !post_and_wait(r, &w)) FAIL("READ through the window failed");
  else if (!failure[0] && !same(src, len, 6)) FAIL("READ through the window differs");
  struct ibv_sge is = {(uintptr_t)src, kInvLen, r->mr->lkey};
  struct ibv_send_wr inv = {.wr_id = 32, .sg_list = &is, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_INV,
                            .send_flags = IBV_SEND_SIGNALED, .invalidate_rkey = rkey};
  if (!failure[0] && !post_and_wait(r, &inv)) FAIL("SEND with invalidate failed");
  if (failure[0]) return;
  fill(src, len, 7);
  w.wr_id = 33;
  w.opcode = IBV_WR_RDMA_WRITE;
  struct ibv_send_wr* bad;
  struct ibv_wc wc;
  if (ibv_post_send(r->qp, &w, &bad) || !poll_one(r->cq, &wc)) FAIL("WRITE after the invalidation: no completion");
  else if (wc.status != IBV_WC_REM_ACCESS_ERR)
    FAIL("WRITE after the invalidation: %s, not REM_ACCESS_ERR", ibv_wc_status_str(wc.status));
}

static int run_client(struct res* r) {
  char go, msg[256] = "";
  uint32_t mw_rkey = 0;
  if (xfer(r->fd, &go, 1, 1) || (windows && xfer(r->fd, &mw_rkey, 4, 1))) return 1;
  uint8_t* src = r->mem + kWriteOff;  /* our own staging area */
  client_writes_and_sends(r, src);
  client_read_and_atomics(r, src);
  if (windows && !failure[0]) client_window(r, src, mw_rkey);
  xfer(r->fd, "D", 1, 0);
  if (xfer(r->fd, msg, sizeof msg, 1)) snprintf(msg, sizeof msg, "no answer from the server");
  if (!failure[0] && strcmp(msg, "server-ok")) FAIL("server: %s", msg);
  printf("rdma-check: %s\n", failure[0] ? failure : "all checks passed");
  return failure[0] ? 1 : 0;
}

int main(int argc, char** argv) {
  const char* devname = NULL;
  int gidx = 0, port = 18600, opt;
  enum ibv_mtu mtu = IBV_MTU_1024;
  while ((opt = getopt(argc, argv, "d:g:p:m:w")) != -1) {
    if (opt == 'd') devname = optarg;
    else if (opt == 'g') gidx = atoi(optarg);
    else if (opt == 'p') port = atoi(optarg);
    else if (opt == 'w') windows = 1;
    else if (opt == 'm') mtu = atoi(optarg) == 4096 ? IBV_MTU_4096 : atoi(optarg) == 2048 ? IBV_MTU_2048 : IBV_MTU_1024;
    else { fprintf(stderr, "usage: rdma-check [-d dev] [-g gid] [-p port] [-m mtu] [-w] [server]\n"); return 2; }
  }
  const char* server = optind < argc ? argv[optind] : NULL;
  struct res r;
  memset(&r, 0, sizeof r);
  if (open_resources(&r, devname, gidx) || exchange(&r, server, port) || connect_qp(&r, gidx, mtu)) return 1;
  fill(r.mem + kReadOff, kReadLen, 1);  /* what the peer reads from us */
  return server ? run_client(&r) : run_server(&r);
}
