// Runs of MIDDLE packets handed over at once (wire::ApartPayload::packets, a same-host peer's
// placed payloads): taken whole only where that is the same as taking them one by one, and
// otherwise judged packet by packet, each with the verdict, counters and answer it would have
// had alone. A run's sender is as untrusted as any peer: forged, duplicated, ahead of the
// window, from a third party, longer than its message, from memory just deregistered.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "../common/core_pair.hpp"
#include "../common/seed.hpp"

using namespace uroce;
using namespace uroce::test;

namespace {

constexpr uint32_t kMtu = 1024;  // PairOptions' default path MTU

// B's responder, with a region of B's, fed by hand as A's QP (or a stranger) would feed it.
struct RunFixture {
  explicit RunFixture(PairOptions o = {}) : t(o) {
    mem.assign(64 * kMtu, 0x5a);
    src.resize(64 * kMtu);
    std::mt19937_64 rng(test_seed(61));
    for (auto& b : src) b = uint8_t(rng());
    mr = t.reg(t.b, mem.data(), mem.size());
  }

  wire::Packet request(wire::Opcode op, wire::Psn psn) {
    wire::Packet p;
    p.bth.opcode = op;
    p.bth.dest_qp = t.b.qp->qpn().value();
    p.bth.psn = psn;
    return p;
  }
  wire::Psn epsn() const { return t.b.qp->resp.epsn; }

  // WRITE FIRST of a message of `len` bytes at mem + at, one MTU of src from `from`.
  void write_first(uint32_t len, uint64_t at = 0, uint32_t from = 0) {
    wire::Packet p = request(wire::Opcode::RC_WRITE_FIRST, epsn());
    p.reth = {uint64_t(mem.data()) + at, mr.rkey, len};
    p.payload = {src.data() + from, kMtu};
    t.inject(t.b, t.a, p);
  }
  // n packets of op from PSN psn, their payloads src[from ..) one after another, as a ring
  // carries them: headers apart, no ICRC (unless !intact: as if from a wire).
  void run(wire::Opcode op, wire::Psn psn, uint32_t n, uint32_t from, uint32_t unit = kMtu, bool intact = true,
           const wire::FlowAddr* flow = nullptr) {
    wire::Packet p = request(op, psn);
    uint8_t hdr[64 + wire::kIcrcLen] = {};
    const size_t h = wire::encode_headers(p, hdr);
    const wire::ApartPayload apart{uint32_t(h), {src.data() + from, size_t(n) * unit}, n};
    wire::Ipv4Fields ip;
    ip.icrc_absent = intact;
    t.b.pc->on_packet({hdr, h + wire::kIcrcLen}, flow ? *flow : t.a.qp->flow, t.sim.now(), ip, &apart);
  }
  void single(wire::Opcode op, wire::Psn psn, uint32_t len, uint32_t from) {
    wire::Packet p = request(op, psn);
    p.payload = {src.data() + from, len};
    t.inject(t.b, t.a, p);
  }
  uint64_t ctr(const char* name) const {
    uint64_t v = 0;
    t.b.pc->counters().for_each([&](const char* n, uint64_t x) {
      if (std::strcmp(n, name) == 0) v = x;
    });
    return v;
  }
  bool untouched(size_t from, size_t to) const {
    for (size_t i = from; i < to; ++i)
      if (mem[i] != 0x5a) return false;
    return true;
  }
  // A run judged packet by packet, one packet refused for good: none taken whole, one fatal
  // NAK, the first `written` bytes as sent and nothing after them.
  void expect_refused_after(size_t written) const {
    EXPECT_EQ(ctr("rx_runs_whole"), 0u);
    EXPECT_EQ(ctr("tx_naks_fatal"), 1u);
    EXPECT_EQ(std::memcmp(mem.data(), src.data(), written), 0);
    EXPECT_TRUE(untouched(written, mem.size()));
  }

  CorePair t;
  std::vector<uint8_t> mem, src;
  CorePair::Keys mr;
};

}  // namespace

