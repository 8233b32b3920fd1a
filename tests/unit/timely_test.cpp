// TIMELY's rate against a sequence of RTTs worked out by hand: every branch of the rule once.
#include <gtest/gtest.h>

#include "cc/timely.hpp"

using namespace uroce::cc;

TEST(Timely, EveryBranchFollowsTheHandComputedRates) {
  Timely t(TimelyParams::paper(40e9));
  const uint64_t us = 1000;
  t.on_rtt(100 * us, 0);  // the first sample only sets the base
  EXPECT_EQ(t.rate_bps(), 40e9);
  t.on_rtt(600 * us, 1);  // over T_high: cut by beta (1 - T_high / rtt)
  const double after_high = 40e9 * (1 - 0.8 * (1 - 500.0 / 600));
  EXPECT_NEAR(t.rate_bps(), after_high, 1);
  EXPECT_DOUBLE_EQ(t.gradient(), 0.875 * 500'000 / 20'000);  // 21.875
  t.on_rtt(40 * us, 2);  // under T_low: + delta
  EXPECT_NEAR(t.rate_bps(), after_high + 10e6, 1);
  // Between the two with a steep rise (smoothed difference 85585.9375 ns, gradient 4.28):
  // the cut would go below zero, so the rate stops at its floor; a small rise (gradient 0.097)
  // cuts the floor again and it stays there.
  t.on_rtt(200 * us, 3);
  EXPECT_EQ(t.rate_bps(), 10e6);
  t.on_rtt(190 * us, 4);
  EXPECT_EQ(t.rate_bps(), 10e6);
  // Falling RTTs: + delta each, and 5 delta from the fifth in a row.
  const uint64_t falling[] = {180, 170, 160, 150, 150};
  const double want[] = {20e6, 30e6, 40e6, 50e6, 100e6};
  for (int i = 0; i < 5; ++i) {
    t.on_rtt(falling[i] * us, 5 + i);
    EXPECT_NEAR(t.rate_bps(), want[i], 1e-3) << "sample " << i;
    EXPECT_LE(t.gradient(), 0);
  }
  // A rise of 1 us: smoothed difference 718.7955789268017 ns, gradient 0.0359.
  t.on_rtt(151 * us, 10);
  EXPECT_NEAR(t.gradient(), 718.7955789268017 / 20'000, 1e-12);
  EXPECT_NEAR(t.rate_bps(), 100e6 * (1 - 0.8 * 718.7955789268017 / 20'000), 1e-3);
  // And the count of calm samples started again: the next fall adds one delta.
  const double before = t.rate_bps();
  t.on_rtt(140 * us, 11);
  EXPECT_NEAR(t.rate_bps(), before + 10e6, 1e-3);
}

TEST(Timely, NeverAboveTheLineRate) {
  Timely t(TimelyParams::paper(10e9));
  for (uint64_t i = 0; i < 100; ++i) t.on_rtt(10'000, i);  // always under T_low
  EXPECT_EQ(t.rate_bps(), 10e9);
}
