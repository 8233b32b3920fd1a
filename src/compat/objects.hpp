// The verbs C objects as uroce provides them: each embeds rdma-core's struct first (so the
// pointer a program holds is ours too) and owns the C++ object that does the work.
#pragma once
#include <infiniband/verbs.h>

#include <map>
#include <memory>
#include <mutex>

#include "uroce/uroce.hpp"

namespace uroce::compat {

struct UContext {
  ibv_context ibv;
  std::unique_ptr<Device> dev;
  // For async events, which name their object: handle -> the program's pointer.
  std::mutex mu;
  std::map<uint32_t, ibv_qp*> qps;
  std::map<uint32_t, ibv_srq*> srqs;
};

struct UPd {
  ibv_pd ibv;
  std::unique_ptr<ProtectionDomain> pd;
};

struct UMr {
  ibv_mr ibv;
  std::unique_ptr<MemoryRegion> mr;
};

struct UChannel {
  ibv_comp_channel ibv;  // ibv.fd is an epoll set of the member CQs' event fds
};

struct UCq {
  ibv_cq ibv;
  std::unique_ptr<CompletionQueue> cq;
};

struct USrq {
  ibv_srq ibv;
  std::unique_ptr<SharedReceiveQueue> srq;
};

struct UQp {
  ibv_qp ibv;
  std::unique_ptr<QueuePair> qp;
};

struct UAh {
  ibv_ah ibv;
  Ah ah;
};

// The verbs struct is the first member of a class with no bases or virtual functions: on the
// Itanium C++ ABI it sits at offset 0, so the program's pointer is the object's address.
template <class U, class T>
U* from(T* p) {
  return reinterpret_cast<U*>(p);
}

}  // namespace uroce::compat
