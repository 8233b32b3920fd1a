// The responder one packet at a time: B's QP in a known state gets one request from A (or a
// packet shaped by the test), and the test reads the verdict (CoreConfig::trace), the packets
// B answers with and its counters.
#pragma once
#include <gtest/gtest.h>

#include <vector>

#include "core_pair.hpp"

namespace uroce::test {

struct OnePacket {
  explicit OnePacket(QpType type = QpType::RC, uint32_t access = kAccessLocalWrite | kAccessRemoteWrite |
                                                                 kAccessRemoteRead | kAccessRemoteAtomic |
                                                                 kAccessFlushGlobal)
      : t(options(type, verdicts)) {
    buf.assign(8192, 0);
    mr = t.reg(t.b, buf.data(), buf.size(), access);
  }
  static PairOptions options(QpType type, std::vector<transport::Verdict>& out) {
    PairOptions o;
    o.type = type;
    o.access |= kAccessFlushGlobal;
    o.trace_b = [&out](const transport::Qp&, const wire::Packet&, transport::Verdict v) { out.push_back(v); };
    return o;
  }
  // A request of A's to B's buffer: `len` bytes of 0x5c where the opcode carries a payload.
  wire::Packet request(wire::Opcode op, uint32_t psn_offset = 0, size_t len = 16, bool ack_req = true) {
    payload.assign(len, 0x5c);
    wire::Packet p;
    p.bth.opcode = op;
    p.bth.dest_qp = t.b.qp->qpn().value();
    p.bth.psn = t.b.qp->resp.epsn + psn_offset;
    p.bth.ack_req = ack_req;
    p.reth = {uint64_t(buf.data()), mr.rkey, uint32_t(len)};
    if (p.info().flags & wire::kPayload) p.payload = payload;
    return p;
  }
  // Hands B packet p from A, returns the verdict; answered counts the packets B sent back
  // (with run false, B does not get to send what it queued: READ responses stay queued), and
  // last_answer holds the last of them.
  transport::Verdict deliver(wire::Packet& p, bool run = true) {
    size_t before = verdicts.size();
    uint64_t tx = t.b.pc->counters().tx_packets;
    t.inject(t.b, t.a, p);
    if (run) t.b.pc->progress(t.sim.now());  // the coalesced ACK, if any
    answered = t.b.pc->counters().tx_packets - tx;
    last_answer.clear();
    if (answered && !t.b.pc->tx_queue().empty()) {
      const auto* pb = t.b.pc->tx_queue().back();
      last_answer.assign(pb->data, pb->data + pb->len);
    }
    t.b.pc->release_tx();
    EXPECT_EQ(verdicts.size(), before + 1);
    return verdicts.empty() ? transport::Verdict::Dying : verdicts.back();
  }
  transport::Verdict send(wire::Opcode op, uint32_t psn_offset = 0, size_t len = 16, bool ack_req = true,
                          bool run = true) {
    wire::Packet p = request(op, psn_offset, len, ack_req);
    return deliver(p, run);
  }
  void post_recv() {
    Sge s{uint64_t(buf.data() + 4096), 4096, mr.lkey};
    ASSERT_TRUE(t.recv(t.b, {1, {&s, 1}}));
  }
  std::vector<transport::Verdict> verdicts;
  CorePair t;
  std::vector<uint8_t> buf;
  std::vector<uint8_t> payload;
  CorePair::Keys mr;
  uint64_t answered = 0;
  std::vector<uint8_t> last_answer;  // the last packet B sent back, ICRC included
};

}  // namespace uroce::test
