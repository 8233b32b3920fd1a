// Tag matching SRQs: list operations, eager messages matched and unexpected, the phase count,
// messages without a tag, rendezvous (the responder's READ and FIN), and what a peer's bad
// headers get.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "../common/core_pair.hpp"
#include "../common/seed.hpp"
#include "transport/bringup.hpp"
#include "transport/tag_matching.hpp"
#include "wire/bytes.hpp"

using namespace uroce;
using namespace uroce::test;

namespace {

constexpr uint32_t kBuf = 1024;  // each tagged buffer and ordinary receive

struct TmSetup {
  explicit TmSetup(uint64_t seed = 7, sim::FaultConfig f = {}, std::optional<Reliability> rel = {})
      : sim(seed, f) {
    a = &sim.add_core(kIpA);
    b = &sim.add_core(kIpB);
    pa = *a->alloc_pd();
    pb = *b->alloc_pd();
    cqa = *a->create_cq(4096);
    cqb = *b->create_cq(4096);
    other_cq = *b->create_cq(16);
    srq = *b->create_tm_srq(pb, cqb, 256, 1, 64, 16);
    qa = *a->create_qp(pa, QpType::RC, cqa, cqa, QpCap{64, 64, 1, 1, 0}, false);
    // As pyverbs makes it: no send queue of its own; rendezvous WQEs have slots kept for them.
    qb = *b->create_qp(pb, QpType::RC, other_cq, other_cq, QpCap{0, 0, 0, 0, 0}, false, srq);
    if (rel) {
      EXPECT_TRUE(a->set_reliability(*qa, *rel));
      EXPECT_TRUE(b->set_reliability(*qb, *rel));
    }
    ConnectOptions o;
    o.timeout = 8;
    o.path_mtu = Mtu::Mtu1024;
    Endpoint to_b{Gid::from_ipv4(kIpB), qb->qpn().value(), 500, 0, 0, 0}, to_a{Gid::from_ipv4(kIpA), qa->qpn().value(), 100, 0, 0, 0};
    EXPECT_TRUE(transport::connect_rc(*a, *qa, to_b, 100, o));
    EXPECT_TRUE(transport::connect_rc(*b, *qb, to_a, 500, o));
    src.assign(128 * 1024, 0);
    fin.assign(4096, 0);
    dst.assign(256 * kBuf, 0);
    msa = *a->reg_mr(pa, src.data(), src.size(), kAccessLocalWrite | kAccessRemoteRead);
    mfa = *a->reg_mr(pa, fin.data(), fin.size(), kAccessLocalWrite);
    mdb = *b->reg_mr(pb, dst.data(), dst.size(), kAccessLocalWrite);
  }
  Sge slot(uint32_t i, uint32_t len = kBuf) { return Sge{uint64_t(dst.data() + i * kBuf), len, mdb.lkey.value()}; }
  // ADD of a tag whose buffer starts at slot i (len bytes); returns its handle. Its message
  // completes with recv_wr_id (default: i), the ADD itself with 1000 + i.
  uint32_t add(uint64_t tag, uint32_t i, uint64_t mask = ~0ull, uint32_t flags = kTmOpSignaled, uint32_t len = kBuf,
               std::optional<uint64_t> recv_wr_id = {}) {
    Sge s = slot(i, len);
    TmOp op;
    op.wr_id = 1000 + i;
    op.opcode = TmOpcode::Add;
    op.flags = flags;
    op.recv_wr_id = recv_wr_id.value_or(i);
    op.sg_list = {&s, 1};
    op.tag = tag;
    op.mask = mask;
    auto st = b->post_srq_ops(*srq, {&op, 1});
    EXPECT_TRUE(st) << st.error().message;
    return op.handle;
  }
  Status op(TmOpcode code, uint32_t flags, uint32_t handle = 0, uint32_t unexpected = 0) {
    TmOp o;
    o.wr_id = 77;
    o.opcode = code;
    o.flags = flags;
    o.handle = handle;
    o.unexpected_cnt = unexpected;
    return b->post_srq_ops(*srq, {&o, 1});
  }
  void post_srq(uint32_t first, uint32_t n) {
    for (uint32_t i = first; i < first + n; ++i) {
      Sge s = slot(i);
      RecvWr r{i, {&s, 1}};
      ASSERT_TRUE(b->post_srq_recv(*srq, {&r, 1}));
    }
  }
  void post_fin_recv(uint64_t wr_id) {
    Sge s{uint64_t(fin.data()), 64, mfa.lkey.value()};
    RecvWr r{wr_id, {&s, 1}};
    ASSERT_TRUE(a->post_recv(*qa, {&r, 1}));
  }
  // A TMH at src[at]; then the pattern of message m up to len bytes.
  uint32_t message(uint32_t at, TmhOp opc, uint64_t tag, uint32_t app_ctx, uint32_t len, uint64_t m) {
    fill_pattern(src.data() + at, len, m);
    if (len >= kTmhBytes) {
      uint8_t* h = src.data() + at;
      std::memset(h, 0, kTmhBytes);
      h[0] = uint8_t(opc);
      wire::write_be32(h + 4, app_ctx);
      wire::write_be64(h + 8, tag);
    }
    return len;
  }
  void send(uint32_t at, uint32_t len, uint64_t wr_id = 1) {
    Sge s{uint64_t(src.data() + at), len, msa.lkey.value()};
    SendWr w{wr_id, WrOpcode::Send, kSendSignaled, {&s, 1}};
    ASSERT_TRUE(a->post_send(*qa, {&w, 1}));
  }
  bool wait(verbs::Cq* cq, size_t n, std::vector<Wc>& out, uint64_t ns = 2'000'000'000) {
    return sim.run_until([&] {
      Wc w[16];
      int k;
      while ((k = cq->poll(w)) > 0) out.insert(out.end(), w, w + k);
      return out.size() >= n;
    }, ns);
  }
  Wc one(verbs::Cq* cq) {
    std::vector<Wc> got;
    EXPECT_TRUE(wait(cq, 1, got));
    return got.empty() ? Wc{} : got[0];
  }
  bool settle() { return !sim.run_until([] { return false; }, 20'000'000); }
  sim::Sim sim;
  transport::ProtocolCore *a, *b;
  verbs::PdHandle pa, pb;
  verbs::Cq *cqa, *cqb, *other_cq;
  verbs::Srq* srq;
  transport::Qp *qa, *qb;
  std::vector<uint8_t> src, fin, dst;
  verbs::Mr msa, mfa, mdb;
};

}  // namespace

