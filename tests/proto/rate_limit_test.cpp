// Per-QP rate limits (packet pacing): exact spacing in virtual time from 10 Mb/s to 10 Gb/s,
// the lower of the limit and congestion control's rate, bursts, datagrams, and bad values.
#include <gtest/gtest.h>

#include <cmath>

#include "../common/core_pair.hpp"
#include "transport/bringup.hpp"

using namespace uroce;
using namespace uroce::test;

namespace {

// A 16 KiB WRITE at MTU 1024 is 16 packets: 1056 bytes on the wire for the first (BTH, RETH,
// payload, ICRC), 1040 for each of the others.
constexpr uint32_t kFirst = 1056, kOther = 1040, kPackets = 16;

// The nanoseconds a pacer books for that WRITE at rate_bps: each packet its bytes' time.
uint64_t booked_ns(double rate_bps) {
  auto ns = [&](uint32_t b) { return uint64_t(double(b) * 8e9 / rate_bps + 0.5); };
  return ns(kFirst) + (kPackets - 1) * ns(kOther);
}

struct Paced {
  explicit Paced(std::function<void(transport::CoreConfig&)> extra = {}) : t(options(std::move(extra))) {
    src.assign(16 * 1024, 0x5a);
    dst.assign(16 * 1024, 0);
    auto ms = t.reg(t.a, src.data(), src.size());
    auto md = t.reg(t.b, dst.data(), dst.size());
    sge = Sge{uint64_t(src.data()), uint32_t(src.size()), ms.lkey};
    wr.wr_id = 1;
    wr.opcode = WrOpcode::RdmaWrite;
    wr.sg_list = {&sge, 1};
    wr.remote_addr = uint64_t(dst.data());
    wr.rkey = md.rkey;
    wr.send_flags = kSendSignaled;
  }
  static PairOptions options(std::function<void(transport::CoreConfig&)> extra) {
    PairOptions o;
    o.config = [extra](transport::CoreConfig& c) {
      c.pace_slack_ns = 0;  // exact spacing
      if (extra) extra(c);
    };
    return o;
  }
  // One WRITE after an idle time; what the pacer booked past its start.
  uint64_t timed_write() {
    t.sim.run_until([] { return false; }, 50'000'000'000ull);  // idle long enough for any burst to refill
    const uint64_t started = t.sim.now();
    EXPECT_TRUE(t.send(t.a, wr));
    EXPECT_EQ(t.one_wc(t.a.scq, 100'000'000'000ull).status, WcStatus::Success);
    EXPECT_EQ(dst, src);
    std::fill(dst.begin(), dst.end(), 0);
    return t.a.qp->pacer.free_at() - started;
  }
  CorePair t;
  std::vector<uint8_t> src, dst;
  Sge sge;
  SendWr wr;
};

}  // namespace

TEST(RateLimit, PacesExactlyFrom10MbpsTo10Gbps) {
  Paced p;
  EXPECT_FALSE(p.t.a.qp->req.paced);  // no congestion control, no limit: not paced
  for (uint32_t kbps : {10'000u, 100'000u, 1'000'000u, 10'000'000u}) {
    SCOPED_TRACE(kbps);
    ASSERT_TRUE(p.t.a.pc->set_rate_limit(*p.t.a.qp, RateLimit{kbps}));
    EXPECT_TRUE(p.t.a.qp->req.paced);
    const uint64_t want = booked_ns(double(kbps) * 1000);
    EXPECT_EQ(p.timed_write(), want);
    // The rate the wire saw: every byte of the WRITE in the time the pacer spaced it over.
    const double bps = double(kFirst + (kPackets - 1) * kOther) * 8e9 / double(want);
    EXPECT_NEAR(bps / (double(kbps) * 1000), 1.0, 1e-3);
  }
  ASSERT_TRUE(p.t.a.pc->set_rate_limit(*p.t.a.qp, RateLimit{0}));  // lifted
  EXPECT_FALSE(p.t.a.qp->req.paced);
}

TEST(RateLimit, TheLowerOfTheLimitAndDcqcnWins) {
  Paced p([](transport::CoreConfig& c) {
    c.cc = cc::Algo::Dcqcn;
    c.dcqcn = cc::DcqcnParams::paper(8e9);
  });
  ASSERT_TRUE(p.t.a.qp->rate);
  EXPECT_EQ(p.timed_write(), booked_ns(8e9));  // DCQCN's line rate alone
  ASSERT_TRUE(p.t.a.pc->set_rate_limit(*p.t.a.qp, RateLimit{6'000'000}));
  EXPECT_EQ(p.timed_write(), booked_ns(6e9));  // the limit is lower
  wire::Packet cnp;
  cnp.bth.opcode = wire::Opcode::CNP;
  cnp.bth.dest_qp = p.t.a.qp->qpn().value();
  cnp.bth.becn = true;
  const uint8_t reserved[16] = {};
  cnp.payload = reserved;
  inject_packet(*p.t.a.pc, p.t.b.qp->flow, cnp, p.t.sim.now());
  ASSERT_EQ(p.t.a.qp->rate->rate_bps(), 4e9);
  // DCQCN's 4 Gb/s is now lower; the rate it then recovers to over the WRITE may pass the
  // limit only up to it.
  const uint64_t ns = p.timed_write();
  EXPECT_LE(ns, booked_ns(4e9));
  EXPECT_GE(ns, booked_ns(6e9));
}

TEST(RateLimit, AFullBucketLetsItsBurstLeaveAtOnce) {
  Paced p;
  // 1 Gb/s: a byte is 8 ns; a burst of 4 packets' bytes is credit for 4 x 1040 x 8 ns.
  const uint32_t burst = 4 * kOther;
  ASSERT_TRUE(p.t.a.pc->set_rate_limit(*p.t.a.qp, RateLimit{1'000'000, burst, 1040}));
  EXPECT_EQ(p.timed_write(), booked_ns(1e9) - uint64_t(burst) * 8);
  // Back to back, the bucket is empty: the next WRITE right away gets no credit.
  const uint64_t started = p.t.sim.now();
  ASSERT_TRUE(p.t.send(p.t.a, p.wr));
  EXPECT_EQ(p.t.one_wc(p.t.a.scq).status, WcStatus::Success);
  EXPECT_GE(p.t.a.qp->pacer.free_at() - started, booked_ns(1e9) - uint64_t(burst) * 8);
}

// A new limit counts from now: what the old one booked does not hold the QP back.
TEST(RateLimit, ANewLimitTakesEffectAtOnce) {
  Paced p;
  ASSERT_TRUE(p.t.a.pc->set_rate_limit(*p.t.a.qp, RateLimit{1}));  // 1 kb/s: 16 KiB books 133 s
  ASSERT_TRUE(p.t.send(p.t.a, p.wr));
  p.t.sim.run_until([] { return false; }, 10'000'000);  // the first packet leaves
  ASSERT_GT(p.t.a.qp->pacer.free_at(), p.t.sim.now() + 1'000'000'000);
  const uint64_t started = p.t.sim.now();
  ASSERT_TRUE(p.t.a.pc->set_rate_limit(*p.t.a.qp, RateLimit{10'000'000}));
  EXPECT_EQ(p.t.one_wc(p.t.a.scq).status, WcStatus::Success);
  EXPECT_LT(p.t.sim.now() - started, 1'000'000u);  // well under a millisecond at 10 Gb/s
  EXPECT_EQ(p.dst, p.src);
}

TEST(RateLimit, DatagramsArePacedToo) {
  sim::Sim sim(3, {});
  transport::CoreConfig cfg;
  cfg.pace_slack_ns = 0;
  auto& a = sim.add_core(kIpA, cfg);
  auto& b = sim.add_core(kIpB, cfg);
  auto pa = *a.alloc_pd();
  auto pb = *b.alloc_pd();
  auto* ca = *a.create_cq(64);
  auto* cb = *b.create_cq(64);
  auto* qa = *a.create_qp(pa, QpType::UD, ca, ca, QpCap{32, 1, 1, 1, 0}, true);
  auto* qb = *b.create_qp(pb, QpType::UD, cb, cb, QpCap{1, 32, 1, 1, 0}, true);
  ASSERT_TRUE(transport::activate_ud(a, *qa, 0x11, 0));
  ASSERT_TRUE(transport::activate_ud(b, *qb, 0x11, 0));
  std::vector<uint8_t> src(1000, 7), dst(32 * 1100);
  auto ms = *a.reg_mr(pa, src.data(), src.size(), kAccessLocalWrite);
  auto md = *b.reg_mr(pb, dst.data(), dst.size(), kAccessLocalWrite);
  for (uint32_t i = 0; i < 20; ++i) {
    Sge r{uint64_t(dst.data() + i * 1100), 1100, md.lkey.value()};
    RecvWr rw{i, {&r, 1}};
    ASSERT_TRUE(b.post_recv(*qb, {&rw, 1}));
  }
  ASSERT_TRUE(a.set_rate_limit(*qa, RateLimit{100'000}));  // 100 Mb/s: a byte is 80 ns
  Ah ah;
  ah.dgid = Gid::from_ipv4(kIpB);
  Sge s{uint64_t(src.data()), 1000, ms.lkey.value()};
  const uint64_t started = sim.now();
  for (uint32_t i = 0; i < 20; ++i) {
    SendWr w{i, WrOpcode::Send, 0, {&s, 1}};
    w.ah = &ah;
    w.remote_qpn = qb->qpn().value();
    w.remote_qkey = 0x11;
    ASSERT_TRUE(a.post_send(*qa, {&w, 1}));
    a.gather_datagrams(*qa, sim.now());
  }
  size_t got = 0;
  ASSERT_TRUE(sim.run_until([&] {
    Wc wc[8];
    for (int k; (k = cb->poll(wc)) > 0;) got += size_t(k);
    return got == 20;
  }, 1'000'000'000));
  // Each datagram is 1024 bytes to the pacer (BTH, DETH, payload, ICRC): 20 x 1024 x 80 ns.
  EXPECT_EQ(qa->pacer.free_at() - started, 20u * 1024 * 80);
  EXPECT_GE(sim.now() - started, 19u * 1024 * 80);  // the last left no earlier than its turn
}

TEST(RateLimit, BadValuesAreRefusedAndResetClearsIt) {
  CorePair t;
  auto& pc = *t.a.pc;
  EXPECT_EQ(pc.set_rate_limit(*t.a.qp, RateLimit{pc.limits().max_rate_kbps + 1}).error().code, EINVAL);
  EXPECT_EQ(pc.set_rate_limit(*t.a.qp, RateLimit{1000, pc.limits().max_rate_burst + 1}).error().code, EINVAL);
  EXPECT_FALSE(t.a.qp->req.paced);
  // Through modify_qp: at RTS->RTS, not at INIT->RTR; a bad rate leaves everything as it was.
  QpAttr at;
  at.rate_limit_kbps = 2'000;
  ASSERT_TRUE(pc.modify_qp(*t.a.qp, at, kQpRateLimit));
  EXPECT_EQ(t.a.qp->limit_bps, 2e6);
  at.rate_limit_kbps = pc.limits().max_rate_kbps + 1;
  at.timeout = 3;
  EXPECT_EQ(pc.modify_qp(*t.a.qp, at, kQpRateLimit | kQpTimeout).error().code, EINVAL);
  EXPECT_EQ(t.a.qp->limit_bps, 2e6);
  EXPECT_NE(t.a.qp->attr().timeout, 3);
  auto* q2 = *pc.create_qp(t.a.pd, QpType::RC, t.a.scq, t.a.rcq, QpCap{}, false);
  QpAttr init;
  init.qp_state = QpState::Init;
  init.port_num = 1;
  ASSERT_TRUE(pc.modify_qp(*q2, init, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags));
  QpAttr rtr = t.a.qp->attr();
  rtr.qp_state = QpState::Rtr;
  rtr.rate_limit_kbps = 1000;
  EXPECT_EQ(pc.modify_qp(*q2, rtr, kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic |
                                       kQpMinRnrTimer | kQpRateLimit)
                .error()
                .code,
            EINVAL);
  // An XRC target sends nothing to limit.
  const uint32_t x = *pc.create_xrcd();
  auto* tgt = *pc.create_xrc_tgt(x);
  EXPECT_EQ(pc.set_rate_limit(*tgt, RateLimit{1000}).error().code, EINVAL);
  // RESET clears the limit with the other attributes.
  QpAttr reset;
  reset.qp_state = QpState::Reset;
  ASSERT_TRUE(pc.modify_qp(*t.a.qp, reset, kQpState));
  EXPECT_EQ(t.a.qp->limit_bps, 0);
  EXPECT_FALSE(t.a.qp->req.paced);
}
