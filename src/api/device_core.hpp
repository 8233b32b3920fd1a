// What every API object shares: the protocol core, its UDP link and the engine thread.
#pragma once
#include <memory>
#include <mutex>
#include <string>

#include "engine/engine.hpp"
#include "link/shm_link.hpp"
#include "link/udp_link.hpp"
#include "transport/protocol_core.hpp"

namespace uroce::detail {

struct DeviceCore {
  std::string name;
  std::unique_ptr<link::UdpLink> link;
  std::unique_ptr<link::SameHostLink> host;  // shared memory to local peers, over `link`; may be null
  std::unique_ptr<transport::ProtocolCore> nic;
  std::unique_ptr<engine::Engine> engine;

  std::unique_lock<std::mutex> lock() { return engine->control_lock(); }
  link::Link& active_link() { return host ? static_cast<link::Link&>(*host) : *link; }
  ~DeviceCore() {
    if (engine) engine->stop();
    engine.reset();
    host.reset();
  }
};

}  // namespace uroce::detail
