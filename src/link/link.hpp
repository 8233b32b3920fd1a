// What a protocol core is attached to: something that carries its packets. Implemented by
// UdpLink (kernel UDP, real time) and by LossyLink's ports (in memory, virtual time, seeded
// faults). A link knows packets, addresses and time, nothing of the transport: it sends the
// buffers it is given and hands what it receives to a sink. The engine and the simulator
// connect a core to a link (see engine/ and sim/); future links plug in the same way.
//
// Lifetimes, one rule each way, both within one engine pass (under the engine lock):
// - send(): the buffers, and the registered memory a buffer's payload refers to
//   (PacketBuf::ref), are valid only until send() returns: the core takes the buffers back
//   and the application may rewrite its memory. A link that keeps a packet past the call (a
//   queue, a simulated wire) copies it whole first.
// - PacketSink::deliver(): the bytes are the link's, valid only until deliver() returns. A
//   sink that keeps a packet (a request held past a hole) copies it.
// Debug and sanitizer builds check both: a buffer handed back is overwritten and, under
// AddressSanitizer, poisoned until reused; a delivered packet is overwritten once the sink
// has returned (wire::expire). Whoever keeps a pointer past its life reads garbage at once.
#pragma once
#include <cstring>
#include <cerrno>
#include <cstdint>
#include <span>
#include <vector>

#include "uroce/result.hpp"
#include "uroce/types.hpp"
#include "wire/headers.hpp"
#include "wire/ip_udp.hpp"
#include "wire/opcode.hpp"
#include "wire/psn.hpp"
#include "wire/packet_buf.hpp"

namespace uroce::link {

// Where a link delivers received packets.
class PacketSink {
 public:
  virtual ~PacketSink() = default;
  // A UDP payload (BTH .. ICRC) from flow `from`, with the IP header fields as far as the link
  // saw them. Returns the fields the ICRC matched (what a capture should show).
  virtual wire::Ipv4Fields deliver(std::span<const uint8_t> pkt, const wire::FlowAddr& from, uint64_t now,
                                   const wire::Ipv4Fields& ip) = 0;
  // The same for a packet whose payload lies apart, or a run of them (only from a link that
  // carries packets intact); a sink that cannot take it so gets each packet whole, copied
  // together.
  virtual wire::Ipv4Fields deliver_apart(std::span<const uint8_t> rest, const wire::ApartPayload& payload,
                                         const wire::FlowAddr& from, uint64_t now, const wire::Ipv4Fields& ip) {
    wire::Ipv4Fields seen = ip;
    each_packet(rest, payload, [&](std::span<const uint8_t> whole) { seen = deliver(whole, from, now, ip); });
    return seen;
  }
  // Each packet of `payload` whole, one after another, to fn(span) (a run's PSNs counted up
  // from rest's BTH); nothing if a packet would not fit one.
  template <class Fn>
  static void each_packet(std::span<const uint8_t> rest, const wire::ApartPayload& payload, Fn fn) {
    const std::optional<size_t> unit = wire::run_unit(payload, rest.size());
    if (!unit) return;
    const uint32_t n = payload.packets;
    const uint32_t psn = n > 1 ? wire::bth_psn(rest.data()) : 0;
    uint8_t whole[wire::kMaxPacket];
    for (uint32_t i = 0; i < n; ++i) {
      const size_t len = assemble(rest, {payload.at, payload.bytes.subspan(i * *unit, *unit)}, whole);
      if (n > 1) wire::bth_set_psn(whole, (psn + i) & wire::Psn::kMask);
      fn(std::span<const uint8_t>(whole, len));
    }
  }
  // The packet whole in `out` (the caller checked it fits); its length.
  static size_t assemble(std::span<const uint8_t> rest, const wire::ApartPayload& payload, uint8_t* out) {
    std::memcpy(out, rest.data(), payload.at);
    std::memcpy(out + payload.at, payload.bytes.data(), payload.bytes.size());
    std::memcpy(out + payload.at + payload.bytes.size(), rest.data() + payload.at, rest.size() - payload.at);
    return rest.size() + payload.bytes.size();
  }
};

class Link {
 public:
  virtual ~Link() = default;
  // The addresses it receives on, as the port's GID table (index = GID index).
  virtual std::vector<Gid> gids() const = 0;
  // UDP source port for a QP's packets (flow entropy).
  virtual uint16_t src_port_for(uint32_t qpn) const = 0;
  // Sends the packets, in order; the buffers stay the caller's.
  virtual void send(std::span<wire::PacketBuf* const> pkts, uint64_t now) = 0;
  // Hands up to `max` received packets to sink; returns how many.
  virtual int poll_rx(PacketSink& sink, uint64_t now, int max) = 0;
  // The same for an application thread polling in a loop: a link may leave out what costs a
  // system call; it then names, in inline_skips_fd(), what the engine thread must watch
  // meanwhile (readable when packets that poll_rx_inline leaves out arrive), or -1.
  virtual int poll_rx_inline(PacketSink& sink, uint64_t now, int max) { return poll_rx(sink, now, max); }
  virtual int inline_skips_fd() const { return -1; }
  // Around the engine's blocking wait on rx_fd(): prepare_sleep() returns false if packets
  // arrived meanwhile (do not block); woke() follows every prepare_sleep() that returned true.
  virtual bool prepare_sleep() { return true; }
  virtual void woke() {}
  // When the link needs a pass though nothing arrives (monotonic ns; UINT64_MAX: never): the
  // engine sleeps no longer.
  virtual uint64_t next_deadline() const { return UINT64_MAX; }
  // A file descriptor that becomes readable when packets arrive, or -1.
  virtual int rx_fd() const { return -1; }
  // The largest IP packet it carries (the interface MTU): RoCE packets must fit, DF is set.
  virtual uint32_t ip_mtu() const { return 65535; }
  // Receives what is sent to a multicast group's address from now on, as well, until
  // leave_group() (the core calls each once per group: its first QP attached, its last gone).
  // Joining a group joined already changes nothing. EOPNOTSUPP where the link has no multicast.
  virtual Status join_group(const Gid& group) {
    return make_error(EOPNOTSUPP, "multicast: this link cannot join " + group.to_string());
  }
  virtual void leave_group(const Gid&) {}
};

}  // namespace uroce::link