TEST(TagList, EarliestPostedMatchUnderItsMask) {
  verbs::TagList t(3);
  auto h0 = t.add({0x100, 0xf00, 1});
  auto h1 = t.add({0x123, ~0ull, 2});
  auto h2 = t.add({0x1ff, 0xf00, 3});
  ASSERT_TRUE(h0 && h1 && h2);
  EXPECT_FALSE(t.add({5, 5, 4}));  // full
  EXPECT_EQ(t.take_match(0x123)->recv_wr_id, 1u);  // h0 was posted first and matches under 0xf00
  EXPECT_EQ(t.take_match(0x123)->recv_wr_id, 2u);
  EXPECT_EQ(t.take_match(0x155)->recv_wr_id, 3u);
  EXPECT_FALSE(t.take_match(0x100));
  EXPECT_FALSE(t.remove(*h1));  // consumed
  auto h3 = t.add({7, ~0ull, 5});
  ASSERT_TRUE(h3);
  EXPECT_TRUE(t.remove(*h3));
  EXPECT_FALSE(t.remove(99));
  EXPECT_EQ(t.posted(), 0u);
}

TEST(TagMatching, EagerLandsInItsTaggedBufferWithoutItsHeader) {
  TmSetup t;
  for (uint32_t i = 1; i <= 3; ++i) EXPECT_LT(t.add(i, i), 64u);  // a handle of the list
  std::vector<Wc> adds;
  ASSERT_TRUE(t.wait(t.cqb, 3, adds));
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(adds[i].opcode, WcOpcode::TmAdd);
    EXPECT_EQ(adds[i].wr_id, 1001 + i);
    EXPECT_EQ(adds[i].status, WcStatus::Success);
    EXPECT_EQ(adds[i].tm_flags, 0);
  }
  const uint32_t len = t.message(0, TmhOp::Eager, 2, 0xabcd, 700, 2);
  t.src[1] = t.src[3] = 'c';  // reserved bytes are not looked at (pyverbs leaves them so)
  t.send(0, len);
  Wc w = t.one(t.cqb);
  EXPECT_EQ(w.opcode, WcOpcode::TmRecv);
  EXPECT_EQ(w.status, WcStatus::Success);
  EXPECT_EQ(w.wr_id, 2u);
  EXPECT_EQ(w.tm_flags, kWcTmMatch | kWcTmDataValid);
  EXPECT_EQ(w.tm_tag, 2u);
  EXPECT_EQ(w.tm_priv, 0xabcdu);
  EXPECT_EQ(w.byte_len, len - kTmhBytes);
  EXPECT_EQ(w.qp_num, t.qb->qpn().value());
  EXPECT_EQ(0, std::memcmp(t.dst.data() + 2 * kBuf, t.src.data() + kTmhBytes, len - kTmhBytes));
  EXPECT_EQ(t.dst[2 * kBuf + len - kTmhBytes], 0);
  EXPECT_EQ(t.one(t.cqa).status, WcStatus::Success);
  EXPECT_EQ(t.srq->tm->posted(), 2u);
  EXPECT_EQ(t.b->counters().rx_tm_matched, 1u);
  EXPECT_EQ(t.other_cq->pending(), 0u);  // the QP's own CQ hears nothing: the SRQ's does
}

