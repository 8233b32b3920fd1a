// The transmit scheduler in virtual time: a port rate kept exactly, ETS weights shared as set
// (and an idle priority's share given to the others), strict priority ahead of bulk, the DSCP
// map, ACKs ahead of data, and parse_qos's words and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "../common/core_pair.hpp"
#include "transport/bringup.hpp"
#include "uroce/uroce.hpp"

using namespace uroce;
using namespace uroce::test;

namespace {

constexpr uint32_t kMsg = 64 * 1024;  // each WRITE
constexpr uint32_t kDepth = 8;        // WRITEs in flight per streaming QP

// QPs from A to B, each with its traffic class, each streaming WRITEs while asked to.
struct Streams {
  Streams(const PortQos& qos, std::vector<uint8_t> tclasses, uint64_t seed = 5, sim::FaultConfig wire = {})
      : sim(seed, wire) {
    transport::CoreConfig ca;
    ca.qos = qos;
    a = &sim.add_core(kIpA, ca);
    b = &sim.add_core(kIpB);
    pda = *a->alloc_pd();
    pdb = *b->alloc_pd();
    scq = *a->create_cq(4096);
    verbs::Cq* rcq_a = *a->create_cq(16);
    verbs::Cq* cq_b = *b->create_cq(16);
    src.assign(kMsg, 0x3c);
    dst.assign(tclasses.size() * kMsg, 0);
    lkey = a->reg_mr(pda, src.data(), src.size(), kAccessLocalWrite)->lkey.value();
    rkey = b->reg_mr(pdb, dst.data(), dst.size(), kAccessLocalWrite | kAccessRemoteWrite)->rkey.value();
    for (uint8_t tc : tclasses) {
      transport::Qp* qa = *a->create_qp(pda, QpType::RC, scq, rcq_a, QpCap{64, 4, 1, 1, 0}, false);
      transport::Qp* qb = *b->create_qp(pdb, QpType::RC, cq_b, cq_b, QpCap{4, 4, 1, 1, 0}, false);
      ConnectOptions c;
      c.path_mtu = Mtu::Mtu1024;
      c.traffic_class = tc;
      EXPECT_TRUE(transport::connect_rc(*a, *qa, {Gid::from_ipv4(kIpB), qb->qpn().value(), 0x10}, 0x10, c));
      c.traffic_class = 0;
      EXPECT_TRUE(transport::connect_rc(*b, *qb, {Gid::from_ipv4(kIpA), qa->qpn().value(), 0x10}, 0x10, c));
      qps.push_back(qa);
    }
    inflight.assign(qps.size(), 0);
  }

  void post(size_t i, uint32_t len = kMsg) {
    Sge s{uint64_t(src.data()), len, lkey};
    SendWr w{i, WrOpcode::RdmaWrite, kSendSignaled, {&s, 1}};
    w.remote_addr = uint64_t(dst.data()) + i * kMsg;
    w.rkey = rkey;
    ASSERT_TRUE(a->post_send(*qps[i], std::span<const SendWr>(&w, 1)));
    ++inflight[i];
  }

