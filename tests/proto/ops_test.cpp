// Every RC operation over the simulated link, byte-exact, with exact completions.
#include <gtest/gtest.h>

#include <numeric>

#include "../common/core_pair.hpp"

using namespace uroce;
using namespace uroce::test;

namespace {
std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(seed + i * 7 + (i >> 8));
  return v;
}
}  // namespace

TEST(RcOps, SendRecvSingleAndMultiPacket) {
  for (size_t len : {0ul, 1ul, 1023ul, 1024ul, 1025ul, 5000ul, 65536ul}) {
    SCOPED_TRACE(len);
    CorePair t;
    auto src = pattern(len + 1, 3);
    src.pop_back();
    std::vector<uint8_t> dst(len + 16, 0xee);
    src.reserve(len + 1);
    auto smr = t.reg(t.a, src.data(), len + 1);
    auto rmr = t.reg(t.b, dst.data(), dst.size());
    Sge rs{uint64_t(dst.data()), uint32_t(dst.size()), rmr.lkey};
    ASSERT_TRUE(t.recv(t.b, {77, {&rs, 1}}));
    Sge ss{uint64_t(src.data()), uint32_t(len), smr.lkey};
    ASSERT_TRUE(t.send(t.a, {11, WrOpcode::Send, kSendSignaled, {&ss, 1}}));
    Wc sw = t.one_wc(t.a.scq);
    EXPECT_EQ(sw.status, WcStatus::Success);
    EXPECT_EQ(sw.wr_id, 11u);
    EXPECT_EQ(sw.opcode, WcOpcode::Send);
    Wc rw = t.one_wc(t.b.rcq);
    EXPECT_EQ(rw.status, WcStatus::Success);
    EXPECT_EQ(rw.wr_id, 77u);
    EXPECT_EQ(rw.opcode, WcOpcode::Recv);
    EXPECT_EQ(rw.byte_len, len);
    EXPECT_FALSE(rw.with_imm);
    EXPECT_EQ(rw.src_qp, t.a.qp->qpn().value());
    EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin()));
    EXPECT_EQ(dst[len], 0xee);  // nothing written past the message
  }
}

TEST(RcOps, SendWithImmScatterGatherAndInline) {
  CorePair t;
  auto src = pattern(3000, 9);
  std::vector<uint8_t> d1(1000), d2(1500), d3(600);
  auto smr = t.reg(t.a, src.data(), src.size());
  auto m1 = t.reg(t.b, d1.data(), d1.size());
  auto m2 = t.reg(t.b, d2.data(), d2.size());
  auto m3 = t.reg(t.b, d3.data(), d3.size());
  Sge rs[3] = {{uint64_t(d1.data()), 1000, m1.lkey}, {uint64_t(d2.data()), 1500, m2.lkey},
               {uint64_t(d3.data()), 600, m3.lkey}};
  ASSERT_TRUE(t.recv(t.b, {1, rs}));
  Sge ss[2] = {{uint64_t(src.data()), 1200, smr.lkey}, {uint64_t(src.data() + 1200), 1800, smr.lkey}};
  ASSERT_TRUE(t.send(t.a, {2, WrOpcode::SendWithImm, kSendSignaled | kSendSolicited, ss, 0xdeadbeef}));
  Wc rw = t.one_wc(t.b.rcq);
  EXPECT_EQ(rw.status, WcStatus::Success);
  EXPECT_EQ(rw.byte_len, 3000u);
  EXPECT_TRUE(rw.with_imm);
  EXPECT_EQ(rw.imm_data, 0xdeadbeefu);
  EXPECT_TRUE(rw.solicited);
  std::vector<uint8_t> got(d1);
  got.insert(got.end(), d2.begin(), d2.end());
  got.insert(got.end(), d3.begin(), d3.begin() + 500);
  EXPECT_EQ(got, src);
  EXPECT_EQ(t.one_wc(t.a.scq).status, WcStatus::Success);

  // Inline: the source buffer needs no registration and may change right after posting.
  char msg[40] = "inline payload, no lkey needed";
  Sge is{uint64_t(msg), 31, 0};
  ASSERT_TRUE(t.recv(t.b, {3, {rs, 1}}));
  ASSERT_TRUE(t.send(t.a, {4, WrOpcode::Send, kSendSignaled | kSendInline, {&is, 1}}));
  std::memset(msg, 0, sizeof msg);
  Wc r2 = t.one_wc(t.b.rcq);
  EXPECT_EQ(r2.byte_len, 31u);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(d1.data()), 30), "inline payload, no lkey needed");
}

