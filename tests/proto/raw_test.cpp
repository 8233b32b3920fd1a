// Raw packet QPs in the protocol core: a send leaves as one frame with exactly its bytes; a
// frame from the interface reaches the QP whose flow rule it matches (lowest priority first),
// fills one receive, and is otherwise dropped and counted. Rules parse frames they cannot
// trust: short, fragmented or of another protocol, they do not match.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "../common/seed.hpp"
#include "transport/protocol_core.hpp"

using namespace uroce;

namespace {

// An Ethernet/IPv4/UDP (or TCP) frame: dst MAC 01:50:56:19:20:a7, src 24:8a:07:a5:28:c8,
// 1.1.1.1:1234 -> 2.2.2.2:5678, then `payload` bytes.
std::vector<uint8_t> ipv4_frame(size_t payload, uint8_t proto = 17, uint16_t frag = 0, uint32_t src_ip = 0x01010101) {
  std::vector<uint8_t> f(14 + 20 + 4 + payload);
  const uint8_t eth[14] = {0x01, 0x50, 0x56, 0x19, 0x20, 0xa7, 0x24, 0x8a, 0x07, 0xa5, 0x28, 0xc8, 0x08, 0x00};
  std::memcpy(f.data(), eth, 14);
  uint8_t* ip = f.data() + 14;
  ip[0] = 0x45, ip[6] = uint8_t(frag >> 8), ip[7] = uint8_t(frag), ip[8] = 64, ip[9] = proto;
  for (int i = 0; i < 4; ++i) ip[12 + i] = uint8_t(src_ip >> (24 - 8 * i)), ip[16 + i] = 2;
  const uint8_t ports[4] = {0x04, 0xd2, 0x16, 0x2e};  // 1234 -> 5678
  std::memcpy(f.data() + 34, ports, 4);
  for (size_t i = 0; i < payload; ++i) f[38 + i] = uint8_t(i * 7 + 3);
  return f;
}

FlowRule eth_rule(uint16_t priority = 0) {
  FlowRule r;
  r.priority = priority;
  FlowRule::Eth e;
  e.dst = {0x01, 0x50, 0x56, 0x19, 0x20, 0xa7};
  e.dst_mask.fill(0xff);
  r.eth = e;
  return r;
}

struct Node {
  Node() : pc(transport::CoreConfig{}) {
    pd = *pc.alloc_pd();
    cq = *pc.create_cq(64);
    mr = *pc.reg_mr(pd, buf.data(), buf.size(), kAccessLocalWrite);
  }
  // A raw packet QP brought up to RTS (or INIT alone, where receives may be posted already).
  transport::Qp* raw(bool up = true) {
    transport::Qp* q = *pc.create_qp(pd, QpType::RawPacket, cq, cq, QpCap{8, 8, 2, 2, 64}, true);
    QpAttr a;
    a.port_num = 1;
    for (QpState s : {QpState::Init, QpState::Rtr, QpState::Rts}) {
      if (!up && s != QpState::Init) break;
      a.qp_state = s;
      EXPECT_TRUE(pc.modify_qp(*q, a, kQpState | (s == QpState::Init ? uint32_t(kQpPort) : 0u)));
    }
    return q;
  }
  void post(transport::Qp* q, uint64_t id, uint32_t len = 2048) {
    Sge s{uint64_t(buf.data() + 2048 * id), len, mr.lkey.value()};
    RecvWr w{id, {&s, 1}};
    ASSERT_TRUE(pc.post_recv(*q, {&w, 1}));
  }
  std::vector<Wc> drain() {
    std::vector<Wc> out;
    Wc w[16];
    int n;
    while ((n = cq->poll(w)) > 0) out.insert(out.end(), w, w + n);
    return out;
  }
  transport::ProtocolCore pc;
  std::vector<uint8_t> buf = std::vector<uint8_t>(1 << 16);
  verbs::PdHandle pd;
  verbs::Cq* cq;
  verbs::Mr mr;
  uint64_t now = 1'000'000;
};

TEST(Raw, ASendLeavesAsOneFrameWithItsBytes) {
  Node n;
  transport::Qp* q = n.raw();
  std::vector<uint8_t> f = ipv4_frame(100);
  std::memcpy(n.buf.data(), f.data(), 30);
  std::memcpy(n.buf.data() + 4096, f.data() + 30, f.size() - 30);
  Sge s[2] = {{uint64_t(n.buf.data()), 30, n.mr.lkey.value()},
              {uint64_t(n.buf.data() + 4096), uint32_t(f.size() - 30), n.mr.lkey.value()}};
  SendWr w;
  w.wr_id = 7;
  w.sg_list = s;
  ASSERT_TRUE(n.pc.post_send(*q, {&w, 1}));
  n.pc.progress(++n.now);
  ASSERT_EQ(n.pc.frames_out().size(), 1u);
  EXPECT_EQ(n.pc.frames_out()[0], f);
  EXPECT_TRUE(n.pc.tx_queue().empty());  // nothing of RoCE's
  auto wcs = n.drain();
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 7u);
  EXPECT_EQ(wcs[0].status, WcStatus::Success);
  EXPECT_EQ(wcs[0].opcode, WcOpcode::Send);
  EXPECT_EQ(n.pc.counters().tx_raw_frames, 1u);
}

