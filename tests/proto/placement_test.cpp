// FLUSH and ATOMIC WRITE (IBA 1.5): end to end between two cores, the checks a requester makes
// when they are posted, and a responder fed forged, malformed, duplicated and out-of-window
// requests one at a time. Nothing outside the named 8 bytes is ever written.
#include <gtest/gtest.h>

#include <cstring>

#include "../common/one_packet.hpp"

using namespace uroce;
using namespace uroce::test;
using transport::Verdict;
using wire::Opcode;

namespace {

constexpr uint64_t kValue = 0x1122334455667788ull;

// A pair whose B offers a region of 4 KiB (rights `access`) and whose QPs have `qp_access`.
struct Placement {
  explicit Placement(uint32_t access = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteAtomic | kAccessFlushGlobal,
                     uint32_t qp_access = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteAtomic | kAccessFlushGlobal,
                     QpType type = QpType::RC)
      : t(options(qp_access, type)) {
    mem.assign(4096, 0xee);
    b = t.reg(t.b, mem.data(), mem.size(), access);
    a = t.reg(t.a, local, sizeof local);
  }
  static PairOptions options(uint32_t qp_access, QpType type) {
    PairOptions o;
    o.access = qp_access;
    o.type = type;
    return o;
  }
  Status atomic_write(uint64_t id, uint64_t offset, uint64_t value = kValue) {
    SendWr w{id, WrOpcode::AtomicWrite, kSendSignaled};
    w.remote_addr = uint64_t(mem.data()) + offset;
    w.rkey = b.rkey;
    w.compare_add = value;
    return t.send(t.a, w);
  }
  Status flush(uint64_t id, uint64_t offset, uint32_t len, FlushLevel level = FlushLevel::Range,
               uint8_t type = kFlushGlobal) {
    SendWr w{id, WrOpcode::Flush, kSendSignaled};
    w.remote_addr = uint64_t(mem.data()) + offset;
    w.rkey = b.rkey;
    w.flush_length = len;
    w.flush_type = type;
    w.flush_level = level;
    return t.send(t.a, w);
  }
  bool untouched(size_t from, size_t to) const {
    for (size_t i = from; i < to; ++i)
      if (mem[i] != 0xee) return false;
    return true;
  }
  CorePair t;
  std::vector<uint8_t> mem;
  alignas(8) uint8_t local[64] = {};
  CorePair::Keys a, b;
};

}  // namespace

TEST(AtomicWrite, StoresItsEightBytesAndCompletes) {
  Placement f;
  ASSERT_TRUE(f.atomic_write(7, 64));
  Wc wc = f.t.one_wc(f.t.a.scq);
  EXPECT_EQ(wc.status, WcStatus::Success) << to_string(wc.status);
  EXPECT_EQ(wc.opcode, WcOpcode::AtomicWrite);
  EXPECT_EQ(wc.wr_id, 7u);
  uint64_t got;
  std::memcpy(&got, f.mem.data() + 64, 8);
  EXPECT_EQ(got, kValue) << "the bytes as they lay in compare_add";
  EXPECT_TRUE(f.untouched(0, 64) && f.untouched(72, 4096));
  // A later atomic sees it.
  Sge s{uint64_t(f.local), 8, f.a.lkey};
  SendWr fa{8, WrOpcode::AtomicFetchAdd, kSendSignaled, {&s, 1}};
  fa.remote_addr = uint64_t(f.mem.data()) + 64;
  fa.rkey = f.b.rkey;
  fa.compare_add = 1;
  ASSERT_TRUE(f.t.send(f.t.a, fa));
  EXPECT_EQ(f.t.one_wc(f.t.a.scq).status, WcStatus::Success);
  std::memcpy(&got, f.local, 8);
  EXPECT_EQ(got, kValue);
}

