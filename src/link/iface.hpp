// The network interface a device's address lives on: its MTU and its IPv6 addresses, which
// become GIDs beside the IPv4 one (as rxe builds its GID table from the netdev).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "uroce/result.hpp"
#include "uroce/types.hpp"

namespace uroce::link {

struct Interface {
  std::string name;        // empty if no interface holds the address
  uint32_t index = 0;
  uint32_t mtu = 1500;
  bool loopback = false;
  std::array<uint8_t, 6> mac{};  // all zero on loopback
  std::vector<Gid> ipv6;   // link-local first, then the others (rxe's GID order)
  uint32_t ipv4 = 0;       // its (first) IPv4 address, host order; 0 if none
  int error = 0;           // errno if the host's interfaces could not be read (out of descriptors)
};

// The node GUID of a device on this interface, as rxe makes it: the MAC as an EUI-64 (U/L
// bit flipped, ff:fe in the middle). Without a MAC (loopback): locally administered, from the
// host's machine ID, so the same on every start and different between hosts.
uint64_t node_guid(const Interface& itf);

// The interface holding addr (for 127/8, loopback).
Interface find_interface(const Gid& addr);

// What a device says when the host's interfaces could not be read (err: getifaddrs's errno,
// EMFILE when out of descriptors): opened without them, its MTU and GIDs would be wrong.
Error unreadable_interfaces(int err);

// A network interface a device can sit on: up, with an address a UDP socket can bind without a
// scope (IPv4, or IPv6 that is not link-local).
struct Candidate {
  std::string name;
  uint32_t index = 0;
  bool loopback = false;
  Gid addr;  // where its device opens: the first IPv4 address, else the first global IPv6 one
};

// The host's interfaces in the order their devices are listed: the interface of the default
// route first (IPv4's, else IPv6's; without one, the first by index), loopback last.
// `only` (comma-separated interface names, empty: all) keeps those alone. If the host's
// interfaces cannot be read, none, with errno in *error.
std::vector<Candidate> device_interfaces(const std::string& only = {}, int* error = nullptr);

// The ordering alone, for a given interface list and default-route interface (0: none).
std::vector<Candidate> order_interfaces(std::vector<Candidate> all, uint32_t default_route, const std::string& only);

// Of those, the ones whose devices programs enumerate: loopback's only where no other interface
// has a device or `only` names lo. UCX and Open MPI stripe a job over every device they find and
// take any RoCE device as reachable, while a loopback device reaches its own host alone (rxe
// gives lo no device either). It still opens by name, and UROCE_ADDR on 127/8 lists it.
std::vector<Candidate> shown_interfaces(std::vector<Candidate> ordered, const std::string& only);

inline bool is_link_local(const Gid& g) { return g.raw[0] == 0xfe && (g.raw[1] & 0xc0) == 0x80; }

}  // namespace uroce::link
