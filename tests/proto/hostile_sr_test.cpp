// Hostile packets against selective repeat and its placement: a third party with a correct ICRC,
// the victim's address and a QPN, sometimes its PSN window. Whatever it sends past the expected
// PSN must not kill, corrupt or hijack the connection, nor reach memory the QP may not write.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "../common/core_pair.hpp"
#include "../common/forge.hpp"
#include "../common/link_filters.hpp"
#include "../common/seed.hpp"
#include "transport/roles.hpp"

using namespace uroce;
using namespace uroce::test;
using transport::Reliability;

namespace {

constexpr uint32_t kPsnA = kForgePsnA;

PairOptions sr_pair() { return forge_pair(true); }
PairOptions gbn_pair() { return forge_pair(false); }

}  // namespace

// A SEND held past a hole keeps its own bytes, and a forged one is not executed in place of
// the peer's: B holds a forged SEND at PSN +2 whose PlaceETH names receive 0; the program's
// receive 0 completes with A's first SEND, and the program reuses (or frees) that memory;
// A's third SEND, at +2, meets the forged copy: both are dropped, A sends it again, and
// receive 2 gets A's bytes. Before, the forged SEND ran into receive 2 from receive 0's
// memory: the program's later bytes, or SIGSEGV once unmapped.
TEST(HostileSr, ForgedHeldSendNeitherReplacesThePeersNorReadsItsReceive) {
  for (bool unmap : {false, true}) {
    SCOPED_TRACE(unmap ? "receive 0 unmapped" : "receive 0 reused");
    CorePair t(sr_pair());
    void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(page, MAP_FAILED);
    auto* r0 = static_cast<uint8_t*>(page);
    std::vector<uint8_t> rest(512, 0), src(768), attack(256, 0xf0);
    fill_pattern(src.data(), src.size(), 1);
    auto m0 = t.reg(t.b, r0, 4096);
    auto mrest = t.reg(t.b, rest.data(), rest.size());
    auto ms = t.reg(t.a, src.data(), src.size());
    Sge rs[3] = {{uint64_t(r0), 256, m0.lkey}, {uint64_t(rest.data()), 256, mrest.lkey},
                 {uint64_t(rest.data() + 256), 256, mrest.lkey}};
    for (uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(t.recv(t.b, {i, {&rs[i], 1}}));
    wire::Packet p = forged(t, wire::Opcode::UROCE_SEND_ONLY, 2, attack);
    p.place = {0, 0};
    t.inject(t.b, t.a, p);

    ASSERT_TRUE(post(t, 0, WrOpcode::Send, src.data(), 256, ms.lkey));
    Wc w = t.one_wc(t.b.rcq);
    ASSERT_EQ(w.status, WcStatus::Success);
    EXPECT_EQ(0, std::memcmp(r0, src.data(), 256));
    if (unmap) {
      ASSERT_TRUE(t.b.pc->dereg_mr(verbs::Lkey(m0.lkey)));
      munmap(page, 4096);
    } else {
      std::memset(r0, 0x5a, 4096);
    }
    ASSERT_TRUE(post(t, 1, WrOpcode::Send, src.data() + 256, 256, ms.lkey));
    ASSERT_TRUE(post(t, 2, WrOpcode::Send, src.data() + 512, 256, ms.lkey));
    std::vector<Wc> sent, got;
    ASSERT_TRUE(t.wait_wc(t.a.scq, 3, sent)) << dump_counters(*t.b.pc);
    ASSERT_TRUE(t.wait_wc(t.b.rcq, 2, got));
    for (const Wc& x : sent) EXPECT_EQ(x.status, WcStatus::Success);
    for (const Wc& x : got) EXPECT_EQ(x.status, WcStatus::Success);
    EXPECT_EQ(0, std::memcmp(rest.data(), src.data() + 256, 512)) << "receives 1 and 2 hold A's bytes";
    EXPECT_EQ(t.b.pc->counters().rx_sr_conflicts, 1u);
    EXPECT_EQ(t.b.qp->state(), QpState::Rts);
    if (!unmap) munmap(page, 4096);
  }
}

// Selective repeat is taken only on QPs that agreed to it: a stranger's request with the bit,
// ahead of the expected PSN, costs a go-back-N QP one PSN-sequence NAK (C9-91), whether or
// not its device would take selective repeat from a peer that announced it; B never answers
// with a SACK, and A's WRITE and READ afterwards complete byte-exact. Before, B held it, its
// ACKs became SACKs that A drops, and the forged SEND ran in the middle of A's WRITE.
TEST(HostileSr, GoBackNQpTakesNoSelectiveRepeatFromAStranger) {
  for (bool device_sr : {false, true}) {
    SCOPED_TRACE(device_sr ? "B's device chose selective repeat" : "both go-back-N");
    PairOptions o = gbn_pair();
    if (device_sr) o.config_b = [](transport::CoreConfig& c) { c.reliability = Reliability::Sr; };
    CorePair t(o);
    uint8_t junk[16] = {};
    wire::Packet p = forged(t, wire::Opcode::RC_SEND_ONLY, 5, junk);
    t.inject(t.b, t.a, p);
    const auto& cb = t.b.pc->counters();
    EXPECT_EQ(cb.tx_naks_seq, 1u);
    EXPECT_EQ(cb.rx_sr_held, 0u);
    std::vector<uint8_t> a(16384), b(16384);
    fill_pattern(b.data(), 8192, 2);
    fill_pattern(a.data(), 8192, 3);
    auto ma = t.reg(t.a, a.data(), a.size());
    auto mb = t.reg(t.b, b.data(), b.size());
    ASSERT_TRUE(post(t, 1, WrOpcode::RdmaWrite, a.data(), 8192, ma.lkey, uint64_t(b.data() + 8192), mb.rkey));
    ASSERT_TRUE(post(t, 2, WrOpcode::RdmaRead, a.data() + 8192, 8192, ma.lkey, uint64_t(b.data()), mb.rkey));
    std::vector<Wc> wcs;
    ASSERT_TRUE(t.wait_wc(t.a.scq, 2, wcs));
    EXPECT_EQ(wcs[0].status, WcStatus::Success);
    EXPECT_EQ(wcs[1].status, WcStatus::Success);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data() + 8192, 8192));
    EXPECT_EQ(0, std::memcmp(a.data() + 8192, b.data(), 8192));
    EXPECT_EQ(cb.tx_sacks, 0u);
    EXPECT_EQ(t.b.qp->state(), QpState::Rts);
  }
}