TEST(Flush, OfARangeAndOfTheWholeRegionComplete) {
  Placement f;
  ASSERT_TRUE(f.flush(1, 128, 256));
  ASSERT_TRUE(f.flush(2, 0, 0, FlushLevel::Region));
  ASSERT_TRUE(f.flush(3, 4096, 0));  // an empty range at the end
  std::vector<Wc> wcs;
  ASSERT_TRUE(f.t.wait_wc(f.t.a.scq, 3, wcs));
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(wcs[i].wr_id, i + 1);
    EXPECT_EQ(wcs[i].status, WcStatus::Success) << to_string(wcs[i].status);
    EXPECT_EQ(wcs[i].opcode, WcOpcode::Flush);
  }
  EXPECT_TRUE(f.untouched(0, 4096));
}

TEST(Flush, PersistenceIsNotOfferedByAnyRegion) {
  CorePair t;
  std::vector<uint8_t> m(4096);
  auto r = t.a.pc->reg_mr(t.a.pd, m.data(), m.size(), kAccessLocalWrite | kAccessFlushPersistent);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, EINVAL);
  // A QP may take persistent FLUSHes, but no region grants them: a remote access error, as
  // rdma-core's test of the placement type expects.
  Placement f(kAccessLocalWrite | kAccessRemoteWrite | kAccessFlushGlobal,
              kAccessLocalWrite | kAccessRemoteWrite | kAccessFlushGlobal | kAccessFlushPersistent);
  ASSERT_TRUE(f.flush(1, 0, 64, FlushLevel::Range, kFlushPersistent));
  EXPECT_EQ(f.t.one_wc(f.t.a.scq).status, WcStatus::RemAccessErr);
  EXPECT_EQ(f.t.a.qp->state(), QpState::Err);
}

TEST(Placement, PostingChecksTheRequest) {
  Placement f;
  auto code = [](const Status& s) { return s ? 0 : s.error().code; };
  EXPECT_EQ(code(f.atomic_write(1, 4)), EINVAL) << "misaligned";
  SendWr w{1, WrOpcode::AtomicWrite, kSendSignaled};
  Sge s{uint64_t(f.local), 8, f.a.lkey};
  w.sg_list = {&s, 1};
  EXPECT_EQ(code(f.t.send(f.t.a, w)), EINVAL) << "the 8 bytes come in the request, not an SGE";
  w.opcode = WrOpcode::Flush;
  EXPECT_EQ(code(f.t.send(f.t.a, w)), EINVAL);
  EXPECT_EQ(code(f.flush(1, 0, 8, FlushLevel::Range, 0)), EINVAL) << "no placement type";
  EXPECT_EQ(code(f.flush(1, 0, 8, FlushLevel::Range, 4)), EINVAL) << "an undefined placement type";
  EXPECT_EQ(code(f.flush(1, 0, 8, FlushLevel(2))), EINVAL) << "an undefined selectivity level";
  EXPECT_EQ(code(f.flush(1, 0, 0x80000001u)), EINVAL) << "longer than a message may be";
  Placement uc(kAccessLocalWrite | kAccessRemoteWrite, kAccessLocalWrite | kAccessRemoteWrite, QpType::UC);
  EXPECT_EQ(code(uc.atomic_write(1, 0)), EINVAL) << "RC only";
  EXPECT_EQ(code(uc.flush(1, 0, 8)), EINVAL) << "RC only";
}

