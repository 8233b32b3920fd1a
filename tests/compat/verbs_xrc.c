/* XRC through libibverbs (built against Debian's, run on uroce with uroce-run): ibv_open_xrcd
 * on a file (opened twice: one domain), XRC SRQs (ibv_create_srq_ex, ibv_get_srq_num), XRC
 * initiator and target QPs (ibv_create_qp_ex), SENDs naming an SRQ (qp_type.xrc.remote_srqn)
 * that land byte-exact in that SRQ's buffers and complete to its CQ, an RDMA WRITE through a
 * target, and the refusals: an SRQ of another domain (REM_INV_REQ_ERR, nothing received), a
 * domain closed while used (EBUSY), a number asked of a basic SRQ (EINVAL).
 * Prints "verbs_xrc: N passed, M failed". */
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "rc_setup.h"

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *scq, *rcq;
static union ibv_gid gid;
static char mem[1 << 16];
static struct ibv_mr *mr;

static struct ibv_xrcd *open_domain(int fd) {
  struct ibv_xrcd_init_attr a = {.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS, .fd = fd,
                                 .oflags = O_CREAT};
  return ibv_open_xrcd(ctx, &a);
}

static struct ibv_srq *xrc_srq(struct ibv_xrcd *x) {
  struct ibv_srq_init_attr_ex a = {.attr = {.max_wr = 16, .max_sge = 1},
                                   .comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
                                                IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ,
                                   .srq_type = IBV_SRQT_XRC, .pd = pd, .xrcd = x, .cq = rcq};
  return ibv_create_srq_ex(ctx, &a);
}

static struct ibv_qp *target(struct ibv_xrcd *x) {
  struct ibv_qp_init_attr_ex a = {.qp_type = IBV_QPT_XRC_RECV, .comp_mask = IBV_QP_INIT_ATTR_XRCD, .xrcd = x};
  return ibv_create_qp_ex(ctx, &a);
}

static struct ibv_qp *initiator(void) {
  struct ibv_qp_init_attr_ex a = {.qp_type = IBV_QPT_XRC_SEND, .send_cq = scq, .comp_mask = IBV_QP_INIT_ATTR_PD,
                                  .pd = pd, .cap = {.max_send_wr = 8, .max_send_sge = 1}};
  return ibv_create_qp_ex(ctx, &a);
}

static void post_srq(struct ibv_srq *s, int slot) {
  struct ibv_sge g = {.addr = (uintptr_t)mem + 4096u * (unsigned)slot, .length = 4096, .lkey = mr->lkey};
  struct ibv_recv_wr w = {.wr_id = (uint64_t)slot, .sg_list = &g, .num_sge = 1}, *bad;
  ibv_post_srq_recv(s, &w, &bad);
}

/* A SEND (or WRITE to `raddr`) of `len` bytes from slot 15, naming XRC SRQ srqn. */
static int send_xrc(struct ibv_qp *ini, uint32_t srqn, enum ibv_wr_opcode op, uint32_t len, char *raddr) {
  struct ibv_sge g = {.addr = (uintptr_t)mem + 15 * 4096, .length = len, .lkey = mr->lkey};
  struct ibv_send_wr w = {.wr_id = 77, .sg_list = &g, .num_sge = 1, .opcode = op, .send_flags = IBV_SEND_SIGNALED},
                     *bad;
  w.qp_type.xrc.remote_srqn = srqn;
  w.wr.rdma.remote_addr = (uintptr_t)raddr;
  w.wr.rdma.rkey = mr->rkey;
  return ibv_post_send(ini, &w, &bad);
}

