// Thousands of random RC operations of random sizes (0 B .. 1 MiB) over a link that drops,
// duplicates, reorders and corrupts packets; ATOMIC WRITEs share the atomics' counters, so an
// ATOMIC WRITE executed twice shows in a later atomic's result. Every byte is checked, every WQE must complete
// exactly once, successfully and in order, and the PSN space wraps during the run.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "../common/core_pair.hpp"
#include "../common/seed.hpp"

using namespace uroce;
using namespace uroce::test;

namespace {

constexpr uint32_t kSlots = 16;
constexpr uint32_t kMaxMsg = 1u << 20;

struct Msg {
  WrOpcode op;
  uint32_t len;
  uint64_t add_or_compare = 0, swap = 0, expect_orig = 0;
};

struct LossCase {
  double drop;
  Mtu mtu;
  const char* name;
  transport::Reliability rel = transport::Reliability::Gbn;
  bool xrc = false;  // A an XRC initiator, B a target: receives from B's XRC SRQ
};

class Lossy : public ::testing::TestWithParam<LossCase> {};

TEST_P(Lossy, RandomOpsExactlyOnceInOrder) {
  const LossCase lc = GetParam();
  const uint64_t seed = test_seed(0xC0FFEE + uint64_t(lc.drop * 1000));
  const uint64_t n_msgs = env_count("UROCE_PROTO_MESSAGES", 10000);
  SCOPED_TRACE("seed=" + std::to_string(seed) + " (rerun with UROCE_TEST_SEED=" + std::to_string(seed) + ")");

  PairOptions o;
  o.seed = seed;
  o.faults.drop = lc.drop;
  o.faults.duplicate = lc.drop > 0 ? 0.01 : 0;
  o.faults.reorder = lc.drop > 0 ? 0.02 : 0;
  o.faults.corrupt = lc.drop > 0 ? 0.002 : 0;
  o.mtu = lc.mtu;
  o.psn_a = 0xffffff - 5000;  // the run crosses the 2^24 wrap
  o.psn_b = 0xfffff0;
  o.timeout = 8;              // 1 ms (virtual)
  o.retry_cnt = 7;
  o.cap = QpCap{256, 256, 2, 2, 0};
  o.config = [&](transport::CoreConfig& c) { c.reliability = lc.rel; };
  o.access |= kAccessFlushGlobal;
  o.xrc = lc.xrc;
  CorePair t(o);

  std::vector<uint8_t> a_src(size_t(kSlots) * kMaxMsg), a_dst(size_t(kSlots) * kMaxMsg);
  std::vector<uint8_t> b_recv(size_t(kSlots) * kMaxMsg), b_wr(size_t(kSlots) * kMaxMsg), b_rd(size_t(kSlots) * kMaxMsg);
  alignas(8) uint64_t b_ctr[kSlots] = {};
  uint64_t model[kSlots] = {};
  auto m_as = t.reg(t.a, a_src.data(), a_src.size());
  auto m_ad = t.reg(t.a, a_dst.data(), a_dst.size());
  auto m_br = t.reg(t.b, b_recv.data(), b_recv.size());
  auto m_bw = t.reg(t.b, b_wr.data(), b_wr.size(), kAccessLocalWrite | kAccessRemoteWrite | kAccessFlushGlobal);
  auto m_bd = t.reg(t.b, b_rd.data(), b_rd.size());
  auto m_bc = t.reg(t.b, b_ctr, sizeof b_ctr);

  std::mt19937_64 rng(seed);
  std::vector<Msg> msgs(n_msgs);
  std::vector<uint8_t> expect(kMaxMsg);
  uint64_t posted = 0, completed = 0, recv_expected = 0, recv_seen = 0, bytes = 0;
  std::vector<uint64_t> recv_ids;  // message ids in the order their receives were posted
  const uint64_t slot_bytes = kMaxMsg;

  auto post_one = [&](uint64_t i) {
    Msg& m = msgs[i];
    uint32_t r = uint32_t(rng() % 1000);
    m.op = r < 250 ? WrOpcode::Send : r < 350 ? WrOpcode::SendWithImm : r < 550 ? WrOpcode::RdmaWrite
         : r < 650 ? WrOpcode::RdmaWriteWithImm : r < 850 ? WrOpcode::RdmaRead
         : r < 925 ? WrOpcode::AtomicCmpSwp : r < 970 ? WrOpcode::AtomicFetchAdd
         : r < 990 ? WrOpcode::AtomicWrite : WrOpcode::Flush;
    double lg = std::uniform_real_distribution<double>(0, std::log(double(kMaxMsg) + 1))(rng);
    m.len = std::min<uint32_t>(kMaxMsg, uint32_t(std::exp(lg)) - 1);
    uint32_t slot = uint32_t(i % kSlots);
    uint8_t* src = a_src.data() + slot * slot_bytes;
    SendWr w;
    w.wr_id = i;
    w.opcode = m.op;
    w.send_flags = kSendSignaled;
    w.imm_data = uint32_t(i * 2654435761u);
    Sge sg[2];
    bool atomic = m.op == WrOpcode::AtomicCmpSwp || m.op == WrOpcode::AtomicFetchAdd;
    if (m.op == WrOpcode::AtomicWrite) {  // the next atomic on this counter must see it, once
      m.len = 0;
      w.remote_addr = uint64_t(&b_ctr[slot]);
      w.rkey = m_bc.rkey;
      w.compare_add = rng();
      model[slot] = w.compare_add;
    } else if (m.op == WrOpcode::Flush) {  // what the WRITEs to this slot placed, or the region
      w.remote_addr = uint64_t(b_wr.data() + slot * slot_bytes);
      w.rkey = m_bw.rkey;
      w.flush_length = m.len;
      w.flush_level = rng() & 1 ? FlushLevel::Range : FlushLevel::Region;
      m.len = 0;
    } else if (atomic) {
      m.len = 8;
      sg[0] = {uint64_t(a_dst.data() + slot * slot_bytes), 8, m_ad.lkey};
      w.sg_list = {sg, 1};
      w.remote_addr = uint64_t(&b_ctr[slot]);
      w.rkey = m_bc.rkey;
      m.expect_orig = model[slot];
      if (m.op == WrOpcode::AtomicFetchAdd) {
        m.add_or_compare = rng() % 1000;
        model[slot] += m.add_or_compare;
      } else {
        m.add_or_compare = rng() & 1 ? model[slot] : model[slot] + 1;
        m.swap = rng();
        if (m.add_or_compare == model[slot]) model[slot] = m.swap;
      }
      w.compare_add = m.add_or_compare;
      w.swap = m.swap;
    } else {
      uint8_t* local = m.op == WrOpcode::RdmaRead ? a_dst.data() + slot * slot_bytes : src;
      uint32_t cut = m.len ? uint32_t(rng() % (m.len + 1)) : 0;  // split over two SGEs
      uint32_t key = m.op == WrOpcode::RdmaRead ? m_ad.lkey : m_as.lkey;
      sg[0] = {uint64_t(local), cut, key};
      sg[1] = {uint64_t(local + cut), m.len - cut, key};
      w.sg_list = {sg, 2};
      if (m.op == WrOpcode::RdmaRead) {
        fill_pattern(b_rd.data() + slot * slot_bytes, m.len, i);
        std::memset(local, 0, m.len);
        w.remote_addr = uint64_t(b_rd.data() + slot * slot_bytes);
        w.rkey = m_bd.rkey;
      } else {
        fill_pattern(src, m.len, i);
      }
      if (m.op == WrOpcode::RdmaWrite || m.op == WrOpcode::RdmaWriteWithImm) {
        w.remote_addr = uint64_t(b_wr.data() + slot * slot_bytes);
        w.rkey = m_bw.rkey;
      }
      if (m.op == WrOpcode::Send || m.op == WrOpcode::SendWithImm || m.op == WrOpcode::RdmaWriteWithImm) {
        Sge rs{uint64_t(b_recv.data() + slot * slot_bytes), kMaxMsg, m_br.lkey};
        ASSERT_TRUE(t.recv(t.b, {i, {&rs, 1}}));
        recv_ids.push_back(i);
        ++recv_expected;
      }
    }
    bytes += m.len;
    auto st = t.send(t.a, w);
    ASSERT_TRUE(st) << st.error().message;
  };

  auto check_recv = [&](const Wc& rw) {
    ASSERT_LT(recv_seen, recv_ids.size());
    uint64_t i = recv_ids[recv_seen++];
    const Msg& m = msgs[i];
    ASSERT_EQ(rw.wr_id, i);
    ASSERT_EQ(rw.status, WcStatus::Success) << to_string(rw.status);
    ASSERT_EQ(rw.byte_len, m.len);
    bool imm = m.op != WrOpcode::Send;
    ASSERT_EQ(rw.with_imm, imm);
    if (imm) {
      ASSERT_EQ(rw.imm_data, uint32_t(i * 2654435761u));
    }
    ASSERT_EQ(rw.opcode, m.op == WrOpcode::RdmaWriteWithImm ? WcOpcode::RecvRdmaWithImm : WcOpcode::Recv);
    if (m.op != WrOpcode::RdmaWriteWithImm) {
      fill_pattern(expect.data(), m.len, i);
      ASSERT_EQ(0, std::memcmp(expect.data(), b_recv.data() + (i % kSlots) * slot_bytes, m.len)) << "recv data of msg " << i;
    }
  };

  auto check_send = [&](const Wc& wc) {
    uint64_t i = completed;
    const Msg& m = msgs[i];
    ASSERT_EQ(wc.wr_id, i) << "completion out of order or repeated";
    ASSERT_EQ(wc.status, WcStatus::Success) << to_string(wc.status) << " msg " << i << " (opcode " << int(m.op) << ", "
                                            << m.len << " B) A: " << dump_counters(*t.a.pc) << " B: " << dump_counters(*t.b.pc);
    uint32_t slot = uint32_t(i % kSlots);
    switch (m.op) {
      case WrOpcode::RdmaWrite:
      case WrOpcode::RdmaWriteWithImm:
        fill_pattern(expect.data(), m.len, i);
        ASSERT_EQ(0, std::memcmp(expect.data(), b_wr.data() + slot * slot_bytes, m.len)) << "write data of msg " << i;
        break;
      case WrOpcode::RdmaRead:
        fill_pattern(expect.data(), m.len, i);
        ASSERT_EQ(0, std::memcmp(expect.data(), a_dst.data() + slot * slot_bytes, m.len)) << "read data of msg " << i;
        ASSERT_EQ(wc.byte_len, m.len);
        break;
      case WrOpcode::AtomicCmpSwp:
      case WrOpcode::AtomicFetchAdd: {
        uint64_t got;
        std::memcpy(&got, a_dst.data() + slot * slot_bytes, 8);
        ASSERT_EQ(got, m.expect_orig) << "atomic result of msg " << i;
        break;
      }
      case WrOpcode::Send:
      case WrOpcode::SendWithImm:
        break;
      case WrOpcode::AtomicWrite:
      case WrOpcode::Flush:
        ASSERT_EQ(wc.opcode, m.op == WrOpcode::Flush ? WcOpcode::Flush : WcOpcode::AtomicWrite);
        break;
      case WrOpcode::SendWithInv:
      case WrOpcode::BindMw:
      case WrOpcode::LocalInv:
        FAIL() << "the random mix posts no memory window operations";
    }
    ++completed;
  };

  const uint64_t kWindow = kSlots;
  uint64_t guard = 0;
  while (completed < n_msgs) {
    ASSERT_LT(++guard, n_msgs * 1000) << "no progress";
    while (posted < n_msgs && posted - completed < kWindow) {
      post_one(posted++);
      if (HasFatalFailure()) return;
    }
    std::vector<Wc> got;
    ASSERT_TRUE(t.wait_wc(t.a.scq, 1, got, 60'000'000'000ull))
        << "stalled at msg " << completed << " " << dump_counters(*t.a.pc) << " | " << dump_counters(*t.b.pc);
    Wc rw[64];
    int k;
    while ((k = t.b.rcq->poll(rw)) > 0)
      for (int j = 0; j < k; ++j) {
        check_recv(rw[j]);
        if (HasFatalFailure()) return;
      }
    for (const Wc& wc : got) {
      check_send(wc);
      if (HasFatalFailure()) return;
    }
  }
  t.sim.run_until([] { return false; }, 100'000'000);  // drain: nothing more may complete
  Wc extra[4];
  EXPECT_EQ(t.a.scq->poll(extra), 0);
  int k;
  while ((k = t.b.rcq->poll(extra)) > 0)
    for (int j = 0; j < k; ++j) check_recv(extra[j]);
  EXPECT_EQ(recv_seen, recv_expected);
  for (uint32_t s = 0; s < kSlots; ++s) EXPECT_EQ(b_ctr[s], model[s]) << "counter " << s;
  EXPECT_LT(t.a.qp->req.psn.value(), 0xffffff - 5000u) << "PSN did not wrap";
  EXPECT_EQ(t.a.qp->state(), QpState::Rts);
  const auto& ls = t.sim.link().stats();
  if (lc.drop > 0) {
    EXPECT_GT(ls.dropped, 0u);
    EXPECT_GT(t.a.pc->counters().retransmitted_packets + t.b.pc->counters().rx_read_dup, 0u);
    EXPECT_EQ(t.a.pc->counters().rx_bad_icrc + t.b.pc->counters().rx_bad_icrc, ls.corrupted);
  } else {
    EXPECT_EQ(ls.dropped, 0u);
    EXPECT_EQ(t.a.pc->counters().retransmitted_packets, 0u);
  }
  if (lc.rel == transport::Reliability::Sr && lc.drop > 0) {  // holes were reported, never NAKed
    EXPECT_GT(t.b.pc->counters().rx_sr_held, 0u);
    EXPECT_GT(t.a.pc->counters().rx_sacks, 0u);
    // Chosen for the device, selective repeat is taken from the first request in sequence
    // that announces it: a loss before that costs one PSN-sequence NAK, as go-back-N has it.
    EXPECT_LE(t.b.pc->counters().tx_naks_seq, 1u);
  }
  // Each side has one QP: its counters are the device's, less what the device dropped before
  // a packet was the QP's (the uroce command's per-QP view).
  for (const auto* side : {&t.a, &t.b}) {
    const auto& d = side->pc->counters();
    const auto& q = side->qp->stats;
    EXPECT_EQ(q.tx_packets, d.tx_packets);
    EXPECT_EQ(q.tx_bytes, d.tx_bytes);
    EXPECT_EQ(q.retransmitted_packets, d.retransmitted_packets);
    EXPECT_EQ(q.retransmit_timeouts, d.retransmit_timeouts);
    EXPECT_EQ(q.tx_naks, d.tx_naks_seq + d.tx_naks_fatal);
    EXPECT_EQ(q.tx_rnr_naks, d.tx_rnr_naks);
    EXPECT_EQ(q.rx_rnr_naks, d.rx_rnr_naks);
    EXPECT_GE(q.rx_naks, d.rx_naks_seq);
    const uint64_t dropped = d.rx_runt + d.rx_bad_dest + d.rx_bad_icrc + d.rx_malformed + d.rx_unknown_qp +
                             d.rx_bad_pkey + d.rx_bad_opcode + d.rx_bad_source + d.rx_wrong_state;
    EXPECT_EQ(q.rx_packets, d.rx_packets - dropped);
    EXPECT_GT(q.rx_packets, 0u);
  }
  // The peer's own requests never conflict with each other, nor fail to fit where held.
  EXPECT_EQ(t.b.pc->counters().rx_sr_conflicts, 0u);
  EXPECT_EQ(t.b.pc->counters().rx_sr_unfit, 0u);
  std::printf("[ %s ] %llu msgs, %.1f MB, link sent=%llu dropped=%llu dup=%llu reord=%llu corrupt=%llu\n  A: %s\n  B: %s\n",
              lc.name, (unsigned long long)n_msgs, bytes / 1e6, (unsigned long long)ls.sent,
              (unsigned long long)ls.dropped, (unsigned long long)ls.duplicated, (unsigned long long)ls.reordered,
              (unsigned long long)ls.corrupted, dump_counters(*t.a.pc).c_str(), dump_counters(*t.b.pc).c_str());
}

INSTANTIATE_TEST_SUITE_P(Drop, Lossy,
                         ::testing::Values(LossCase{0.0, Mtu::Mtu1024, "drop0"}, LossCase{0.01, Mtu::Mtu4096, "drop1"},
                                           LossCase{0.05, Mtu::Mtu2048, "drop5"}),
                         [](const auto& info) { return std::string(info.param.name); });

// The same under selective repeat, up to 10% loss.
INSTANTIATE_TEST_SUITE_P(SelectiveRepeat, Lossy,
                         ::testing::Values(LossCase{0.0, Mtu::Mtu1024, "sr_drop0", transport::Reliability::Sr},
                                           LossCase{0.01, Mtu::Mtu4096, "sr_drop1", transport::Reliability::Sr},
                                           LossCase{0.05, Mtu::Mtu1024, "sr_drop5", transport::Reliability::Sr},
                                           LossCase{0.10, Mtu::Mtu2048, "sr_drop10", transport::Reliability::Sr}),
                         [](const auto& info) { return std::string(info.param.name); });

// XRC: the same operations from an initiator to a target QP, every receive from its XRC SRQ.
INSTANTIATE_TEST_SUITE_P(Xrc, Lossy,
                         ::testing::Values(LossCase{0.0, Mtu::Mtu1024, "xrc_drop0", transport::Reliability::Gbn, true},
                                           LossCase{0.02, Mtu::Mtu2048, "xrc_drop2", transport::Reliability::Gbn, true}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