TEST(Raw, SendsItCannotMakeAreRefused) {
  Node n;
  transport::Qp* q = n.raw();
  Sge s{uint64_t(n.buf.data()), 13, n.mr.lkey.value()};
  SendWr w;
  w.sg_list = {&s, 1};
  EXPECT_EQ(n.pc.post_send(*q, {&w, 1}).error().code, EINVAL);  // shorter than an Ethernet header
  s.length = 1519;
  EXPECT_EQ(n.pc.post_send(*q, {&w, 1}).error().code, EINVAL);  // past the interface MTU
  s.length = 64;
  w.opcode = WrOpcode::RdmaWrite;
  EXPECT_EQ(n.pc.post_send(*q, {&w, 1}).error().code, EINVAL);
  w.opcode = WrOpcode::SendWithImm;
  EXPECT_EQ(n.pc.post_send(*q, {&w, 1}).error().code, EINVAL);
  // A key that is not the PD's: a local protection error, nothing sent.
  w.opcode = WrOpcode::Send;
  s.lkey = n.mr.lkey.value() ^ 0x100;
  w.send_flags = kSendSignaled;
  ASSERT_TRUE(n.pc.post_send(*q, {&w, 1}));
  n.pc.progress(++n.now);
  EXPECT_TRUE(n.pc.frames_out().empty());
  auto wcs = n.drain();
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::LocProtErr);
}

TEST(Raw, AFrameReachesTheQpOfItsRuleByteExact) {
  Node n;
  transport::Qp* a = n.raw();
  transport::Qp* b = n.raw();
  ASSERT_TRUE(n.pc.create_flow(*a, eth_rule(5)));
  auto hb = n.pc.create_flow(*b, eth_rule(1));  // a lower priority value goes first
  ASSERT_TRUE(hb);
  n.post(a, 0);
  n.post(b, 1);
  const auto f = ipv4_frame(200);
  n.pc.on_frame(f);
  auto wcs = n.drain();
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].qp_num, b->qpn().value());
  EXPECT_EQ(wcs[0].byte_len, f.size());
  EXPECT_EQ(wcs[0].opcode, WcOpcode::Recv);
  EXPECT_EQ(0, std::memcmp(n.buf.data() + 2048, f.data(), f.size()));
  // With b's rule gone, the next one goes to a.
  ASSERT_TRUE(n.pc.destroy_flow(*b, *hb));
  EXPECT_EQ(n.pc.destroy_flow(*b, *hb).error().code, EINVAL);
  n.pc.on_frame(f);
  wcs = n.drain();
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].qp_num, a->qpn().value());
  EXPECT_EQ(n.pc.counters().rx_raw_frames, 2u);
}

TEST(Raw, FramesWithNoReceiveNoRuleOrTooLongAreDroppedAndCounted) {
  Node n;
  transport::Qp* q = n.raw();
  const auto f = ipv4_frame(64);
  n.pc.on_frame(f);  // no rule: the interface's other traffic
  ASSERT_TRUE(n.pc.create_flow(*q, eth_rule()));
  n.pc.on_frame(f);  // no receive posted
  EXPECT_EQ(n.pc.counters().rx_raw_no_recv, 1u);
  n.post(q, 0, 32);  // a buffer too small for the frame
  n.pc.on_frame(f);
  auto wcs = n.drain();
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::LocLenErr);
  // A QP not yet ready to receive (INIT) takes nothing, its receive stays.
  transport::Qp* idle = n.raw(false);
  ASSERT_TRUE(n.pc.create_flow(*idle, eth_rule()));
  ASSERT_TRUE(n.pc.destroy_flow(*q, 1));
  n.post(idle, 1);
  n.pc.on_frame(f);
  EXPECT_EQ(n.pc.counters().rx_raw_not_ready, 1u);
  EXPECT_TRUE(n.drain().empty());
  EXPECT_EQ(n.pc.counters().rx_raw_frames, 1u);
}

