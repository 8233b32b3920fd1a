// Hostile packets against selective repeat with a stream in flight: a stranger's requests that
// land among the requester's own, conflicting copies, floods of one PSN, forged READ responses,
// and the genuine corner cases the defences must not stall (reordering, a device-wide choice
// facing a per-QP one). Each either keeps the connection byte-exact and alive, or costs no more
// than go-back-N's exposure: a forged packet on exactly the expected PSN.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>

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

PairOptions pair_of(bool sr) { return forge_pair(sr); }

// A pair for a stream of one-packet WRITEs: 64 source bytes at A, 64 destination bytes at B,
// and a payload for forgeries.
struct OnePacketWrites {
  CorePair t;
  std::vector<uint8_t> src = std::vector<uint8_t>(64), dst = std::vector<uint8_t>(64, 0),
                       junk = std::vector<uint8_t>(16, 0xf0);
  CorePair::Keys ms, md;
  explicit OnePacketWrites(bool sr)
      : t(pair_of(sr)), ms(t.reg(t.a, src.data(), src.size())), md(t.reg(t.b, dst.data(), dst.size())) {}
};

// Holds back the first send of request `psn` (delivered by hand later: reordering).
struct HeldBack {
  std::shared_ptr<std::vector<uint8_t>> bytes = std::make_shared<std::vector<uint8_t>>();
  std::shared_ptr<wire::FlowAddr> flow = std::make_shared<wire::FlowAddr>();
  sim::LossyLink::Filter filter(uint32_t psn) {
    return [b = bytes, f = flow, psn](const wire::FlowAddr& fl, std::vector<uint8_t>& x) {
      uint32_t got;
      if (request_psn(fl, x, got) && got == psn && b->empty()) {
        *b = x;
        *f = fl;
        return false;
      }
      return true;
    };
  }
  void deliver(CorePair& t) { t.b.pc->on_packet(*bytes, *flow, t.sim.now(), {}); }
};

}  // namespace

