/* librdmacm's API on uroce, built against Debian's librdmacm-dev and run through uroce-run:
 * the exact events, statuses, errnos and private data a program sees, in one process (the
 * listener and the connecting ids share the device, whose CM answers itself).
 * Prints "rdmacm_errors: N passed, 0 failed". */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <rdma/rdma_cma.h>

#include "check.h"

static struct rdma_event_channel* ch;
static struct sockaddr_in server;

/* The next event, which must be of type `want`; its status is returned through *status. */
static struct rdma_cm_event* expect(enum rdma_cm_event_type want) {
  struct rdma_cm_event* ev = NULL;
  if (rdma_get_cm_event(ch, &ev)) {
    CHECK(0, "rdma_get_cm_event: %s", strerror(errno));
    return NULL;
  }
  CHECK(ev->event == want, "got %s, wanted %s (status %d)", rdma_event_str(ev->event), rdma_event_str(want),
        ev->status);
  return ev;
}

static void ack(struct rdma_cm_event* ev) {
  if (ev) rdma_ack_cm_event(ev);
}

static struct rdma_cm_id* resolved_in(struct sockaddr_in* to, enum rdma_port_space ps) {
  struct rdma_cm_id* id = NULL;
  CHECK(rdma_create_id(ch, &id, NULL, ps) == 0, "create_id");
  CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr*)to, 2000) == 0, "resolve_addr: %s", strerror(errno));
  ack(expect(RDMA_CM_EVENT_ADDR_RESOLVED));
  CHECK(rdma_resolve_route(id, 2000) == 0, "resolve_route");
  ack(expect(RDMA_CM_EVENT_ROUTE_RESOLVED));
  return id;
}

static struct rdma_cm_id* resolved_client(struct sockaddr_in* to) { return resolved_in(to, RDMA_PS_TCP); }

static void fill(uint8_t* p, size_t n, uint8_t seed) {
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(seed + i * 7);
}

static void check_devices_and_channel(void) {
  int n = 0;
  struct ibv_context** list = rdma_get_devices(&n);
  CHECK(list && n == 1 && list[0] && !strcmp(ibv_get_device_name(list[0]->device), "uroce_lo"), "rdma_get_devices");
  rdma_free_devices(list);
  struct rdma_event_channel* c = rdma_create_event_channel();
  fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
  struct rdma_cm_event* ev;
  errno = 0;
  CHECK(rdma_get_cm_event(c, &ev) == -1 && errno == EAGAIN, "non-blocking channel: EAGAIN, got %s", strerror(errno));
  rdma_destroy_event_channel(c);
}

static void check_reject_with_private_data(void) {
  struct rdma_cm_id* id = resolved_client(&server);
  uint8_t big[57], rej[20];
  struct rdma_conn_param p = {.private_data = big, .private_data_len = 57, .responder_resources = 1,
                              .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7, .qp_num = 0x123};
  errno = 0;
  CHECK(rdma_connect(id, &p) == -1 && errno == EINVAL, "57 bytes of REQ private data: EINVAL, got %s",
        strerror(errno));
  fill(big, 56, 3);
  p.private_data_len = 56;
  CHECK(rdma_connect(id, &p) == 0, "connect: %s", strerror(errno));
  struct rdma_cm_event* ev = expect(RDMA_CM_EVENT_CONNECT_REQUEST);
  if (ev) {
    CHECK(ev->param.conn.private_data_len >= 56 && !memcmp(ev->param.conn.private_data, big, 56),
          "REQ private data arrives byte for byte after the IP CM header (len %d)", ev->param.conn.private_data_len);
    CHECK(ev->param.conn.qp_num == 0x123, "REQ names the QPN, got %#x", ev->param.conn.qp_num);
    fill(rej, sizeof rej, 9);
    errno = 0;
    CHECK(rdma_accept(id, NULL) == -1 && errno == EINVAL, "accept on an active id: EINVAL");
    CHECK(rdma_reject(ev->id, rej, sizeof rej) == 0, "reject");
    struct rdma_cm_id* req = ev->id;
    ack(ev);
    rdma_destroy_id(req);
  }
  ev = expect(RDMA_CM_EVENT_REJECTED);
  if (ev) {
    CHECK(ev->status == 28, "REJ by the consumer: status 28, got %d", ev->status);
    CHECK(ev->param.conn.private_data_len >= sizeof rej && !memcmp(ev->param.conn.private_data, rej, sizeof rej),
          "REJ private data byte for byte");
  }
  ack(ev);
  rdma_destroy_id(id);
}

