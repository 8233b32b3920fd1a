// Same-host link: packets between two uroce devices of one user on one host go through shared
// memory rings (shm_ring.hpp) instead of the kernel's UDP stack; everything else goes through
// the wrapped link (the device's UDP link). The packets are the same RoCEv2 packets, ICRC
// included, so the transport, counters, captures and errors are the same on either path.
//
// The registry is the host's abstract UNIX socket namespace: each device listens on
// "uroce-shm/<uid>/<address>" for each of its addresses. The first packet towards an address
// with no channel looks that name up; if a device of the same user answers, the sender makes
// the memfd and two eventfds and passes them over the socket; the answer comes once the peer
// has mapped them, so no packet is ever sent on both paths. A peer that is not there, belongs
// to another user or cannot map keeps UDP (and is asked again a second later). The socket
// stays open for the channel's life: its hang-up marks the channel dead.
//
// Threading: send/poll_rx/prepare_sleep/woke run under the engine lock, one caller at a time.
// A small thread accepts channels and watches hang-ups; it publishes under its own mutex.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "link/link.hpp"
#include "link/pcap_writer.hpp"
#include "link/shm_ring.hpp"

namespace uroce::link {

struct ShmStats {
  uint64_t channels = 0, tx_packets = 0, rx_packets = 0, tx_full_drops = 0, rx_malformed = 0;
};

class SameHostLink final : public Link {
 public:
  // `wire` carries what does not go through shared memory; `pcap` (may be null) records the
  // packets this link carries itself. Listens under every address of wire.gids().
  SameHostLink(Link& wire, PcapWriter* pcap);
  ~SameHostLink() override;

  std::vector<Gid> gids() const override { return wire_.gids(); }
  uint16_t src_port_for(uint32_t qpn) const override { return wire_.src_port_for(qpn); }
  uint32_t ip_mtu() const override { return wire_.ip_mtu(); }
  int rx_fd() const override { return epoll_fd_; }
  int inline_skips_fd() const override { return skips_fd_; }
  void send(std::span<wire::PacketBuf* const> pkts, uint64_t now) override;
  int poll_rx(PacketSink& sink, uint64_t now, int max) override;
  int poll_rx_inline(PacketSink& sink, uint64_t now, int max) override;
  bool prepare_sleep() override;
  void woke() override;
  ShmStats stats() const;  // engine lock held
  // True if packets to dst go through shared memory now (engine lock held).
  bool carries(const Gid& dst) const;
  void forked();  // in a child of fork(): let go of what is the parent's
  // A QP is about to talk to dst: its channel now, if dst is a device of ours on this host.
  bool attach_peer(const Gid& dst, uint64_t now) { return route(dst, now) != nullptr; }

 private:
  struct Channel;
  Channel* find(const Gid& dst) const;  // a live channel to dst, or null
  Channel* route(const Gid& dst, uint64_t now);
  int receive(PacketSink& sink, uint64_t now, int max, bool wire);
  Channel* connect_to(const Gid& dst);
  Channel* adopt(int sock, int memfd, int tx_efd, int rx_efd, bool we_connected, std::vector<Gid> peer);
  void accept_one();
  void watch();
  void refresh();
  int poll_rings(PacketSink& sink, uint64_t now, int max);
  bool push(Channel& c, const wire::PacketBuf& p);
  void drain_backlogs();
  void drop_backlog(Channel& c);
  void wake_peer(Channel& c);

  Link& wire_;
  PcapWriter* pcap_;
  std::vector<Gid> own_;
  int epoll_fd_ = -1;
  int skips_fd_ = -1;  // holds the wire's fd while channels exist (polling threads skip it)
  int stop_fd_ = -1;
  std::vector<int> listen_fds_;
  std::thread watcher_;
  std::atomic<bool> stopping_{false};

  std::mutex mu_;  // all_ and gen_ between the watcher and the engine side
  std::vector<std::unique_ptr<Channel>> all_;
  std::atomic<uint32_t> gen_{0};

  // Engine side.
  uint32_t seen_gen_ = 0;
  std::vector<Channel*> live_;
  std::map<Gid, uint64_t> refused_until_;  // addresses with no device behind them, for now
  std::vector<wire::PacketBuf*> rest_;
  std::vector<Channel*> touched_;
  wire::PacketBuf rx_buf_;
  bool wire_in_skips_ = false;
  bool armed_ = false;     // between a successful prepare_sleep() and woke()
  size_t backlogged_ = 0;  // packets in all backlogs
  uint32_t busy_passes_ = 0;  // receives that found ring packets, for reading the wire less often
  ShmStats st_;
};

}  // namespace uroce::link
