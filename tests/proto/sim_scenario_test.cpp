// The simulator's line rate, its trace digest, and the loss scenario: same seed, same run.
#include <gtest/gtest.h>

#include <string>

#include "link/lossy_link.hpp"
#include "sim/loss_scenario.hpp"
#include "sim/sha256.hpp"

using namespace uroce;

TEST(Sha256, Fips180KnownAnswers) {
  auto of = [](const std::string& s) {
    sim::Sha256 h;
    h.update(s.data(), s.size());
    return h.hex();
  };
  EXPECT_EQ(of(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(of("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  sim::Sha256 h;  // a million 'a', fed in uneven pieces
  const std::string chunk(997, 'a');
  size_t left = 1'000'000;
  while (left) {
    const size_t n = std::min(left, chunk.size());
    h.update(chunk.data(), n);
    left -= n;
  }
  EXPECT_EQ(h.hex(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// At 8 Gb/s a byte takes a nanosecond on the wire: a sender's packets arrive one after
// another, each its length later, plus the delay; another sender's wire is its own.
TEST(LossyLink, ASendersPacketsLeaveAtItsLineRate) {
  link::FaultConfig f;
  f.rate_bps = 8e9;
  f.delay_ns = 500;
  link::LossyLink l(1, f);
  const Gid a = Gid::from_ipv4(0x0a000001), b = Gid::from_ipv4(0x0a000002), c = Gid::from_ipv4(0x0a000003);
  auto pa = l.attach(a), pb = l.attach(b), pc = l.attach(c);
  std::vector<uint8_t> bytes(1000);
  for (int i = 0; i < 3; ++i) l.send(bytes.data(), bytes.size(), wire::FlowAddr{a, b, 1, 4791}, 10'000);
  l.send(bytes.data(), 200, wire::FlowAddr{c, b, 1, 4791}, 10'000);
  l.send(bytes.data(), 100, wire::FlowAddr{a, b, 1, 4791}, 20'000);  // the wire was idle again
  std::vector<uint64_t> due;
  link::LossyLink::Frame fr;
  while (l.pop_due(UINT64_MAX, fr)) due.push_back(fr.due);
  EXPECT_EQ(due, (std::vector<uint64_t>{10'700, 11'500, 12'500, 13'500, 20'600}));
}

TEST(LossScenario, TheSameSeedGivesTheSameRunAndAnotherSeedAnother) {
  sim::LossScenario s;
  s.loss = 0.01;
  s.duration_ms = 3;
  s.seed = 7;
  const sim::LossResult r1 = sim::run_loss(s), r2 = sim::run_loss(s);
  EXPECT_EQ(r1.trace_sha256, r2.trace_sha256);
  EXPECT_EQ(r1.messages, r2.messages);
  EXPECT_EQ(r1.retransmitted_pkts, r2.retransmitted_pkts);
  EXPECT_EQ(r1.drops, r2.drops);
  EXPECT_EQ(sim::to_json(s, r1), sim::to_json(s, r2));
  s.seed = 8;
  const sim::LossResult r3 = sim::run_loss(s);
  EXPECT_NE(r3.trace_sha256, r1.trace_sha256);
  EXPECT_EQ(r1.trace_sha256.size(), 64u);
}

// Without loss the stream fills the line but for headers and its first round trip; with 1 %
// loss go-back-N resends and the goodput falls.
TEST(LossScenario, LossCostsGoBackNGoodput) {
  sim::LossScenario s;
  s.duration_ms = 3;
  const sim::LossResult clean = sim::run_loss(s);
  EXPECT_EQ(clean.drops, 0u);
  EXPECT_EQ(clean.retransmitted_pkts, 0u);
  EXPECT_FALSE(clean.qp_error);
  EXPECT_GT(clean.goodput_ratio, 0.95);
  EXPECT_LT(clean.goodput_ratio, 4096.0 / (4096 + 12 + 4));  // every packet carries its BTH and ICRC
  s.loss = 0.01;
  const sim::LossResult lossy = sim::run_loss(s);
  EXPECT_GT(lossy.drops, 0u);
  EXPECT_GT(lossy.retransmitted_pkts, lossy.drops);  // go-back-N resends more than it lost
  EXPECT_LT(lossy.goodput_ratio, clean.goodput_ratio);
  EXPECT_GT(lossy.fct_p50_us, clean.fct_p50_us);
}
