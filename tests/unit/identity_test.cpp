// A device's identity as a NIC has it: its node GUID from the interface's MAC, made as rxe
// makes it (EUI-64), and on loopback, which has no MAC, from the host's machine ID: the same
// on every start, locally administered.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>

#include "link/iface.hpp"
#include "uroce/uroce.hpp"

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

// Devices are listed as users expect from rxe or a NIC: the interface of the default route
// first, the others by index, loopback last; UROCE_DEVICES keeps the interfaces it names.
TEST(Identity, DevicesFollowTheDefaultRouteAndLoopbackComesLast) {
  auto c = [](const char* n, uint32_t index, bool lo = false) {
    return link::Candidate{n, index, lo, Gid::from_ipv4(0x0a000000 + index)};
  };
  std::vector<link::Candidate> all = {c("lo", 1, true), c("eth0", 2), c("eth1", 3), c("veth9", 7)};
  auto names = [](const std::vector<link::Candidate>& v) {
    std::string s;
    for (const auto& x : v) s += x.name + " ";
    return s;
  };
  EXPECT_EQ(names(link::order_interfaces(all, 3, "")), "eth1 eth0 veth9 lo ");
  EXPECT_EQ(names(link::order_interfaces(all, 0, "")), "eth0 eth1 veth9 lo ") << "no default route: by index";
  EXPECT_EQ(names(link::order_interfaces(all, 1, "")), "eth0 eth1 veth9 lo ") << "loopback is never first";
  EXPECT_EQ(names(link::order_interfaces(all, 3, "lo")), "lo ");
  EXPECT_EQ(names(link::order_interfaces(all, 3, "veth9,eth0")), "eth0 veth9 ");
  EXPECT_EQ(names(link::order_interfaces(all, 3, "eth")), "") << "whole names only";
}

// Programs enumerate loopback's device only where it is the host's one device or is asked for:
// UCX and Open MPI would stripe a job across hosts over it, which reaches its own host alone.
TEST(Identity, LoopbackIsListedOnlyAloneOrWhenNamed) {
  auto c = [](const char* n, uint32_t index, bool lo = false) {
    return link::Candidate{n, index, lo, Gid::from_ipv4(0x0a000000 + index)};
  };
  auto names = [](const std::vector<link::Candidate>& v) {
    std::string s;
    for (const auto& x : v) s += x.name + " ";
    return s;
  };
  auto shown = [&](std::vector<link::Candidate> all, const std::string& only) {
    return names(link::shown_interfaces(link::order_interfaces(std::move(all), 2, only), only));
  };
  const std::vector<link::Candidate> host = {c("lo", 1, true), c("eth0", 2), c("eth1", 3)};
  EXPECT_EQ(shown(host, ""), "eth0 eth1 ");
  EXPECT_EQ(shown({c("lo", 1, true)}, ""), "lo ") << "a host with loopback alone";
  EXPECT_EQ(shown(host, "lo"), "lo ");
  EXPECT_EQ(shown(host, "eth1,lo"), "eth1 lo ");
  EXPECT_EQ(shown(host, "eth1"), "eth1 ");
  EXPECT_EQ(shown({}, ""), "");
}

// This host's list: every device is uroce_<interface>, loopback's last, each found again by
// its own address, and UROCE_DEVICES=lo leaves loopback alone.
TEST(Identity, ThisHostsDevicesAreNamedByInterface) {
  unsetenv("UROCE_ADDR");
  setenv("UROCE_DEVICES", "lo", 1);
  auto only_lo = Device::list();
  ASSERT_EQ(only_lo.size(), 1u);
  EXPECT_EQ(only_lo[0].name, "uroce_lo");
  EXPECT_TRUE(only_lo[0].loopback);
  EXPECT_EQ(only_lo[0].addr, "");
  EXPECT_EQ(Device::name_for("127.0.0.42"), "uroce_lo");
  EXPECT_EQ(Device::name_for("not an address"), "");
  unsetenv("UROCE_DEVICES");
  auto all = Device::list();
  ASSERT_FALSE(all.empty());
  const bool alone = all.size() == 1 && all[0].loopback;
  EXPECT_EQ(all.back().loopback, alone) << "loopback's is listed only where it is alone";
  EXPECT_EQ(Device::name_for("127.0.0.42"), alone ? "uroce_lo" : "");
  auto lo = Device::open("uroce_lo");  // listed or not, its name opens it
  ASSERT_TRUE(lo) << lo.error().message;
  EXPECT_EQ(lo.value()->name(), "uroce_lo");
  DeviceOptions at;
  at.addr = "127.0.0.43";
  auto unnamed = Device::open("", at);
  if (alone) {
    EXPECT_TRUE(unnamed) << unnamed.error().message;
  } else {
    ASSERT_FALSE(unnamed);
    EXPECT_EQ(unnamed.error().code, ENODEV) << "as the kernel's rdma_cm binds 127.0.0.1 where lo has no device";
    EXPECT_NE(unnamed.error().message.find("add lo to UROCE_DEVICES"), std::string::npos) << unnamed.error().message;
    auto other = Device::open(all.front().name, at);
    ASSERT_FALSE(other);
    EXPECT_EQ(other.error().code, EINVAL) << other.error().message;
    auto named = Device::open("uroce_lo", at);
    ASSERT_TRUE(named) << named.error().message;
    EXPECT_EQ(named.value()->query_gid(0)->to_string(), "::ffff:127.0.0.43");
  }
  for (const auto& d : all) {
    EXPECT_EQ(d.name, "uroce_" + d.interface);
    if (!d.loopback) {
      EXPECT_EQ(Device::name_for(d.addr), d.name);
    }
  }
  // UROCE_DEVICES=lo: the host's other interfaces have no device, whatever names their address
  // (nothing is opened there: placing fails first).
  setenv("UROCE_DEVICES", "lo", 1);  // as every test runs
  for (const auto& d : all) {
    if (d.loopback) continue;
    EXPECT_EQ(Device::name_for(d.addr), "");
    DeviceOptions o;
    o.addr = d.addr;
    auto dev = Device::open("", o);
    ASSERT_FALSE(dev);
    EXPECT_EQ(dev.error().code, EADDRNOTAVAIL);
    EXPECT_NE(dev.error().message.find("UROCE_DEVICES leaves it out"), std::string::npos) << dev.error().message;
  }
}

// Opening says which device and why not, in one line.
TEST(Identity, OpeningNamesTheDeviceOrSaysWhy) {
  auto none = Device::open("uroce_nosuch");
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, ENODEV);
  EXPECT_NE(none.error().message.find("this host has uroce_lo"), std::string::npos) << none.error().message;
  DeviceOptions o;
  o.addr = "127.0.0.5";
  auto other = Device::open("uroce_nosuch", o);
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().code, EINVAL);
  EXPECT_NE(other.error().message.find("127.0.0.5 is the address of uroce_lo"), std::string::npos) << other.error().message;
  o.addr = "198.51.100.77";  // TEST-NET-2: on no interface
  auto absent = Device::open("", o);
  ASSERT_FALSE(absent);
  EXPECT_EQ(absent.error().code, EADDRNOTAVAIL);
  o.addr = "bogus";
  EXPECT_EQ(Device::open("", o).error().code, EINVAL);
}
