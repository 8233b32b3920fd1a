// Which devices the host has and where each opens: one per network interface with an address,
// as rxe makes one per netdev, so a program's default device is the interface its traffic
// leaves by, and every process of the host names the same devices.
#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <optional>

#include "api/config.hpp"
#include "link/iface.hpp"
#include "uroce/uroce.hpp"

namespace uroce {

namespace {

constexpr const char* kPrefix = "uroce_";

std::string env(const char* name) {
  const char* e = std::getenv(name);
  return e ? e : "";
}

std::string ip_string(const Gid& g) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (auto v4 = g.ipv4()) {
    in_addr a{htonl(*v4)};
    return inet_ntop(AF_INET, &a, buf, sizeof buf);
  }
  return inet_ntop(AF_INET6, g.raw.data(), buf, sizeof buf);
}

DeviceInfo info_of(const link::Candidate& c) {
  DeviceInfo d;
  d.name = kPrefix + c.name;
  d.interface = c.name;
  d.loopback = c.loopback;
  d.addr = c.loopback ? "" : ip_string(c.addr);
  d.node_guid = link::node_guid(link::find_interface(c.addr));
  return d;
}

// The device of the interface holding addr, listed or not; "" if no interface holds it.
std::string holder_of(const std::string& addr) {
  auto g = Gid::parse(addr);
  if (!g) return "";
  link::Interface itf = link::find_interface(*g);
  return itf.name.empty() ? "" : kPrefix + itf.name;
}

// Why the host's interfaces cannot be read right now (out of descriptors), if they cannot:
// an empty listing then says nothing about the host.
std::optional<Error> unreadable() {
  int err = 0;
  link::device_interfaces("", &err);
  if (!err) return std::nullopt;
  return link::unreadable_interfaces(err);
}

// The interfaces UROCE_DEVICES keeps, as list() shows them; `every` keeps loopback's where it
// is not listed (a name still opens it). UROCE_ADDR's is the callers' to add.
std::vector<link::Candidate> kept_interfaces(bool every) {
  const std::string only = env("UROCE_DEVICES");
  auto cands = link::device_interfaces(only);
  return every ? cands : link::shown_interfaces(std::move(cands), only);
}

// The devices, as list() gives them (`every`: as kept_interfaces).
std::vector<DeviceInfo> devices(bool every) {
  std::vector<DeviceInfo> out;
  for (const auto& c : kept_interfaces(every)) out.push_back(info_of(c));
  // UROCE_ADDR names the default device and its address, whatever UROCE_DEVICES keeps.
  if (const std::string at = env("UROCE_ADDR"); !at.empty()) {
    const std::string name = holder_of(at);
    auto it = std::find_if(out.begin(), out.end(), [&](const DeviceInfo& d) { return d.name == name; });
    if (it != out.end()) out.erase(it);
    if (!name.empty()) {
      for (const auto& c : link::device_interfaces())
        if (kPrefix + c.name == name) out.insert(out.begin(), info_of(c));
      if (!out.empty() && out.front().name == name) out.front().addr = at;
    }
  }
  return out;
}

// The device of devices(every) whose interface holds addr (found without their node GUIDs): an
// interface that is up, and kept by UROCE_DEVICES unless UROCE_ADDR is on it; "" if none.
std::string holder_among(const std::string& addr, bool every) {
  const std::string name = holder_of(addr);
  if (name.empty()) return "";
  const std::string at = env("UROCE_ADDR");
  const bool placed = !at.empty() && holder_of(at) == name;
  for (const auto& c : placed ? link::device_interfaces() : kept_interfaces(every))
    if (kPrefix + c.name == name) return name;
  return "";  // UROCE_DEVICES leaves its interface out, it is down, or it is unlisted loopback
}

}  // namespace

std::vector<DeviceInfo> Device::list() { return devices(false); }

std::string Device::name_for(const std::string& addr) { return holder_among(addr, false); }

namespace detail {

Result<std::string> place_device(const std::string& name, DeviceOptions& opts) {
  std::string at = opts.addr;
  // UROCE_ADDR places the default device, or the named one where it is on its interface.
  if (const std::string e = env("UROCE_ADDR"); at.empty() && !e.empty() && (name.empty() || name == holder_of(e)))
    at = e;
  if (!at.empty()) {
    if (!Gid::parse(at)) return make_error(EINVAL, "UROCE_ADDR/addr is not an IPv4 or IPv6 address: " + at);
    const std::string holder = holder_among(at, !name.empty());  // a named device: listed or not
    if (holder.empty()) {
      if (auto e = unreadable()) return *e;
      const std::string on = holder_of(at);
      if (on.empty()) return make_error(EADDRNOTAVAIL, "no network interface of this host has the address " + at);
      if (!name.empty() && name != on) return make_error(EINVAL, at + " is the address of " + on + ", not of " + name);
      // As the kernel's rdma_cm: ENODEV for a loopback address with no RDMA device there.
      if (on == kPrefix + std::string("lo"))
        return make_error(ENODEV, at + " is on loopback, whose device is not listed " +
                                      (env("UROCE_DEVICES").empty()
                                           ? std::string("where another interface has one (as rxe gives lo none): "
                                                         "add lo to UROCE_DEVICES (e.g. eth0,lo) or set UROCE_ADDR=" + at)
                                           : "(UROCE_DEVICES=" + env("UROCE_DEVICES") + " leaves it out)"));
      return make_error(EADDRNOTAVAIL, at + " is on " + on + ", which has no device: it is down, or UROCE_DEVICES leaves it out");
    }
    if (!name.empty() && name != holder) return make_error(EINVAL, at + " is the address of " + holder + ", not of " + name);
    opts.addr = at;
    return holder;
  }
  const auto all = devices(!name.empty());
  std::string names;
  for (const auto& d : all) {
    if (name.empty() || d.name == name) {
      opts.addr = d.addr;
      return d.name;
    }
    names += (names.empty() ? "" : ", ") + d.name;
  }
  if (auto e = all.empty() ? unreadable() : std::nullopt) return *e;
  if (all.empty())
    return make_error(ENODEV, "no network interface is up with an address" +
                                  std::string(env("UROCE_DEVICES").empty() ? "" : " among UROCE_DEVICES=" + env("UROCE_DEVICES")));
  return make_error(ENODEV, "no device named '" + name + "' (this host has " + names + ")");
}

}  // namespace detail
}  // namespace uroce
