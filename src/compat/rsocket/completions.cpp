// rsockets: the completion side. Every message (data, SGL, control) ends in a completion of the
// socket's one CQ; polling it moves credits, ring space and state, and waiting on it is how a
// blocking call sleeps.
#include <fcntl.h>
#include <poll.h>
#include <sys/time.h>
#include <time.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "compat/rsocket/rsocket.hpp"

namespace uroce::compat::rs {

namespace {
bool ctrl_avail(const Socket* s) { return s->ctrl_seqno != s->ctrl_max_seqno; }

// Credits go back when half the receive queue has been used since the last grant, or when half
// the ring is free again (then with that half's SGL).
bool give_credits(const Socket* s) {
  return (s->rbuf_bytes_avail >= s->rbuf_size / 2 || int16_t(s->rseq_no - s->rseq_comp) >= 0) && ctrl_avail(s) &&
         (s->state & kConnected);
}

void send_credits(Socket* s) {
  ++s->ctrl_seqno;
  s->rseq_comp = uint16_t(s->rseq_no + s->rq_size / 2);
  uint32_t grant = pack(kOpSgl, uint16_t(s->rseq_no + s->rq_size));
  if (s->rbuf_bytes_avail < s->rbuf_size / 2) {
    post_msg(s, grant);
    return;
  }
  bool sw = s->swap;
  WireSge half{uintptr_t(s->rbuf + s->rbuf_free_offset), s->rmr->rkey, s->rbuf_size / 2};
  if (sw) half = {__builtin_bswap64(half.addr), __builtin_bswap32(half.key), __builtin_bswap32(half.length)};
  ibv_sge sg{uintptr_t(&half), sizeof half, 0};
  int flags = IBV_SEND_INLINE;
  if (s->sq_inline < sizeof half) {
    auto* slot = s->sbuf + s->sbuf_size + sizeof(WireSge) * (s->ctrl_seqno & (kCtrlSlots - 1));
    std::memcpy(slot, &half, sizeof half);
    sg = {uintptr_t(slot), sizeof half, s->smr->lkey};
    flags = 0;
  }
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = grant;
  wr.sg_list = &sg;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = flags;
  wr.imm_data = htonl(grant);
  wr.wr.rdma.remote_addr = s->remote_sgl.addr + s->remote_sge * sizeof(WireSge);
  wr.wr.rdma.rkey = s->remote_sgl.key;
  if (ibv_post_send(s->id->qp, &wr, &bad)) return;
  s->rbuf_bytes_avail -= s->rbuf_size / 2;
  s->rbuf_free_offset += s->rbuf_size / 2;
  if (s->rbuf_free_offset >= s->rbuf_size) s->rbuf_free_offset = 0;
  if (++s->remote_sge == int(s->remote_sgl.length)) s->remote_sge = 0;
}

void update_credits(Socket* s) {
  if (give_credits(s)) send_credits(s);
}

void on_recv(Socket* s, uint32_t msg) {
  switch (op_of(msg)) {
    case kOpSgl:
      s->sseq_comp = uint16_t(datum_of(msg));
      break;
    case kOpIomapSgl:  // the peer's table changed; it is read when used
    case kOpWrite:     // never sent with an immediate
      break;
    case kOpCtrl:
      if (datum_of(msg) == kCtrlDisconnect) {
        s->state = kDisconnected;
      } else if (datum_of(msg) == kCtrlShutdown) {
        if (s->state & kWritable)
          s->state &= ~kReadable;
        else
          s->state = kDisconnected;
      }
      break;
    default:  // data: its bytes are in the ring, in order
      if (datum_of(msg) > s->rbuf_size / 2) {  // more than a ring half holds: not an rsocket
        s->state = kError;
        s->err = EPROTO;
        break;
      }
      s->rmsg[s->rmsg_tail] = {op_of(msg), datum_of(msg)};
      if (++s->rmsg_tail == s->rmsg.size()) s->rmsg_tail = 0;
      break;
  }
}

void on_send(Socket* s, const ibv_wc& wc) {
  auto msg = uint32_t(wc.wr_id);
  switch (op_of(msg)) {
    case kOpSgl:
      ++s->ctrl_max_seqno;
      break;
    case kOpCtrl:
      ++s->ctrl_max_seqno;
      if (datum_of(msg) == kCtrlDisconnect) s->state = kDisconnected;
      break;
    case kOpIomapSgl:
      ++s->sqe_avail;
      s->sbuf_bytes_avail += sizeof(WireIomap);
      break;
    default:
      ++s->sqe_avail;
      s->sbuf_bytes_avail += datum_of(msg);
      break;
  }
  if (wc.status != IBV_WC_SUCCESS && (s->state & kConnected)) {
    s->state = kError;
    // A keepalive that found no peer: the connection timed out, as TCP says it.
    s->err = msg == pack(kOpCtrl, kCtrlKeepalive) ? ETIMEDOUT : EIO;
  }
}

int poll_cq(Socket* s) {
  ibv_wc wc;
  int ret, received = 0;
  while ((ret = ibv_poll_cq(s->id->recv_cq, 1, &wc)) > 0) {
    if (wc.wr_id & kRecvFlag) {
      if (wc.status != IBV_WC_SUCCESS) continue;  // flushed
      ++received;
      if (s->state & (kDisconnected | kError)) continue;  // nothing after the last word or a broken one counts
      if (wc.wc_flags & IBV_WC_WITH_IMM) on_recv(s, ntohl(wc.imm_data));
    } else {
      on_send(s, wc);
    }
  }
  if (ret < 0) return fail(EIO);
  ret = 0;
  if (s->peer_gone && (s->state & kConnected)) s->state = kDisconnected;
  if (s->state & kConnected) {
    for (; received > 0 && !ret; --received) {
      ibv_recv_wr wr{}, *bad = nullptr;
      wr.wr_id = kRecvFlag;
      ret = ibv_post_recv(s->id->qp, &wr, &bad);
    }
    if (ret) {
      s->state = kError;
      s->err = ret;
      return fail(ret);
    }
  }
  return 0;
}
}  // namespace

// Waits up to timeout_ms (-1: for ever; a non-blocking socket does not wait) until the CQ or the
// cm id has something, and takes it. wait_mu held.
int wait_event(Socket* s, int timeout_ms) {
  pollfd p[2] = {{s->id->recv_cq_channel->fd, POLLIN, 0}, {s->id->channel->fd, POLLIN, 0}};
  bool nonblock = fcntl(p[0].fd, F_GETFL) & O_NONBLOCK;
  int n = poll(p, 2, nonblock ? 0 : timeout_ms);
  if (n < 0) return -1;
  if (n == 0) return fail(EAGAIN);
  if (p[1].revents) handle_cm_event(s);
  if (p[0].revents) {
    ibv_cq* cq;
    void* ctx;
    if (ibv_get_cq_event(s->id->recv_cq_channel, &cq, &ctx)) return errno == EAGAIN ? 0 : -1;
    if (++s->unack_cqe >= unsigned(s->sq_size + s->rq_size)) {
      ibv_ack_cq_events(s->id->recv_cq, s->unack_cqe);
      s->unack_cqe = 0;
    }
    s->cq_armed = false;
  }
  return 0;
}
// A connected socket's cm id speaks only to say the connection is gone (a peer that died or
// destroyed its id without the rsocket's DISCONNECT message). Its data came before that, and
// may still wait in the CQ: the next poll_cq takes it, then ends the connection.
void handle_cm_event(Socket* s) {
  int fl = fcntl(s->id->channel->fd, F_GETFL);
  fcntl(s->id->channel->fd, F_SETFL, fl | O_NONBLOCK);
  rdma_cm_event* ev = nullptr;
  while (!rdma_get_cm_event(s->id->channel, &ev)) {
    if (ev->event == RDMA_CM_EVENT_DISCONNECTED || ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL) {
      s->peer_gone = true;
    }
    rdma_ack_cm_event(ev);
  }
  fcntl(s->id->channel->fd, F_SETFL, fl);
}

uint64_t now_us() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000 + uint64_t(ts.tv_nsec) / 1000;
}

