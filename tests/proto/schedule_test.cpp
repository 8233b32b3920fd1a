// One progress pass over many QPs with work: it sends at most its budget (give or take the
// last QP's share), and the QPs it did not reach go first in the next pass.
#include <gtest/gtest.h>

#include <vector>

#include "../common/core_pair.hpp"

using namespace uroce;
using namespace uroce::test;

namespace {

struct ManyQps {
  static constexpr uint32_t kQps = 6, kWrites = 3;

  explicit ManyQps(uint32_t budget_per_pass) : sim(7, {}) {
    transport::CoreConfig ca;
    ca.budget_per_pass = budget_per_pass;
    a = &sim.add_core(kIpA, ca);
    b = &sim.add_core(kIpB);
    buf.assign(4096, 0x5a);
    for (transport::ProtocolCore* n : {a, b}) {
      Side s;
      s.pc = n;
      s.pd = *n->alloc_pd();
      s.scq = *n->create_cq(256);
      s.rcq = *n->create_cq(256);
      sides.push_back(s);
    }
    auto mr_a = a->reg_mr(sides[0].pd, buf.data(), buf.size(), kAccessLocalWrite);
    auto mr_b = b->reg_mr(sides[1].pd, buf.data(), buf.size(), kAccessLocalWrite | kAccessRemoteWrite);
    EXPECT_TRUE(mr_a.ok() && mr_b.ok());
    lkey = mr_a->lkey.value();
    rkey = mr_b->rkey.value();
    for (uint32_t i = 0; i < kQps; ++i) {
      transport::Qp* qa = *a->create_qp(sides[0].pd, QpType::RC, sides[0].scq, sides[0].rcq, QpCap{16, 16, 1, 1, 0}, false);
      transport::Qp* qb = *b->create_qp(sides[1].pd, QpType::RC, sides[1].scq, sides[1].rcq, QpCap{16, 16, 1, 1, 0}, false);
      ConnectOptions c;
      c.path_mtu = Mtu::Mtu1024;
      EXPECT_TRUE(transport::connect_rc(*a, *qa, {Gid::from_ipv4(kIpB), qb->qpn().value(), 0x10}, 0x10, c));
      EXPECT_TRUE(transport::connect_rc(*b, *qb, {Gid::from_ipv4(kIpA), qa->qpn().value(), 0x10}, 0x10, c));
      qps.push_back(qa);
    }
  }

  // Each QP posts kWrites one-packet WRITEs, QP 0 first.
  void post_all() {
    for (transport::Qp* q : qps)
      for (uint32_t k = 0; k < kWrites; ++k) {
        Sge s{uint64_t(buf.data()), 64, lkey};
        SendWr w{k, WrOpcode::RdmaWrite, 0, {&s, 1}};
        w.remote_addr = uint64_t(buf.data());
        w.rkey = rkey;
        ASSERT_TRUE(a->post_send(*q, std::span<const SendWr>(&w, 1)));
      }
  }

  // One pass of a: the index in qps of the QP each packet it sends comes from.
  std::vector<uint32_t> pass() {
    a->progress(sim.now());
    std::vector<uint32_t> from;
    for (const transport::PacketBuf* p : a->tx_queue()) {
      wire::Packet pkt;
      EXPECT_EQ(wire::decode(std::span<const uint8_t>(p->data, p->len), pkt), wire::ParseError::None);
      for (uint32_t i = 0; i < kQps; ++i)
        if (qps[i]->attr().dest_qp_num == pkt.bth.dest_qp) from.push_back(i);
    }
    a->release_tx();
    return from;
  }

  sim::Sim sim;
  transport::ProtocolCore *a, *b;
  std::vector<Side> sides;
  std::vector<transport::Qp*> qps;
  std::vector<uint8_t> buf;
  uint32_t lkey = 0, rkey = 0;
};

}  // namespace

