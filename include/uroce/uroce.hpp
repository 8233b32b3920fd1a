// uroce: a user-space RoCEv2 NIC. RAII objects with verbs semantics:
//   Device -> ProtectionDomain -> MemoryRegion, QueuePair;  Device -> CompletionQueue.
// Objects keep their device alive, and children their parents: a PD or CQ that a program
// destroys while a QP or MR still uses it lives on until the last of them is gone. Data-path calls (post_send, post_recv, poll) make no
// syscalls and take no lock held across I/O; control calls serialize with the NIC engine.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "uroce/result.hpp"
#include "uroce/types.hpp"

namespace uroce {

namespace detail {
struct DeviceStack;
struct PdHold;
struct CqHold;
struct SrqHold;
struct XrcdHold;
struct DmHold;
}  // namespace detail
namespace verbs { class Qp; class Srq; }

// Port traffic classes from text, words as `dcb`/`tc` spell them, separated by spaces or commas:
// "strict P..." (priorities 0..7 served first), "ets P:W..." (weights 1..100), "dscp D:P..."
// (DSCP 0..63 to priority), "rate N[kbit|mbit|gbit]" (the port's transmit rate; no unit: kbit),
// "share N" (this process's weight on a shared port, 1..100).
// Example: "strict 5 ets 0:3 1:1 dscp 46:5 8:1 rate 1gbit". EINVAL says what is wrong.
Result<PortQos> parse_qos(std::string_view text);
// EINVAL for what parse_qos would not make: a priority past 7, a weight or share outside
// 1..100, a port rate past 1000 Gb/s (Device::open checks DeviceOptions::qos with it).
Status check_qos(const PortQos& q);

struct DeviceOptions {
  // IPv4 or IPv6 address to bind, on the device's interface. Empty: $UROCE_ADDR if it is on
  // that interface, else the interface's first address (loopback: the first free 127.0.0.x).
  std::string addr;
  std::string pcap;   // capture file; empty: $UROCE_PCAP ("%p" expands to the process id)
  uint64_t seed = 0;  // key randomness; 0: from the system
  // Receive through a raw socket (needs CAP_NET_RAW; also $UROCE_RAW_RX=1) so the ICRC is
  // checked exactly. By default a device not on loopback does so when the process may, and
  // otherwise solves for the IPv4 ID the ICRC covers ($UROCE_RAW_RX=0 forces that).
  bool raw_rx = false;
  // The device's own thread (the NIC): it sends, receives, retransmits and raises events
  // while the application does something else. Without it the device progresses only when
  // the application posts or polls a CQ on its own threads (also $UROCE_PROGRESS_THREAD=0);
  // CompletionQueue::wait then polls. Posting and polling run the device inline either way.
  bool progress_thread = true;
  // Packets to other uroce devices of the same user on this host go through shared memory
  // rings instead of UDP (same packets; counters shm_*). Off: false or $UROCE_SHM=0.
  bool same_host_shm = true;
  // Share the device with every other process on the host, as a NIC is shared: all of them
  // open the same address and UDP port 4791, the host NIC daemon (uroced, started on first
  // use) steering each packet to the process whose QP it names. Unset: $UROCE_SHARED (1/0),
  // else shared for an address of a network interface, this process's own on loopback.
  std::optional<bool> shared;
  // Congestion control of every RC/UC QP's sender (CongestionControl). Unset: $UROCE_CC
  // ("none", "dcqcn", "timely", "swift"), else none. DCQCN's parameters: cc_params (unset:
  // $UROCE_CC_PARAMS, "dcqcn_paper" or "mellanox", else the paper's), at a line rate of
  // line_gbps ($UROCE_LINE_GBPS, else 100).
  std::optional<CongestionControl> cc;
  std::optional<DcqcnSet> cc_params;
  double line_gbps = 0;
  // How RC QPs recover lost packets (Reliability). Unset: $UROCE_RELIABILITY ("gbn", "sr"),
  // else go-back-N.
  std::optional<Reliability> reliability;
  // The port's traffic classes and transmit scheduler (PortQos). Unset: $UROCE_QOS
  // (parse_qos's words), else every priority ETS with equal weight, no port rate.
  std::optional<PortQos> qos;
  // For studies of lossy fabrics: each packet arriving at the device is dropped with this
  // probability (seeded by rx_loss_seed; counter rx_injected_loss). Also $UROCE_RX_LOSS. 0: none.
  double rx_loss = 0;
  uint64_t rx_loss_seed = 1;
};

// Address handles a program may hold at once through the libibverbs drop-in (ibv_create_ah; past
// it, ENOMEM). The C++ API's Ah is a value, and has no limit.
inline constexpr uint32_t kMaxAh = 1u << 20;

struct DeviceAttr {
  std::string name;
  uint64_t node_guid;  // from the interface's MAC, as rxe's (loopback: from the host's machine ID)
  uint64_t max_mr_size;
  uint32_t max_qp, max_qp_wr, max_sge, max_cq, max_cqe, max_mr, max_pd, max_qp_rd_atom,
      max_qp_init_rd_atom, max_inline_data, max_ah;
  uint32_t max_mcast_grp, max_mcast_qp_attach, max_total_mcast_qp_attach;  // UD multicast
  bool atomic_supported;  // CMP_AND_SWP and FETCH_AND_ADD, atomic among uroce atomics
  uint64_t max_dm_size;   // device memory (Device::alloc_dm) the device holds in all
  bool odp;               // on-demand regions (kAccessOnDemand): where the process may use process_vm_readv
  // Tag matching SRQs (RC): tagged buffers in one's list, list operations outstanding, and the
  // longest rendezvous request header (TMH, RVH and the sender's own bytes).
  uint32_t max_tm_tags, max_tm_ops, max_rndv_hdr;
  uint32_t min_rate_kbps, max_rate_kbps;  // QueuePair::set_rate_limit's range
};

struct PortAttr {
  bool active;
  Mtu max_mtu;
  Mtu active_mtu;
  uint32_t gid_tbl_len;
  const char* link_layer;  // "Ethernet"
};

class ProtectionDomain;
class CompletionQueue;
class SharedReceiveQueue;
class DeviceMemory;
class MemoryWindow;
class XrcDomain;

// A device the host has: one per network interface with an address, as list() gives them.
struct DeviceInfo {
  std::string name;       // "uroce_" + the interface's name: uroce_eth0, uroce_lo
  std::string interface;  // eth0, lo
  std::string addr;       // where it opens unless told otherwise ("" on loopback: a 127.0.0.x of its own)
  bool loopback = false;
  uint64_t node_guid = 0;  // what query_device().node_guid says once it is open
};

class Device {
 public:
  // The host's devices: one per network interface that is up with an address, the interface
  // of the default route first (without one, the first by index). Loopback's, uroce_lo, is
  // listed (last) only where no other interface has a device: it reaches its own host alone,
  // and UCX would stripe a job across hosts over every device listed (rxe gives lo none).
  // $UROCE_DEVICES (interface names, comma-separated) keeps those alone, lo too if named;
  // $UROCE_ADDR's interface comes first, at that address (loopback's too, on 127/8).
  static std::vector<DeviceInfo> list();
  // The listed device whose interface holds addr (127/8: loopback's); "" if there is none.
  static std::string name_for(const std::string& addr);
  // Opens a device by name (empty: the first of list(); uroce_lo opens by name even where it
  // is not listed), or the one at opts.addr, on UDP port 4791. ENODEV for a name the host does
  // not have or a loopback address with no listed device; EINVAL for an address on another
  // device.
  static Result<std::unique_ptr<Device>> open(const std::string& name = "", DeviceOptions opts = {});
  ~Device();

