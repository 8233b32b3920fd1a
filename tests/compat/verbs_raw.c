/* Raw packet QPs and flow steering through libibverbs, as DPDK-style programs use them: frames
 * a raw QP sends leave on the device's interface (loopback here) byte for byte, and arrive at
 * the raw QP whose ibv_create_flow rule they match, the lowest priority first. A frame longer
 * than the receive is a length error; a QP with rules cannot be destroyed; rules are refused
 * on other QPs and for what uroce does not match (tunnels). An RSS QP spreads the frames of its
 * rule over four work queues by a Toeplitz hash of the source address: every frame arrives,
 * once, at one queue, and more than one queue gets some. The raw port on the interface is
 * open while raw QPs are, and only then. The addresses and ports are drawn
 * per run, so that other programs' frames on the interface match nothing here.
 *   usage: verbs_raw [seed] */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "rc_setup.h"

#define SLOT 2048
#define FRAMES 24

static uint8_t dst_mac[6], src_mac[6];
static uint16_t port_a, port_b;
static uint8_t *buf;
static struct ibv_mr *mr;

struct flow_eth_ipv4_udp {
  struct ibv_flow_attr attr;
  struct ibv_flow_spec_eth eth;
  struct ibv_flow_spec_ipv4_ext ip;
  struct ibv_flow_spec_tcp_udp udp;
};

/* A rule on our MACs and, with udp_port, IPv4 to 2.2.2.2 and that UDP destination port. */
static struct ibv_flow *steer(struct ibv_qp *qp, uint16_t priority, uint16_t udp_port) {
  struct flow_eth_ipv4_udp f = {.attr = {.type = IBV_FLOW_ATTR_NORMAL, .size = sizeof f.attr, .priority = priority,
                                         .num_of_specs = udp_port ? 3 : 1, .port = 1}};
  f.eth.type = IBV_FLOW_SPEC_ETH;
  f.eth.size = sizeof f.eth;
  memcpy(f.eth.val.dst_mac, dst_mac, 6);
  memset(f.eth.mask.dst_mac, 0xff, 6);
  memcpy(f.eth.val.src_mac, src_mac, 6);
  memset(f.eth.mask.src_mac, 0xff, 6);
  f.ip.type = IBV_FLOW_SPEC_IPV4_EXT;
  f.ip.size = sizeof f.ip;
  f.ip.val.dst_ip = htonl(0x02020202);
  f.ip.mask.dst_ip = 0xffffffff;
  f.ip.val.proto = 17;
  f.ip.mask.proto = 0xff;
  f.udp.type = IBV_FLOW_SPEC_UDP;
  f.udp.size = sizeof f.udp;
  f.udp.val.dst_port = htons(udp_port);
  f.udp.mask.dst_port = 0xffff;
  return ibv_create_flow(qp, &f.attr);
}

/* This process's packet sockets: its fds whose socket inode /proc/net/packet lists. */
static int packet_sockets(void) {
  char line[512], path[64], link[64];
  unsigned long inodes[64];
  int n = 0, mine = 0;
  FILE *f = fopen("/proc/net/packet", "r");
  if (!f) return -1;
  while (n < 64 && fgets(line, sizeof line, f)) {
    unsigned long ino;
    /* sk RefCnt Type Proto Iface R Rmem User Inode */
    if (sscanf(line, "%*s %*s %*s %*s %*s %*s %*s %*s %lu", &ino) == 1) inodes[n++] = ino;
  }
  fclose(f);
  for (int fd = 0; fd < 1024; fd++) {
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t l = readlink(path, link, sizeof link - 1);
    unsigned long ino;
    if (l <= 0) continue;
    link[l] = 0;
    if (sscanf(link, "socket:[%lu]", &ino) != 1) continue;
    for (int i = 0; i < n; i++) mine += inodes[i] == ino;
  }
  return mine;
}