/* Options, and ECE for a program's own QP: what it sets goes out in the REQ, the passive side
 * reads it with rdma_get_remote_ece and may refuse it with rdma_reject_ece. */
static void check_options_and_ece(void) {
  struct rdma_cm_id* ud = NULL;
  CHECK(rdma_create_id(ch, &ud, NULL, RDMA_PS_UDP) == 0, "create UD id");
  uint8_t t = 18;
  CHECK(rdma_set_option(ud, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &t, sizeof t) == -1 && errno == EINVAL,
        "ACK timeout on a UD id: EINVAL, got %s", strerror(errno));
  rdma_destroy_id(ud);
  struct rdma_cm_id* id = resolved_client(&server);
  CHECK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &t, sizeof t) == 0, "ACK timeout on RC");
  struct ibv_ece ece;
  memset(&ece, 0xff, sizeof ece);
  CHECK(rdma_get_remote_ece(id, &ece) == 0 && ece.vendor_id == 0 && ece.options == 0 && ece.comp_mask == 0,
        "no remote ECE: all zero");
  struct ibv_ece none = {.vendor_id = 0, .options = 1};
  CHECK(rdma_set_local_ece(id, &none) == -1 && errno == EINVAL, "local ECE without a vendor: EINVAL");
  struct ibv_ece mine = {.vendor_id = 0x15b3, .options = 0x2a};
  CHECK(rdma_set_local_ece(id, &mine) == 0, "local ECE for the program's own QP: %s", strerror(errno));
  struct ibv_ah_attr ah = {.is_global = 1};
  ah.grh.dgid.raw[15] = 1;
  errno = 0;
  CHECK(ibv_create_ah(NULL, &ah) == NULL && errno == EINVAL, "ibv_create_ah without a PD: EINVAL");
  /* rdma_reject_ece: REJ reason 35, vendor option not supported. */
  CHECK(rdma_connect(id, NULL) == 0, "connect");
  struct rdma_cm_event* ev = expect(RDMA_CM_EVENT_CONNECT_REQUEST);
  struct rdma_cm_id* req = ev ? ev->id : NULL;
  ack(ev);
  if (req) {
    memset(&ece, 0, sizeof ece);
    CHECK(rdma_get_remote_ece(req, &ece) == 0 && ece.vendor_id == 0x15b3 && ece.options == 0x2a && ece.comp_mask == 0,
          "the REQ carried it: vendor %#x options %#x", ece.vendor_id, ece.options);
    CHECK(rdma_reject_ece(req, NULL, 0) == 0, "reject_ece: %s", strerror(errno));
    ev = expect(RDMA_CM_EVENT_REJECTED);
    if (ev) CHECK(ev->status == 35, "REJ for ECE: status 35, got %d", ev->status);
    ack(ev);
    rdma_destroy_id(req);
  }
  rdma_destroy_id(id);
}

/* ECE between two uroce QPs made by rdma_create_qp: the active side offers what its QP does
 * (ibv_query_ece), the passive QP takes it, and the REP brings the passive QP's back. An active
 * QP set to go-back-N (ibv_set_ece, options 0) makes the passive one go-back-N too. */