TEST(TagMatching, MultiPacketEagerAcrossMtus) {
  TmSetup t;
  t.add(0x55, 0, ~0ull, 0, 8 * kBuf, 9);  // unsignaled: no completion
  const uint32_t len = t.message(0, TmhOp::Eager, 0x55, 1, 5000, 3);
  t.send(0, len);
  Wc w = t.one(t.cqb);
  EXPECT_EQ(w.opcode, WcOpcode::TmRecv);
  EXPECT_EQ(w.wr_id, 9u);
  EXPECT_EQ(w.byte_len, len - kTmhBytes);
  EXPECT_EQ(0, std::memcmp(t.dst.data(), t.src.data() + kTmhBytes, len - kTmhBytes));
}

TEST(TagMatching, UnexpectedTakesAnOrdinaryReceiveAndStopsMatchingUntilSync) {
  TmSetup t;
  t.post_srq(100, 4);
  t.add(5, 1);
  EXPECT_EQ(t.one(t.cqb).opcode, WcOpcode::TmAdd);
  uint32_t len = t.message(0, TmhOp::Eager, 9, 0, 300, 1);
  t.send(0, len);
  Wc w = t.one(t.cqb);
  EXPECT_EQ(w.opcode, WcOpcode::TmRecv);
  EXPECT_EQ(w.wr_id, 100u);
  EXPECT_EQ(w.tm_flags, 0);  // neither matched nor in a tag's buffer: software matches it
  EXPECT_EQ(w.tm_tag, 0u);
  EXPECT_EQ(w.byte_len, len);
  EXPECT_EQ(0, std::memcmp(t.dst.data() + 100 * kBuf, t.src.data(), len));  // whole, TMH too
  // Tag 5 is posted, but software has not yet seen the unexpected message: it would match it
  // first, so this one is unexpected too.
  len = t.message(1024, TmhOp::Eager, 5, 0, 200, 2);
  t.send(1024, len);
  w = t.one(t.cqb);
  EXPECT_EQ(w.opcode, WcOpcode::TmRecv);
  EXPECT_EQ(w.wr_id, 101u);
  EXPECT_EQ(t.srq->tm->unexpected, 2u);
  // An ADD now says software must sync.
  t.add(6, 2, ~0ull);
  w = t.one(t.cqb);
  EXPECT_EQ(w.opcode, WcOpcode::TmAdd);
  EXPECT_EQ(w.tm_flags, kWcTmSyncReq);
  // A SYNC with a stale count keeps matching off; the right count turns it on.
  ASSERT_TRUE(t.op(TmOpcode::Sync, kTmOpSignaled | kTmOpSync, 0, 1));
  w = t.one(t.cqb);
  EXPECT_EQ(w.opcode, WcOpcode::TmSync);
  EXPECT_EQ(w.wr_id, 77u);
  EXPECT_EQ(w.tm_flags, kWcTmSyncReq);
  ASSERT_TRUE(t.op(TmOpcode::Sync, kTmOpSignaled | kTmOpSync, 0, 2));
  w = t.one(t.cqb);
  EXPECT_EQ(w.tm_flags, 0);
  len = t.message(2048, TmhOp::Eager, 5, 0, 100, 3);
  t.send(2048, len);
  w = t.one(t.cqb);
  EXPECT_EQ(w.opcode, WcOpcode::TmRecv);
  EXPECT_EQ(w.wr_id, 1u);
  EXPECT_EQ(w.tm_flags, kWcTmMatch | kWcTmDataValid);
  EXPECT_EQ(t.b->counters().rx_tm_unexpected, 2u);
}