  const std::string& name() const;
  DeviceAttr query_device() const;
  PortAttr query_port() const;
  // The GID table (RoCE v2), in rxe's order: the IPv6 addresses of the device's interface,
  // link-local first, then its IPv4-mapped address. On loopback (the default) that is one GID,
  // the IPv4 one, at index 0; a device bound to an IPv6 address has that one only.
  Result<Gid> query_gid(int index) const;
  // The GID index a connection to `peer` uses unless told otherwise: our first GID of the
  // peer's IP version.
  uint8_t gid_index_for(const Gid& peer) const;
  uint32_t ipv4() const;  // 0 on an IPv6-only device
  // On a device shared with the host's other processes: this process's steering slot, which
  // the top bits of its QPNs and CM IDs carry (1..63); 0 on a device of this process alone.
  uint32_t share_slot() const;
  // A CM service ID for this process alone on a shared device (REQs for it come here);
  // EADDRINUSE if another process has it. Always succeeds on a device of this process alone.
  Status claim_service(uint64_t service_id);
  void release_service(uint64_t service_id);
  std::map<std::string, uint64_t> counters() const;
  // The device's clock (CLOCK_MONOTONIC, in ns): completions carry the time they were made on
  // it (Wc::timestamp_ns), as ibv_query_rt_values_ex reads a NIC's.
  uint64_t clock_ns() const;
  // Lets what was posted so far leave the host (bounded by timeout_ms): a program that posts
  // and exits at once still gets its packets out, as a hardware NIC sends them.
  void flush(int timeout_ms);