static uint8_t byte_at(uint32_t frame, uint32_t i) { return (uint8_t)((frame * 131 + i * 7) ^ seed); }

static uint8_t src_ip[4] = {1, 1, 1, 1};

/* Frame number n into slot 0 of buf: our MACs, IPv4 src_ip -> 2.2.2.2, UDP to port; len bytes. */
static void build(uint32_t n, uint16_t port, uint32_t len) {
  uint8_t *f = buf;
  memcpy(f, dst_mac, 6);
  memcpy(f + 6, src_mac, 6);
  f[12] = 0x08, f[13] = 0x00;
  uint8_t ip[20] = {0x45, 0, (uint8_t)((len - 14) >> 8), (uint8_t)(len - 14), 0, 0, 0x40, 0, 64, 17, 0, 0,
                    1, 1, 1, 1, 2, 2, 2, 2};
  memcpy(ip + 12, src_ip, 4);
  memcpy(f + 14, ip, 20);
  uint8_t udp[8] = {0x30, 0x39, (uint8_t)(port >> 8), (uint8_t)port, (uint8_t)((len - 34) >> 8), (uint8_t)(len - 34), 0, 0};
  memcpy(f + 34, udp, 8);
  for (uint32_t i = 42; i < len; i++) f[i] = byte_at(n, i);
}

static int send_frame(struct ibv_qp *qp, struct ibv_cq *cq, uint32_t len) {
  struct ibv_sge s = {(uintptr_t)buf, len, mr->lkey};
  struct ibv_send_wr w = {.wr_id = 99, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
                          .send_flags = IBV_SEND_SIGNALED}, *bad;
  if (ibv_post_send(qp, &w, &bad)) return -1;
  struct ibv_wc wc = one_wc(cq);
  return wc.status == IBV_WC_SUCCESS && wc.wr_id == 99 ? 0 : -1;
}

static void post(struct ibv_qp *qp, uint64_t slot, uint32_t len) {
  struct ibv_sge s = {(uintptr_t)buf + SLOT * slot, len, mr->lkey};
  struct ibv_recv_wr w = {.wr_id = slot, .sg_list = &s, .num_sge = 1}, *bad;
  CHECK(ibv_post_recv(qp, &w, &bad) == 0, "post_recv");
}

static struct ibv_qp *raw_qp(struct ibv_pd *pd, struct ibv_cq *cq) {
  struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RAW_PACKET,
                                .cap = {.max_send_wr = 8, .max_recv_wr = FRAMES + 4, .max_send_sge = 1, .max_recv_sge = 1}};
  struct ibv_qp *qp = ibv_create_qp(pd, &ia);
  if (!qp) return NULL;
  CHECK(raw_to_rts(qp) == 0, "raw QP to RTS");
  return qp;
}

