// A shared receive queue: receive WQEs that several QPs of one PD draw from, in order. When
// fewer than `limit` WQEs remain after one is taken, an armed SRQ raises SRQ_LIMIT_REACHED once
// and disarms (IBA 10.2.9.2, 11.6.3).
#pragma once
#include <atomic>
#include <cstdint>

#include <memory>

#include "verbs/ids.hpp"
#include "verbs/tag_list.hpp"
#include "verbs/wq.hpp"

namespace uroce::verbs {

class Cq;

class Srq {
 public:
  Srq(uint32_t handle, PdHandle pd, uint32_t depth, uint32_t max_sge)
      : rq(depth, max_sge, 0), handle_(handle), pd_(pd) {}
  uint32_t handle() const { return handle_; }
  PdHandle pd() const { return pd_; }
  uint32_t posted() const {
    return rq.prod.load(std::memory_order_acquire) - rq.done.load(std::memory_order_acquire);
  }

  WorkQueue<RecvWqe> rq;
  std::atomic<uint32_t> limit{0};  // 0: not armed
  // An XRC SRQ (IBA 10.2.9.x): its XRC domain (0: an ordinary SRQ) and the CQ its receives
  // complete to, whichever target QP of the domain took them. Its number is its handle.
  uint32_t xrcd = 0;
  Cq* cq = nullptr;
  // A work queue (ibv_create_wq): a receive queue with its own CQ that RSS QPs draw from, by
  // the hash of each frame. Frames reach it only while ready (IBV_WQS_RDY).
  bool wq = false;
  WqState wq_state = WqState::Reset;
  // A tag matching SRQ (transport/tag_matching.cpp): its tagged buffers and phase. Its
  // messages and list operations complete to `cq`.
  std::unique_ptr<TagList> tm;

 private:
  uint32_t handle_;
  PdHandle pd_;
};

}  // namespace uroce::verbs
