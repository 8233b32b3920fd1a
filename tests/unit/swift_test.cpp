// Swift's window against round trips worked out by hand: the start, growth below the target,
// the proportional and the capped decrease, once per round trip, flow-based scaling, pacing
// below one packet, and the bounds.
#include <gtest/gtest.h>

#include "cc/swift.hpp"

using namespace uroce::cc;

namespace {

// 100 Gb/s, 4 KiB packets, a 5 us fabric: one bandwidth-delay product is
// 100e9 * 5e-6 / 32768 = 15.2587890625 packets.
SwiftParams fabric() {
  SwiftParams p = SwiftParams::for_line_rate(100e9);
  p.mss_bytes = 4096;
  p.base_rtt_ns = 5'000;
  return p;
}

constexpr double kBdp = 15.2587890625;

}  // namespace

TEST(Swift, StartsWithOneBandwidthDelayProductAtTheLineRate) {
  Swift s(fabric());
  EXPECT_DOUBLE_EQ(s.cwnd(), kBdp);
  EXPECT_EQ(s.window_pkts(), 15u);
  EXPECT_EQ(s.rate_bps(), 100e9);
  // Flow-based scaling at 15.26 packets: 13062.2 x (1/sqrt(15.26) - 0.1) = 2037 ns over
  // the base (5 us) and the queue's allowance (10 us).
  EXPECT_NEAR(double(s.target_ns()), 17'037, 1);
}

TEST(Swift, GrowsBelowTheTargetAndCutsInProportionAboveIt) {
  Swift s(fabric());
  s.on_rtt(10'000, 1'000);  // under the target: one packet more
  EXPECT_DOUBLE_EQ(s.cwnd(), kBdp + 1);
  EXPECT_EQ(s.window_pkts(), 16u);
  EXPECT_NEAR(double(s.target_ns()), 16'933, 1);
  // 20 us against 16933 ns: cut by 0.8 x 3067 / 20000 = 12.268 %.
  s.on_rtt(20'000, 30'000);
  EXPECT_NEAR(s.cwnd(), 16.2587890625 * (1 - 0.8 * 3067.0 / 20'000), 1e-3);  // 14.2642
  EXPECT_EQ(s.window_pkts(), 14u);
  EXPECT_EQ(s.rate_bps(), 100e9);  // a window of packets is clocked by ACKs, not paced
}

TEST(Swift, CutsAtMostByHalfAndOncePerRoundTrip) {
  Swift s(fabric());
  s.on_rtt(1'000'000, 1'000'000);  // 1 ms: 0.8 x 0.98 is past max_mdf, so half
  EXPECT_DOUBLE_EQ(s.cwnd(), kBdp / 2);
  s.on_rtt(1'000'000, 1'500'000);  // half a round trip later: no second cut
  EXPECT_DOUBLE_EQ(s.cwnd(), kBdp / 2);
  s.on_rtt(1'000'000, 2'000'000);  // a round trip later: cut again
  EXPECT_DOUBLE_EQ(s.cwnd(), kBdp / 4);
}

TEST(Swift, SmallerWindowsGetALargerTarget) {
  // The target at a window w is 15 us + 13062.2 x (1/sqrt(w) - 0.1), within 0 and 40 us:
  // 15 us at 100 packets, 26756 ns at one, 55 us at a tenth. Drive the window down by halves
  // (1 ms round trips, one cut each) and read the target on the way.
  Swift s(fabric());
  const double w[] = {kBdp / 2, kBdp / 4, kBdp / 8, kBdp / 16};
  const double target[] = {18'422.8, 20'381.6, 23'151.8, 27'069.4};
  for (int i = 0; i < 4; ++i) {
    s.on_rtt(1'000'000, uint64_t(i + 1) * 1'000'000);
    EXPECT_DOUBLE_EQ(s.cwnd(), w[i]) << "cut " << i;
    EXPECT_NEAR(double(s.target_ns()), target[i], 1) << "cut " << i;
  }
}

TEST(Swift, BelowOnePacketThePacketIsPaced) {
  Swift s(fabric());
  for (int i = 1; i <= 4; ++i) s.on_rtt(1'000'000, uint64_t(i) * 1'000'000);  // 0.9537 packets
  EXPECT_DOUBLE_EQ(s.cwnd(), kBdp / 16);
  EXPECT_EQ(s.window_pkts(), 1u);
  // 0.9537 x 32768 bits every millisecond: 31.25 Mb/s.
  EXPECT_NEAR(s.rate_bps(), kBdp / 16 * 32768 / 1e-3, 1e-3);
  // Down to the 10 Mb/s floor, whose window at 1 ms is 10e6 x 1e-3 / 32768 = 0.305 packets.
  s.on_rtt(1'000'000, 5'000'000);
  EXPECT_NEAR(s.rate_bps(), 15.625e6, 1e-3);
  s.on_rtt(1'000'000, 6'000'000);
  EXPECT_DOUBLE_EQ(s.rate_bps(), 10e6);
  EXPECT_NEAR(s.cwnd(), 10e6 * 1e-3 / 32768, 1e-12);
}

// Below one packet each packet is timed, and each sample under the target adds ai, as the
// paper adds ai per ACK there: a window of 0.4768 packets becomes 1.4768 and is ACK-clocked.
TEST(Swift, BelowOnePacketEachSampleAddsAPacket) {
  Swift s(fabric());
  for (int i = 1; i <= 5; ++i) s.on_rtt(1'000'000, uint64_t(i) * 1'000'000);
  EXPECT_DOUBLE_EQ(s.cwnd(), kBdp / 32);
  EXPECT_LT(s.rate_bps(), 100e9);
  s.on_rtt(10'000, 6'000'000);  // under the target
  EXPECT_DOUBLE_EQ(s.cwnd(), kBdp / 32 + 1);
  EXPECT_EQ(s.window_pkts(), 1u);
  EXPECT_EQ(s.rate_bps(), 100e9);
}

TEST(Swift, NeverAboveTheLineRatesWindow) {
  Swift s(fabric());
  for (uint64_t i = 1; i <= 100; ++i) s.on_rtt(10'000, i * 10'000);  // always under the target
  // 100 Gb/s x 10 us = 30.52 packets.
  EXPECT_DOUBLE_EQ(s.cwnd(), 100e9 * 10e-6 / 32768);
  EXPECT_EQ(s.window_pkts(), 30u);
  EXPECT_EQ(s.rate_bps(), 100e9);
}

TEST(Swift, WithoutTheFabricsRoundTripItLearnsTheSmallest) {
  SwiftParams p = fabric();
  p.base_rtt_ns = 0;
  Swift s(p);
  EXPECT_EQ(s.window_pkts(), UINT32_MAX);  // no window until a round trip is measured
  // The first round trip (20 us) is the base, and the window is the line rate's over it,
  // 61.035 packets (the one packet it grows by, being under the target, is past that bound).
  s.on_rtt(20'000, 20'000);
  EXPECT_DOUBLE_EQ(s.cwnd(), 100e9 * 20e-6 / 32768);
  EXPECT_NEAR(double(s.target_ns()), 30'366, 1);  // 20 + 10 us + 366 ns of scaling
  // A shorter one lowers the base and the bound: 12 us, 36.62 packets.
  s.on_rtt(12'000, 40'000);
  EXPECT_DOUBLE_EQ(s.cwnd(), 100e9 * 12e-6 / 32768);
  EXPECT_NEAR(double(s.target_ns()), 22'852, 1);
  // A longer one does not raise it.
  s.on_rtt(25'000, 60'000);
  EXPECT_GE(double(s.target_ns()), 22'000);
  EXPECT_LE(double(s.target_ns()), 23'000);
}