static void connect_with_qps(uint32_t offer, uint32_t* active_after, uint32_t* passive_after) {
  struct rdma_cm_id* id = resolved_client(&server);
  struct ibv_qp_init_attr qa = {.cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
                                .qp_type = IBV_QPT_RC};
  CHECK(rdma_create_qp(id, NULL, &qa) == 0, "active QP: %s", strerror(errno));
  struct ibv_ece e = {.vendor_id = 0x75726f, .options = offer};
  CHECK(id->qp && ibv_set_ece(id->qp, &e) == 0, "active QP's ECE set to %u", offer);
  struct rdma_conn_param p = {.responder_resources = 1, .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7};
  CHECK(rdma_connect(id, &p) == 0, "connect");
  struct rdma_cm_event* ev = expect(RDMA_CM_EVENT_CONNECT_REQUEST);
  struct rdma_cm_id* req = ev ? ev->id : NULL;
  ack(ev);
  if (!req) return;
  CHECK(rdma_create_qp(req, NULL, &qa) == 0, "passive QP: %s", strerror(errno));
  CHECK(rdma_accept(req, &p) == 0, "accept: %s", strerror(errno));
  for (int i = 0; i < 2; i++) ack(expect(RDMA_CM_EVENT_ESTABLISHED));
  struct ibv_ece a = {0}, b = {0};
  CHECK(ibv_query_ece(id->qp, &a) == 0 && ibv_query_ece(req->qp, &b) == 0 && a.vendor_id == 0x75726f &&
            b.vendor_id == 0x75726f, "both QPs report uroce's ECE");
  *active_after = a.options;
  *passive_after = b.options;
  rdma_disconnect(id);
  for (int i = 0; i < 2; i++) ack(expect(RDMA_CM_EVENT_DISCONNECTED));
  rdma_destroy_qp(req);
  rdma_destroy_qp(id);
  rdma_destroy_id(req);
  rdma_destroy_id(id);
}

static void check_ece_agreed(void) {
  uint32_t a = 9, b = 9;
  connect_with_qps(1, &a, &b);
  CHECK(a == 1 && b == 1, "selective repeat offered and agreed: active %u, passive %u", a, b);
  connect_with_qps(0, &a, &b);
  CHECK(a == 0 && b == 0, "go-back-N offered: the passive QP takes it (active %u, passive %u)", a, b);
}

static void check_accept_and_disconnect(void) {
  struct rdma_cm_id* id = resolved_client(&server);
  uint8_t rep[196];
  struct rdma_conn_param p = {.responder_resources = 1, .initiator_depth = 1, .retry_count = 7,
                              .rnr_retry_count = 7, .qp_num = 0x456};
  CHECK(rdma_connect(id, &p) == 0, "connect");
  struct rdma_cm_event* ev = expect(RDMA_CM_EVENT_CONNECT_REQUEST);
  struct rdma_cm_id* req = ev ? ev->id : NULL;
  ack(ev);
  if (!req) return;
  CHECK(rdma_get_dst_port(req) != 0 && rdma_get_src_port(req) == server.sin_port, "request ports");
  fill(rep, sizeof rep, 5);
  struct rdma_conn_param a = {.private_data = rep, .private_data_len = 196, .responder_resources = 1,
                              .initiator_depth = 1, .rnr_retry_count = 7, .qp_num = 0x789};
  CHECK(rdma_accept(req, &a) == 0, "accept: %s", strerror(errno));
  /* No QP on the active id: the program moves its QP and calls rdma_establish. */
  ev = expect(RDMA_CM_EVENT_CONNECT_RESPONSE);
  if (ev) {
    CHECK(ev->param.conn.qp_num == 0x789, "REP names the QPN, got %#x", ev->param.conn.qp_num);
    CHECK(ev->param.conn.private_data_len == 196 && !memcmp(ev->param.conn.private_data, rep, 196),
          "REP private data byte for byte");
  }
  ack(ev);
  CHECK(rdma_establish(id) == 0, "establish");
  ack(expect(RDMA_CM_EVENT_ESTABLISHED)); /* the passive side, on the RTU */
  CHECK(rdma_disconnect(id) == 0, "disconnect");
  /* Both sides report DISCONNECTED once: the passive on the DREQ, the active on the DREP. */
  int seen_active = 0, seen_passive = 0;
  for (int i = 0; i < 2; i++) {
    ev = expect(RDMA_CM_EVENT_DISCONNECTED);
    if (ev && ev->id == id) seen_active++;
    if (ev && ev->id == req) seen_passive++;
    ack(ev);
  }
  CHECK(seen_active == 1 && seen_passive == 1, "DISCONNECTED on each side once");
  CHECK(rdma_disconnect(req) == 0, "disconnect after the peer's DREQ");
  rdma_destroy_id(req);
  rdma_destroy_id(id);
}

