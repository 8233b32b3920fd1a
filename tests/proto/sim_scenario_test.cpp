// The simulator's line rate, switch and trace digest, and its scenarios: same seed, same run.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "sim/fabric.hpp"
#include "sim/incast_scenario.hpp"
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
  sim::FaultConfig f;
  f.rate_bps = 8e9;
  f.delay_ns = 500;
  sim::LossyLink l(1, f);
  const Gid a = Gid::from_ipv4(0x0a000001), b = Gid::from_ipv4(0x0a000002), c = Gid::from_ipv4(0x0a000003);
  auto pa = l.attach(a), pb = l.attach(b), pc = l.attach(c);
  std::vector<std::pair<Gid, uint64_t>> queued;  // what waits in front of a sender's wire
  l.set_wire_probe([&](const Gid& from, uint64_t q) { queued.emplace_back(from, q); });
  std::vector<uint8_t> bytes(1000);
  for (int i = 0; i < 3; ++i) l.send(bytes.data(), bytes.size(), wire::FlowAddr{a, b, 1, 4791}, 10'000);
  l.send(bytes.data(), 200, wire::FlowAddr{c, b, 1, 4791}, 10'000);
  l.send(bytes.data(), 100, wire::FlowAddr{a, b, 1, 4791}, 20'000);  // the wire was idle again
  std::vector<uint64_t> due;
  sim::LossyLink::Frame fr;
  while (l.pop_due(UINT64_MAX, fr)) due.push_back(fr.due);
  EXPECT_EQ(due, (std::vector<uint64_t>{10'700, 11'500, 12'500, 13'500, 20'600}));
  // At 8 Gb/s a byte takes a nanosecond: a's second and third frames find 1000 and 2000 bytes
  // ahead of them; c's wire is its own; by 20 us a's has drained.
  EXPECT_EQ(queued, (std::vector<std::pair<Gid, uint64_t>>{{a, 0}, {a, 1000}, {a, 2000}, {c, 0}, {a, 0}}));
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
  // The requester's window (256 packets of 4 KiB) waits in front of the sender's wire; under
  // go-back-N the resends queue behind it as well.
  EXPECT_GT(clean.queue_p99_bytes, 900'000u);
  EXPECT_LT(clean.queue_p99_bytes, 256u * (4096 + 64));
  EXPECT_GT(lossy.queue_p99_bytes, clean.queue_p99_bytes);
  EXPECT_EQ(clean.jain_fairness, 1.0);  // one flow
}

// Selective repeat on the same lossy stream: it resends about what was lost (go-back-N, far
// more), and keeps most of the goodput.
TEST(LossScenario, SelectiveRepeatKeepsTheGoodput) {
  sim::LossScenario s;
  s.duration_ms = 3;
  s.loss = 0.01;
  const sim::LossResult gbn = sim::run_loss(s);
  s.reliability = transport::Reliability::Sr;
  const sim::LossResult sr = sim::run_loss(s);
  EXPECT_FALSE(sr.qp_error);
  EXPECT_GT(sr.drops, 0u);
  EXPECT_LE(sr.retransmitted_pkts, sr.drops);  // ACKs are lost too, and need no resend
  EXPECT_GT(gbn.retransmitted_pkts, 10 * sr.retransmitted_pkts);
  EXPECT_GT(sr.goodput_ratio, 2 * gbn.goodput_ratio);
  // Selective repeat keeps two bandwidth-delay products in flight, not the 256-packet window:
  // 100 Gb/s over 2 x 2 us and a 4 KiB packet's time is 13.2 packets, so 28, and the queue at
  // the sender's wire stays near that instead of near 1 MiB.
  EXPECT_EQ(sr.window_pkts, 28u);
  EXPECT_EQ(gbn.window_pkts, 256u);
  EXPECT_LT(sr.queue_p99_bytes, 28u * (4096 + 64));
  EXPECT_GT(gbn.queue_p99_bytes, 900'000u);
}

namespace {

struct SwitchRig {
  sim::LossyLink l;
  const Gid a = Gid::from_ipv4(0x0a000001), b = Gid::from_ipv4(0x0a000002);
  std::unique_ptr<link::Link> pa, pb;
  std::vector<uint8_t> bytes = std::vector<uint8_t>(1000);
  explicit SwitchRig(sim::SwitchConfig sw) : l(1, faults()) {
    l.set_switch(std::move(sw));
    pa = l.attach(a);
    pb = l.attach(b);
  }
  static sim::FaultConfig faults() {
    sim::FaultConfig f;
    f.delay_ns = 500;  // host to switch; no line rate: a burst reaches the switch at once
    return f;
  }
  void send(uint64_t now, int n) {
    for (int i = 0; i < n; ++i) l.send(bytes.data(), bytes.size(), wire::FlowAddr{a, b, 1, 4791}, now);
  }
  std::vector<uint64_t> due() {
    std::vector<uint64_t> d;
    sim::LossyLink::Frame fr;
    while (l.pop_due(UINT64_MAX, fr)) d.push_back(fr.due);
    return d;
  }
};

sim::SwitchConfig switch_8g() {
  sim::SwitchConfig sw;
  sw.on = true;
  sw.port_bps = 8e9;  // 1000 bytes: 1 us
  sw.delay_ns = 100;
  return sw;
}

}  // namespace

// A burst of ten into a port that holds 3500 bytes: three join the queue, seven are dropped;
// the three leave one per microsecond.
TEST(SimSwitch, TailDropPastTheBuffer) {
  sim::SwitchConfig sw = switch_8g();
  sw.buffer_bytes = 3500;
  std::vector<uint64_t> seen;
  sw.on_enqueue = [&](const Gid&, uint64_t q) { seen.push_back(q); };
  SwitchRig r(sw);
  r.send(10'000, 10);
  EXPECT_EQ(r.due(), (std::vector<uint64_t>{11'600, 12'600, 13'600}));
  EXPECT_EQ(r.l.stats().switch_drops, 7u);
  EXPECT_EQ(r.l.stats().dropped, 7u);
  EXPECT_EQ(seen, (std::vector<uint64_t>{0, 1000, 2000, 3000, 3000, 3000, 3000, 3000, 3000, 3000}));
}

// With PFC nothing is dropped: past xoff the sender is paused until the queue is down to xon,
// so what it sends meanwhile leaves its wire only then.
TEST(SimSwitch, PfcPausesInsteadOfDropping) {
  sim::SwitchConfig sw = switch_8g();
  sw.buffer_bytes = 3500;
  sw.pfc = true;
  sw.xoff_bytes = 2500;
  sw.xon_bytes = 500;
  SwitchRig r(sw);
  r.send(10'000, 3);  // at the switch at 10.5 us; the third takes the queue to 3000 > xoff
  EXPECT_EQ(r.due(), (std::vector<uint64_t>{11'600, 12'600, 13'600}));
  // Paused until the queue drains to 500 bytes: 10.5 us + 2500 bytes at 8 Gb/s = 13 us.
  r.send(10'600, 1);
  EXPECT_EQ(r.due(), (std::vector<uint64_t>{14'600}));  // leaves at 13 us, at the switch 13.5, out 14.5
  EXPECT_EQ(r.l.stats().switch_drops, 0u);
  EXPECT_EQ(r.l.stats().pauses, 1u);
}

// A pause holds the frames waiting in the sender's queue too, not only those it hands over
// later: five frames queued at once behind a 1 us wire, into a port half as fast. The second
// and third take the port past XOFF (pauses until 15.5 and then 16.5 us); the fourth and fifth
// wait in the sender's queue until then, one after the other.
TEST(SimSwitch, PfcHoldsTheSendersQueue) {
  sim::SwitchConfig sw = switch_8g();
  sw.port_bps = 4e9;  // 2 us a frame
  sw.pfc = true;
  sw.xoff_bytes = 1500;
  sw.xon_bytes = 500;
  sim::FaultConfig f = SwitchRig::faults();
  f.rate_bps = 8e9;  // 1 us a frame
  sim::LossyLink l(1, f);
  l.set_switch(sw);
  const Gid a = Gid::from_ipv4(0x0a000001), b = Gid::from_ipv4(0x0a000002);
  auto pa = l.attach(a), pb = l.attach(b);
  std::vector<uint8_t> bytes(1000);
  for (int i = 0; i < 5; ++i) l.send(bytes.data(), bytes.size(), wire::FlowAddr{a, b, 1, 4791}, 10'000);
  std::vector<uint64_t> due;
  sim::LossyLink::Frame fr;
  while (l.pop_due(UINT64_MAX, fr)) due.push_back(fr.due);
  EXPECT_EQ(due, (std::vector<uint64_t>{13'600, 15'600, 17'600, 20'100, 22'100}));
  EXPECT_EQ(l.stats().switch_drops, 0u);
}

// ECN at the switch: the mark function decides from the queue a frame joins.
TEST(SimSwitch, MarksByQueueLength) {
  sim::SwitchConfig sw = switch_8g();
  sw.mark = [](uint64_t q) { return q >= 2000 ? 1.0 : 0.0; };
  SwitchRig r(sw);
  r.send(10'000, 4);
  std::vector<uint8_t> tos;
  sim::LossyLink::Frame fr;
  while (r.l.pop_due(UINT64_MAX, fr)) tos.push_back(fr.tos);
  EXPECT_EQ(tos, (std::vector<uint8_t>{0, 0, wire::kEcnCe, wire::kEcnCe}));
  EXPECT_EQ(r.l.stats().ce_marked, 2u);
}

// Incast 16:1 through the switch: without congestion control the port's buffer overflows for
// as long as the run lasts; DCQCN's marks and CNPs bring the senders to a rate the port
// carries, with no drops once they have converged (the second half) and a fair share each.
TEST(IncastScenario, DcqcnStopsTheDropsAndSharesFairly) {
  sim::IncastScenario s;
  s.senders = 16;
  s.duration_ms = 10;
  const sim::IncastResult none = sim::run_incast(s);
  EXPECT_FALSE(none.qp_error);
  EXPECT_GT(none.drops_second_half, 0u);
  EXPECT_EQ(none.cnps, 0u);
  s.cc = cc::Algo::Dcqcn;
  const sim::IncastResult dcqcn = sim::run_incast(s);
  EXPECT_FALSE(dcqcn.qp_error);
  EXPECT_GT(dcqcn.cnps, 0u);
  EXPECT_EQ(dcqcn.drops_second_half, 0u);
  EXPECT_GT(dcqcn.jain_fairness, 0.95);
  EXPECT_LT(dcqcn.queue_p99_bytes, s.buffer_bytes / 2);
}

// Swift on the same incast: every sender's window bounds what it puts in the queue, so nothing
// is dropped at all (not even in the first burst), no CNP is needed, the port stays nearly full
// and the queue stays under half DCQCN's limit above.
TEST(IncastScenario, SwiftWindowsNeverOverflowTheBuffer) {
  sim::IncastScenario s;
  s.senders = 16;
  s.duration_ms = 10;
  s.cc = cc::Algo::Swift;
  const sim::IncastResult r = sim::run_incast(s);
  EXPECT_FALSE(r.qp_error);
  EXPECT_EQ(r.drops, 0u);
  EXPECT_EQ(r.retransmitted_pkts, 0u);
  EXPECT_EQ(r.cnps, 0u);
  EXPECT_GT(r.goodput_ratio, 0.9);  // 0.94 in 10 ms, 0.985 in 40
  EXPECT_GT(r.jain_fairness, 0.99);
  EXPECT_LT(r.queue_p99_bytes, s.buffer_bytes / 4);
}

// PFC: nothing is dropped, senders are paused instead.
TEST(IncastScenario, PfcIsLossless) {
  sim::IncastScenario s;
  s.senders = 8;
  s.duration_ms = 2;
  s.pfc = true;
  const sim::IncastResult pfc = sim::run_incast(s);
  EXPECT_FALSE(pfc.qp_error);
  EXPECT_EQ(pfc.drops, 0u);
  EXPECT_EQ(pfc.retransmitted_pkts, 0u);
  EXPECT_GT(pfc.pauses, 0u);
  EXPECT_GT(pfc.goodput_ratio, 0.5);
}
