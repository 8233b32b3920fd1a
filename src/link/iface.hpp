// The network interface a device's address lives on: its MTU and its IPv6 addresses, which
// become GIDs beside the IPv4 one (as rxe builds its GID table from the netdev).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "uroce/types.hpp"

namespace uroce::link {

struct Interface {
  std::string name;        // empty if no interface holds the address
  uint32_t index = 0;
  uint32_t mtu = 1500;
  bool loopback = false;
  std::vector<Gid> ipv6;   // link-local first, then the others (rxe's GID order)
};

// The interface holding addr (for 127/8, loopback).
Interface find_interface(const Gid& addr);

inline bool is_link_local(const Gid& g) { return g.raw[0] == 0xfe && (g.raw[1] & 0xc0) == 0x80; }

}  // namespace uroce::link
