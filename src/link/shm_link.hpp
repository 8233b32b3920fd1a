// Same-host link: packets between two uroce devices of one user on one host go through shared
// memory rings (shm_ring.hpp) instead of the kernel's UDP stack; everything else goes through
// the wrapped link (the device's UDP link). The packets are the same RoCEv2 packets, ICRC
// included, so the transport, counters, captures and errors are the same on either path.
//
// The registry is the host's abstract UNIX socket namespace: each device listens on
// "uroce-shm/<uid>/<address>/<slot>" for each of its addresses (slot: the process's steering
// slot on a shared host NIC, whose processes share the address; 0 on a device of its own; a
// packet's slot is its destination QPN's top bits, link/steering.hpp). The first packet towards an address
// with no channel looks that name up; if a device of the same user (or root) answers, the
// sender makes the memfd and two eventfds and passes them over the socket; the answer comes
// once the peer has mapped them, so no packet is ever sent on both paths. A peer that is not
// there, belongs to another user, cannot map or does not answer within a second keeps UDP (and
// is asked again a second later). The socket stays open for the channel's life: its hang-up
// marks the channel dead, and a dead channel whose ring is read to the end is closed and
// unmapped. A name someone else holds leaves that address on UDP, said on stderr and counted.
//
// Threading: send/poll_rx/prepare_sleep/woke run under the engine lock, one caller at a time.
// A small thread accepts channels, runs the handshakes this side starts (the peer may take its
// time: no engine lock is held meanwhile), watches hang-ups and frees channels the engine side
// let go; it publishes under its own mutex.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "link/link.hpp"
#include "link/pcap_writer.hpp"
#include "link/shared_regions.hpp"
#include "link/shm_ring.hpp"
#include "uroce/result.hpp"

namespace uroce::link {

// Where a channel leads: a device's address and the process's slot on it (0: not shared).
struct ShmPeer {
  Gid addr;
  uint32_t slot = 0;
  bool operator==(const ShmPeer&) const = default;
  bool operator<(const ShmPeer& o) const { return addr == o.addr ? slot < o.slot : addr < o.addr; }
};

struct ShmStats {
  uint64_t channels = 0, tx_packets = 0, rx_packets = 0, tx_full_drops = 0, rx_malformed = 0;
  uint64_t names_taken = 0;  // own addresses whose registry name another socket holds
  uint64_t offers_refused = 0;  // channels not taken: a bad hello, rings not sealed at their size
  // Payloads sent as where they lie in a shared file, and taken so; and those refused (a file
  // that could not be opened or mapped, or is not what the packet said): dropped.
  uint64_t tx_placed = 0, rx_placed = 0, rx_placed_refused = 0;
  // Slots that carried a run of placed packets (shm::Placed::packets > 1), sent and taken.
  uint64_t tx_runs = 0, rx_runs = 0;
  // Packets whose payload went into their slot's payload entry (shm::kSlotSplit), sent and
  // taken; and the runs of such packets the receiver took together.
  uint64_t tx_split = 0, rx_split = 0, rx_split_runs = 0;
};

class SameHostLink final : public Link {
 public:
  // `wire` carries what does not go through shared memory; `pcap` (may be null) records the
  // packets this link carries itself. Listens under every address of wire.gids(), as `slot`
  // (a shared device's steering slot; 0: the device is this process's alone).
  SameHostLink(Link& wire, PcapWriter* pcap, uint32_t slot = 0);
  ~SameHostLink() override;
  // Whether it was built whole; if not (the process is out of descriptors), what failed. Only a
  // whole link may be used.
  const Status& status() const { return status_; }

  std::vector<Gid> gids() const override { return wire_.gids(); }
  uint16_t src_port_for(uint32_t qpn) const override { return wire_.src_port_for(qpn); }
  uint32_t ip_mtu() const override { return wire_.ip_mtu(); }
  // Groups are the wire link's: a group's packets go to every member, never through a ring.
  Status join_group(const Gid& group) override { return wire_.join_group(group); }
  void leave_group(const Gid& group) override { wire_.leave_group(group); }
  int rx_fd() const override { return epoll_fd_; }
  int inline_skips_fd() const override { return skips_fd_; }
  void send(std::span<wire::PacketBuf* const> pkts, uint64_t now) override;
  int poll_rx(PacketSink& sink, uint64_t now, int max) override;
  int poll_rx_inline(PacketSink& sink, uint64_t now, int max) override;
  bool prepare_sleep() override;
  void woke() override;
  uint64_t next_deadline() const override;  // a window of a peer's file to let go
  ShmStats stats() const;  // engine lock held
  // True if packets to dst (QP dest_qpn) go through shared memory now (engine lock held).
  bool carries(const Gid& dst, uint32_t dest_qpn = 0) const { return find(peer_of(dst, dest_qpn)) != nullptr; }
  // While packets to dst (QP dest_qpn) wait in its ring or for room in it: the last time (as of
  // the calls so far) the peer was seen reading them; 0 if none wait or it was never seen to
  // read (engine lock held).
  uint64_t held_moved_at(const Gid& dst, uint32_t dest_qpn, uint64_t now);
  void forked();  // in a child of fork(): let go of what is the parent's
  // A QP is about to talk to dst: true if a channel to dst exists. Otherwise a handshake with
  // dst may have started, which wait_handshake() waits for.
  bool attach_peer(const Gid& dst, uint64_t now, uint32_t dest_qpn = 0) {
    refresh();
    return route(peer_of(dst, dest_qpn), now) != nullptr;
  }
  // Without the engine lock: returns once no handshake with dst is under way, or after timeout_ms.
  void wait_handshake(const Gid& dst, int timeout_ms, uint32_t dest_qpn = 0);