static void check_no_listener(void) {
  struct sockaddr_in to = server;
  to.sin_port = htons(ntohs(server.sin_port) + 1);
  struct rdma_cm_id* id = resolved_client(&to);
  struct rdma_conn_param p = {.retry_count = 7, .rnr_retry_count = 7, .qp_num = 1};
  CHECK(rdma_connect(id, &p) == 0, "connect");
  struct rdma_cm_event* ev = expect(RDMA_CM_EVENT_REJECTED);
  CHECK(ev && ev->status == 8, "no listener: REJ reason 8 (invalid service ID), got %d", ev ? ev->status : -1);
  ack(ev);
  rdma_destroy_id(id);
}

static void check_peer_gone(const char* addr) {
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(7174)};
  inet_pton(AF_INET, addr, &to.sin_addr);
  struct rdma_cm_id* id = resolved_client(&to);
  struct rdma_conn_param p = {.retry_count = 7, .rnr_retry_count = 7, .qp_num = 1};
  CHECK(rdma_connect(id, &p) == 0, "connect");
  struct rdma_cm_event* ev = expect(RDMA_CM_EVENT_UNREACHABLE);
  CHECK(ev && ev->status == -ETIMEDOUT, "nobody answers: UNREACHABLE, -ETIMEDOUT, got %d", ev ? ev->status : 0);
  ack(ev);
  rdma_destroy_id(id);
}

/* Addresses: rdma_getaddrinfo takes them from the hints when node and service are NULL; once the
 * device has its address, a loopback address binds (as the kernel binds it to any device) and an
 * address the device does not hold does not. */
static void check_addresses(void) {
  struct rdma_addrinfo* res = NULL;
  errno = 0;
  CHECK(rdma_getaddrinfo(NULL, NULL, NULL, &res) == -1 && errno == EINVAL, "getaddrinfo(NULL, NULL, NULL): EINVAL");
  struct rdma_addrinfo hints = {.ai_dst_addr = (struct sockaddr*)&server, .ai_dst_len = sizeof server};
  CHECK(rdma_getaddrinfo(NULL, NULL, &hints, &res) == 0 && res->ai_family == AF_INET && res->ai_dst_len == sizeof server &&
            !memcmp(res->ai_dst_addr, &server, sizeof server) && !res->ai_src_addr,
        "getaddrinfo(NULL, NULL, hints): the hints' destination");
  if (res) rdma_freeaddrinfo(res);
  struct rdma_cm_id* id = NULL;
  CHECK(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP) == 0, "create_id");
  struct sockaddr_in lo = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
  CHECK(rdma_bind_addr(id, (struct sockaddr*)&lo) == 0 && id->verbs, "bind 127.0.0.1: %s", strerror(errno));
  rdma_destroy_id(id);
  CHECK(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP) == 0, "create_id");
  struct sockaddr_in other = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0xc0000201)}; /* 192.0.2.1 */
  errno = 0;
  CHECK(rdma_bind_addr(id, (struct sockaddr*)&other) == -1 && errno == EADDRNOTAVAIL,
        "bind an address the device does not hold: EADDRNOTAVAIL, got %s", strerror(errno));
  rdma_destroy_id(id);
}