TEST(Raw, RulesAreForRawQpsAndHoldTheirQp) {
  Node n;
  transport::Qp* rc = *n.pc.create_qp(n.pd, QpType::RC, n.cq, n.cq, QpCap{8, 8, 1, 1, 0}, false);
  EXPECT_EQ(n.pc.create_flow(*rc, eth_rule()).error().code, EINVAL);
  transport::Qp* q = n.raw();
  FlowRule both = eth_rule();
  both.ipv4 = FlowRule::Ipv4{};
  both.ipv6 = FlowRule::Ipv6{};
  EXPECT_EQ(n.pc.create_flow(*q, both).error().code, EINVAL);
  FlowRule ports_alone;  // as mlx5: either IP version's UDP
  ports_alone.l4 = FlowRule::L4::Udp;
  ports_alone.dst_port = 5678, ports_alone.dst_port_mask = 0xffff;
  auto hp = n.pc.create_flow(*q, ports_alone);
  ASSERT_TRUE(hp);
  EXPECT_TRUE(transport::flow_matches(ports_alone, ipv4_frame(4)));
  ASSERT_TRUE(n.pc.destroy_flow(*q, *hp));
  auto h = n.pc.create_flow(*q, eth_rule());
  ASSERT_TRUE(h);
  EXPECT_EQ(n.pc.destroy_qp(q).error().code, EBUSY);
  ASSERT_TRUE(n.pc.destroy_flow(*q, *h));
  EXPECT_TRUE(n.pc.destroy_qp(q));
}

TEST(FlowMatch, EachLayerAndEachMaskedField) {
  const auto f = ipv4_frame(10);
  FlowRule r = eth_rule();
  EXPECT_TRUE(transport::flow_matches(r, f));
  r.eth->src = {0x24, 0x8a, 0x07, 0xa5, 0x28, 0xc9};
  r.eth->src_mask = {0, 0, 0, 0, 0, 0xfe};  // the last bit is left out
  EXPECT_TRUE(transport::flow_matches(r, f));
  r.eth->src_mask[5] = 0xff;
  EXPECT_FALSE(transport::flow_matches(r, f));
  FlowRule ip;
  ip.ipv4 = FlowRule::Ipv4{0x01010101, 0xffffffff, 0x02020202, 0xffffffff};
  EXPECT_TRUE(transport::flow_matches(ip, f));
  ip.ipv4->dst = 0x02020203;
  EXPECT_FALSE(transport::flow_matches(ip, f));
  ip.ipv4->dst_mask = 0xffffff00;
  EXPECT_TRUE(transport::flow_matches(ip, f));
  ip.l4 = FlowRule::L4::Udp;
  ip.dst_port = 5678, ip.dst_port_mask = 0xffff;
  EXPECT_TRUE(transport::flow_matches(ip, f));
  ip.l4 = FlowRule::L4::Tcp;  // a TCP rule does not take UDP
  EXPECT_FALSE(transport::flow_matches(ip, f));
  EXPECT_TRUE(transport::flow_matches(ip, ipv4_frame(10, 6)));
  // A later fragment carries no ports: a port rule does not match it; an address rule does.
  EXPECT_FALSE(transport::flow_matches(ip, ipv4_frame(10, 6, 0x0010)));
  FlowRule v6;
  v6.ipv6 = FlowRule::Ipv6{};
  EXPECT_FALSE(transport::flow_matches(v6, f));  // an IPv6 rule asks for IPv6
}

