// DCQCN's notification point in the protocol core: CE-marked requests are answered with CNPs,
// at most one per QP per interval, in the form RoCE NICs send; CNPs reach the sender's QP.
#include <gtest/gtest.h>

#include "../common/core_pair.hpp"

using namespace uroce;
using namespace uroce::test;

namespace {

constexpr uint64_t us = 1000;

wire::Ipv4Fields marked() {
  wire::Ipv4Fields ip;
  ip.tos = wire::kEcnCe;
  return ip;
}

// The packets b has to send now, taken off its queue.
std::vector<std::vector<uint8_t>> take_tx(Side& s) {
  std::vector<std::vector<uint8_t>> out;
  for (const auto* p : s.pc->tx_queue()) out.emplace_back(p->data, p->data + p->len);
  s.pc->release_tx();
  return out;
}

}  // namespace

TEST(Congestion, AMarkedRequestGetsACnpAtMostOncePerInterval) {
  CorePair t;
  std::vector<uint8_t> dst(64);
  auto m = t.reg(t.b, dst.data(), dst.size());
  const uint8_t data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  uint32_t psn = t.opt.psn_a;
  const uint64_t t0 = t.sim.now();
  auto write = [&](uint64_t at, const wire::Ipv4Fields& ip) {
    wire::Packet p;
    p.bth.opcode = wire::Opcode::RC_WRITE_ONLY;
    p.bth.dest_qp = t.b.qp->qpn().value();
    p.bth.psn = wire::Psn(psn++);
    p.reth = {uint64_t(uintptr_t(dst.data())), m.rkey, sizeof data};
    p.payload = data;
    inject_packet(*t.b.pc, t.a.qp->flow, p, at, ip);
    std::vector<std::vector<uint8_t>> cnps;
    for (auto& b : take_tx(t.b))
      if (b[0] == uint8_t(wire::Opcode::CNP)) cnps.push_back(b);
    return cnps;
  };

  auto first = write(t0, marked());
  ASSERT_EQ(first.size(), 1u);
  wire::Packet c;
  ASSERT_EQ(wire::decode(first[0], c), wire::ParseError::None);
  EXPECT_EQ(c.bth.dest_qp, t.a.qp->qpn().value());
  EXPECT_TRUE(c.bth.becn);
  EXPECT_FALSE(c.bth.fecn);
  EXPECT_EQ(c.bth.pkey, 0xffff);
  EXPECT_EQ(c.bth.psn.value(), 0u);
  ASSERT_EQ(first[0].size(), 12u + 16 + 4);  // BTH, 16 reserved bytes, ICRC
  EXPECT_EQ(std::count(first[0].begin() + 12, first[0].begin() + 28, 0), 16);

  EXPECT_TRUE(write(t0 + 10 * us, marked()).empty());
  EXPECT_TRUE(write(t0 + 50 * us - 1, marked()).empty());
  auto second = write(t0 + 50 * us, marked());
  EXPECT_EQ(second.size(), 1u);
  EXPECT_TRUE(write(t0 + 120 * us, {}).empty());  // not marked
  const auto& cb = t.b.pc->counters();
  EXPECT_EQ(cb.rx_ce_marked, 4u);
  EXPECT_EQ(cb.tx_cnps, 2u);
  EXPECT_EQ(cb.rx_bad_icrc, 0u);

  // The CNPs reach a's QP; one from an address that is not its peer is dropped and counted.
  wire::FlowAddr back = t.b.qp->flow;
  t.a.pc->on_packet(first[0], back, t0 + 60 * us);
  t.a.pc->on_packet(second[0], back, t0 + 61 * us);
  wire::Packet stray = c;
  wire::FlowAddr stranger = back;
  stranger.src = Gid::from_ipv4(0x0a000009);
  inject_packet(*t.a.pc, stranger, stray, t0 + 62 * us);
  EXPECT_EQ(t.a.pc->counters().rx_cnps, 2u);
  EXPECT_EQ(t.a.pc->counters().rx_bad_source, 1u);
  EXPECT_EQ(t.a.pc->counters().rx_bad_icrc, 0u);
}