TEST(RcOps, RdmaWriteAndWriteWithImm) {
  CorePair t;
  auto src = pattern(10000, 5);
  std::vector<uint8_t> dst(12000, 0);
  auto smr = t.reg(t.a, src.data(), src.size());
  auto dmr = t.reg(t.b, dst.data(), dst.size());
  Sge ss{uint64_t(src.data()), 10000, smr.lkey};
  SendWr w{5, WrOpcode::RdmaWrite, kSendSignaled, {&ss, 1}};
  w.remote_addr = uint64_t(dst.data()) + 1000;
  w.rkey = dmr.rkey;
  ASSERT_TRUE(t.send(t.a, w));
  Wc c = t.one_wc(t.a.scq);
  EXPECT_EQ(c.status, WcStatus::Success);
  EXPECT_EQ(c.opcode, WcOpcode::RdmaWrite);
  EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin() + 1000));
  EXPECT_EQ(dst[999], 0);
  EXPECT_EQ(dst[11000], 0);
  EXPECT_EQ(t.b.rcq->pending(), 0u);  // a plain WRITE consumes no receive

  ASSERT_TRUE(t.recv(t.b, {9, {}}));
  w.opcode = WrOpcode::RdmaWriteWithImm;
  w.imm_data = 0x1234;
  w.remote_addr = uint64_t(dst.data());
  ss.length = 3000;
  ASSERT_TRUE(t.send(t.a, w));
  Wc r = t.one_wc(t.b.rcq);
  EXPECT_EQ(r.status, WcStatus::Success);
  EXPECT_EQ(r.opcode, WcOpcode::RecvRdmaWithImm);
  EXPECT_EQ(r.imm_data, 0x1234u);
  EXPECT_EQ(r.byte_len, 3000u);
  EXPECT_TRUE(std::equal(src.begin(), src.begin() + 3000, dst.begin()));
}

TEST(RcOps, RdmaReadMultiPacket) {
  CorePair t;
  auto remote = pattern(70000, 1);
  std::vector<uint8_t> local(70000, 0);
  auto rmr = t.reg(t.b, remote.data(), remote.size(), kAccessRemoteRead);
  auto lmr = t.reg(t.a, local.data(), local.size());
  Sge s[2] = {{uint64_t(local.data()), 30000, lmr.lkey}, {uint64_t(local.data() + 30000), 40000, lmr.lkey}};
  SendWr w{6, WrOpcode::RdmaRead, kSendSignaled, s};
  w.remote_addr = uint64_t(remote.data());
  w.rkey = rmr.rkey;
  ASSERT_TRUE(t.send(t.a, w));
  Wc c = t.one_wc(t.a.scq);
  EXPECT_EQ(c.status, WcStatus::Success);
  EXPECT_EQ(c.opcode, WcOpcode::RdmaRead);
  EXPECT_EQ(c.byte_len, 70000u);
  EXPECT_EQ(local, remote) << dump_counters(*t.a.pc) << "\n" << dump_counters(*t.b.pc);
}

