// The UDP sockets a RoCEv2 port receives and sends on, set up as RoCE NICs behave: DF set
// (so IP ID 0 on unconnected sockets), ECT(0) sent and the ECN bits of what arrives read,
// large buffers; IPv6 sockets accept a zero UDP checksum. reuseport: a member of a steering
// group (link/steering.hpp). Non-blocking, close-on-exec; -1 with *err set on failure.
#pragma once
#include <cstdint>

#include "uroce/types.hpp"

namespace uroce::link {

int make_socket(uint32_t ip, uint16_t port, int* err, bool reuseport = false);
// A socket that receives what is sent to IPv4 multicast group:4791 on one interface: ifindex,
// or (0) the one of local_ip (IP_ADD_MEMBERSHIP).
int make_group_socket(uint32_t group, uint32_t local_ip, uint32_t ifindex, int* err);
// An IPv6 group's socket: bound to [group]:4791, a member on interface ifindex.
int make_group_socket6(const Gid& group, uint32_t ifindex, int* err);
int make_socket6(const Gid& addr, uint32_t scope, uint16_t port, int* err, bool reuseport = false);

}  // namespace uroce::link