// FIRST, a run of 6 MIDDLEs, LAST: the run is one copy, and the message lands byte-exact, its
// packets counted one by one.
TEST(Runs, AnInOrderRunIsTakenWhole) {
  RunFixture f;
  const wire::Psn psn = f.epsn();
  f.write_first(8 * kMtu);
  f.run(wire::Opcode::RC_WRITE_MIDDLE, psn + 1, 6, kMtu);
  EXPECT_EQ(f.ctr("rx_runs_whole"), 1u);
  EXPECT_EQ(f.epsn(), psn + 7);
  f.single(wire::Opcode::RC_WRITE_LAST, psn + 7, kMtu, 7 * kMtu);
  EXPECT_EQ(f.epsn(), psn + 8);
  EXPECT_EQ(std::memcmp(f.mem.data(), f.src.data(), 8 * kMtu), 0);
  EXPECT_TRUE(f.untouched(8 * kMtu, f.mem.size()));
  EXPECT_EQ(f.ctr("rx_packets"), 8u);
  EXPECT_EQ(f.t.b.qp->stats.rx_packets, 8u);
  EXPECT_EQ(f.ctr("rx_malformed") + f.ctr("tx_naks_fatal") + f.ctr("rx_duplicate"), 0u);
  EXPECT_EQ(f.t.b.qp->state(), QpState::Rts);
}

// Across the PSN's wrap (2^24): taken whole, the expected PSN wrapped as packets would wrap it.
TEST(Runs, ARunAcrossThePsnWrap) {
  PairOptions o;
  o.psn_a = 0xfffffd;
  RunFixture f(o);
  ASSERT_EQ(f.epsn(), wire::Psn(0xfffffd));
  f.write_first(6 * kMtu);
  f.run(wire::Opcode::RC_WRITE_MIDDLE, wire::Psn(0xfffffe), 4, kMtu);
  EXPECT_EQ(f.ctr("rx_runs_whole"), 1u);
  EXPECT_EQ(f.epsn(), wire::Psn(2));
  f.single(wire::Opcode::RC_WRITE_LAST, wire::Psn(2), kMtu, 5 * kMtu);
  EXPECT_EQ(f.epsn(), wire::Psn(3));
  EXPECT_EQ(std::memcmp(f.mem.data(), f.src.data(), 6 * kMtu), 0);
  EXPECT_EQ(f.ctr("tx_naks_fatal") + f.ctr("rx_duplicate") + f.ctr("rx_out_of_sequence"), 0u);
}

// A SEND's middle packets into a posted receive, and a SEND whose run is longer than the
// receive: judged packet by packet, the receive completes with a length error at the packet
// that overflows, and nothing past the receive's buffer is written.
TEST(Runs, SendRunsFillAReceiveAndStopAtItsEnd) {
  RunFixture f;
  Sge r{uint64_t(f.mem.data()), 5 * kMtu, f.mr.lkey};
  ASSERT_TRUE(f.t.recv(f.t.b, {1, {&r, 1}}));
  const wire::Psn psn = f.epsn();
  f.single(wire::Opcode::RC_SEND_FIRST, psn, kMtu, 0);
  f.run(wire::Opcode::RC_SEND_MIDDLE, psn + 1, 3, kMtu);
  f.single(wire::Opcode::RC_SEND_LAST, psn + 4, 100, 4 * kMtu);
  EXPECT_EQ(f.ctr("rx_runs_whole"), 1u);
  std::vector<Wc> wc;
  ASSERT_TRUE(f.t.wait_wc(f.t.b.rcq, 1, wc));
  EXPECT_EQ(wc[0].status, WcStatus::Success);
  EXPECT_EQ(wc[0].byte_len, 4 * kMtu + 100);
  EXPECT_EQ(std::memcmp(f.mem.data(), f.src.data(), 4 * kMtu + 100), 0);

  RunFixture g;
  Sge r2{uint64_t(g.mem.data()), 3 * kMtu, g.mr.lkey};
  ASSERT_TRUE(g.t.recv(g.t.b, {2, {&r2, 1}}));
  const wire::Psn p2 = g.epsn();
  g.single(wire::Opcode::RC_SEND_FIRST, p2, kMtu, 0);
  g.run(wire::Opcode::RC_SEND_MIDDLE, p2 + 1, 4, kMtu);  // the third MIDDLE overflows
  g.expect_refused_after(3 * kMtu);
  std::vector<Wc> wc2;
  ASSERT_TRUE(g.t.wait_wc(g.t.b.rcq, 1, wc2));
  EXPECT_EQ(wc2[0].status, WcStatus::LocLenErr);
  EXPECT_EQ(wc2[0].byte_len, 3 * kMtu);
}