/* Receive-side scaling: four work queues (two CQs), a table of them, an RSS QP over it. */
static void rss(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_qp *tx, struct ibv_cq *scq) {
  struct ibv_cq *cqs[2] = {ibv_create_cq(ctx, 64, NULL, NULL, 0), ibv_create_cq(ctx, 64, NULL, NULL, 0)};
  struct ibv_wq *wqs[4];
  for (int i = 0; i < 4; i++) {
    struct ibv_wq_init_attr wa = {.wq_type = IBV_WQT_RQ, .max_wr = 16, .max_sge = 1, .pd = pd, .cq = cqs[i % 2]};
    wqs[i] = ibv_create_wq(ctx, &wa);
    CHECK(wqs[i] != NULL, "work queue %d: %s", i, strerror(errno));
    if (!wqs[i]) return;
    struct ibv_wq_attr ra = {.attr_mask = IBV_WQ_ATTR_STATE, .wq_state = IBV_WQS_RDY};
    CHECK(ibv_modify_wq(wqs[i], &ra) == 0 && wqs[i]->state == IBV_WQS_RDY, "work queue %d ready", i);
    for (uint64_t k = 0; k < 16; k++) {  /* room for all 16 frames: the hash may put them anywhere */
      struct ibv_sge sg = {(uintptr_t)buf + SLOT * (30 + (uint64_t)i * 4 + k % 4), SLOT, mr->lkey};
      struct ibv_recv_wr w = {.wr_id = (uint64_t)i, .sg_list = &sg, .num_sge = 1}, *bad;
      CHECK(ibv_post_wq_recv(wqs[i], &w, &bad) == 0, "post to work queue %d", i);
    }
  }
  struct ibv_rwq_ind_table_init_attr ta = {.log_ind_tbl_size = 2, .ind_tbl = wqs};
  struct ibv_rwq_ind_table *table = ibv_create_rwq_ind_table(ctx, &ta);
  CHECK(table != NULL, "indirection table: %s", strerror(errno));
  CHECK(ibv_destroy_wq(wqs[0]) == EBUSY, "a work queue in a table: EBUSY");
  uint8_t key[40];
  for (int i = 0; i < 40; i++) key[i] = (uint8_t)rand();
  struct ibv_qp_init_attr_ex qa = {
      .qp_type = IBV_QPT_RAW_PACKET,
      .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_RX_HASH | IBV_QP_INIT_ATTR_IND_TABLE,
      .pd = pd, .rwq_ind_tbl = table,
      .rx_hash_conf = {.rx_hash_function = IBV_RX_HASH_FUNC_TOEPLITZ, .rx_hash_key_len = 40, .rx_hash_key = key,
                       .rx_hash_fields_mask = IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4}};
  struct ibv_qp *qp = table ? ibv_create_qp_ex(ctx, &qa) : NULL;
  CHECK(qp != NULL, "RSS QP: %s", strerror(errno));
  if (!qp) return;
  CHECK(ibv_destroy_rwq_ind_table(table) == EBUSY, "a table an RSS QP uses: EBUSY");
  struct ibv_flow *f = steer(qp, 0, port_b);
  CHECK(f != NULL, "a rule on the RSS QP");
  int got[4] = {0}, exact = 0;
  for (uint32_t n = 0; n < 16; n++) {
    src_ip[0] = 10, src_ip[1] = (uint8_t)rand(), src_ip[2] = (uint8_t)rand(), src_ip[3] = (uint8_t)n;
    build(2000 + n, port_b, 128);
    CHECK(send_frame(tx, scq, 128) == 0, "send frame %u", n);
    struct ibv_wc wc = {.status = (enum ibv_wc_status)-1};
    for (double end = now_s() + 10; now_s() < end;)
      if (ibv_poll_cq(cqs[0], 1, &wc) == 1 || ibv_poll_cq(cqs[1], 1, &wc) == 1) break;
    int i = (int)wc.wr_id;
    if (wc.status == IBV_WC_SUCCESS && i >= 0 && i < 4 && wc.qp_num == wqs[i]->wq_num) {
      got[i]++;
      /* Which slot it took is the queue's business: find the frame among that queue's. */
      for (int k = 0; k < 4; k++) exact += memcmp(buf + SLOT * (30 + i * 4 + k), buf, 128) == 0;
    }
  }
  struct ibv_wc extra;
  CHECK(got[0] + got[1] + got[2] + got[3] == 16 && exact == 16, "16 frames, each at one work queue (%d %d %d %d, %d exact)",
        got[0], got[1], got[2], got[3], exact);
  CHECK((got[0] > 0) + (got[1] > 0) + (got[2] > 0) + (got[3] > 0) >= 2, "spread over more than one queue");
  CHECK(ibv_poll_cq(cqs[0], 1, &extra) == 0 && ibv_poll_cq(cqs[1], 1, &extra) == 0, "nothing more");
  CHECK(ibv_destroy_flow(f) == 0 && ibv_destroy_qp(qp) == 0, "destroy the rule and the RSS QP");
  CHECK(ibv_destroy_rwq_ind_table(table) == 0, "destroy the table");
  for (int i = 0; i < 4; i++) CHECK(ibv_destroy_wq(wqs[i]) == 0, "destroy work queue %d", i);
  CHECK(ibv_destroy_cq(cqs[0]) == 0 && ibv_destroy_cq(cqs[1]) == 0, "destroy their CQs");
}

