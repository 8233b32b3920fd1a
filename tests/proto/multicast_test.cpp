// Multicast in the protocol core: a datagram to a group reaches every UD QP attached to it and
// nothing else does. Packets are forged with correct ICRCs (inject_packet), so only the
// transport's rules can turn them away: a group no QP joined, a DQPN other than 0xFFFFFF, a
// connected opcode, a wrong Q_Key, a QP that detached; a duplicate is a second datagram.
#include <gtest/gtest.h>

#include <cstring>

#include "../common/core_pair.hpp"
#include "transport/bringup.hpp"

using namespace uroce;
using namespace uroce::test;

namespace {

constexpr uint32_t kQkey = 0x11111111, kSender = 0x4321;
const Gid kGroup = Gid::from_ipv4(0xef010203);  // 239.1.2.3
const Gid kSelf = Gid::from_ipv4(kIpA);

struct Node {
  Node() : pc(config()) {
    pd = *pc.alloc_pd();
    cq = *pc.create_cq(256);
    mr = *pc.reg_mr(pd, buf.data(), buf.size(), kAccessLocalWrite);
  }
  static transport::CoreConfig config() {
    transport::CoreConfig c;
    c.gids = {kSelf};
    return c;
  }
  transport::Qp* ud(uint32_t qkey = kQkey) {
    transport::Qp* q = *pc.create_qp(pd, QpType::UD, cq, cq, QpCap{16, 16, 1, 1, 0}, false);
    EXPECT_TRUE(transport::activate_ud(pc, *q, qkey, 0));
    return q;
  }
  // A receive into slot i (1 KiB each).
  void post(transport::Qp* q, uint64_t i) {
    Sge s{uint64_t(buf.data() + 1024 * i), 1024, mr.lkey.value()};
    RecvWr w{i, {&s, 1}};
    ASSERT_TRUE(pc.post_recv(*q, {&w, 1}));
  }
  // A datagram from a third party to `to`, as it arrives from the wire.
  void arrive(const Gid& to, uint32_t dqpn, const char* text, wire::Opcode op = wire::Opcode::UD_SEND_ONLY,
              uint32_t qkey = kQkey) {
    wire::Packet p;
    p.bth.opcode = op;
    p.bth.dest_qp = dqpn;
    p.deth = {qkey, kSender};
    p.payload = {reinterpret_cast<const uint8_t*>(text), std::strlen(text) + 1};
    wire::FlowAddr f{Gid::from_ipv4(0x0a000063), to, 0xc123, wire::kRoceV2Port};
    inject_packet(pc, f, p, ++now);
  }
  std::vector<Wc> drain() {
    std::vector<Wc> out;
    Wc w[16];
    int n;
    while ((n = cq->poll(w)) > 0) out.insert(out.end(), w, w + n);
    return out;
  }
  const char* text_in(uint64_t slot) const { return reinterpret_cast<const char*>(buf.data() + 1024 * slot + kGrhBytes); }
  transport::ProtocolCore pc;
  verbs::PdHandle pd;
  verbs::Cq* cq = nullptr;
  std::vector<uint8_t> buf = std::vector<uint8_t>(16 * 1024);
  verbs::Mr mr;
  uint64_t now = 1000;
};

}  // namespace

TEST(Multicast, EveryAttachedQpReceivesTheGroupsDatagram) {
  Node n;
  transport::Qp *a = n.ud(), *b = n.ud(), *outsider = n.ud();
  ASSERT_EQ(n.pc.attach_mcast(*a, kGroup).value(), true) << "the group is new: the link joins it";
  ASSERT_EQ(n.pc.attach_mcast(*b, kGroup).value(), false);
  ASSERT_EQ(n.pc.attach_mcast(*b, kGroup).value(), false) << "attaching twice is no error";
  n.post(a, 1);
  n.post(b, 2);
  n.post(outsider, 3);
  n.arrive(kGroup, wire::kMulticastQpn, "to all");
  auto wcs = n.drain();
  ASSERT_EQ(wcs.size(), 2u);
  for (const Wc& w : wcs) {
    EXPECT_EQ(w.status, WcStatus::Success);
    EXPECT_EQ(w.src_qp, kSender);
    EXPECT_EQ(w.byte_len, kGrhBytes + 7);
  }
  EXPECT_EQ(wcs[0].qp_num, a->qpn().value());
  EXPECT_EQ(wcs[1].qp_num, b->qpn().value());
  EXPECT_STREQ(n.text_in(1), "to all");
  EXPECT_STREQ(n.text_in(2), "to all");
  EXPECT_EQ(n.pc.counters().rx_mcast, 1u);
  EXPECT_EQ(a->stats.rx_packets, 1u);
  EXPECT_EQ(outsider->stats.rx_packets, 0u);
}