/* A listener bound to one address takes the requests for that address only, as the kernel's
 * rdma_cm: a REQ naming another address of this host (the device's own) is rejected, status 28,
 * and one naming its address reaches it through the host's directory of loopback listeners.
 * Another process (a NIC of its own) may not listen where that conflicts, as the kernel refuses
 * a second bind of a port: at an address under our wildcard listener, or at the wildcard over
 * our listener bound to an address; at another address of the port it may. */
/* Multicast on RDMA_PS_UDP ids: the join's event carries the AH to the group, QPN 0xFFFFFF,
 * RDMA_UDP_QKEY and the caller's context; a member's QP is attached, a send-only one's is not;
 * errors for what is no UD id, no group or no membership. */
static void check_multicast(void) {
  struct sockaddr_in group = {.sin_family = AF_INET};
  inet_pton(AF_INET, "239.7.7.7", &group.sin_addr);
  struct rdma_cm_id* tcp = resolved_client(&server);
  errno = 0;
  CHECK(rdma_join_multicast(tcp, (struct sockaddr*)&group, NULL) == -1 && errno == EINVAL, "join on a TCP id: EINVAL");
  rdma_destroy_id(tcp);
  struct rdma_cm_id* unbound = NULL;
  rdma_create_id(ch, &unbound, NULL, RDMA_PS_UDP);
  errno = 0;
  CHECK(rdma_join_multicast(unbound, (struct sockaddr*)&group, NULL) == -1 && errno == EINVAL,
        "join before an address is bound or resolved: EINVAL");
  rdma_destroy_id(unbound);

  struct rdma_cm_id* routed = resolved_in(&server, RDMA_PS_UDP);
  errno = 0;
  CHECK(rdma_join_multicast(routed, (struct sockaddr*)&group, NULL) == -1 && errno == EINVAL,
        "join once the route is resolved: EINVAL, as the kernel (address bound or resolved only)");
  rdma_destroy_id(routed);

  /* A QP made after the join and before its event is taken is attached at the event. */
  struct rdma_cm_id* u = NULL;
  CHECK(rdma_create_id(ch, &u, NULL, RDMA_PS_UDP) == 0 && rdma_resolve_addr(u, NULL, (struct sockaddr*)&server, 2000) == 0,
        "a UDP id");
  ack(expect(RDMA_CM_EVENT_ADDR_RESOLVED));
  struct sockaddr_in early = group;
  inet_pton(AF_INET, "239.7.7.9", &early.sin_addr);
  CHECK(rdma_join_multicast(u, (struct sockaddr*)&early, NULL) == 0, "join before the QP");
  struct ibv_qp_init_attr qa = {.qp_type = IBV_QPT_UD, .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
  CHECK(rdma_create_qp(u, NULL, &qa) == 0, "a UD QP on the id: %s", strerror(errno));
  ack(expect(RDMA_CM_EVENT_MULTICAST_JOIN));
  union ibv_gid eg = {.raw = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 7, 7, 9}};
  CHECK(ibv_detach_mcast(u->qp, &eg, 0) == 0 && ibv_attach_mcast(u->qp, &eg, 0) == 0, "the QP was attached at the event");
  struct sockaddr_in other_port = early;
  other_port.sin_port = htons(7);
  errno = 0;
  CHECK(rdma_leave_multicast(u, (struct sockaddr*)&other_port) == -1 && errno == EADDRNOTAVAIL,
        "leave names the address joined, port included: EADDRNOTAVAIL");
  CHECK(rdma_leave_multicast(u, (struct sockaddr*)&early) == 0 && ibv_detach_mcast(u->qp, &eg, 0) == EINVAL, "leave detaches");
  errno = 0;
  CHECK(rdma_join_multicast(u, (struct sockaddr*)&server, NULL) == -1 && errno == EINVAL, "join a unicast address: EINVAL");
  int context = 0;
  CHECK(rdma_join_multicast(u, (struct sockaddr*)&group, &context) == 0, "join: %s", strerror(errno));
  struct rdma_cm_event* ev = expect(RDMA_CM_EVENT_MULTICAST_JOIN);
  static const uint8_t mgid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 7, 7, 7};
  CHECK(ev && ev->status == 0 && ev->id == u && ev->param.ud.qp_num == 0xffffff && ev->param.ud.qkey == RDMA_UDP_QKEY &&
            ev->param.ud.private_data == &context && ev->param.ud.ah_attr.is_global &&
            memcmp(ev->param.ud.ah_attr.grh.dgid.raw, mgid, 16) == 0,
        "MULTICAST_JOIN: the group's GID, QPN 0xFFFFFF, RDMA_UDP_QKEY, the context");
  ack(ev);
  union ibv_gid g;
  memcpy(g.raw, mgid, 16);
  CHECK(ibv_detach_mcast(u->qp, &g, 0) == 0 && ibv_attach_mcast(u->qp, &g, 0) == 0, "its QP was attached");
  struct sockaddr_in other = group;
  inet_pton(AF_INET, "239.7.7.8", &other.sin_addr);
  errno = 0;
  CHECK(rdma_leave_multicast(u, (struct sockaddr*)&other) == -1 && errno == EADDRNOTAVAIL,
        "leave a group not joined: EADDRNOTAVAIL");
  CHECK(rdma_leave_multicast(u, (struct sockaddr*)&group) == 0, "leave");
  CHECK(ibv_detach_mcast(u->qp, &g, 0) == EINVAL, "and its QP is detached");
  errno = 0;
  CHECK(rdma_leave_multicast(u, (struct sockaddr*)&group) == -1 && errno == EADDRNOTAVAIL, "leave again: EADDRNOTAVAIL");
  /* A send-only full member is told where to send and receives nothing. */
  struct rdma_cm_join_mc_attr_ex bare = {.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS, .addr = (struct sockaddr*)&group};
  errno = 0;
  CHECK(rdma_join_multicast_ex(u, &bare, NULL) == -1 && errno == EINVAL, "join_ex without join flags: EINVAL");
  struct rdma_cm_join_mc_attr_ex jx = {.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS,
                                       .join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER, .addr = (struct sockaddr*)&group};
  CHECK(rdma_join_multicast_ex(u, &jx, NULL) == 0, "join_ex, send-only");
  ev = expect(RDMA_CM_EVENT_MULTICAST_JOIN);
  CHECK(ev && ev->param.ud.qp_num == 0xffffff, "its event");
  ack(ev);
  CHECK(ibv_detach_mcast(u->qp, &g, 0) == EINVAL, "a send-only member's QP is not attached");
  CHECK(rdma_leave_multicast(u, (struct sockaddr*)&group) == 0, "leave the send-only membership");
  rdma_destroy_qp(u);
  rdma_destroy_id(u);
  /* A synchronous id's join returns with its event. */
  struct rdma_cm_id* s = NULL;
  CHECK(rdma_create_id(NULL, &s, NULL, RDMA_PS_UDP) == 0 && rdma_resolve_addr(s, NULL, (struct sockaddr*)&server, 2000) == 0,
        "a synchronous UDP id, resolved");
  CHECK(rdma_join_multicast(s, (struct sockaddr*)&group, NULL) == 0 && s->event && s->event->event == RDMA_CM_EVENT_MULTICAST_JOIN,
        "a synchronous join returns with MULTICAST_JOIN");
  CHECK(rdma_leave_multicast(s, (struct sockaddr*)&group) == 0, "and leaves");
  rdma_destroy_id(s);
}