int main(void) {
  struct ibv_device **list;
  ctx = open_first(&list, &gid);
  CHECK(ctx != NULL, "open_device");
  if (!ctx) return 1;
  struct ibv_device_attr da;
  CHECK(ibv_query_device(ctx, &da) == 0 && (da.device_cap_flags & IBV_DEVICE_XRC), "IBV_DEVICE_XRC");
  pd = ibv_alloc_pd(ctx);
  scq = ibv_create_cq(ctx, 32, NULL, NULL, 0);
  rcq = ibv_create_cq(ctx, 32, NULL, NULL, 0);
  mr = ibv_reg_mr(pd, mem, sizeof mem, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  char path[] = "/tmp/uroce-xrcd.XXXXXX";
  int fd = mkstemp(path);
  CHECK(pd && scq && rcq && mr && fd >= 0, "PD, CQs, MR, a file for the domain");
  struct ibv_xrcd *x1 = open_domain(fd), *x2 = open_domain(fd), *other = open_domain(-1);
  CHECK(x1 && x2 && other, "ibv_open_xrcd: a file twice, and fd -1");
  struct ibv_xrcd_init_attr excl = {.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS, .fd = fd,
                                    .oflags = O_CREAT | O_EXCL};
  struct ibv_xrcd_init_attr none_yet = {.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS, .fd = -1};
  errno = 0;
  CHECK(ibv_open_xrcd(ctx, &excl) == NULL && errno == EINVAL, "O_EXCL on a file that has a domain: EINVAL");
  errno = 0;
  CHECK(ibv_open_xrcd(ctx, &none_yet) == NULL && errno == EINVAL, "fd -1 without O_CREAT: EINVAL");
  struct ibv_srq *srq = x1 ? xrc_srq(x1) : NULL, *foreign = other ? xrc_srq(other) : NULL;
  uint32_t srqn = 0, fn = 0;
  CHECK(srq && foreign && ibv_get_srq_num(srq, &srqn) == 0 && ibv_get_srq_num(foreign, &fn) == 0 && srqn != fn,
        "XRC SRQs and their numbers");
  struct ibv_srq_init_attr basic = {.attr = {.max_wr = 4, .max_sge = 1}};
  struct ibv_srq *plain = ibv_create_srq(pd, &basic);
  uint32_t none = 0;
  CHECK(plain && ibv_get_srq_num(plain, &none) == EINVAL, "a basic SRQ has no number: EINVAL");

  /* The target is made in the second handle of the file's domain; the SRQ in the first. */
  struct ibv_qp *tgt = x2 ? target(x2) : NULL, *ini = initiator();
  const unsigned rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  CHECK(tgt && ini && to_rts(ini, tgt->qp_num, 0, gid) == 0 && to_rts(tgt, ini->qp_num, rw, gid) == 0,
        "an XRC initiator and target, connected");
  for (int i = 0; i < 4096; i++) mem[15 * 4096 + i] = (char)(i * 13 + 5);
  post_srq(srq, 0);
  post_srq(foreign, 1);
  int rc = send_xrc(ini, srqn, IBV_WR_SEND, 3000, NULL);
  struct ibv_wc sw = one_wc(scq), rw_ = one_wc(rcq);
  CHECK(rc == 0 && sw.status == IBV_WC_SUCCESS && sw.opcode == IBV_WC_SEND, "the SEND completes (status %d)",
        sw.status);
  CHECK(rw_.status == IBV_WC_SUCCESS && rw_.wr_id == 0 && rw_.byte_len == 3000 && rw_.qp_num == tgt->qp_num &&
            rw_.opcode == IBV_WC_RECV && memcmp(mem, mem + 15 * 4096, 3000) == 0,
        "it lands in the named SRQ's buffer, byte-exact, completing to the SRQ's CQ for the target QP");
  rc = send_xrc(ini, srqn, IBV_WR_RDMA_WRITE, 2048, mem + 2 * 4096);
  sw = one_wc(scq);
  CHECK(rc == 0 && sw.status == IBV_WC_SUCCESS && memcmp(mem + 2 * 4096, mem + 15 * 4096, 2048) == 0,
        "an RDMA WRITE through the target, in the SRQ's PD");
  CHECK(ibv_close_xrcd(x2) == EBUSY && ibv_close_xrcd(x1) == EBUSY, "a domain in use does not close: EBUSY");

  memset(mem + 4096, 0, 4096);
  rc = send_xrc(ini, fn, IBV_WR_SEND, 64, NULL);
  sw = one_wc(scq);
  struct ibv_wc none_wc;
  CHECK(rc == 0 && sw.status == IBV_WC_REM_INV_REQ_ERR && ibv_poll_cq(rcq, 1, &none_wc) == 0 && mem[4096] == 0,
        "an SRQ of another domain: REM_INV_REQ_ERR, nothing received (status %d)", sw.status);

  CHECK(ibv_destroy_qp(ini) == 0 && ibv_destroy_qp(tgt) == 0 && ibv_destroy_srq(srq) == 0 &&
            ibv_destroy_srq(foreign) == 0 && ibv_destroy_srq(plain) == 0,
        "destroy QPs and SRQs");
  CHECK(ibv_close_xrcd(x1) == 0 && ibv_close_xrcd(x2) == 0 && ibv_close_xrcd(other) == 0, "close the domains");
  close(fd);
  unlink(path);
  ibv_dereg_mr(mr);
  ibv_destroy_cq(scq);
  ibv_destroy_cq(rcq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  printf("verbs_xrc: %d passed, %d failed\n", passed, failed);
  return failed != 0;
}