// The responder streams a READ's response packets in one progress pass, up to the per-QP budget
// (32 packets of MTU 4096: 128 at MTU 1024), rather than one packet per pass.
TEST(RcOps, ReadResponsesGoOutInOnePass) {
  CorePair t;  // MTU 1024
  auto remote = pattern(256 * 1024, 3);
  std::vector<uint8_t> local(remote.size(), 0);
  auto rmr = t.reg(t.b, remote.data(), remote.size(), kAccessRemoteRead);
  auto lmr = t.reg(t.a, local.data(), local.size());
  Sge s{uint64_t(local.data()), uint32_t(local.size()), lmr.lkey};
  SendWr w{7, WrOpcode::RdmaRead, kSendSignaled, {&s, 1}};
  w.remote_addr = uint64_t(remote.data());
  w.rkey = rmr.rkey;
  ASSERT_TRUE(t.send(t.a, w));
  ASSERT_TRUE(t.sim.run_until([&] { return t.b.pc->counters().tx_packets > 0; }, 1'000'000'000));
  EXPECT_EQ(t.b.pc->counters().tx_packets, 128u);  // 256 response packets: the first pass sends 128
  Wc c = t.one_wc(t.a.scq);
  EXPECT_EQ(c.status, WcStatus::Success);
  EXPECT_EQ(t.b.pc->counters().tx_packets, 256u);
  EXPECT_EQ(local, remote);
}

TEST(RcOps, AtomicsCompareSwapAndFetchAdd) {
  CorePair t;
  alignas(8) uint64_t remote[2] = {100, 7};
  alignas(8) uint64_t result = 0;
  auto rmr = t.reg(t.b, remote, sizeof remote);
  auto lmr = t.reg(t.a, &result, 8);
  Sge s{uint64_t(&result), 8, lmr.lkey};
  SendWr w{1, WrOpcode::AtomicFetchAdd, kSendSignaled, {&s, 1}};
  w.remote_addr = uint64_t(&remote[0]);
  w.rkey = rmr.rkey;
  w.compare_add = 5;
  ASSERT_TRUE(t.send(t.a, w));
  Wc c = t.one_wc(t.a.scq);
  EXPECT_EQ(c.status, WcStatus::Success);
  EXPECT_EQ(c.opcode, WcOpcode::FetchAdd);
  EXPECT_EQ(result, 100u);
  EXPECT_EQ(remote[0], 105u);

  w.opcode = WrOpcode::AtomicCmpSwp;
  w.remote_addr = uint64_t(&remote[1]);
  w.compare_add = 7;   // matches: swapped
  w.swap = 99;
  ASSERT_TRUE(t.send(t.a, w));
  EXPECT_EQ(t.one_wc(t.a.scq).opcode, WcOpcode::CompSwap);
  EXPECT_EQ(result, 7u);
  EXPECT_EQ(remote[1], 99u);
  w.compare_add = 7;   // no longer matches: unchanged, old value returned
  w.swap = 1;
  ASSERT_TRUE(t.send(t.a, w));
  EXPECT_EQ(t.one_wc(t.a.scq).status, WcStatus::Success);
  EXPECT_EQ(result, 99u);
  EXPECT_EQ(remote[1], 99u);
}

TEST(RcOps, UnsignaledCompletionsAndFence) {
  CorePair t;
  alignas(8) uint64_t counter = 0, res = 0;
  std::vector<uint8_t> buf(64);
  auto rmr = t.reg(t.b, &counter, 8);
  auto lmr = t.reg(t.a, &res, 8);
  auto bmr = t.reg(t.a, buf.data(), buf.size());
  auto dmr = t.reg(t.b, buf.data(), 0);  // zero-length region: WRITE of 0 bytes needs no rkey check
  (void)dmr;
  Sge s{uint64_t(&res), 8, lmr.lkey};
  for (int i = 0; i < 10; ++i) {
    SendWr w{uint64_t(i), WrOpcode::AtomicFetchAdd, i == 9 ? uint32_t(kSendSignaled) : 0u, {&s, 1}};
    w.remote_addr = uint64_t(&counter);
    w.rkey = rmr.rkey;
    w.compare_add = 1;
    ASSERT_TRUE(t.send(t.a, w));
  }
  Sge bs{uint64_t(buf.data()), 0, bmr.lkey};
  SendWr z{100, WrOpcode::RdmaWrite, kSendSignaled | kSendFence, {&bs, 1}};
  ASSERT_TRUE(t.send(t.a, z));
  std::vector<Wc> wcs;
  ASSERT_TRUE(t.wait_wc(t.a.scq, 2, wcs));
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].wr_id, 9u);
  EXPECT_EQ(wcs[1].wr_id, 100u);
  EXPECT_EQ(counter, 10u);
  EXPECT_EQ(res, 9u);
}