// A mark counts only on a request inside the responder's PSN window: one deep in the duplicate
// half (stale) or past any window a requester uses (forged by one who knows the QP but not its
// PSN) asks for no CNP, and does not use up the interval's one.
TEST(Congestion, AMarkOnAStaleOrFarRequestAsksNoCnp) {
  CorePair t;
  std::vector<uint8_t> dst(64);
  auto m = t.reg(t.b, dst.data(), dst.size());
  const uint8_t data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const uint64_t t0 = t.sim.now();
  auto write = [&](uint32_t psn, uint64_t at) {
    wire::Packet p;
    p.bth.opcode = wire::Opcode::RC_WRITE_ONLY;
    p.bth.dest_qp = t.b.qp->qpn().value();
    p.bth.psn = wire::Psn(psn);
    p.reth = {uint64_t(uintptr_t(dst.data())), m.rkey, sizeof data};
    p.payload = data;
    inject_packet(*t.b.pc, t.a.qp->flow, p, at, marked());
    size_t cnps = 0;
    for (auto& b : take_tx(t.b)) cnps += b[0] == uint8_t(wire::Opcode::CNP);
    return cnps;
  };
  const uint32_t epsn = t.opt.psn_a;
  EXPECT_EQ(write(epsn - 0x400000, t0), 0u) << "deep in the duplicate half";
  EXPECT_EQ(write(epsn + 0x1000, t0 + 1), 0u) << "far ahead";
  EXPECT_EQ(write(epsn + 2 * wire::kSackPsns, t0 + 2), 0u) << "past any window";
  EXPECT_EQ(t.b.pc->counters().rx_ce_marked, 0u);
  EXPECT_EQ(write(epsn, t0 + 3), 1u) << "the expected one";
  EXPECT_EQ(t.b.pc->counters().rx_ce_marked, 1u);
  EXPECT_EQ(t.b.pc->counters().tx_cnps, 1u);
}

// Through the simulator's link, every packet marked: b answers a's WRITE with CNPs that reach
// a; a sends none, since what it receives (ACKs) are not requests.
TEST(Congestion, AMarkingLinkDrivesCnpsBothWaysCounted) {
  PairOptions o;
  o.faults.ce_mark = 1.0;
  CorePair t(o);
  std::vector<uint8_t> src(64 * 1024, 0x5a), dst(64 * 1024);
  auto ms = t.reg(t.a, src.data(), src.size());
  auto md = t.reg(t.b, dst.data(), dst.size());
  Sge sge{uint64_t(uintptr_t(src.data())), uint32_t(src.size()), ms.lkey};
  SendWr wr;
  wr.wr_id = 7;
  wr.opcode = WrOpcode::RdmaWrite;
  wr.sg_list = std::span<const Sge>(&sge, 1);
  wr.remote_addr = uint64_t(uintptr_t(dst.data()));
  wr.rkey = md.rkey;
  wr.send_flags = kSendSignaled;
  const uint64_t t0 = t.sim.now();
  ASSERT_TRUE(t.send(t.a, wr));
  Wc wc = t.one_wc(t.a.scq);
  EXPECT_EQ(wc.status, WcStatus::Success);
  EXPECT_EQ(dst, src);
  t.sim.run_until([] { return false; }, 200 * us);  // the last CNP arrives
  const auto& ca = t.a.pc->counters();
  const auto& cb = t.b.pc->counters();
  EXPECT_EQ(cb.rx_ce_marked, 64u);  // MTU 1024: every request packet, marked
  EXPECT_GE(cb.tx_cnps, 1u);
  EXPECT_LE(cb.tx_cnps, 1 + (t.sim.now() - t0) / (50 * us));
  EXPECT_EQ(ca.rx_cnps, cb.tx_cnps);
  EXPECT_EQ(ca.tx_cnps, 0u);
  EXPECT_EQ(ca.rx_ce_marked, 0u);
  EXPECT_EQ(t.sim.link().stats().ce_marked, t.sim.link().stats().delivered);
}

// A signaled RDMA WRITE of all of src (registered on a, through sge) into dst (registered on b).
static SendWr write_all(CorePair& t, std::vector<uint8_t>& src, std::vector<uint8_t>& dst, Sge& sge) {
  auto ms = t.reg(t.a, src.data(), src.size());
  auto md = t.reg(t.b, dst.data(), dst.size());
  sge = Sge{uint64_t(uintptr_t(src.data())), uint32_t(src.size()), ms.lkey};
  SendWr wr;
  wr.opcode = WrOpcode::RdmaWrite;
  wr.sg_list = std::span<const Sge>(&sge, 1);
  wr.remote_addr = uint64_t(uintptr_t(dst.data()));
  wr.rkey = md.rkey;
  wr.send_flags = kSendSignaled;
  return wr;
}

