// Regression tests for what an adversarial review found: duplicated and forged packets with
// correct ICRCs, and requests at the edges of what the wire allows. Each must leave a live
// connection working and memory untouched.
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "../common/core_pair.hpp"
#include "../common/forge.hpp"
#include "../common/seed.hpp"
#include "transport/bringup.hpp"

using namespace uroce;
using namespace uroce::test;

namespace {

constexpr uint32_t kReadLen = 16384;

struct ReadFixture {
  explicit ReadFixture(PairOptions o) : t(o) {
    remote.resize(size_t(kReads) * kReadLen);
    other.assign(kReadLen, 0xee);
    local.assign(remote.size(), 0);
    for (size_t i = 0; i < remote.size(); ++i) remote[i] = uint8_t(splitmix(i) >> 7);
    rmr = t.reg(t.b, remote.data(), remote.size());
    omr = t.reg(t.b, other.data(), other.size());
    lmr = t.reg(t.a, local.data(), local.size());
  }
  Status read(uint64_t id, uint32_t slot, uint32_t len = kReadLen) {
    Sge s{uint64_t(local.data()) + uint64_t(slot) * kReadLen, len, lmr.lkey};
    SendWr w{id, WrOpcode::RdmaRead, kSendSignaled, {&s, 1}};
    w.remote_addr = uint64_t(remote.data()) + uint64_t(slot) * kReadLen;
    w.rkey = rmr.rkey;
    return t.send(t.a, w);
  }
  static constexpr uint32_t kReads = 64;
  CorePair t;
  std::vector<uint8_t> remote, other, local;
  test::CorePair::Keys rmr, omr, lmr;
};

// The API's defaults: 16 READs outstanding, each way.
PairOptions reads_options(uint64_t seed, double dup) {
  PairOptions o;
  o.seed = seed;
  o.faults.duplicate = dup;
  o.max_rd_atomic = 16;
  o.timeout = 8;
  return o;
}

}  // namespace

// Duplicated READ requests are answered from what the responder executed and never count
// against max_dest_rd_atomic: 16 outstanding 16 KiB READs at 1 % duplication all complete.
TEST(Hostile, DuplicatedReadsNeverKillTheConnection) {
  uint64_t dup_reads = 0, completed = 0, replayed = 0;
  for (uint64_t k = 0; k < 20; ++k) {
    const uint64_t seed = test_seed(0xD0D0 + k);
    SCOPED_TRACE("seed=" + std::to_string(seed) + " (rerun with UROCE_TEST_SEED=" + std::to_string(seed) + ")");
    ReadFixture f(reads_options(seed, 0.01));
    for (uint32_t i = 0; i < ReadFixture::kReads; ++i) ASSERT_TRUE(f.read(i, i));
    std::vector<Wc> wcs;
    ASSERT_TRUE(f.t.wait_wc(f.t.a.scq, ReadFixture::kReads, wcs)) << dump_counters(*f.t.b.pc);
    ASSERT_EQ(wcs.size(), ReadFixture::kReads);
    for (uint32_t i = 0; i < ReadFixture::kReads; ++i) {
      EXPECT_EQ(wcs[i].wr_id, i);
      EXPECT_EQ(wcs[i].status, WcStatus::Success) << dump_counters(*f.t.b.pc);
    }
    EXPECT_EQ(f.local, f.remote);
    for (const Wc& w : wcs) completed += w.status == WcStatus::Success;
    replayed += f.t.b.pc->counters().rx_read_dup;
    EXPECT_EQ(f.t.b.pc->counters().tx_naks_fatal, 0u);
    EXPECT_EQ(f.t.b.qp->state(), QpState::Rts);
    dup_reads += f.t.b.pc->counters().rx_duplicate;  // b receives only READ requests
  }
  EXPECT_GT(dup_reads, 0u) << "the link duplicated no READ request: the test tested nothing";
  std::printf("20 seeds: %llu of %u READs completed byte-exact; %llu duplicated requests, %llu answered again\n",
              (unsigned long long)completed, 20 * ReadFixture::kReads, (unsigned long long)dup_reads,
              (unsigned long long)replayed);
}

