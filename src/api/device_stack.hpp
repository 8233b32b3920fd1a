// What every API object shares: the protocol core, its UDP link and the engine thread.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "engine/engine.hpp"
#include "link/shm_link.hpp"
#include "link/udp_link.hpp"
#include "transport/protocol_core.hpp"

namespace uroce::detail {

inline constexpr uint64_t kMaxDmBytes = 256 << 10;  // device memory per device (mlx5's on-chip: 128 KiB to 256 KiB)

// The engine lock for a control call. Released, it first hands on what the call made
// (Engine::after_control): a program blocked on a completion channel or the async fd must
// hear of completions and events now, and a modify_qp to ERR must see its flush done, not at
// the engine's next pass, which may never come while the device is idle.
class ControlLock {
 public:
  explicit ControlLock(engine::Engine& e) : e_(&e), g_(e.control_lock()) {}
  ControlLock(ControlLock&&) = default;
  ControlLock& operator=(ControlLock&& o) {
    unlock();
    e_ = o.e_;
    g_ = std::move(o.g_);
    return *this;
  }
  ~ControlLock() { unlock(); }
  void unlock() {
    if (!g_.owns_lock()) return;
    e_->after_control();
    g_.unlock();
  }

 private:
  engine::Engine* e_;
  std::unique_lock<transport::CoreMutex> g_;
};

struct DeviceStack {
  std::string name;
  std::unique_ptr<link::UdpLink> link;
  std::unique_ptr<link::SameHostLink> shm;  // shared memory to local peers, over `link`; may be null
  std::unique_ptr<transport::ProtocolCore> pc;
  std::unique_ptr<engine::Engine> engine;
  std::atomic<uint64_t> dm_used{0};  // device memory allocated (DmHold)
  uint32_t raw_qps = 0;              // raw packet QPs, which keep the raw port open (engine lock)

  ControlLock lock() { return ControlLock(*engine); }
  link::Link& active_link() { return shm ? static_cast<link::Link&>(*shm) : *link; }
  ~DeviceStack() {
    if (engine) engine->stop();
    engine.reset();
    shm.reset();
  }
};

// Status records of the device's QPs and counters, for the host NIC daemon (api/status.cpp).
// The engine lock held.
std::string status_records(const DeviceStack& stack);

// Raw packet QPs' port on the device's interface (api/raw.cpp): open while any raw QP is
// (uses: those QPs). hold_raw_port opens it for `made`, a new one, or destroys `made` if it
// cannot (EPERM without CAP_NET_RAW); release_raw_port closes it after the last. The engine
// lock held.
Status hold_raw_port(DeviceStack& stack, transport::Qp* made);
void release_raw_port(DeviceStack& stack);

}  // namespace uroce::detail
