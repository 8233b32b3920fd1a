// rsockets: ending a connection. rshutdown tells the peer in-band (a control message after the
// last data, so nothing sent is lost) and waits until our sends have completed; rclose then
// destroys the QP and the cm id, whose DREQ ends the connection for the CM as well.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "compat/rsocket/rsocket.hpp"

namespace uroce::compat::rs {

void free_socket(Socket* s) {
  remove(s);
  if (s->index >= 0) close(s->index);
  for (IoMapping& m : s->iomaps)
    if (m.mr) ibv_dereg_mr(m.mr);
  for (ibv_mr* mr : {s->smr, s->rmr, s->target_mr})
    if (mr) ibv_dereg_mr(mr);
  if (s->id) {
    if (s->id->qp) {
      if (s->unack_cqe) ibv_ack_cq_events(s->id->recv_cq, s->unack_cqe);
      rdma_destroy_qp(s->id);
    }
    ibv_cq* cq = s->id->recv_cq;
    ibv_comp_channel* ch = s->id->recv_cq_channel;
    s->id->recv_cq = s->id->send_cq = nullptr;
    s->id->recv_cq_channel = s->id->send_cq_channel = nullptr;
    if (cq) ibv_destroy_cq(cq);
    if (ch) ibv_destroy_comp_channel(ch);
    rdma_destroy_id(s->id);
  }
  free(s->sbuf);
  free(s->rbuf);
  free(s->targets);
  delete s;
}

}  // namespace uroce::compat::rs

using namespace uroce::compat::rs;

extern "C" {

int rshutdown(int socket, int how) {
  Socket* s = lookup(socket);
  if (!s) return fail(EBADF);
  if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) return fail(EINVAL);
  bool was_nonblocking = s->fs_flags & O_NONBLOCK;
  if (was_nonblocking) set_nonblocking(s, false);
  int ret = 0;
  if (s->state & kConnected) {
    uint32_t ctrl = kCtrlDisconnect;
    bool tell = true;
    if (how == SHUT_RDWR) {
      s->state &= ~(kReadable | kWritable);
    } else if (how == SHUT_WR) {
      s->state &= ~kWritable;
      if (s->state & kReadable) ctrl = kCtrlShutdown;
    } else {
      s->state &= ~kReadable;
      tell = !(s->state & kWritable);  // still sending: the peer hears of it at SHUT_WR
    }
    if (tell) {
      if (!can_send_ctrl(s)) ret = process_cq(s, false, can_send_ctrl);
      if (!ret && (s->state & kConnected) && s->ctrl_seqno != s->ctrl_max_seqno) {
        ++s->ctrl_seqno;
        ret = post_msg(s, pack(kOpCtrl, ctrl));
      }
    }
  }
  if (s->state & kConnected) process_cq(s, false, all_sends_done);
  if (was_nonblocking && (s->state & kConnected)) set_nonblocking(s, true);
  return ret;
}

int rclose(int socket) {
  Socket* s = lookup(socket);
  if (!s) return fail(EBADF);
  if (s->state & kConnected) rshutdown(socket, SHUT_RDWR);
  free_socket(s);
  return 0;
}

}  // extern "C"