// A duplicate READ for a range that was never requested (forged, with a correct ICRC and a
// valid rkey) is dropped; it neither leaks memory nor disturbs the next genuine READ.
TEST(Hostile, ForgedDuplicateReadIsDropped) {
  ReadFixture f(reads_options(1, 0));
  ASSERT_TRUE(f.read(1, 0));
  ASSERT_EQ(f.t.one_wc(f.t.a.scq).status, WcStatus::Success);
  uint64_t tx_before = f.t.b.pc->counters().tx_packets;

  wire::Packet p;
  p.bth.opcode = wire::Opcode::RC_READ_REQUEST;
  p.bth.dest_qp = f.t.b.qp->qpn().value();
  p.bth.psn = f.t.b.qp->resp.epsn - 1;  // in the past: a "duplicate"
  p.reth = {uint64_t(f.other.data()), f.omr.rkey, kReadLen};
  f.t.inject(f.t.b, f.t.a, p);
  EXPECT_EQ(f.t.b.pc->counters().rx_dup_unmatched, 1u);
  f.t.sim.run_until([] { return false; }, 1'000'000);
  EXPECT_EQ(f.t.b.pc->counters().tx_packets, tx_before) << "answered a READ nobody asked for";

  ASSERT_TRUE(f.read(2, 1));
  Wc w = f.t.one_wc(f.t.a.scq);
  EXPECT_EQ(w.wr_id, 2u);
  EXPECT_EQ(w.status, WcStatus::Success);
  EXPECT_EQ(0, std::memcmp(f.local.data(), f.remote.data(), 2 * kReadLen));
  EXPECT_EQ(f.t.b.qp->state(), QpState::Rts);
}

// A duplicate of the later part of a READ that was executed is answered from that READ's
// own address, whatever address the duplicate carries beyond the matching one.
TEST(Hostile, DuplicateReadIsAnsweredFromTheOriginalRequest) {
  ReadFixture f(reads_options(1, 0));
  ASSERT_TRUE(f.read(1, 0));
  ASSERT_EQ(f.t.one_wc(f.t.a.scq).status, WcStatus::Success);
  const uint32_t mtu = f.t.b.qp->mtu();
  wire::Packet p;
  p.bth.opcode = wire::Opcode::RC_READ_REQUEST;
  p.bth.dest_qp = f.t.b.qp->qpn().value();
  p.bth.psn = f.t.b.qp->resp.epsn - 2;  // the READ's last two responses
  p.reth = {uint64_t(f.remote.data()) + kReadLen - 2 * mtu, f.rmr.rkey, 2 * mtu};
  f.t.inject(f.t.b, f.t.a, p);
  EXPECT_EQ(f.t.b.pc->counters().rx_read_dup, 1u);
  // The same PSN with a longer length does not match what was executed.
  p.reth.dma_len = 2 * mtu + 1;
  f.t.inject(f.t.b, f.t.a, p);
  EXPECT_EQ(f.t.b.pc->counters().rx_dup_unmatched, 1u);
  EXPECT_EQ(f.t.b.qp->state(), QpState::Rts);
}

namespace {

SendWr write_wr(uint64_t id, Sge& s, uint64_t raddr, uint32_t rkey) {
  SendWr w{id, WrOpcode::RdmaWrite, kSendSignaled, {&s, 1}};
  w.remote_addr = raddr;
  w.rkey = rkey;
  return w;
}

}  // namespace