// Longer than its message's RETH: the packets that fit are written, the one past the end is
// NAKed as an invalid request and nothing after it lands.
TEST(Runs, ARunPastItsMessagesEndIsJudgedPacketByPacket) {
  RunFixture f;
  const wire::Psn psn = f.epsn();
  f.write_first(3 * kMtu);
  f.run(wire::Opcode::RC_WRITE_MIDDLE, psn + 1, 4, kMtu);
  f.expect_refused_after(3 * kMtu);
  EXPECT_EQ(f.t.b.qp->state(), QpState::Err);
}

// Deregistered between FIRST and the run: the key is checked again for the run, which is
// refused at its first packet with nothing written.
TEST(Runs, ARunToAKeyRevokedMidMessageWritesNothing) {
  RunFixture f;
  const wire::Psn psn = f.epsn();
  f.write_first(8 * kMtu);
  ASSERT_TRUE(f.t.b.pc->dereg_mr(verbs::Lkey(f.mr.lkey)));
  f.run(wire::Opcode::RC_WRITE_MIDDLE, psn + 1, 6, kMtu);
  f.expect_refused_after(kMtu);  // the FIRST, before the key went
}

// Ahead of the expected PSN: one sequence NAK for the gap, each packet counted out of
// sequence. Behind it (a duplicate of what was taken): each packet a duplicate, and the bytes
// already written are not written again with the run's.
TEST(Runs, RunsOutOfTheWindowAreNeitherWrittenNorTakenWhole) {
  RunFixture f;
  const wire::Psn psn = f.epsn();
  f.write_first(8 * kMtu);
  f.run(wire::Opcode::RC_WRITE_MIDDLE, psn + 3, 4, kMtu);
  EXPECT_EQ(f.ctr("rx_out_of_sequence"), 4u);
  EXPECT_EQ(f.ctr("tx_naks_seq"), 1u);
  EXPECT_TRUE(f.untouched(kMtu, f.mem.size()));

  f.run(wire::Opcode::RC_WRITE_MIDDLE, psn + 1, 6, kMtu);  // the resend, in sequence
  EXPECT_EQ(f.ctr("rx_runs_whole"), 0u) << "taken one by one right after a sequence NAK";
  EXPECT_EQ(std::memcmp(f.mem.data(), f.src.data(), 7 * kMtu), 0);
  EXPECT_EQ(f.epsn(), psn + 7);

  f.run(wire::Opcode::RC_WRITE_MIDDLE, psn + 1, 6, 32 * kMtu);  // the same PSNs, other bytes
  EXPECT_EQ(f.ctr("rx_duplicate"), 6u);
  EXPECT_EQ(std::memcmp(f.mem.data(), f.src.data(), 7 * kMtu), 0);
  EXPECT_EQ(f.epsn(), psn + 7);
  EXPECT_EQ(f.ctr("tx_naks_fatal"), 0u);
}

// From another address than the QP's peer, or to an address that is not the device's: each
// packet refused, as a stranger's or as not ours, and counted.
TEST(Runs, MisaddressedRunsCountEachPacket) {
  struct Case {
    bool from_stranger;
    const char* counter;
  };
  for (const Case c : {Case{true, "rx_bad_source"}, Case{false, "rx_bad_dest"}}) {
    SCOPED_TRACE(c.counter);
    RunFixture f;
    const wire::Psn psn = f.epsn();
    f.write_first(8 * kMtu);
    wire::FlowAddr flow = f.t.a.qp->flow;
    (c.from_stranger ? flow.src : flow.dst) = Gid::from_ipv4(c.from_stranger ? 0x0a000009 : 0x0a000063);
    f.run(wire::Opcode::RC_WRITE_MIDDLE, psn + 1, 6, kMtu, kMtu, true, &flow);
    EXPECT_EQ(f.ctr(c.counter), 6u);
    EXPECT_EQ(f.epsn(), psn + 1);
    EXPECT_TRUE(f.untouched(kMtu, f.mem.size()));
  }
}

