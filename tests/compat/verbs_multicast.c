/* UD multicast through libibverbs (built against Debian's, run on uroce with uroce-run): the
 * limits query_device reports, ibv_attach_mcast/ibv_detach_mcast and their errors, and a
 * group's datagrams delivered to every attached QP (the sender's own included), byte-exact,
 * with the group's address in the GRH; none to a QP with another Q_Key, a detached one, or for
 * a packet that names a QPN instead of the multicast one. Prints "N passed, M failed". */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define MCAST_QPN 0xffffff
#define QKEY 0x11111111u

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_mr *mr;
static char buf[1 << 16];
static union ibv_gid group;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static struct ibv_qp *ud_qp(enum ibv_qp_type type, uint32_t qkey) {
  struct ibv_qp_init_attr a = {.send_cq = cq, .recv_cq = cq, .qp_type = type,
                               .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1}};
  struct ibv_qp *q = ibv_create_qp(pd, &a);
  if (!q || type != IBV_QPT_UD) return q;
  struct ibv_qp_attr x = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qkey = qkey};
  int bad = ibv_modify_qp(q, &x, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
  x.qp_state = IBV_QPS_RTR;
  bad = bad || ibv_modify_qp(q, &x, IBV_QP_STATE);
  x.qp_state = IBV_QPS_RTS;
  x.sq_psn = 0;
  bad = bad || ibv_modify_qp(q, &x, IBV_QP_STATE | IBV_QP_SQ_PSN);
  if (bad) {
    ibv_destroy_qp(q);
    return NULL;
  }
  return q;
}

/* Each QP's receive lands in a slot of its own: 2 KiB at 2 KiB * slot. */
static void post_recv(struct ibv_qp *q, int slot) {
  struct ibv_sge s = {.addr = (uintptr_t)buf + 2048u * (unsigned)slot, .length = 2048, .lkey = mr->lkey};
  struct ibv_recv_wr w = {.wr_id = (uint64_t)slot, .sg_list = &s, .num_sge = 1}, *bad;
  ibv_post_recv(q, &w, &bad);
}

static int send_to(struct ibv_qp *from, struct ibv_ah *ah, uint32_t qpn, const char *text, uint64_t id) {
  char *src = buf + 60000;
  strcpy(src, text);
  struct ibv_sge s = {.addr = (uintptr_t)src, .length = (uint32_t)strlen(text) + 1, .lkey = mr->lkey};
  struct ibv_send_wr w = {.wr_id = id, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
                          .send_flags = IBV_SEND_SIGNALED}, *bad;
  w.wr.ud.ah = ah;
  w.wr.ud.remote_qpn = qpn;
  w.wr.ud.remote_qkey = QKEY;
  return ibv_post_send(from, &w, &bad);
}

/* Completions until `recvs` receives and `sends` sends came, or 10 s: the receives' slots. */
static int collect(int recvs, int sends, int *slots) {
  int r = 0, s = 0;
  for (double end = now_s() + 10; (r < recvs || s < sends) && now_s() < end;) {
    struct ibv_wc wc;
    if (ibv_poll_cq(cq, 1, &wc) != 1) continue;
    if (wc.status != IBV_WC_SUCCESS) {
      CHECK(0, "completion status %s", ibv_wc_status_str(wc.status));
      continue;
    }
    if (wc.opcode == IBV_WC_RECV)
      slots[r++] = (int)wc.wr_id;
    else
      s++;
  }
  return r;
}

static int got_in(int slot, const char *text) {
  const char *grh = buf + 2048 * slot;
  /* The GRH's last 20 bytes hold the IPv4 header: its destination is the group. */
  return memcmp(grh + 20 + 16, group.raw + 12, 4) == 0 && strcmp(grh + 40, text) == 0;
}

static int has(const int *slots, int n, int slot) {
  for (int i = 0; i < n; i++)
    if (slots[i] == slot) return 1;
  return 0;
}

