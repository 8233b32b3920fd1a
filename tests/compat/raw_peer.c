/* Raw packet QPs between two hosts on one Ethernet link: frames of every size up to the MTU
 * go from one host's raw QP to the other's, byte for byte, steered by a rule on the sender's
 * MAC and an experimental EtherType, then one with an 802.1Q tag, which arrives with its tag
 * as it was on the wire (the kernel takes it off; the raw port puts it back). The sender's own
 * rule sees none of its unicast frames (a NIC loops back only what it sends to a group or
 * broadcast address) and its broadcast frame once, as does the receiver.
 *   usage: raw_peer recv SENDER_MAC COUNT SEED   (prints "ready" once it can take frames)
 *          raw_peer send SENDER_MAC RECEIVER_MAC COUNT SEED */
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rc_setup.h"

#define ETHERTYPE 0x88b5 /* IEEE 802 local experimental */
#define SLOT 2048
#define SLOTS 64
#define MTU_FRAME 1514 /* the link's 1500 and the Ethernet header */

static uint8_t *buf;
static struct ibv_mr *mr;
static struct ibv_cq *cq;
static struct ibv_qp *qp;

static int parse_mac(const char *s, uint8_t *m) {
  return sscanf(s, "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) == 6 ? 0 : -1;
}

static uint32_t frame_len(uint32_t n, uint32_t count) { return n + 1 == count ? MTU_FRAME : 60 + (n * 397 + seed) % (MTU_FRAME - 59); }

#define TCI 0xa0c /* priority 5, VLAN 0xc0c */

/* Frame n: dst, src, (an 802.1Q tag,) EtherType, then its number and a pattern. */
static void build(uint8_t *f, const uint8_t *dst, const uint8_t *src, uint32_t n, uint32_t len, int tagged) {
  memcpy(f, dst, 6);
  memcpy(f + 6, src, 6);
  uint32_t at = 12;
  if (tagged) {
    f[12] = 0x81, f[13] = 0x00, f[14] = TCI >> 8, f[15] = TCI & 0xff;
    at = 16;
  }
  f[at] = ETHERTYPE >> 8, f[at + 1] = ETHERTYPE & 0xff;
  memcpy(f + at + 2, &n, 4);
  for (uint32_t i = at + 6; i < len; i++) f[i] = (uint8_t)(n * 31 + i * 7 + seed);
}


static void post(uint64_t slot) {
  struct ibv_sge s = {(uintptr_t)buf + SLOT * slot, SLOT, mr->lkey};
  struct ibv_recv_wr w = {.wr_id = slot, .sg_list = &s, .num_sge = 1}, *bad;
  CHECK(ibv_post_recv(qp, &w, &bad) == 0, "post_recv");
}

/* Steers frames from `src` of our EtherType to qp. */
static struct ibv_flow *steer(const uint8_t *src) {
  struct {
    struct ibv_flow_attr attr;
    struct ibv_flow_spec_eth eth;
  } f = {.attr = {.type = IBV_FLOW_ATTR_NORMAL, .size = sizeof f.attr, .num_of_specs = 1, .port = 1},
         .eth = {.type = IBV_FLOW_SPEC_ETH, .size = sizeof f.eth}};
  memcpy(f.eth.val.src_mac, src, 6);
  memset(f.eth.mask.src_mac, 0xff, 6);
  f.eth.val.ether_type = htobe16(ETHERTYPE);
  f.eth.mask.ether_type = 0xffff;
  return ibv_create_flow(qp, &f.attr);
}

/* The next received frame (its slot reposted), or -1 after `secs`. */
static int next_frame(double secs, uint8_t **at, uint32_t *len) {
  struct ibv_wc wc;
  for (double end = now_s() + secs; now_s() < end;) {
    if (ibv_poll_cq(cq, 1, &wc) != 1) continue;
    if (wc.opcode != IBV_WC_RECV) continue; /* a send's */
    if (wc.status != IBV_WC_SUCCESS) return -1;
    *at = buf + SLOT * wc.wr_id;
    *len = wc.byte_len;
    post(wc.wr_id);
    return 0;
  }
  return -1;
}

static int frame_ok(const uint8_t *f, uint32_t len, const uint8_t *dst, const uint8_t *src, uint32_t n, int tagged) {
  static uint8_t want[SLOT];
  build(want, dst, src, n, len, tagged);
  return memcmp(f, want, len) == 0;
}

int main(int argc, char **argv) {
  uint8_t sender[6], receiver[6], bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  const int sending = argc == 6 && !strcmp(argv[1], "send");
  if (!sending && !(argc == 5 && !strcmp(argv[1], "recv"))) return fprintf(stderr, "usage: see the source\n"), 2;
  if (parse_mac(argv[2], sender) || (sending && parse_mac(argv[3], receiver))) return fprintf(stderr, "bad MAC\n"), 2;
  const uint32_t count = (uint32_t)atoi(argv[sending ? 4 : 3]);
  seed = (unsigned)strtoul(argv[sending ? 5 : 4], NULL, 0);
  seeded = 1;
  if (count == 0 || count > SLOTS - 1) return fprintf(stderr, "COUNT is 1..%d\n", SLOTS - 1), 2;

  struct ibv_device **list;
  union ibv_gid gid;
  struct ibv_context *ctx = open_first(&list, &gid);
  if (!ctx) return printf("no device\n"), 1;
  struct ibv_pd *pd = ibv_alloc_pd(ctx);
  cq = ibv_create_cq(ctx, 2 * SLOTS, NULL, NULL, 0);
  buf = calloc(SLOTS + 1, SLOT);
  mr = pd && buf ? ibv_reg_mr(pd, buf, (SLOTS + 1) * SLOT, IBV_ACCESS_LOCAL_WRITE) : NULL;
  struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RAW_PACKET, .sq_sig_all = 1,
                                .cap = {.max_send_wr = 4, .max_recv_wr = SLOTS, .max_send_sge = 1, .max_recv_sge = 1}};
  qp = cq && mr ? ibv_create_qp(pd, &ia) : NULL;
  if (!qp) return printf("raw_peer: no raw packet QP: %s\n", strerror(errno)), 1;
  struct ibv_flow *flow = raw_to_rts(qp) ? NULL : steer(sender);
  if (!flow) return printf("raw_peer: no QP in RTS with its rule: %s\n", strerror(errno)), 1;
  for (uint64_t i = 0; i < SLOTS; i++) post(i);

  uint8_t *f;
  uint32_t len;
  if (!sending) {
    printf("ready\n");
    fflush(stdout);
    uint32_t exact = 0;
    for (uint32_t n = 0; n < count; n++) {
      if (next_frame(20, &f, &len)) break;
      /* To this host's MAC (a station's, not a group's), the rest as the sender built it. */
      exact += len == frame_len(n, count) && !(f[0] & 1) && frame_ok(f, len, f, sender, n, 0);
    }
    CHECK(exact == count, "unicast frames byte-exact, in order: %u of %u", exact, count);
    CHECK(next_frame(20, &f, &len) == 0 && len == 200 && frame_ok(f, len, f, sender, count, 1),
          "the tagged frame, its tag in place (%u bytes, %02x%02x %02x%02x)", len, f[12], f[13], f[14], f[15]);
    CHECK(next_frame(20, &f, &len) == 0 && len == 64 && frame_ok(f, len, bcast, sender, count + 1, 0), "the broadcast frame");
  } else {
    uint8_t *out = buf + SLOT * SLOTS;
    for (uint32_t n = 0; n <= count + 1; n++) {  /* then a tagged frame, then a broadcast one */
      const int tagged = n == count, last = n == count + 1;
      len = last ? 64 : tagged ? 200 : frame_len(n, count);
      build(out, last ? bcast : receiver, sender, n, len, tagged);
      struct ibv_sge s = {(uintptr_t)out, len, mr->lkey};
      struct ibv_send_wr w = {.wr_id = 1000 + n, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND}, *bw;
      struct ibv_wc wc = {.status = (enum ibv_wc_status)-1};
      int err = ibv_post_send(qp, &w, &bw);
      for (double end = now_s() + 10; !err && now_s() < end;)
        if (ibv_poll_cq(cq, 1, &wc) == 1) break;
      CHECK(!err && wc.status == IBV_WC_SUCCESS && wc.wr_id == 1000 + n, "send frame %u (%u bytes): %s, status %d", n, len,
            strerror(err), wc.status);
    }
    /* Our own rule: the broadcast comes back, and nothing before it did. */
    CHECK(next_frame(10, &f, &len) == 0 && len == 64 && frame_ok(f, len, bcast, sender, count + 1, 0),
          "the sender's own broadcast, and none of its unicast frames, looped back");
  }
  CHECK(ibv_destroy_flow(flow) == 0 && ibv_destroy_qp(qp) == 0, "teardown");
  printf("raw_peer %s: %d passed, %d failed\n", argv[1], passed, failed);
  return failed != 0;
}
