// RoCEv2 over kernel UDP sockets: the receive socket is bound to IP:4791; a small pool of send
// sockets bound to ephemeral ports gives each QP its own UDP source port (flow entropy, as a
// RoCE NIC does). Sockets are unconnected with PMTU discovery on, so Linux writes DF=1 and IP
// ID 0: the IP header the ICRC covers is predictable on both ends. Batched with
// sendmmsg/recvmmsg, with UDP segmentation offload towards loopback peers (UROCE_GSO=0: off).
#pragma once
#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "link/host_nic.hpp"
#include "link/link.hpp"
#include "link/pcap_writer.hpp"
#include "link/xdp_port.hpp"
#include "uroce/result.hpp"
#include "wire/icrc.hpp"

namespace uroce::link {

class UdpLink final : public Link {
 public:
  // How packets are received. Raw: through an AF_PACKET socket (needs CAP_NET_RAW), which
  // shows the IPv4 header, so the ICRC is checked exactly over the sender's real IP ID (peers
  // other than uroce, such as rxe and RoCE NICs, vary it). Udp: the UDP socket, which hides
  // the header; the core then solves for the ID, trying first the one uroce senders write (0,
  // then 1, 2, ... along a segmented run). Auto: the UDP socket, with segmentation and receive
  // offload, which raw receive would cost. Xdp: the device's frames through an AF_XDP socket
  // both ways (link/xdp_port.hpp), the sockets for the rest; where the process or the
  // interface cannot, the sockets alone, with one line saying why.
  enum class Rx : uint8_t { Auto, Udp, Raw, Xdp };

  // addr: an IPv4-mapped or IPv6 GID; all zero: the first free 127.0.0.x (x = 1..254). A
  // device on an IPv4 address other than loopback also receives on the IPv6 addresses of its
  // interface (those it can bind), which come first in its GID table, link-local first.
  // gso: runs of packets to one peer leave in one sendmsg (UDP_SEGMENT) and arrive coalesced
  // (UDP_GRO); not with a raw receive socket.
  static Result<std::unique_ptr<UdpLink>> open(const Gid& addr, const std::string& pcap_path, Rx rx = Rx::Auto,
                                               bool gso = true);
  // A device of the host NIC that the host's processes share (link/host_nic.hpp): the receive
  // sockets are the lease's; MADs for QP1 come from the daemon.
  static Result<std::unique_ptr<UdpLink>> open_shared(std::unique_ptr<HostNicLease> lease,
                                                      const std::string& pcap_path, Rx rx = Rx::Auto, bool gso = true);
  HostNicLease* lease() const { return lease_.get(); }  // null on a device of this process alone
  bool raw() const { return raw_fd_ >= 0; }
  const XdpPort* xdp() const { return xdp_.get(); }  // null: kernel sockets only
  // Frames raw or AF_XDP receive refused before the core saw them: IPv4 or UDP lengths that
  // do not fit the frame (the kernel's UDP sockets drop those themselves).
  uint64_t rx_malformed() const { return raw_malformed_ + (xdp_ ? xdp_->malformed() : 0); }
  // The link's counters by name (Device::counters and the uroce command show them): the above,
  // and with AF_XDP what went through it and how it runs.
  template <class Fn>
  void for_each_counter(Fn&& fn) const {
    fn("link_rx_malformed", rx_malformed());
    if (!xdp_) return;
    fn("xdp_tx_packets", xdp_->sent());
    fn("xdp_rx_packets", xdp_->received());
    fn("xdp_zero_copy", uint64_t(xdp_->zero_copy()));
    fn("xdp_native", uint64_t(xdp_->native()));
    fn("xdp_multi_buffer", uint64_t(xdp_->multi_buffer()));
  }
  PcapWriter* pcap() const { return pcap_.get(); }
  ~UdpLink();

  uint32_t local_ip() const { return ip_; }  // 0 on an IPv6-only device
  uint64_t node_guid() const { return node_guid_; }  // from the interface (link/iface.hpp)
  std::vector<Gid> gids() const override;
  uint16_t src_port_for(uint32_t qpn) const override;
  int rx_fd() const override { return epoll_fd_; }  // every receive socket
  Status join_group(const Gid& group) override;
  void leave_group(const Gid& group) override;
  // Counted as an IPv4 packet: with IPv6 GIDs, 20 bytes less (the IPv6 header is longer).
  uint32_t ip_mtu() const override { return v6_.empty() ? ip_mtu_ : ip_mtu_ - 20; }
  void send(std::span<wire::PacketBuf* const> pkts, uint64_t now) override;
  int poll_rx(PacketSink& sink, uint64_t now, int max) override;
  void woke() override { fwd_due_ = sock_due_ = groups_due_ = true; }

