// Kernel bypass for the UDP link: an AF_XDP socket (XSK) on one queue of the interface, fed by
// an XDP program (xdp/roce_steer.bpf.c) that takes this device's RoCEv2 frames (IPv4, UDP 4791,
// its address, its steering slot) before the kernel's network stack and leaves the rest to it.
// Frames move through a UMEM of this process: received ones are read in place, sent ones are
// written whole (Ethernet, IPv4, UDP, the RoCE packet) with one copy of the payload. Zero copy
// where the driver supports it, copy mode elsewhere (veth).
//
// What it does not carry goes on through the UDP sockets: a peer whose Ethernet address the
// kernel has not resolved yet (the kernel's own send resolves it), frames that arrive on a
// queue without an XSK, IPv4 fragments and IPv6 extension headers. One XSK per queue of an interface: a second process asking for the
// same queue is told it is taken and keeps the UDP path.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <map>
#include <vector>

#include "uroce/result.hpp"
#include "wire/ip_udp.hpp"
#include "wire/packet_buf.hpp"

namespace uroce::link {

class XdpPort {
 public:
  struct Config {
    uint32_t ifindex = 0;
    uint32_t ip = 0;           // the device's IPv4 address, host order (0: none)
    std::vector<Gid> v6;       // its IPv6 addresses
    uint32_t slot = 0;         // its steering slot (link/steering.hpp); 0 with any_slot
    bool any_slot = true;      // a device of this process alone
    uint32_t ip_mtu = 1500;
  };
  // Why not, as an error (EPERM without CAP_NET_ADMIN and CAP_BPF, EBUSY for a taken queue,
  // EOPNOTSUPP where the build or the interface has no AF_XDP).
  static Result<std::unique_ptr<XdpPort>> open(const Config& c);
  ~XdpPort();
  XdpPort(const XdpPort&) = delete;
  XdpPort& operator=(const XdpPort&) = delete;

  int fd() const;          // readable when frames arrived
  bool zero_copy() const { return zero_copy_; }
  bool native() const { return native_; }  // the driver runs the program (else the generic hook)
  bool multi_buffer() const { return multi_buffer_; }

  // Queues a packet for sending; false if it must go another way (no free frame, or
  // the peer's Ethernet address is not known: the kernel's path resolves it). flush() sends.
  bool queue(const wire::PacketBuf& p, uint64_t now);
  void flush();

  // A received RoCEv2 packet: its UDP payload, flow and IP header fields, as the wire had them.
  struct Frame {
    std::span<const uint8_t> pkt;
    wire::FlowAddr flow;
    wire::Ipv4Fields ip;
  };
  // Hands up to max received frames to fn (each valid only during the call); returns how many
  // frames it took off the ring, malformed ones (dropped, counted in malformed()) included.
  template <class Fn>
  int poll(int max, Fn&& fn) {
    int n = 0;
    while (n < max) {
      const int got = peek(std::max(max - n, kMaxFragsPerFrame));
      if (got == 0) break;
      int k = 0;
      while (k < got) {
        int frags = frame_frags(k, got);
        Frame f;
        if (frags == 0 && (k > 0 || got < kMaxFragsPerFrame)) break;  // its last fragment is still to come
        if (frags == 0) {  // more fragments than any frame of ours: dropped whole
          frags = got;
          ++malformed_;
          skipping_ = true;
        } else if (skipping_) {
          skipping_ = false;  // the oversized frame's last fragments: counted above
        } else if (parse(k, frags, f)) {
          fn(f);
        } else {
          ++malformed_;
        }
        k += frags;
      }
      release(k, got);
      n += k;
      if (k < got || k == 0) break;
    }
    return n;
  }
  uint64_t malformed() const { return malformed_; }
  uint64_t sent() const { return sent_; }
  uint64_t received() const { return received_; }

 private:
  struct State;  // the libxdp/libbpf objects and rings
  XdpPort();
  static constexpr int kMaxFragsPerFrame = 8;
  int peek(int max);
  int frame_frags(int k, int n) const;
  bool parse(int k, int frags, Frame& f);
  void release(int n, int peeked);
  void reap();
  const uint8_t* neighbour(const Gid& addr, uint64_t now);
  bool parse_v6(const uint8_t* b, size_t len, Frame& f);
  std::unique_ptr<State> s_;
  bool zero_copy_ = false;
  bool multi_buffer_ = false;  // frames in several UMEM frames (XDP_USE_SG)
  bool skipping_ = false;      // the rest of an oversized frame's fragments are dropped
  bool native_ = false;
  uint32_t ip_ = 0;
  uint32_t ifindex_ = 0;
  std::array<uint8_t, 6> mac_{};
  struct Neighbour {
    std::array<uint8_t, 6> mac{};
    bool known = false;
    uint64_t checked_ns = 0;
  };
  std::map<std::array<uint8_t, 16>, Neighbour> neighbours_;
  std::vector<Gid> v6_;
  uint64_t malformed_ = 0, sent_ = 0, received_ = 0;
  uint32_t queued_ = 0;
};

}  // namespace uroce::link
