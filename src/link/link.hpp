// What a protocol core is attached to: something that carries its packets. Implemented by
// UdpLink (kernel UDP, real time) and by LossyLink's ports (in memory, virtual time, seeded
// faults). The engine and the simulator drive a core through this interface only.
#pragma once
#include <cstdint>
#include <vector>

#include "uroce/types.hpp"

namespace uroce::transport { class Nic; }

namespace uroce::link {

class Link {
 public:
  virtual ~Link() = default;
  // The addresses it receives on, as the port's GID table (index = GID index).
  virtual std::vector<Gid> gids() const = 0;
  // UDP source port for a QP's packets (flow entropy).
  virtual uint16_t src_port_for(uint32_t qpn) const = 0;
  // Sends every packet queued on the core and gives the buffers back.
  virtual void flush_tx(transport::Nic& nic, uint64_t now) = 0;
  // Hands up to `max` received packets to the core; returns how many.
  virtual int poll_rx(transport::Nic& nic, uint64_t now, int max) = 0;
  // A file descriptor that becomes readable when packets arrive, or -1.
  virtual int rx_fd() const { return -1; }
  // The largest IP packet it carries (the interface MTU): RoCE packets must fit, DF is set.
  virtual uint32_t ip_mtu() const { return 65535; }
};

}  // namespace uroce::link
