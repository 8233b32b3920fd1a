// The transmit scheduler in virtual time: a port rate kept exactly, ETS weights shared as set
// (and an idle priority's share given to the others), strict priority ahead of bulk, the DSCP
// map, ACKs ahead of data, and parse_qos's words and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>
#include <cstdio>

#include "../common/core_pair.hpp"
#include "transport/bringup.hpp"
#include "uroce/uroce.hpp"

using namespace uroce;
using namespace uroce::test;

namespace {

constexpr uint32_t kMsg = 64 * 1024;  // each WRITE
constexpr uint32_t kDepth = 8;        // WRITEs in flight per streaming QP

// QPs from A to B, each with its traffic class, each streaming WRITEs while asked to. With
// several processes (each a core of its own, on a shared port), QP i is process i's.
struct Streams {
  Streams(const PortQos& qos, std::vector<uint8_t> tclasses, uint64_t seed = 5, sim::FaultConfig wire = {},
          std::vector<PortQos> processes = {}, transport::SharedPort* shared = nullptr)
      : sim(seed, wire) {
    if (processes.empty()) processes = {qos};
    for (size_t p = 0; p < processes.size(); ++p) {
      transport::CoreConfig ca;
      ca.qos = processes[p];
      ca.shared_port = shared;
      ca.shared_port_slot = uint32_t(p + 1);
      Sender x;
      x.pc = &sim.add_core(kIpA + uint32_t(p) * 0x100, ca);
      x.pd = *x.pc->alloc_pd();
      x.scq = *x.pc->create_cq(4096);
      x.rcq = *x.pc->create_cq(16);
      senders.push_back(x);
    }
    a = senders[0].pc;
    scq = senders[0].scq;
    b = &sim.add_core(kIpB);
    pdb = *b->alloc_pd();
    verbs::Cq* cq_b = *b->create_cq(16);
    src.assign(kMsg, 0x3c);
    dst.assign(tclasses.size() * kMsg, 0);
    for (Sender& x : senders) x.lkey = x.pc->reg_mr(x.pd, src.data(), src.size(), kAccessLocalWrite)->lkey.value();
    rkey = b->reg_mr(pdb, dst.data(), dst.size(), kAccessLocalWrite | kAccessRemoteWrite)->rkey.value();
    for (size_t i = 0; i < tclasses.size(); ++i) {
      Sender& x = senders[senders.size() == 1 ? 0 : i];
      transport::Qp* qa = *x.pc->create_qp(x.pd, QpType::RC, x.scq, x.rcq, QpCap{64, 4, 1, 1, 0}, false);
      transport::Qp* qb = *b->create_qp(pdb, QpType::RC, cq_b, cq_b, QpCap{4, 4, 1, 1, 0}, false);
      ConnectOptions c;
      c.path_mtu = Mtu::Mtu1024;
      c.traffic_class = tclasses[i];
      const uint32_t ip_a = kIpA + uint32_t(&x - senders.data()) * 0x100;
      EXPECT_TRUE(transport::connect_rc(*x.pc, *qa, {Gid::from_ipv4(kIpB), qb->qpn().value(), 0x10}, 0x10, c));
      c.traffic_class = 0;
      EXPECT_TRUE(transport::connect_rc(*b, *qb, {Gid::from_ipv4(ip_a), qa->qpn().value(), 0x10}, 0x10, c));
      qps.push_back(qa);
      owner.push_back(&x);
    }
    inflight.assign(qps.size(), 0);
  }

  void post(size_t i, uint32_t len = kMsg) {
    Sge s{uint64_t(src.data()), len, owner[i]->lkey};
    SendWr w{i, WrOpcode::RdmaWrite, kSendSignaled, {&s, 1}};
    w.remote_addr = uint64_t(dst.data()) + i * kMsg;
    w.rkey = rkey;
    ASSERT_TRUE(owner[i]->pc->post_send(*qps[i], std::span<const SendWr>(&w, 1)));
    ++inflight[i];
  }

  // Completions of every sender's QPs.
  int poll(std::span<Wc> out) {
    int n = 0;
    for (Sender& x : senders) n += x.scq->poll(out.subspan(size_t(n)));
    return n;
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
          for (int k; (k = poll(wc)) > 0;)
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
          for (int k; (k = poll(wc)) > 0;)
            for (int j = 0; j < k; ++j) --inflight[wc[j].wr_id];
          for (uint32_t n : inflight)
            if (n) return false;
          return true;
        },
        10'000'000'000ull);
  }