TEST(Multicast, NothingElseIsHonouredOnAGroupAddress) {
  Node n;
  transport::Qp *a = n.ud(), *other_key = n.ud(0x2222);
  ASSERT_TRUE(n.pc.attach_mcast(*a, kGroup));
  ASSERT_TRUE(n.pc.attach_mcast(*other_key, kGroup));
  n.post(a, 1);
  n.post(other_key, 2);
  const auto& c = n.pc.counters();
  n.arrive(Gid::from_ipv4(0xef010204), wire::kMulticastQpn, "unjoined group");
  EXPECT_EQ(c.rx_mcast_unjoined, 1u);
  n.arrive(kGroup, a->qpn().value(), "names a QPN");
  EXPECT_EQ(c.rx_unknown_qp, 1u);
  n.arrive(kGroup, wire::kMulticastQpn, "connected", wire::Opcode::RC_SEND_ONLY);
  EXPECT_EQ(c.rx_bad_opcode, 1u);
  n.arrive(kGroup, wire::kMulticastQpn, "wrong key", wire::Opcode::UD_SEND_ONLY, 0x3333);
  EXPECT_EQ(c.rx_bad_qkey, 2u) << "each member checks the Q_Key";
  EXPECT_TRUE(n.drain().empty());
  // A unicast datagram to the multicast QPN: no QP has that number.
  n.arrive(kSelf, wire::kMulticastQpn, "unicast");
  EXPECT_EQ(c.rx_unknown_qp, 2u);
  // The member whose Q_Key matches gets the group's datagrams, duplicates included (UD).
  n.post(a, 3);
  n.arrive(kGroup, wire::kMulticastQpn, "once");
  n.arrive(kGroup, wire::kMulticastQpn, "once");
  auto wcs = n.drain();
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].qp_num, a->qpn().value());
  EXPECT_EQ(wcs[1].qp_num, a->qpn().value());
  EXPECT_EQ(c.rx_bad_qkey, 4u);
  EXPECT_EQ(c.rx_mcast, 3u);
}

TEST(Multicast, ADetachedOrDestroyedQpReceivesNoMore) {
  Node n;
  transport::Qp *a = n.ud(), *b = n.ud();
  ASSERT_TRUE(n.pc.attach_mcast(*a, kGroup));
  ASSERT_TRUE(n.pc.attach_mcast(*b, kGroup));
  EXPECT_EQ(n.pc.detach_mcast(*b, kGroup).value(), false) << "a is still there";
  EXPECT_EQ(n.pc.detach_mcast(*b, kGroup).error().code, EINVAL) << "not attached";
  EXPECT_EQ(n.pc.groups_of(*a), std::vector<Gid>{kGroup});
  EXPECT_TRUE(n.pc.groups_of(*b).empty());
  n.post(a, 1);
  n.post(b, 2);
  n.arrive(kGroup, wire::kMulticastQpn, "after b left");
  auto wcs = n.drain();
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].qp_num, a->qpn().value());
  // Destroyed while attached: the group forgets it and, empty, is no group of this core.
  ASSERT_TRUE(n.pc.destroy_qp(a));
  n.arrive(kGroup, wire::kMulticastQpn, "after a went");
  EXPECT_EQ(n.pc.counters().rx_mcast_unjoined, 1u);
  EXPECT_TRUE(n.drain().empty());
}

TEST(Multicast, OnlyUdQpsJoinOnlyGroups) {
  Node n;
  transport::Qp* rc = *n.pc.create_qp(n.pd, QpType::RC, n.cq, n.cq, QpCap{16, 16, 1, 1, 0}, false);
  transport::Qp* a = n.ud();
  EXPECT_EQ(n.pc.attach_mcast(*rc, kGroup).error().code, EINVAL);
  EXPECT_EQ(n.pc.attach_mcast(*a, kSelf).error().code, EINVAL) << "a unicast GID";
  EXPECT_TRUE(n.pc.attach_mcast(*a, *Gid::parse("ff0e::1"))) << "an IPv6 group, as the core sees it";
  EXPECT_TRUE(wire::is_multicast(Gid::from_ipv4(0xe0000001)));
  EXPECT_FALSE(wire::is_multicast(Gid::from_ipv4(0xf0000001)));
}