TEST(FlowMatch, VlanTagsAndIpv6) {
  // 802.1Q-tagged IPv6/TCP.
  std::vector<uint8_t> f = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x81, 0x00, 0xac, 0x0c, 0x86, 0xdd};
  std::vector<uint8_t> ip6(40);
  ip6[0] = 0x60 | 0x0a, ip6[1] = 0x10, ip6[3] = 0x55;  // traffic class 0xa1, flow label 0x00055
  ip6[6] = 6, ip6[7] = 64;
  for (int i = 0; i < 16; ++i) ip6[8 + i] = uint8_t(0xa0 + i), ip6[24 + i] = uint8_t(0xb0 + i);
  f.insert(f.end(), ip6.begin(), ip6.end());
  const uint8_t ports[4] = {0x04, 0xd2, 0x16, 0x2e};
  f.insert(f.end(), ports, ports + 4);
  FlowRule r;
  FlowRule::Eth e;
  e.vlan_tag = 0x0c0c, e.vlan_tag_mask = 0x0fff;
  e.ether_type = 0x86dd, e.ether_type_mask = 0xffff;
  r.eth = e;
  FlowRule::Ipv6 a;
  for (int i = 0; i < 16; ++i) a.dst[i] = uint8_t(0xb0 + i);
  a.dst_mask.fill(0xff);
  a.flow_label = 0x55, a.flow_label_mask = 0xfffff;
  a.traffic_class = 0xa1, a.traffic_class_mask = 0xff;
  r.ipv6 = a;
  r.l4 = FlowRule::L4::Tcp;
  r.src_port = 1234, r.src_port_mask = 0xffff;
  EXPECT_TRUE(transport::flow_matches(r, f));
  r.eth->vlan_tag = 0x0c0d;
  EXPECT_FALSE(transport::flow_matches(r, f));
  r.eth->vlan_tag = 0x0c0c;
  std::vector<uint8_t> untagged(f);
  untagged.erase(untagged.begin() + 12, untagged.begin() + 16);
  EXPECT_FALSE(transport::flow_matches(r, untagged));  // a tag rule asks for a tag
  r.eth->vlan_tag_mask = 0;
  EXPECT_TRUE(transport::flow_matches(r, untagged));
}

// Any frame, cut anywhere or with random bytes, is matched without reading past its end (ASan
// watches) and a cut one never matches a rule on a layer it lost.
TEST(FlowMatch, TruncatedAndRandomFramesAreSafe) {
  const uint64_t seed = test::test_seed(0x5eed);
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  FlowRule r;
  r.ipv4 = FlowRule::Ipv4{};
  r.l4 = FlowRule::L4::Udp;
  const auto whole = ipv4_frame(0);
  for (size_t len = 0; len < whole.size(); ++len) {
    std::vector<uint8_t> cut(whole.begin(), whole.begin() + ptrdiff_t(len));
    EXPECT_FALSE(transport::flow_matches(r, cut)) << len;
  }
  EXPECT_TRUE(transport::flow_matches(r, whole));
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> f(rng() % 80);
    for (auto& b : f) b = uint8_t(rng());
    if (f.size() > 13 && rng() % 2) f[12] = 0x08, f[13] = 0;
    (void)transport::flow_matches(r, f);
  }
}

}  // namespace

