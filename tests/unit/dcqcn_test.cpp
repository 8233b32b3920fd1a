// DCQCN's three parts against trajectories worked out by hand from the algorithm's rules.
#include <gtest/gtest.h>

#include <cmath>

#include "cc/dcqcn.hpp"
#include "cc/pacer.hpp"

using namespace uroce::cc;

namespace {

constexpr double G = 1e9;
constexpr uint64_t us = 1000;

// A small set where every stage shows within a few events: F = 1, T = K = 10 us, B = 1000 bytes.
DcqcnParams small() {
  DcqcnParams p;
  p.line_rate_bps = 10 * G;
  p.min_rate_bps = 1 * G;
  p.g = 1.0 / 16;
  p.alpha_timer_ns = 10 * us;
  p.increase_timer_ns = 10 * us;
  p.byte_counter = 1000;
  p.fast_recovery_steps = 1;
  p.ai_bps = 0.1 * G;
  p.hai_bps = 1 * G;
  return p;
}

void expect_rates(const DcqcnRp& rp, double rc_gbps, double rt_gbps, const char* when) {
  EXPECT_NEAR(rp.rate_bps(), rc_gbps * G, 1) << when;
  EXPECT_NEAR(rp.target_bps(), rt_gbps * G, 1) << when;
}

}  // namespace

TEST(DcqcnRp, EveryStageFollowsTheHandComputedTrajectory) {
  DcqcnRp rp(small());
  expect_rates(rp, 10, 10, "start: line rate");
  rp.on_cnp(0);  // RT = 10, RC = 10 (1 - 1/2), alpha = 15/16 + 1/16 = 1
  expect_rates(rp, 5, 10, "first CNP");
  EXPECT_DOUBLE_EQ(rp.alpha(), 1.0);
  rp.on_cnp(0);
  expect_rates(rp, 2.5, 5, "second CNP");
  rp.on_sent(1000, 1 * us);  // byte event 1, timer 0: fast recovery, RC = (5 + 2.5) / 2
  expect_rates(rp, 3.75, 5, "fast recovery");
  rp.on_sent(1000, 2 * us);  // byte event 2 > F: additive, RT + 0.1, RC = (5.1 + 3.75) / 2
  expect_rates(rp, 4.425, 5.1, "additive (bytes)");
  rp.advance(10 * us);  // timer event 1 (bytes 2): still additive; alpha decays once
  expect_rates(rp, 4.8125, 5.2, "additive (timer)");
  EXPECT_DOUBLE_EQ(rp.alpha(), 15.0 / 16);
  rp.on_sent(1000, 11 * us);  // bytes 3, timer 1
  expect_rates(rp, 5.05625, 5.3, "additive (bytes 3)");
  rp.advance(20 * us);  // timer 2, bytes 3: both past F, hyper by (2 - 1) * 1
  expect_rates(rp, 5.678125, 6.3, "hyper");
  rp.on_sent(2000, 21 * us);  // two byte events, each hyper by (min(2, n) - 1) * 1
  expect_rates(rp, 7.39453125, 8.3, "hyper twice");
  EXPECT_EQ(rp.byte_events(), 5u);
  rp.advance(30 * us);  // timer 3: hyper by 2, the target capped at the line rate
  expect_rates(rp, 8.697265625, 10, "hyper, capped");
  EXPECT_DOUBLE_EQ(rp.alpha(), std::pow(15.0 / 16, 3));
  rp.on_cnp(30 * us);  // RT = RC, RC = RC (1 - alpha / 2), alpha = 15/16 alpha + 1/16
  const double a = std::pow(15.0 / 16, 3);
  expect_rates(rp, 8.697265625 * (1 - a / 2), 8.697265625, "third CNP");
  EXPECT_DOUBLE_EQ(rp.alpha(), 15.0 / 16 * a + 1.0 / 16);
  EXPECT_EQ(rp.timer_events(), 0u);
  EXPECT_EQ(rp.byte_events(), 0u);
  EXPECT_EQ(rp.next_timer(), 40 * us);
}