static int listen_elsewhere(const char* addr, uint16_t port) {
  char p[8];
  snprintf(p, sizeof p, "%u", port);
  char* args[] = {"rdmacm_errors", "--listen", (char*)addr, p, NULL};
  pid_t pid;
  int status;
  extern char** environ;
  if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, args, environ) != 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The other process: rdma_listen's errno as its exit status (0: it listens; 200: no further). */
static int listen_here(const char* addr, int port) {
  unsetenv("UROCE_ADDR"); /* a NIC of its own, on 127.0.0.x */
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  struct rdma_cm_id* id = NULL;
  if (inet_pton(AF_INET, addr, &a.sin_addr) != 1 || rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP) ||
      rdma_bind_addr(id, (struct sockaddr*)&a))
    return 200;
  return rdma_listen(id, 1) ? errno : 0;
}

static void check_bound_address(void) {
  struct sockaddr_in lo = {.sin_family = AF_INET};
  lo.sin_addr.s_addr = htonl(ntohl(server.sin_addr.s_addr) == 0x7f000001 ? 0x7f000002 : 0x7f000001);
  char lo_s[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &lo.sin_addr, lo_s, sizeof lo_s);
  struct rdma_cm_id* l = NULL;
  CHECK(rdma_create_id(ch, &l, NULL, RDMA_PS_TCP) == 0 && rdma_bind_addr(l, (struct sockaddr*)&lo) == 0 &&
            rdma_listen(l, 4) == 0,
        "listen at %s: %s", lo_s, strerror(errno));
  lo.sin_port = rdma_get_src_port(l);
  struct sockaddr_in nic = server;
  nic.sin_port = lo.sin_port;
  struct rdma_conn_param p = {.retry_count = 7, .rnr_retry_count = 7, .qp_num = 1};
  struct rdma_cm_id* id = resolved_client(&nic);
  CHECK(rdma_connect(id, &p) == 0, "connect");
  struct rdma_cm_event* ev = expect(RDMA_CM_EVENT_REJECTED);
  CHECK(ev && ev->status == 28, "a REQ for the device's address at a listener bound to %s: REJ 28, got %d", lo_s,
        ev ? ev->status : -1);
  ack(ev);
  rdma_destroy_id(id);
  id = resolved_client(&lo);
  CHECK(rdma_connect(id, &p) == 0, "connect");
  ev = expect(RDMA_CM_EVENT_CONNECT_REQUEST);
  struct rdma_cm_id* req = ev && ev->event == RDMA_CM_EVENT_CONNECT_REQUEST ? ev->id : NULL;
  CHECK(ev && ev->listen_id == l, "a REQ for %s reaches the listener bound there", lo_s);
  ack(ev);
  if (req) {
    rdma_reject(req, NULL, 0);
    rdma_destroy_id(req);
    ack(expect(RDMA_CM_EVENT_REJECTED));
  }
  rdma_destroy_id(id);

  uint16_t any_port = ntohs(server.sin_port), lo_port = ntohs(lo.sin_port);
  int rc = listen_elsewhere(lo_s, any_port);
  CHECK(rc == EADDRINUSE, "another process at %s:%u, under our wildcard listener: EADDRINUSE, got %d", lo_s, any_port, rc);
  rc = listen_elsewhere("0.0.0.0", lo_port);
  CHECK(rc == EADDRINUSE, "another process at the wildcard of port %u, where we listen at %s: EADDRINUSE, got %d",
        lo_port, lo_s, rc);
  rc = listen_elsewhere("127.0.0.3", lo_port);
  CHECK(rc == 0, "another process at 127.0.0.3:%u, beside our %s: it listens, got %d", lo_port, lo_s, rc);
  rdma_destroy_id(l);
}

