/* FLUSH and ATOMIC WRITE (IBA 1.5) through libibverbs, as a program built against rdma-core 45
 * or later sees them: Debian's header has ATOMIC WRITE, and this program declares what newer
 * headers add for FLUSH (the access flags, the send-ops flag, wr_flush after wr_atomic_write,
 * the completion opcode) with their numbers. Checks the device's capability bits, the region
 * rights, both operations byte-exact with their completions, and the errors: a region without
 * the right, a placement type nothing grants, a QP without the operation in its send ops.
 * Prints "verbs_placement: N passed, M failed". */
#include <errno.h>
#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "rc_setup.h"

/* From rdma-core 45's verbs.h and the kernel's ib_user_verbs.h. */
#define ACCESS_FLUSH_GLOBAL (1 << 8)
#define ACCESS_FLUSH_PERSISTENT (1 << 9)
#define QP_EX_WITH_FLUSH (1ull << 11)
#define WC_FLUSH 8
#define FLUSH_GLOBAL 1
#define FLUSH_PERSISTENT 2
#define FLUSH_RANGE 0
#define FLUSH_MR 1
#define DEVICE_FLUSH_GLOBAL (1ull << 38)
#define DEVICE_FLUSH_PERSISTENT (1ull << 39)
#define DEVICE_ATOMIC_WRITE (1ull << 40)
struct qp_ex_v45 {
  struct ibv_qp_ex ex;
  void (*wr_flush)(struct ibv_qp_ex *qp, uint32_t rkey, uint64_t remote_addr, size_t len, uint8_t type, uint8_t level);
};

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static union ibv_gid gid;
static char mem[8192] __attribute__((aligned(64)));

static struct ibv_qp *qp_with(uint64_t send_ops) {
  struct ibv_qp_init_attr_ex a = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .pd = pd,
                                  .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
                                  .send_ops_flags = send_ops,
                                  .cap = {.max_send_wr = 8, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1}};
  return ibv_create_qp_ex(ctx, &a);
}

/* A connected pair: *x sends (send ops as given), *y takes the rights `access`. */
static int pair(struct ibv_qp **x, struct ibv_qp **y, uint64_t send_ops, unsigned access) {
  *x = qp_with(send_ops);
  *y = qp_with(IBV_QP_EX_WITH_SEND);
  return *x && *y && to_rts(*x, (*y)->qp_num, 0, gid) == 0 && to_rts(*y, (*x)->qp_num, access, gid) == 0;
}

static void unpair(struct ibv_qp *x, struct ibv_qp *y) {
  ibv_destroy_qp(x);
  ibv_destroy_qp(y);
}

static struct ibv_wc atomic_write(struct ibv_qp *x, uint32_t rkey, void *at, uint64_t value) {
  struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(x);
  ibv_wr_start(qx);
  qx->wr_id = 1;
  qx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_atomic_write(qx, rkey, (uintptr_t)at, &value);
  if (ibv_wr_complete(qx)) return (struct ibv_wc){.status = (enum ibv_wc_status)-2};
  return one_wc(cq);
}

static struct ibv_wc flush(struct ibv_qp *x, uint32_t rkey, void *at, size_t len, uint8_t type, uint8_t level) {
  struct qp_ex_v45 *qx = (struct qp_ex_v45 *)ibv_qp_to_qp_ex(x);
  ibv_wr_start(&qx->ex);
  qx->ex.wr_id = 2;
  qx->ex.wr_flags = IBV_SEND_SIGNALED;
  qx->wr_flush(&qx->ex, rkey, (uintptr_t)at, len, type, level);
  if (ibv_wr_complete(&qx->ex)) return (struct ibv_wc){.status = (enum ibv_wc_status)-2};
  return one_wc(cq);
}

static int all_are(const char *p, size_t n, char v) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != v) return 0;
  return 1;
}