// A fatal NAK for a request behind a READ leaves after the READ's responses (IBA 9.7.5.2.8):
// the READ completes with its data, the bad WRITE with the NAK's status, the rest is flushed.
TEST(Hostile, FatalNakGoesOutBehindReadResponses) {
  ReadFixture f(reads_options(1, 0));
  ASSERT_TRUE(f.read(1, 0));
  Sge s{uint64_t(f.local.data()) + kReadLen, 64, f.lmr.lkey};
  ASSERT_TRUE(f.t.send(f.t.a, write_wr(2, s, uint64_t(f.remote.data()), f.rmr.rkey ^ 0x4242)));
  std::vector<Wc> wcs;
  ASSERT_TRUE(f.t.wait_wc(f.t.a.scq, 2, wcs));
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::Success);
  EXPECT_EQ(0, std::memcmp(f.local.data(), f.remote.data(), kReadLen));
  EXPECT_EQ(wcs[1].wr_id, 2u);
  EXPECT_EQ(wcs[1].status, WcStatus::RemAccessErr);
  EXPECT_EQ(f.t.a.pc->counters().retransmit_timeouts, 0u);
  EXPECT_EQ(f.t.b.qp->state(), QpState::Err);
  EXPECT_EQ(f.t.a.qp->state(), QpState::Err);
}

// The READ's responses were lost and the responder died of the request behind it: the
// requester reports the NAK's error, not RETRY_EXC_ERR after retrying into a dead QP.
TEST(Hostile, FatalNakBehindLostReadResponsesIsReported) {
  ReadFixture f(reads_options(1, 0));
  ASSERT_TRUE(f.read(1, 0));
  Sge s{uint64_t(f.local.data()) + kReadLen, 64, f.lmr.lkey};
  ASSERT_TRUE(f.t.send(f.t.a, write_wr(2, s, uint64_t(f.remote.data()), f.rmr.rkey ^ 0x4242)));
  const wire::Psn read_psn = f.t.a.qp->req.psn;
  f.t.lose_tx(f.t.a);
  ASSERT_TRUE(f.t.b.pc->modify_qp(*f.t.b.qp, QpAttr{.qp_state = QpState::Err}, kQpState));
  wire::Packet nak;
  nak.bth.opcode = wire::Opcode::RC_ACKNOWLEDGE;
  nak.bth.dest_qp = f.t.a.qp->qpn().value();
  nak.bth.psn = read_psn + kReadLen / f.t.a.qp->mtu();  // the WRITE
  nak.aeth = wire::Aeth::nak(0, wire::NakCode::RemoteAccessError);
  f.t.inject(f.t.a, f.t.b, nak);
  std::vector<Wc> wcs;
  ASSERT_TRUE(f.t.wait_wc(f.t.a.scq, 2, wcs));
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::RemAccessErr);
  EXPECT_EQ(wcs[1].wr_id, 2u);
  EXPECT_EQ(wcs[1].status, WcStatus::WrFlushErr);
  EXPECT_EQ(f.t.a.pc->counters().retransmitted_packets, 0u);
}

// READ responses carry an ACK syndrome; one that carries a NAK is not data.
TEST(Hostile, ReadResponseWithNakSyndromeIsDropped) {
  ReadFixture f(reads_options(1, 0));
  ASSERT_TRUE(f.read(1, 0, 512));
  const wire::Psn psn = f.t.a.qp->req.psn;
  f.t.lose_tx(f.t.a);
  std::vector<uint8_t> forged(512, 0xab);
  wire::Packet r;
  r.bth.opcode = wire::Opcode::RC_READ_RESPONSE_ONLY;
  r.bth.dest_qp = f.t.a.qp->qpn().value();
  r.bth.psn = psn;
  r.aeth = wire::Aeth::nak(0, wire::NakCode::RemoteAccessError);
  r.payload = forged;
  f.t.inject(f.t.a, f.t.b, r);
  EXPECT_EQ(f.t.a.pc->counters().rx_malformed, 1u);
  Wc wc[1];
  EXPECT_EQ(f.t.a.scq->poll(wc), 0);
  EXPECT_EQ(f.local, std::vector<uint8_t>(f.local.size(), 0));
  // The same response with an ACK syndrome is the READ's data.
  r.aeth = wire::Aeth::ack(0);
  f.t.inject(f.t.a, f.t.b, r);
  Wc w = f.t.one_wc(f.t.a.scq);
  EXPECT_EQ(w.status, WcStatus::Success);
  EXPECT_EQ(0, std::memcmp(f.local.data(), forged.data(), forged.size()));
}