namespace {

// Microsoft's RSS verification vectors (the Toeplitz key NICs ship with).
const std::vector<uint8_t> kMsKey = {0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
                                     0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
                                     0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};

TEST(Rss, ToeplitzHashAsTheVerificationSuiteHasIt) {
  // 66.9.149.187:2794 -> 161.142.100.80:1766 over TCP.
  std::vector<uint8_t> f = ipv4_frame(0, 6, 0, 0x420995bb);
  const uint8_t dst[4] = {161, 142, 100, 80}, ports[4] = {0x0a, 0xea, 0x06, 0xe6};
  std::memcpy(f.data() + 30, dst, 4);
  std::memcpy(f.data() + 34, ports, 4);
  EXPECT_EQ(transport::rss_hash(RxHash{kMsKey, kHashSrcIpv4 | kHashDstIpv4}, f), 0x323e8fc2u);
  EXPECT_EQ(transport::rss_hash(RxHash{kMsKey, kHashSrcIpv4 | kHashDstIpv4 | kHashSrcPortTcp | kHashDstPortTcp}, f),
            0x51ccc178u);
  // UDP port fields do not apply to a TCP segment.
  EXPECT_EQ(transport::rss_hash(RxHash{kMsKey, kHashSrcIpv4 | kHashDstIpv4 | kHashSrcPortUdp}, f), 0x323e8fc2u);
}

TEST(Rss, FramesSpreadOverReadyWorkQueuesByHash) {
  Node n;
  verbs::Cq* cq2 = *n.pc.create_cq(64);
  std::vector<verbs::Srq*> wqs;
  for (int i = 0; i < 4; ++i) wqs.push_back(*n.pc.create_wq(n.pd, i % 2 ? cq2 : n.cq, 16, 1));
  const RxHash h{kMsKey, kHashSrcIpv4 | kHashDstIpv4};
  EXPECT_EQ(n.pc.create_rss_qp(n.pd, {wqs[0], wqs[1], wqs[2]}, h).error().code, EINVAL);  // not a power of two
  transport::Qp* q = *n.pc.create_rss_qp(n.pd, wqs, h);
  ASSERT_TRUE(n.pc.create_flow(*q, eth_rule()));
  EXPECT_EQ(n.pc.destroy_srq(wqs[0]).error().code, EBUSY);  // in the QP's table
  for (size_t i = 0; i < wqs.size(); ++i) {
    for (uint64_t k = 0; k < 8; ++k) {
      Sge s{uint64_t(n.buf.data() + 2048 * (i * 8 + k)), 2048, n.mr.lkey.value()};
      RecvWr w{i * 8 + k, {&s, 1}};
      ASSERT_TRUE(n.pc.post_srq_recv(*wqs[i], {&w, 1}));
    }
  }
  const auto f = ipv4_frame(20);
  n.pc.on_frame(f);  // no work queue ready yet
  EXPECT_EQ(n.pc.counters().rx_raw_not_ready, 1u);
  for (verbs::Srq* w : wqs) ASSERT_TRUE(n.pc.modify_wq(*w, WqState::Ready));
  // Each source address goes to the work queue its hash names, completing on that queue's CQ.
  std::vector<int> per_wq(4);
  for (uint32_t src = 1; src <= 16; ++src) {
    const auto g = ipv4_frame(20, 17, 0, 0x0a000000 + src);
    const size_t want = transport::rss_hash(h, g) & 3;
    n.pc.on_frame(g);
    Wc wc[2];
    verbs::Cq* cq = want % 2 ? cq2 : n.cq;
    ASSERT_EQ(cq->poll(wc), 1) << src;
    EXPECT_EQ(wc[0].qp_num, wqs[want]->handle());
    EXPECT_EQ(wc[0].wr_id / 8, want);
    EXPECT_EQ(0, std::memcmp(n.buf.data() + 2048 * wc[0].wr_id, g.data(), g.size()));
    ++per_wq[want];
  }
  EXPECT_EQ(per_wq[0] + per_wq[1] + per_wq[2] + per_wq[3], 16);
  EXPECT_GE(std::count_if(per_wq.begin(), per_wq.end(), [](int c) { return c > 0; }), 2);  // spread, not one queue
  n.pc.destroy_flows_of(*q);
  ASSERT_TRUE(n.pc.destroy_qp(q));
  EXPECT_TRUE(n.pc.destroy_srq(wqs[0]));
}

TEST(Rss, ToeplitzOverIpv6AsTheVerificationSuiteHasIt) {
  // 3ffe:2501:200:1fff::7 port 2794 -> 3ffe:2501:200:3::1 port 1766, TCP.
  std::vector<uint8_t> f(14 + 40 + 4);
  f[12] = 0x86, f[13] = 0xdd, f[14] = 0x60, f[14 + 6] = 6;
  const uint8_t src[16] = {0x3f, 0xfe, 0x25, 0x01, 0x02, 0x00, 0x1f, 0xff, 0, 0, 0, 0, 0, 0, 0, 7};
  const uint8_t dst[16] = {0x3f, 0xfe, 0x25, 0x01, 0x02, 0x00, 0x00, 0x03, 0, 0, 0, 0, 0, 0, 0, 1};
  std::memcpy(&f[22], src, 16);
  std::memcpy(&f[38], dst, 16);
  const uint8_t ports[4] = {0x0a, 0xea, 0x06, 0xe6};
  std::memcpy(&f[54], ports, 4);
  EXPECT_EQ(transport::rss_hash(RxHash{kMsKey, kHashSrcIpv6 | kHashDstIpv6}, f), 0x2cc18cd5u);
  EXPECT_EQ(transport::rss_hash(RxHash{kMsKey, kHashSrcIpv6 | kHashDstIpv6 | kHashSrcPortTcp | kHashDstPortTcp}, f),
            0x40207d3du);
}

TEST(Rss, WhatAnRssQpAndItsWorkQueuesRefuse) {
  Node n;
  verbs::Srq* wq = *n.pc.create_wq(n.pd, n.cq, 8, 1);
  EXPECT_EQ(n.pc.create_rss_qp(n.pd, {wq}, RxHash{kMsKey, kHashSrcIpv4 | kHashSrcIpv6}).error().code, EINVAL);
  EXPECT_EQ(n.pc.create_rss_qp(n.pd, {wq}, RxHash{kMsKey, kHashSrcPortTcp | kHashSrcPortUdp}).error().code, EINVAL);
  EXPECT_EQ(n.pc.create_rss_qp(n.pd, {wq, wq}, RxHash{kMsKey, 0}).error().code, EINVAL);  // no fields, two queues
  EXPECT_EQ(n.pc.create_rss_qp(n.pd, {wq}, RxHash{std::vector<uint8_t>(8), kHashSrcIpv4}).error().code, EINVAL);
  transport::Qp* q = *n.pc.create_rss_qp(n.pd, {wq}, RxHash{kMsKey, kHashSrcIpv4});
  QpAttr a;
  a.qp_state = QpState::Init;
  EXPECT_EQ(n.pc.modify_qp(*q, a, kQpState | kQpPort).error().code, EOPNOTSUPP);  // no state of its own
  Sge s{uint64_t(n.buf.data()), 64, n.mr.lkey.value()};
  SendWr w;
  w.sg_list = {&s, 1};
  EXPECT_EQ(n.pc.post_send(*q, {&w, 1}).error().code, EINVAL);
  RecvWr r{1, {&s, 1}};
  EXPECT_EQ(n.pc.post_recv(*q, {&r, 1}).error().code, EINVAL);
  // A work queue is no SRQ for an ordinary QP, and has no limit event.
  EXPECT_EQ(n.pc.create_qp(n.pd, QpType::RawPacket, n.cq, n.cq, QpCap{4, 4, 1, 1, 0}, false, wq).error().code, EINVAL);
  EXPECT_EQ(n.pc.modify_srq(*wq, 1).error().code, EINVAL);
  ASSERT_TRUE(n.pc.destroy_qp(q));
  EXPECT_TRUE(n.pc.destroy_srq(wq));
}

TEST(Raw, FourBytesPastTheMtuOnlyForATaggedFrame) {
  Node n;
  n.pc.set_raw_frame_max(1518);  // MTU 1500
  transport::Qp* q = n.raw();
  std::vector<uint8_t> f = ipv4_frame(1518 - 38);
  ASSERT_EQ(f.size(), 1518u);
  std::memcpy(n.buf.data(), f.data(), f.size());
  Sge s{uint64_t(n.buf.data()), 1518, n.mr.lkey.value()};
  SendWr w;
  w.sg_list = {&s, 1};
  w.send_flags = kSendSignaled;
  ASSERT_TRUE(n.pc.post_send(*q, {&w, 1}));
  n.pc.progress(++n.now);
  auto wcs = n.drain();
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::LocLenErr);  // untagged: 1514 at most
  EXPECT_TRUE(n.pc.frames_out().empty());
  transport::Qp* q2 = n.raw();
  n.buf[12] = 0x81, n.buf[13] = 0x00;  // an 802.1Q tag makes it 1514 + 4
  ASSERT_TRUE(n.pc.post_send(*q2, {&w, 1}));
  n.pc.progress(++n.now);
  wcs = n.drain();
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::Success);
  EXPECT_EQ(n.pc.frames_out().size(), 1u);
}