// The paper's set at 40 Gb/s: a CNP halves the rate (alpha starts at 1), five timer steps of
// fast recovery halve the distance to the target each, then the target grows by R_AI.
TEST(DcqcnRp, ThePapersSetRecoversFromTwoCnpsByTheTimer) {
  const DcqcnParams p = DcqcnParams::paper(40 * G);
  DcqcnRp rp(p);
  rp.on_cnp(0);
  rp.on_cnp(10 * us);  // before any timer: RT = 20, RC = 10
  expect_rates(rp, 10, 20, "two CNPs");
  const double fr[] = {15, 17.5, 18.75, 19.375, 19.6875};
  for (int i = 0; i < 5; ++i) {
    rp.advance(10 * us + (i + 1) * 55 * us);
    expect_rates(rp, fr[i], 20, "fast recovery");
  }
  rp.advance(10 * us + 6 * 55 * us);
  expect_rates(rp, (20.04 + 19.6875) / 2, 20.04, "additive");
  EXPECT_DOUBLE_EQ(rp.alpha(), std::pow(255.0 / 256, 6));
}

TEST(DcqcnRp, AlphaDecaysOnlyAfterKWithoutACnp) {
  DcqcnParams p = small();
  DcqcnRp rp(p);
  double want = 1;
  for (uint64_t t = 0; t < 100 * us; t += 5 * us) {  // a CNP every 5 us, K = 10 us
    rp.on_cnp(t);
    want = (1 - p.g) * want + p.g;
    EXPECT_DOUBLE_EQ(rp.alpha(), want) << "at " << t;
  }
  EXPECT_EQ(rp.rate_bps(), p.min_rate_bps);  // and the rate stops at its floor
  rp.advance(95 * us + 10 * us * 3);
  EXPECT_DOUBLE_EQ(rp.alpha(), want * std::pow(1 - p.g, 3));
}

TEST(DcqcnRp, ByteCounterCountsAcrossSendsAndRestartsAtACnp) {
  DcqcnRp rp(small());
  rp.on_cnp(0);
  rp.on_sent(999, 1 * us);
  EXPECT_EQ(rp.byte_events(), 0u);
  rp.on_sent(1, 2 * us);
  EXPECT_EQ(rp.byte_events(), 1u);
  rp.on_sent(999, 3 * us);
  rp.on_cnp(4 * us);
  rp.on_sent(1, 5 * us);  // the 999 before the CNP do not count
  EXPECT_EQ(rp.byte_events(), 0u);
}