bool nonblocking(const Socket* s, int flags) { return (s->fs_flags & O_NONBLOCK) || (flags & MSG_DONTWAIT); }

// Room to send one more message: a WQE, ring space for a sizable piece, a credit, and a ring
// half of the peer's to write into (which the peer's RDMA WRITE may fill in at any moment).
bool can_send(Socket* s) {
  auto len = std::atomic_ref(s->target_sgl[s->target_sge].length).load(std::memory_order_acquire);
  return s->sqe_avail > 0 && s->sbuf_bytes_avail >= kSndLowat && s->sseq_no != s->sseq_comp && len != 0;
}
bool has_rdata(const Socket* s) { return s->rmsg_head != s->rmsg_tail; }
bool can_send_ctrl(Socket* s) { return ctrl_avail(s) || !(s->state & kConnected); }
bool all_sends_done(Socket* s) {
  return int(s->ctrl_max_seqno - s->ctrl_seqno) + s->sqe_avail == s->sq_size || !(s->state & kConnected);
}

int post_msg(Socket* s, uint32_t msg) {
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = msg;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.imm_data = htonl(msg);
  if (int e = ibv_post_send(s->id->qp, &wr, &bad)) return fail(e);
  return 0;
}

// Polls and grants credits until test(s) holds; without nonblock, sleeps on the CQ's channel in
// between (one thread at a time: a sender waiting for credits must not stop a receiver polling).
int process_cq(Socket* s, bool nonblock, Test test) {
  std::unique_lock g(s->cq_mu);
  int ret;
  do {
    update_credits(s);
    ret = poll_cq(s);
    if (test(s)) {
      ret = 0;
      break;
    }
    if (ret) break;
    if (nonblock) {
      ret = fail(EWOULDBLOCK);
    } else if (!s->cq_armed) {
      ibv_req_notify_cq(s->id->recv_cq, 0);
      s->cq_armed = true;
    } else {
      update_credits(s);
      std::lock_guard w(s->wait_mu);
      g.unlock();
      ret = wait_event(s, -1);
      g.lock();
    }
  } while (!ret);
  update_credits(s);
  return ret;
}

int get_comp(Socket* s, bool nonblock, Test test) {
  uint64_t start = 0;
  for (;;) {
    int ret = process_cq(s, true, test);
    if (!ret || nonblock || errno != EWOULDBLOCK) return ret;
    if (!start)
      start = now_us();
    else if (now_us() - start > kSpinUs)
      return process_cq(s, false, test);
  }
}

}  // namespace uroce::compat::rs