TEST(Schedule, APassStopsAtItsBudgetAndTheQpsNotReachedGoFirstNext) {
  ManyQps f(/*budget_per_pass=*/5);
  f.post_all();
  // QPs 0 and 1 send 6 packets; 6 >= 5, so QP 2 waits for the next pass.
  EXPECT_EQ(f.pass(), (std::vector<uint32_t>{0, 0, 0, 1, 1, 1}));
  EXPECT_TRUE(f.a->has_work());
  EXPECT_EQ(f.pass(), (std::vector<uint32_t>{2, 2, 2, 3, 3, 3}));
  EXPECT_EQ(f.pass(), (std::vector<uint32_t>{4, 4, 4, 5, 5, 5}));
  EXPECT_TRUE(f.pass().empty());
}

TEST(Schedule, WithinItsBudgetOnePassSendsEveryQpsWork) {
  ManyQps f(/*budget_per_pass=*/1024);
  f.post_all();
  EXPECT_EQ(f.pass(), (std::vector<uint32_t>{0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5}));
  EXPECT_TRUE(f.pass().empty());
}

// Go-back-N's window: 256 packets of MTU 4096 on the wire; towards a peer the link carries
// intact (a same-host ring), its own count of packets (the ring's slots), whatever the MTU.
TEST(Window, APeerCarriedIntactGetsTheRingsWindow) {
  for (bool intact : {false, true})
    for (Mtu mtu : {Mtu::Mtu4096, Mtu::Mtu1024}) {
      sim::Sim sim(7, {});
      transport::CoreConfig ca;
      ca.intact_window_pkts = 512;
      ca.carried_intact = [intact](const Gid& dst, uint32_t) { return intact && dst == Gid::from_ipv4(kIpB); };
      transport::ProtocolCore* a = &sim.add_core(kIpA, ca);
      transport::ProtocolCore* b = &sim.add_core(kIpB);
      std::vector<uint8_t> buf(8u << 20, 0x5a);  // 2048 packets at MTU 4096
      Side sa{a, *a->alloc_pd(), *a->create_cq(16), *a->create_cq(16)};
      Side sb{b, *b->alloc_pd(), *b->create_cq(16), *b->create_cq(16)};
      auto mr_a = a->reg_mr(sa.pd, buf.data(), buf.size(), kAccessLocalWrite);
      auto mr_b = b->reg_mr(sb.pd, buf.data(), buf.size(), kAccessLocalWrite | kAccessRemoteWrite);
      ASSERT_TRUE(mr_a.ok() && mr_b.ok());
      transport::Qp* qa = *a->create_qp(sa.pd, QpType::RC, sa.scq, sa.rcq, QpCap{4, 4, 1, 1, 0}, false);
      transport::Qp* qb = *b->create_qp(sb.pd, QpType::RC, sb.scq, sb.rcq, QpCap{4, 4, 1, 1, 0}, false);
      ConnectOptions c;
      c.path_mtu = mtu;
      ASSERT_TRUE(transport::connect_rc(*a, *qa, {Gid::from_ipv4(kIpB), qb->qpn().value(), 0x10}, 0x10, c));
      Sge s{uint64_t(buf.data()), uint32_t(buf.size()), mr_a->lkey.value()};
      SendWr w{1, WrOpcode::RdmaWrite, 0, {&s, 1}};
      w.remote_addr = uint64_t(buf.data());
      w.rkey = mr_b->rkey.value();
      ASSERT_TRUE(a->post_send(*qa, std::span<const SendWr>(&w, 1)));
      // No ACK ever comes back: the requester sends until its window is full.
      size_t sent = 0;
      for (int pass = 0; pass < 1000; ++pass) {
        a->progress(sim.now());
        const size_t n = a->tx_queue().size();
        a->release_tx();
        if (n == 0) break;
        sent += n;
      }
      EXPECT_EQ(sent, intact ? 512u : (mtu == Mtu::Mtu4096 ? 256u : 1024u)) << "intact " << intact << " mtu " << int(mtu);
    }
}