// uroce's SEND opcodes (0xc8 on) are honoured only on a QP that agreed to selective repeat:
// on a go-back-N QP one at the expected PSN is dropped and counted, and the receive it names
// stays free for the peer's SEND.
TEST(HostileSr, UroceSendOpcodesOnlyOnQpsThatAgreed) {
  CorePair t(gbn_pair());
  std::vector<uint8_t> rb(64, 0), src(64), attack(64, 0xf0);
  fill_pattern(src.data(), src.size(), 4);
  auto mr = t.reg(t.b, rb.data(), rb.size());
  auto ms = t.reg(t.a, src.data(), src.size());
  Sge r{uint64_t(rb.data()), 64, mr.lkey};
  ASSERT_TRUE(t.recv(t.b, {7, {&r, 1}}));
  wire::Packet p = forged(t, wire::Opcode::UROCE_SEND_ONLY, 0, attack);
  p.place = {0, 0};
  t.inject(t.b, t.a, p);
  EXPECT_EQ(t.b.pc->counters().rx_bad_opcode, 1u);
  Wc none[1];
  EXPECT_EQ(t.b.rcq->poll(none), 0);
  EXPECT_TRUE(all_are(rb.data(), rb.size(), 0));
  ASSERT_TRUE(post(t, 1, WrOpcode::Send, src.data(), 64, ms.lkey));
  Wc w = t.one_wc(t.b.rcq);
  EXPECT_EQ(w.wr_id, 7u);
  EXPECT_EQ(w.status, WcStatus::Success);
  EXPECT_EQ(rb, src);
}

