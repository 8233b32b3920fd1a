/* Packet pacing through libibverbs (built against Debian's, run on uroce with uroce-run): the
 * device's packet_pacing_caps, ibv_modify_qp_rate_limit and IBV_QP_RATE_LIMIT, their refusals,
 * and a limited QP that never sends faster than its limit (2 MiB of WRITEs at 40 Mb/s take at
 * least 95 % of the 0.42 s that needs; a lower bound only: a slow machine cannot fail it).
 * Prints "verbs_rate: N passed, M failed". */
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "rc_setup.h"

static char src[1 << 21], dst[1 << 21];

int main(void) {
  struct ibv_device **list;
  union ibv_gid gid;
  struct ibv_context *ctx = open_first(&list, &gid);
  if (!ctx) {
    printf("verbs_rate: no device\n");
    return 1;
  }
  struct ibv_device_attr_ex dx;
  CHECK(ibv_query_device_ex(ctx, NULL, &dx) == 0, "query_device_ex");
  const struct ibv_packet_pacing_caps *pp = &dx.packet_pacing_caps;
  CHECK(pp->qp_rate_limit_min >= 1 && pp->qp_rate_limit_max >= 10000000, "rate range %u..%u kbps",
        pp->qp_rate_limit_min, pp->qp_rate_limit_max);
  CHECK((pp->supported_qpts & (1u << IBV_QPT_RC)) && (pp->supported_qpts & (1u << IBV_QPT_UD)) &&
            (pp->supported_qpts & (1u << IBV_QPT_RAW_PACKET)),
        "supported_qpts 0x%x", pp->supported_qpts);
  struct ibv_pd *pd = ibv_alloc_pd(ctx);
  struct ibv_cq *cq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
  struct ibv_mr *ms = ibv_reg_mr(pd, src, sizeof src, IBV_ACCESS_LOCAL_WRITE);
  struct ibv_mr *md = ibv_reg_mr(pd, dst, sizeof dst, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  struct ibv_qp_init_attr qi = {.send_cq = cq, .recv_cq = cq, .cap = {64, 8, 1, 1, 0}, .qp_type = IBV_QPT_RC};
  struct ibv_qp *a = ibv_create_qp(pd, &qi), *b = ibv_create_qp(pd, &qi);
  CHECK(pd && cq && ms && md && a && b, "objects");
  unsigned access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  CHECK(to_rts(a, b->qp_num, access, gid) == 0 && to_rts(b, a->qp_num, access, gid) == 0, "to RTS");

  struct ibv_qp_rate_limit_attr rl = {.rate_limit = pp->qp_rate_limit_max + 1};
  CHECK(ibv_modify_qp_rate_limit(a, &rl) == EINVAL, "above the maximum: EINVAL");
  rl = (struct ibv_qp_rate_limit_attr){.max_burst_sz = 4096};
  CHECK(ibv_modify_qp_rate_limit(a, &rl) == EINVAL, "a burst without a rate: EINVAL");
  rl = (struct ibv_qp_rate_limit_attr){.rate_limit = 1000, .comp_mask = 1};
  CHECK(ibv_modify_qp_rate_limit(a, &rl) == EINVAL, "an unknown comp_mask: EINVAL");
  struct ibv_qp_attr at = {.rate_limit = 40000};
  CHECK(ibv_modify_qp(a, &at, IBV_QP_RATE_LIMIT) == 0, "IBV_QP_RATE_LIMIT at RTS->RTS");
  rl = (struct ibv_qp_rate_limit_attr){.rate_limit = 40000, .max_burst_sz = 2048, .typical_pkt_sz = 1024};
  CHECK(ibv_modify_qp_rate_limit(a, &rl) == 0, "ibv_modify_qp_rate_limit: 40 Mb/s");

  for (size_t i = 0; i < sizeof src; ++i) src[i] = (char)(i * 31 + 7);
  const uint32_t kChunk = 1 << 16, kN = sizeof src / kChunk;
  const double start = now_s();
  for (uint32_t i = 0; i < kN; ++i) {
    struct ibv_sge g = {.addr = (uintptr_t)src + i * kChunk, .length = kChunk, .lkey = ms->lkey};
    struct ibv_send_wr w = {.wr_id = i, .sg_list = &g, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
                            .send_flags = IBV_SEND_SIGNALED,
                            .wr.rdma = {.remote_addr = (uintptr_t)dst + i * kChunk, .rkey = md->rkey}},
                       *bad;
    CHECK(ibv_post_send(a, &w, &bad) == 0, "post WRITE %u", i);
  }
  int done = 0, ok = 0;
  while (done < (int)kN) {
    struct ibv_wc wc = one_wc(cq);
    if ((int)wc.status == -1) break;
    ++done;
    ok += wc.status == IBV_WC_SUCCESS;
  }
  const double took = now_s() - start;
  CHECK(ok == (int)kN, "%d of %u WRITEs completed", ok, kN);
  CHECK(memcmp(src, dst, sizeof src) == 0, "every byte");
  const double floor = (double)sizeof src * 8 / 40e6;  /* payload alone, at the limit */
  CHECK(took >= 0.95 * floor, "2 MiB at 40 Mb/s in %.3f s: faster than the limit allows (%.3f s)", took, floor);
  printf("verbs_rate: 2 MiB at a 40 Mb/s limit took %.3f s (%.1f Mb/s of payload)\n", took,
         (double)sizeof src * 8 / took / 1e6);
  rl = (struct ibv_qp_rate_limit_attr){.rate_limit = 0};
  CHECK(ibv_modify_qp_rate_limit(a, &rl) == 0, "lifting the limit");

  ibv_destroy_qp(a);
  ibv_destroy_qp(b);
  ibv_dereg_mr(ms);
  ibv_dereg_mr(md);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  printf("verbs_rate: %d passed, %d failed\n", passed, failed);
  return failed != 0;
}