TEST(Rss, AWorkQueueInErrFlushesItsReceivesAndInResetDropsThem) {
  Node n;
  verbs::Srq* wq = *n.pc.create_wq(n.pd, n.cq, 8, 1);
  EXPECT_EQ(n.pc.modify_wq(*wq, WqState::Err).error().code, EINVAL);  // RESET goes to RDY first
  Sge s{uint64_t(n.buf.data()), 64, n.mr.lkey.value()};
  for (uint64_t id : {1, 2}) {
    RecvWr r{id, {&s, 1}};
    ASSERT_TRUE(n.pc.post_srq_recv(*wq, {&r, 1}));
  }
  ASSERT_TRUE(n.pc.modify_wq(*wq, WqState::Ready));
  ASSERT_TRUE(n.pc.modify_wq(*wq, WqState::Err));
  auto wcs = n.drain();
  ASSERT_EQ(wcs.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(wcs[i].wr_id, i + 1);
    EXPECT_EQ(wcs[i].status, WcStatus::WrFlushErr);
    EXPECT_EQ(wcs[i].qp_num, wq->handle());
  }
  RecvWr r{3, {&s, 1}};
  ASSERT_TRUE(n.pc.post_srq_recv(*wq, {&r, 1}));
  ASSERT_TRUE(n.pc.modify_wq(*wq, WqState::Reset));  // gone, without a completion
  EXPECT_TRUE(n.drain().empty());
  EXPECT_EQ(wq->posted(), 0u);
  EXPECT_TRUE(n.pc.destroy_srq(wq));
}

}  // namespace