// A blind sweep, one forged SEND with the selective-repeat bit every 256 PSNs (65,536 packets,
// knowing only the QPN), kills neither a go-back-N nor a selective-repeat pair: A's WRITE,
// READ and SEND afterwards complete byte-exact, and no forged SEND reaches a receive.
TEST(HostileSr, BlindSweepKillsNoConnection) {
  for (bool sr : {false, true}) {
    SCOPED_TRACE(sr ? "selective repeat" : "go-back-N");
    CorePair t(sr ? sr_pair() : gbn_pair());
    std::vector<uint8_t> rb(4 * 256, 0), a(16384 + 256), b(16384);
    fill_pattern(a.data(), a.size(), 5);
    fill_pattern(b.data(), 8192, 6);
    auto mr = t.reg(t.b, rb.data(), rb.size());
    auto ma = t.reg(t.a, a.data(), a.size());
    auto mb = t.reg(t.b, b.data(), b.size());
    for (uint64_t i = 0; i < 4; ++i) {
      Sge r{uint64_t(rb.data() + i * 256), 256, mr.lkey};
      ASSERT_TRUE(t.recv(t.b, {i, {&r, 1}}));
    }
    uint8_t junk[16];
    std::memset(junk, 0xf0, sizeof junk);
    const wire::Psn base = t.b.qp->resp.epsn;
    for (uint32_t k = 0; k < 65536; ++k) {
      wire::Packet p = forged(t, wire::Opcode::RC_SEND_ONLY, 0, junk);
      p.bth.psn = wire::Psn(k * 256 + 7);
      if (p.bth.psn == base) continue;  // the expected PSN itself is no blind guess
      t.inject(t.b, t.a, p);
    }
    ASSERT_TRUE(post(t, 1, WrOpcode::RdmaWrite, a.data(), 8192, ma.lkey, uint64_t(b.data() + 8192), mb.rkey));
    ASSERT_TRUE(post(t, 2, WrOpcode::RdmaRead, a.data() + 8192, 8192, ma.lkey, uint64_t(b.data()), mb.rkey));
    ASSERT_TRUE(post(t, 3, WrOpcode::Send, a.data() + 16384, 256, ma.lkey));
    std::vector<Wc> wcs;
    ASSERT_TRUE(t.wait_wc(t.a.scq, 3, wcs)) << dump_counters(*t.b.pc);
    for (const Wc& w : wcs) EXPECT_EQ(w.status, WcStatus::Success) << dump_counters(*t.b.pc);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data() + 8192, 8192));
    EXPECT_EQ(0, std::memcmp(a.data() + 8192, b.data(), 8192));
    Wc w = t.one_wc(t.b.rcq);
    EXPECT_EQ(w.wr_id, 0u);
    EXPECT_EQ(w.byte_len, 256u);
    EXPECT_EQ(0, std::memcmp(rb.data(), a.data() + 16384, 256));
    EXPECT_TRUE(all_are(rb.data() + 256, 3 * 256, 0)) << "a forged SEND reached a receive";
    // Selective repeat held the one forged SEND that fell in its window, until A's own packet
    // for that PSN arrived.
    EXPECT_EQ(t.b.pc->counters().rx_sr_conflicts, sr ? 1u : 0u);
    EXPECT_EQ(t.b.qp->state(), QpState::Rts);
  }
}

