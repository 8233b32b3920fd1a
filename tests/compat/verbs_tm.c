/* Tag matching through libibverbs (built against Debian's, run on uroce with uroce-run): the
 * device's tm_caps, a TM SRQ (ibv_create_srq_ex, IBV_SRQT_TM) under an extended CQ with
 * IBV_WC_EX_WITH_TM_INFO, list operations in a chain (ibv_post_srq_ops: handles written back,
 * bad_op on the first refused), an eager message landing in its tag's buffer without its TMH,
 * an unexpected one in an ordinary receive until software syncs the count, a DEL after its tag
 * was taken (IBV_WC_TM_ERR), a rendezvous (the device's READ, the FIN to the sender, the second
 * completion), and a completion event for a list operation on a channel.
 * Prints "verbs_tm: N passed, M failed". */
#include <endian.h>
#include <errno.h>
#include <infiniband/tm_types.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "rc_setup.h"

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *ccq;          /* the sender's */
static struct ibv_cq_ex *tcq;       /* the TM SRQ's */
static struct ibv_comp_channel *ch;
static struct ibv_srq *srq;
static struct ibv_qp *client, *server;
static union ibv_gid gid;
static char mem[1 << 17];
static struct ibv_mr *mr;
enum { kTags = 0, kOrdinary = 1 << 15, kSend = 1 << 16, kData = 3 << 15, kSlot = 2048 };

struct tm_wc {
  int got;
  uint64_t wr_id;
  enum ibv_wc_status status;
  enum ibv_wc_opcode opcode;
  unsigned flags;
  uint32_t byte_len;
  struct ibv_wc_tm_info tm;
};

/* One completion of the TM SRQ's CQ within 10 s, read field by field. */
static struct tm_wc tm_poll(void) {
  struct tm_wc w = {0};
  struct ibv_poll_cq_attr a = {0};
  for (double end = now_s() + 10; now_s() < end;) {
    if (ibv_start_poll(tcq, &a) != 0) continue;
    w.got = 1;
    w.wr_id = tcq->wr_id;
    w.status = tcq->status;
    w.opcode = ibv_wc_read_opcode(tcq);
    w.flags = ibv_wc_read_wc_flags(tcq);
    w.byte_len = ibv_wc_read_byte_len(tcq);
    ibv_wc_read_tm_info(tcq, &w.tm);
    ibv_end_poll(tcq);
    break;
  }
  return w;
}

static struct ibv_ops_wr add_op(uint64_t tag, int slot, struct ibv_sge *sge, uint32_t len) {
  *sge = (struct ibv_sge){.addr = (uintptr_t)mem + kTags + (unsigned)slot * kSlot, .length = len, .lkey = mr->lkey};
  struct ibv_ops_wr o = {.wr_id = 100 + (uint64_t)slot, .opcode = IBV_WR_TAG_ADD, .flags = IBV_OPS_SIGNALED};
  o.tm.add.recv_wr_id = (uint64_t)slot;
  o.tm.add.sg_list = sge;
  o.tm.add.num_sge = 1;
  o.tm.add.tag = tag;
  o.tm.add.mask = ~0ull;
  return o;
}

/* A message of len bytes at kSend, its TMH first. */
static void build_tm(uint8_t op, uint64_t tag, uint32_t app_ctx, uint32_t len) {
  struct ibv_tmh *h = (struct ibv_tmh *)(mem + kSend);
  for (uint32_t i = 0; i < len; ++i) mem[kSend + i] = (char)(i * 7 + tag);
  memset(h, 0, sizeof *h);
  h->opcode = op;
  h->app_ctx = htobe32(app_ctx);
  h->tag = htobe64(tag);
}

static void post_client_send(uint32_t len, uint64_t wr_id) {
  struct ibv_sge g = {.addr = (uintptr_t)mem + kSend, .length = len, .lkey = mr->lkey};
  struct ibv_send_wr w = {.wr_id = wr_id, .sg_list = &g, .num_sge = 1, .opcode = IBV_WR_SEND,
                          .send_flags = IBV_SEND_SIGNALED},
                     *bad;
  CHECK(ibv_post_send(client, &w, &bad) == 0, "post_send");
}

static void send_tm(uint8_t op, uint64_t tag, uint32_t app_ctx, uint32_t len, uint64_t wr_id) {
  build_tm(op, tag, app_ctx, len);
  post_client_send(len, wr_id);
}

