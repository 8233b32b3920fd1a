/* Importing objects into another context of the same process (ibv_import_device from a dup of
 * cmd_fd, ibv_import_pd/mr/dm by handle), as rdma-core's shared-PD tests do: the imported
 * context reaches the same NIC, a QP made there in the imported PD takes an RDMA WRITE into the
 * imported region byte-exact, device memory written through one handle reads back through the
 * other, and unimporting destroys nothing. Refused: an fd that is no context's (EOPNOTSUPP), an
 * unknown handle, a region imported into another PD (EINVAL).
 * Prints "verbs_import: N passed, M failed". */
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "rc_setup.h"

static char mem[8192], src[4096];

int main(void) {
  struct ibv_device **list;
  union ibv_gid gid;
  struct ibv_context *ctx = open_first(&list, &gid);
  CHECK(ctx != NULL, "open_device");
  if (!ctx) return 1;
  struct ibv_pd *pd = ibv_alloc_pd(ctx), *other = ibv_alloc_pd(ctx);
  struct ibv_mr *mr = pd ? ibv_reg_mr(pd, mem, sizeof mem, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) : NULL;
  CHECK(pd && other && mr && pd->handle != other->handle, "PDs with handles of their own, a region");

  struct ibv_context *ictx = ibv_import_device(dup(ctx->cmd_fd));
  CHECK(ictx != NULL && ictx != ctx, "ibv_import_device of a dup of cmd_fd: a context of its own");
  if (!ictx) return 1;
  struct ibv_pd *ipd = ibv_import_pd(ictx, pd->handle);
  struct ibv_mr *imr = ipd ? ibv_import_mr(ipd, mr->handle) : NULL;
  CHECK(ipd && imr && imr->lkey == mr->lkey && imr->rkey == mr->rkey && imr->pd == ipd,
        "ibv_import_pd and ibv_import_mr: the same region's keys, in the imported PD");
  errno = 0;
  CHECK(ibv_import_pd(ictx, 0xdead) == NULL && errno == EINVAL, "an unknown PD handle: EINVAL");
  struct ibv_pd *iother = ibv_import_pd(ictx, other->handle);
  errno = 0;
  CHECK(iother && ibv_import_mr(iother, mr->handle) == NULL && errno == EINVAL,
        "a region imported into another PD: EINVAL");
  int devnull = open("/dev/null", O_RDWR);
  errno = 0;
  CHECK(ibv_import_device(devnull) == NULL && errno == EOPNOTSUPP, "an fd that is no context's: EOPNOTSUPP");
  close(devnull);

  /* A QP of the imported context, in the imported PD, takes a WRITE into the imported region. */
  struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0), *icq = ibv_create_cq(ictx, 8, NULL, NULL, 0);
  struct ibv_qp_init_attr qa = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
                                .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
  struct ibv_qp *a = ibv_create_qp(pd, &qa);
  qa.send_cq = qa.recv_cq = icq;
  struct ibv_qp *b = ibv_create_qp(ipd, &qa);
  CHECK(a && b && to_rts(a, b->qp_num, 0, gid) == 0 && to_rts(b, a->qp_num, IBV_ACCESS_REMOTE_WRITE, gid) == 0,
        "a QP in each context, connected");
  for (size_t i = 0; i < sizeof src; i++) src[i] = (char)(i * 7 + 3);
  struct ibv_mr *smr = ibv_reg_mr(pd, src, sizeof src, 0);
  struct ibv_sge s = {.addr = (uintptr_t)src, .length = sizeof src, .lkey = smr ? smr->lkey : 0};
  struct ibv_send_wr w = {.wr_id = 1, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
                          .send_flags = IBV_SEND_SIGNALED}, *bad;
  w.wr.rdma.remote_addr = (uintptr_t)(mem + 1024);
  w.wr.rdma.rkey = imr ? imr->rkey : 0;
  struct ibv_wc wc = {.status = (enum ibv_wc_status)-1};
  if (a && smr && ibv_post_send(a, &w, &bad) == 0) wc = one_wc(cq);
  CHECK(wc.status == IBV_WC_SUCCESS && memcmp(mem + 1024, src, sizeof src) == 0,
        "an RDMA WRITE through the imported region's rkey, byte-exact (status %d)", wc.status);

  /* Device memory, written through one handle, read through the imported one. */
  struct ibv_alloc_dm_attr da = {.length = 256};
  struct ibv_dm *dm = ibv_alloc_dm(ctx, &da);
  struct ibv_dm *idm = dm ? ibv_import_dm(ictx, dm->handle) : NULL;
  char in[256], out[256] = {0};
  memset(in, 0x5a, sizeof in);
  CHECK(dm && idm && ibv_memcpy_to_dm(dm, 0, in, sizeof in) == 0 && ibv_memcpy_from_dm(out, idm, 0, sizeof out) == 0 &&
            memcmp(in, out, sizeof in) == 0,
        "ibv_import_dm: the same device memory");
  if (idm) ibv_unimport_dm(idm);

  ibv_destroy_qp(b);
  ibv_destroy_qp(a);
  ibv_unimport_mr(imr);
  ibv_unimport_pd(ipd);
  ibv_unimport_pd(iother);
  /* Unimported, the objects are their owner's still. */
  CHECK(ibv_dereg_mr(mr) == 0 && ibv_dereg_mr(smr) == 0 && (!dm || ibv_free_dm(dm) == 0), "the owner deregisters");
  CHECK(ibv_dealloc_pd(pd) == 0 && ibv_dealloc_pd(other) == 0, "and deallocates its PDs");
  ibv_destroy_cq(cq);
  ibv_destroy_cq(icq);
  ibv_close_device(ictx);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  printf("verbs_import: %d passed, %d failed\n", passed, failed);
  return failed != 0;
}
