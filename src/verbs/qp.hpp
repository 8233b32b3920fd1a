// A queue pair as the verbs see it: its attributes and state, the transition rules of its
// state machine (IBA 10.3.1), and its two work queues. What the transport keeps per QP (the
// state of its requester, completer and responder) is transport::Qp's, which derives from it.
#pragma once
#include <atomic>
#include <cstdint>

#include "uroce/result.hpp"
#include "uroce/types.hpp"
#include "verbs/ids.hpp"
#include "verbs/wq.hpp"

namespace uroce::verbs {

class Cq;
class Srq;

class Qp {
 public:
  Qp(Qpn qpn, QpType type, PdHandle pd, Cq* send_cq, Cq* recv_cq, const QpCap& cap);

  Qpn qpn() const { return qpn_; }
  QpType type() const { return type_; }
  PdHandle pd() const { return pd_; }
  // An XRC target QP has no PD of its own: each message takes its XRC SRQ's (engine thread).
  void set_pd(PdHandle pd) { pd_ = pd; }
  QpState state() const { return state_.load(std::memory_order_acquire); }
  const QpAttr& attr() const { return attr_; }
  uint32_t mtu() const { return mtu_bytes(attr_.path_mtu); }

  // Validates a verbs modify_qp request against the state machine (IBA 10.3.1, Table 90 rules)
  // and applies it. Engine lock held by the caller.
  Status modify(const QpAttr& a, uint32_t mask);
  void set_state(QpState s) { state_.store(s, std::memory_order_release); }

  WorkQueue<SendWqe, SendWqeExt> sq;
  WorkQueue<RecvWqe> rq;     // unused when the QP draws from an SRQ
  Cq* send_cq;
  Cq* recv_cq;
  Srq* srq = nullptr;

  bool sig_all() const { return sig_all_; }
  void set_sig_all(bool v) { sig_all_ = v; }

 private:
  Qpn qpn_;
  QpType type_;
  PdHandle pd_;
  std::atomic<QpState> state_{QpState::Reset};
  bool sig_all_ = false;
  QpAttr attr_;
};

// Outstanding READ/atomic requests per QP, each way (as rxe allows).
inline constexpr uint8_t kMaxRdAtomic = 128;

}  // namespace uroce::verbs
