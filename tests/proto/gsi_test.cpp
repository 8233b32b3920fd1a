// QP1, the general services interface: one per port, QPN 1, Q_Key 0x80010000; it receives the
// communication manager's MADs, including a real one from the Linux kernel's rdma_cm.
#include <gtest/gtest.h>

#include <cstring>

#include "../common/core_pair.hpp"
#include "../common/pcap_reader.hpp"
#include "cm/messages.hpp"
#include "transport/bringup.hpp"
#include "wire/bytes.hpp"

using namespace uroce;
using namespace uroce::test;

namespace {

struct GsiNode {
  transport::ProtocolCore* pc = nullptr;
  verbs::PdHandle pd;
  verbs::Cq* cq = nullptr;
  transport::Qp* qp = nullptr;
  std::vector<uint8_t> buf = std::vector<uint8_t>(8 * (kGrhBytes + cm::kMadBytes));
  uint32_t lkey = 0;

  void open(transport::ProtocolCore& core) {
    pc = &core;
    pd = *pc->alloc_pd();
    cq = *pc->create_cq(64);
    auto q = pc->create_gsi_qp(pd, cq, cq, QpCap{8, 8, 1, 1, 0});
    ASSERT_TRUE(q.ok()) << q.error().message;
    qp = *q;
    ASSERT_TRUE(transport::activate_ud(*pc, *qp, cm::kGsiQkey, 0));
    lkey = pc->reg_mr(pd, buf.data(), buf.size(), kAccessLocalWrite)->lkey.value();
    for (uint64_t i = 0; i < 8; ++i) {
      Sge s{uint64_t(buf.data() + i * (kGrhBytes + cm::kMadBytes)), uint32_t(kGrhBytes + cm::kMadBytes), lkey};
      RecvWr r{i, {&s, 1}};
      ASSERT_TRUE(pc->post_recv(*qp, {&r, 1}));
    }
  }
  const uint8_t* mad(uint64_t wr_id) const { return buf.data() + wr_id * (kGrhBytes + cm::kMadBytes) + kGrhBytes; }
};

}  // namespace

TEST(Gsi, Qp1ExchangesMads) {
  sim::Sim sim(7, {});
  GsiNode a, b;
  a.open(sim.add_core(kIpA));
  b.open(sim.add_core(kIpB));
  EXPECT_EQ(a.qp->qpn().value(), 1u);
  EXPECT_EQ(b.qp->qpn().value(), 1u);
  EXPECT_EQ(a.pc->create_gsi_qp(a.pd, a.cq, a.cq, QpCap{8, 8, 1, 1, 0}).error().code, EBUSY) << "one GSI per port";

  cm::Rtu rtu{0x1234, 0x5678, {7, 7, 7}};
  cm::Mad m = cm::make_mad(cm::CmAttr::Rtu, 42, rtu);
  Sge s{uint64_t(m.data()), uint32_t(m.size()), 0};
  auto mr = *a.pc->reg_mr(a.pd, m.data(), m.size(), 0);
  s.lkey = mr.lkey.value();
  Ah ah{Gid::from_ipv4(kIpB)};
  SendWr w{9, WrOpcode::Send, kSendSignaled, {&s, 1}};
  w.ah = &ah;
  w.remote_qpn = cm::kGsiQpn;
  w.remote_qkey = cm::kGsiQkey;
  ASSERT_TRUE(a.pc->post_send(*a.qp, {&w, 1}));
  Wc got{};
  ASSERT_TRUE(sim.run_until([&] { return b.cq->poll({&got, 1}) == 1; }, 1'000'000'000));
  EXPECT_EQ(got.status, WcStatus::Success);
  EXPECT_EQ(got.byte_len, kGrhBytes + cm::kMadBytes);
  EXPECT_EQ(got.src_qp, 1u) << "GSI datagrams come from QP1";
  EXPECT_EQ(0, std::memcmp(b.mad(got.wr_id), m.data(), m.size()));
  EXPECT_EQ(cm::decode_rtu(cm::ConstMadData(b.mad(got.wr_id) + cm::kMadHeaderBytes, cm::kMadDataBytes)).local_comm_id,
            0x1234u);

  // A datagram to QP1 with another Q_Key is dropped and counted (IBA C10-15).
  w.remote_qkey = 0x11111111;
  uint64_t bad = b.pc->counters().rx_bad_qkey;
  ASSERT_TRUE(a.pc->post_send(*a.qp, {&w, 1}));
  sim.run_until([&] { return b.pc->counters().rx_bad_qkey > bad; }, 1'000'000'000);
  EXPECT_EQ(b.pc->counters().rx_bad_qkey, bad + 1);
  EXPECT_EQ(b.cq->poll({&got, 1}), 0);
}

// The kernel's REQ from the rping capture, as rxe sent it, reaches our QP1 with its ICRC checked.
TEST(Gsi, KernelReqArrives) {
  transport::CoreConfig cfg;
  cfg.gids = {Gid::from_ipv4(0x0a630003)};
  cfg.port_mtu = Mtu::Mtu1024;
  transport::ProtocolCore core(cfg);
  GsiNode n;
  n.open(core);
  auto frames = read_pcap(UROCE_TEST_DATA "/captures/cm-rping.pcap");
  ASSERT_FALSE(frames.empty());
  const uint8_t* ip = frames[0].bytes.data() + 14;
  auto f = wire::FlowAddr::ipv4(wire::read_be32(ip + 12), wire::read_be32(ip + 16), wire::read_be16(ip + 20));
  std::span<const uint8_t> udp_payload(ip + 28, wire::read_be16(ip + 24) - 8u);
  wire::Ipv4Fields fields{wire::read_be16(ip + 4), wire::read_be16(ip + 6), ip[1], ip[8]};
  core.on_packet(udp_payload, f, 1000, fields);
  Wc wc{};
  ASSERT_EQ(n.cq->poll({&wc, 1}), 1);
  EXPECT_EQ(wc.status, WcStatus::Success);
  EXPECT_EQ(wc.src_qp, 1u);
  auto h = cm::read_header(std::span<const uint8_t>(n.mad(wc.wr_id), cm::kMadBytes));
  ASSERT_TRUE(h);
  EXPECT_EQ(cm::CmAttr(h->attr_id), cm::CmAttr::Req);
  cm::Req r = cm::decode_req(cm::ConstMadData(n.mad(wc.wr_id) + cm::kMadHeaderBytes, cm::kMadDataBytes));
  EXPECT_EQ(r.local_comm_id, 0x3e4f5ac1u);
  EXPECT_EQ(r.local_qpn, 0x11u);
}