// DCQCN paces a QP at its rate, and a CNP halves it (alpha starts at 1). At 8 Gb/s a byte takes
// a nanosecond: a 16 KiB WRITE at MTU 1024 is 16 packets of 1056 + 15 x 1040 = 16656 bytes on
// the wire (BTH, RETH on the first, payload, ICRC), so the pacer is booked 16656 ns past the
// first packet's departure; after the CNP, 33312.
TEST(Congestion, DcqcnPacesAQpAndACnpHalvesItsRate) {
  PairOptions o;
  o.config = [](transport::CoreConfig& c) {
    c.cc = cc::Algo::Dcqcn;
    c.dcqcn = cc::DcqcnParams::paper(8e9);
    c.pace_slack_ns = 0;  // exact spacing
  };
  CorePair t(o);
  ASSERT_TRUE(t.a.qp->rate);
  std::vector<uint8_t> src(16 * 1024, 0x33), dst(16 * 1024);
  Sge sge;
  const SendWr wr = write_all(t, src, dst, sge);

  auto timed_write = [&](uint64_t& started) {
    started = t.sim.now();
    EXPECT_TRUE(t.send(t.a, wr));
    EXPECT_EQ(t.one_wc(t.a.scq).status, WcStatus::Success);
    EXPECT_EQ(dst, src);
    std::fill(dst.begin(), dst.end(), 0);
    return t.a.qp->pacer.free_at() - started;
  };
  uint64_t s1 = 0;
  EXPECT_EQ(timed_write(s1), 16656u);
  EXPECT_GE(t.sim.now() - s1, 16656u - 1040);  // the last packet left no earlier than that

  wire::Packet cnp;
  cnp.bth.opcode = wire::Opcode::CNP;
  cnp.bth.dest_qp = t.a.qp->qpn().value();
  cnp.bth.becn = true;
  const uint8_t reserved[16] = {};
  cnp.payload = reserved;
  inject_packet(*t.a.pc, t.b.qp->flow, cnp, t.sim.now());
  EXPECT_EQ(t.a.qp->rate->rate_bps(), 4e9);
  uint64_t s2 = 0;
  EXPECT_EQ(timed_write(s2), 2 * 16656u);
  EXPECT_EQ(t.a.pc->counters().rx_cnps, 1u);
  EXPECT_EQ(t.a.pc->counters().retransmitted_packets, 0u);

  // Back to RESET and connected again: the line rate, and still paced.
  const uint32_t a_next = t.b.qp->resp.epsn.value(), b_next = t.a.qp->resp.epsn.value();
  QpAttr reset;
  reset.qp_state = QpState::Reset;
  ASSERT_TRUE(t.a.pc->modify_qp(*t.a.qp, reset, kQpState));
  t.connect(t.a, t.b, a_next, b_next, kIpB);
  EXPECT_EQ(t.a.qp->rate->rate_bps(), 8e9);
  uint64_t s3 = 0;
  EXPECT_EQ(timed_write(s3), 16656u);
}

// Without congestion control (the default) a QP has no pacer and no rate.
TEST(Congestion, NoRateControlByDefault) {
  CorePair t;
  EXPECT_FALSE(t.a.qp->rate);
  EXPECT_FALSE(t.b.qp->rate);
}

