// The completer one packet at a time: a requester whose requests were sent (and lost) gets
// one ACK, NAK or response, and the test reads the verdict, the completions and counters.
#include <gtest/gtest.h>

#include "../common/core_pair.hpp"

using namespace uroce;
using namespace uroce::test;
using transport::Verdict;
using wire::Aeth;
using wire::NakCode;
using wire::Opcode;

namespace {

struct OneResponse {
  OneResponse() : t(options(verdicts)) {
    buf.assign(8192, 0x11);
    mr = t.reg(t.a, buf.data(), buf.size());
  }
  static PairOptions options(std::vector<Verdict>& out) {
    PairOptions o;
    o.trace_a = [&out](const transport::Qp&, const wire::Packet&, Verdict v) { out.push_back(v); };
    return o;
  }
  // Posts a signaled request on a and lets it leave, lost; returns its first PSN.
  wire::Psn post(WrOpcode op, uint32_t len) {
    wire::Psn first = t.a.qp->req.psn;
    Sge s{uint64_t(buf.data()), len, mr.lkey};
    SendWr w{uint64_t(op), op, kSendSignaled, {&s, 1}};
    w.remote_addr = 0x1000;
    w.rkey = 0x1234;
    EXPECT_TRUE(t.send(t.a, w));
    t.lose_tx(t.a);
    return first;
  }
  Verdict answer(Opcode op, wire::Psn psn, Aeth aeth, size_t len = 0) {
    std::vector<uint8_t> payload(len, 0x99);
    wire::Packet p;
    p.bth.opcode = op;
    p.bth.dest_qp = t.a.qp->qpn().value();
    p.bth.psn = psn;
    p.aeth = aeth;
    if (len) p.payload = payload;
    size_t before = verdicts.size();
    t.inject(t.a, t.b, p);
    EXPECT_EQ(verdicts.size(), before + 1);
    return verdicts.empty() ? Verdict::Unexpected : verdicts.back();
  }
  int completions(std::vector<Wc>& out) {
    Wc wc[16];
    int n = t.a.scq->poll(wc);
    out.assign(wc, wc + std::max(n, 0));
    return n;
  }
  std::vector<Verdict> verdicts;
  CorePair t;
  std::vector<uint8_t> buf;
  test::CorePair::Keys mr;
};

}  // namespace

TEST(Completer, AckRetiresThenRepeatsAreStale) {
  OneResponse f;
  wire::Psn psn = f.post(WrOpcode::RdmaWrite, 3000);  // 3 packets at MTU 1024
  EXPECT_EQ(f.answer(Opcode::RC_ACKNOWLEDGE, psn + 2, Aeth::ack(1)), Verdict::Acked);
  std::vector<Wc> wc;
  ASSERT_EQ(f.completions(wc), 1);
  EXPECT_EQ(wc[0].status, WcStatus::Success);
  EXPECT_EQ(f.answer(Opcode::RC_ACKNOWLEDGE, psn + 2, Aeth::ack(1)), Verdict::Stale);
  EXPECT_EQ(f.answer(Opcode::RC_ACKNOWLEDGE, psn + 3, Aeth::ack(2)), Verdict::Unexpected);  // never sent
}

TEST(Completer, SequenceNakGoesBackOnceThenIsStale) {
  OneResponse f;
  wire::Psn psn = f.post(WrOpcode::RdmaWrite, 3000);
  EXPECT_EQ(f.answer(Opcode::RC_ACKNOWLEDGE, psn, Aeth::nak(0, NakCode::PsnSequenceError)), Verdict::GoBack);
  // The same NAK again (nothing acknowledged since): the requester is already resending.
  EXPECT_EQ(f.answer(Opcode::RC_ACKNOWLEDGE, psn, Aeth::nak(0, NakCode::PsnSequenceError)), Verdict::Stale);
  EXPECT_EQ(f.t.a.pc->counters().rx_naks_seq, 2u);
  EXPECT_EQ(f.t.a.qp->comp.retry_left, f.t.opt.retry_cnt - 1);  // counted once
  EXPECT_EQ(f.t.a.qp->state(), QpState::Rts);
}

TEST(Completer, RnrNakWaits) {
  OneResponse f;
  wire::Psn psn = f.post(WrOpcode::Send, 64);
  EXPECT_EQ(f.answer(Opcode::RC_ACKNOWLEDGE, psn, Aeth::rnr_nak(0, 14)), Verdict::RnrWait);
  EXPECT_TRUE(f.t.a.qp->timers.armed(transport::QpTimer::Rnr));
}

TEST(Completer, FatalNakEndsTheQpWithItsStatus) {
  OneResponse f;
  wire::Psn psn = f.post(WrOpcode::RdmaWrite, 64);
  EXPECT_EQ(f.answer(Opcode::RC_ACKNOWLEDGE, psn, Aeth::nak(0, NakCode::RemoteAccessError)), Verdict::Fatal);
  std::vector<Wc> wc;
  ASSERT_EQ(f.completions(wc), 1);
  EXPECT_EQ(wc[0].status, WcStatus::RemAccessErr);
  EXPECT_EQ(f.t.a.qp->state(), QpState::Err);
}

TEST(Completer, ReadResponsesPlaceDataInOrder) {
  OneResponse f;
  wire::Psn psn = f.post(WrOpcode::RdmaRead, 2048);  // 2 responses
  EXPECT_EQ(f.answer(Opcode::RC_READ_RESPONSE_LAST, psn + 1, Aeth::ack(1), 1024), Verdict::GapRetry);
  EXPECT_EQ(f.answer(Opcode::RC_READ_RESPONSE_FIRST, psn, Aeth::ack(0), 1000), Verdict::Unexpected);  // short
  EXPECT_EQ(f.answer(Opcode::RC_READ_RESPONSE_FIRST, psn, Aeth::ack(0), 1024), Verdict::Acked);
  EXPECT_EQ(f.answer(Opcode::RC_READ_RESPONSE_FIRST, psn, Aeth::ack(0), 1024), Verdict::Stale);
  EXPECT_EQ(f.answer(Opcode::RC_READ_RESPONSE_LAST, psn + 1, Aeth::ack(1), 1024), Verdict::Acked);
  std::vector<Wc> wc;
  ASSERT_EQ(f.completions(wc), 1);
  EXPECT_EQ(wc[0].status, WcStatus::Success);
  EXPECT_EQ(f.buf[0], 0x99);
  EXPECT_EQ(f.buf[2047], 0x99);
  EXPECT_EQ(f.buf[2048], 0x11);
}