TEST(TagMatching, NoTagFinShortAndMalformedHeadersAreOrdinaryReceives) {
  TmSetup t;
  t.post_srq(10, 5);
  t.add(3, 1);
  EXPECT_EQ(t.one(t.cqb).opcode, WcOpcode::TmAdd);
  struct Case {
    TmhOp op;
    uint32_t len;
    WcOpcode want;
  } cases[] = {
      {TmhOp::NoTag, 200, WcOpcode::TmNoTag},
      {TmhOp::Fin, 16, WcOpcode::TmNoTag},
      {TmhOp::Eager, 8, WcOpcode::Recv},      // shorter than a TMH
      {TmhOp(9), 100, WcOpcode::Recv},        // an opcode nobody defined
      {TmhOp::Rndv, 20, WcOpcode::Recv},      // a rendezvous request without its RVH
  };
  uint32_t at = 0;
  for (const Case& c : cases) {
    t.message(at, c.op, 3, 0, c.len, at);  // tag 3 is posted: none of these may take it
    t.send(at, c.len);
    Wc w = t.one(t.cqb);
    EXPECT_EQ(w.opcode, c.want) << int(c.op);
    EXPECT_EQ(w.status, WcStatus::Success);
    EXPECT_EQ(w.tm_flags, 0);
    EXPECT_EQ(w.byte_len, c.len);
    EXPECT_EQ(0, std::memcmp(t.dst.data() + (10 + at / 1024) * kBuf, t.src.data() + at, c.len));
    at += 1024;
  }
  EXPECT_EQ(t.srq->tm->posted(), 1u);
  EXPECT_EQ(t.srq->tm->unexpected, 0u);  // none of them counts
  EXPECT_EQ(t.b->counters().rx_tm_no_tmh, 3u);
}

uint32_t tm_slots() { return transport::tm::kRendezvousSlots; }

// The RNDV request as pyverbs sends it: TMH and RVH naming the sender's registered data.
uint32_t rndv_request(TmSetup& t, uint32_t at, uint64_t tag, uint32_t app_ctx, uint64_t va, uint32_t rkey, uint32_t len) {
  const uint32_t n = t.message(at, TmhOp::Rndv, tag, app_ctx, 64, 900 + at);
  uint8_t* rvh = t.src.data() + at + kTmhBytes;
  wire::write_be64(rvh, va);
  wire::write_be32(rvh + 8, rkey);
  wire::write_be32(rvh + 12, len);
  return n;
}

TEST(TagMatching, RendezvousReadsTheSendersDataThenSendsFin) {
  TmSetup t;
  t.add(0x77, 0, 0xff, kTmOpSignaled, 4 * kBuf, 42);
  EXPECT_EQ(t.one(t.cqb).opcode, WcOpcode::TmAdd);
  const uint32_t data_len = 3500;  // four READ response packets at MTU 1024
  fill_pattern(t.src.data() + 8192, data_len, 5);
  t.post_fin_recv(555);
  const uint32_t n = rndv_request(t, 0, 0x1277, 0x9999, uint64_t(t.src.data() + 8192), t.msa.rkey.value(), data_len);
  t.send(0, n, 3);
  std::vector<Wc> bw;
  ASSERT_TRUE(t.wait(t.cqb, 2, bw));
  EXPECT_EQ(bw[0].opcode, WcOpcode::TmRecv);
  EXPECT_EQ(bw[0].status, WcStatus::Success);
  EXPECT_EQ(bw[0].wr_id, 42u);
  EXPECT_EQ(bw[0].tm_flags, kWcTmMatch);  // matched; its data comes next
  EXPECT_EQ(bw[0].tm_tag, 0x1277u);
  EXPECT_EQ(bw[0].tm_priv, 0x9999u);
  EXPECT_EQ(bw[1].opcode, WcOpcode::TmRecv);
  EXPECT_EQ(bw[1].status, WcStatus::Success);
  EXPECT_EQ(bw[1].wr_id, 42u);
  EXPECT_EQ(bw[1].tm_flags, kWcTmDataValid);
  EXPECT_EQ(bw[1].tm_tag, 0u);  // as mlx5's: the wr_id names the buffer
  EXPECT_EQ(bw[1].byte_len, data_len);
  EXPECT_EQ(0, std::memcmp(t.dst.data(), t.src.data() + 8192, data_len));
  EXPECT_EQ(t.dst[data_len], 0);
  // The sender: its SEND completes, and the FIN arrives in its own receive.
  std::vector<Wc> aw;
  ASSERT_TRUE(t.wait(t.cqa, 2, aw));
  std::sort(aw.begin(), aw.end(), [](const Wc& x, const Wc& y) { return x.opcode < y.opcode; });
  EXPECT_EQ(aw[0].opcode, WcOpcode::Send);
  EXPECT_EQ(aw[0].wr_id, 3u);
  EXPECT_EQ(aw[1].opcode, WcOpcode::Recv);
  EXPECT_EQ(aw[1].wr_id, 555u);
  EXPECT_EQ(aw[1].byte_len, kTmhBytes);
  EXPECT_EQ(t.fin[0], uint8_t(TmhOp::Fin));
  EXPECT_EQ(wire::read_be32(&t.fin[4]), 0x9999u);
  EXPECT_EQ(wire::read_be64(&t.fin[8]), 0x1277u);
  EXPECT_EQ(t.b->counters().tm_rndv_reads, 1u);
  EXPECT_EQ(t.other_cq->pending(), 0u);  // the device's own READ and FIN are never reported
  EXPECT_TRUE(t.qb->tm_rndv.empty());
}

