// Selective repeat between two cores: requests past a hole are held and reported in a SACK,
// only the holes are resent, a tail loss is recovered by the short timeout, and a requester or
// responder that does not take part gets standard go-back-N.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "../common/core_pair.hpp"
#include "../common/link_filters.hpp"
#include "../common/seed.hpp"
#include "transport/roles.hpp"

using namespace uroce;
using namespace uroce::test;
using transport::Reliability;
using transport::Verdict;

namespace {

constexpr uint32_t kPsnA = 0x100;

void selective(transport::CoreConfig& c) { c.reliability = Reliability::Sr; }

struct Buffers {
  std::vector<uint8_t> src, dst;
  CorePair::Keys s, d;
};

Buffers make_buffers(CorePair& t, size_t len, uint64_t pattern) {
  Buffers b{std::vector<uint8_t>(len), std::vector<uint8_t>(len), {}, {}};
  fill_pattern(b.src.data(), len, pattern);
  b.s = t.reg(t.a, b.src.data(), len);
  b.d = t.reg(t.b, b.dst.data(), len);
  return b;
}

// A request of A's from its src at local_off to B's dst at remote_off (a READ the other way).
Status post_op(CorePair& t, Buffers& b, uint64_t wr_id, WrOpcode op, uint32_t local_off, uint32_t remote_off,
               uint32_t len) {
  Sge sg{uint64_t(b.src.data() + local_off), len, b.s.lkey};
  SendWr w;
  w.wr_id = wr_id;
  w.opcode = op;
  w.send_flags = kSendSignaled;
  w.sg_list = {&sg, 1};
  w.remote_addr = uint64_t(b.dst.data() + remote_off);
  w.rkey = b.d.rkey;
  return t.send(t.a, w);
}

Status post_write(CorePair& t, Buffers& b, uint64_t wr_id, uint32_t off, uint32_t len) {
  return post_op(t, b, wr_id, WrOpcode::RdmaWrite, off, off, len);
}

// A READ of `len` bytes at `off` of B's buffer into A's (the Buffers' dst is B's, src A's).
Status post_read(CorePair& t, Buffers& b, uint64_t wr_id, uint32_t off, uint32_t len) {
  return post_op(t, b, wr_id, WrOpcode::RdmaRead, off, off, len);
}

// Buffers for READs: the pattern in B's memory (dst), A's (src) zero.
Buffers make_read_buffers(CorePair& t, size_t len, uint64_t pattern) {
  Buffers b{std::vector<uint8_t>(len), std::vector<uint8_t>(len), {}, {}};
  fill_pattern(b.dst.data(), len, pattern);
  b.s = t.reg(t.a, b.src.data(), len);
  b.d = t.reg(t.b, b.dst.data(), len);
  return b;
}

// Both QPs under selective repeat, agreed for them.
PairOptions sr_pair() {
  PairOptions o;
  o.psn_a = kPsnA;
  o.timeout = 14;  // 67 ms: any recovery faster than that was not the full timeout
  o.reliability = Reliability::Sr;
  return o;
}

// One WRITE of `bytes` from A to B, which must complete successfully and arrive whole.
// Returns the virtual time it took.
uint64_t write_once(CorePair& t, uint32_t bytes, uint64_t pattern) {
  Buffers b = make_buffers(t, bytes, pattern);
  const uint64_t t0 = t.sim.now();
  EXPECT_TRUE(post_write(t, b, 1, 0, bytes));
  Wc wc = t.one_wc(t.a.scq);
  EXPECT_EQ(wc.wr_id, 1u);
  EXPECT_EQ(wc.status, WcStatus::Success);
  EXPECT_EQ(0, std::memcmp(b.src.data(), b.dst.data(), b.src.size()));
  return t.sim.now() - t0;
}

// One READ of `bytes` by A from B, which must complete successfully and arrive whole.
void read_once(CorePair& t, uint32_t bytes, uint64_t pattern) {
  Buffers b = make_read_buffers(t, bytes, pattern);
  EXPECT_TRUE(post_read(t, b, 1, 0, bytes));
  Wc wc = t.one_wc(t.a.scq);
  EXPECT_EQ(wc.wr_id, 1u);
  EXPECT_EQ(wc.status, WcStatus::Success);
  EXPECT_EQ(0, std::memcmp(b.src.data(), b.dst.data(), b.src.size()));
}

TEST(SelectiveRepeat, HoldsPastAHoleAndResendsOnlyIt) {
  PairOptions o = sr_pair();
  std::vector<Verdict> at_b;
  o.trace_b = [&](const transport::Qp&, const wire::Packet&, Verdict v) { at_b.push_back(v); };
  CorePair t(o);
  t.sim.link().set_filter(lose_once({kPsnA + 2}));
  const uint64_t took = write_once(t, 8 * 1024, 11);
  EXPECT_LT(took, 100'000u) << "recovered by a timer";
  EXPECT_EQ(t.a.pc->counters().sr_probes, 0u);
  const auto &ca = t.a.pc->counters(), &cb = t.b.pc->counters();
  EXPECT_EQ(cb.rx_sr_held, 5u);  // PSNs 3..7 of the message
  EXPECT_EQ(cb.rx_sr_placed, 4u);  // 3..6 written at once; 7, the LAST, when its turn comes
  EXPECT_EQ(ca.retransmitted_packets, 1u);
  EXPECT_EQ(ca.retransmit_timeouts, 0u);
  EXPECT_EQ(cb.tx_naks_seq, 0u);
  EXPECT_GE(cb.tx_sacks, 1u);
  EXPECT_EQ(ca.rx_sacks, cb.tx_sacks);
  EXPECT_EQ(cb.rx_duplicate, 0u);
  // Two in sequence, five held, then the resent one and the five held executed in order.
  std::vector<Verdict> want = {Verdict::Execute, Verdict::Execute, Verdict::Held, Verdict::Held, Verdict::Held,
                               Verdict::Held,    Verdict::Held,    Verdict::Execute, Verdict::Execute,
                               Verdict::Execute, Verdict::Execute, Verdict::Execute, Verdict::Execute};
  EXPECT_EQ(at_b, want);
  EXPECT_EQ(t.b.qp->resp.held, 0u);
}

// Past a hole, the MIDDLE packets of the WRITE in progress are written to memory as they
// arrive; its LAST packet waits for the hole (a program polling the WRITE's last byte sees it
// last). So are the FIRST and MIDDLE packets of the next WRITE, which touches other bytes:
// its requester marks it placeable, and its FIRST's RETH says where its MIDDLEs go.
TEST(SelectiveRepeat, MiddlePacketsArePlacedOnArrival) {
  PairOptions o = sr_pair();
  CorePair t(o);
  bool block = true;  // PSN 2 is lost for as long as this holds
  t.sim.link().set_filter(lose_while(block, kPsnA + 2));
  Buffers b = make_buffers(t, 16 * 1024, 22);
  ASSERT_TRUE(post_write(t, b, 1, 0, 8 * 1024));             // PSNs 0..7
  ASSERT_TRUE(post_write(t, b, 2, 8 * 1024, 8 * 1024));      // PSNs 8..15
  ASSERT_TRUE(t.sim.run_until([&] { return t.b.pc->counters().rx_sr_held == 13; }, 100'000));
  auto same = [&](uint32_t from, uint32_t len) { return std::memcmp(b.src.data() + from, b.dst.data() + from, len) == 0; };
  auto zero = [&](uint32_t from, uint32_t len) {
    return std::all_of(b.dst.begin() + from, b.dst.begin() + from + len, [](uint8_t x) { return x == 0; });
  };
  EXPECT_TRUE(same(0, 2048));          // PSNs 0, 1: in sequence
  EXPECT_TRUE(zero(2048, 1024));       // the hole
  EXPECT_TRUE(same(3072, 4 * 1024));   // 3..6: placed
  EXPECT_TRUE(zero(7168, 1024));       // 7, the first WRITE's LAST: held
  EXPECT_TRUE(same(8192, 7 * 1024));   // 8..14, the second WRITE's FIRST and MIDDLEs: placed
  EXPECT_TRUE(zero(15 * 1024, 1024));  // 15, its LAST: held
  EXPECT_EQ(t.b.pc->counters().rx_sr_placed, 11u);
  block = false;
  std::vector<Wc> got;
  ASSERT_TRUE(t.wait_wc(t.a.scq, 2, got));
  EXPECT_EQ(got[0].wr_id, 1u);
  EXPECT_EQ(got[1].wr_id, 2u);
  EXPECT_EQ(got[1].status, WcStatus::Success);
  EXPECT_TRUE(same(0, 16 * 1024));
  EXPECT_EQ(t.b.pc->counters().rx_sr_placed, 11u);
}

// A later WRITE is placed early only when nothing before it that may be unfinished touches its
// bytes: one that writes over an earlier WRITE's bytes waits for its turn, so the earlier
// WRITE's resent packet cannot overwrite it; so does one after a READ (what a READ returns
// of bytes a later unfenced WRITE changes is not defined by verbs, and uroce does not widen
// that). B ends with the later WRITE's bytes.
TEST(SelectiveRepeat, LaterWritesWaitWhenSomethingEarlierTouchesTheirBytes) {
  for (bool read_first : {false, true}) {
    SCOPED_TRACE(read_first ? "after a READ" : "over an earlier WRITE");
    CorePair t(sr_pair());
    bool block = true;
    // The earlier WRITE's third packet, or the READ's request: the later WRITE is past the hole.
    t.sim.link().set_filter(lose_while(block, kPsnA + (read_first ? 0 : 2)));
    Buffers b = make_buffers(t, 24 * 1024, 33);
    fill_pattern(b.dst.data(), 8 * 1024, 44);  // B's bytes before
    // First either a WRITE of A's src 0..8 KiB to B's dst 0..8 KiB (PSNs 0..7), or a READ of B's
    // dst 0..8 KiB (PSNs 0..7); then a WRITE of A's src 8..16 KiB over B's dst 0..8 KiB (8..15).
    auto op = [&](uint64_t id, WrOpcode code, uint32_t local_off) {
      return post_op(t, b, id, code, local_off, 0, 8 * 1024);
    };
    std::memset(b.src.data() + 16 * 1024, 0, 8 * 1024);
    ASSERT_TRUE(read_first ? op(1, WrOpcode::RdmaRead, 16 * 1024) : op(1, WrOpcode::RdmaWrite, 0));
    ASSERT_TRUE(op(2, WrOpcode::RdmaWrite, 8 * 1024));
    const uint64_t held = read_first ? 8 : 13;  // the PSNs past the lost one
    ASSERT_TRUE(t.sim.run_until([&] { return t.b.pc->counters().rx_sr_held == held; }, 100'000));
    // Only the earlier WRITE's own MIDDLEs (3..6), in progress, are placed.
    EXPECT_EQ(t.b.pc->counters().rx_sr_placed, read_first ? 0u : 4u);
    block = false;
    std::vector<Wc> got;
    ASSERT_TRUE(t.wait_wc(t.a.scq, 2, got));
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].status, WcStatus::Success);
    EXPECT_EQ(got[1].status, WcStatus::Success);
    EXPECT_EQ(0, std::memcmp(b.dst.data(), b.src.data() + 8 * 1024, 8 * 1024));  // the later WRITE's
  }
}

TEST(SelectiveRepeat, SeveralHolesEachResentOnce) {
  PairOptions o = sr_pair();
  CorePair t(o);
  t.sim.link().set_filter(lose_once({kPsnA + 1, kPsnA + 4, kPsnA + 5, kPsnA + 30}));
  Buffers b = make_buffers(t, 40 * 1024, 12);
  ASSERT_TRUE(post_write(t, b, 1, 0, 20 * 1024));
  ASSERT_TRUE(post_write(t, b, 2, 20 * 1024, 20 * 1024));
  std::vector<Wc> got;
  ASSERT_TRUE(t.wait_wc(t.a.scq, 2, got));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].wr_id, 1u);
  EXPECT_EQ(got[1].wr_id, 2u);
  EXPECT_EQ(got[0].status, WcStatus::Success);
  EXPECT_EQ(got[1].status, WcStatus::Success);
  EXPECT_EQ(0, std::memcmp(b.src.data(), b.dst.data(), b.src.size()));
  EXPECT_EQ(t.a.pc->counters().retransmitted_packets, 4u);
  EXPECT_EQ(t.a.pc->counters().retransmit_timeouts, 0u);
  EXPECT_EQ(t.b.pc->counters().rx_duplicate, 0u);
}

TEST(SelectiveRepeat, TailLossRecoveredByAProbe) {
  PairOptions o = sr_pair();
  CorePair t(o);
  t.sim.link().set_filter(lose_once({kPsnA + 7}));  // the last of eight: nothing after it reports it
  const uint64_t took = write_once(t, 8 * 1024, 13);
  EXPECT_EQ(t.a.pc->counters().sr_probes, 1u);
  EXPECT_EQ(t.a.pc->counters().retransmit_timeouts, 0u);
  EXPECT_EQ(t.a.pc->counters().retransmitted_packets, 1u);
  const uint64_t probe = t.a.pc->config().sr_probe_ns;
  EXPECT_GE(took, probe);
  EXPECT_LT(took, 2 * probe) << "the QP's full timeout (67 ms) ran";
}

// Loses the first `times` transmissions of one PSN of A's requests.
sim::LossyLink::Filter lose_times(uint32_t psn, int times) {
  auto seen = std::make_shared<int>(0);
  return [psn, times, seen](const wire::FlowAddr& f, std::vector<uint8_t>& b) {
    uint32_t got;
    return !(request_psn(f, b, got) && got == psn && (*seen)++ < times);
  };
}

// A lost probe is followed by another, not by the QP's full timeout; the second waits twice
// as long as the first (back-off).
TEST(SelectiveRepeat, LostProbeIsProbedAgain) {
  PairOptions o = sr_pair();
  CorePair t(o);
  t.sim.link().set_filter(lose_times(kPsnA + 3, 2));  // the tail and its first probe
  const uint64_t took = write_once(t, 4 * 1024, 14);
  EXPECT_EQ(t.a.pc->counters().sr_probes, 2u);
  EXPECT_EQ(t.a.pc->counters().retransmit_timeouts, 0u);
  const uint64_t probe = t.a.pc->config().sr_probe_ns;
  EXPECT_GE(took, 3 * probe);
  EXPECT_LT(took, 4 * probe);
  EXPECT_EQ(t.a.qp->state(), QpState::Rts);
}

// A hole whose resend is lost too is resent again by the probe (the held PSNs are not).
TEST(SelectiveRepeat, LostResendIsResentByTheProbe) {
  PairOptions o = sr_pair();
  CorePair t(o);
  t.sim.link().set_filter(lose_times(kPsnA + 2, 2));
  const uint64_t took = write_once(t, 8 * 1024, 20);
  EXPECT_EQ(t.a.pc->counters().sr_probes, 1u);
  EXPECT_EQ(t.a.pc->counters().retransmitted_packets, 2u);
  EXPECT_EQ(t.a.pc->counters().retransmit_timeouts, 0u);
  EXPECT_EQ(t.b.pc->counters().rx_duplicate, 0u);
  EXPECT_LT(took, 2 * t.a.pc->config().sr_probe_ns);
}

// A resend lost again is seen as soon as a request sent after it is reported held (the link
// keeps order), and resent again without waiting for a probe.
TEST(SelectiveRepeat, LostResendIsSeenByLaterPackets) {
  PairOptions o = sr_pair();
  o.config = [](transport::CoreConfig& c) {
    c.reliability = Reliability::Sr;
    c.max_inflight_pkts = 16;  // new packets go out after the resend, as the window moves
  };
  CorePair t(o);
  t.sim.link().set_filter(lose_times(kPsnA + 2, 2));
  const uint64_t took = write_once(t, 40 * 1024, 21);
  const auto& ca = t.a.pc->counters();
  EXPECT_EQ(ca.sr_lost_resends, 1u);
  EXPECT_EQ(ca.sr_probes, 0u);
  EXPECT_EQ(ca.retransmitted_packets, 2u);
  EXPECT_EQ(ca.retransmit_timeouts, 0u);
  EXPECT_LT(took, t.a.pc->config().sr_probe_min_ns);
}

// A responder that ignores the announcement (any other RoCE stack: the bit is reserved) sends
// a sequence NAK, and the requester goes back N as standard RoCE does.
TEST(SelectiveRepeat, PeerWithoutItGetsGoBackN) {
  PairOptions o = sr_pair();
  CorePair t(o);
  auto lose = lose_once({kPsnA + 2});
  t.sim.link().set_filter([lose](const wire::FlowAddr& f, std::vector<uint8_t>& b) {
    uint32_t psn;
    if (request_psn(f, b, psn)) {  // what a stack that ignores reserved bits sees
      b[8] &= uint8_t(~0x40);
      size_t n = b.size() - wire::kIcrcLen;
      wire::icrc_store(b.data() + n, wire::icrc_for_flow(f, std::span<const uint8_t>(b.data(), n)));
    }
    return lose(f, b);
  });
  write_once(t, 8 * 1024, 15);
  const auto &ca = t.a.pc->counters(), &cb = t.b.pc->counters();
  EXPECT_EQ(cb.tx_naks_seq, 1u);
  EXPECT_EQ(cb.rx_sr_held, 0u);
  EXPECT_EQ(cb.tx_sacks, 0u);
  EXPECT_EQ(ca.rx_naks_seq, 1u);
  EXPECT_EQ(ca.retransmitted_packets, 6u);  // PSNs 2..7: go-back-N
}

// A requester that does not announce selective repeat gets standard answers from a responder
// configured for it.
TEST(SelectiveRepeat, RequesterWithoutItGetsNoSack) {
  PairOptions o;
  o.psn_a = kPsnA;
  o.config_b = selective;
  CorePair t(o);
  t.sim.link().set_filter(lose_once({kPsnA + 2}));
  write_once(t, 8 * 1024, 16);
  EXPECT_EQ(t.b.pc->counters().tx_sacks, 0u);
  EXPECT_EQ(t.b.pc->counters().tx_naks_seq, 1u);
  EXPECT_EQ(t.a.pc->counters().retransmitted_packets, 6u);
}

// A SACK is an answer only to a QP that announced selective repeat.
TEST(SelectiveRepeat, SackToAQpThatNeverAnnouncedIsDropped) {
  PairOptions o;
  o.psn_a = kPsnA;
  CorePair t(o);
  Buffers b = make_buffers(t, 4 * 1024, 17);
  t.sim.link().set_filter([](const wire::FlowAddr&, std::vector<uint8_t>&) { return false; });
  ASSERT_TRUE(post_write(t, b, 1, 0, 4 * 1024));
  t.lose_tx(t.a);
  wire::Packet p;
  p.bth.opcode = wire::Opcode::UROCE_SACK;
  p.bth.dest_qp = t.a.qp->qpn().value();
  p.bth.psn = wire::Psn(kPsnA + 3);
  p.aeth = wire::Aeth::ack(1);
  uint8_t bits[wire::kSackLen] = {};
  p.payload = bits;
  t.inject(t.a, t.b, p);
  EXPECT_EQ(t.a.pc->counters().rx_bad_opcode, 1u);
  Wc wc[1];
  EXPECT_EQ(t.a.scq->poll(wc), 0);
  EXPECT_EQ(t.a.qp->state(), QpState::Rts);
  EXPECT_EQ(t.a.qp->comp.una, wire::Psn(kPsnA));
}

// A held SEND that finds no receive WQE when its turn comes is RNR-NAKed and dropped; the
// requester resends it after the RNR timer although a SACK once reported it held.
TEST(SelectiveRepeat, HeldSendWithoutReceiveIsResentAfterRnr) {
  PairOptions o = sr_pair();
  CorePair t(o);
  t.sim.link().set_filter(lose_once({kPsnA}));
  std::vector<uint8_t> src(3 * 512), dst(3 * 512);
  fill_pattern(src.data(), src.size(), 18);
  auto ms = t.reg(t.a, src.data(), src.size());
  auto md = t.reg(t.b, dst.data(), dst.size());
  auto post_recv = [&](uint64_t i) {
    Sge rs{uint64_t(dst.data() + i * 512), 512, md.lkey};
    ASSERT_TRUE(t.recv(t.b, {i, {&rs, 1}}));
  };
  post_recv(0);
  for (uint64_t i = 0; i < 3; ++i) {
    Sge sg{uint64_t(src.data() + i * 512), 512, ms.lkey};
    SendWr w;
    w.wr_id = i;
    w.opcode = WrOpcode::Send;
    w.send_flags = kSendSignaled;
    w.sg_list = {&sg, 1};
    ASSERT_TRUE(t.send(t.a, w));
  }
  ASSERT_TRUE(t.sim.run_until([&] { return t.b.pc->counters().tx_rnr_naks > 0; }, 100'000'000));
  post_recv(1);
  post_recv(2);
  std::vector<Wc> got;
  ASSERT_TRUE(t.wait_wc(t.a.scq, 3, got));
  ASSERT_EQ(got.size(), 3u);
  for (uint64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(got[i].wr_id, i);
    EXPECT_EQ(got[i].status, WcStatus::Success);
  }
  std::vector<Wc> recvs;
  ASSERT_TRUE(t.wait_wc(t.b.rcq, 3, recvs));
  for (uint64_t i = 0; i < 3; ++i) EXPECT_EQ(recvs[i].wr_id, i);
  EXPECT_EQ(0, std::memcmp(src.data(), dst.data(), src.size()));
  EXPECT_EQ(t.a.qp->state(), QpState::Rts);
}

// The same stream over the same lossy link: selective repeat resends about what was lost,
// go-back-N about a window for each loss.
TEST(SelectiveRepeat, ResendsFarLessThanGoBackN) {
  uint64_t resent[2] = {}, lost[2] = {};
  for (int sr = 0; sr < 2; ++sr) {
    PairOptions o;
    o.seed = test_seed(77);
    o.psn_a = kPsnA;
    o.faults.drop = 0.02;
    o.timeout = 14;
    if (sr) o.config = selective;
    CorePair t(o);
    Buffers b = make_buffers(t, 64 * 1024, 19);
    for (uint64_t i = 0; i < 40; ++i) ASSERT_TRUE(post_write(t, b, i, 0, 64 * 1024));
    std::vector<Wc> got;
    ASSERT_TRUE(t.wait_wc(t.a.scq, 40, got));
    for (uint64_t i = 0; i < 40; ++i) {
      ASSERT_EQ(got[i].wr_id, i);
      ASSERT_EQ(got[i].status, WcStatus::Success);
    }
    EXPECT_EQ(0, std::memcmp(b.src.data(), b.dst.data(), b.src.size()));
    resent[sr] = t.a.pc->counters().retransmitted_packets;
    lost[sr] = t.sim.link().stats().dropped;
  }
  SCOPED_TRACE("gbn resent " + std::to_string(resent[0]) + " for " + std::to_string(lost[0]) + " lost; sr resent " +
               std::to_string(resent[1]) + " for " + std::to_string(lost[1]) + " lost");
  EXPECT_GT(lost[1], 0u);
  EXPECT_LE(resent[1], 2 * lost[1]);
  EXPECT_GT(resent[0], 4 * resent[1]);
}

// READ responses past a lost one are written into the READ's buffer as they arrive; only the
// lost one is asked for again, by a READ of that one packet.
TEST(SelectiveRepeat, ReadResponsesArePlacedPastAGap) {
  PairOptions o = sr_pair();
  CorePair t(o);
  bool block = true;  // the response with PSN 2 is lost for as long as this holds
  t.sim.link().set_filter([&block](const wire::FlowAddr& f, std::vector<uint8_t>& b) {
    uint32_t psn;
    return !(block && response_psn(f, b, psn) && psn == kPsnA + 2);
  });
  Buffers b = make_read_buffers(t, 8 * 1024, 31);
  ASSERT_TRUE(post_read(t, b, 1, 0, 8 * 1024));
  ASSERT_TRUE(t.sim.run_until([&] { return t.a.pc->counters().rx_sr_read_placed == 5; }, 100'000));
  auto same = [&](uint32_t from, uint32_t len) { return std::memcmp(b.src.data() + from, b.dst.data() + from, len) == 0; };
  EXPECT_TRUE(same(0, 2048));
  EXPECT_TRUE(std::all_of(b.src.begin() + 2048, b.src.begin() + 3072, [](uint8_t x) { return x == 0; }));
  EXPECT_TRUE(same(3072, 5 * 1024));  // 3..7, LAST included: nobody looks before the completion
  Wc none[1];
  EXPECT_EQ(t.a.scq->poll(none), 0);
  EXPECT_EQ(t.a.pc->counters().sr_read_reasks, 1u);  // lost too, while blocked
  block = false;
  Wc wc = t.one_wc(t.a.scq);
  EXPECT_EQ(wc.wr_id, 1u);
  EXPECT_EQ(wc.status, WcStatus::Success);
  EXPECT_EQ(wc.byte_len, 8 * 1024u);
  EXPECT_TRUE(same(0, 8 * 1024));
  const auto &ca = t.a.pc->counters(), &cb = t.b.pc->counters();
  EXPECT_EQ(ca.rx_sr_read_placed, 5u);
  EXPECT_EQ(ca.sr_read_reasks, 1u + ca.sr_probes);  // each probe asks for PSN 2 alone
  EXPECT_EQ(cb.rx_read_dup, ca.sr_read_reasks);
  EXPECT_EQ(ca.retransmit_timeouts, 0u);
  EXPECT_EQ(ca.rx_duplicate, 0u);
}

TEST(SelectiveRepeat, SeveralHolesInAReadEachAskedForOnce) {
  PairOptions o = sr_pair();
  CorePair t(o);
  t.sim.link().set_filter(lose_responses_once({kPsnA + 1, kPsnA + 4, kPsnA + 5, kPsnA + 30}));
  read_once(t, 40 * 1024, 32);
  const auto &ca = t.a.pc->counters(), &cb = t.b.pc->counters();
  EXPECT_EQ(ca.sr_read_reasks, 3u);  // PSN 1, PSNs 4-5, PSN 30
  EXPECT_EQ(cb.rx_read_dup, 3u);
  EXPECT_EQ(cb.tx_packets, 40u + 4u);
  EXPECT_EQ(ca.rx_duplicate, 0u);
  EXPECT_EQ(ca.sr_probes, 0u);
  EXPECT_EQ(ca.retransmit_timeouts, 0u);
}

// Responses of a later READ are placed while an earlier one has a hole; the WRITE between them
// completes once the hole is filled, and everything completes in order.
TEST(SelectiveRepeat, ReadsPastAHoleCompleteInOrder) {
  PairOptions o = sr_pair();
  CorePair t(o);
  t.sim.link().set_filter(lose_responses_once({kPsnA + 3}));
  Buffers r = make_read_buffers(t, 16 * 1024, 33);
  Buffers w = make_buffers(t, 4 * 1024, 34);
  ASSERT_TRUE(post_read(t, r, 1, 0, 8 * 1024));     // PSNs 0..7
  ASSERT_TRUE(post_write(t, w, 2, 0, 4 * 1024));    // PSNs 8..11
  ASSERT_TRUE(post_read(t, r, 3, 8 * 1024, 8 * 1024));  // PSNs 12..19
  std::vector<Wc> got;
  ASSERT_TRUE(t.wait_wc(t.a.scq, 3, got));
  ASSERT_EQ(got.size(), 3u);
  for (uint64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(got[i].wr_id, i + 1);
    EXPECT_EQ(got[i].status, WcStatus::Success);
  }
  EXPECT_EQ(0, std::memcmp(r.src.data(), r.dst.data(), r.src.size()));
  EXPECT_EQ(0, std::memcmp(w.src.data(), w.dst.data(), w.src.size()));
  const auto& ca = t.a.pc->counters();
  EXPECT_EQ(ca.rx_sr_read_placed, 4u + 8u);
  EXPECT_EQ(ca.sr_read_reasks, 1u);
  EXPECT_EQ(ca.retransmitted_packets, 1u);
  EXPECT_EQ(ca.rx_duplicate, 0u);
  EXPECT_EQ(ca.sr_probes, 0u);
}

// A lost last response is asked for alone by the probe.
TEST(SelectiveRepeat, ReadTailLossAskedForByTheProbe) {
  PairOptions o = sr_pair();
  CorePair t(o);
  t.sim.link().set_filter(lose_responses_once({kPsnA + 7}));
  read_once(t, 8 * 1024, 35);
  const auto &ca = t.a.pc->counters(), &cb = t.b.pc->counters();
  EXPECT_EQ(ca.sr_probes, 1u);
  EXPECT_EQ(ca.sr_read_reasks, 1u);
  EXPECT_EQ(cb.rx_read_dup, 1u);
  EXPECT_EQ(cb.tx_packets, 9u);
  EXPECT_EQ(ca.retransmit_timeouts, 0u);
}

// A READ the responder never got is asked for again whole, as first sent: a part of it would
// be executed as a new, shorter READ.
TEST(SelectiveRepeat, LostReadRequestIsSentAgainWhole) {
  PairOptions o = sr_pair();
  CorePair t(o);
  t.sim.link().set_filter(lose_once({kPsnA}));
  read_once(t, 8 * 1024, 36);
  const auto &ca = t.a.pc->counters(), &cb = t.b.pc->counters();
  EXPECT_EQ(ca.sr_probes, 1u);
  EXPECT_EQ(ca.sr_read_reasks, 0u);
  EXPECT_EQ(cb.rx_read_dup, 0u);
  EXPECT_EQ(cb.tx_packets, 8u);
  EXPECT_EQ(t.b.qp->resp.epsn, wire::Psn(kPsnA + 8));
}

// A part of an executed READ is answered again only when asked for under selective repeat, in
// whole packets; the rest of it, as IBA has it, always.
TEST(SelectiveRepeat, PartOfAReadIsAnsweredOnlyUnderSelectiveRepeat) {
  PairOptions o = sr_pair();
  CorePair t(o);
  Buffers b = make_read_buffers(t, 8 * 1024, 37);
  ASSERT_TRUE(post_read(t, b, 1, 0, 8 * 1024));
  EXPECT_EQ(t.one_wc(t.a.scq).status, WcStatus::Success);
  auto ask = [&](bool sr, uint32_t len) {
    wire::Packet p;
    p.bth.opcode = wire::Opcode::RC_READ_REQUEST;
    p.bth.dest_qp = t.b.qp->qpn().value();
    p.bth.psn = wire::Psn(kPsnA + 2);
    p.bth.sr = sr;
    p.reth = {uint64_t(b.dst.data() + 2048), b.d.rkey, len};
    t.inject(t.b, t.a, p);
    t.sim.run_until([] { return false; }, 50'000);
  };
  const auto& cb = t.b.pc->counters();
  ask(false, 1024);
  EXPECT_EQ(cb.rx_dup_unmatched, 1u);
  ask(true, 1000);
  EXPECT_EQ(cb.rx_dup_unmatched, 2u);
  EXPECT_EQ(cb.rx_read_dup, 0u);
  ask(true, 2048);
  EXPECT_EQ(cb.rx_read_dup, 1u);
  EXPECT_EQ(cb.tx_packets, 8u + 2u);
  ask(false, 6 * 1024);
  EXPECT_EQ(cb.rx_read_dup, 2u);
  EXPECT_EQ(cb.tx_packets, 8u + 2u + 6u);
  EXPECT_EQ(t.a.qp->state(), QpState::Rts);
}

// Two SENDs from A into receive WQEs B posted, for the SEND tests.
struct Sends {
  std::vector<uint8_t> src, dst;
  CorePair::Keys s, d;
  std::vector<uint32_t> lens;
};

Sends make_sends(CorePair& t, std::vector<uint32_t> lens, uint64_t pattern) {
  size_t total = 0;
  for (uint32_t l : lens) total += l;
  Sends x{std::vector<uint8_t>(total), std::vector<uint8_t>(total), {}, {}, lens};
  fill_pattern(x.src.data(), total, pattern);
  x.s = t.reg(t.a, x.src.data(), total);
  x.d = t.reg(t.b, x.dst.data(), total);
  return x;
}

void post_recvs(CorePair& t, Sends& x, size_t from, size_t to) {
  size_t off = 0;
  for (size_t i = 0; i < to; ++i) {
    if (i >= from) {
      Sge rs{uint64_t(x.dst.data() + off), x.lens[i], x.d.lkey};
      ASSERT_TRUE(t.recv(t.b, {i, {&rs, 1}}));
    }
    off += x.lens[i];
  }
}

void post_sends(CorePair& t, Sends& x) {
  size_t off = 0;
  for (size_t i = 0; i < x.lens.size(); ++i) {
    Sge sg{uint64_t(x.src.data() + off), x.lens[i], x.s.lkey};
    SendWr w;
    w.wr_id = i;
    w.opcode = WrOpcode::Send;
    w.send_flags = kSendSignaled;
    w.sg_list = {&sg, 1};
    ASSERT_TRUE(t.send(t.a, w));
    off += x.lens[i];
  }
}

// Both SENDs complete in order at both ends, every byte where it belongs.
void expect_sends_done(CorePair& t, Sends& x) {
  std::vector<Wc> sent, recvd;
  ASSERT_TRUE(t.wait_wc(t.a.scq, x.lens.size(), sent));
  ASSERT_TRUE(t.wait_wc(t.b.rcq, x.lens.size(), recvd));
  for (size_t i = 0; i < x.lens.size(); ++i) {
    EXPECT_EQ(sent[i].wr_id, i);
    EXPECT_EQ(sent[i].status, WcStatus::Success);
    EXPECT_EQ(recvd[i].wr_id, i);
    EXPECT_EQ(recvd[i].status, WcStatus::Success);
    EXPECT_EQ(recvd[i].byte_len, x.lens[i]);
  }
  size_t total = 0;
  for (uint32_t l : x.lens) total += l;
  EXPECT_EQ(0, std::memcmp(x.src.data(), x.dst.data(), total));
}

// Under selective repeat a SEND's packets say which receive WQE they go to and where: past a
// hole they are written there at once, for the SEND in progress and for later ones whose
// receive WQE is posted. The receives still complete in order once the hole is filled.
TEST(SelectiveRepeat, SendPacketsArePlacedPastAHole) {
  PairOptions o = sr_pair();
  CorePair t(o);
  bool block = true;
  t.sim.link().set_filter(lose_while(block, kPsnA + 2));
  Sends x = make_sends(t, {8 * 1024, 4 * 1024}, 41);
  post_recvs(t, x, 0, 2);
  post_sends(t, x);  // PSNs 0..7 and 8..11
  ASSERT_TRUE(t.sim.run_until([&] { return t.b.pc->counters().rx_sr_held == 9; }, 100'000));
  EXPECT_EQ(t.b.pc->counters().rx_sr_placed, 9u);
  EXPECT_EQ(0, std::memcmp(x.src.data(), x.dst.data(), 2048));
  EXPECT_TRUE(std::all_of(x.dst.begin() + 2048, x.dst.begin() + 3072, [](uint8_t v) { return v == 0; }));
  EXPECT_EQ(0, std::memcmp(x.src.data() + 3072, x.dst.data() + 3072, x.src.size() - 3072));
  Wc none[1];
  EXPECT_EQ(t.b.rcq->poll(none), 0);
  block = false;
  expect_sends_done(t, x);
  EXPECT_EQ(t.a.pc->counters().retransmitted_packets, t.b.pc->counters().rx_duplicate + 1);
}

// A later SEND whose receive WQE is not posted yet is held, not placed; it is executed (into
// the WQE posted meanwhile) when its turn comes.
TEST(SelectiveRepeat, SendWithoutItsReceiveYetIsHeld) {
  PairOptions o = sr_pair();
  CorePair t(o);
  bool block = true;
  t.sim.link().set_filter(lose_while(block, kPsnA + 2));
  Sends x = make_sends(t, {8 * 1024, 4 * 1024}, 42);
  post_recvs(t, x, 0, 1);
  post_sends(t, x);
  ASSERT_TRUE(t.sim.run_until([&] { return t.b.pc->counters().rx_sr_held == 9; }, 100'000));
  EXPECT_EQ(t.b.pc->counters().rx_sr_placed, 5u);  // 3..7 of the first
  EXPECT_TRUE(std::all_of(x.dst.begin() + 8192, x.dst.end(), [](uint8_t v) { return v == 0; }));
  post_recvs(t, x, 1, 2);
  block = false;
  expect_sends_done(t, x);
  EXPECT_EQ(t.b.pc->counters().rx_sr_placed, 5u);
  EXPECT_EQ(t.b.pc->counters().tx_rnr_naks, 0u);
}

// What a SEND's PlaceETH says: the receive WQEs count SENDs and WRITEs with immediate, in the
// order they were posted; the packet index counts within the message.
TEST(SelectiveRepeat, SendsNameTheirReceiveWqe) {
  PairOptions o = sr_pair();
  CorePair t(o);
  std::vector<std::pair<uint32_t, uint32_t>> seen;  // (recv_seq, pkt) of each SEND packet
  std::vector<uint8_t> ops;
  t.sim.link().set_filter([&](const wire::FlowAddr& f, std::vector<uint8_t>& b) {
    wire::Packet p;
    if (f.dst == Gid::from_ipv4(kIpB) && wire::decode(b, p) == wire::ParseError::None) {
      ops.push_back(uint8_t(p.bth.opcode));
      if (p.has(wire::kPlaceEth)) seen.push_back({p.place.recv_seq, p.place.pkt});
    }
    return true;
  });
  Buffers b = make_buffers(t, 8 * 1024, 43);
  std::vector<uint8_t> rbuf(16 * 1024);
  auto rk = t.reg(t.b, rbuf.data(), rbuf.size());
  for (uint64_t i = 0; i < 3; ++i) {
    Sge rs{uint64_t(rbuf.data() + i * 4096), 4096, rk.lkey};
    ASSERT_TRUE(t.recv(t.b, {i, {&rs, 1}}));
  }
  auto post = [&](uint64_t id, WrOpcode op, uint32_t len) { ASSERT_TRUE(post_op(t, b, id, op, 0, 0, len)); };
  post(0, WrOpcode::Send, 2048);            // receive 0, packets 0 and 1
  post(1, WrOpcode::RdmaWriteWithImm, 512);  // receive 1
  post(2, WrOpcode::RdmaWrite, 512);
  post(3, WrOpcode::SendWithImm, 512);       // receive 2
  std::vector<Wc> got;
  ASSERT_TRUE(t.wait_wc(t.a.scq, 4, got));
  std::vector<std::pair<uint32_t, uint32_t>> want = {{0, 0}, {0, 1}, {2, 0}};
  EXPECT_EQ(seen, want);
  std::vector<uint8_t> want_ops = {0xc8, 0xca, uint8_t(wire::Opcode::RC_WRITE_ONLY_IMM), uint8_t(wire::Opcode::RC_WRITE_ONLY),
                                   0xcd};
  EXPECT_EQ(ops, want_ops);
  std::vector<Wc> recvd;
  ASSERT_TRUE(t.wait_wc(t.b.rcq, 3, recvd));
  for (uint64_t i = 0; i < 3; ++i) EXPECT_EQ(recvd[i].wr_id, i);
}

// Chosen for a whole device, selective repeat may face any stack: SENDs keep the standard
// opcodes until the peer shows it takes part (its first answer that acknowledges a request,
// here the SACK after PSN 0, is marked), then carry a PlaceETH.
TEST(SelectiveRepeat, DeviceWideChoiceLearnsFromThePeersFirstAnswer) {
  PairOptions o;
  o.psn_a = kPsnA;
  o.timeout = 14;
  o.config = selective;
  CorePair t(o);
  std::vector<uint8_t> ops;  // A's requests as they leave, lost ones too
  auto lose = lose_once({kPsnA + 1});
  t.sim.link().set_filter([&ops, lose](const wire::FlowAddr& f, std::vector<uint8_t>& b) {
    uint32_t psn;
    if (request_psn(f, b, psn)) ops.push_back(b[0]);
    return lose(f, b);
  });
  Sends x = make_sends(t, {4096, 2048, 1024}, 44);
  post_recvs(t, x, 0, 3);
  x.lens.pop_back();
  post_sends(t, x);  // PSNs 0..3, 4..5
  expect_sends_done(t, x);
  std::vector<uint8_t> want = {0x00, 0x01, 0x01, 0x02, 0x00, 0x02, 0xc9};  // then PSN 1 again, placed
  EXPECT_EQ(ops, want);
  Sge sg{uint64_t(x.src.data() + 6144), 1024, x.s.lkey};
  SendWr w;
  w.wr_id = 2;
  w.opcode = WrOpcode::Send;
  w.send_flags = kSendSignaled;
  w.sg_list = {&sg, 1};
  ASSERT_TRUE(t.send(t.a, w));
  EXPECT_EQ(t.one_wc(t.a.scq).status, WcStatus::Success);
  EXPECT_EQ(ops.back(), uint8_t(wire::Opcode::UROCE_SEND_ONLY));
  EXPECT_EQ(0, std::memcmp(x.src.data(), x.dst.data(), x.src.size()));
}

}  // namespace

// With a link that takes payloads from registered memory itself (the engine's), first sends go
// by reference and resends are copied into their packet: a resend may leave after the peer's
// answer landed in the same buffer in the same pass, and its ICRC must match what it carries.
TEST(SelectiveRepeat, ResendsAreCopiedNotReferenced) {
  for (bool sr : {false, true}) {
    PairOptions o = sr_pair();
    if (!sr) o.reliability.reset();
    o.config = [](transport::CoreConfig& c) { c.link_gathers = true; };
    CorePair t(o);
    t.sim.link().set_filter(lose_once({kPsnA + 2}));
    write_once(t, 8 * 1024, 55);  // 8 packets; go-back-N resends 2..7, selective repeat 2
    const auto& c = t.a.pc->counters();
    EXPECT_EQ(c.retransmitted_packets, sr ? 1u : 6u);
    EXPECT_EQ(c.tx_payload_by_ref, 8u);
  }
}

// Selective repeat's window counts what is in the network: packets the responder reported held
// have left it. With a window of 8 and PSN 2 missing for as long as the test wants, the
// requester still sends all 32 packets of a WRITE (29 held past the hole); counted from the
// oldest unacknowledged packet, as go-back-N counts, it would stop at PSN 9.
TEST(SelectiveRepeat, HeldPacketsLeaveTheWindow) {
  PairOptions o = sr_pair();
  o.config = [](transport::CoreConfig& c) { c.sr_window_pkts = 8; };
  CorePair t(o);
  bool block = true;
  t.sim.link().set_filter(lose_while(block, kPsnA + 2));
  Buffers b = make_buffers(t, 32 * 1024, 66);
  ASSERT_TRUE(post_write(t, b, 1, 0, 32 * 1024));
  EXPECT_TRUE(t.sim.run_until([&] { return t.b.pc->counters().rx_sr_held == 29; }, 5'000'000));
  EXPECT_EQ(t.b.pc->counters().rx_sr_held, 29u);
  block = false;
  Wc wc = t.one_wc(t.a.scq);
  EXPECT_EQ(wc.status, WcStatus::Success);
  EXPECT_EQ(0, std::memcmp(b.src.data(), b.dst.data(), b.src.size()));
}
