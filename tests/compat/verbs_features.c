/* Built against Debian's libibverbs-dev and linked with its libibverbs.so, then run on uroce
 * with uroce-run: completion channels, error completions, an SRQ limit event, UD with the GRH,
 * and clean errors for what uroce does not implement. Prints "N passed, M failed". */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static int passed, failed;
#define CHECK(cond, what)                                                        \
  do {                                                                           \
    if (cond) { ++passed; printf("ok - %s\n", what); }                           \
    else { ++failed; printf("NOT OK - %s (%s:%d, errno %d)\n", what, __FILE__, __LINE__, errno); } \
  } while (0)

static struct ibv_context* ctx;
static struct ibv_pd* pd;
static union ibv_gid gid;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* One completion, or 0 after 10 s (a bound, not a wait: every caller expects one). */
static int wait_wc(struct ibv_cq* cq, struct ibv_wc* wc) {
  for (double end = now_s() + 10; now_s() < end;) {
    int n = ibv_poll_cq(cq, 1, wc);
    if (n) return n;
  }
  return 0;
}

static struct ibv_qp* make_qp(enum ibv_qp_type t, struct ibv_cq* cq, struct ibv_srq* srq) {
  struct ibv_qp_init_attr a = {.send_cq = cq, .recv_cq = cq, .srq = srq, .qp_type = t,
                               .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1}};
  return ibv_create_qp(pd, &a);
}