  Result<std::unique_ptr<ProtectionDomain>> alloc_pd();
  Result<std::unique_ptr<CompletionQueue>> create_cq(uint32_t depth);
  // Device memory (ibv_alloc_dm): len bytes the NIC holds rather than the application, zeroed;
  // ENOMEM past query_device().max_dm_size in all, EINVAL for 0 bytes.
  Result<std::unique_ptr<DeviceMemory>> alloc_dm(size_t len);
  // An XRC domain (ibv_open_xrcd): its XRC SRQs (ProtectionDomain::create_xrc_srq) and target
  // QPs (XrcDomain::create_target_qp). A domain is this process's: it is not shared with others.
  Result<std::unique_ptr<XrcDomain>> open_xrcd();

  // Asynchronous events: async_fd() is readable exactly while events wait; get_async_event()
  // returns the oldest, or an EAGAIN error when none is left.
  int async_fd() const;
  Result<AsyncEvent> get_async_event();

 private:
  explicit Device(std::shared_ptr<detail::DeviceStack> c) : stack_(std::move(c)) {}
  std::shared_ptr<detail::DeviceStack> stack_;
};

// What MemoryRegion::rereg changes; what is left out stays as it was.
struct MrChange {
  ProtectionDomain* pd = nullptr;  // another PD of the same device
  void* addr = nullptr;            // a new range [addr, addr + length), named by addr
  size_t length = 0;
  std::optional<uint32_t> access;  // new access rights (kAccess*)
};

class MemoryRegion {
 public:
  ~MemoryRegion();  // deregisters: the keys stop working at once
  uint32_t lkey() const { return lkey_; }
  uint32_t rkey() const { return rkey_; }
  void* addr() const { return addr_; }
  size_t length() const { return len_; }
  // The address SGEs and remote accesses name the first byte by: addr() unless registered at
  // another IOVA (reg_mr's iova; 0 for a region of device memory).
  uint64_t iova() const { return iova_; }
  Sge sge(size_t offset, uint32_t length) const { return Sge{iova_ + offset, length, lkey_}; }
  // Reregisters in place (Reregister Memory Region): the keys stay, and what `c` gives replaces
  // the region's PD, range or access for every access after the call; work requests posted
  // with the old range then fail their checks. EINVAL for nothing to change, a PD of another
  // device, bad access or a region of device memory; on error nothing changes.
  Status rereg(const MrChange& c);
  // Memory windows bound to it now (ibv_dereg_mr refuses with EBUSY; destroying it unbinds them).
  uint32_t windows() const;