// SEND with invalidate may only invalidate a bound type 2 window of the QP it arrives on: one
// naming a region's rkey is refused as an invalid request before a byte is placed.
TEST(Hostile, SendWithInvalidateOfARegionIsRefused) {
  CorePair t;
  std::vector<uint8_t> rb(256, 0);
  auto rm = t.reg(t.b, rb.data(), rb.size());
  Sge r{uint64_t(rb.data()), 256, rm.lkey};
  ASSERT_TRUE(t.recv(t.b, {1, {&r, 1}}));
  uint8_t data[16] = {1, 2, 3};
  wire::Packet p;
  p.bth.opcode = wire::Opcode::RC_SEND_ONLY_INV;
  p.bth.dest_qp = t.b.qp->qpn().value();
  p.bth.psn = t.b.qp->resp.epsn;
  p.ieth = rm.rkey;
  p.payload = data;
  t.inject(t.b, t.a, p);
  EXPECT_EQ(t.b.pc->counters().rx_bad_invalidate, 1u);
  EXPECT_EQ(t.b.pc->counters().tx_naks_fatal, 1u);
  EXPECT_EQ(rb, std::vector<uint8_t>(256, 0));
  Wc w = t.one_wc(t.b.rcq);
  EXPECT_EQ(w.status, WcStatus::RemInvReqErr);
  EXPECT_FALSE(w.with_inv);
  EXPECT_EQ(t.b.qp->state(), QpState::Err);
}

// A bound type 2 window of B's QP grants its range and rights alone; forged requests from a
// third party (A's addresses, in sequence, correct ICRCs) that reach past them, use the rkey
// it had before its last bind, or come after a LOCAL_INV are NAKed and counted, and touch
// nothing.
TEST(Hostile, AWindowGrantsItsRangeAloneAndDiesWhenInvalidated) {
  std::vector<uint8_t> mem(8192, 0x5a);
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    CorePair t;
    auto mr = t.reg(t.b, mem.data(), mem.size(), kAccessLocalWrite | kAccessMwBind);
    auto w = t.b.pc->alloc_mw(t.b.pd, 2);
    ASSERT_TRUE(w);
    const uint32_t old_rkey = w->rkey.value(), rkey = (old_rkey & ~0xffu) | ((old_rkey + 1) & 0xffu);
    MwBind b{w->index(), rkey, mr.lkey, uint64_t(mem.data()) + 4096, 1024, kAccessRemoteWrite};
    SendWr bind{7, WrOpcode::BindMw, kSendSignaled, {}};
    bind.bind = &b;
    ASSERT_TRUE(t.send(t.b, bind));
    Wc bw = t.one_wc(t.b.scq);
    ASSERT_EQ(bw.status, WcStatus::Success);
    EXPECT_EQ(bw.opcode, WcOpcode::BindMw);
    uint8_t data[64];
    std::fill(std::begin(data), std::end(data), 0xc3);
    wire::Packet p;
    p.bth.opcode = wire::Opcode::RC_WRITE_ONLY;
    p.bth.dest_qp = t.b.qp->qpn().value();
    p.bth.psn = t.b.qp->resp.epsn;
    p.payload = data;
    p.reth = {uint64_t(mem.data()) + 4096 + 16, rkey, 64};
    if (round == 0) {  // inside the window: granted
      t.inject(t.b, t.a, p);
      EXPECT_TRUE(all_are(mem.data() + 4096 + 16, 64, 0xc3));
      std::fill(mem.begin(), mem.end(), 0x5a);
      EXPECT_EQ(t.b.pc->counters().tx_naks_fatal, 0u);
      continue;
    }
    if (round == 1) p.reth.va = uint64_t(mem.data()) + 4096 + 1024 - 32;  // past its end, inside the region
    if (round == 2) p.reth.rkey = old_rkey;                              // the rkey before the bind
    if (round == 3) {                                                     // after LOCAL_INV
      SendWr inv{8, WrOpcode::LocalInv, kSendSignaled, {}};
      inv.invalidate_rkey = rkey;
      ASSERT_TRUE(t.send(t.b, inv));
      Wc iw = t.one_wc(t.b.scq);
      ASSERT_EQ(iw.status, WcStatus::Success);
      EXPECT_EQ(iw.opcode, WcOpcode::LocalInv);
    }
    t.inject(t.b, t.a, p);
    EXPECT_EQ(t.b.pc->counters().tx_naks_fatal, 1u);
    EXPECT_EQ(t.b.qp->state(), QpState::Err);
    EXPECT_TRUE(all_are(mem.data(), mem.size(), 0x5a)) << "a refused WRITE touched the region";
  }
}

