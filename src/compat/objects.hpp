// The verbs C objects as uroce provides them: each embeds rdma-core's struct first (so the
// pointer a program holds is ours too) and owns the C++ object that does the work.
#pragma once
#include <infiniband/verbs.h>

#include <cstddef>
#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "uroce/uroce.hpp"

namespace uroce::compat {

// One NIC per device per process, as on hardware: every ibv_open_device of a device shares it
// (its port, GID table, engine and capture), and objects made through any context use it.
struct UDevice {
  std::unique_ptr<Device> dev;
  // For async events, which name their object: handle -> the program's pointer.
  std::mutex mu;
  std::map<uint32_t, ibv_qp*> qps;
  std::map<uint32_t, ibv_srq*> srqs;
  // Events handed to the program and not yet acked, per QP or SRQ: destroying one waits for
  // them (as libibverbs' destroy does), so a handler never holds a destroyed object.
  std::map<const void*, int> unacked;
  std::condition_variable acked;
  std::atomic<uint32_t> ahs{0};  // address handles held, at most kMaxAh
  // What another context of this process may import (ibv_import_pd/mr/dm), by handle (under mu).
  std::map<uint32_t, struct UPd*> pds;
  std::map<uint32_t, struct UMr*> mrs;
  std::map<uint32_t, struct UDm*> dms;
  uint32_t next_handle = 1;
  // XRC domains opened by file (ibv_open_xrcd with an fd): the same file, the same domain.
  std::map<std::pair<uint64_t, uint64_t>, std::weak_ptr<XrcDomain>> xrcd_files;  // (st_dev, st_ino)
};

struct UContext {
  // Extended: the inline verbs find create_qp_ex and friends here. Programs hold &vctx.context.
  verbs_context vctx;
  std::shared_ptr<UDevice> shared;
  Device* dev = nullptr;  // shared->dev
};

// A protection domain, or a parent domain (ibv_alloc_parent_domain): a PD of its own to the
// program, the same protection domain underneath (`base` is the one it was made from).
struct UPd {
  ibv_pd ibv;
  std::shared_ptr<ProtectionDomain> pd;
  struct UPd* base = nullptr;      // a parent domain's
  struct UTd* td = nullptr;        // a parent domain's thread domain, or null
  std::atomic<uint32_t> parents{0};  // parent domains made from this one
  std::atomic<uint32_t> objects{0};  // QPs, SRQs, regions and windows made in it (by this pointer)
  bool imported = false;  // ibv_import_pd's: the PD is its owner's; ibv_unimport_pd lets go
};

// A thread domain: the promise that one thread at a time uses what is made in it. uroce's
// queues take their locks anyway; the object exists so that programs can make it and pass it.
struct UTd {
  ibv_td ibv;
  std::atomic<uint32_t> users{0};  // parent domains that name it
};

struct UMr {
  ibv_mr ibv;
  std::unique_ptr<MemoryRegion> mr;  // null for ibv_import_mr's: the region is its owner's
};

struct UDm {
  ibv_dm ibv;
  std::shared_ptr<DeviceMemory> dm;  // shared with what imported it
  bool imported = false;
};

struct UMw {
  ibv_mw ibv;
  std::unique_ptr<MemoryWindow> mw;
};

struct UChannel {
  ibv_comp_channel ibv;  // ibv.fd is an epoll set of the member CQs' event fds
};

// ibv_cq_ex begins with ibv_cq's fields, so one object serves ibv_create_cq and
// ibv_create_cq_ex programs alike (ibv_cq_ex_to_cq is a cast).
struct UCq {
  ibv_cq_ex ibv;
  std::unique_ptr<CompletionQueue> cq;
  Wc cur;  // the completion that ibv_start_poll/ibv_next_poll stand on; read_* read it
};

// An XRC domain as ibv_open_xrcd gives it: each open is a handle of its own on the domain.
struct UXrcd {
  ibv_xrcd ibv;
  std::shared_ptr<XrcDomain> xrcd;
  std::atomic<uint32_t> objects{0};  // XRC SRQs and target QPs made through this handle
};

struct USrq {
  ibv_srq ibv;
  std::unique_ptr<SharedReceiveQueue> srq;
  UXrcd* xrcd = nullptr;  // an XRC SRQ's domain handle
};

// One request of an extended-API batch (ibv_wr_start .. ibv_wr_complete).
struct PendingWr {
  SendWr wr;
  std::vector<Sge> sges;
  std::vector<uint8_t> inline_data;
  Ah* ah = nullptr;
  MwBind bind;  // ibv_wr_bind_mw
};

// What rdma-core 45 and later add to the verbs ABI, for FLUSH (IBA 1.5); Debian's headers
// predate it. The numbers and the place of wr_flush, right after wr_atomic_write, are theirs.
constexpr unsigned kIbvAccessFlushGlobal = 1u << 8, kIbvAccessFlushPersistent = 1u << 9;
constexpr unsigned kIbvWrFlush = 14, kIbvWcFlush = 8;
constexpr uint64_t kIbvQpExWithFlush = 1ull << 11;
constexpr uint64_t kIbvDeviceFlushGlobal = 1ull << 38, kIbvDeviceAtomicWrite = 1ull << 40;
using WrFlushFn = void (*)(ibv_qp_ex*, uint32_t rkey, uint64_t remote_addr, size_t len, uint8_t type, uint8_t level);
struct QpExFlush {
  ibv_qp_ex base;
  WrFlushFn wr_flush;
};
static_assert(sizeof(ibv_qp_ex) == offsetof(ibv_qp_ex, wr_atomic_write) + sizeof(void*) &&
                  offsetof(QpExFlush, wr_flush) == sizeof(ibv_qp_ex),
              "wr_flush follows wr_atomic_write, the last member of Debian's ibv_qp_ex");

struct UQp {
  QpExFlush qpx;  // the extended API (qpx.base.qp_base is the ibv_qp programs hold), wr_flush after it
  std::unique_ptr<QueuePair> qp;
  std::vector<PendingWr> batch;  // entries are reused: their vectors keep their capacity
  size_t batch_len = 0;
  int batch_err = 0;
  UXrcd* xrcd = nullptr;  // an XRC target QP's domain handle (it has no PD)
  ibv_rwq_ind_table* table = nullptr;  // an RSS QP's indirection table
  bool ece_set = false;  // ibv_set_ece chose the QP's options: ibv_query_ece reports those
};

struct UAh {
  ibv_ah ibv;
  Ah ah;
};

inline UContext* uctx(ibv_context* c) {
  return reinterpret_cast<UContext*>(reinterpret_cast<char*>(c) - offsetof(verbs_context, context));
}

// The verbs struct is the first member of a class with no bases or virtual functions: on the
// Itanium C++ ABI it sits at offset 0, so the program's pointer is the object's address.
template <class U, class T>
U* from(T* p) {
  return reinterpret_cast<U*>(p);
}

}  // namespace uroce::compat
