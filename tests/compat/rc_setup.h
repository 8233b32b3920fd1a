/* What the drop-in C tests share to connect QPs on one device and wait for completions
 * (included once per program; static functions, each program using those it needs). */
#pragma once
#include <infiniband/verbs.h>
#include <time.h>

__attribute__((unused)) static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* One completion of cq within 10 s (status -1 if none). */
__attribute__((unused)) static struct ibv_wc one_wc(struct ibv_cq *cq) {
  struct ibv_wc wc = {.status = (enum ibv_wc_status)-1};
  for (double end = now_s() + 10; now_s() < end;)
    if (ibv_poll_cq(cq, 1, &wc) == 1) break;
  return wc;
}

/* RESET -> INIT -> RTR -> RTS toward QP dqpn at gid, granting the peer `access`: the
 * attributes an RC QP needs (XRC QPs take the same). */
__attribute__((unused)) static int to_rts(struct ibv_qp *q, uint32_t dqpn, unsigned access, union ibv_gid gid) {
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = access};
  int bad = ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  struct ibv_qp_attr r = {.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = dqpn, .rq_psn = 7,
                          .max_dest_rd_atomic = 4, .min_rnr_timer = 1,
                          .ah_attr = {.is_global = 1, .grh = {.dgid = gid, .hop_limit = 1}, .port_num = 1}};
  bad = bad || ibv_modify_qp(q, &r, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  struct ibv_qp_attr s = {.qp_state = IBV_QPS_RTS, .sq_psn = 7, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
                          .max_rd_atomic = 4};
  return bad || ibv_modify_qp(q, &s, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                         IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* A raw packet QP's bring-up: a port at INIT, nothing after (0, or what failed). */
__attribute__((unused)) static int raw_to_rts(struct ibv_qp *qp) {
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1};
  int bad = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PORT);
  a.qp_state = IBV_QPS_RTR;
  bad = bad || ibv_modify_qp(qp, &a, IBV_QP_STATE);
  a.qp_state = IBV_QPS_RTS;
  return bad || ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

/* The first device's context, its GID 0 in *gid; *list to free at the end. NULL if none. */
__attribute__((unused)) static struct ibv_context *open_first(struct ibv_device ***list, union ibv_gid *gid) {
  *list = ibv_get_device_list(NULL);
  struct ibv_context *c = *list && (*list)[0] ? ibv_open_device((*list)[0]) : NULL;
  if (c) ibv_query_gid(c, 1, 0, gid);
  return c;
}