// The reaction point starts at the first CNP: however long the QP sent before, alpha is 1 then.
TEST(DcqcnRp, TheFirstCnpFindsAlphaAtOne) {
  DcqcnRp rp(DcqcnParams::paper(40 * G));
  rp.on_sent(1ull << 30, 1'000'000'000);
  EXPECT_EQ(rp.next_timer(), UINT64_MAX);
  rp.on_cnp(2'000'000'000);
  EXPECT_EQ(rp.rate_bps(), 20 * G);
  EXPECT_DOUBLE_EQ(rp.alpha(), 1.0);
  EXPECT_EQ(rp.next_timer(), 2'000'000'000 + 55 * us);
}

// An hour without CNPs: back at the line rate, alpha decayed by one power, in bounded work
// (the increases stop once both rates reach the line rate), and the timers' phase kept.
TEST(DcqcnRp, ALongIdleEndsAtTheLineRate) {
  const DcqcnParams p = DcqcnParams::paper(100 * G);
  DcqcnRp rp(p);
  rp.on_cnp(0);
  rp.on_cnp(1 * us);
  const uint64_t hour = 3'600'000'000'000ull;
  rp.advance(hour);
  EXPECT_EQ(rp.rate_bps(), 100 * G);
  EXPECT_EQ(rp.target_bps(), 100 * G);
  EXPECT_LT(rp.timer_events(), 5000u);  // AI from 50 to 100 Gb/s: 1250 steps of 40 Mb/s
  EXPECT_DOUBLE_EQ(rp.alpha(), std::pow(255.0 / 256, double((hour - 1 * us) / (55 * us))));
  EXPECT_EQ(rp.next_timer() % (55 * us), (1 * us) % (55 * us));
  EXPECT_GT(rp.next_timer(), hour);
}

TEST(DcqcnNp, OneCnpPerQpPerInterval) {
  DcqcnNp np(50 * us);
  EXPECT_TRUE(np.on_ce(0));
  EXPECT_FALSE(np.on_ce(10 * us));
  EXPECT_FALSE(np.on_ce(50 * us - 1));
  EXPECT_TRUE(np.on_ce(50 * us));
  EXPECT_TRUE(np.on_ce(120 * us));
  EXPECT_FALSE(np.on_ce(130 * us));
  EXPECT_EQ(np.cnps(), 3u);
}

TEST(DcqcnCp, MarkingGrowsFromKminToPmaxAtKmaxThenAll) {
  const DcqcnParams p = DcqcnParams::paper(40 * G);
  EXPECT_EQ(p.kmin_bytes, 5000u);
  EXPECT_EQ(p.kmax_bytes, 200000u);
  EXPECT_EQ(mark_probability(p, 0), 0);
  EXPECT_EQ(mark_probability(p, 5000), 0);
  EXPECT_DOUBLE_EQ(mark_probability(p, 102500), 0.005);
  EXPECT_DOUBLE_EQ(mark_probability(p, 200000), 0.01);
  EXPECT_EQ(mark_probability(p, 200001), 1);
  const DcqcnParams q = DcqcnParams::paper(100 * G);  // thresholds scale with the line rate
  EXPECT_EQ(q.kmin_bytes, 12500u);
  EXPECT_EQ(q.kmax_bytes, 500000u);
}

TEST(DcqcnParams, NamedSets) {
  DcqcnParams p;
  p = DcqcnParams::of(*uroce::parse_dcqcn_set("dcqcn_paper"), 40 * G);
  EXPECT_EQ(p.cnp_interval_ns, 50 * us);
  EXPECT_EQ(p.alpha_timer_ns, 55 * us);
  EXPECT_EQ(p.increase_timer_ns, 55 * us);
  EXPECT_EQ(p.byte_counter, 10u << 20);
  EXPECT_EQ(p.fast_recovery_steps, 5u);
  EXPECT_DOUBLE_EQ(p.g, 1.0 / 256);
  p = DcqcnParams::of(*uroce::parse_dcqcn_set("mellanox"), 100 * G);
  EXPECT_EQ(p.fast_recovery_steps, 1u);
  EXPECT_EQ(p.cnp_interval_ns, 4 * us);
  EXPECT_DOUBLE_EQ(p.line_rate_bps, 100 * G);
  EXPECT_FALSE(uroce::parse_dcqcn_set("dcqcn"));
}

TEST(Pacer, PacketsLeaveAtTheRateOneAfterAnother) {
  Pacer pc;
  EXPECT_EQ(pc.book(1000, 8 * G, 0), 0u);  // 8 Gb/s: a byte per nanosecond
  EXPECT_EQ(pc.book(1000, 8 * G, 0), 1000u);
  EXPECT_EQ(pc.book(500, 8 * G, 10), 2000u);
  EXPECT_EQ(pc.free_at(), 2500u);
  EXPECT_EQ(pc.book(1000, 8 * G, 10'000), 10'000u);  // idle time earns no burst
  EXPECT_EQ(pc.book(1000, 4 * G, 10'000), 11'000u);
  EXPECT_EQ(pc.free_at(), 13'000u);
}