 private:
  friend class ProtectionDomain;
  MemoryRegion() = default;
  std::shared_ptr<detail::PdHold> pd_;
  std::shared_ptr<detail::DmHold> dm_;  // the device memory it lies in, if any
  void* addr_ = nullptr;
  size_t len_ = 0;
  uint64_t iova_ = 0;
  uint32_t access_ = 0;
  uint32_t lkey_ = 0, rkey_ = 0;
};

// A memory window (IBA 10.6.7, ibv_alloc_mw): remote access to part of a region that allows
// binding (kAccessMwBind), granted with a BIND_MW work request (SendWr::bind) and taken back
// by binding again with length 0 (type 1), by LOCAL_INV or a peer's SEND with invalidate
// (type 2, which only the QP that bound it may use or invalidate), or by destroying it. Each
// bind gives it a new rkey (next_rkey()): an old one stops working.
class MemoryWindow {
 public:
  ~MemoryWindow();  // unbinds it at once
  uint32_t handle() const { return index_; }  // MwBind::mw
  uint8_t type() const { return type_; }
  uint32_t rkey() const;  // its rkey now: the last bind's (or the first, before any)
  // The rkey to give the next bind: the same index, the next value of the low byte.
  uint32_t next_rkey() const { return (rkey() & ~0xffu) | ((rkey() + 1) & 0xffu); }
  bool bound() const;

 private:
  friend class ProtectionDomain;
  MemoryWindow() = default;
  std::shared_ptr<detail::PdHold> pd_;
  uint32_t index_ = 0;
  uint8_t type_ = 1;
};

// Memory on the device (ibv_alloc_dm). In a software NIC it is memory of the NIC's own, out of
// the application's reach but through these calls: copied to and from in whole 4-byte words
// at 4-byte offsets (mlx5's rule for its on-chip memory, which programs follow), and used in
// RDMA through a zero-based memory region (ProtectionDomain::reg_dm_mr). It lives until the
// last region on it is gone.
class DeviceMemory {
 public:
  ~DeviceMemory();
  size_t length() const;
  // EINVAL for an offset or length not a multiple of 4, or a range past the end.
  Status copy_to(uint64_t offset, const void* src, size_t len);
  Status copy_from(void* dst, uint64_t offset, size_t len) const;
  bool busy() const;  // true while memory regions lie on it

 private:
  friend class Device;
  friend class ProtectionDomain;
  DeviceMemory() = default;
  std::shared_ptr<detail::DmHold> h_;
};

class CompletionQueue {
 public:
  ~CompletionQueue();
  // Returns how many completions were written to out (0 if none). Never blocks. A poll that
  // finds nothing first lets the device receive on this thread (even with an empty out).
  int poll(std::span<Wc> out);
  // Arms the completion event: the next completion (or next solicited/error one) makes fd()
  // readable once.
  Status req_notify(bool solicited_only = false);
  // An eventfd to put in poll/epoll for event-driven users; read it to consume events.
  int fd() const;
  // Polls; if nothing is there, arms and blocks on fd() up to timeout_ms (-1: forever).
  // Returns the number of completions, 0 on timeout.
  Result<int> wait(std::span<Wc> out, int timeout_ms);
  uint32_t capacity() const;
  // A new capacity of at least depth; what waits stays. EINVAL if more completions wait than
  // depth, or depth is 0 or past query_device().max_cqe (then nothing changes).
  Status resize(uint32_t depth);
  bool overrun() const;
  // True while a QP uses it (verbs would refuse to destroy it: EBUSY).
  bool busy() const;

 private:
  friend class Device;
  friend class ProtectionDomain;
  CompletionQueue() = default;
  std::shared_ptr<detail::CqHold> h_;
};

struct QpInit {
  QpType type = QpType::RC;  // XrcSend: an XRC initiator (no receive queue; recv_cq may be null)
  CompletionQueue* send_cq = nullptr;
  CompletionQueue* recv_cq = nullptr;
  QpCap cap;
  bool sq_sig_all = false;
  SharedReceiveQueue* srq = nullptr;  // receives come from here instead of the QP's own queue
  // QP1, the general services interface: a UD QP with QPN 1 that receives the management
  // datagrams (the communication manager's) sent to this port. One per device.
  bool gsi = false;
};

class SharedReceiveQueue {
 public:
  ~SharedReceiveQueue();
  uint32_t handle() const;  // for an XRC SRQ, its number, which initiators name (SendWr::remote_srqn)
  Status post_recv(const RecvWr& wr) { return post_recv(std::span<const RecvWr>(&wr, 1)); }
  Status post_recv(std::span<const RecvWr> wrs, size_t* bad = nullptr);
  // Arms SRQ_LIMIT_REACHED for when fewer than `limit` receives remain (0 disarms).
  Status arm_limit(uint32_t limit);
  uint32_t limit() const;   // 0 once the event fired
  uint32_t posted() const;  // receives waiting
  uint32_t capacity() const;
  uint32_t max_sge() const;
  bool busy() const;  // true while a QP draws from it
  Status set_state(WqState state);  // a work queue's (EINVAL for an SRQ): frames reach it when Ready
  // A tag matching SRQ's list operations (ibv_post_srq_ops), done at once: an ADD's handle
  // comes back in its TmOp; each signaled one (and each that failed) completes to the SRQ's CQ.
  // EINVAL for another SRQ or a bad operation, ENOMEM for an ADD to a full list (*bad: the
  // first operation not done).
  Status post_ops(std::span<TmOp> ops, size_t* bad = nullptr);
  uint32_t max_tags() const;  // a tag matching SRQ's list size (0: another SRQ)