TEST(RcOps, PsnWraparound) {
  PairOptions o;
  o.psn_a = 0xfffff0;
  o.psn_b = 0xfffffe;
  CorePair t(o);
  auto src = pattern(40 * 1024, 2);
  std::vector<uint8_t> dst(src.size());
  auto smr = t.reg(t.a, src.data(), src.size());
  auto dmr = t.reg(t.b, dst.data(), dst.size());
  for (int round = 0; round < 3; ++round) {
    Sge rs{uint64_t(dst.data()), uint32_t(dst.size()), dmr.lkey};
    ASSERT_TRUE(t.recv(t.b, {uint64_t(round), {&rs, 1}}));
    Sge ss{uint64_t(src.data()), uint32_t(src.size()), smr.lkey};
    ASSERT_TRUE(t.send(t.a, {uint64_t(round), WrOpcode::Send, kSendSignaled, {&ss, 1}}));
    EXPECT_EQ(t.one_wc(t.a.scq).status, WcStatus::Success);
    Wc r = t.one_wc(t.b.rcq);
    EXPECT_EQ(r.byte_len, src.size());
    EXPECT_EQ(dst, src);
    std::fill(dst.begin(), dst.end(), 0);
  }
  EXPECT_LT(t.a.qp->req.psn.value(), 0x100u);  // crossed 2^24
}

TEST(RcOps, LargeMessage64MiB) {
  PairOptions o;
  o.mtu = Mtu::Mtu4096;
  CorePair t(o);
  const size_t n = 64u << 20;
  std::vector<uint8_t> src(n), dst(n, 0);
  for (size_t i = 0; i < n; i += 4096) src[i] = uint8_t(i >> 12), src[i + 4095] = uint8_t(~(i >> 12));
  auto smr = t.reg(t.a, src.data(), n);
  auto dmr = t.reg(t.b, dst.data(), n);
  Sge s{uint64_t(src.data()), uint32_t(n), smr.lkey};
  SendWr w{1, WrOpcode::RdmaWrite, kSendSignaled, {&s, 1}};
  w.remote_addr = uint64_t(dst.data());
  w.rkey = dmr.rkey;
  ASSERT_TRUE(t.send(t.a, w));
  Wc c = t.one_wc(t.a.scq, 100'000'000'000ull);
  EXPECT_EQ(c.status, WcStatus::Success);
  EXPECT_EQ(c.byte_len, n);
  EXPECT_TRUE(src == dst);
  EXPECT_EQ(t.a.pc->counters().tx_packets, n / 4096);
}

TEST(RcOps, SqdFinishesTheCurrentMessageThenHolds) {
  CorePair t;
  constexpr uint32_t kLen = 300000;  // 293 packets at MTU 1024: more than a pass sends (128)
  std::vector<uint8_t> src(kLen, 7), dst(kLen, 0);
  auto smr = t.reg(t.a, src.data(), src.size());
  auto dmr = t.reg(t.b, dst.data(), dst.size());
  Sge s{uint64_t(src.data()), kLen, smr.lkey};
  SendWr w{1, WrOpcode::RdmaWrite, kSendSignaled, {&s, 1}};
  w.remote_addr = uint64_t(dst.data());
  w.rkey = dmr.rkey;
  ASSERT_TRUE(t.send(t.a, w));
  w.wr_id = 2;
  ASSERT_TRUE(t.send(t.a, w));
  t.sim.step();  // the first message is partly sent
  ASSERT_GT(t.a.qp->req.pkt, 0u);
  QpAttr a;
  a.qp_state = QpState::Sqd;
  ASSERT_TRUE(t.a.pc->modify_qp(*t.a.qp, a, kQpState));
  std::vector<Wc> wc;
  t.wait_wc(t.a.scq, 2, wc, 50'000'000);
  ASSERT_EQ(wc.size(), 1u);  // the started message completes, the next one waits
  EXPECT_EQ(wc[0].wr_id, 1u);
  EXPECT_EQ(wc[0].status, WcStatus::Success);
  a.qp_state = QpState::Rts;
  ASSERT_TRUE(t.a.pc->modify_qp(*t.a.qp, a, kQpState));
  ASSERT_TRUE(t.wait_wc(t.a.scq, 2, wc));
  EXPECT_EQ(wc[1].wr_id, 2u);
}