// A READ longer than 2^31 bytes is an invalid request even where the region is larger: at MTU
// 256 its responses would span 2^23 PSNs, more than PSN comparison can tell apart.
TEST(Hostile, ReadLongerThan2GiBIsRefused) {
  PairOptions o;
  o.mtu = Mtu::Mtu256;
  CorePair t(o);
  const size_t len = (size_t(1) << 31) + (1 << 20);
  void* big = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(big, MAP_FAILED);
  auto mr = t.reg(t.b, big, len);
  uint64_t tx_before = t.b.pc->counters().tx_packets;
  wire::Packet p;
  p.bth.opcode = wire::Opcode::RC_READ_REQUEST;
  p.bth.dest_qp = t.b.qp->qpn().value();
  p.bth.psn = t.b.qp->resp.epsn;
  p.reth = {uint64_t(big), mr.rkey, (1u << 31) + 256};
  t.inject(t.b, t.a, p);
  EXPECT_EQ(t.b.pc->counters().tx_naks_fatal, 1u);
  EXPECT_EQ(t.b.pc->counters().tx_packets, tx_before + 1) << "sent READ responses";
  EXPECT_EQ(t.b.qp->state(), QpState::Err);
  ASSERT_TRUE(t.b.pc->destroy_qp(t.b.qp));
  ASSERT_TRUE(t.b.pc->dereg_mr(verbs::Lkey(mr.lkey)));
  munmap(big, len);
}

// Packets addressed to another IP are not ours, even with a valid QPN and ICRC.
TEST(Hostile, PacketForAnotherAddressIsDropped) {
  CorePair t;
  std::vector<uint8_t> rb(64, 0);
  auto rm = t.reg(t.b, rb.data(), rb.size());
  Sge r{uint64_t(rb.data()), 64, rm.lkey};
  ASSERT_TRUE(t.recv(t.b, {1, {&r, 1}}));
  uint8_t data[8] = {9, 9, 9};
  wire::Packet p;
  p.bth.opcode = wire::Opcode::RC_SEND_ONLY;
  p.bth.dest_qp = t.b.qp->qpn().value();
  p.bth.psn = t.b.qp->resp.epsn;
  p.payload = data;
  wire::FlowAddr f = t.a.qp->flow;
  f.dst = Gid::from_ipv4(kIpB + 7);
  inject_packet(*t.b.pc, f, p, t.sim.now());
  EXPECT_EQ(t.b.pc->counters().rx_bad_dest, 1u);
  EXPECT_EQ(rb, std::vector<uint8_t>(64, 0));
  f.dst = Gid::from_ipv4(kIpB);  // the same packet to the right address is delivered
  inject_packet(*t.b.pc, f, p, t.sim.now());
  EXPECT_EQ(t.one_wc(t.b.rcq).status, WcStatus::Success);
  EXPECT_EQ(rb[0], 9);
}

