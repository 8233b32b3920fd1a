// The responder one packet at a time: a QP in a known state gets one request, and the test
// reads the verdict (CoreConfig::trace), the packets it answers with and its counters.
#include <gtest/gtest.h>

#include <cstring>

#include "../common/core_pair.hpp"

using namespace uroce;
using namespace uroce::test;
using transport::Verdict;
using wire::Opcode;

namespace {

struct OnePacket {
  explicit OnePacket(QpType type = QpType::RC) : t(options(type, verdicts)) {
    buf.assign(8192, 0);
    mr = t.reg(t.b, buf.data(), buf.size());
  }
  static PairOptions options(QpType type, std::vector<Verdict>& out) {
    PairOptions o;
    o.type = type;
    o.trace_b = [&out](const transport::Qp&, const wire::Packet&, Verdict v) { out.push_back(v); };
    return o;
  }
  // Hands b one request from a, returns the verdict and the packets b sent back (with run
  // false, b does not get to send what it queued: READ responses stay queued).
  Verdict send(Opcode op, uint32_t psn_offset = 0, size_t len = 16, bool ack_req = true, bool run = true) {
    std::vector<uint8_t> payload(len, 0x5c);
    wire::Packet p;
    p.bth.opcode = op;
    p.bth.dest_qp = t.b.qp->qpn().value();
    p.bth.psn = t.b.qp->resp.epsn + psn_offset;
    p.bth.ack_req = ack_req;
    p.reth = {uint64_t(buf.data()), mr.rkey, uint32_t(len)};
    if (p.info().flags & wire::kPayload) p.payload = payload;
    size_t before = verdicts.size();
    uint64_t tx = t.b.pc->counters().tx_packets;
    t.inject(t.b, t.a, p);
    if (run) t.b.pc->progress(t.sim.now());  // the coalesced ACK, if any
    answered = t.b.pc->counters().tx_packets - tx;
    t.b.pc->release_tx();
    EXPECT_EQ(verdicts.size(), before + 1);
    return verdicts.empty() ? Verdict::Dying : verdicts.back();
  }
  void post_recv() {
    Sge s{uint64_t(buf.data() + 4096), 4096, mr.lkey};
    ASSERT_TRUE(t.recv(t.b, {1, {&s, 1}}));
  }
  std::vector<Verdict> verdicts;
  CorePair t;
  std::vector<uint8_t> buf;
  test::CorePair::Keys mr;
  uint64_t answered = 0;
};

}  // namespace

TEST(Responder, InSequenceWriteIsExecutedAndAcked) {
  OnePacket f;
  EXPECT_EQ(f.send(Opcode::RC_WRITE_ONLY), Verdict::Execute);
  EXPECT_EQ(f.answered, 1u);  // the ACK it asked for
  EXPECT_EQ(f.buf[0], 0x5c);
  EXPECT_EQ(f.t.b.pc->counters().tx_acks, 1u);
}

TEST(Responder, DuplicateIsAckedAgainNotExecuted) {
  OnePacket f;
  ASSERT_EQ(f.send(Opcode::RC_WRITE_ONLY), Verdict::Execute);
  f.buf[0] = 0;
  EXPECT_EQ(f.send(Opcode::RC_WRITE_ONLY, uint32_t(-1) & 0xffffff), Verdict::Duplicate);
  EXPECT_EQ(f.buf[0], 0) << "a duplicate WRITE was written again";
  EXPECT_EQ(f.answered, 1u);
  EXPECT_EQ(f.t.b.pc->counters().rx_duplicate, 1u);
}

TEST(Responder, OneSequenceNakPerGap) {
  OnePacket f;
  EXPECT_EQ(f.send(Opcode::RC_WRITE_ONLY, 2), Verdict::NakSequence);
  EXPECT_EQ(f.answered, 1u);
  EXPECT_EQ(f.send(Opcode::RC_WRITE_ONLY, 3), Verdict::OutOfSequence);
  EXPECT_EQ(f.answered, 0u);
  EXPECT_EQ(f.t.b.pc->counters().tx_naks_seq, 1u);
  EXPECT_EQ(f.t.b.pc->counters().rx_out_of_sequence, 2u);
  EXPECT_EQ(f.t.b.qp->state(), QpState::Rts);
}