 private:
  friend class ProtectionDomain;
  SharedReceiveQueue() = default;
  std::shared_ptr<detail::SrqHold> h_;
};

class QueuePair {
 public:
  ~QueuePair();
  uint32_t qp_num() const;
  QpState state() const;
  QpAttr query() const;
  Status modify(const QpAttr& attr, uint32_t mask);
  // RESET -> INIT -> RTR -> RTS towards `remote`, sending from PSN `local_psn`.
  Status connect(const Endpoint& remote, uint32_t local_psn, const ConnectOptions& o = {});
  // UD: RESET -> INIT -> RTR -> RTS with this Q_Key; sends then name their destination (SendWr::ah).
  Status activate_ud(uint32_t qkey, uint32_t sq_psn = 0);
  // RC, in RESET or INIT: how this QP recovers losses instead of the device's choice
  // (DeviceOptions::reliability). EINVAL otherwise. selective_repeat(): what it uses.
  Status set_reliability(Reliability r);
  bool selective_repeat() const;
  // This QP's congestion control instead of the device's (DeviceOptions::cc): RC (and UC for
  // none and DCQCN), in RESET or INIT. congestion_control(): what it uses.
  Status set_congestion_control(CongestionControl c);
  // Packet pacing (ibv_modify_qp_rate_limit): its packets leave at no more than l.kbps, in any
  // state (RESET clears it); EINVAL outside DeviceAttr's min/max_rate_kbps.
  Status set_rate_limit(const RateLimit& l);
  CongestionControl congestion_control() const;
  // UD: receive what is sent to the multicast group `gid` (IPv4-mapped 224.0.0.0/4 over RoCE
  // v2), as ibv_attach_mcast; attaching twice is no error. Detach: EINVAL if not attached.
  Status attach_mcast(const Gid& gid);
  Status detach_mcast(const Gid& gid);
  size_t mcast_groups() const;  // groups attached to (the destructor detaches them)
  // Raw packet QPs: frames arriving on the interface that match `rule` come to this QP, as
  // ibv_create_flow steers them; the handle names the rule to destroy_flow. EINVAL on other
  // QP types. The destructor destroys the QP's remaining rules.
  Result<uint32_t> create_flow(const FlowRule& rule);
  Status destroy_flow(uint32_t handle);
  size_t flows() const;

  Status post_send(const SendWr& wr) { return post_send(std::span<const SendWr>(&wr, 1)); }
  Status post_send(std::span<const SendWr> wrs, size_t* bad = nullptr);
  Status post_recv(const RecvWr& wr) { return post_recv(std::span<const RecvWr>(&wr, 1)); }
  Status post_recv(std::span<const RecvWr> wrs, size_t* bad = nullptr);

