// A process's share of a host NIC: its lease on a device that every process of the host uses
// at once (one address, UDP port 4791), from the host NIC daemon, uroced (src/nicd/), which is
// started on first use and leaves once no process has needed it for a while. The lease gives
// the process its steering slot (link/steering.hpp) and the receive socket of that slot for
// each of the device's addresses; the process sends from sockets of its own. MADs for QP1
// arrive from the daemon on the forwarding channel, which the link reads like a socket.
// The lease ends when the process closes it or exits: the daemon then frees the slot.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "uroce/result.hpp"
#include "uroce/types.hpp"

namespace uroce::link {

class HostNicLease {
 public:
  // Attaches to the device whose address is addr, starting the daemon if none runs.
  static Result<std::unique_ptr<HostNicLease>> attach(const Gid& addr);
  ~HostNicLease();

  uint32_t slot() const { return slot_; }
  const std::vector<Gid>& gids() const { return gids_; }
  // The receive sockets (one per GID, in GID order; none for a process the daemon passes
  // every packet to, one of another user than the daemon's) and the forwarding channel:
  // taken once.
  std::vector<int> take_rx_fds() { return std::move(rx_fds_); }
  int take_forward_fd() { return std::exchange(fwd_fd_, -1); }
  // The device's port page, mapped shared (transport/shared_port.hpp: every process with a
  // port rate books the one port), or null: a process of another user than the daemon's
  // keeps a port of its own.
  void* port_page() const { return port_page_; }
  size_t port_page_bytes() const { return port_bytes_; }
  // The device passes REQs and SIDR_REQs for service_id to this process; EADDRINUSE if
  // another process listens on it.
  Status listen(uint64_t service_id);
  void unlisten(uint64_t service_id);
  // What the process says of itself when the daemon asks (the uroce command): status records
  // (host_nic_proto.hpp), one per line. Called by the link with the engine lock held.
  std::function<std::string()> reporter;

 private:
  HostNicLease() = default;
  static Result<std::unique_ptr<HostNicLease>> attach_once(const Gid& addr);
  Status call(uint32_t op, uint64_t arg, const Gid& addr, void* reply, std::vector<int>* fds);
  std::mutex mu_;  // one request at a time on the control connection
  int ctl_fd_ = -1;
  int fwd_fd_ = -1;
  uint32_t slot_ = 0;
  std::vector<Gid> gids_;
  std::vector<int> rx_fds_;
  void* port_page_ = nullptr;
  size_t port_bytes_ = 0;
};

// The daemon's program: next to the library or program this code is in, or in ../bin of it.
std::string daemon_path();

}  // namespace uroce::link