int main(void) {
  int n = 0;
  struct ibv_device **list = ibv_get_device_list(&n);
  ctx = list && n > 0 ? ibv_open_device(list[0]) : NULL;
  if (!ctx) {
    printf("no device\n");
    return 1;
  }
  struct ibv_device_attr da;
  CHECK(ibv_query_device(ctx, &da) == 0 && da.max_mcast_grp > 0 && da.max_mcast_qp_attach > 0 &&
            da.max_total_mcast_qp_attach >= da.max_mcast_qp_attach,
        "query_device: multicast groups %d, QPs per group %d, in all %d", da.max_mcast_grp, da.max_mcast_qp_attach,
        da.max_total_mcast_qp_attach);
  pd = ibv_alloc_pd(ctx);
  cq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
  mr = pd ? ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE) : NULL;
  struct ibv_qp *u1 = ud_qp(IBV_QPT_UD, QKEY), *u2 = ud_qp(IBV_QPT_UD, QKEY), *other = ud_qp(IBV_QPT_UD, 0x2222);
  struct ibv_qp *rc = ud_qp(IBV_QPT_RC, 0);
  CHECK(cq && mr && u1 && u2 && other && rc, "resources");
  if (!(cq && mr && u1 && u2 && other && rc)) return 1;

  union ibv_gid unicast;  /* the device's first IPv4 GID: a host NIC lists its IPv6 ones too */
  int sgid = 0;
  for (; sgid < 16; sgid++)
    if (ibv_query_gid(ctx, 1, sgid, &unicast) == 0 && unicast.raw[10] == 0xff && unicast.raw[11] == 0xff) break;
  CHECK(sgid < 16, "an IPv4 GID, index %d", sgid);
  memset(&group, 0, sizeof group);
  group.raw[10] = group.raw[11] = 0xff;
  group.raw[12] = 239, group.raw[13] = 1, group.raw[14] = (uint8_t)(getpid() >> 8), group.raw[15] = (uint8_t)getpid();
  CHECK(ibv_attach_mcast(rc, &group, 0) == EINVAL, "an RC QP joins no group: EINVAL");
  CHECK(ibv_attach_mcast(u1, &unicast, 0) == EINVAL, "a unicast GID is no group: EINVAL");
  CHECK(ibv_detach_mcast(u1, &group, 0) == EINVAL, "detach of a QP not attached: EINVAL");
  CHECK(ibv_attach_mcast(u1, &group, 0) == 0 && ibv_attach_mcast(u1, &group, 0) == 0, "attach, and again: no error");
  CHECK(ibv_attach_mcast(u2, &group, 0) == 0 && ibv_attach_mcast(other, &group, 0) == 0, "two more QPs attach");

  struct ibv_ah_attr aa = {.is_global = 1, .grh = {.dgid = group, .sgid_index = (uint8_t)sgid, .hop_limit = 1},
                           .port_num = 1};
  struct ibv_ah *ah = ibv_create_ah(pd, &aa);
  CHECK(ah != NULL, "an AH to the group");
  int slots[8];
  post_recv(u1, 1);
  post_recv(u2, 2);
  post_recv(other, 3);
  CHECK(send_to(u1, ah, MCAST_QPN, "to the group", 100) == 0, "send to the group");
  int got = collect(2, 1, slots);
  /* The three QPs get their copies in one pass over the group: once u1's and u2's are here,
     a copy for `other` would be too. */
  CHECK(got == 2 && has(slots, got, 1) && has(slots, got, 2) && got_in(1, "to the group") && got_in(2, "to the group"),
        "the sender's QP and the other member receive it, byte-exact, the group in the GRH (%d receives)", got);
  struct ibv_wc extra;
  CHECK(ibv_poll_cq(cq, 1, &extra) == 0, "none for the member with another Q_Key");

  /* A packet to the group that names a QPN is no multicast packet: dropped. Then a good one;
     from the same QP both leave in order, and the good one finds the receives unused. */
  post_recv(u1, 1);
  post_recv(u2, 2);
  CHECK(send_to(u1, ah, u2->qp_num, "named a QPN", 101) == 0 && send_to(u1, ah, MCAST_QPN, "second", 102) == 0,
        "a send naming u2's QPN to the group, then one to the group");
  got = collect(2, 2, slots);
  CHECK(got == 2 && got_in(1, "second") && got_in(2, "second"), "only the one to the multicast QPN arrives (%d)", got);

  CHECK(ibv_detach_mcast(u2, &group, 0) == 0, "u2 detaches");
  CHECK(ibv_detach_mcast(u2, &group, 0) == EINVAL, "and detaching again: EINVAL");
  post_recv(u1, 1);
  post_recv(u2, 2);
  CHECK(send_to(u1, ah, MCAST_QPN, "third", 103) == 0, "send after u2 left");
  got = collect(1, 1, slots);
  CHECK(got == 1 && slots[0] == 1 && got_in(1, "third") && ibv_poll_cq(cq, 1, &extra) == 0,
        "only u1 receives it (%d)", got);

  /* An attached QP is not destroyed (EBUSY, as the kernel answers); detached, it is, and the
     group goes with its last member; a new QP joins it again and receives. */
  CHECK(ibv_destroy_qp(u1) == EBUSY, "destroying an attached QP: EBUSY");
  CHECK(ibv_detach_mcast(u1, &group, 0) == 0 && ibv_detach_mcast(other, &group, 0) == 0 && ibv_destroy_qp(u1) == 0 &&
            ibv_destroy_qp(other) == 0,
        "detach, then destroy");
  struct ibv_qp *u3 = ud_qp(IBV_QPT_UD, QKEY);
  CHECK(u3 && ibv_attach_mcast(u3, &group, 0) == 0, "a new QP attaches");
  post_recv(u3, 4);
  CHECK(send_to(u2, ah, MCAST_QPN, "fourth", 104) == 0, "a QP that is no member sends to the group");
  got = collect(1, 1, slots);
  CHECK(got == 1 && slots[0] == 4 && got_in(4, "fourth"), "the new member receives it (%d)", got);

  /* The limit of QPs per group: ENOMEM past it, and the group works on. */
  struct ibv_qp *many[80];
  int made = 0, attached = 1, refused = 0;
  for (; made < da.max_mcast_qp_attach + 1 && made < 80; made++) {
    many[made] = ud_qp(IBV_QPT_UD, QKEY);
    if (!many[made]) break;
    int e = ibv_attach_mcast(many[made], &group, 0);
    attached += e == 0;
    refused += e == ENOMEM;
  }
  CHECK(attached == da.max_mcast_qp_attach && refused == made + 1 - attached, "%d QPs attached, then ENOMEM (%d)",
        attached, refused);
  for (int i = 0; i < made; i++) {
    ibv_detach_mcast(many[i], &group, 0);
    ibv_destroy_qp(many[i]);
  }
  CHECK(ibv_detach_mcast(u3, &group, 0) == 0 && ibv_destroy_qp(u3) == 0 && ibv_destroy_qp(u2) == 0, "detach, destroy");
  ibv_destroy_ah(ah);
  ibv_destroy_qp(rc);
  ibv_dereg_mr(mr);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  ibv_free_device_list(list);
  printf("verbs_multicast: %d passed, %d failed\n", passed, failed);
  return failed != 0;
}