 private:
  struct Channel;
  struct Dial;
  // The peer a packet to dst's QP dest_qpn goes to: on a shared device the QPN's slot.
  ShmPeer peer_of(const Gid& dst, uint32_t dest_qpn) const;
  Channel* find(const ShmPeer& dst) const;  // a live channel to dst, or null
  Channel* route(const ShmPeer& dst, uint64_t now);  // after refresh()
  int receive(PacketSink& sink, uint64_t now, int max, bool wire);
  Channel* adopt(int sock, int memfd, int tx_efd, int rx_efd, bool we_connected, std::vector<Gid> peer,
                 uint32_t peer_slot);
  void accept_one();
  void dial(const ShmPeer& dst);
  void answered(Dial& d);
  void dialed(Dial& d, bool ok);
  void release(Channel& c);
  void poke();
  int made(int fd, const char* what);
  void name_taken(const Gid& g);
  void watch();
  void refresh();
  int poll_rings(PacketSink& sink, uint64_t now, int max);
  bool push(Channel& c, const wire::PacketBuf& p);
  // Placed payloads (shm_place.cpp): the sender's side, the receiver's, and the offer a new
  // channel's receiver makes.
  int push_placed(Channel& c, const wire::PacketBuf& p);  // 1: queued, 0: dropped, -1: not placed
  bool push_slot(Channel& c, std::span<const uint8_t> bytes, uint32_t flags, const wire::FlowAddr& flow);
  bool extends_run(const Channel& c, const wire::PacketBuf& p, const shm::Placed& d) const;
  void close_run();  // the run gathered so far goes as its slot
  // The packets a placed slot delivered (0: none, it was dropped).
  uint32_t deliver_placed(Channel& c, const shm::Slot& s, PacketSink& sink, uint64_t now, const wire::Ipv4Fields& sent);
  const uint8_t* resolve(Channel& c, const shm::Placed& d, uint64_t now);
  // A payload apart, and its packet's other bytes, to the sink; a capture sees each packet whole.
  void hand_apart(std::span<const uint8_t> rest, const wire::ApartPayload& apart, PacketSink& sink, uint64_t now,
                  const wire::Ipv4Fields& sent);
  // A split packet at the front of c's ring (shm_split.cpp), with those behind it that continue
  // its message: delivered and popped. The packets delivered (0: it was dropped).
  uint32_t take_split(Channel& c, const shm::Slot& s, uint32_t flags, PacketSink& sink, uint64_t now,
                      const wire::Ipv4Fields& sent);
  static void offer_placed(Channel& c, int sock);
  static void unmap_imports(Channel& c);
  void unmap_idle_imports(uint64_t now);  // every channel's, once sweep_at_ is due
  void drain_backlogs();
  void drop_backlog(Channel& c);
  void wake_peer(Channel& c);

  Link& wire_;
  PcapWriter* pcap_;
  std::vector<Gid> own_;
  uint32_t slot_ = 0;
  Status status_;
  int epoll_fd_ = -1;
  int skips_fd_ = -1;  // holds the wire's fd while channels exist (polling threads skip it)
  int stop_fd_ = -1;
  std::vector<int> listen_fds_;
  std::thread watcher_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> refused_{0};  // ShmStats::offers_refused, counted on the watcher's thread

  std::mutex mu_;  // all_, gen_ and the handshakes between the watcher and the engine side
  std::vector<std::unique_ptr<Channel>> all_;
  std::atomic<uint32_t> gen_{0};
  std::vector<ShmPeer> to_dial_;  // handshakes the engine side asked for, not yet started
  std::vector<ShmPeer> dialing_;  // handshakes asked for and not yet ended
  std::vector<std::pair<ShmPeer, bool>> dial_ends_;  // ended (true: a channel), for refresh()
  std::condition_variable dial_ended_;
  std::vector<Dial> dials_;     // watcher side: waiting for the peer's answer

  // Engine side.
  uint32_t seen_gen_ = 0;
  std::vector<Channel*> live_;
  struct Asked {
    uint64_t again_at;  // a peer that did not take a channel is asked again from then on
    bool dialing;
  };
  std::map<ShmPeer, Asked> asked_;  // peers with no channel that were looked up
  std::vector<wire::PacketBuf*> rest_;
  std::vector<Channel*> touched_;
  wire::PacketBuf rx_buf_;
  bool wire_in_skips_ = false;
  bool armed_ = false;     // between a successful prepare_sleep() and woke()
  size_t backlogged_ = 0;  // packets in all backlogs
  uint32_t busy_passes_ = 0;  // receives that found ring packets, for reading the wire less often
  uint32_t first_ring_ = 0;   // where the next receive starts among live_ (round robin)
  std::vector<SharedRegions::Entry> regions_;  // shared_regions() as of regions_gen_
  uint64_t regions_gen_ = ~uint64_t(0);
  size_t last_region_ = 0;  // the one the last placed payload came from
  // Placed MIDDLE packets of one message gathered into one slot within a send() (a run,
  // shm::Placed::packets): the channel (null: none open), its flow and its slot's bytes.
  struct Run {
    Channel* c = nullptr;
    wire::FlowAddr flow;
    uint32_t bytes = 0;
    uint8_t slot[sizeof(shm::Placed) + wire::kMaxPacket - shm::kMinPlaced];
  } run_;
  // When a window may first be idle for long enough to go (next_deadline()): a window's use
  // only makes that later, so the channels are looked at then, not on every pass.
  uint64_t sweep_at_ = UINT64_MAX;
  ShmStats st_;
};

// A handshake this side started, waiting for the peer's answer (the watcher's).
struct SameHostLink::Dial {
  ShmPeer dst;
  int sock = -1, memfd = -1, e0 = -1, e1 = -1;
  std::chrono::steady_clock::time_point deadline;
};

}  // namespace uroce::link
