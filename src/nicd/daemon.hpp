// uroced, the host NIC daemon: the part of a host NIC that every process on the host shares.
// For each device (an address and its interface's other addresses) it holds the steering group
// of receive sockets (link/steering.hpp), gives each process that attaches a slot and that
// slot's sockets, keeps the table of CM services listened on, and passes each MAD arriving on
// QP1 (slot 0, its own) to the process it is for. It is not in the data path: the kernel
// steers every other packet straight to the process's socket. Packets to a slot no process
// holds are read and dropped (a peer of a process that exited, retrying, gets no answer).
// One thread, one epoll; nothing runs while nothing arrives.
#pragma once
#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "link/iface.hpp"
#include "link/pcap_writer.hpp"
#include "link/steering.hpp"
#include "nicd/rules.hpp"
#include "transport/shared_port.hpp"
#include "uroce/result.hpp"
#include "uroce/types.hpp"

namespace uroce::nicd {

struct DaemonCounters {
  uint64_t attached = 0, refused = 0, mads_forwarded = 0, mads_dropped = 0, stray_dropped = 0, ruled = 0;
};

uint64_t now_ms();  // steady clock

class Daemon {
 public:
  // Takes the daemon's name and loads the rules file (rules_path()); EADDRINUSE if another
  // daemon has the name, EINVAL (and the line) for a rules file it cannot read.
  static Result<std::unique_ptr<Daemon>> open();
  ~Daemon();
  // Serves until no process has been attached for idle_ms (then returns 0).
  int run(uint64_t idle_ms);
  const DaemonCounters& counters() const { return ctr_; }

 private:
  struct Client;
  struct Device {
    Gid addr;
    size_t index = 0;  // in devices_, as epoll events name it
    std::vector<Gid> gids;    // those that bound
    std::vector<Gid> wanted;  // the interface's addresses when the sockets were made
    std::vector<std::array<int, link::steering::kSlots>> socks;  // [GID index][slot]
    std::array<Client*, link::steering::kSlots> owner{};
    std::map<uint64_t, Client*> listeners;                    // service ID -> process
    // The port every process of the daemon's user (or root) books (transport/shared_port.hpp).
    int port_fd = -1;
    transport::SharedPort* port = nullptr;
  };
  struct Client {
    int ctl = -1;
    int fwd = -1;  // our end of the forwarding channel
    ucred cred{};
    Device* dev = nullptr;
    uint32_t slot = 0;
    bool forwarded = false;  // another user's: its packets come through us, not its own sockets
  };

  // A status the uroce command asked for, gathered from every process (status.cpp): one at a
  // time, given up on processes that have not answered by the deadline.
  struct StatusQuery {
    Client* asker = nullptr;
    uint64_t deadline_ms = 0;
    std::set<Client*> waiting;
    std::map<Client*, std::string> answers;
  };

  Daemon() = default;
  void start_status(Client& asker);
  void on_status_answer(Client& c);
  void finish_status();
  int status_timeout_ms() const;  // -1: no query under way
  void accept_client();
  void on_request(Client& c);
  void drop_client(int fd);
  void reply(Client& c, int err, const std::string& text, uint32_t slot = 0, const Device* dev = nullptr,
             const std::vector<int>& fds = {});
  Result<Device*> device_for(const Gid& addr);
  Status open_sockets(Device& d, const link::Interface& itf, const std::vector<Gid>& gids);
  void close_sockets(Device& d);
  void make_port(Device& d);
  void watch_slot(Device& d, uint32_t slot, bool on);
  static bool steers(const Gid& gid, uint32_t ifindex, const std::array<int, link::steering::kSlots>& row);
  void on_datagrams(Device& d, size_t gid, uint32_t slot);
  // A datagram on slot 0: the flow table's first matching rule acts on it, then what it lets
  // through goes to its QP's process (a MAD to the one it names).
  void on_steered(Device& d, size_t gid, std::span<const uint8_t> pkt, const sockaddr_storage& from, uint8_t tos);
  // Rules requests (rule_requests.cpp); a changed table is saved and steers at once.
  void on_rules(Client& c, const std::string& command);
  Status apply_rules();
  void forward_mad(Device& d, size_t gid, std::span<const uint8_t> pkt, const sockaddr_storage& from, uint8_t tos);
  bool pass_on(Client& c, const Device& d, size_t gid, std::span<const uint8_t> pkt, const sockaddr_storage& from,
               uint8_t tos);

  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  std::vector<std::unique_ptr<Device>> devices_;
  std::map<int, std::unique_ptr<Client>> clients_;  // by control fd
  DaemonCounters ctr_;
  std::unique_ptr<StatusQuery> query_;
  RuleTable rules_;
  std::string rules_path_;
  std::map<std::string, std::unique_ptr<link::PcapWriter>> mirrors_;  // by path
};

}  // namespace uroce::nicd