/* A listener holds at most its backlog of requests the program has not taken, as the kernel's
 * ucma, and of those one source at most a quarter, or 16 if that is more. A SIDR_REQ past either
 * is refused: UNREACHABLE, status 2 (SIDR "rejected"); the program then takes exactly that many. */
static void check_backlog(void) {
  struct rdma_event_channel* lch = rdma_create_event_channel();
  fcntl(lch->fd, F_SETFL, fcntl(lch->fd, F_GETFL) | O_NONBLOCK);
  const int backlog[2] = {2, 20}, held[2] = {2, 16}; /* 20: one source's share is 16 */
  for (int k = 0; k < 2; k++) {
    struct rdma_cm_id* l = NULL;
    struct sockaddr_in any = {.sin_family = AF_INET};
    CHECK(rdma_create_id(lch, &l, NULL, RDMA_PS_UDP) == 0 && rdma_bind_addr(l, (struct sockaddr*)&any) == 0 &&
              rdma_listen(l, backlog[k]) == 0,
          "UD listener: %s", strerror(errno));
    struct sockaddr_in to = server;
    to.sin_port = rdma_get_src_port(l);
    struct rdma_cm_id* c[17];
    for (int i = 0; i <= held[k]; i++) {
      c[i] = resolved_in(&to, RDMA_PS_UDP);
      CHECK(rdma_connect(c[i], NULL) == 0, "UD connect: %s", strerror(errno));
    }
    struct rdma_cm_event* ev = expect(RDMA_CM_EVENT_UNREACHABLE);
    CHECK(ev && ev->status == 2, "backlog %d, %d requests: one refused, status 2, got %d", backlog[k], held[k] + 1,
          ev ? ev->status : 0);
    ack(ev);
    int taken = 0;
    while (rdma_get_cm_event(lch, &ev) == 0) {
      CHECK(ev->event == RDMA_CM_EVENT_CONNECT_REQUEST, "listener: %s", rdma_event_str(ev->event));
      struct rdma_cm_id* req = ev->id;
      ack(ev);
      rdma_reject(req, NULL, 0);
      rdma_destroy_id(req);
      taken++;
    }
    CHECK(errno == EAGAIN && taken == held[k], "backlog %d: %d requests held, got %d", backlog[k], held[k], taken);
    for (int i = 0; i < taken; i++) ack(expect(RDMA_CM_EVENT_UNREACHABLE)); /* the refused ones */
    for (int i = 0; i <= held[k]; i++) rdma_destroy_id(c[i]);
    rdma_destroy_id(l);
  }
  rdma_destroy_event_channel(lch);
}

