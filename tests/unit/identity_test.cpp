// A device's identity as a NIC has it: its node GUID from the interface's MAC, made as rxe
// makes it (EUI-64), and on loopback, which has no MAC, from the host's machine ID: the same
// on every start, locally administered.
#include <gtest/gtest.h>

#include "link/iface.hpp"

using namespace uroce;

TEST(Identity, NodeGuidIsTheMacAsEui64) {
  link::Interface itf;
  itf.mac = {0x52, 0x54, 0x00, 0x12, 0x34, 0x56};
  EXPECT_EQ(link::node_guid(itf), 0x505400fffe123456ull) << "U/L bit flipped, ff:fe in the middle";
  itf.mac = {0x02, 0x00, 0x00, 0x00, 0x00, 0x01};
  EXPECT_EQ(link::node_guid(itf), 0x000000fffe000001ull);
}

TEST(Identity, LoopbackNodeGuidIsTheHostsOwnAndStable) {
  link::Interface lo;
  const uint64_t g = link::node_guid(lo);
  EXPECT_EQ(g >> 56, 0x02u) << "locally administered";
  EXPECT_NE(g & 0x00ffffffffffffffull, 0u);
  EXPECT_EQ(link::node_guid(lo), g) << "the same on every call (and start)";
  EXPECT_EQ(link::node_guid(link::find_interface(Gid::from_ipv4(0x7f000001))), g) << "what loopback devices report";
}
