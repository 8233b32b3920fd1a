// What a public object holds of the NIC: its core object and the device. A child holds its
// parents' holds (a QP its PD and CQs, an MR its PD), so the core objects go away only after
// the last object using them, whatever order the program destroys things in.
#pragma once
#include <unistd.h>

#include <memory>

#include "api/device_stack.hpp"

namespace uroce::detail {

// Never copied: a copy's destructor would destroy the object.

struct PdHold {
  PdHold(std::shared_ptr<DeviceStack> c, verbs::PdHandle h) : stack(std::move(c)), pd(h) {}
  PdHold(const PdHold&) = delete;
  PdHold& operator=(const PdHold&) = delete;
  std::shared_ptr<DeviceStack> stack;
  verbs::PdHandle pd;
  ~PdHold() {
    auto g = stack->lock();
    (void)stack->pc->dealloc_pd(pd);
  }
};

struct CqHold {
  CqHold(std::shared_ptr<DeviceStack> c, verbs::Cq* q, int fd) : stack(std::move(c)), cq(q), event_fd(fd) {}
  CqHold(const CqHold&) = delete;
  CqHold& operator=(const CqHold&) = delete;
  std::shared_ptr<DeviceStack> stack;
  verbs::Cq* cq = nullptr;
  int event_fd = -1;  // the engine writes it until the core CQ is gone: closed only after
  ~CqHold() {
    {
      auto g = stack->lock();
      (void)stack->pc->destroy_cq(cq);
    }
    close(event_fd);
  }
};

struct XrcdHold {
  XrcdHold(std::shared_ptr<DeviceStack> c, uint32_t h) : stack(std::move(c)), xrcd(h) {}
  XrcdHold(const XrcdHold&) = delete;
  XrcdHold& operator=(const XrcdHold&) = delete;
  std::shared_ptr<DeviceStack> stack;
  uint32_t xrcd;
  ~XrcdHold() {
    auto g = stack->lock();
    (void)stack->pc->destroy_xrcd(xrcd);
  }
};

struct SrqHold {
  SrqHold(std::shared_ptr<DeviceStack> c, std::shared_ptr<PdHold> p, verbs::Srq* s)
      : stack(std::move(c)), pd(std::move(p)), srq(s) {}
  SrqHold(const SrqHold&) = delete;
  SrqHold& operator=(const SrqHold&) = delete;
  std::shared_ptr<DeviceStack> stack;
  std::shared_ptr<PdHold> pd;
  verbs::Srq* srq = nullptr;
  std::shared_ptr<XrcdHold> xrcd;  // an XRC SRQ: its domain and the CQ it completes to
  std::shared_ptr<CqHold> cq;
  ~SrqHold() {
    auto g = stack->lock();
    (void)stack->pc->destroy_srq(srq);
  }
};

// Device memory: its bytes, counted in the device's dm_used until the last user is gone.
struct DmHold {
  DmHold(std::shared_ptr<DeviceStack> c, size_t n)
      : stack(std::move(c)), words(std::make_unique<uint64_t[]>((n + 7) / 8)), len(n) {}
  DmHold(const DmHold&) = delete;
  DmHold& operator=(const DmHold&) = delete;
  std::shared_ptr<DeviceStack> stack;
  std::unique_ptr<uint64_t[]> words;  // zeroed; 8-byte aligned, as atomics on it need
  size_t len;
  uint8_t* bytes() const { return reinterpret_cast<uint8_t*>(words.get()); }
  std::atomic<uint32_t> mrs{0};  // memory regions on it
  ~DmHold() { stack->dm_used -= len; }
};

}  // namespace uroce::detail
