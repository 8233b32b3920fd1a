// rsockets' keepalive (SO_KEEPALIVE): a connected socket that asked for it sends a zero-length
// RDMA WRITE every TCP_KEEPIDLE seconds (7200 unless set), as librdmacm's service thread does.
// The peer takes no receive for it and does nothing; a peer that is gone makes the WRITE fail
// (retry exceeded), and the socket then fails with ETIMEDOUT, as TCP's keepalive ends a
// connection to a dead host. One thread serves the process, sleeping a second between rounds,
// and ends when no socket wants it.
#include <sys/socket.h>

#include <chrono>
#include <thread>

#include "compat/rsocket/rsocket.hpp"

namespace uroce::compat::rs {
namespace {

std::mutex k_mu;
bool running = false;   // under k_mu
uint64_t wanted = 0;    // under k_mu: sockets asked since the thread last looked

// A zero-length RDMA WRITE: no rkey is checked, the peer's QP answers with an ACK.
void send_keepalive(Socket* s) {
  ++s->ctrl_seqno;
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = pack(kOpCtrl, kCtrlKeepalive);
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.wr.rdma.remote_addr = s->remote_sgl.addr;
  wr.wr.rdma.rkey = s->remote_sgl.key;
  if (ibv_post_send(s->id->qp, &wr, &bad)) --s->ctrl_seqno;
}

void serve() {
  for (;;) {
    uint64_t seen;
    {
      std::lock_guard g(k_mu);
      seen = wanted;
    }
    bool any = false;
    const uint64_t now = now_us();
    for_each_socket([&](Socket* s) {
      if (!wants_keepalive(s)) return;
      any = true;
      uint64_t next = s->keepalive_next_us.load(std::memory_order_relaxed);
      if (!(s->state & kConnected) || (next && now < next)) return;
      // Unless the program set a new period meanwhile (which starts it again from 0).
      const uint64_t then = now + uint64_t(s->keepalive_time.load(std::memory_order_relaxed)) * 1'000'000;
      if (!s->keepalive_next_us.compare_exchange_strong(next, then, std::memory_order_relaxed)) return;
      if (!next) return;  // the first period starts now
      std::unique_lock cq(s->cq_mu, std::try_to_lock);
      if (cq.owns_lock() && (s->state & kConnected) && s->ctrl_seqno != s->ctrl_max_seqno) send_keepalive(s);
    });
    if (!any) {
      std::lock_guard g(k_mu);
      if (wanted == seen) {  // nobody asked meanwhile
        running = false;
        return;
      }
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

}  // namespace

void keepalive_wanted(Socket* s) {
  s->keepalive_next_us.store(0, std::memory_order_relaxed);
  std::lock_guard g(k_mu);
  ++wanted;
  if (running) return;
  running = true;
  std::thread(serve).detach();
}

}  // namespace uroce::compat::rs
