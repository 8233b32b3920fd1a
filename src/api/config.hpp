// What a device runs with: its DeviceOptions, with the environment (UROCE_*) filling what they
// leave unset. Read here, once, for the whole stack: nothing below the API reads the
// environment, and the transport never sees a string.
#pragma once
#include <cstdint>
#include <string>

#include "link/udp_link.hpp"
#include "transport/protocol_core.hpp"
#include "uroce/uroce.hpp"

namespace uroce::detail {

struct DeviceSettings {
  Gid addr;                    // all zero: the first free 127.0.0.x
  std::string pcap;            // capture file; empty: none
  link::UdpLink::Rx rx = link::UdpLink::Rx::Auto;
  bool gso = true;             // UROCE_GSO=0: one sendmsg per packet
  bool same_host_shm = true;
  bool shared = false;         // through the host NIC daemon (link/host_nic.hpp)
  bool progress_thread = true;
  uint64_t spin_ns = 200'000;  // adaptive polling: spin this long after the last activity, then block
  double rx_loss = 0;
  uint64_t rx_loss_seed = 1;
  transport::CoreConfig core;  // congestion control and its parameters, reliability, seed
};

// EINVAL, with the setting named, for a value that cannot be used.
Result<DeviceSettings> device_settings(const DeviceOptions& o);

// The device a program opens by name (empty: the first listed) or by opts.addr, and where:
// fills opts.addr (empty on loopback: a free 127.0.0.x) and returns the device's name.
Result<std::string> place_device(const std::string& name, DeviceOptions& opts);

}  // namespace uroce::detail
