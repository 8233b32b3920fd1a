// A polling application's pass that makes a completion leaves its ACKs for the application's
// next post or poll, so that they leave with its answer in one send. They must still leave:
// a program that takes its last completion and exits without closing anything has its ACK
// sent at exit, and the peer's SEND completes.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "../common/proc.hpp"
#include "uroce/oob.hpp"
#include "uroce/uroce.hpp"

using namespace uroce;

namespace {

struct Side {
  std::unique_ptr<Device> dev;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> cq;
  std::unique_ptr<QueuePair> qp;
  std::vector<uint8_t> buf = std::vector<uint8_t>(4096);
  std::unique_ptr<MemoryRegion> mr;
  bool open() {
    DeviceOptions o;
    o.same_host_shm = false;  // over UDP, where the ACK costs a send of its own
    auto d = Device::open("uroce_lo", o);
    if (!d) return false;
    dev = std::move(*d);
    pd = std::move(*dev->alloc_pd());
    cq = std::move(*dev->create_cq(16));
    auto q = pd->create_qp({QpType::RC, cq.get(), cq.get()});
    auto m = pd->reg_mr(buf.data(), buf.size(), kAccessLocalWrite);
    if (!q || !m) return false;
    qp = std::move(*q);
    mr = std::move(*m);
    return true;
  }
  bool connect(OobChannel& ch, uint32_t psn) {
    auto peer = ch.exchange(Endpoint{*dev->query_gid(0), qp->qp_num(), psn});
    return peer && qp->connect(*peer, psn);
  }
};

}  // namespace

TEST(DeferredAck, AProgramThatExitsAtItsLastCompletionStillAcksIt) {
  for (int round = 0; round < 5; ++round) {
    auto ch = OobChannel::pair();
    ASSERT_TRUE(ch);
    auto& [parent_end, child_end] = *ch;
    pid_t child = test::spawn([&] {
      Side b;
      if (!b.open() || !b.connect(child_end, 200)) return 2;
      Sge r = b.mr->sge(0, 4096);
      if (!b.qp->post_recv({1, {&r, 1}})) return 3;
      if (!child_end.barrier()) return 4;
      Wc wc[1];
      const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (std::chrono::steady_clock::now() < end) {  // polling, as a busy program does
        if (b.cq->poll(wc) == 1) {
          if (wc[0].status != WcStatus::Success || std::memcmp(b.buf.data(), "last", 4) != 0) return 5;
          std::exit(0);  // nothing closed: the device, its QP and its engine thread are left as they are
        }
      }
      return 6;
    });
    { OobChannel gone = std::move(child_end); }
    Side a;
    ASSERT_TRUE(a.open());
    ASSERT_TRUE(a.connect(parent_end, 100));
    ASSERT_TRUE(parent_end.barrier());
    std::memcpy(a.buf.data(), "last", 4);
    Sge s = a.mr->sge(0, 64);
    ASSERT_TRUE(a.qp->post_send({7, WrOpcode::Send, kSendSignaled, {&s, 1}}));
    Wc wc[1];
    auto n = a.cq->wait(wc, 20'000);
    ASSERT_TRUE(n && *n == 1) << "round " << round;
    EXPECT_EQ(wc[0].status, WcStatus::Success) << "round " << round << ": the SEND's ACK was lost when the peer exited";
    EXPECT_EQ(test::reap(child, 30), 0) << "round " << round;
  }
}