int main(int argc, char **argv) {
  seed = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 0) : (unsigned)time(NULL) ^ (unsigned)getpid();
  seeded = 1;
  srand(seed);
  for (int i = 0; i < 6; i++) dst_mac[i] = (uint8_t)rand(), src_mac[i] = (uint8_t)rand();
  dst_mac[0] |= 1;                      /* a group address: what a NIC loops back, too */
  src_mac[0] = (src_mac[0] & ~1) | 2;  /* a locally administered station */
  port_a = (uint16_t)(20000 + rand() % 20000), port_b = (uint16_t)(port_a + 1);

  struct ibv_device **list;
  union ibv_gid gid;
  struct ibv_context *ctx = open_first(&list, &gid);
  if (!ctx) return printf("no device\n"), 1;
  struct ibv_pd *pd = ibv_alloc_pd(ctx);
  struct ibv_cq *scq = ibv_create_cq(ctx, 16, NULL, NULL, 0), *rcq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
  buf = calloc(SLOT, FRAMES + 24);
  mr = ibv_reg_mr(pd, buf, SLOT * (FRAMES + 24), IBV_ACCESS_LOCAL_WRITE);
  CHECK(pd && scq && rcq && buf && mr, "resources");

  struct ibv_qp *tx = raw_qp(pd, scq);
  if (!tx && geteuid() != 0) {  /* as the kernel: raw packet QPs need CAP_NET_RAW */
    CHECK(errno == EPERM, "without CAP_NET_RAW: EPERM (%s)", strerror(errno));
    printf("verbs_raw: %d passed, %d failed (not root: only the refusal was checked)\n", passed, failed);
    return failed != 0;
  }
  struct ibv_qp *a = raw_qp(pd, rcq), *b = raw_qp(pd, rcq);
  CHECK(tx && a && b, "three raw packet QPs: %s", strerror(errno));
  if (!tx || !a || !b) return 1;

  /* Refusals: a rule on an RC QP, a tunnel spec, a RDMA WRITE on a raw QP. */
  struct ibv_qp_init_attr rc_ia = {.send_cq = scq, .recv_cq = scq, .qp_type = IBV_QPT_RC,
                                   .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1}};
  struct ibv_qp *rc = ibv_create_qp(pd, &rc_ia);
  errno = 0;
  CHECK(rc && !steer(rc, 0, 0) && errno == EINVAL, "a rule on an RC QP: EINVAL (%s)", strerror(errno));
  struct {
    struct ibv_flow_attr attr;
    struct ibv_flow_spec_tunnel vx;
  } tun = {.attr = {.type = IBV_FLOW_ATTR_NORMAL, .size = sizeof tun.attr, .num_of_specs = 1, .port = 1},
                                   .vx = {.type = IBV_FLOW_SPEC_VXLAN_TUNNEL, .size = sizeof tun.vx}};
  errno = 0;
  CHECK(!ibv_create_flow(a, &tun.attr) && errno == EOPNOTSUPP, "a VXLAN rule: EOPNOTSUPP (%s)", strerror(errno));
  struct ibv_sge ws = {(uintptr_t)buf, 64, mr->lkey};
  struct ibv_send_wr wr = {.sg_list = &ws, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE}, *bad_wr;
  CHECK(ibv_post_send(tx, &wr, &bad_wr) == EINVAL, "RDMA WRITE on a raw QP: EINVAL");

  /* a takes port_a (priority 1); b takes every frame of our MACs (priority 2). */
  struct ibv_flow *fa = steer(a, 1, port_a), *fb = steer(b, 2, 0);
  CHECK(fa && fb, "two rules: %s", strerror(errno));
  for (int i = 0; i < FRAMES; i++) post(a, 1 + (uint64_t)i, SLOT);
  for (int i = 0; i < 4; i++) post(b, 1 + FRAMES + (uint64_t)i, SLOT);

  /* Frames of random sizes to port_a arrive at a, whole and in order; one to port_b at b. */
  int exact = 0, to_a = 0;
  for (uint32_t n = 0; n < FRAMES - 2; n++) {
    uint32_t len = 60 + (uint32_t)rand() % (SLOT - 60);
    build(n, port_a, len);
    CHECK(send_frame(tx, scq, len) == 0, "send frame %u", n);
    struct ibv_wc wc = one_wc(rcq);
    int ok = wc.status == IBV_WC_SUCCESS && wc.qp_num == a->qp_num && wc.byte_len == len &&
             wc.opcode == IBV_WC_RECV && memcmp(buf + SLOT * wc.wr_id, buf, len) == 0;
    exact += ok;
    to_a += wc.qp_num == a->qp_num;
  }
  CHECK(exact == FRAMES - 2, "frames to port_a at a, byte-exact: %d of %d (%d reached a)", exact, FRAMES - 2, to_a);
  build(1000, port_b, 200);
  CHECK(send_frame(tx, scq, 200) == 0, "send to port_b");
  struct ibv_wc wc = one_wc(rcq);
  CHECK(wc.status == IBV_WC_SUCCESS && wc.qp_num == b->qp_num && wc.byte_len == 200 &&
            memcmp(buf + SLOT * wc.wr_id, buf, 200) == 0,
        "a frame to port_b reaches b (status %d, qp %#x)", wc.status, wc.qp_num);

  /* A QP with rules is not destroyed; once a's rule goes, port_a's frames reach b. */
  CHECK(ibv_destroy_qp(a) == EBUSY, "destroy a QP its rule steers to: EBUSY");
  CHECK(ibv_destroy_flow(fa) == 0, "destroy a's rule");
  build(1001, port_a, 100);
  CHECK(send_frame(tx, scq, 100) == 0, "send to port_a");
  wc = one_wc(rcq);
  CHECK(wc.status == IBV_WC_SUCCESS && wc.qp_num == b->qp_num && wc.byte_len == 100, "port_a's frame now at b (qp %#x)", wc.qp_num);

  /* A frame longer than the receive: a length error, nothing else. */
  struct ibv_qp *c = raw_qp(pd, rcq);
  struct ibv_flow *fc = steer(c, 0, port_b);
  post(c, 0, 64);
  build(1002, port_b, 300);
  CHECK(send_frame(tx, scq, 300) == 0, "send a long frame");
  wc = one_wc(rcq);
  CHECK(wc.qp_num == c->qp_num && wc.status == IBV_WC_LOC_LEN_ERR, "a frame past its receive: LOC_LEN_ERR (%d)", wc.status);
  CHECK(ibv_poll_cq(rcq, 1, &wc) == 0, "nothing more");

  CHECK(ibv_destroy_flow(fc) == 0 && ibv_destroy_flow(fb) == 0, "destroy the rules");
  rss(ctx, pd, tx, scq);
  CHECK(packet_sockets() == 1, "one raw port while raw QPs exist (%d)", packet_sockets());
  CHECK(ibv_destroy_qp(a) == 0 && ibv_destroy_qp(b) == 0 && ibv_destroy_qp(c) == 0 && ibv_destroy_qp(tx) == 0 &&
            ibv_destroy_qp(rc) == 0,
        "destroy the QPs");
  CHECK(packet_sockets() == 0, "the raw port closed with the last raw QP (%d)", packet_sockets());
  ibv_dereg_mr(mr);
  ibv_destroy_cq(scq);
  ibv_destroy_cq(rcq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  free(buf);
  printf("verbs_raw: %d passed, %d failed\n", passed, failed);
  return failed != 0;
}