TEST(Responder, MiddleWithoutFirstIsAnInvalidRequest) {
  OnePacket f;
  EXPECT_EQ(f.send(Opcode::RC_SEND_MIDDLE, 0, f.t.b.qp->mtu()), Verdict::NakInvalid);
  EXPECT_EQ(f.answered, 1u);
  EXPECT_EQ(f.t.b.pc->counters().tx_naks_fatal, 1u);
  EXPECT_EQ(f.t.b.qp->state(), QpState::Err);
}

TEST(Responder, SendWithoutReceiveIsRnrNaked) {
  OnePacket f;
  EXPECT_EQ(f.send(Opcode::RC_SEND_ONLY), Verdict::Rnr);
  EXPECT_EQ(f.answered, 1u);
  EXPECT_EQ(f.t.b.pc->counters().tx_rnr_naks, 1u);
  f.post_recv();
  EXPECT_EQ(f.send(Opcode::RC_SEND_ONLY), Verdict::Execute);  // the retry, once a receive is there
  EXPECT_EQ(f.buf[4096], 0x5c);
}

TEST(Responder, WriteWithBadRkeyIsAnAccessError) {
  OnePacket f;
  f.mr.rkey ^= 0x100;
  EXPECT_EQ(f.send(Opcode::RC_WRITE_ONLY), Verdict::NakAccess);
  EXPECT_EQ(f.buf[0], 0);
  EXPECT_EQ(f.t.b.qp->state(), QpState::Err);
}

TEST(Responder, ReadBehindQueuedResponsesThenFatalNakThenDying) {
  OnePacket f;
  EXPECT_EQ(f.send(Opcode::RC_READ_REQUEST, 0, 4096, true, false), Verdict::Execute);  // responses queued
  f.mr.rkey ^= 0x100;
  EXPECT_EQ(f.send(Opcode::RC_WRITE_ONLY, 0, 16, true, false), Verdict::NakAccess);  // waits behind them
  EXPECT_EQ(f.answered, 0u);
  EXPECT_EQ(f.t.b.qp->state(), QpState::Rts);
  f.mr.rkey ^= 0x100;
  EXPECT_EQ(f.send(Opcode::RC_WRITE_ONLY, 0, 16, true, false), Verdict::Dying);
  EXPECT_EQ(f.t.b.pc->counters().rx_wrong_state, 1u);
  EXPECT_EQ(f.buf[0], 0);
  f.t.b.pc->progress(f.t.sim.now());  // 4 READ responses, then the NAK; then the QP is in ERR
  EXPECT_EQ(f.t.b.pc->tx_queue().size(), 5u);
  EXPECT_EQ(f.t.b.pc->tx_queue().back()->data[0], uint8_t(Opcode::RC_ACKNOWLEDGE));
  EXPECT_EQ(f.t.b.qp->state(), QpState::Err);
}

TEST(Responder, UcGapDropsTheMessage) {
  OnePacket f(QpType::UC);
  EXPECT_EQ(f.send(Opcode::UC_SEND_MIDDLE, 3, f.t.b.qp->mtu(), false), Verdict::UcDropped);
  EXPECT_EQ(f.answered, 0u);
  EXPECT_EQ(f.t.b.pc->counters().rx_uc_dropped, 1u);
  EXPECT_EQ(f.t.b.qp->state(), QpState::Rts);
}

TEST(Responder, VerdictsHaveNames) {
  EXPECT_STREQ(to_string(Verdict::NakSequence), "nak-sequence");
  EXPECT_STREQ(to_string(Verdict::DuplicateDropped), "duplicate-dropped");
}