 private:
  UdpLink() = default;
  bool finish(const std::string& pcap_path, Rx rx, bool gso, uint32_t slot);
  bool open_tx6(bool required, int* err);
  int poll_forwarded(PacketSink& sink, uint64_t now, int max);
  void answer_status();
  int poll_raw(PacketSink& sink, uint64_t now, int max);
  int poll_xdp(PacketSink& sink, uint64_t now, int max);
  void send_sockets(std::span<wire::PacketBuf* const> pkts, uint64_t now);
  void open_xdp(uint32_t slot);
  int poll_v4(PacketSink& sink, uint64_t now, int max) { return poll_v4_fd(rx_fd_, ip_, sink, now, max); }
  int poll_v4_fd(int fd, uint32_t dst, PacketSink& sink, uint64_t now, int max);
  int poll_groups(PacketSink& sink, uint64_t now, int max);
  int poll_v6(PacketSink& sink, uint64_t now, int max);
  int poll_v6_fd(int fd, const Gid& dst, PacketSink& sink, uint64_t now, int max);
  bool open_v6(const std::vector<Gid>& addrs, bool required, int* err);
  void drain_udp();
  // Room for each datagram's control messages: its GRO segment size and its traffic class.
  using RxCtrl = char[CMSG_SPACE(sizeof(int)) * 2];
  void prepare_rx(mmsghdr* msgs, iovec* iov, void* names, socklen_t name_len, RxCtrl* ctrl = nullptr);
  static constexpr int kTxSockets = 8;
  static constexpr int kBatch = 32;
  static constexpr int kRxBatch = 16;
  static constexpr size_t kRxBufBytes = 65536;  // a GRO buffer holds up to 64 KiB of datagrams
  bool gso_ = true;
  uint32_t ip_ = 0;
  uint32_t ip_mtu_ = 1500;
  int rx_fd_ = -1;
  int raw_fd_ = -1;
  int tx_fd_[kTxSockets] = {-1, -1, -1, -1, -1, -1, -1, -1};
  uint16_t tx_port_[kTxSockets] = {};
  struct V6Addr {
    Gid addr;
    int fd = -1;
  };
  std::vector<V6Addr> v6_;   // IPv6 addresses received on, in GID order
  int tx6_fd_[kTxSockets] = {-1, -1, -1, -1, -1, -1, -1, -1};  // the same ports as tx_fd_
  uint32_t ifindex_ = 0;     // for link-local addresses
  uint64_t node_guid_ = 0;
  int epoll_fd_ = -1;
  std::unique_ptr<PcapWriter> pcap_;
  std::unique_ptr<XdpPort> xdp_;
  std::vector<wire::PacketBuf*> rest_;  // what the XDP port leaves to the sockets
  uint64_t raw_malformed_ = 0;
  bool sock_due_ = true;  // with XDP: read the IPv4 socket on the next poll
  uint32_t sock_polls_ = 0;
  std::vector<uint8_t> rx_buf_;
  std::unique_ptr<HostNicLease> lease_;
  int fwd_fd_ = -1;  // MADs the host NIC daemon passes on
  bool fwd_due_ = true;
  bool fwd_busy_ = false;  // the last read of the channel found packets
  bool fwd_only_ = false;  // another user's process: no receive sockets of its own
  uint32_t fwd_polls_ = 0;
  const wire::Ipv4IdShift& id_shift(uint32_t ib_len);
  std::array<std::pair<uint32_t, wire::Ipv4IdShift>, 2> id_shifts_{{{0, wire::Ipv4IdShift(0)}, {0, wire::Ipv4IdShift(0)}}};
  uint32_t id_shift_next_ = 0;
  uint64_t fwd_polled_ns_ = 0;
  static constexpr uint64_t kFwdPollNs = 100'000;
  Error error_;      // why finish() failed
  struct GroupSocket {  // a multicast group joined: its own socket, bound to group:4791
    Gid gid;
    int fd = -1;
  };
  std::vector<GroupSocket> groups_;
  bool groups_due_ = true;
  uint32_t group_polls_ = 0;
  static constexpr int kGroupBudget = 64;
};

}  // namespace uroce::link