// A stranger's SEND held for PSN X is dropped when the peer's own X arrives in sequence (the
// one that arrives at the expected PSN is executed, as any RoCE stack does), so X is never left
// expected for the flood's next copy, which then finds X behind the expected PSN: a duplicate.
// With or without a fit in the message stream, every receive holds A's bytes and B stays up.
TEST(HostileSr, AConflictLeavesNoPsnOpenToTheSameForgery) {
  for (bool fits : {true, false}) {
    SCOPED_TRACE(fits ? "forged SEND_ONLY" : "forged SEND_MIDDLE");
    CorePair t(pair_of(true));
    std::vector<uint8_t> rb(768, 0), src(768), attack(fits ? 256 : 1024, 0xf0);  // a MIDDLE carries the MTU
    fill_pattern(src.data(), src.size(), 11);
    auto mr = t.reg(t.b, rb.data(), rb.size());
    auto ms = t.reg(t.a, src.data(), src.size());
    for (uint64_t i = 0; i < 3; ++i) {
      Sge r{uint64_t(rb.data() + i * 256), 256, mr.lkey};
      ASSERT_TRUE(t.recv(t.b, {i, {&r, 1}}));
    }
    const wire::Psn x = t.b.qp->resp.epsn + 2;
    wire::Packet plant = forged(t, fits ? wire::Opcode::RC_SEND_ONLY : wire::Opcode::RC_SEND_MIDDLE, 2, attack);
    t.inject(t.b, t.a, plant);
    for (uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(post(t, i, WrOpcode::Send, src.data() + i * 256, 256, ms.lkey));
    ASSERT_TRUE(t.sim.run_until([&] { return t.b.pc->counters().rx_sr_conflicts == 1; }, 1'000'000));
    EXPECT_NE(t.b.qp->resp.epsn, x) << "the peer's X was not executed when it conflicted";
    wire::Packet again = plant;  // the flood's next copy, resend bit and all
    again.bth.psn = x;
    again.bth.resent = true;
    t.inject(t.b, t.a, again);
    std::vector<Wc> sent, got;
    ASSERT_TRUE(t.wait_wc(t.a.scq, 3, sent));
    ASSERT_TRUE(t.wait_wc(t.b.rcq, 3, got));
    for (const Wc& w : sent) EXPECT_EQ(w.status, WcStatus::Success);
    EXPECT_EQ(rb, src);
    EXPECT_EQ(t.b.qp->state(), QpState::Rts);
  }
}

// A second, different request for a PSN held past a hole disputes it: neither copy is kept, no
// later copy is held for that PSN, and the SACK stops reporting it, so the requester sends its
// own again and that one is executed in its turn. Before, the stranger's second copy was held
// in place of the peer's, reported held, and executed when the hole filled: a SEND delivered the
// stranger's bytes, a WRITE MIDDLE (no key needed) completed SUCCESS with a stranger's KiB, a
// WRITE_ONLY with a bad key ended the connection.
TEST(HostileSr, AForgedCopyOfAHeldRequestNeverRunsInItsPlace) {
  enum Variant { Send, WriteMiddle, BadRkey };
  for (Variant v : {Send, WriteMiddle, BadRkey}) {
    SCOPED_TRACE(v == Send ? "SEND" : v == WriteMiddle ? "WRITE MIDDLE" : "WRITE_ONLY, bad rkey");
    CorePair t(pair_of(true));
    bool block = true;
    t.sim.link().set_filter(lose_while(block, kPsnA + 1));
    std::vector<uint8_t> src(8192), rb(1024, 0), dst(8192, 0), attack(1024, 0xab);
    fill_pattern(src.data(), src.size(), 12);
    auto ms = t.reg(t.a, src.data(), src.size());
    auto mr = t.reg(t.b, rb.data(), rb.size());
    auto md = t.reg(t.b, dst.data(), dst.size());
    uint32_t wqes = 1, x_ahead = 1;
    if (v == WriteMiddle) {
      ASSERT_TRUE(post(t, 1, WrOpcode::RdmaWrite, src.data(), 8192, ms.lkey, uint64_t(dst.data()), md.rkey));
      ASSERT_TRUE(t.sim.run_until([&] { return t.b.pc->counters().rx_sr_held == 6; }, 1'000'000));
      x_ahead = 3;  // the WRITE's packet +4
    } else {
      for (uint64_t i = 0; i < 4; ++i) {
        Sge r{uint64_t(rb.data() + i * 256), 256, mr.lkey};
        ASSERT_TRUE(t.recv(t.b, {i, {&r, 1}}));
      }
      for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(post(t, i, WrOpcode::Send, src.data() + i * 256, 256, ms.lkey));
      wqes = 4;
      ASSERT_TRUE(t.sim.run_until([&] { return t.b.pc->counters().rx_sr_held == 2; }, 1'000'000));
    }
    ASSERT_EQ(t.b.qp->resp.epsn, wire::Psn(kPsnA + 1));
    wire::Packet p = v == WriteMiddle ? forged(t, wire::Opcode::RC_WRITE_MIDDLE, x_ahead, attack)
                     : v == Send      ? forged(t, wire::Opcode::RC_SEND_ONLY, x_ahead, std::span(attack).first(256))
                                      : forged(t, wire::Opcode::RC_WRITE_ONLY, x_ahead, std::span(attack).first(16));
    if (v == BadRkey) p.reth = {0x1000, 0xdead, 16};
    t.inject(t.b, t.a, p);  // conflicts with the peer's held request: the PSN is disputed
    t.inject(t.b, t.a, p);  // not held in its place
    EXPECT_EQ(t.b.pc->counters().rx_sr_conflicts, 2u);
    block = false;
    std::vector<Wc> sent;
    ASSERT_TRUE(t.wait_wc(t.a.scq, wqes, sent));
    for (const Wc& w : sent) EXPECT_EQ(w.status, WcStatus::Success);
    if (v == WriteMiddle) {
      EXPECT_EQ(dst, src);
    } else if (v == Send) {
      EXPECT_EQ(0, std::memcmp(rb.data(), src.data(), 1024));
    }
    EXPECT_EQ(t.b.qp->state(), QpState::Rts);
  }
}

// A forged READ response past the one expected is placed, but the peer's own response for that
// PSN then differs from it: neither is believed and the PSN is asked for again, so the READ
// completes with the responder's bytes. One forged MIDDLE, or a blind sweep of one every 256
// PSNs; go-back-N takes only the expected response and is exact too.
TEST(HostileSr, AForgedReadResponseIsReplacedByThePeers) {
  for (bool blind : {false, true}) {
    for (bool sr : {false, true}) {
      SCOPED_TRACE(std::string(blind ? "blind sweep, " : "one packet, ") + (sr ? "selective repeat" : "go-back-N"));
      CorePair t(pair_of(sr));
      const uint32_t len = 65536;  // 64 responses at MTU 1024: PSNs 0x100..0x13f
      std::vector<uint8_t> mem(len), dst(len, 0), attack(1024, 0xab);
      fill_pattern(mem.data(), mem.size(), 13);
      auto mm = t.reg(t.b, mem.data(), mem.size());
      auto md = t.reg(t.a, dst.data(), dst.size());
      ASSERT_TRUE(post(t, 1, WrOpcode::RdmaRead, dst.data(), len, md.lkey, uint64_t(mem.data()), mm.rkey));
      ASSERT_TRUE(t.sim.run_until([&] { return t.a.qp->req.psn != wire::Psn(kPsnA); }, 1'000'000));
      wire::Packet r;
      r.bth.opcode = wire::Opcode::RC_READ_RESPONSE_MIDDLE;
      r.bth.dest_qp = t.a.qp->qpn().value();
      r.payload = attack;
      if (blind) {
        for (uint32_t k = 0; k < 65536; ++k) {
          r.bth.psn = wire::Psn(k * 256 + 7);  // lands once, on 0x107
          t.inject(t.a, t.b, r);
        }
      } else {
        r.bth.psn = wire::Psn(kPsnA + 8);
        t.inject(t.a, t.b, r);
      }
      Wc w = t.one_wc(t.a.scq);
      EXPECT_EQ(w.status, WcStatus::Success);
      EXPECT_EQ(dst, mem) << dump_counters(*t.a.pc);
      EXPECT_EQ(t.a.pc->counters().rx_sr_conflicts, sr ? 1u : 0u);
    }
  }
}

// The requester's first send of PSN 0 arrives after PSN 1 (reordering): B runs PSN 0, holds PSN
// 1 until a resend, and the requester, told by the next SACK that B waits for PSN 1, sends it
// again at once, although an older SACK reported it held. Before, that stale mark was never
// cleared and the QP stalled for its transport timeout (or for ever, with timeout 0).
TEST(HostileSr, AReorderedFirstSendDoesNotStall) {
  for (uint8_t timeout : {uint8_t(14), uint8_t(0)}) {
    for (bool sr : {false, true}) {
      SCOPED_TRACE(std::string(sr ? "selective repeat" : "go-back-N") + ", timeout " + std::to_string(timeout));
      PairOptions o = pair_of(sr);
      o.timeout = timeout;
      CorePair t(o);
      HeldBack late;
      t.sim.link().set_filter(late.filter(kPsnA));
      std::vector<uint8_t> src(128), dst(128, 0);
      fill_pattern(src.data(), src.size(), 14);
      auto ms = t.reg(t.a, src.data(), src.size());
      auto md = t.reg(t.b, dst.data(), dst.size());
      ASSERT_TRUE(post(t, 1, WrOpcode::RdmaWrite, src.data(), 64, ms.lkey, uint64_t(dst.data()), md.rkey));
      ASSERT_TRUE(post(t, 2, WrOpcode::RdmaWrite, src.data() + 64, 64, ms.lkey, uint64_t(dst.data() + 64), md.rkey));
      const auto& cb = t.b.pc->counters();
      ASSERT_TRUE(t.sim.run_until([&] { return cb.tx_sacks + cb.tx_naks_seq > 0; }, 1'000'000));
      late.deliver(t);
      const uint64_t t0 = t.sim.now();
      std::vector<Wc> wcs;
      ASSERT_TRUE(t.wait_wc(t.a.scq, 2, wcs));
      for (const Wc& w : wcs) EXPECT_EQ(w.status, WcStatus::Success);
      EXPECT_EQ(dst, src);
      EXPECT_LT(t.sim.now() - t0, 2'000'000u) << "stalled for the transport timeout";
      EXPECT_EQ(t.a.pc->counters().retransmit_timeouts, 0u);
    }
  }
}

// One forged request that lands among the 54 packets the requester has in flight (the one a
// blind sweep puts in the window) costs a selective-repeat stream no transport timeout.
TEST(HostileSr, OneForgedPacketInFlightDoesNotStallTheStream) {
  for (bool sr : {false, true}) {
    SCOPED_TRACE(sr ? "selective repeat" : "go-back-N");
    OnePacketWrites w(sr);
    auto& [t, src, dst, junk, ms, md] = w;
    for (int i = 0; i < 10; ++i)
      ASSERT_TRUE(post(t, i, WrOpcode::RdmaWrite, src.data(), 64, ms.lkey, uint64_t(dst.data()), md.rkey));
    std::vector<Wc> first;
    ASSERT_TRUE(t.wait_wc(t.a.scq, 10, first));
    for (int i = 0; i < 54; ++i)
      ASSERT_TRUE(post(t, 10 + i, WrOpcode::RdmaWrite, src.data(), 64, ms.lkey, uint64_t(dst.data()), md.rkey));
    const wire::Psn high = t.a.qp->req.high;
    ASSERT_TRUE(t.sim.run_until([&] { return t.a.qp->req.high != high; }, 1'000'000));
    wire::Packet p = forged(t, wire::Opcode::RC_SEND_ONLY, 20, junk);
    t.inject(t.b, t.a, p);
    const uint64_t t0 = t.sim.now();
    std::vector<Wc> rest;
    ASSERT_TRUE(t.wait_wc(t.a.scq, 54, rest));
    for (const Wc& w : rest) EXPECT_EQ(w.status, WcStatus::Success);
    EXPECT_LT(t.sim.now() - t0, 2'000'000u);
    EXPECT_EQ(t.a.pc->counters().retransmit_timeouts, 0u);
  }
}

// A request longer than any turn could take (the UDP link delivers up to 64 KiB) is not held:
// 255 forged 60,000-byte MIDDLEs leave no copies behind, and the peer's traffic goes on.
TEST(HostileSr, HeldCopiesAreBoundedByTheMtu) {
  CorePair t(pair_of(true));
  std::vector<uint8_t> big(60000, 0xcd);
  for (uint32_t k = 1; k < 256; ++k) {
    wire::Packet p = forged(t, wire::Opcode::RC_SEND_MIDDLE, k, big);
    t.inject(t.b, t.a, p);
  }
  EXPECT_EQ(t.b.pc->counters().rx_sr_unfit, 255u);
  EXPECT_EQ(t.b.qp->resp.held, 0u);
  std::vector<uint8_t> src(64), dst(64);
  auto ms = t.reg(t.a, src.data(), src.size());
  auto md = t.reg(t.b, dst.data(), dst.size());
  for (int i = 0; i < 200; ++i)
    ASSERT_TRUE(post(t, i, WrOpcode::RdmaWrite, src.data(), 16, ms.lkey, uint64_t(dst.data()), md.rkey));
  std::vector<Wc> wcs;
  ASSERT_TRUE(t.wait_wc(t.a.scq, 200, wcs));
  for (const Wc& w : wcs) EXPECT_EQ(w.status, WcStatus::Success);
}

// A QP that chose selective repeat for itself (ECE, ConnectOptions, set_reliability) facing a
// peer whose device chose it (UROCE_RELIABILITY=sr) sends uroce's SEND opcodes from its first
// request; the peer takes them, with the selective-repeat bit, as that request's announcement.
TEST(HostileSr, APerQpChoiceFacingADeviceWideChoiceDeliversSends) {
  PairOptions o = pair_of(false);
  o.timeout = 8;
  o.config = [](transport::CoreConfig& c) { c.reliability = Reliability::Sr; };
  o.reliability_a = Reliability::Sr;
  CorePair t(o);
  std::vector<uint8_t> src(512), rb(512, 0);
  fill_pattern(src.data(), src.size(), 16);
  auto ms = t.reg(t.a, src.data(), src.size());
  auto mr = t.reg(t.b, rb.data(), rb.size());
  Sge r{uint64_t(rb.data()), 512, mr.lkey};
  ASSERT_TRUE(t.recv(t.b, {1, {&r, 1}}));
  ASSERT_TRUE(post(t, 1, WrOpcode::Send, src.data(), 512, ms.lkey));
  Wc w = t.one_wc(t.a.scq);
  EXPECT_EQ(w.status, WcStatus::Success) << dump_counters(*t.b.pc);
  EXPECT_EQ(rb, src);
  EXPECT_EQ(t.b.pc->counters().rx_bad_opcode, 0u);
}

// An exact copy of a held atomic (the network duplicated it) is a duplicate, not a conflict, and
// the atomic runs once.
TEST(HostileSr, ACopyOfAHeldAtomicIsADuplicate) {
  CorePair t(pair_of(true));
  bool block = true;
  auto copy = std::make_shared<std::vector<uint8_t>>();
  auto flow = std::make_shared<wire::FlowAddr>();
  t.sim.link().set_filter([&block, copy, flow](const wire::FlowAddr& f, std::vector<uint8_t>& b) {
    uint32_t psn;
    if (!request_psn(f, b, psn)) return true;
    if (psn == kPsnA + 2 && copy->empty()) {
      *copy = b;
      *flow = f;
    }
    return !(block && psn == kPsnA + 1);
  });
  alignas(8) uint64_t ctr = 5, out = 0;
  std::vector<uint8_t> src(64), dst(64);
  auto ms = t.reg(t.a, src.data(), src.size());
  auto mo = t.reg(t.a, &out, 8);
  auto mc = t.reg(t.b, &ctr, 8);
  auto md = t.reg(t.b, dst.data(), dst.size());
  for (int i = 0; i < 2; ++i)
    ASSERT_TRUE(post(t, i, WrOpcode::RdmaWrite, src.data(), 64, ms.lkey, uint64_t(dst.data()), md.rkey));
  Sge s{uint64_t(&out), 8, mo.lkey};
  SendWr w{9, WrOpcode::AtomicFetchAdd, kSendSignaled, {&s, 1}};
  w.remote_addr = uint64_t(&ctr);
  w.rkey = mc.rkey;
  w.compare_add = 1;
  ASSERT_TRUE(t.send(t.a, w));
  ASSERT_TRUE(t.sim.run_until([&] { return t.b.pc->counters().rx_sr_held == 1; }, 1'000'000));
  ASSERT_FALSE(copy->empty());
  for (int i = 0; i < 8; ++i) t.b.pc->on_packet(*copy, *flow, t.sim.now(), {});
  EXPECT_EQ(t.b.pc->counters().rx_sr_conflicts, 0u);
  block = false;
  std::vector<Wc> wcs;
  ASSERT_TRUE(t.wait_wc(t.a.scq, 3, wcs));
  EXPECT_EQ(ctr, 6u);
  EXPECT_EQ(out, 5u);
}

// A blind flood of ONE PSN (a forged WRITE_ONLY with a bad key, resend bit set, every 1 us)
// while the peer streams 500 one-packet WRITEs through it, in batches of 10, kills neither mode:
// the copies that land ahead conflict with the peer's own or are dropped in their turn, never
// NAKed.
TEST(HostileSr, ABlindFloodOfOnePsnKillsNeitherMode) {
  for (bool sr : {false, true}) {
    SCOPED_TRACE(sr ? "selective repeat" : "go-back-N");
    OnePacketWrites w(sr);
    auto& [t, src, dst, junk, ms, md] = w;
    const wire::Psn target(kPsnA + 305);
    uint64_t next_inject = 0, injected = 0;
    auto flood = [&] {
      if (t.sim.now() < next_inject) return;
      next_inject = t.sim.now() + 1'000;
      wire::Packet p;
      p.bth.opcode = wire::Opcode::RC_WRITE_ONLY;
      p.bth.dest_qp = t.b.qp->qpn().value();
      p.bth.psn = target;
      p.bth.sr = true;
      p.bth.resent = true;
      p.reth = {0x1000, 0xdead, 16};
      p.payload = junk;
      t.inject(t.b, t.a, p);
      ++injected;
    };
    uint32_t ok = 0, bad = 0;
    for (int batch = 0; batch < 50 && bad == 0; ++batch) {
      for (int i = 0; i < 10; ++i)
        ASSERT_TRUE(post(t, batch * 10 + i, WrOpcode::RdmaWrite, src.data(), 64, ms.lkey, uint64_t(dst.data()), md.rkey));
      std::vector<Wc> wcs;
      t.sim.run_until(
          [&] {
            flood();
            Wc wc[16];
            int k;
            while ((k = t.a.scq->poll(wc)) > 0) wcs.insert(wcs.end(), wc, wc + k);
            return wcs.size() >= 10;
          },
          5'000'000'000ull);
      for (const Wc& w : wcs) (w.status == WcStatus::Success ? ok : bad)++;
      if (wcs.size() < 10) ++bad;
    }
    EXPECT_EQ(ok, 500u) << injected << " forged; " << dump_counters(*t.b.pc);
    EXPECT_EQ(bad, 0u);
    EXPECT_GT(injected, 100u) << "the flood sent too little to test anything";
    EXPECT_EQ(t.b.qp->state(), QpState::Rts);
  }
}
