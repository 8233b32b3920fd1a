// Two protocol cores with one connected RC QP pair on the simulator's lossy link.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "transport/bringup.hpp"
#include "sim/sim.hpp"
#include "transport/protocol_core.hpp"
#include "wire/icrc.hpp"
#include "wire/packet.hpp"

namespace uroce::test {

// Hands `to` packet p as sent on flow f: right addresses, ports and ICRC, so only the transport
// can reject it (what an attacker who knows the addresses and the QPN could send).
inline void inject_packet(transport::ProtocolCore& to, const wire::FlowAddr& f, wire::Packet& p, uint64_t now,
                          const wire::Ipv4Fields& ip = {}) {
  std::vector<uint8_t> buf(wire::encoded_len(p));
  size_t n = wire::encode(p, buf.data());
  wire::icrc_store(buf.data() + n, wire::icrc_for_flow(f, std::span<const uint8_t>(buf.data(), n)));
  to.on_packet(std::span<const uint8_t>(buf.data(), n + wire::kIcrcLen), f, now, ip);
}

struct Side {
  transport::ProtocolCore* pc = nullptr;
  verbs::PdHandle pd;
  verbs::Cq* scq = nullptr;
  verbs::Cq* rcq = nullptr;
  transport::Qp* qp = nullptr;
  uint32_t xrcd = 0;           // PairOptions::xrc, B: its XRC domain
  verbs::Srq* srq = nullptr;   // and its XRC SRQ (completing to rcq)
};

struct PairOptions {
  uint64_t seed = 1;
  sim::FaultConfig faults;
  Mtu mtu = Mtu::Mtu1024;
  uint32_t psn_a = 0x100, psn_b = 0x200;
  uint8_t timeout = 10, retry_cnt = 7, rnr_retry = 7, min_rnr_timer = 1;
  uint8_t max_rd_atomic = 4;
  uint32_t access = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
  QpCap cap{256, 256, 4, 4, 64};
  uint32_t cq_depth = 4096;
  QpType type = QpType::RC;
  // The verdict on each packet a or b receives (CoreConfig::trace): its responder's on
  // requests, its completer's on responses.
  std::function<void(const transport::Qp&, const wire::Packet&, transport::Verdict)> trace_a, trace_b;
  // Applied to both cores' configurations (congestion control, for one).
  std::function<void(transport::CoreConfig&)> config;
  // Then to b's alone (two different peers).
  std::function<void(transport::CoreConfig&)> config_b;
  // Chosen for both QPs, as two peers agree on it (ECE, the C++ API's connect).
  std::optional<transport::Reliability> reliability;
  // Chosen for A's QP alone (its peer left to its device's choice).
  std::optional<transport::Reliability> reliability_a;
  // XRC: A's QP an initiator, B's a target of B's XRC domain, with an XRC SRQ there.
  bool xrc = false;
};

inline constexpr uint32_t kIpA = 0x0a000001, kIpB = 0x0a000002;

class CorePair {
 public:
  explicit CorePair(const PairOptions& o = {}) : opt(o), sim(o.seed, o.faults) {
    transport::CoreConfig ca;
    ca.trace = o.trace_a;
    if (o.config) o.config(ca);
    a.pc = &sim.add_core(kIpA, ca);
    transport::CoreConfig cb;
    cb.trace = o.trace_b;
    if (o.config) o.config(cb);
    if (o.config_b) o.config_b(cb);
    b.pc = &sim.add_core(kIpB, cb);
    setup(a);
    setup(b);
    connect(a, b, o.psn_a, o.psn_b, kIpB);
    connect(b, a, o.psn_b, o.psn_a, kIpA);
  }

  void setup(Side& s) {
    s.pd = *s.pc->alloc_pd();
    s.scq = *s.pc->create_cq(opt.cq_depth);
    s.rcq = *s.pc->create_cq(opt.cq_depth);
    if (opt.xrc && &s == &b) {
      s.xrcd = *s.pc->create_xrcd();
      auto srq = s.pc->create_xrc_srq(s.pd, s.xrcd, s.rcq, 256, 4);
      ASSERT_TRUE(srq.ok()) << srq.error().message;
      s.srq = *srq;
    }
    QpCap cap = opt.cap;
    if (opt.xrc) cap.max_recv_wr = 0;
    auto qp = !opt.xrc ? s.pc->create_qp(s.pd, opt.type, s.scq, s.rcq, opt.cap, false)
              : &s == &a ? s.pc->create_qp(s.pd, QpType::XrcSend, s.scq, s.scq, cap, false)
                         : s.pc->create_xrc_tgt(s.xrcd);
    ASSERT_TRUE(qp.ok()) << qp.error().message;
    s.qp = *qp;
    if (auto r = &s == &a && opt.reliability_a ? opt.reliability_a : opt.reliability) {
      ASSERT_TRUE(s.pc->set_reliability(*s.qp, *r));
    }
  }