 private:
  friend class ProtectionDomain;
  friend class XrcDomain;
  QueuePair() = default;
  std::shared_ptr<detail::DeviceStack> stack_;
  std::shared_ptr<detail::PdHold> pd_;
  std::shared_ptr<detail::CqHold> send_cq_, recv_cq_;
  std::shared_ptr<detail::SrqHold> srq_;
  std::shared_ptr<detail::XrcdHold> xrcd_;  // an XRC target QP
  std::vector<std::shared_ptr<detail::SrqHold>> wqs_;  // an RSS QP's table
  verbs::Qp* qp_ = nullptr;
};

class ProtectionDomain {
 public:
  ~ProtectionDomain();
  Result<std::unique_ptr<MemoryRegion>> reg_mr(void* addr, size_t len, uint32_t access);
  // The same region, named from `iova` on in SGEs and remote accesses (ibv_reg_mr_iova2).
  Result<std::unique_ptr<MemoryRegion>> reg_mr(void* addr, size_t len, uint64_t iova, uint32_t access);
  // Prefetch (ibv_advise_mr): each SGE must lie in an on-demand region of this PD (EINVAL
  // otherwise); with `populate` its pages are touched now, EFAULT if one is not mapped.
  Status prefetch(std::span<const Sge> sges, bool populate = true);
  // A memory window of type 1 or 2 (EINVAL otherwise), unbound.
  Result<std::unique_ptr<MemoryWindow>> alloc_mw(uint8_t type);
  // A zero-based region of device memory: [offset, offset + len) of dm, named from 0.
  Result<std::unique_ptr<MemoryRegion>> reg_dm_mr(DeviceMemory& dm, uint64_t offset, size_t len, uint32_t access);
  Result<std::unique_ptr<QueuePair>> create_qp(const QpInit& init);
  Result<std::unique_ptr<SharedReceiveQueue>> create_srq(uint32_t max_wr, uint32_t max_sge = 1, uint32_t limit = 0);
  // An XRC SRQ of `xrcd` in this PD: messages to target QPs of the domain that name it take
  // their receives from it, are checked in this PD and complete to `cq`.
  Result<std::unique_ptr<SharedReceiveQueue>> create_xrc_srq(XrcDomain& xrcd, CompletionQueue& cq, uint32_t max_wr,
                                                             uint32_t max_sge = 1, uint32_t limit = 0);
  bool busy() const;  // true while MRs, QPs or SRQs use it
  // A tag matching SRQ (IBV_SRQT_TM) for RC QPs: SENDs to its QPs carry a TMH and land in the
  // tagged buffer they match (SharedReceiveQueue::post_ops), else in its ordinary receives;
  // its messages and list operations complete to `cq`. max_tags: its list's size.
  Result<std::unique_ptr<SharedReceiveQueue>> create_tm_srq(CompletionQueue& cq, uint32_t max_wr, uint32_t max_sge,
                                                            uint32_t max_tags, uint32_t max_ops = 0);

  // A work queue (ibv_create_wq): a receive queue completing to cq, for RSS QPs to spread
  // frames over; it takes frames once set_state(WqState::Ready) (IBV_WQS_RDY).
  Result<std::unique_ptr<SharedReceiveQueue>> create_wq(CompletionQueue& cq, uint32_t max_wr, uint32_t max_sge = 1);
  // An RSS QP: a raw packet QP whose frames (those its flow rules steer to it) go to the work
  // queue of `table` (a power of two of this PD's work queues) that their hash picks. It sends
  // nothing; each completion names its work queue (Wc::qp_num is the queue's handle).
  Result<std::unique_ptr<QueuePair>> create_rss_qp(std::span<SharedReceiveQueue* const> table, const RxHash& hash);
 private:
  friend class Device;
  friend class MemoryRegion;
  ProtectionDomain() = default;
  // A core SRQ just made (engine lock held), armed at `limit`, as the program's object.
  Result<std::unique_ptr<SharedReceiveQueue>> wrap_srq(Result<verbs::Srq*> srq, uint32_t limit);
  std::shared_ptr<detail::PdHold> h_;
};

class XrcDomain {
 public:
  ~XrcDomain();
  // An XRC target QP: no PD, CQ or receive queue of its own; connect() it to an initiator.
  Result<std::unique_ptr<QueuePair>> create_target_qp();
  bool busy() const;  // true while XRC SRQs or target QPs use it

 private:
  friend class Device;
  friend class ProtectionDomain;
  XrcDomain() = default;
  std::shared_ptr<detail::XrcdHold> h_;
};

}  // namespace uroce