static void post_ordinary(int slot) {
  struct ibv_sge g = {.addr = (uintptr_t)mem + kOrdinary + (unsigned)slot * kSlot, .length = kSlot, .lkey = mr->lkey};
  struct ibv_recv_wr w = {.wr_id = 500 + (uint64_t)slot, .sg_list = &g, .num_sge = 1}, *bad;
  CHECK(ibv_post_srq_recv(srq, &w, &bad) == 0, "post_srq_recv");
}

static void sync_count(uint32_t count) {
  struct ibv_ops_wr o = {.wr_id = 77, .opcode = IBV_WR_TAG_SYNC, .flags = IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC}, *bad;
  o.tm.unexpected_cnt = count;
  CHECK(ibv_post_srq_ops(srq, &o, &bad) == 0, "SYNC");
  struct tm_wc w = tm_poll();
  CHECK(w.got && w.opcode == IBV_WC_TM_SYNC && w.wr_id == 77, "SYNC completion");
}

static void setup(void) {
  struct ibv_device_attr_ex dx;
  CHECK(ibv_query_device_ex(ctx, NULL, &dx) == 0, "query_device_ex");
  CHECK(dx.tm_caps.flags & IBV_TM_CAP_RC, "tm_caps.flags 0x%x", dx.tm_caps.flags);
  CHECK(dx.tm_caps.max_num_tags >= 64 && dx.tm_caps.max_sge == 1 && dx.tm_caps.max_rndv_hdr_size >= 32 &&
            dx.tm_caps.max_ops > 0,
        "tm_caps %u tags, %u SGEs, %u header", dx.tm_caps.max_num_tags, dx.tm_caps.max_sge,
        dx.tm_caps.max_rndv_hdr_size);
  pd = ibv_alloc_pd(ctx);
  mr = ibv_reg_mr(pd, mem, sizeof mem, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
  ccq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
  ch = ibv_create_comp_channel(ctx);
  struct ibv_cq_init_attr_ex ca = {.cqe = 256, .channel = ch,
                                   .wc_flags = IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_TM_INFO};
  tcq = ibv_create_cq_ex(ctx, &ca);
  CHECK(pd && mr && ccq && ch && tcq, "objects (errno %d)", errno);
  struct ibv_srq_init_attr_ex sa = {.attr = {.max_wr = 32, .max_sge = 1},
                                    .comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_CQ |
                                                 IBV_SRQ_INIT_ATTR_TM,
                                    .srq_type = IBV_SRQT_TM, .pd = pd, .cq = ibv_cq_ex_to_cq(tcq),
                                    .tm_cap = {.max_num_tags = 8, .max_ops = 8}};
  struct ibv_srq_init_attr_ex no_cq = sa;
  no_cq.comp_mask &= ~(uint32_t)IBV_SRQ_INIT_ATTR_CQ;
  CHECK(!ibv_create_srq_ex(ctx, &no_cq) && errno == EINVAL, "a TM SRQ without its CQ: EINVAL (errno %d)", errno);
  srq = ibv_create_srq_ex(ctx, &sa);
  CHECK(srq != NULL, "TM SRQ (errno %d)", errno);
  struct ibv_qp_init_attr ci = {.send_cq = ccq, .recv_cq = ccq, .cap = {8, 8, 1, 1, 0}, .qp_type = IBV_QPT_RC};
  struct ibv_qp_init_attr si = {.send_cq = ccq, .recv_cq = ccq, .srq = srq, .cap = {0, 0, 0, 0, 0},
                                .qp_type = IBV_QPT_RC};
  client = ibv_create_qp(pd, &ci);
  server = ibv_create_qp(pd, &si);
  CHECK(client && server, "QPs (errno %d)", errno);
  unsigned access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
  CHECK(to_rts(client, server->qp_num, access, gid) == 0 && to_rts(server, client->qp_num, access, gid) == 0,
        "to RTS");
}

static void eager_and_ops(void) {
  struct ibv_sge g[3];
  struct ibv_ops_wr o[3] = {add_op(11, 0, &g[0], kSlot), add_op(12, 1, &g[1], kSlot), add_op(13, 2, &g[2], kSlot)};
  o[0].next = &o[1];
  o[1].next = &o[2];
  o[2].tm.add.num_sge = 2;  /* one SGE at most: refused, the two before it done */
  struct ibv_ops_wr *bad = NULL;
  CHECK(ibv_post_srq_ops(srq, o, &bad) == EINVAL && bad == &o[2], "chain with 2 SGEs: EINVAL at the third");
  CHECK(o[0].tm.handle != o[1].tm.handle, "handles %u %u", o[0].tm.handle, o[1].tm.handle);
  for (int i = 0; i < 2; ++i) {
    struct tm_wc w = tm_poll();
    CHECK(w.got && w.opcode == IBV_WC_TM_ADD && w.wr_id == 100u + (unsigned)i && w.status == IBV_WC_SUCCESS,
          "ADD %d completion (opcode %d)", i, w.opcode);
  }
  send_tm(IBV_TMH_EAGER, 12, 0x5151, 1500, 1);
  struct tm_wc w = tm_poll();
  CHECK(w.got && w.opcode == IBV_WC_TM_RECV && w.status == IBV_WC_SUCCESS && w.wr_id == 1, "eager: TM_RECV of slot 1");
  CHECK((w.flags & (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID)) == (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID),
        "eager flags 0x%x", w.flags);
  CHECK(w.tm.tag == 12 && w.tm.priv == 0x5151 && w.byte_len == 1500 - sizeof(struct ibv_tmh), "tag %llu priv %x len %u",
        (unsigned long long)w.tm.tag, w.tm.priv, w.byte_len);
  CHECK(memcmp(mem + kTags + kSlot, mem + kSend + 16, 1500 - 16) == 0, "eager bytes, without the TMH");
  CHECK(one_wc(ccq).status == IBV_WC_SUCCESS, "the SEND completes");
  /* DEL of the taken tag fails; of the posted one works. */
  struct ibv_ops_wr d = {.wr_id = 9, .opcode = IBV_WR_TAG_DEL, .flags = IBV_OPS_SIGNALED};
  d.tm.handle = o[1].tm.handle;
  CHECK(ibv_post_srq_ops(srq, &d, &bad) == 0, "DEL");
  w = tm_poll();
  CHECK(w.got && w.opcode == IBV_WC_TM_DEL && w.status == IBV_WC_TM_ERR, "DEL of a consumed tag: TM_ERR (%d)", w.status);
  d.tm.handle = o[0].tm.handle;
  CHECK(ibv_post_srq_ops(srq, &d, &bad) == 0, "DEL");
  w = tm_poll();
  CHECK(w.got && w.opcode == IBV_WC_TM_DEL && w.status == IBV_WC_SUCCESS, "DEL of a posted tag");
}

static void unexpected_then_sync(void) {
  post_ordinary(0);
  post_ordinary(1);
  struct ibv_sge g;
  struct ibv_ops_wr o = add_op(21, 3, &g, kSlot), *bad;
  CHECK(ibv_post_srq_ops(srq, &o, &bad) == 0, "ADD 21");
  CHECK(tm_poll().opcode == IBV_WC_TM_ADD, "ADD 21 completion");
  send_tm(IBV_TMH_EAGER, 99, 0, 300, 2);  /* nobody posted 99 */
  struct tm_wc w = tm_poll();
  CHECK(w.got && w.opcode == IBV_WC_TM_RECV && w.wr_id == 500 && !(w.flags & IBV_WC_TM_MATCH) && w.byte_len == 300,
        "unexpected: an ordinary receive, flags 0x%x", w.flags);
  CHECK(memcmp(mem + kOrdinary, mem + kSend, 300) == 0, "unexpected bytes, whole");
  CHECK(one_wc(ccq).status == IBV_WC_SUCCESS, "the SEND completes");
  send_tm(IBV_TMH_EAGER, 21, 0, 100, 3);  /* posted, but software has not synced */
  w = tm_poll();
  CHECK(w.got && w.wr_id == 501 && !(w.flags & IBV_WC_TM_MATCH), "before the sync: unexpected too");
  CHECK(one_wc(ccq).status == IBV_WC_SUCCESS, "the SEND completes");
  sync_count(2);
  send_tm(IBV_TMH_EAGER, 21, 0, 100, 4);
  w = tm_poll();
  CHECK(w.got && w.wr_id == 3 && (w.flags & IBV_WC_TM_MATCH) && w.tm.tag == 21, "after the sync: matched");
  CHECK(one_wc(ccq).status == IBV_WC_SUCCESS, "the SEND completes");
}

static void rendezvous(void) {
  struct ibv_sge g;
  struct ibv_ops_wr o = add_op(31, 4, &g, 4 * kSlot), *bad;
  CHECK(ibv_post_srq_ops(srq, &o, &bad) == 0, "ADD 31");
  CHECK(tm_poll().opcode == IBV_WC_TM_ADD, "ADD 31 completion");
  const uint32_t len = 5000;
  for (uint32_t i = 0; i < len; ++i) mem[kData + i] = (char)(i * 13 + 1);
  char *fin = mem + kData + 8192;
  struct ibv_sge fg = {.addr = (uintptr_t)fin, .length = 64, .lkey = mr->lkey};
  struct ibv_recv_wr fr = {.wr_id = 808, .sg_list = &fg, .num_sge = 1}, *rbad;
  CHECK(ibv_post_recv(client, &fr, &rbad) == 0, "the client's receive for the FIN");
  build_tm(IBV_TMH_RNDV, 31, 0x77, 64);
  struct ibv_rvh *rvh = (struct ibv_rvh *)(mem + kSend + sizeof(struct ibv_tmh));
  rvh->va = htobe64((uintptr_t)mem + kData);
  rvh->rkey = htobe32(mr->rkey);
  rvh->len = htobe32(len);
  post_client_send(64, 5);
  struct tm_wc w = tm_poll();
  CHECK(w.got && w.opcode == IBV_WC_TM_RECV && w.status == IBV_WC_SUCCESS && w.wr_id == 4 &&
            (w.flags & IBV_WC_TM_MATCH) && !(w.flags & IBV_WC_TM_DATA_VALID) && w.tm.tag == 31 && w.tm.priv == 0x77,
        "rendezvous: matched (status %d flags 0x%x)", w.status, w.flags);
  w = tm_poll();
  CHECK(w.got && w.opcode == IBV_WC_TM_RECV && w.status == IBV_WC_SUCCESS && w.wr_id == 4 &&
            (w.flags & IBV_WC_TM_DATA_VALID) && w.byte_len == len,
        "rendezvous: data valid (status %d len %u)", w.status, w.byte_len);
  CHECK(memcmp(mem + kTags + 4 * kSlot, mem + kData, len) == 0, "rendezvous bytes");
  int fins = 0, sends = 0;
  for (int i = 0; i < 2; ++i) {
    struct ibv_wc c = one_wc(ccq);
    if (c.status == IBV_WC_SUCCESS && c.opcode == IBV_WC_RECV && c.wr_id == 808 && c.byte_len == 16) ++fins;
    if (c.status == IBV_WC_SUCCESS && c.opcode == IBV_WC_SEND && c.wr_id == 5) ++sends;
  }
  const struct ibv_tmh *f = (const struct ibv_tmh *)fin;
  CHECK(fins == 1 && sends == 1 && f->opcode == IBV_TMH_FIN && be64toh(f->tag) == 31 && be32toh(f->app_ctx) == 0x77,
        "the sender's SEND and the FIN (%d, %d, opcode %u)", sends, fins, f->opcode);
}

/* A list operation's completion raises the CQ's event before ibv_post_srq_ops returns, not at
 * the engine's next pass (which an idle engine may be long in coming to). */
static void event_for_an_operation(void) {
  CHECK(ibv_req_notify_cq(ibv_cq_ex_to_cq(tcq), 0) == 0, "arm");
  struct ibv_ops_wr o = {.wr_id = 78, .opcode = IBV_WR_TAG_SYNC, .flags = IBV_OPS_SIGNALED}, *bad;
  CHECK(ibv_post_srq_ops(srq, &o, &bad) == 0, "SYNC");
  struct pollfd p = {.fd = ch->fd, .events = POLLIN};
  CHECK(poll(&p, 1, 0) == 1, "the channel is readable when post_srq_ops returns");
  struct ibv_cq *got;
  void *cq_ctx;
  CHECK(ibv_get_cq_event(ch, &got, &cq_ctx) == 0 && got == ibv_cq_ex_to_cq(tcq), "the event names the TM SRQ's CQ");
  ibv_ack_cq_events(got, 1);
  struct tm_wc w = tm_poll();
  CHECK(w.got && w.opcode == IBV_WC_TM_SYNC && w.wr_id == 78, "the SYNC completion");
}

int main(void) {
  struct ibv_device **list;
  ctx = open_first(&list, &gid);
  if (!ctx) {
    printf("verbs_tm: no device\n");
    return 1;
  }
  setup();
  if (srq && client && server) {
    eager_and_ops();
    unexpected_then_sync();
    rendezvous();
    event_for_an_operation();
  }
  ibv_destroy_qp(client);
  ibv_destroy_qp(server);
  CHECK(ibv_destroy_srq(srq) == 0, "destroy the TM SRQ");
  CHECK(ibv_destroy_cq(ibv_cq_ex_to_cq(tcq)) == 0, "destroy its CQ");
  ibv_destroy_cq(ccq);
  ibv_destroy_comp_channel(ch);
  ibv_dereg_mr(mr);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  printf("verbs_tm: %d passed, %d failed\n", passed, failed);
  return failed != 0;
}
