// Raw packet QPs' way onto the device's interface: an AF_PACKET socket bound to it, which
// takes whole Ethernet frames as they are and hands up every frame the interface carries.
// Opening one needs CAP_NET_RAW, as the kernel asks of a raw packet QP.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "uroce/result.hpp"

namespace uroce::link {

class RawPort {
 public:
  // On the interface with this index; EPERM without CAP_NET_RAW.
  static Result<std::unique_ptr<RawPort>> open(uint32_t ifindex, bool loopback);
  ~RawPort();
  RawPort(const RawPort&) = delete;
  RawPort& operator=(const RawPort&) = delete;

  int fd() const { return fd_; }
  using Deliver = std::function<void(std::span<const uint8_t>)>;
  // Frames to the interface, in order, taken from `frames`; those the socket has no room for
  // yet stay there for the next call. What goes to a group or broadcast address comes back to
  // deliver as well, as a NIC loops it back to its host (the kernel never shows a socket its
  // own frames; loopback does it itself). Returns how many were dropped (refused by the
  // interface, or past what may wait).
  uint64_t send(std::vector<std::vector<uint8_t>>& frames, const Deliver& deliver);
  // Up to max arriving frames to deliver, 802.1Q tags as they were on the wire; how many were
  // read. Group-addressed frames other processes of this host send come up too, as their NIC
  // would loop them back; frames for other hosts (a promiscuous interface) do not.
  int poll(const Deliver& deliver, int max);

 private:
  RawPort(int fd, bool loopback) : fd_(fd), loopback_(loopback), buf_(65536 + 64) {}
  int fd_;
  bool loopback_;
  std::vector<uint8_t> buf_;
};

}  // namespace uroce::link