// What no correct sender hands over: too many packets, a payload that does not divide, a run
// of FIRST packets, a run from a link that does not carry packets intact, and packets shorter
// than the path MTU (each then an invalid request of its own, as alone).
TEST(Runs, MalformedRunsAreDroppedAndCounted) {
  RunFixture f;
  const wire::Psn psn = f.epsn();
  f.write_first(40 * kMtu);
  f.run(wire::Opcode::RC_WRITE_MIDDLE, psn + 1, wire::kMaxRunPackets + 1, kMtu, 1024);
  f.run(wire::Opcode::RC_WRITE_MIDDLE, psn + 1, 3, kMtu, 1000);  // whole words, but not the MTU
  EXPECT_EQ(f.ctr("rx_malformed"), 1u) << "17 packets";
  EXPECT_EQ(f.ctr("tx_naks_fatal"), 1u) << "MIDDLEs of 1000 bytes at MTU 1024";
  EXPECT_TRUE(f.untouched(kMtu, f.mem.size()));

  RunFixture g;
  const wire::Psn p2 = g.epsn();
  g.write_first(40 * kMtu);
  g.run(wire::Opcode::RC_WRITE_FIRST, p2 + 1, 2, kMtu);
  g.run(wire::Opcode::RC_WRITE_MIDDLE, p2 + 1, 2, kMtu, kMtu, /*intact=*/false);
  g.run(wire::Opcode::RC_WRITE_MIDDLE, p2 + 1, 2, kMtu, 1022);  // not whole words
  wire::Packet p = g.request(wire::Opcode::RC_WRITE_MIDDLE, p2 + 1);
  uint8_t hdr[64] = {};
  const size_t h = wire::encode_headers(p, hdr);
  const wire::ApartPayload uneven{uint32_t(h), {g.src.data(), 3 * kMtu + 4}, 3};  // does not divide by 3
  wire::Ipv4Fields ip;
  ip.icrc_absent = true;
  g.t.b.pc->on_packet({hdr, h + wire::kIcrcLen}, g.t.a.qp->flow, g.t.sim.now(), ip, &uneven);
  EXPECT_EQ(g.ctr("rx_malformed"), 4u);
  EXPECT_EQ(g.ctr("tx_naks_fatal") + g.ctr("rx_runs_whole"), 0u);
  EXPECT_EQ(g.epsn(), p2 + 1);
  EXPECT_TRUE(g.untouched(kMtu, g.mem.size()));
  g.run(wire::Opcode::RC_WRITE_MIDDLE, p2 + 1, 2, kMtu);  // and the connection goes on
  EXPECT_EQ(g.ctr("rx_runs_whole"), 1u);
  EXPECT_EQ(std::memcmp(g.mem.data(), g.src.data(), 3 * kMtu), 0);
}

// Under selective repeat, and while traced, runs go packet by packet (what they keep per
// packet is theirs), and land the same.
TEST(Runs, SelectiveRepeatAndTracingTakeRunsPacketByPacket) {
  PairOptions o;
  o.reliability = transport::Reliability::Sr;
  RunFixture f(o);
  const wire::Psn psn = f.epsn();
  f.write_first(8 * kMtu);
  f.run(wire::Opcode::RC_WRITE_MIDDLE, psn + 1, 6, kMtu);
  EXPECT_EQ(f.ctr("rx_runs_whole"), 0u);
  EXPECT_EQ(f.epsn(), psn + 7);
  EXPECT_EQ(std::memcmp(f.mem.data(), f.src.data(), 7 * kMtu), 0);

  PairOptions traced;
  int verdicts = 0;
  traced.trace_b = [&](const transport::Qp&, const wire::Packet&, transport::Verdict) { ++verdicts; };
  RunFixture g(traced);
  const wire::Psn p2 = g.epsn();
  g.write_first(8 * kMtu);
  g.run(wire::Opcode::RC_WRITE_MIDDLE, p2 + 1, 6, kMtu);
  EXPECT_EQ(g.ctr("rx_runs_whole"), 0u);
  EXPECT_EQ(verdicts, 7) << "the FIRST and each MIDDLE";
  EXPECT_EQ(std::memcmp(g.mem.data(), g.src.data(), 7 * kMtu), 0);
}