int main(int argc, char** argv) {
  if (argc == 4 && !strcmp(argv[1], "--listen")) return listen_here(argv[2], atoi(argv[3]));
  const char* gone = argc > 1 ? argv[1] : "127.0.0.254";
  check_devices_and_channel();
  ch = rdma_create_event_channel();
  struct rdma_cm_id* listen_id = NULL;
  CHECK(rdma_create_id(ch, &listen_id, NULL, RDMA_PS_TCP) == 0, "create_id");
  struct sockaddr_in any = {.sin_family = AF_INET};
  CHECK(rdma_bind_addr(listen_id, (struct sockaddr*)&any) == 0, "bind");
  CHECK(rdma_listen(listen_id, 8) == 0, "listen: %s", strerror(errno));
  struct rdma_cm_id* dup = NULL;
  rdma_create_id(ch, &dup, NULL, RDMA_PS_TCP);
  struct sockaddr_in same = {.sin_family = AF_INET, .sin_port = rdma_get_src_port(listen_id)};
  errno = 0;
  CHECK(rdma_bind_addr(dup, (struct sockaddr*)&same) == -1 && errno == EADDRINUSE, "port taken: EADDRINUSE");
  errno = 0;
  CHECK(rdma_connect(dup, NULL) == -1 && errno == EINVAL, "connect before resolving: EINVAL");
  rdma_destroy_id(dup);
  /* The listener's address: the device's, with the port it took. */
  struct ibv_context** list = rdma_get_devices(NULL);
  union ibv_gid gid;
  ibv_query_gid(list[0], 1, 0, &gid);
  rdma_free_devices(list);
  server.sin_family = AF_INET;
  memcpy(&server.sin_addr, gid.raw + 12, 4);
  server.sin_port = rdma_get_src_port(listen_id);

  check_addresses();
  check_reject_with_private_data();
  check_options_and_ece();
  check_ece_agreed();
  check_accept_and_disconnect();
  check_no_listener();
  check_bound_address();
  check_backlog();
  check_multicast();
  check_peer_gone(gone);
  rdma_destroy_id(listen_id);
  rdma_destroy_event_channel(ch);
  printf("rdmacm_errors: %d passed, %d failed\n", passed, failed);
  return failed != 0;
}