  void connect(Side& s, Side& peer, uint32_t my_psn, uint32_t peer_psn, uint32_t peer_ip) {
    ConnectOptions c;
    c.path_mtu = opt.mtu;
    c.access = opt.access;
    c.timeout = opt.timeout;
    c.retry_cnt = opt.retry_cnt;
    c.rnr_retry = opt.rnr_retry;
    c.min_rnr_timer = opt.min_rnr_timer;
    c.max_rd_atomic = opt.max_rd_atomic;
    c.max_dest_rd_atomic = 16;
    Endpoint remote;
    remote.gid = Gid::from_ipv4(peer_ip);
    remote.qpn = peer.qp->qpn().value();
    remote.psn = peer_psn;
    auto st = transport::connect_rc(*s.pc, *s.qp, remote, my_psn, c);
    ASSERT_TRUE(st) << st.error().message;
  }

  // The keys as an application holds them: plain numbers for its SGEs and work requests.
  struct Keys {
    uint32_t lkey = 0, rkey = 0;
  };
  Keys reg(Side& s, void* p, size_t len, uint32_t access = kAccessLocalWrite | kAccessRemoteWrite |
                                                             kAccessRemoteRead | kAccessRemoteAtomic) {
    auto r = s.pc->reg_mr(s.pd, p, len, access);
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? Keys{r->lkey.value(), r->rkey.value()} : Keys{};
  }

  // With PairOptions::xrc, A's requests name B's XRC SRQ (unless they name one) and B's
  // receives go to that SRQ.
  Status send(Side& s, const SendWr& wr) {
    SendWr w = wr;
    if (opt.xrc && &s == &a && !w.remote_srqn) w.remote_srqn = b.srq->handle();
    return s.pc->post_send(*s.qp, std::span<const SendWr>(&w, 1));
  }
  Status recv(Side& s, const RecvWr& wr) {
    if (s.srq) return s.pc->post_srq_recv(*s.srq, std::span<const RecvWr>(&wr, 1));
    return s.pc->post_recv(*s.qp, std::span<const RecvWr>(&wr, 1));
  }

  // Runs until `n` completions are on cq (collected into out) or the time limit passes.
  bool wait_wc(verbs::Cq* cq, size_t n, std::vector<Wc>& out, uint64_t max_ns = 10'000'000'000ull) {
    return sim.run_until(
        [&] {
          Wc wc[64];
          int k;
          while ((k = cq->poll(wc)) > 0) out.insert(out.end(), wc, wc + k);
          return out.size() >= n;
        },
        max_ns);
  }
  Wc one_wc(verbs::Cq* cq, uint64_t max_ns = 10'000'000'000ull) {
    std::vector<Wc> v;
    EXPECT_TRUE(wait_wc(cq, 1, v, max_ns)) << "no completion";
    return v.empty() ? Wc{} : v[0];
  }

  // Hands `to` a packet as if `from`'s QP had sent it (see inject_packet).
  void inject(Side& to, Side& from, wire::Packet& p) { inject_packet(*to.pc, from.qp->flow, p, sim.now()); }

  // Lets s send what it has now and loses all of it on the way.
  void lose_tx(Side& s) {
    s.pc->progress(sim.now());
    s.pc->release_tx();
  }

  PairOptions opt;
  sim::Sim sim;
  Side a, b;
};

}  // namespace uroce::test

namespace uroce::test {
inline std::string dump_counters(const transport::ProtocolCore& n) {
  std::string s;
  n.counters().for_each([&](const char* name, uint64_t v) {
    if (v) s += std::string(name) + "=" + std::to_string(v) + " ";
  });
  return s;
}
}  // namespace uroce::test