// A held request that does not fit where its turn comes (a stranger's, put right after the
// requester's last packet, so that a resend's release reaches it) is dropped, never NAKed: a
// third party cannot make the responder end the connection. Before, the forged MIDDLE after
// A's WRITE ran in its turn, B NAKed it as an invalid request and its QP went to ERR.
TEST(HostileSr, HeldRequestThatDoesNotFitIsDroppedNotNaked) {
  CorePair t(sr_pair());
  bool block = true;
  t.sim.link().set_filter(lose_while(block, kPsnA + 1));
  std::vector<uint8_t> src(8192), dst(8192, 0), attack(1024, 0xab);
  fill_pattern(src.data(), src.size(), 9);
  auto ms = t.reg(t.a, src.data(), src.size());
  auto md = t.reg(t.b, dst.data(), dst.size());
  ASSERT_TRUE(post(t, 1, WrOpcode::RdmaWrite, src.data(), 4096, ms.lkey, uint64_t(dst.data()), md.rkey));  // +0..+3
  ASSERT_TRUE(t.sim.run_until([&] { return t.b.pc->counters().rx_sr_held == 2; }, 100'000));
  wire::Packet mid = forged(t, wire::Opcode::RC_WRITE_MIDDLE, 3, attack);  // +4, right after the WRITE
  t.inject(t.b, t.a, mid);
  block = false;
  EXPECT_EQ(t.one_wc(t.a.scq).status, WcStatus::Success);
  EXPECT_EQ(t.b.pc->counters().rx_sr_unfit, 1u);
  EXPECT_EQ(t.b.pc->counters().tx_naks_fatal, 0u);
  EXPECT_EQ(t.b.qp->state(), QpState::Rts);
  ASSERT_TRUE(post(t, 2, WrOpcode::RdmaWrite, src.data() + 4096, 4096, ms.lkey, uint64_t(dst.data() + 4096), md.rkey));
  EXPECT_EQ(t.one_wc(t.a.scq).status, WcStatus::Success);
  EXPECT_EQ(dst, src);
}

// Where a SEND packet past a hole may go follows from its PSN: the receive in progress at the
// packet's index in its message, or the next receive when no message is in progress. A forged
// one whose PlaceETH names bytes already received, or a receive posted but not yet in use,
// writes nothing. Before, it rewrote the first KiB of a message that then completed SUCCESS,
// and wrote into the later receive.
TEST(HostileSr, SendPlacementFollowsThePacketsPsn) {
  CorePair t(sr_pair());
  bool block = true;
  t.sim.link().set_filter(lose_while(block, kPsnA + 1));
  std::vector<uint8_t> src(4096), rb(8192, 0), attack(1024, 0xee);
  fill_pattern(src.data(), src.size(), 7);
  auto ms = t.reg(t.a, src.data(), src.size());
  auto mr = t.reg(t.b, rb.data(), rb.size());
  for (uint64_t i = 0; i < 2; ++i) {
    Sge r{uint64_t(rb.data() + i * 4096), 4096, mr.lkey};
    ASSERT_TRUE(t.recv(t.b, {i, {&r, 1}}));
  }
  ASSERT_TRUE(post(t, 1, WrOpcode::Send, src.data(), 4096, ms.lkey));  // PSNs +0..+3, +1 lost
  ASSERT_TRUE(t.sim.run_until([&] { return t.b.pc->counters().rx_sr_held == 2; }, 100'000));
  const uint32_t held_before = uint32_t(t.b.pc->counters().rx_sr_held);
  wire::Packet mid = forged(t, wire::Opcode::UROCE_SEND_MIDDLE, 4, attack);  // +5: past the message
  mid.place = {0, 0};  // names receive 0's first KiB, already written
  t.inject(t.b, t.a, mid);
  wire::Packet only = forged(t, wire::Opcode::UROCE_SEND_ONLY, 5, std::span<const uint8_t>(attack).first(512));
  only.place = {1, 0};  // names receive 1, not in use
  t.inject(t.b, t.a, only);
  EXPECT_EQ(t.b.pc->counters().rx_sr_held, held_before + 2);
  EXPECT_EQ(0, std::memcmp(rb.data(), src.data(), 1024));
  EXPECT_TRUE(all_are(rb.data() + 4096, 4096, 0)) << "wrote into a receive not in use";
  block = false;
  Wc w = t.one_wc(t.b.rcq);
  EXPECT_EQ(w.wr_id, 0u);
  EXPECT_EQ(w.status, WcStatus::Success);
  EXPECT_EQ(0, std::memcmp(rb.data(), src.data(), 4096));
  EXPECT_TRUE(all_are(rb.data() + 4096, 4096, 0));
  EXPECT_EQ(t.one_wc(t.a.scq).status, WcStatus::Success);
  EXPECT_EQ(t.b.qp->state(), QpState::Rts);
}

// A WRITE placed past a hole passes the checks it would pass in sequence: the QP's
// REMOTE_WRITE right, and its whole RETH inside a region registered for remote writes. A
// forged FIRST and MIDDLE marked placeable write nothing on a QP opened without REMOTE_WRITE
// (the MR allows it), nor where the RETH starts outside the MR (the MIDDLE falls inside).
TEST(HostileSr, PlaceableWritesAreAuthorizedAsInSequence) {
  for (bool outside : {false, true}) {
    SCOPED_TRACE(outside ? "RETH starts before the MR" : "QP without REMOTE_WRITE");
    PairOptions o = sr_pair();
    if (!outside) o.access = kAccessLocalWrite | kAccessRemoteRead;
    CorePair t(o);
    std::vector<uint8_t> mem(16384, 0), attack(1024, 0xab);
    auto m = t.reg(t.b, mem.data(), mem.size());
    const uint64_t va = uint64_t(mem.data()) - (outside ? 1024 : 0);
    wire::Packet first = forged(t, wire::Opcode::RC_WRITE_FIRST, 3, attack);
    first.bth.place = true;
    first.reth = {va, m.rkey, 8192};
    t.inject(t.b, t.a, first);
    wire::Packet mid = forged(t, wire::Opcode::RC_WRITE_MIDDLE, 4, attack);
    mid.bth.place = true;
    t.inject(t.b, t.a, mid);
    EXPECT_TRUE(all_are(mem.data(), mem.size(), 0)) << "a forged placeable WRITE was written";
    EXPECT_EQ(t.b.pc->counters().rx_sr_placed, 0u);
  }
}

// A device-wide choice of selective repeat learns whether the peer takes part from the
// connection's first answers, never from a stranger's SACK: after a forged SACK (with the bit,
// in the window) A still sends standard SEND opcodes to a peer that does not take part.
TEST(HostileSr, ForgedSackDoesNotSwitchToUroceOpcodes) {
  PairOptions o = gbn_pair();
  o.config = [](transport::CoreConfig& c) { c.reliability = Reliability::Sr; };
  o.config_b = [](transport::CoreConfig& c) { c.reliability = Reliability::Gbn; };
  CorePair t(o);
  std::vector<uint8_t> ops;
  t.sim.link().set_filter([&ops](const wire::FlowAddr& f, std::vector<uint8_t>& b) {
    uint32_t psn;
    if (request_psn(f, b, psn)) ops.push_back(b[0]);
    return true;
  });
  wire::Packet sack;
  sack.bth.opcode = wire::Opcode::UROCE_SACK;
  sack.bth.dest_qp = t.a.qp->qpn().value();
  sack.bth.psn = t.a.qp->comp.una - 1;
  sack.bth.sr = true;
  sack.aeth = wire::Aeth::ack(0);
  uint8_t bits[wire::kSackLen] = {};
  sack.payload = bits;
  t.inject(t.a, t.b, sack);
  std::vector<uint8_t> src(512), rb(512, 0);
  fill_pattern(src.data(), src.size(), 8);
  auto ms = t.reg(t.a, src.data(), src.size());
  auto mr = t.reg(t.b, rb.data(), rb.size());
  Sge r{uint64_t(rb.data()), 512, mr.lkey};
  ASSERT_TRUE(t.recv(t.b, {1, {&r, 1}}));
  ASSERT_TRUE(post(t, 1, WrOpcode::Send, src.data(), 512, ms.lkey));
  EXPECT_EQ(t.one_wc(t.a.scq).status, WcStatus::Success);
  EXPECT_EQ(ops, std::vector<uint8_t>{uint8_t(wire::Opcode::RC_SEND_ONLY)});
  EXPECT_EQ(rb, src);
}

// A peer that answers nothing is probed with backing off intervals, like TCP's tail-loss probe
// and retransmission timer: one unanswered SEND costs a handful of packets over the QP's
// timeout and retries, not a probe every few hundred microseconds.
TEST(HostileSr, SilentPeerIsProbedWithBackoff) {
  PairOptions o = sr_pair();
  o.retry_cnt = 7;
  CorePair t(o);
  uint32_t sent = 0;
  t.sim.link().set_filter([&sent](const wire::FlowAddr& f, std::vector<uint8_t>& b) {
    uint32_t psn;
    if (request_psn(f, b, psn)) ++sent;
    return false;
  });
  std::vector<uint8_t> src(512);
  auto ms = t.reg(t.a, src.data(), src.size());
  ASSERT_TRUE(post(t, 1, WrOpcode::Send, src.data(), 512, ms.lkey));
  Wc w = t.one_wc(t.a.scq, 20'000'000'000ull);
  EXPECT_EQ(w.status, WcStatus::RetryExcErr);
  // Timeout 14 is 67.1 ms; probes from 0.5 ms (no round trip measured), doubling: at 0.5,
  // 1.5, 3.5, 7.5, 15.5, 31.5 and 63.5 ms, then the timeout at 67.1 (a resend), one more
  // probe 64 ms later, and from then on the timeout alone: 7 more times, the last RETRY_EXC.
  const auto& c = t.a.pc->counters();
  EXPECT_EQ(c.sr_probes, 8u);
  EXPECT_EQ(c.retransmit_timeouts, 8u);
  EXPECT_EQ(sent, 1u + 8u + 7u) << "before: 1,080 packets, a probe every 0.5 ms";
}

// CE marks count only on requests inside the responder's PSN window: a stale or far-ahead
// request (a stranger's, or a packet from long ago) makes the QP send no CNP.
TEST(HostileSr, CeMarkOnAStaleRequestSendsNoCnp) {
  CorePair t(gbn_pair());
  uint8_t junk[16] = {};
  wire::Ipv4Fields ce;
  ce.tos = 0x03;
  for (uint32_t ahead : {0x400000u, 0xc00000u}) {
    wire::Packet p = forged(t, wire::Opcode::RC_SEND_ONLY, ahead, junk);
    p.bth.sr = false;
    inject_packet(*t.b.pc, t.a.qp->flow, p, t.sim.now(), ce);
  }
  EXPECT_EQ(t.b.pc->counters().tx_cnps, 0u);
  EXPECT_EQ(t.b.pc->counters().rx_ce_marked, 0u);
  // A marked duplicate of the last request is inside the window: it counts.
  wire::Packet dup = forged(t, wire::Opcode::RC_SEND_ONLY, 0, junk);
  dup.bth.psn = t.b.qp->resp.epsn - 1;
  dup.bth.sr = false;
  inject_packet(*t.b.pc, t.a.qp->flow, dup, t.sim.now(), ce);
  EXPECT_EQ(t.b.pc->counters().rx_ce_marked, 1u);
  EXPECT_EQ(t.b.pc->counters().tx_cnps, 1u);
}
