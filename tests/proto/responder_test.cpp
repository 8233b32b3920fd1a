// The responder one packet at a time (tests/common/one_packet.hpp).
#include <gtest/gtest.h>

#include <cstring>

#include "../common/one_packet.hpp"

using namespace uroce;
using namespace uroce::test;
using transport::Verdict;
using wire::Opcode;

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