  struct Sender {
    transport::ProtocolCore* pc;
    verbs::PdHandle pd;
    verbs::Cq *scq, *rcq;
    uint32_t lkey = 0;
  };
  sim::Sim sim;
  std::vector<Sender> senders;
  transport::ProtocolCore *a, *b;  // a: the first sender
  verbs::PdHandle pdb;
  verbs::Cq* scq;  // the first sender's
  std::vector<transport::Qp*> qps;
  std::vector<Sender*> owner;
  std::vector<uint32_t> inflight;
  std::vector<uint8_t> src, dst;
  uint32_t rkey = 0;
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

// Processes of one host NIC (a core each) book one port: together they keep to its rate, and
// while both wait for it they share it by their weights. Each with a port of its own, the two
// would send twice the rate.
TEST(TxScheduler, ProcessesOnASharedPortKeepItsRateAndShareIt) {
  for (auto [shares, want] : {std::pair<std::pair<int, int>, double>{{1, 1}, 1.0}, {{3, 1}, 3.0}}) {
    SCOPED_TRACE(want);
    auto port = std::make_unique<transport::SharedPort>();
    std::vector<PortQos> procs = {qos_of("rate 1gbit"), qos_of("rate 1gbit")};
    procs[0].share = uint8_t(shares.first);
    procs[1].share = uint8_t(shares.second);
    Streams s(PortQos{}, {kTc0, kTc0}, 5, {}, procs, port.get());
    s.stream({true, true}, 10'000'000);
    const std::vector<uint64_t> got = s.stream({true, true}, 200'000'000);
    EXPECT_NEAR(double(got[0]) / double(got[1]) / want, 1.0, 0.05);
    EXPECT_NEAR(double((got[0] + got[1]) / kMsg * kWireBytes) * 8e9 / 200e6 / 1e9, 1.0, 0.02);
    // One alone takes the whole port: the other's mark that it waits has lapsed.
    s.drain();
    const std::vector<uint64_t> alone = s.stream({false, true}, 100'000'000);
    EXPECT_NEAR(double(alone[1] / kMsg * kWireBytes) * 8e9 / 100e6 / 1e9, 1.0, 0.02);
    s.drain();
  }
  Streams own(PortQos{}, {kTc0, kTc0}, 5, {}, {qos_of("rate 1gbit"), qos_of("rate 1gbit")}, nullptr);
  own.stream({true, true}, 10'000'000);
  const std::vector<uint64_t> got = own.stream({true, true}, 200'000'000);
  EXPECT_NEAR(double((got[0] + got[1]) / kMsg * kWireBytes) * 8e9 / 200e6 / 1e9, 2.0, 0.04);
  own.drain();
}

// A process that lies on the shared page (a clock a minute ahead, a share that never moves
// while it claims to wait) holds the others back for a bounded time only.
TEST(TxScheduler, ALyingProcessOnASharedPortCannotStopTheOthers) {
  auto port = std::make_unique<transport::SharedPort>();
  Streams s(PortQos{}, {kTc0}, 5, {}, {qos_of("rate 1gbit")}, port.get());
  s.stream({true}, 5'000'000);
  auto lie = [&] {
    port->free_at.store(s.sim.now() + 60'000'000'000ull);
    port->proc[9].vbytes.store(0);
    port->proc[9].waiting_until.store(s.sim.now() + transport::TxScheduler::kProcWaitingNs);
  };
  uint64_t sent = 0;
  for (int i = 0; i < 50; ++i) {  // 50 ms, lied to every millisecond
    lie();
    sent += s.stream({true}, 1'000'000)[0];
  }
  // Held at most kProcMaxHoldNs at a time, it still moves at least a third of the port.
  EXPECT_GT(double(sent / kMsg * kWireBytes) * 8e9 / 50e6 / 1e9, 0.33);
  s.drain();
}

// The host's classes on a shared port (the flow table's "action prio", which the daemon
// writes): a QP to a peer in a class's prefix sends in its priority whatever its DSCP, one
// to a peer outside it by its DSCP; a class whose QPN range leaves the QP out does not apply.
TEST(TxScheduler, TheHostsClassesOverrideTheDscp) {
  for (auto [bits, qpn_lo, want] : {std::tuple<uint8_t, uint32_t, int>{128, 0, 6}, {96 + 24, 0, 6}, {128, 0xffffff, 0},
                                    {96 + 32, 0, 6}}) {
    SCOPED_TRACE(int(bits));
    auto port = std::make_unique<transport::SharedPort>();
    transport::SharedPort::Class& c = port->classes[0];
    std::memcpy(c.gid, Gid::from_ipv4(kIpB).raw.data(), 16);
    c.bits = bits;
    c.prio = 6;
    c.qpn_lo = qpn_lo;
    c.qpn_hi = 0xffffff;
    port->nclasses = 1;
    port->class_version.store(2);
    Streams s(PortQos{}, {kTc0}, 5, {}, {PortQos{}}, port.get());
    s.stream({true}, 2'000'000);
    s.drain();
    const transport::Counters& k = s.a->counters();
    EXPECT_EQ(k.tx_prio6_bytes > 0, want == 6);
    EXPECT_EQ(k.tx_prio0_bytes > 0, want == 0);
  }
}

// ACKs leave ahead of data: B has a 16-packet WRITE of its own to send when A's request,
// which asks for an ACK, arrives; B's next pass puts the ACK first.
TEST(TxScheduler, AnAckLeavesAheadOfThePassesData) {
  CorePair t;
  std::vector<uint8_t> a_buf(16 * 1024, 0x11), b_buf(16 * 1024, 0x22);
  auto ma = t.reg(t.a, a_buf.data(), a_buf.size());
  auto mb = t.reg(t.b, b_buf.data(), b_buf.size());
  Sge sa{uint64_t(a_buf.data()), 64, ma.lkey};
  SendWr wa{1, WrOpcode::RdmaWrite, kSendSignaled, {&sa, 1}};
  wa.remote_addr = uint64_t(b_buf.data());
  wa.rkey = mb.rkey;
  ASSERT_TRUE(t.send(t.a, wa));
  t.a.pc->progress(t.sim.now());
  ASSERT_EQ(t.a.pc->tx_queue().size(), 1u);
  const transport::PacketBuf* req = t.a.pc->tx_queue()[0];
  std::vector<uint8_t> bytes(req->data, req->data + req->len);
  t.a.pc->release_tx();
  Sge sb{uint64_t(b_buf.data()), uint32_t(b_buf.size()), mb.lkey};
  SendWr wb{2, WrOpcode::RdmaWrite, kSendSignaled, {&sb, 1}};
  wb.remote_addr = uint64_t(a_buf.data());
  wb.rkey = ma.rkey;
  ASSERT_TRUE(t.send(t.b, wb));
  t.b.pc->on_packet(bytes, t.a.qp->flow, t.sim.now());  // A's request, its last packet: ACK it
  t.b.pc->progress(t.sim.now());
  auto q = t.b.pc->tx_queue();
  ASSERT_EQ(q.size(), 17u);
  EXPECT_EQ(q[0]->data[0], uint8_t(wire::Opcode::RC_ACKNOWLEDGE));
  for (size_t i = 1; i < q.size(); ++i) EXPECT_NE(q[i]->data[0], uint8_t(wire::Opcode::RC_ACKNOWLEDGE)) << i;
  t.b.pc->release_tx();
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
  EXPECT_EQ(parse_qos("")->share, 1);
  EXPECT_EQ(parse_qos("share 7")->share, 7);
  PortQos wrong;
  EXPECT_TRUE(check_qos(wrong).ok());
  wrong.dscp_prio[46] = 8;
  EXPECT_EQ(check_qos(wrong).error().code, EINVAL);
  wrong = PortQos{};
  wrong.weight[3] = 0;
  EXPECT_FALSE(check_qos(wrong).ok());
  wrong = PortQos{};
  wrong.share = 0;
  EXPECT_FALSE(check_qos(wrong).ok());
  wrong = PortQos{};
  wrong.port_kbps = 2000'000'000;
  EXPECT_FALSE(check_qos(wrong).ok());
  for (const char* bad : {"strict 8", "ets 0:0", "ets 0:101", "ets 9:1", "ets 0", "dscp 64:1", "dscp 1:8",
                          "rate", "rate 0", "rate 999", "rate 2000gbit", "rate 1tbit", "rate 1gbit rate 2gbit",
                          "fast", "strict", "strict ets 0:1", "dscp -1:2", "ets 0:3x", "share 0", "share 101",
                          "share", "share 1 share 2"}) {
    auto r = parse_qos(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, EINVAL);
    EXPECT_NE(r.error().message.find("QoS:"), std::string::npos) << r.error().message;
  }
}