static int connect_rc(struct ibv_qp* q, uint32_t dqpn, uint32_t my_psn, uint32_t peer_psn) {
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
                          .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE};
  if (ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) return -1;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = dqpn;
  a.rq_psn = peer_psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = gid;
  a.ah_attr.grh.hop_limit = 1;
  a.ah_attr.port_num = 1;
  if (ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                              IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return -1;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = my_psn;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  return ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

static int post_send(struct ibv_qp* q, enum ibv_wr_opcode op, struct ibv_mr* mr, void* buf, uint32_t len,
                     uint64_t raddr, uint32_t rkey, uint64_t id) {
  struct ibv_sge s = {.addr = (uintptr_t)buf, .length = len, .lkey = mr->lkey};
  struct ibv_send_wr w = {.wr_id = id, .sg_list = &s, .num_sge = 1, .opcode = op, .send_flags = IBV_SEND_SIGNALED};
  w.wr.rdma.remote_addr = raddr;
  w.wr.rdma.rkey = rkey;
  struct ibv_send_wr* bad;
  return ibv_post_send(q, &w, &bad);
}

static int post_recv(struct ibv_qp* q, struct ibv_srq* srq, struct ibv_mr* mr, void* buf, uint32_t len, uint64_t id) {
  struct ibv_sge s = {.addr = (uintptr_t)buf, .length = len, .lkey = mr->lkey};
  struct ibv_recv_wr w = {.wr_id = id, .sg_list = &s, .num_sge = 1}, *bad;
  return srq ? ibv_post_srq_recv(srq, &w, &bad) : ibv_post_recv(q, &w, &bad);
}

/* A second ibv_open_device of uroce_lo is the same NIC, as on hardware: the same GID table, and a
 * QP made through one context reaches a QP made through the other at that GID. Closing the
 * second context leaves the first working. */
static void second_context(struct ibv_device* dev, struct ibv_mr* mr, char* buf) {
  struct ibv_context* ctx2 = ibv_open_device(dev);
  CHECK(ctx2 != NULL && ctx2 != ctx, "a second open_device gives a second context");
  if (!ctx2) return;
  union ibv_gid g2;
  struct ibv_port_attr p2;
  CHECK(ibv_query_gid(ctx2, 1, 0, &g2) == 0 && memcmp(&g2, &gid, sizeof gid) == 0 &&
            ibv_query_port(ctx2, 1, &p2) == 0 && p2.gid_tbl_len > 0,
        "both contexts have the same GID table");
  struct ibv_pd* pd2 = ibv_alloc_pd(ctx2);
  static char rbuf[4096];
  struct ibv_mr* mr2 = pd2 ? ibv_reg_mr(pd2, rbuf, sizeof rbuf, IBV_ACCESS_LOCAL_WRITE) : NULL;
  struct ibv_cq* cq1 = ibv_create_cq(ctx, 8, NULL, NULL, 0);
  struct ibv_cq* cq2 = ibv_create_cq(ctx2, 8, NULL, NULL, 0);
  struct ibv_qp_init_attr qa = {.send_cq = cq2, .recv_cq = cq2, .qp_type = IBV_QPT_RC,
                                .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
  struct ibv_qp* q2 = mr2 && cq2 ? ibv_create_qp(pd2, &qa) : NULL;
  struct ibv_qp* q1 = cq1 ? make_qp(IBV_QPT_RC, cq1, NULL) : NULL;
  CHECK(q1 && q2 && connect_rc(q1, q2->qp_num, 300, 400) == 0 && connect_rc(q2, q1->qp_num, 400, 300) == 0,
        "QPs of the two contexts connect to each other at the one GID");
  if (!q1 || !q2) return;
  for (int i = 0; i < 3000; ++i) buf[i] = (char)(i * 13 + 5);
  memset(rbuf, 0, sizeof rbuf);
  struct ibv_wc wc;
  CHECK(post_recv(q2, NULL, mr2, rbuf, sizeof rbuf, 77) == 0 && post_send(q1, IBV_WR_SEND, mr, buf, 3000, 0, 0, 78) == 0 &&
            wait_wc(cq2, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 77 && wc.byte_len == 3000 &&
            memcmp(rbuf, buf, 3000) == 0,
        "a SEND from a QP of the first context lands, byte for byte, in a QP of the second");
  CHECK(wait_wc(cq1, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 78, "and completes on the sender");
  ibv_destroy_qp(q2);
  ibv_destroy_cq(cq2);
  ibv_dereg_mr(mr2);
  ibv_dealloc_pd(pd2);
  CHECK(ibv_close_device(ctx2) == 0, "close the second context");
  struct ibv_port_attr p1;
  CHECK(ibv_query_port(ctx, 1, &p1) == 0 && p1.state == IBV_PORT_ACTIVE, "the first context still works");
  ibv_destroy_qp(q1);
  ibv_destroy_cq(cq1);
}

/* ECE: uroce's vendor option is selective repeat. An RC QP offers it until options are set,
 * takes only uroce's vendor id and options, and only before it talks; a pair that agreed on it
 * moves data. */
static void check_ece(struct ibv_cq* cq, struct ibv_mr* mr, char* buf) {
  struct ibv_qp *c = make_qp(IBV_QPT_RC, cq, NULL), *d = make_qp(IBV_QPT_RC, cq, NULL);
  struct ibv_ece e;
  memset(&e, 0xff, sizeof e);
  CHECK(c && d && ibv_query_ece(c, &e) == 0 && e.vendor_id == 0x75726f && e.options == 1 && e.comp_mask == 0,
        "query_ece offers selective repeat (vendor 0x75726f, options 1)");
  struct ibv_ece other = {.vendor_id = 0x15b3, .options = 1};
  CHECK(ibv_set_ece(c, &other) == EOPNOTSUPP, "set_ece with another vendor's id: EOPNOTSUPP");
  struct ibv_ece unknown = {.vendor_id = 0x75726f, .options = 3};
  CHECK(ibv_set_ece(c, &unknown) == EOPNOTSUPP, "set_ece with an unknown option: EOPNOTSUPP");
  struct ibv_ece sr = {.vendor_id = 0x75726f, .options = 1};
  CHECK(ibv_set_ece(c, &sr) == 0 && ibv_set_ece(d, &sr) == 0, "set_ece(selective repeat) in RESET");
  CHECK(connect_rc(c, d->qp_num, 500, 600) == 0 && connect_rc(d, c->qp_num, 600, 500) == 0, "ECE pair to RTS");
  CHECK(ibv_query_ece(c, &e) == 0 && e.options == 1, "query_ece reports what was set");
  CHECK(ibv_set_ece(c, &sr) == EINVAL, "set_ece after RTR: EINVAL");
  static char rbuf[4096];
  struct ibv_mr* rmr = ibv_reg_mr(pd, rbuf, sizeof rbuf, IBV_ACCESS_LOCAL_WRITE);
  memset(buf, 'e', 3000);
  struct ibv_wc wc;
  int got = 0;
  CHECK(rmr && post_recv(d, NULL, rmr, rbuf, sizeof rbuf, 91) == 0 && post_send(c, IBV_WR_SEND, mr, buf, 3000, 0, 0, 92) == 0,
        "SEND on the ECE pair");
  for (int i = 0; i < 2 && wait_wc(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS; ++i) got += wc.wr_id == 91 || wc.wr_id == 92;
  CHECK(got == 2 && memcmp(rbuf, buf, 3000) == 0, "it arrives whole and both sides complete");
  struct ibv_qp* g = make_qp(IBV_QPT_RC, cq, NULL);
  struct ibv_ece none = {.vendor_id = 0x75726f, .options = 0};
  CHECK(g && ibv_set_ece(g, &none) == 0 && ibv_query_ece(g, &e) == 0 && e.options == 0, "set_ece(0): go-back-N, reported");
  ibv_destroy_qp(g);
  ibv_destroy_qp(c);
  ibv_destroy_qp(d);
  ibv_dereg_mr(rmr);
}

/* Memory: reregistration (libibverbs' input errors, then a range moved under the same keys),
 * a region at an IOVA, CQ resizing, and device memory through the inline ibv_*_dm calls: a
 * zero-based region on it that an RDMA WRITE fills. */
static void check_memory(struct ibv_cq* cq, struct ibv_mr* mr, char* buf) {
  struct ibv_qp *c = make_qp(IBV_QPT_RC, cq, NULL), *d = make_qp(IBV_QPT_RC, cq, NULL);
  CHECK(c && d && connect_rc(c, d->qp_num, 700, 800) == 0 && connect_rc(d, c->qp_num, 800, 700) == 0,
        "memory: an RC pair");
  if (!c || !d) return;
  static char t1[4096], t2[4096];
  struct ibv_mr* t = ibv_reg_mr(pd, t1, sizeof t1, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  CHECK(t != NULL, "reg_mr of a target");
  if (!t) return;
  const uint32_t lkey = t->lkey, rkey = t->rkey;
  errno = 0;
  CHECK(ibv_rereg_mr(t, 0, NULL, NULL, 0, 0) == IBV_REREG_MR_ERR_INPUT && errno == EINVAL, "rereg_mr, no flags: ERR_INPUT");
  CHECK(ibv_rereg_mr(t, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, NULL, 64, 0) == IBV_REREG_MR_ERR_INPUT,
        "rereg_mr, a new range without an address: ERR_INPUT");
  CHECK(ibv_rereg_mr(t, IBV_REREG_MR_CHANGE_PD, pd, NULL, 0, IBV_ACCESS_LOCAL_WRITE) == IBV_REREG_MR_ERR_INPUT,
        "rereg_mr, access without CHANGE_ACCESS: ERR_INPUT");
  errno = 0;
  CHECK(ibv_rereg_mr(t, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_REMOTE_WRITE) == IBV_REREG_MR_ERR_CMD &&
            errno == EINVAL,
        "rereg_mr, REMOTE_WRITE without LOCAL_WRITE: ERR_CMD, EINVAL");
  CHECK(ibv_rereg_mr(t, IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_ACCESS, NULL, t2, sizeof t2,
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) == 0 &&
            t->addr == t2 && t->length == sizeof t2 && t->lkey == lkey && t->rkey == rkey,
        "rereg_mr to another range: addr and length follow, the keys stay");
  struct ibv_wc wc;
  for (int i = 0; i < 512; ++i) buf[i] = (char)(i * 3 + 1);
  memset(t1, 0, sizeof t1);
  CHECK(post_send(c, IBV_WR_RDMA_WRITE, mr, buf, 512, (uintptr_t)(t2 + 1024), rkey, 61) == 0 &&
            wait_wc(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && memcmp(t2 + 1024, buf, 512) == 0,
        "a WRITE with the old rkey lands in the new range");
  CHECK(post_send(c, IBV_WR_RDMA_WRITE, mr, buf, 512, (uintptr_t)t1, rkey, 62) == 0 && wait_wc(cq, &wc) == 1 &&
            wc.status == IBV_WC_REM_ACCESS_ERR && t1[0] == 0 && t1[511] == 0,
        "a WRITE to the old range: REM_ACCESS_ERR, nothing written");
  ibv_dereg_mr(t);

  /* An IOVA: the peer names the region from 0x10000. */
  struct ibv_mr* iv = ibv_reg_mr_iova2(pd, t1, sizeof t1, 0x10000, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  struct ibv_qp *e = make_qp(IBV_QPT_RC, cq, NULL), *f = make_qp(IBV_QPT_RC, cq, NULL);
  CHECK(iv && e && f && connect_rc(e, f->qp_num, 900, 1000) == 0 && connect_rc(f, e->qp_num, 1000, 900) == 0 &&
            post_send(e, IBV_WR_RDMA_WRITE, mr, buf, 256, 0x10000 + 2048, iv->rkey, 63) == 0 && wait_wc(cq, &wc) == 1 &&
            wc.status == IBV_WC_SUCCESS && memcmp(t1 + 2048, buf, 256) == 0,
        "reg_mr_iova2: a WRITE to IOVA 0x10000 + 2048 lands at the buffer's byte 2048");
  if (iv) ibv_dereg_mr(iv);

  /* Resizing the CQ. */
  CHECK(ibv_resize_cq(cq, 200) == 0 && cq->cqe >= 200, "resize_cq up: cqe follows");
  CHECK(ibv_resize_cq(cq, 0) == EINVAL && cq->cqe >= 200, "resize_cq to 0: EINVAL, unchanged");
  CHECK(ibv_resize_cq(cq, 64) == 0 && cq->cqe >= 64 && cq->cqe < 200, "resize_cq down");

  /* Device memory. */
  struct ibv_device_attr_ex dx;
  CHECK(ibv_query_device_ex(ctx, NULL, &dx) == 0 && dx.max_dm_size >= 4096, "query_device_ex: max_dm_size");
  struct ibv_alloc_dm_attr da = {.length = 4096};
  struct ibv_dm* dm = ibv_alloc_dm(ctx, &da);
  CHECK(dm != NULL, "alloc_dm");
  struct ibv_alloc_dm_attr too_big = {.length = dx.max_dm_size + 4}, bad_mask = {.length = 64, .comp_mask = 1};
  errno = 0;
  CHECK(ibv_alloc_dm(ctx, &too_big) == NULL && errno == ENOMEM, "alloc_dm past max_dm_size: ENOMEM");
  errno = 0;
  CHECK(ibv_alloc_dm(ctx, &bad_mask) == NULL && errno == EINVAL, "alloc_dm with an unknown comp_mask: EINVAL");
  if (!dm) return;
  uint32_t w[4] = {1, 2, 3, 4}, r[4] = {0};
  CHECK(ibv_memcpy_to_dm(dm, 16, w, sizeof w) == 0 && ibv_memcpy_from_dm(r, dm, 16, sizeof r) == 0 &&
            memcmp(w, r, sizeof w) == 0,
        "memcpy to and from device memory");
  CHECK(ibv_memcpy_to_dm(dm, 2, w, 4) == EINVAL && ibv_memcpy_from_dm(r, dm, 4094, 4) == EINVAL,
        "memcpy at an odd offset or past the end: EINVAL");
  errno = 0;
  CHECK(ibv_reg_dm_mr(pd, dm, 0, 4096, IBV_ACCESS_LOCAL_WRITE) == NULL && errno == EINVAL,
        "reg_dm_mr without ZERO_BASED: EINVAL");
  struct ibv_mr* dmr =
      ibv_reg_dm_mr(pd, dm, 1024, 2048, IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  char got[300];
  CHECK(dmr && post_send(e, IBV_WR_RDMA_WRITE, mr, buf, 300, 100, dmr->rkey, 64) == 0 && wait_wc(cq, &wc) == 1 &&
            wc.status == IBV_WC_SUCCESS && ibv_memcpy_from_dm(got, dm, 1124, 300) == 0 && memcmp(got, buf, 300) == 0,
        "reg_dm_mr: a WRITE to zero-based VA 100 lands at device memory byte 1124");
  CHECK(ibv_free_dm(dm) == EBUSY, "free_dm while a region lies on it: EBUSY");
  CHECK(dmr && ibv_dereg_mr(dmr) == 0 && ibv_free_dm(dm) == 0, "dereg, then free_dm");

  /* On-demand paging: the capabilities, an implicit region of the whole address space that a
   * WRITE reaches through, a region whose page is gone (REM_ACCESS_ERR, no crash), advise_mr. */
  struct ibv_device_attr_ex ox;
  CHECK(ibv_query_device_ex(ctx, NULL, &ox) == 0 && (ox.odp_caps.general_caps & IBV_ODP_SUPPORT_IMPLICIT) &&
            (ox.odp_caps.per_transport_caps.rc_odp_caps & IBV_ODP_SUPPORT_WRITE),
        "query_device_ex: ODP and implicit ODP");
  struct ibv_mr* all = ibv_reg_mr(pd, NULL, SIZE_MAX,
                                  IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  memset(t1, 0, sizeof t1);
  CHECK(all && post_send(e, IBV_WR_RDMA_WRITE, mr, buf, 100, (uintptr_t)(t1 + 300), all->rkey, 65) == 0 &&
            wait_wc(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && memcmp(t1 + 300, buf, 100) == 0,
        "an implicit on-demand region: a WRITE lands wherever it names");
  char* page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  struct ibv_mr* om = page != MAP_FAILED ? ibv_reg_mr(pd, page, 4096, IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE |
                                                                        IBV_ACCESS_REMOTE_WRITE)
                                         : NULL;
  struct ibv_sge psge = {.addr = (uintptr_t)page, .length = 4096, .lkey = om ? om->lkey : 0};
  CHECK(om && ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH, &psge, 1) == 0,
        "advise_mr(PREFETCH_WRITE) on a mapped on-demand region");
  if (om) munmap(page, 4096);
  CHECK(om && ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, &psge, 1) == EFAULT,
        "advise_mr on its unmapped page: EFAULT");
  CHECK(om && post_send(e, IBV_WR_RDMA_WRITE, mr, buf, 100, (uintptr_t)page, om->rkey, 66) == 0 &&
            wait_wc(cq, &wc) == 1 && wc.status == IBV_WC_REM_ACCESS_ERR,
        "a WRITE to an unmapped page of an on-demand region: REM_ACCESS_ERR, and the process lives on");
  if (om) ibv_dereg_mr(om);
  if (all) ibv_dereg_mr(all);
  ibv_destroy_qp(c);
  ibv_destroy_qp(d);
  ibv_destroy_qp(e);
  ibv_destroy_qp(f);
}

/* Memory windows: a type 1 window bound with ibv_bind_mw grants WRITEs to its range alone; a
 * type 2 window bound with IBV_WR_BIND_MW dies with the peer's SEND with invalidate, whose
 * receive says which rkey it invalidated; a region with a window bound cannot be deregistered. */
static void check_windows(struct ibv_cq* cq, struct ibv_mr* mr, char* buf) {
  struct ibv_qp *c = make_qp(IBV_QPT_RC, cq, NULL), *d = make_qp(IBV_QPT_RC, cq, NULL);
  CHECK(c && d && connect_rc(c, d->qp_num, 1100, 1200) == 0 && connect_rc(d, c->qp_num, 1200, 1100) == 0,
        "windows: an RC pair");
  if (!c || !d) return;
  static char t[8192];
  struct ibv_mr* tm = ibv_reg_mr(pd, t, sizeof t, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
  struct ibv_mw* w1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
  struct ibv_mw* w2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
  CHECK(tm && w1 && w2 && w1->type == IBV_MW_TYPE_1 && w2->type == IBV_MW_TYPE_2, "reg_mr with MW_BIND, alloc_mw 1 and 2");
  if (!tm || !w1 || !w2) return;
  struct ibv_wc wc;
  const uint32_t first = w1->rkey;
  struct ibv_mw_bind mb = {.wr_id = 71, .send_flags = IBV_SEND_SIGNALED,
                           .bind_info = {.mr = tm, .addr = (uintptr_t)(t + 1024), .length = 1024,
                                         .mw_access_flags = IBV_ACCESS_REMOTE_WRITE}};
  CHECK(ibv_bind_mw(d, w1, &mb) == 0 && w1->rkey != first && (w1->rkey >> 8) == (first >> 8) && wait_wc(cq, &wc) == 1 &&
            wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW && wc.wr_id == 71,
        "ibv_bind_mw (type 1): BIND_MW completion, the next rkey of the same index");
  for (int i = 0; i < 128; ++i) buf[i] = (char)(i + 9);
  memset(t, 0, sizeof t);
  CHECK(post_send(c, IBV_WR_RDMA_WRITE, mr, buf, 128, (uintptr_t)(t + 1024 + 512), w1->rkey, 72) == 0 &&
            wait_wc(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && memcmp(t + 1024 + 512, buf, 128) == 0,
        "a WRITE through the type 1 window lands");
  CHECK(post_send(c, IBV_WR_RDMA_WRITE, mr, buf, 128, (uintptr_t)t, w1->rkey, 73) == 0 && wait_wc(cq, &wc) == 1 &&
            wc.status == IBV_WC_REM_ACCESS_ERR && t[0] == 0,
        "a WRITE outside the window: REM_ACCESS_ERR, nothing written");
  ibv_destroy_qp(c);
  ibv_destroy_qp(d);
  c = make_qp(IBV_QPT_RC, cq, NULL);
  d = make_qp(IBV_QPT_RC, cq, NULL);
  if (!c || !d || connect_rc(c, d->qp_num, 1300, 1400) || connect_rc(d, c->qp_num, 1400, 1300)) return;
  const uint32_t k2 = ibv_inc_rkey(w2->rkey);
  struct ibv_send_wr bw = {.wr_id = 74, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED}, *bad;
  bw.bind_mw.mw = w2;
  bw.bind_mw.rkey = k2;
  bw.bind_mw.bind_info = (struct ibv_mw_bind_info){.mr = tm, .addr = (uintptr_t)(t + 4096), .length = 4096,
                                                   .mw_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
  CHECK(ibv_post_send(d, &bw, &bad) == 0 && wait_wc(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS &&
            wc.opcode == IBV_WC_BIND_MW,
        "IBV_WR_BIND_MW (type 2) completes");
  CHECK(ibv_dereg_mr(tm) == EBUSY, "dereg_mr with windows bound: EBUSY");
  CHECK(post_send(c, IBV_WR_RDMA_WRITE, mr, buf, 128, (uintptr_t)(t + 8000), k2, 75) == 0 && wait_wc(cq, &wc) == 1 &&
            wc.status == IBV_WC_SUCCESS && memcmp(t + 8000, buf, 128) == 0,
        "a WRITE through the type 2 window lands");
  static char rb[64];
  struct ibv_mr* rbm = ibv_reg_mr(pd, rb, sizeof rb, IBV_ACCESS_LOCAL_WRITE);
  struct ibv_sge rs = {.addr = (uintptr_t)rb, .length = sizeof rb, .lkey = rbm ? rbm->lkey : 0};
  struct ibv_recv_wr rw = {.wr_id = 76, .sg_list = &rs, .num_sge = 1}, *rbad;
  struct ibv_sge ss = {.addr = (uintptr_t)buf, .length = 8, .lkey = mr->lkey};
  struct ibv_send_wr sw = {.wr_id = 77, .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_INV,
                           .send_flags = IBV_SEND_SIGNALED, .invalidate_rkey = k2};
  int recv_ok = 0, send_ok = 0;
  if (rbm && ibv_post_recv(d, &rw, &rbad) == 0 && ibv_post_send(c, &sw, &bad) == 0)
    for (int i = 0; i < 2 && wait_wc(cq, &wc) == 1; ++i) {
      recv_ok |= wc.wr_id == 76 && wc.status == IBV_WC_SUCCESS && (wc.wc_flags & IBV_WC_WITH_INV) &&
                 wc.invalidated_rkey == k2;
      send_ok |= wc.wr_id == 77 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND;
    }
  CHECK(recv_ok && send_ok, "SEND_WITH_INV: the receive has IBV_WC_WITH_INV and the invalidated rkey");
  CHECK(post_send(c, IBV_WR_RDMA_WRITE, mr, buf, 128, (uintptr_t)(t + 4096), k2, 78) == 0 && wait_wc(cq, &wc) == 1 &&
            wc.status == IBV_WC_REM_ACCESS_ERR && t[4096] == 0,
        "after it, a WRITE with that rkey: REM_ACCESS_ERR");
  ibv_destroy_qp(c);
  ibv_destroy_qp(d);
  CHECK(ibv_dealloc_mw(w1) == 0 && ibv_dealloc_mw(w2) == 0 && ibv_dereg_mr(tm) == 0,
        "dealloc_mw, then dereg_mr");
  if (rbm) ibv_dereg_mr(rbm);
}

/* Parent and thread domains: a parent domain made from the PD (with a thread domain) is a PD
 * to the program: a region and QPs made in it move data; the PD and the thread domain cannot
 * go while it exists; a CQ may be made in it. */
static void check_domains(void) {
  static char pbuf[4096];
  struct ibv_td_init_attr ta = {0}, bad_ta = {.comp_mask = 1};
  struct ibv_td* td = ibv_alloc_td(ctx, &ta);
  errno = 0;
  CHECK(td && ibv_alloc_td(ctx, &bad_ta) == NULL && errno == EINVAL, "alloc_td; with an unknown comp_mask: EINVAL");
  struct ibv_parent_domain_init_attr pa = {.pd = pd, .td = td};
  struct ibv_pd* par = td ? ibv_alloc_parent_domain(ctx, &pa) : NULL;
  struct ibv_parent_domain_init_attr nested = {.pd = par};
  errno = 0;
  CHECK(par && par != pd && ibv_alloc_parent_domain(ctx, &nested) == NULL && errno == EINVAL,
        "alloc_parent_domain; from a parent domain: EINVAL");
  if (!par) return;
  struct ibv_cq_init_attr_ex ca = {.cqe = 8, .comp_mask = IBV_CQ_INIT_ATTR_MASK_PD, .parent_domain = par};
  struct ibv_cq_ex* pcq = ibv_create_cq_ex(ctx, &ca);
  struct ibv_cq* cq = pcq ? ibv_cq_ex_to_cq(pcq) : NULL;
  struct ibv_mr* pm = ibv_reg_mr(par, pbuf, 2048, IBV_ACCESS_LOCAL_WRITE);
  struct ibv_qp_init_attr qa = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
                                .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
  struct ibv_qp* x = cq && pm ? ibv_create_qp(par, &qa) : NULL;
  struct ibv_qp* y = cq && pm ? ibv_create_qp(par, &qa) : NULL;
  CHECK(x && y && x->pd == par && connect_rc(x, y->qp_num, 1500, 1600) == 0 && connect_rc(y, x->qp_num, 1600, 1500) == 0,
        "a CQ, a region and RC QPs in the parent domain");
  struct ibv_wc wc;
  if (x && y) {
    memcpy(pbuf, "parent-domain", 14);
    memset(pbuf + 1024, 0, 32);
    CHECK(post_recv(y, NULL, pm, pbuf + 1024, 32, 121) == 0 && post_send(x, IBV_WR_SEND, pm, pbuf, 14, 0, 0, 122) == 0 &&
              wait_wc(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wait_wc(cq, &wc) == 1 &&
              wc.status == IBV_WC_SUCCESS && strcmp(pbuf + 1024, "parent-domain") == 0,
          "a SEND between QPs of the parent domain arrives");
  }
  CHECK(ibv_dealloc_pd(pd) == EBUSY && ibv_dealloc_td(td) == EBUSY, "the PD and the thread domain stay while it exists");
  ibv_destroy_qp(x);
  ibv_destroy_qp(y);
  if (pm) ibv_dereg_mr(pm);
  if (cq) ibv_destroy_cq(cq);
  CHECK(ibv_dealloc_pd(par) == 0 && ibv_dealloc_td(td) == 0, "dealloc the parent domain, then the thread domain");
}

static atomic_int qp_destroyed;
static void* destroy_qp_thread(void* qp) {
  if (ibv_destroy_qp(qp) == 0) atomic_store(&qp_destroyed, 1);
  return NULL;
}

int main(void) {
  int n = 0;
  struct ibv_device** list = ibv_get_device_list(&n);
  CHECK(list && n == 1 && strcmp(ibv_get_device_name(list[0]), "uroce_lo") == 0, "one device, uroce_lo");
  ctx = ibv_open_device(list[0]);
  CHECK(ctx != NULL, "open_device");
  if (!ctx) return 1;
  struct ibv_port_attr port;
  CHECK(ibv_query_port(ctx, 1, &port) == 0 && port.state == IBV_PORT_ACTIVE &&
            port.link_layer == IBV_LINK_LAYER_ETHERNET, "query_port: active, Ethernet");
  CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0 && gid.raw[10] == 0xff && gid.raw[11] == 0xff, "GID 0 is IPv4-mapped");
  {
    /* The GID table is longer than the GIDs it holds, as a NIC's: the entries past them are
     * empty (a zero GID, ENODATA from ibv_query_gid_ex) and ibv_query_gid_table skips them. */
    struct ibv_gid_entry tbl[64];
    ssize_t held = ibv_query_gid_table(ctx, tbl, 64, 0);
    CHECK(held >= 1 && port.gid_tbl_len > held, "gid table longer than the GIDs it holds");
    union ibv_gid empty;
    memset(&empty, 0x5a, sizeof empty);
    struct ibv_gid_entry e;
    CHECK(ibv_query_gid(ctx, 1, port.gid_tbl_len - 1, &empty) == 0 && empty.global.subnet_prefix == 0 &&
              empty.global.interface_id == 0,
          "an empty entry reads as a zero GID");
    CHECK(ibv_query_gid_ex(ctx, 1, (uint32_t)port.gid_tbl_len - 1, &e, 0) == ENODATA, "ibv_query_gid_ex of it: ENODATA");
    CHECK(ibv_query_gid(ctx, 1, port.gid_tbl_len, &empty) != 0, "past the table: an error");
  }
  struct ibv_device_attr_ex dx;
  CHECK(ibv_query_device_ex(ctx, NULL, &dx) == 0 && dx.orig_attr.max_qp > 0, "query_device_ex falls back");
  pd = ibv_alloc_pd(ctx);
  static char buf[8192];
  struct ibv_mr* mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  CHECK(pd && mr, "alloc_pd, reg_mr");

  /* Completion channel: an armed CQ's event arrives through the channel fd. */
  struct ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
  struct ibv_cq* cq = ibv_create_cq(ctx, 64, (void*)0x1234, ch, 0);
  struct ibv_cq* cq2 = ibv_create_cq(ctx, 64, NULL, NULL, 0);
  struct ibv_qp *a = make_qp(IBV_QPT_RC, cq2, NULL), *b = make_qp(IBV_QPT_RC, cq, NULL);
  CHECK(ch && cq && a && b, "channel, CQs, RC QPs");
  CHECK(connect_rc(a, b->qp_num, 10, 20) == 0 && connect_rc(b, a->qp_num, 20, 10) == 0, "RC QPs to RTS");
  check_ece(cq2, mr, buf);
  check_memory(cq2, mr, buf);
  check_windows(cq2, mr, buf);
  CHECK(ibv_req_notify_cq(cq, 0) == 0, "req_notify_cq");
  post_recv(b, NULL, mr, buf + 4096, 1024, 7);
  strcpy(buf, "event");
  post_send(a, IBV_WR_SEND, mr, buf, 6, 0, 0, 1);
  struct pollfd pf = {.fd = ch->fd, .events = POLLIN};
  CHECK(poll(&pf, 1, 5000) == 1, "channel fd becomes readable");
  struct ibv_cq* ev_cq = NULL;
  void* ev_ctx = NULL;
  CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0 && ev_cq == cq && ev_ctx == (void*)0x1234, "get_cq_event names the CQ");
  ibv_ack_cq_events(cq, 1);
  /* UCX and others make the channel non-blocking and expect EAGAIN when nothing waits. */
  int fl = fcntl(ch->fd, F_GETFL);
  errno = 0;
  CHECK(fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK) == 0 && ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == -1 && errno == EAGAIN,
        "get_cq_event on an empty non-blocking channel: EAGAIN");
  fcntl(ch->fd, F_SETFL, fl);
  struct ibv_wc wc;
  CHECK(wait_wc(cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 7 && wc.byte_len == 6 &&
            strcmp(buf + 4096, "event") == 0, "the receive completes with the data");
  CHECK(wait_wc(cq2, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND, "the send completes");

  /* modify_qp to ERR on an idle device: its receive is flushed, and the armed CQ's channel says
     so. The engine thread, asleep with no timer after 100 ms without traffic, has nothing else
     to wake it; before, the flush and its event waited for the next traffic. */
  {
    struct ibv_qp* idle = make_qp(IBV_QPT_RC, cq, NULL);
    CHECK(idle && connect_rc(idle, a->qp_num, 30, 40) == 0 && post_recv(idle, NULL, mr, buf + 4096, 64, 8) == 0,
          "a third RC QP with a receive posted");
    struct timespec pause = {0, 100 * 1000 * 1000};
    nanosleep(&pause, NULL);
    struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};
    CHECK(ibv_req_notify_cq(cq, 0) == 0 && ibv_modify_qp(idle, &err, IBV_QP_STATE) == 0, "armed, then the QP to ERR");
    struct pollfd ipf = {.fd = ch->fd, .events = POLLIN};
    CHECK(poll(&ipf, 1, 3000) == 1 && ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0 && ev_cq == cq,
          "the flush's event arrives on an idle device");
    ibv_ack_cq_events(cq, 1);
    CHECK(wait_wc(cq, &wc) == 1 && wc.status == IBV_WC_WR_FLUSH_ERR && wc.wr_id == 8 && wc.qp_num == idle->qp_num,
          "its receive: WR_FLUSH_ERR");
    CHECK(idle && ibv_destroy_qp(idle) == 0, "destroy_qp");
  }

  /* Error completions: a bad rkey, then everything behind it is flushed. */
  post_send(a, IBV_WR_RDMA_WRITE, mr, buf, 64, (uintptr_t)(buf + 4096), mr->rkey ^ 0x5a5a, 2);
  post_send(a, IBV_WR_RDMA_WRITE, mr, buf, 64, (uintptr_t)(buf + 4096), mr->rkey, 3);
  CHECK(wait_wc(cq2, &wc) == 1 && wc.status == IBV_WC_REM_ACCESS_ERR && wc.wr_id == 2, "bad rkey: REM_ACCESS_ERR");
  CHECK(wait_wc(cq2, &wc) == 1 && wc.status == IBV_WC_WR_FLUSH_ERR && wc.wr_id == 3, "then WR_FLUSH_ERR");
  struct ibv_qp_attr qa;
  struct ibv_qp_init_attr qi;
  CHECK(ibv_query_qp(b, &qa, IBV_QP_STATE, &qi) == 0 && qa.qp_state == IBV_QPS_ERR, "the QP is in ERR");
  CHECK(strcmp(ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR), "REM_ACCESS_ERR") == 0, "wc_status_str");

  /* SRQ with a limit: the async event arrives when fewer receives remain. */
  struct ibv_srq_init_attr sa = {.attr = {.max_wr = 16, .max_sge = 1}};
  struct ibv_srq* srq = ibv_create_srq(pd, &sa);
  struct ibv_cq* cq3 = ibv_create_cq(ctx, 64, NULL, NULL, 0);
  struct ibv_qp *c = make_qp(IBV_QPT_RC, cq3, NULL), *d = make_qp(IBV_QPT_RC, cq3, srq);
  CHECK(srq && c && d && connect_rc(c, d->qp_num, 30, 40) == 0 && connect_rc(d, c->qp_num, 40, 30) == 0,
        "SRQ and a QP on it");
  for (int i = 0; i < 6; ++i) post_recv(d, srq, mr, buf + 4096 + i * 256, 256, 100 + i);
  struct ibv_srq_attr lim = {.srq_limit = 4};
  CHECK(ibv_modify_srq(srq, &lim, IBV_SRQ_LIMIT) == 0, "modify_srq arms the limit");
  struct ibv_async_event ae;
  int drained = 0;  /* PORT_ACTIVE from the open, QP_FATAL from the error test */
  for (struct pollfd af = {.fd = ctx->async_fd, .events = POLLIN}; poll(&af, 1, 0) == 1 && drained < 10; ++drained) {
    if (ibv_get_async_event(ctx, &ae)) break;
    ibv_ack_async_event(&ae);
  }
  CHECK(drained == 3, "earlier events: PORT_ACTIVE and two QP_FATAL, then the fd is quiet");
  int afl = fcntl(ctx->async_fd, F_GETFL);
  errno = 0;
  CHECK(fcntl(ctx->async_fd, F_SETFL, afl | O_NONBLOCK) == 0 && ibv_get_async_event(ctx, &ae) == -1 && errno == EAGAIN,
        "get_async_event on an empty non-blocking async fd: EAGAIN");
  fcntl(ctx->async_fd, F_SETFL, afl);
  for (int i = 0; i < 3; ++i) post_send(c, IBV_WR_SEND, mr, buf, 16, 0, 0, 200 + i);
  int got = 0;
  for (int i = 0; i < 6 && got < 6; ++i) got += wait_wc(cq3, &wc);
  struct pollfd af = {.fd = ctx->async_fd, .events = POLLIN};
  CHECK(poll(&af, 1, 5000) == 1 && ibv_get_async_event(ctx, &ae) == 0 &&
            ae.event_type == IBV_EVENT_SRQ_LIMIT_REACHED && ae.element.srq == srq, "SRQ_LIMIT_REACHED names the SRQ");
  ibv_ack_async_event(&ae);

  /* A QP on an SRQ that enters ERR raises LAST_WQE_REACHED; destroying it waits until that
     event is acked (a handler must never hold a destroyed QP). */
  struct ibv_qp* on_srq = make_qp(IBV_QPT_RC, cq3, srq);
  struct ibv_qp_attr to_err = {.qp_state = IBV_QPS_ERR};
  CHECK(on_srq && ibv_modify_qp(on_srq, &to_err, IBV_QP_STATE) == 0 && poll(&af, 1, 5000) == 1 &&
            ibv_get_async_event(ctx, &ae) == 0 && ae.event_type == IBV_EVENT_QP_LAST_WQE_REACHED && ae.element.qp == on_srq,
        "LAST_WQE_REACHED names the QP");
  pthread_t destroyer;
  CHECK(pthread_create(&destroyer, NULL, destroy_qp_thread, on_srq) == 0, "destroy_qp from another thread");
  usleep(100000);
  CHECK(atomic_load(&qp_destroyed) == 0, "destroy_qp waits while the QP's event is not acked");
  ibv_ack_async_event(&ae);
  pthread_join(destroyer, NULL);
  CHECK(atomic_load(&qp_destroyed) == 1, "and returns once it is acked");

  /* UD: the GRH comes first in the receive, and an AH can be made from it. */
  struct ibv_qp *u1 = make_qp(IBV_QPT_UD, cq3, NULL), *u2 = make_qp(IBV_QPT_UD, cq3, NULL);
  int ok = u1 && u2;
  for (int i = 0; ok && i < 2; ++i) {
    struct ibv_qp* q = i ? u2 : u1;
    struct ibv_qp_attr x = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qkey = 0x11111111};
    ok = !ibv_modify_qp(q, &x, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
    x.qp_state = IBV_QPS_RTR;
    ok = ok && !ibv_modify_qp(q, &x, IBV_QP_STATE);
    x.qp_state = IBV_QPS_RTS;
    x.sq_psn = 0;
    ok = ok && !ibv_modify_qp(q, &x, IBV_QP_STATE | IBV_QP_SQ_PSN);
  }
  CHECK(ok, "UD QPs to RTS");
  struct ibv_ah_attr aha = {.is_global = 1, .grh = {.dgid = gid, .hop_limit = 1}, .port_num = 1};
  struct ibv_ah* ah = ibv_create_ah(pd, &aha);
  post_recv(u2, NULL, mr, buf + 6000, 40 + 100, 300);
  struct ibv_sge s = {.addr = (uintptr_t)buf, .length = 100, .lkey = mr->lkey};
  struct ibv_send_wr w = {.wr_id = 301, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_IMM,
                          .send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(0xfeed)}, *bad;
  w.wr.ud.ah = ah;
  w.wr.ud.remote_qpn = u2->qp_num;
  w.wr.ud.remote_qkey = 0x11111111;
  memcpy(buf, "datagram", 9);
  CHECK(ah && ibv_post_send(u1, &w, &bad) == 0, "UD send posted");
  struct ibv_wc wcs[2];
  got = 0;
  for (int i = 0; i < 4 && got < 2; ++i) got += wait_wc(cq3, &wcs[got]);
  struct ibv_wc* r = wcs[0].opcode == IBV_WC_RECV ? &wcs[0] : &wcs[1];
  CHECK(got == 2 && r->status == IBV_WC_SUCCESS && r->byte_len == 140 && (r->wc_flags & IBV_WC_GRH) &&
            (r->wc_flags & IBV_WC_WITH_IMM) && ntohl(r->imm_data) == 0xfeed && r->src_qp == u1->qp_num &&
            strcmp(buf + 6040, "datagram") == 0, "UD receive: GRH, immediate, source QP, data");
  CHECK(got == 2 && r->sl == 2, "UD receive: sl holds the network header type, 2 = IPv4, as RoCE NICs report it");
  struct ibv_ah* back = ibv_create_ah_from_wc(pd, r, (struct ibv_grh*)(buf + 6000), 1);
  CHECK(back != NULL, "create_ah_from_wc");

  /* The extended send API: a QP made with send_ops_flags, a batch of WRITE + SEND inline. */
  struct ibv_cq* cq4 = ibv_create_cq(ctx, 64, NULL, NULL, 0);
  struct ibv_qp_init_attr_ex xa_ex = {.send_cq = cq4, .recv_cq = cq4, .qp_type = IBV_QPT_RC,
                                      .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2,
                                              .max_recv_sge = 1, .max_inline_data = 64},
                                      .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
                                      .pd = pd,
                                      .send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND};
  struct ibv_qp* xq = ibv_create_qp_ex(ctx, &xa_ex);
  struct ibv_qp* yq = make_qp(IBV_QPT_RC, cq4, NULL);
  struct ibv_qp_ex* qx = xq ? ibv_qp_to_qp_ex(xq) : NULL;
  CHECK(xq && yq && qx && connect_rc(xq, yq->qp_num, 50, 60) == 0 && connect_rc(yq, xq->qp_num, 60, 50) == 0,
        "create_qp_ex with send_ops_flags, qp_to_qp_ex");
  memset(buf + 7000, 0, 100);
  memcpy(buf, "written-by-ibv_wr", 18);
  post_recv(yq, NULL, mr, buf + 7500, 64, 500);
  if (qx) {
    ibv_wr_start(qx);
    qx->wr_id = 41;
    qx->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(qx, mr->rkey, (uintptr_t)(buf + 7000));
    ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)buf, 18);
    qx->wr_id = 42;
    ibv_wr_send(qx);
    ibv_wr_set_inline_data(qx, "inline-send", 12);
    CHECK(ibv_wr_complete(qx) == 0, "ibv_wr_complete posts the batch");
    struct ibv_wc xw[3];
    int k = 0;
    for (int i = 0; i < 6 && k < 3; ++i) k += wait_wc(cq4, &xw[k]);
    int writes = 0, sends = 0, recvs = 0;
    for (int i = 0; i < k; ++i) {
      writes += xw[i].opcode == IBV_WC_RDMA_WRITE && xw[i].wr_id == 41 && xw[i].status == IBV_WC_SUCCESS;
      sends += xw[i].opcode == IBV_WC_SEND && xw[i].wr_id == 42 && xw[i].status == IBV_WC_SUCCESS;
      recvs += xw[i].opcode == IBV_WC_RECV && xw[i].wr_id == 500 && xw[i].byte_len == 12;
    }
    CHECK(k == 3 && writes == 1 && sends == 1 && recvs == 1 && strcmp(buf + 7000, "written-by-ibv_wr") == 0 &&
              strcmp(buf + 7500, "inline-send") == 0, "extended API: WRITE and inline SEND arrive");
    ibv_wr_start(qx);
    char hdr[64] = {0};
    ibv_wr_send_tso(qx, hdr, sizeof hdr, 1400);
    CHECK(ibv_wr_complete(qx) == EOPNOTSUPP, "unsupported ibv_wr_* op (TSO): EOPNOTSUPP at complete");
  }
  ibv_destroy_qp(xq);
  ibv_destroy_qp(yq);
  ibv_destroy_cq(cq4);

  /* A chain of receives stops at the bad one: those before it are posted, bad_wr names it. */
  struct ibv_qp* e = make_qp(IBV_QPT_RC, cq3, NULL);
  struct ibv_qp_attr ia = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_LOCAL_WRITE};
  ibv_modify_qp(e, &ia, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  struct ibv_sge one = {(uintptr_t)buf, 64, mr->lkey}, two[2] = {one, one};
  struct ibv_recv_wr r3 = {.wr_id = 3, .sg_list = &one, .num_sge = 1};
  struct ibv_recv_wr r2 = {.wr_id = 2, .next = &r3, .sg_list = two, .num_sge = 2};  /* max_recv_sge is 1 */
  struct ibv_recv_wr r1 = {.wr_id = 1, .next = &r2, .sg_list = &one, .num_sge = 1}, *rbad = NULL;
  CHECK(ibv_post_recv(e, &r1, &rbad) == EINVAL && rbad == &r2, "a bad receive in a chain: EINVAL, bad_wr names it");
  struct ibv_qp_attr ea = {.qp_state = IBV_QPS_ERR};
  ibv_modify_qp(e, &ea, IBV_QP_STATE);
  /* A receive posted in ERR is flushed after what the QP held: the next completion after the
   * first receive's is this marker's, so nothing of the refused ones came in between. */
  struct ibv_recv_wr r9 = {.wr_id = 9, .sg_list = &one, .num_sge = 1};
  got = wait_wc(cq3, &wc) == 1 && wc.status == IBV_WC_WR_FLUSH_ERR && wc.wr_id == 1;
  got = got && ibv_post_recv(e, &r9, &rbad) == 0 && wait_wc(cq3, &wc) == 1 && wc.status == IBV_WC_WR_FLUSH_ERR &&
        wc.wr_id == 9;
  CHECK(got, "the receive before it was posted (flushed once, alone)");
  ibv_destroy_qp(e);

  CHECK(ibv_rate_to_mult(IBV_RATE_10_GBPS) == 4 && mult_to_ibv_rate(4) == IBV_RATE_10_GBPS &&
            ibv_rate_to_mbps(IBV_RATE_25_GBPS) == 25781 && mbps_to_ibv_rate(25781) == IBV_RATE_25_GBPS &&
            mult_to_ibv_rate(-1) == IBV_RATE_MAX && ibv_rate_to_mult(IBV_RATE_25_GBPS) == -1,
        "rate conversions");

  /* What uroce does not have fails with an error, not a crash. */
  errno = 0;
  CHECK(ibv_alloc_mw(pd, (enum ibv_mw_type)3) == NULL && errno == EINVAL, "memory window of type 3: EINVAL");
  struct ibv_qp_init_attr xa = {.send_cq = cq3, .recv_cq = cq3, .qp_type = IBV_QPT_DRIVER,
                                .cap = {.max_send_wr = 1, .max_send_sge = 1}};
  errno = 0;
  CHECK(ibv_create_qp(pd, &xa) == NULL && errno == EOPNOTSUPP, "a driver QP: EOPNOTSUPP");
  errno = 0;
  CHECK(ibv_reg_mr(pd, buf, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ZERO_BASED) == NULL && errno == EOPNOTSUPP,
        "a zero-based region of host memory: EOPNOTSUPP");

  /* Extended CQ: SEND with immediate between two RC QPs on one ibv_cq_ex, polled with
   * start/next/end_poll and read field by field. */
  struct ibv_cq_init_attr_ex cx = {.cqe = 8,
                                   .wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM};
  struct ibv_cq_ex* cqx = ibv_create_cq_ex(ctx, &cx);
  struct ibv_qp* xs = cqx ? make_qp(IBV_QPT_RC, ibv_cq_ex_to_cq(cqx), NULL) : NULL;
  struct ibv_qp* xr = cqx ? make_qp(IBV_QPT_RC, ibv_cq_ex_to_cq(cqx), NULL) : NULL;
  CHECK(cqx && cqx->cqe >= 8 && xs && xr && connect_rc(xs, xr->qp_num, 70, 80) == 0 &&
            connect_rc(xr, xs->qp_num, 80, 70) == 0, "create_cq_ex; RC QPs on it");
  if (xs && xr) {
    struct ibv_poll_cq_attr pa = {0};
    CHECK(ibv_start_poll(cqx, &pa) == ENOENT, "start_poll on an empty CQ: ENOENT");
    memcpy(buf + 8000, "cq-ex-payload", 14);
    memset(buf + 8100, 0, 32);
    post_recv(xr, NULL, mr, buf + 8100, 32, 801);
    struct ibv_sge sg = {.addr = (uintptr_t)(buf + 8000), .length = 14, .lkey = mr->lkey};
    struct ibv_send_wr sw = {.wr_id = 800, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_IMM,
                             .send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(0xc0ffee)},
                       *sbad;
    CHECK(ibv_post_send(xs, &sw, &sbad) == 0, "SEND with immediate posted");
    int seen = 0, send_ok = 0, recv_ok = 0, started = 0;
    for (double end = now_s() + 10; seen < 2 && now_s() < end;) {
      int r = started ? ibv_next_poll(cqx) : ibv_start_poll(cqx, &pa);
      if (r == ENOENT) {
        if (started) ibv_end_poll(cqx);
        started = 0;
        continue;
      }
      started = 1;
      ++seen;
      if (cqx->status != IBV_WC_SUCCESS) continue;
      if (cqx->wr_id == 800)
        send_ok = ibv_wc_read_opcode(cqx) == IBV_WC_SEND && ibv_wc_read_qp_num(cqx) == xs->qp_num;
      if (cqx->wr_id == 801)
        recv_ok = ibv_wc_read_opcode(cqx) == IBV_WC_RECV && ibv_wc_read_byte_len(cqx) == 14 &&
                  (ibv_wc_read_wc_flags(cqx) & IBV_WC_WITH_IMM) && ntohl(ibv_wc_read_imm_data(cqx)) == 0xc0ffee &&
                  ibv_wc_read_qp_num(cqx) == xr->qp_num;
    }
    if (started) ibv_end_poll(cqx);
    CHECK(seen == 2 && send_ok, "extended poll: the send's wr_id, status, opcode and QP number");
    CHECK(recv_ok && strcmp(buf + 8100, "cq-ex-payload") == 0,
          "extended poll: the receive's opcode, byte_len, immediate, wc_flags; the bytes arrived");
    CHECK(ibv_start_poll(cqx, &pa) == ENOENT, "then the CQ is empty");
  }
  ibv_destroy_qp(xs);
  ibv_destroy_qp(xr);
  CHECK(cqx && ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)) == 0, "destroy the extended CQ");
  /* Completion timestamps: the device clock (ns, hca_core_clock 1 GHz), and wall-clock time. */
  struct ibv_device_attr_ex tx;
  CHECK(ibv_query_device_ex(ctx, NULL, &tx) == 0 && tx.completion_timestamp_mask == UINT64_MAX &&
            tx.hca_core_clock == 1000000,
        "query_device_ex: 64-bit completion timestamps at 1 GHz");
  struct ibv_values_ex v0 = {.comp_mask = IBV_VALUES_MASK_RAW_CLOCK}, v1 = v0;
  struct ibv_cq_init_attr_ex cts = {
      .cqe = 4, .wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK};
  struct ibv_cq_ex* tcq = ibv_create_cq_ex(ctx, &cts);
  struct ibv_qp* ts = tcq ? make_qp(IBV_QPT_RC, ibv_cq_ex_to_cq(tcq), NULL) : NULL;
  struct ibv_qp* tr = tcq ? make_qp(IBV_QPT_RC, ibv_cq_ex_to_cq(tcq), NULL) : NULL;
  CHECK(tcq && ts && tr && connect_rc(ts, tr->qp_num, 90, 91) == 0 && connect_rc(tr, ts->qp_num, 91, 90) == 0,
        "create_cq_ex with both timestamps; RC QPs on it");
  if (ts && tr) {
    struct timespec r0, r1;
    clock_gettime(CLOCK_REALTIME, &r0);
    CHECK(ibv_query_rt_values_ex(ctx, &v0) == 0, "query_rt_values_ex: the raw clock");
    post_send(ts, IBV_WR_RDMA_WRITE, mr, buf, 64, (uintptr_t)(buf + 6000), mr->rkey, 95);
    struct ibv_poll_cq_attr pa = {0};
    int r = ENOENT;
    for (double end = now_s() + 10; r == ENOENT && now_s() < end;) r = ibv_start_poll(tcq, &pa);
    uint64_t ts_ns = 0, wall = 0;
    if (r == 0) {
      ts_ns = ibv_wc_read_completion_ts(tcq);
      wall = ibv_wc_read_completion_wallclock_ns(tcq);
      ibv_end_poll(tcq);
    }
    ibv_query_rt_values_ex(ctx, &v1);
    clock_gettime(CLOCK_REALTIME, &r1);
    const uint64_t c0 = (uint64_t)v0.raw_clock.tv_sec * 1000000000u + (uint64_t)v0.raw_clock.tv_nsec;
    const uint64_t c1 = (uint64_t)v1.raw_clock.tv_sec * 1000000000u + (uint64_t)v1.raw_clock.tv_nsec;
    const uint64_t w0 = (uint64_t)r0.tv_sec * 1000000000u + (uint64_t)r0.tv_nsec;
    const uint64_t w1 = (uint64_t)r1.tv_sec * 1000000000u + (uint64_t)r1.tv_nsec;
    CHECK(r == 0 && tcq->wr_id == 95 && c0 <= ts_ns && ts_ns <= c1,
          "the completion's timestamp lies between two readings of the device clock around it");
    CHECK(r == 0 && wall + 1000000 >= w0 && wall <= w1 + 1000000, "its wall-clock time lies between the two around it");
  }
  ibv_destroy_qp(ts);
  ibv_destroy_qp(tr);
  if (tcq) ibv_destroy_cq(ibv_cq_ex_to_cq(tcq));
  struct ibv_cq_init_attr_ex cpd = {.cqe = 4, .comp_mask = IBV_CQ_INIT_ATTR_MASK_PD, .parent_domain = pd};
  errno = 0;
  CHECK(ibv_create_cq_ex(ctx, &cpd) == NULL && errno == EINVAL, "extended CQ 'in a parent domain' that is a PD: EINVAL");
  check_domains();
  struct ibv_cq_init_attr_ex czero = {.cqe = 0};
  errno = 0;
  CHECK(ibv_create_cq_ex(ctx, &czero) == NULL && errno == EINVAL, "extended CQ of 0 entries: EINVAL");

  second_context(list[0], mr, buf);

  CHECK(ibv_destroy_cq(cq) == EBUSY && ibv_destroy_srq(srq) == EBUSY && ibv_dealloc_pd(pd) == EBUSY,
        "destroying a CQ, SRQ or PD still in use: EBUSY");
  CHECK(ibv_query_qp(b, &qa, IBV_QP_STATE, &qi) == 0 && qi.send_cq == cq,
        "after EBUSY everything still works");
  ibv_destroy_ah(back);
  ibv_destroy_ah(ah);
  ibv_destroy_qp(u1);
  ibv_destroy_qp(u2);
  ibv_destroy_qp(c);
  ibv_destroy_qp(d);
  ibv_destroy_srq(srq);
  ibv_destroy_qp(a);
  ibv_destroy_qp(b);
  CHECK(ibv_destroy_cq(cq) == 0 && ibv_destroy_cq(cq2) == 0 && ibv_destroy_cq(cq3) == 0,
        "destroy the CQs once no QP uses them");
  CHECK(ibv_destroy_comp_channel(ch) == 0, "destroy_comp_channel");
  ibv_dereg_mr(mr);
  CHECK(ibv_dealloc_pd(pd) == 0, "dealloc_pd once nothing uses it");
  CHECK(ibv_close_device(ctx) == 0, "close_device");
  ibv_free_device_list(list);
  printf("verbs_features: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
