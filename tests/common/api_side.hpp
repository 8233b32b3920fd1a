// One end of an RC connection through the public API: a device, a CQ, a QP and a 1 MiB
// region the peer may write and read.
#pragma once
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "uroce/uroce.hpp"

namespace uroce::test {

// The next completion of cq, waited for in bounded steps (20 s in all, then a test failure).
inline Wc wait_one(CompletionQueue& cq) {
  Wc wc[1];
  for (int i = 0; i < 20000; ++i)
    if (auto r = cq.wait(wc, 1); r && *r == 1) return wc[0];
  ADD_FAILURE() << "no completion in 20 s";
  return {};
}

struct ApiSide {
  std::unique_ptr<Device> dev;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> cq;
  std::unique_ptr<QueuePair> qp;
  std::vector<uint8_t> buf = std::vector<uint8_t>(1 << 20);
  std::unique_ptr<MemoryRegion> mr;

  explicit ApiSide(const DeviceOptions& o) {
    dev = std::move(*Device::open("uroce_lo", o));
    pd = std::move(*dev->alloc_pd());
    cq = std::move(*dev->create_cq(256));
    new_qp();
    mr = std::move(*pd->reg_mr(buf.data(), buf.size(), kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead));
  }
  void new_qp() { qp = std::move(*pd->create_qp({QpType::RC, cq.get(), cq.get(), {}, false, nullptr})); }
  Endpoint endpoint(uint32_t psn) {
    return {*dev->query_gid(0), qp->qp_num(), psn, uint64_t(buf.data()), mr->rkey(), buf.size()};
  }
  uint64_t counter(const char* name) { return dev->counters()[name]; }
  Wc wait_one() { return test::wait_one(*cq); }
};

}  // namespace uroce::test