int main(void) {
  struct ibv_device **list;
  ctx = open_first(&list, &gid);
  CHECK(ctx != NULL, "open_device");
  if (!ctx) return 1;
  struct ibv_device_attr_ex dx;
  CHECK(ibv_query_device_ex(ctx, NULL, &dx) == 0 && (dx.device_cap_flags_ex & DEVICE_FLUSH_GLOBAL) &&
            (dx.device_cap_flags_ex & DEVICE_ATOMIC_WRITE) && !(dx.device_cap_flags_ex & DEVICE_FLUSH_PERSISTENT),
        "device caps: FLUSH_GLOBAL and ATOMIC_WRITE, not FLUSH_PERSISTENT");
  pd = ibv_alloc_pd(ctx);
  cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
  const unsigned rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  struct ibv_mr *mr = ibv_reg_mr(pd, mem, 4096, rw | ACCESS_FLUSH_GLOBAL);
  struct ibv_mr *ro = ibv_reg_mr(pd, mem + 4096, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
  CHECK(pd && cq && mr && ro, "reg_mr with IBV_ACCESS_FLUSH_GLOBAL");
  errno = 0;
  CHECK(ibv_reg_mr(pd, mem, 4096, rw | ACCESS_FLUSH_PERSISTENT) == NULL && errno == EINVAL,
        "reg_mr with FLUSH_PERSISTENT: EINVAL, nothing here is persistent memory (errno %d)", errno);
  memset(mem, 0x55, sizeof mem);

  const uint64_t ops = IBV_QP_EX_WITH_ATOMIC_WRITE | QP_EX_WITH_FLUSH | IBV_QP_EX_WITH_RDMA_WRITE;
  const unsigned takes = rw | ACCESS_FLUSH_GLOBAL | ACCESS_FLUSH_PERSISTENT;
  struct ibv_qp *x, *y;
  CHECK(pair(&x, &y, ops, takes), "create_qp_ex with ATOMIC_WRITE and FLUSH send ops; RTS");
  const uint64_t v = 0x0102030405060708ull;
  struct ibv_wc wc = atomic_write(x, mr->rkey, mem + 64, v);
  CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_ATOMIC_WRITE && wc.wr_id == 1,
        "ibv_wr_atomic_write completes (status %d opcode %d)", wc.status, wc.opcode);
  CHECK(memcmp(mem + 64, &v, 8) == 0 && all_are(mem, 64, 0x55) && all_are(mem + 72, 4096 - 72, 0x55),
        "its 8 bytes, and no other, are written");
  wc = flush(x, mr->rkey, mem + 64, 256, FLUSH_GLOBAL, FLUSH_RANGE);
  CHECK(wc.status == IBV_WC_SUCCESS && (int)wc.opcode == WC_FLUSH && wc.wr_id == 2,
        "wr_flush of a range completes (status %d opcode %d)", wc.status, wc.opcode);
  wc = flush(x, mr->rkey, mem, 0, FLUSH_GLOBAL, FLUSH_MR);
  CHECK(wc.status == IBV_WC_SUCCESS && (int)wc.opcode == WC_FLUSH, "wr_flush of the whole region completes");
  wc = flush(x, mr->rkey, mem, 64, FLUSH_PERSISTENT, FLUSH_RANGE);
  CHECK(wc.status == IBV_WC_REM_ACCESS_ERR, "a persistent FLUSH: remote access error (status %d)", wc.status);
  unpair(x, y);

  CHECK(pair(&x, &y, ops, takes), "a second pair");
  wc = atomic_write(x, ro->rkey, mem + 4096, v);
  CHECK(wc.status == IBV_WC_REM_ACCESS_ERR && all_are(mem + 4096, 4096, 0x55),
        "ATOMIC WRITE to a region without REMOTE_WRITE: remote access error, nothing written");
  unpair(x, y);

  CHECK(pair(&x, &y, ops, IBV_ACCESS_REMOTE_READ), "a pair whose responder takes no writes");
  wc = atomic_write(x, mr->rkey, mem + 128, v);
  CHECK(wc.status == IBV_WC_REM_INV_REQ_ERR && all_are(mem + 128, 8, 0x55),
        "ATOMIC WRITE to a QP without REMOTE_WRITE: invalid request (status %d)", wc.status);
  unpair(x, y);

  CHECK(pair(&x, &y, IBV_QP_EX_WITH_RDMA_WRITE, takes), "a pair without the new send ops");
  struct ibv_sge s = {.addr = (uintptr_t)(mem + 256), .length = 8, .lkey = mr->lkey};
  struct ibv_send_wr w = {.wr_id = 3, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_ATOMIC_WRITE}, *bad;
  w.wr.rdma.remote_addr = (uintptr_t)(mem + 256);
  w.wr.rdma.rkey = mr->rkey;
  CHECK(ibv_post_send(x, &w, &bad) == EOPNOTSUPP && bad == &w, "ibv_post_send with ATOMIC_WRITE: EOPNOTSUPP, as rxe");
  unpair(x, y);

  ibv_dereg_mr(mr);
  ibv_dereg_mr(ro);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  printf("verbs_placement: %d passed, %d failed\n", passed, failed);
  return failed != 0;
}