TEST(TagMatching, RendezvousOfNothingSendsFinAtOnce) {
  TmSetup t;
  t.add(4, 0);
  EXPECT_EQ(t.one(t.cqb).opcode, WcOpcode::TmAdd);
  t.post_fin_recv(1);
  t.send(0, rndv_request(t, 0, 4, 0, 0, 0, 0));
  std::vector<Wc> bw;
  ASSERT_TRUE(t.wait(t.cqb, 2, bw));
  EXPECT_EQ(bw[0].tm_flags, kWcTmMatch);
  EXPECT_EQ(bw[1].tm_flags, kWcTmDataValid);
  EXPECT_EQ(bw[1].byte_len, 0u);
  std::vector<Wc> aw;
  ASSERT_TRUE(t.wait(t.cqa, 2, aw));
  EXPECT_EQ(t.fin[0], uint8_t(TmhOp::Fin));
}

// A rendezvous of nothing behind one whose READ is still under way: each buffer's second
// completion is its own, and the first buffer's comes only once its data is there.
TEST(TagMatching, AnEmptyRendezvousDoesNotCompleteAnotherOnesRead) {
  TmSetup t;
  t.add(7, 0, ~0ull, 0, 8 * kBuf, 70);
  t.add(8, 9, ~0ull, 0);  // wr_id 9
  t.post_fin_recv(1);
  t.post_fin_recv(2);
  const uint32_t len = 7000;
  fill_pattern(t.src.data() + 16384, len, 77);
  t.send(0, rndv_request(t, 0, 7, 0, uint64_t(t.src.data() + 16384), t.msa.rkey.value(), len));
  t.send(256, rndv_request(t, 256, 8, 0, 0, 0, 0));
  std::vector<Wc> got;
  bool early = false;
  ASSERT_TRUE(t.sim.run_until([&] {
    Wc w[8];
    for (int k; (k = t.cqb->poll(w)) > 0;)
      for (int i = 0; i < k; ++i) {
        if (w[i].wr_id == 70 && (w[i].tm_flags & kWcTmDataValid))
          early |= std::memcmp(t.dst.data(), t.src.data() + 16384, len) != 0;  // must be there already
        got.push_back(w[i]);
      }
    return got.size() >= 4;
  }, 2'000'000'000));
  EXPECT_FALSE(early) << "buffer 70 completed before its READ ended";
  int valid70 = 0, valid9 = 0;
  for (const Wc& w : got) {
    EXPECT_EQ(w.status, WcStatus::Success);
    if (!(w.tm_flags & kWcTmDataValid)) continue;
    if (w.wr_id == 70) {
      ++valid70;
      EXPECT_EQ(w.byte_len, len);
    } else if (w.wr_id == 9) {
      ++valid9;
      EXPECT_EQ(w.byte_len, 0u);
    }
  }
  EXPECT_EQ(valid70, 1);
  EXPECT_EQ(valid9, 1);
  EXPECT_EQ(0, std::memcmp(t.dst.data(), t.src.data() + 16384, len));
  EXPECT_TRUE(t.qb->tm_rndv.empty());
}

// The send queue slots kept for rendezvous are the device's: a program fills the rest, and a
// rendezvous still finds room.
TEST(TagMatching, RendezvousSlotsStayFreeOfTheProgramsSends) {
  TmSetup t;
  const uint32_t room = t.qb->sq.capacity() - tm_slots();
  std::vector<uint8_t> m(8, 1);
  auto mm = *t.b->reg_mr(t.pb, m.data(), m.size(), kAccessLocalWrite);
  Sge s{uint64_t(m.data()), 8, mm.lkey.value()};
  SendWr w{5, WrOpcode::Send, 0, {&s, 1}};
  uint32_t posted = 0;
  while (posted <= room && t.b->post_send(*t.qb, {&w, 1})) ++posted;
  EXPECT_EQ(posted, room);
  EXPECT_EQ(t.b->post_send(*t.qb, {&w, 1}).error().code, ENOMEM);
  t.add(4, 0);
  EXPECT_EQ(t.one(t.cqb).opcode, WcOpcode::TmAdd);
  t.post_fin_recv(1);
  t.send(0, rndv_request(t, 0, 4, 0, uint64_t(t.src.data() + 8192), t.msa.rkey.value(), 100));
  Wc first = t.one(t.cqb);
  EXPECT_EQ(first.status, WcStatus::Success);  // started, not RNDV_INCOMPLETE
  EXPECT_EQ(first.tm_flags, kWcTmMatch);
}

TEST(TagMatching, RendezvousLargerThanTheBufferIsLeftToSoftware) {
  TmSetup t;
  t.add(4, 0);  // a 1024-byte buffer
  EXPECT_EQ(t.one(t.cqb).opcode, WcOpcode::TmAdd);
  t.post_fin_recv(1);
  const uint32_t n = rndv_request(t, 0, 4, 0, uint64_t(t.src.data() + 8192), t.msa.rkey.value(), 5000);
  t.send(0, n);
  Wc w = t.one(t.cqb);
  EXPECT_EQ(w.opcode, WcOpcode::TmRecv);
  EXPECT_EQ(w.status, WcStatus::TmRndvIncomplete);
  EXPECT_EQ(w.tm_flags, kWcTmMatch);
  EXPECT_EQ(w.tm_tag, 4u);
  // The buffer holds what software needs to read the data itself: the RVH and what follows.
  EXPECT_EQ(w.byte_len, n - kTmhBytes);
  EXPECT_EQ(0, std::memcmp(t.dst.data(), t.src.data() + kTmhBytes, n - kTmhBytes));
  EXPECT_EQ(t.one(t.cqa).opcode, WcOpcode::Send);
  EXPECT_TRUE(t.settle());
  EXPECT_EQ(t.cqa->pending(), 0u);  // no FIN: software sends its own
  EXPECT_EQ(t.cqb->pending(), 0u);
  EXPECT_EQ(t.b->counters().tm_rndv_incomplete, 1u);
}

TEST(TagMatching, RendezvousWithAForgedRkeyFailsWithoutTouchingTheBuffer) {
  TmSetup t;
  t.add(4, 0);
  EXPECT_EQ(t.one(t.cqb).opcode, WcOpcode::TmAdd);
  t.post_fin_recv(1);
  const uint32_t n = rndv_request(t, 0, 4, 0, uint64_t(t.src.data() + 8192), t.msa.rkey.value() ^ 0x100, 500);
  t.send(0, n);
  std::vector<Wc> bw;
  ASSERT_TRUE(t.wait(t.cqb, 2, bw));
  EXPECT_EQ(bw[0].tm_flags, kWcTmMatch);
  EXPECT_EQ(bw[1].status, WcStatus::RemAccessErr);  // the sender NAKed the READ
  EXPECT_EQ(bw[1].tm_flags, 0);                     // and no data is valid
  EXPECT_EQ(bw[1].wr_id, 0u + bw[0].wr_id);
  EXPECT_EQ(bw[1].byte_len, 0u);
  // Only the RVH the request carried was placed; nothing of the sender's memory.
  EXPECT_EQ(0, std::memcmp(t.dst.data(), t.src.data() + kTmhBytes, n - kTmhBytes));
  EXPECT_EQ(t.dst[n - kTmhBytes], 0);
  EXPECT_TRUE(t.qb->tm_rndv.empty());
}

TEST(TagMatching, EagerLongerThanItsBufferCompletesInError) {
  TmSetup t;
  t.add(4, 0);
  EXPECT_EQ(t.one(t.cqb).opcode, WcOpcode::TmAdd);
  const uint32_t n = t.message(0, TmhOp::Eager, 4, 0, kBuf + kTmhBytes + 1, 1);
  t.send(0, n);
  Wc w = t.one(t.cqb);
  EXPECT_EQ(w.opcode, WcOpcode::TmRecv);
  EXPECT_EQ(w.status, WcStatus::LocLenErr);
  EXPECT_EQ(w.wr_id, 0u);
  EXPECT_EQ(w.tm_flags, kWcTmMatch);  // matched, but its data is not valid
  EXPECT_EQ(t.one(t.cqa).status, WcStatus::RemInvReqErr);
}

TEST(TagMatching, DelRemovesAPostedTagAndFailsOnAConsumedOne) {
  TmSetup t;
  t.post_srq(100, 2);
  const uint32_t h = t.add(8, 0);
  EXPECT_EQ(t.one(t.cqb).opcode, WcOpcode::TmAdd);
  ASSERT_TRUE(t.op(TmOpcode::Del, kTmOpSignaled, h));
  Wc w = t.one(t.cqb);
  EXPECT_EQ(w.opcode, WcOpcode::TmDel);
  EXPECT_EQ(w.status, WcStatus::Success);
  ASSERT_TRUE(t.op(TmOpcode::Del, 0, h));  // unsignaled, and failing: reported all the same
  w = t.one(t.cqb);
  EXPECT_EQ(w.opcode, WcOpcode::TmDel);
  EXPECT_EQ(w.status, WcStatus::TmErr);
  t.send(0, t.message(0, TmhOp::Eager, 8, 0, 64, 1));  // its tag is gone: unexpected
  w = t.one(t.cqb);
  EXPECT_EQ(w.wr_id, 100u);
  EXPECT_EQ(w.tm_flags, 0);
}

TEST(TagMatching, BadOperationsAreRefused) {
  TmSetup t;
  Sge two[2] = {t.slot(0), t.slot(1)};
  TmOp ops[3];
  ops[0].tag = 1;
  ops[1].sg_list = {two, 2};  // at most one SGE
  size_t bad = 9;
  auto st = t.b->post_srq_ops(*t.srq, ops, &bad);
  EXPECT_EQ(st.error().code, EINVAL);
  EXPECT_EQ(bad, 1u);
  EXPECT_EQ(t.srq->tm->posted(), 1u);  // the first was done
  EXPECT_EQ(t.op(TmOpcode::Del, 0, 64).error().code, EINVAL);  // no such handle
  EXPECT_EQ(t.op(TmOpcode(7), 0).error().code, EINVAL);
  EXPECT_EQ(t.op(TmOpcode::Sync, 4).error().code, EINVAL);  // unknown flag
  for (uint32_t i = 1; i < 64; ++i) t.add(i, 0, ~0ull, 0);
  TmOp more;
  st = t.b->post_srq_ops(*t.srq, {&more, 1}, &bad);
  EXPECT_EQ(st.error().code, ENOMEM);
  EXPECT_EQ(bad, 0u);
  verbs::Srq* plain = *t.b->create_srq(t.pb, 8, 1);
  EXPECT_EQ(t.b->post_srq_ops(*plain, {&more, 1}).error().code, EINVAL);
  // Creation: RC QPs only; a list of 1..max tags; the CQ is busy while the SRQ lives.
  EXPECT_EQ(t.b->create_qp(t.pb, QpType::UC, t.cqb, t.cqb, QpCap{}, false, t.srq).error().code, EINVAL);
  EXPECT_EQ(t.b->create_tm_srq(t.pb, t.cqb, 8, 1, 0, 0).error().code, EINVAL);
  EXPECT_EQ(t.b->create_tm_srq(t.pb, t.cqb, 8, 1, t.b->limits().max_tm_tags + 1, 0).error().code, EINVAL);
  EXPECT_EQ(t.b->create_tm_srq(t.pb, nullptr, 8, 1, 8, 0).error().code, EINVAL);
  EXPECT_EQ(t.b->destroy_srq(t.srq).error().code, EBUSY);
  EXPECT_TRUE(t.b->cq_busy(t.cqb));
}

TEST(TagMatching, AHeaderOnAnOrdinarySrqIsJustData) {
  TmSetup t;
  verbs::Srq* plain = *t.b->create_srq(t.pb, 8, 1);
  auto* q = *t.b->create_qp(t.pb, QpType::RC, t.cqb, t.cqb, QpCap{8, 8, 1, 1, 0}, false, plain);
  auto* qa2 = *t.a->create_qp(t.pa, QpType::RC, t.cqa, t.cqa, QpCap{8, 8, 1, 1, 0}, false);
  ConnectOptions o;
  o.path_mtu = Mtu::Mtu1024;
  ASSERT_TRUE(transport::connect_rc(*t.a, *qa2, {Gid::from_ipv4(kIpB), q->qpn().value(), 7, 0, 0, 0}, 9, o));
  ASSERT_TRUE(transport::connect_rc(*t.b, *q, {Gid::from_ipv4(kIpA), qa2->qpn().value(), 9, 0, 0, 0}, 7, o));
  Sge r = t.slot(5);
  RecvWr rw{5, {&r, 1}};
  ASSERT_TRUE(t.b->post_srq_recv(*plain, {&rw, 1}));
  const uint32_t n = t.message(0, TmhOp::Eager, 1, 0, 100, 1);
  Sge s{uint64_t(t.src.data()), n, t.msa.lkey.value()};
  SendWr w{1, WrOpcode::Send, kSendSignaled, {&s, 1}};
  ASSERT_TRUE(t.a->post_send(*qa2, {&w, 1}));
  Wc got = t.one(t.cqb);
  EXPECT_EQ(got.opcode, WcOpcode::Recv);
  EXPECT_EQ(got.byte_len, n);
  EXPECT_EQ(0, std::memcmp(t.dst.data() + 5 * kBuf, t.src.data(), n));
}

// Over a lossy, duplicating, reordering link, under either loss recovery: every eager and
// rendezvous message lands byte-exact in its tag's buffer, each completed once.
class TagMatchingLossy : public ::testing::TestWithParam<Reliability> {};

TEST_P(TagMatchingLossy, EveryMessageLandsOnce) {
  const uint64_t seed = test_seed(31);
  SCOPED_TRACE("seed " + std::to_string(seed));
  sim::FaultConfig f;
  f.drop = 0.05;
  f.duplicate = 0.02;
  f.reorder = 0.05;
  f.corrupt = 0.01;
  TmSetup t(seed, f, GetParam());
  constexpr uint32_t kMsgs = 40;
  for (uint32_t i = 0; i < kMsgs; ++i) t.add(1000 + i, i, ~0ull, 0);
  for (uint32_t i = 0; i < kMsgs; ++i) t.post_fin_recv(i);
  std::vector<uint32_t> lens(kMsgs);
  for (uint32_t i = 0; i < kMsgs; ++i) {
    const uint32_t tag = 1000 + (kMsgs - 1 - i);  // in the reverse of posting order
    const bool rndv = i % 3 == 0;
    const uint32_t len = 1 + uint32_t(splitmix(seed + i) % (kBuf - kTmhBytes));
    lens[kMsgs - 1 - i] = len;
    const uint32_t data_at = 32768 + i * kBuf;
    fill_pattern(t.src.data() + data_at, len, seed + i);
    if (rndv) {
      t.send(i * 256, rndv_request(t, i * 256, tag, i, uint64_t(t.src.data() + data_at), t.msa.rkey.value(), len), i);
    } else {
      // The eager payload follows its TMH: the message starts 16 bytes before the data.
      uint8_t* h = t.src.data() + data_at - kTmhBytes;
      std::memset(h, 0, kTmhBytes);
      h[0] = uint8_t(TmhOp::Eager);
      wire::write_be64(h + 8, tag);
      t.send(data_at - kTmhBytes, len + kTmhBytes, i);
    }
  }
  std::vector<Wc> bw;
  const uint32_t want = kMsgs + (kMsgs + 2) / 3;  // a second completion per rendezvous
  ASSERT_TRUE(t.wait(t.cqb, want, bw, 20'000'000'000));
  EXPECT_TRUE(t.settle());
  EXPECT_EQ(t.cqb->pending(), 0u);
  uint32_t valid = 0;
  for (const Wc& w : bw) {
    ASSERT_EQ(w.status, WcStatus::Success);
    ASSERT_EQ(w.opcode, WcOpcode::TmRecv);
    ASSERT_LT(w.wr_id, kMsgs);
    if (w.tm_flags & kWcTmMatch) {
      EXPECT_EQ(w.tm_tag, 1000 + w.wr_id);
    }
    if (!(w.tm_flags & kWcTmDataValid)) continue;
    ++valid;
    const uint32_t i = kMsgs - 1 - uint32_t(w.wr_id);  // the message sent to this buffer
    EXPECT_EQ(w.byte_len, lens[w.wr_id]);
    EXPECT_EQ(0, std::memcmp(t.dst.data() + w.wr_id * kBuf, t.src.data() + 32768 + i * kBuf, lens[w.wr_id])) << w.wr_id;
  }
  EXPECT_EQ(valid, kMsgs);
  EXPECT_EQ(t.srq->tm->posted(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Recovery, TagMatchingLossy,
                         ::testing::Values(Reliability::Gbn, Reliability::Sr));

// A stranger's tagged SEND (another address, the right QPN and PSN) takes no tag; the sender's
// own, sent again as a duplicate after it was taken, completes nothing a second time.
TEST(TagMatching, StrangersAndDuplicatesTakeNoTag) {
  TmSetup t;
  t.add(1, 0);
  t.add(1, 1);
  std::vector<Wc> adds;
  ASSERT_TRUE(t.wait(t.cqb, 2, adds));
  uint8_t msg[64] = {};
  msg[0] = uint8_t(TmhOp::Eager);
  msg[15] = 1;
  wire::Packet p;
  p.bth.opcode = wire::Opcode::RC_SEND_ONLY;
  p.bth.dest_qp = t.qb->qpn().value();
  p.bth.psn = t.qb->resp.epsn;
  p.payload = msg;
  wire::FlowAddr stranger = t.qa->flow;
  stranger.src = Gid::from_ipv4(kIpA + 9);
  stranger.dst = Gid::from_ipv4(kIpB);
  inject_packet(*t.b, stranger, p, t.sim.now());
  EXPECT_EQ(t.srq->tm->posted(), 2u);
  EXPECT_EQ(t.b->counters().rx_tm_matched, 0u);
  // The sender's own message takes the first tag; the same packet again is a duplicate.
  wire::FlowAddr own = t.qa->flow;
  inject_packet(*t.b, own, p, t.sim.now());
  EXPECT_EQ(t.srq->tm->posted(), 1u);
  EXPECT_EQ(t.one(t.cqb).wr_id, 0u);
  inject_packet(*t.b, own, p, t.sim.now());
  EXPECT_EQ(t.srq->tm->posted(), 1u);
  EXPECT_GE(t.b->counters().rx_duplicate, 1u);
  EXPECT_TRUE(t.settle());
  EXPECT_EQ(t.cqb->pending(), 0u);
}