TEST(Placement, RightsOfTheRegionAndOfTheQp) {
  {  // a region without REMOTE_WRITE: remote access error, nothing written
    Placement f(kAccessLocalWrite | kAccessRemoteRead | kAccessFlushGlobal);
    ASSERT_TRUE(f.atomic_write(1, 0));
    EXPECT_EQ(f.t.one_wc(f.t.a.scq).status, WcStatus::RemAccessErr);
    EXPECT_TRUE(f.untouched(0, 4096));
  }
  {  // a region without FLUSH rights
    Placement f(kAccessLocalWrite | kAccessRemoteWrite);
    ASSERT_TRUE(f.flush(1, 0, 64));
    EXPECT_EQ(f.t.one_wc(f.t.a.scq).status, WcStatus::RemAccessErr);
  }
  {  // a QP that takes neither: invalid request
    Placement f(kAccessLocalWrite | kAccessRemoteWrite | kAccessFlushGlobal, kAccessLocalWrite | kAccessRemoteRead);
    ASSERT_TRUE(f.atomic_write(1, 0));
    EXPECT_EQ(f.t.one_wc(f.t.a.scq).status, WcStatus::RemInvReqErr);
    EXPECT_TRUE(f.untouched(0, 4096));
  }
  {
    Placement f(kAccessLocalWrite | kAccessRemoteWrite | kAccessFlushGlobal, kAccessLocalWrite | kAccessRemoteWrite);
    ASSERT_TRUE(f.flush(1, 0, 64));
    EXPECT_EQ(f.t.one_wc(f.t.a.scq).status, WcStatus::RemInvReqErr);
  }
  {  // past the region's end, and an ATOMIC WRITE straddling it
    Placement f;
    ASSERT_TRUE(f.flush(1, 4000, 97));
    EXPECT_EQ(f.t.one_wc(f.t.a.scq).status, WcStatus::RemAccessErr);
    Placement g;
    ASSERT_TRUE(g.atomic_write(1, 4096));
    EXPECT_EQ(g.t.one_wc(g.t.a.scq).status, WcStatus::RemAccessErr);
    EXPECT_TRUE(g.untouched(0, 4096));
  }
}

// ---- forged requests, one at a time

namespace {
uint64_t word(const OnePacket& f, size_t at) {
  uint64_t v;
  std::memcpy(&v, f.buf.data() + at, 8);
  return v;
}
}  // namespace

TEST(PlacementHostile, AnAtomicWriteIsEightAlignedBytes) {
  for (size_t len : {0u, 7u, 9u, 16u}) {
    OnePacket f;
    EXPECT_EQ(f.send(Opcode::RC_ATOMIC_WRITE, 0, len), Verdict::NakInvalid) << len << " bytes";
    EXPECT_EQ(word(f, 0), 0u);
    EXPECT_EQ(f.t.b.qp->state(), QpState::Err);
  }
  OnePacket f;
  wire::Packet p = f.request(Opcode::RC_ATOMIC_WRITE, 0, 8);
  p.reth.dma_len = 16;  // a RETH that names more than it carries
  EXPECT_EQ(f.deliver(p), Verdict::NakInvalid);
  OnePacket h;
  p = h.request(Opcode::RC_ATOMIC_WRITE, 0, 16);
  p.reth.dma_len = 8;  // carries more than its RETH names
  EXPECT_EQ(h.deliver(p), Verdict::NakInvalid);
  EXPECT_EQ(word(h, 0) | word(h, 8), 0u);
  OnePacket g;
  p = g.request(Opcode::RC_ATOMIC_WRITE, 0, 8);
  p.reth.va += 4;
  EXPECT_EQ(g.deliver(p), Verdict::NakInvalid) << "misaligned";
  EXPECT_EQ(word(g, 0) | word(g, 8), 0u);
}