// TIMELY takes the round trips the completer measures: one timed request per round trip, from
// its send to the ACK that covers it. One 4 KiB WRITE at a time over a link of 2 x 300 us: every
// round trip (600 us) is over T_high (500 us), so from the second sample on each cuts the rate
// by beta (1 - T_high / rtt). Over a 2 us link the round trips are under T_low: the rate stays
// at the line. Exact values: the link delays are exact, and a WRITE's ACK leaves at once.
TEST(Congestion, TimelyFollowsMeasuredRoundTrips) {
  for (uint64_t delay : {300'000ull, 2'000ull}) {
    PairOptions o;
    o.faults.delay_ns = delay;
    o.timeout = 16;  // 268 ms: no timeout in these round trips
    o.config = [](transport::CoreConfig& c) {
      c.cc = cc::Algo::Timely;
      c.timely = cc::TimelyParams::paper(10e9);
    };
    CorePair t(o);
    ASSERT_TRUE(t.a.qp->rate);
    std::vector<uint8_t> src(4096, 0x5a), dst(4096);
    Sge sge;
    const SendWr wr = write_all(t, src, dst, sge);
    std::vector<double> rates;
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(t.send(t.a, wr));
      EXPECT_EQ(t.one_wc(t.a.scq).status, WcStatus::Success);
      rates.push_back(t.a.qp->rate->rate_bps());
    }
    EXPECT_EQ(dst, src);
    EXPECT_EQ(t.a.qp->rtt.srtt_ns(), 2 * delay);  // the ACK leaves as the WRITE arrives
    if (delay > 250'000) {
      const double cut = 1 - 0.8 * (1 - 500'000.0 / 600'000);
      EXPECT_EQ(rates[0], 10e9);  // the first sample only sets the base
      EXPECT_DOUBLE_EQ(rates[1], 10e9 * cut);
      EXPECT_DOUBLE_EQ(rates[2], 10e9 * cut * cut);
    } else {
      EXPECT_EQ(rates, (std::vector<double>{10e9, 10e9, 10e9}));
    }
  }
}

// Swift's window bounds the packets a QP has in flight. The fabric's round trip is given as
// 20 us at 10 Gb/s and MTU 1024: a window of 10e9 x 20e-6 / 8192 = 24.41 packets, so a 64 KiB
// WRITE (64 packets) has 24 out before its first ACK; without congestion control all 64 go.
// The link takes 2 x 300 us, far over the target (about 31 us), so each round trip's first
// timed ACK halves the window (max_mdf): the later rounds carry 12, 6, 3 packets, then one
// (a window under one packet is paced, one packet per round trip).
TEST(Congestion, SwiftWindowBoundsThePacketsInFlight) {
  for (bool swift : {true, false}) {
    uint32_t seen = 0, acked = 0, most = 0;
    std::vector<uint32_t> rounds;  // packets b received between two ACKs reaching a
    uint32_t round = 0;
    PairOptions o;
    o.faults.delay_ns = 300 * us;
    o.timeout = 16;
    o.config = [swift](transport::CoreConfig& c) {
      if (!swift) return;
      c.cc = cc::Algo::Swift;
      c.swift = cc::SwiftParams::for_line_rate(10e9);
      c.swift.mss_bytes = 1024;
      c.swift.base_rtt_ns = 20 * us;
    };
    o.trace_b = [&](const transport::Qp&, const wire::Packet& p, transport::Verdict) {
      seen = std::max(seen, (p.bth.psn.value() - o.psn_a + 1) & 0xffffff);
      most = std::max(most, seen - acked);
      ++round;
    };
    o.trace_a = [&](const transport::Qp&, const wire::Packet& p, transport::Verdict) {
      acked = std::max(acked, (p.bth.psn.value() - o.psn_a + 1) & 0xffffff);
      if (round) rounds.push_back(round);
      round = 0;
    };
    CorePair t(o);
    std::vector<uint8_t> src(64 * 1024), dst(64 * 1024);
    for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 7 + 1);
    Sge sge;
    const SendWr wr = write_all(t, src, dst, sge);
    ASSERT_TRUE(t.send(t.a, wr));
    EXPECT_EQ(t.one_wc(t.a.scq).status, WcStatus::Success);
    EXPECT_EQ(dst, src);
    EXPECT_EQ(seen, 64u);
    EXPECT_EQ(t.a.pc->counters().retransmitted_packets, 0u);
    if (swift) {
      std::vector<uint32_t> want = {24, 12, 6, 3};
      want.resize(want.size() + 64 - 45, 1);
      EXPECT_EQ(rounds, want);
      EXPECT_EQ(most, 24u);
      auto* s = dynamic_cast<cc::Swift*>(t.a.qp->rate.get());
      ASSERT_TRUE(s);
      EXPECT_LT(s->cwnd(), 1.0);
    } else {
      EXPECT_EQ(rounds, std::vector<uint32_t>{64});
      EXPECT_EQ(most, 64u);
    }
  }
}