  // Streams on the QPs in `on` for ns of virtual time (topping each up to kDepth WRITEs);
  // returns the bytes each completed meanwhile.
  std::vector<uint64_t> stream(const std::vector<bool>& on, uint64_t ns) {
    std::vector<uint64_t> done(qps.size(), 0);
    const uint64_t end = sim.now() + ns;
    auto top_up = [&] {
      for (size_t i = 0; i < qps.size(); ++i)
        while (on[i] && inflight[i] < kDepth) post(i);
    };
    top_up();
    sim.run_until(
        [&] {
          Wc wc[64];
          for (int k; (k = scq->poll(wc)) > 0;)
            for (int j = 0; j < k; ++j) {
              EXPECT_EQ(wc[j].status, WcStatus::Success);
              --inflight[wc[j].wr_id];
              if (sim.now() <= end) done[wc[j].wr_id] += kMsg;
            }
          top_up();
          return sim.now() >= end;
        },
        ns + 1'000'000'000ull);
    return done;
  }

  // Lets what is in flight finish.
  void drain() {
    sim.run_until(
        [&] {
          Wc wc[64];
          for (int k; (k = scq->poll(wc)) > 0;)
            for (int j = 0; j < k; ++j) --inflight[wc[j].wr_id];
          for (uint32_t n : inflight)
            if (n) return false;
          return true;
        },
        10'000'000'000ull);
  }

  sim::Sim sim;
  transport::ProtocolCore *a, *b;
  verbs::PdHandle pda, pdb;
  verbs::Cq* scq;
  std::vector<transport::Qp*> qps;
  std::vector<uint32_t> inflight;
  std::vector<uint8_t> src, dst;
  uint32_t lkey = 0, rkey = 0;
};

// Traffic classes whose DSCPs the default map puts in priorities 0, 1, 5 and 6.
constexpr uint8_t kTc0 = 0, kTc1 = 8 << 2, kTc5 = 46 << 2, kTc6 = 48 << 2;

PortQos qos_of(const char* text) {
  auto q = parse_qos(text);
  EXPECT_TRUE(q.ok()) << text << ": " << q.error().message;
  return q.ok() ? *q : PortQos{};
}

// RoCE bytes of one 64 KiB WRITE at MTU 1024: 64 packets, the first with a RETH.
constexpr uint64_t kWireBytes = 64 * (12 + 1024 + 4) + 16;

}  // namespace

TEST(TxScheduler, ThePortRateIsKeptExactly) {
  for (const char* rate : {"rate 100mbit", "rate 1gbit", "rate 10gbit"}) {
    SCOPED_TRACE(rate);
    Streams s(qos_of(rate), {kTc0});
    const double bps = double(qos_of(rate).port_kbps) * 1000;
    const uint64_t ns = uint64_t(500 * kWireBytes * 8e9 / bps);  // 500 WRITEs' time
    s.stream({true}, 10'000'000);  // past the start's burst
    const std::vector<uint64_t> got = s.stream({true}, ns);
    const double wire_bps = double(got[0] / kMsg * kWireBytes) * 8e9 / double(ns);
    EXPECT_NEAR(wire_bps / bps, 1.0, 0.01);
    s.drain();
  }
}

TEST(TxScheduler, EtsWeightsShareThePort) {
  for (auto [text, want] : {std::pair<const char*, double>{"ets 0:3 1:1 rate 1gbit", 3.0},
                            {"ets 0:1 1:1 rate 1gbit", 1.0}, {"ets 0:1 1:4 rate 1gbit", 0.25}}) {
    SCOPED_TRACE(text);
    Streams s(qos_of(text), {kTc0, kTc1});
    s.stream({true, true}, 10'000'000);
    const std::vector<uint64_t> got = s.stream({true, true}, 200'000'000);
    EXPECT_NEAR(double(got[0]) / double(got[1]) / want, 1.0, 0.05);
    // Together they fill the port.
    EXPECT_NEAR(double((got[0] + got[1]) / kMsg * kWireBytes) * 8e9 / 200e6 / 1e9, 1.0, 0.02);
    EXPECT_EQ(s.a->counters().tx_prio0_bytes > 0, true);
    EXPECT_EQ(s.a->counters().tx_prio1_bytes > 0, true);
    s.drain();
  }
}

TEST(TxScheduler, AnIdlePrioritysShareGoesToTheOthers) {
  Streams s(qos_of("ets 0:3 1:1 rate 1gbit"), {kTc0, kTc1});
  s.stream({false, true}, 10'000'000);
  const std::vector<uint64_t> alone = s.stream({false, true}, 100'000'000);
  EXPECT_EQ(alone[0], 0u);
  EXPECT_NEAR(double(alone[1] / kMsg * kWireBytes) * 8e9 / 100e6 / 1e9, 1.0, 0.02);
  // The weight-3 priority joins: it takes its share at once, without a debt from its idle time
  // (nor credit for it).
  const std::vector<uint64_t> both = s.stream({true, true}, 100'000'000);
  EXPECT_NEAR(double(both[0]) / double(both[1]) / 3, 1.0, 0.05);
  s.drain();
}

TEST(TxScheduler, ManyQpsInOnePriorityShareItsWeightNotMore) {
  // Three QPs in priority 0 against one in priority 1, equal weights: each priority half.
  Streams s(qos_of("rate 1gbit"), {kTc0, kTc0, kTc0, kTc1});
  s.stream({true, true, true, true}, 10'000'000);
  const std::vector<uint64_t> got = s.stream({true, true, true, true}, 300'000'000);
  EXPECT_NEAR(double(got[0] + got[1] + got[2]) / double(got[3]), 1.0, 0.05);
  for (int i : {1, 2}) EXPECT_NEAR(double(got[size_t(i)]) / double(got[0]), 1.0, 0.1);
  s.drain();
}

// A 64-byte WRITE of strict priority 5 beside a QP streaming bulk on a 1 Gb/s wire. With the
// port rate just below the wire's, the queue is the NIC's, where the scheduler sees it: the
// WRITE waits at most for the bulk already booked (the port's slack) and the packet on the
// wire. Without a port rate the bulk queues in front of the wire and the WRITE behind it.
TEST(TxScheduler, AStrictPriorityGoesAheadOfBulk) {
  sim::FaultConfig wire;
  wire.rate_bps = 1e9;
  wire.delay_ns = 10'000;
  const uint64_t packet_ns = (12 + 1024 + 4) * 8;  // one bulk packet on the wire at 1 Gb/s
  for (const char* text : {"strict 5 rate 950mbit", "strict 5"}) {
    SCOPED_TRACE(text);
    Streams s(qos_of(text), {kTc0, kTc5}, 5, wire);
    bool bulk = false;
    auto small_write = [&] {  // its completion time, bulk streaming or not
      const uint64_t t0 = s.sim.now();
      s.post(1, 64);
      uint64_t took = 0;
      s.sim.run_until(
          [&] {
            Wc wc[64];
            for (int k; (k = s.scq->poll(wc)) > 0;)
              for (int j = 0; j < k; ++j) {
                --s.inflight[wc[j].wr_id];
                if (wc[j].wr_id == 1) took = s.sim.now() - t0;
              }
            while (bulk && s.inflight[0] < kDepth) s.post(0);
            return took != 0;
          },
          1'000'000'000ull);
      return took;
    };
    const uint64_t idle = small_write();
    ASSERT_GT(idle, 2 * wire.delay_ns);
    bulk = true;
    s.stream({true, false}, 20'000'000);  // the bulk has filled whatever queue it fills
    std::vector<uint64_t> loaded;
    for (int i = 0; i < 20; ++i) {
      loaded.push_back(small_write());
      // The bulk streams on meanwhile, near the wire's rate.
      EXPECT_GT(s.stream({true, false}, 10'000'000)[0], 0.8 * 1e9 / 8 * 1e-2) << i;
    }
    std::sort(loaded.begin(), loaded.end());
    const uint64_t worst = loaded.back();
    std::printf("%s: idle %.1f us, under bulk worst %.1f us (%.2fx)\n", text, double(idle) / 1e3,
                double(worst) / 1e3, double(worst) / double(idle));
    if (qos_of(text).port_kbps) {
      EXPECT_LE(worst, idle + transport::TxScheduler::kPortSlackNs + 2 * packet_ns);
      EXPECT_LE(double(worst) / double(idle), 2.0);
    } else {
      EXPECT_GT(worst, idle + 100'000);  // behind the bulk in front of the wire
    }
    bulk = false;
    s.drain();
  }
}

TEST(TxScheduler, TheDscpMapPicksThePriority) {
  // DSCP 46 (the default map: priority 5), moved to priority 2.
  for (auto [text, prio] : {std::pair<const char*, int>{"rate 1gbit", 5}, {"dscp 46:2 rate 1gbit", 2}}) {
    SCOPED_TRACE(text);
    Streams s(qos_of(text), {kTc5});
    s.stream({true}, 5'000'000);
    s.drain();
    const transport::Counters& c = s.a->counters();
    const uint64_t by_prio[8] = {c.tx_prio0_bytes, c.tx_prio1_bytes, c.tx_prio2_bytes, c.tx_prio3_bytes,
                                 c.tx_prio4_bytes, c.tx_prio5_bytes, c.tx_prio6_bytes, c.tx_prio7_bytes};
    for (int p = 0; p < 8; ++p) EXPECT_EQ(by_prio[p] > 0, p == prio) << p;
  }
}

TEST(TxScheduler, ParseQosTakesDcbsWordsAndRefusesTheRest) {
  auto q = parse_qos("strict 5,6 ets 0:3 1:1 dscp 46:7 8:0 rate 2gbit");
  ASSERT_TRUE(q.ok()) << q.error().message;
  EXPECT_TRUE(q->strict[5] && q->strict[6] && !q->strict[0]);
  EXPECT_EQ(q->weight[0], 3);
  EXPECT_EQ(q->weight[1], 1);
  EXPECT_EQ(q->priority_of(46 << 2), 7);
  EXPECT_EQ(q->priority_of(8 << 2), 0);
  EXPECT_EQ(q->priority_of(26 << 2), 3);  // the default map elsewhere
  EXPECT_EQ(q->port_kbps, 2'000'000u);
  EXPECT_EQ(parse_qos("rate 500mbit")->port_kbps, 500'000u);
  EXPECT_EQ(parse_qos("rate 5000")->port_kbps, 5000u);
  EXPECT_EQ(parse_qos("")->port_kbps, 0u);
  for (const char* bad : {"strict 8", "ets 0:0", "ets 0:101", "ets 9:1", "ets 0", "dscp 64:1", "dscp 1:8",
                          "rate", "rate 0", "rate 999", "rate 2000gbit", "rate 1tbit", "rate 1gbit rate 2gbit",
                          "fast", "strict", "strict ets 0:1", "dscp -1:2", "ets 0:3x"}) {
    auto r = parse_qos(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, EINVAL);
    EXPECT_NE(r.error().message.find("QoS:"), std::string::npos) << r.error().message;
  }
}