TEST(PlacementHostile, ADuplicateIsAnsweredFromItsResourceNotStoredAgain) {
  OnePacket f;
  ASSERT_EQ(f.send(Opcode::RC_ATOMIC_WRITE, 0, 8), Verdict::Execute);
  EXPECT_EQ(word(f, 0), 0x5c5c5c5c5c5c5c5cull);
  ASSERT_EQ(f.answered, 1u);
  // The answer: READ RESPONSE ONLY, an AETH, no payload.
  ASSERT_EQ(f.last_answer.size(), size_t(wire::kBthLen + wire::kAethLen + wire::kIcrcLen));
  EXPECT_EQ(f.last_answer[0], uint8_t(Opcode::RC_READ_RESPONSE_ONLY));
  std::memset(f.buf.data(), 0x11, 8);  // the program moved on
  EXPECT_EQ(f.send(Opcode::RC_ATOMIC_WRITE, 0xffffff, 8), Verdict::Duplicate);
  EXPECT_EQ(word(f, 0), 0x1111111111111111ull) << "a duplicate ATOMIC WRITE was executed again";
  EXPECT_EQ(f.answered, 1u);
  EXPECT_EQ(f.last_answer[0], uint8_t(Opcode::RC_READ_RESPONSE_ONLY));
  EXPECT_EQ(f.t.b.pc->counters().rx_placement_replays, 1u);
  // A third party's request at that PSN with other bytes: not what was executed, dropped.
  wire::Packet p = f.request(Opcode::RC_ATOMIC_WRITE, 0xffffff, 8);
  const uint8_t other[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  p.payload = other;
  EXPECT_EQ(f.deliver(p), Verdict::DuplicateDropped);
  EXPECT_EQ(f.answered, 0u);
  EXPECT_EQ(word(f, 0), 0x1111111111111111ull);
  EXPECT_EQ(f.t.b.pc->counters().rx_dup_unmatched, 1u);
  EXPECT_EQ(f.t.b.qp->state(), QpState::Rts);
}

TEST(PlacementHostile, OutOfWindowAndFromAThirdParty) {
  OnePacket f;
  EXPECT_EQ(f.send(Opcode::RC_ATOMIC_WRITE, 5, 8), Verdict::NakSequence);
  EXPECT_EQ(f.send(Opcode::RC_FLUSH, 6, 64), Verdict::OutOfSequence);
  EXPECT_EQ(word(f, 0), 0u);
  EXPECT_EQ(f.t.b.qp->state(), QpState::Rts);
  // The right QPN and PSN from another address: never reaches the responder.
  wire::Packet p = f.request(Opcode::RC_ATOMIC_WRITE, 0, 8);
  wire::FlowAddr stranger = f.t.a.qp->flow;
  stranger.src = Gid::from_ipv4(0x0a0000fe);
  const uint64_t bad = f.t.b.pc->counters().rx_bad_source;
  inject_packet(*f.t.b.pc, stranger, p, f.t.sim.now());
  EXPECT_EQ(f.t.b.pc->counters().rx_bad_source, bad + 1);
  EXPECT_EQ(word(f, 0), 0u);
}

TEST(PlacementHostile, FlushChecksItsFethAndKey) {
  struct Case {
    uint32_t feth;
    Verdict v;
  };
  for (Case c : {Case{0x00, Verdict::NakInvalid}, Case{0x04, Verdict::NakInvalid}, Case{0x31, Verdict::NakInvalid},
                 Case{0x101, Verdict::NakInvalid}, Case{0x02, Verdict::NakInvalid} /* the QP takes no persistence */,
                 Case{0x01, Verdict::Execute}, Case{0x11, Verdict::Execute}}) {
    OnePacket f;
    wire::Packet p = f.request(Opcode::RC_FLUSH, 0, 64);
    p.feth = c.feth;
    EXPECT_EQ(f.deliver(p), c.v) << std::hex << "FETH 0x" << c.feth;
  }
  OnePacket f;
  wire::Packet p = f.request(Opcode::RC_FLUSH, 0, 0);
  p.feth = 0x01;
  p.reth.rkey ^= 0x100;  // even an empty range needs a key that grants it
  EXPECT_EQ(f.deliver(p), Verdict::NakAccess);
  OnePacket g(QpType::RC, kAccessLocalWrite | kAccessRemoteWrite);  // a region without FLUSH rights
  p = g.request(Opcode::RC_FLUSH, 0, 64);
  p.feth = 0x11;
  EXPECT_EQ(g.deliver(p), Verdict::NakAccess);
}

TEST(PlacementHostile, ResponderResourcesAreBounded) {
  OnePacket f;
  const uint32_t max = f.t.b.qp->attr().max_dest_rd_atomic;
  for (uint32_t i = 0; i < max; ++i) {
    wire::Packet p = f.request(Opcode::RC_FLUSH, 0, 8);
    p.feth = 0x01;
    ASSERT_EQ(f.deliver(p, /*run=*/false), Verdict::Execute) << i;
  }
  EXPECT_EQ(f.send(Opcode::RC_ATOMIC_WRITE, 0, 8, true, false), Verdict::NakInvalid);
  EXPECT_EQ(word(f, 0), 0u);
}

TEST(PlacementHostile, NotOnUc) {
  OnePacket f(QpType::UC);
  wire::Packet p = f.request(Opcode::RC_ATOMIC_WRITE, 0, 8);
  const uint64_t bad = f.t.b.pc->counters().rx_bad_opcode;
  f.t.inject(f.t.b, f.t.a, p);
  EXPECT_EQ(f.t.b.pc->counters().rx_bad_opcode, bad + 1);
  EXPECT_EQ(word(f, 0), 0u);
}

TEST(PlacementHostile, AWordAlignedAtItsIovaButNotInMemoryIsRefused) {
  // A region whose IOVA is 8-aligned where its memory is not: no atomic store can be whole there.
  OnePacket f;
  auto r = f.t.b.pc->reg_mr(f.t.b.pd, f.buf.data() + 4, 64, kAccessLocalWrite | kAccessRemoteWrite |
                            kAccessRemoteAtomic, std::optional<uint64_t>(0x10000));
  ASSERT_TRUE(r.ok()) << r.error().message;
  wire::Packet p = f.request(Opcode::RC_ATOMIC_WRITE, 0, 8);
  p.reth.va = 0x10000;
  p.reth.rkey = r->rkey.value();
  EXPECT_EQ(f.deliver(p), Verdict::NakInvalid);
  EXPECT_EQ(word(f, 0) | word(f, 8), 0u);
  OnePacket g;
  auto r2 = g.t.b.pc->reg_mr(g.t.b.pd, g.buf.data() + 4, 64, kAccessLocalWrite | kAccessRemoteWrite |
                             kAccessRemoteAtomic, std::optional<uint64_t>(0x10000));
  ASSERT_TRUE(r2.ok());
  wire::Packet a;
  a.bth.opcode = Opcode::RC_FETCH_ADD;
  a.bth.dest_qp = g.t.b.qp->qpn().value();
  a.bth.psn = g.t.b.qp->resp.epsn;
  a.atomic = {0x10000, r2->rkey.value(), 1, 0};
  EXPECT_EQ(g.deliver(a), Verdict::NakInvalid) << "the atomics too";
  EXPECT_EQ(word(g, 0) | word(g, 8), 0u);
}

TEST(PlacementHostile, AnAtomicAckIsNoAnswerToAnAtomicWrite) {
  Placement f;
  ASSERT_TRUE(f.atomic_write(1, 0));
  f.t.lose_tx(f.t.a);  // the request is lost: the ghost below comes first
  wire::Packet ack;
  ack.bth.opcode = Opcode::RC_ATOMIC_ACKNOWLEDGE;
  ack.bth.dest_qp = f.t.a.qp->qpn().value();
  ack.bth.psn = wire::Psn(f.t.opt.psn_a);
  ack.aeth = wire::Aeth::ack(0);
  ack.atomic_orig = 7;
  f.t.inject(f.t.a, f.t.b, ack);
  EXPECT_EQ(f.t.a.qp->state(), QpState::Rts) << "a ghost answer ended the QP";
  Wc wc = f.t.one_wc(f.t.a.scq);  // the resend is answered as it should be
  EXPECT_EQ(wc.status, WcStatus::Success) << to_string(wc.status);
  EXPECT_EQ(wc.opcode, WcOpcode::AtomicWrite);
}