// QPNs are not handed out in order: knowing one does not tell the next.
TEST(Hostile, QueuePairNumbersAreNotSequential) {
  sim::Sim sim(1, {});
  transport::ProtocolCore& pc = sim.add_core(kIpA);
  verbs::PdHandle pd = *pc.alloc_pd();
  verbs::Cq* cq = *pc.create_cq(16);
  std::vector<uint32_t> qpns;
  for (int i = 0; i < 64; ++i) qpns.push_back((*pc.create_qp(pd, QpType::RC, cq, cq, QpCap{4, 4, 1, 1, 0}, false))->qpn().value());
  int consecutive = 0;
  for (size_t i = 1; i < qpns.size(); ++i) consecutive += qpns[i] == qpns[i - 1] + 1;
  EXPECT_EQ(consecutive, 0);
  std::sort(qpns.begin(), qpns.end());
  EXPECT_EQ(std::adjacent_find(qpns.begin(), qpns.end()), qpns.end()) << "a QPN was handed out twice";
  EXPECT_GE(qpns.front(), 0x10u);
  // Two devices do not draw the same sequence.
  transport::ProtocolCore& other = sim.add_core(kIpB);
  verbs::PdHandle pd2 = *other.alloc_pd();
  verbs::Cq* cq2 = *other.create_cq(16);
  uint32_t q2 = (*other.create_qp(pd2, QpType::RC, cq2, cq2, QpCap{4, 4, 1, 1, 0}, false))->qpn().value();
  EXPECT_EQ(std::count(qpns.begin(), qpns.end(), q2), 0);
}

// A UD datagram is one packet of at most the port MTU; a larger one is dropped and counted.
TEST(Hostile, UdDatagramAboveTheMtuIsDropped) {
  sim::Sim sim(1, {});
  transport::ProtocolCore& pc = sim.add_core(kIpB);
  verbs::PdHandle pd = *pc.alloc_pd();
  verbs::Cq* cq = *pc.create_cq(16);
  transport::Qp* qp = *pc.create_qp(pd, QpType::UD, cq, cq, QpCap{4, 4, 1, 1, 0}, false);
  ASSERT_TRUE(transport::activate_ud(pc, *qp, 0x1234, 0));
  std::vector<uint8_t> rb(kGrhBytes + 65536, 0);
  auto rm = *pc.reg_mr(pd, rb.data(), rb.size(), kAccessLocalWrite);
  Sge r{uint64_t(rb.data()), uint32_t(rb.size()), rm.lkey.value()};
  RecvWr rw{1, {&r, 1}};
  ASSERT_TRUE(pc.post_recv(*qp, {&rw, 1}));
  const uint32_t mtu = mtu_bytes(pc.config().port_mtu);
  std::vector<uint8_t> big(mtu + 1, 0x77);
  wire::Packet p;
  p.bth.opcode = wire::Opcode::UD_SEND_ONLY;
  p.bth.dest_qp = qp->qpn().value();
  p.deth = {0x1234, 0x99};
  p.payload = big;
  auto f = wire::FlowAddr::ipv4(kIpA, kIpB, 0xc000);
  inject_packet(pc, f, p, sim.now());
  EXPECT_EQ(pc.counters().rx_ud_too_long, 1u);
  Wc w[1];
  EXPECT_EQ(cq->poll(w), 0);
  EXPECT_EQ(rb[kGrhBytes], 0);
  p.payload = std::span<const uint8_t>(big).first(mtu);  // exactly the MTU fits
  inject_packet(pc, f, p, sim.now());
  ASSERT_EQ(cq->poll(w), 1);
  EXPECT_EQ(w[0].status, WcStatus::Success);
  EXPECT_EQ(w[0].byte_len, kGrhBytes + mtu);
}
