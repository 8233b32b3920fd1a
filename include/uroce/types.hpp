// The verbs vocabulary: work requests, completions, access flags, QP states and attributes.
// Numeric values follow libibverbs where it defines them, so a C ABI layer maps 1:1.
#pragma once
#include <array>
#include <compare>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace uroce {

enum Access : uint32_t {
  kAccessLocalWrite = 1, kAccessRemoteWrite = 2, kAccessRemoteRead = 4, kAccessRemoteAtomic = 8,
  kAccessMwBind = 16,  // a memory region memory windows may be bound to
  // On-demand paging: nothing of the region need be mapped when it is registered or later; an
  // access to memory that is not mapped (or not writable) fails with an access error instead
  // of faulting. reg_mr(nullptr, SIZE_MAX, ...) with it registers the whole address space.
  kAccessOnDemand = 64,
  // FLUSH (IBA 1.5) to the region, of each placement type; on a QP, that it takes FLUSHes.
  // Persistence needs persistent memory, which a region here never is: registering a region
  // with kAccessFlushPersistent fails.
  kAccessFlushGlobal = 256, kAccessFlushPersistent = 512,
};

// A FLUSH's placement type (bits, FETH) and selectivity level: the range [remote_addr,
// remote_addr + flush_length), or the whole region or window its rkey names.
enum FlushType : uint8_t { kFlushGlobal = 1, kFlushPersistent = 2 };
enum class FlushLevel : uint8_t { Range = 0, Region = 1 };

enum SendFlags : uint32_t { kSendFence = 1, kSendSignaled = 2, kSendSolicited = 4, kSendInline = 8 };

enum class WrOpcode : uint8_t {
  RdmaWrite = 0, RdmaWriteWithImm = 1, Send = 2, SendWithImm = 3, RdmaRead = 4,
  AtomicCmpSwp = 5, AtomicFetchAdd = 6,
  // Memory windows: SEND that invalidates the peer's window `invalidate_rkey` (RC), binding a
  // window (SendWr::bind), invalidating one of our own (`invalidate_rkey`). Numbered after
  // libibverbs' other opcodes; the drop-in maps them.
  SendWithInv = 7, BindMw = 8, LocalInv = 9,
  // IBA 1.5 (RC): FLUSH makes the remote writes before it visible (SendWr::flush_*);
  // ATOMIC_WRITE stores the 8 bytes of compare_add, as they lie in memory, at remote_addr
  // (8-byte aligned) at once. Both need the peer's REMOTE_WRITE (ATOMIC_WRITE) or FLUSH rights.
  Flush = 10, AtomicWrite = 11,
};

enum class WcStatus : uint8_t {
  Success = 0, LocLenErr = 1, LocQpOpErr = 2, LocEecOpErr = 3, LocProtErr = 4, WrFlushErr = 5,
  MwBindErr = 6, BadRespErr = 7, LocAccessErr = 8, RemInvReqErr = 9, RemAccessErr = 10,
  RemOpErr = 11, RetryExcErr = 12, RnrRetryExcErr = 13, GeneralErr = 21,
  // Tag matching: a DEL whose tag was consumed meanwhile; a rendezvous the device could not
  // finish (the tag's buffer holds the request's header for software to finish it).
  TmErr = 22, TmRndvIncomplete = 23,
};
const char* to_string(WcStatus s);

enum class WcOpcode : uint8_t {
  Send = 0, RdmaWrite = 1, RdmaRead = 2, CompSwap = 3, FetchAdd = 4, BindMw = 5, LocalInv = 6, Flush = 8,
  AtomicWrite = 9, Recv = 128,
  RecvRdmaWithImm = 129,
  // A tag matching SRQ's (SharedReceiveQueue::post_ops): list operations done, a tagged message
  // received (matched or unexpected, Wc::tm_flags), a message sent without a tag.
  TmAdd = 130, TmDel = 131, TmSync = 132, TmRecv = 133, TmNoTag = 134,
};
const char* to_string(WcOpcode o);

// XRC (IBA 9.8.x, eXtended Reliable Connected): an initiator sends as RC does, naming in each
// request an XRC SRQ at the target; a target QP has no PD, CQ or queue of its own and takes
// each message's receive, PD and CQ from the XRC SRQ named, which must be of its XRC domain.
// A raw packet QP (RawPacket) sends and receives whole Ethernet frames on the device's
// interface: what it posts leaves as it is, and frames arrive through its flow rules.
enum class QpType : uint8_t { RC = 2, UC = 3, UD = 4, RawPacket = 8, XrcSend = 9, XrcRecv = 10 };
// RC and both XRC kinds: acknowledged, retried, READs and atomics.
constexpr bool reliable_connected(QpType t) { return t == QpType::RC || t == QpType::XrcSend || t == QpType::XrcRecv; }
enum class QpState : uint8_t { Reset = 0, Init = 1, Rtr = 2, Rts = 3, Sqd = 4, Sqe = 5, Err = 6 };
const char* to_string(QpState s);

enum class Mtu : uint8_t { Mtu256 = 1, Mtu512 = 2, Mtu1024 = 3, Mtu2048 = 4, Mtu4096 = 5 };
constexpr uint32_t mtu_bytes(Mtu m) { return 128u << uint8_t(m); }

struct Sge {
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
};

struct Ah;

// What a BIND_MW work request binds (IBA 10.6.7): window `mw` (MemoryWindow::handle()) takes
// rkey `new_rkey` (its index bits unchanged: MemoryWindow::next_rkey()) and gives `access` to
// [addr, addr + length) of the region `mr_lkey` names, which must allow binding (kAccessMwBind).
// A length of 0 unbinds a type 1 window.
struct MwBind {
  uint32_t mw = 0;
  uint32_t new_rkey = 0;
  uint32_t mr_lkey = 0;
  uint64_t addr = 0;
  uint64_t length = 0;
  uint32_t access = 0;  // kAccessRemote*; remote write and atomic need the region's LOCAL_WRITE
};

struct SendWr {
  uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::Send;
  uint32_t send_flags = 0;
  std::span<const Sge> sg_list;
  uint32_t imm_data = 0;      // host order; big-endian on the wire
  uint64_t remote_addr = 0;   // RDMA and atomics
  uint32_t rkey = 0;
  uint64_t compare_add = 0;   // atomics: compare (CMP_SWP) or add (FETCH_ADD)
  uint64_t swap = 0;
  const Ah* ah = nullptr;     // UD: destination, read when posting
  const MwBind* bind = nullptr;  // BIND_MW, read when posting
  uint32_t invalidate_rkey = 0;  // SEND_WITH_INV (the peer's window), LOCAL_INV (ours)
  uint32_t remote_qpn = 0;    // UD
  uint32_t remote_qkey = 0;   // UD; with the top bit set, the QP's own Q_Key is used
  uint32_t remote_srqn = 0;   // XRC: the XRC SRQ at the target QP's end
  uint32_t flush_length = 0;  // FLUSH: bytes from remote_addr (FlushLevel::Range)
  uint8_t flush_type = kFlushGlobal;  // FLUSH: FlushType bits
  FlushLevel flush_level = FlushLevel::Range;
};

struct RecvWr {
  uint64_t wr_id = 0;
  std::span<const Sge> sg_list;
};

// Tag matching (IBV_SRQT_TM): each SEND to a QP of a tag matching SRQ starts with a 16-byte
// tag matching header (TMH: opcode, 3 zero bytes, big-endian application context and tag).
// EAGER messages whose tag matches a posted tagged buffer land in that buffer without their
// TMH; a RENDEZVOUS request (TMH, then RVH: big-endian va, rkey, length of the sender's data)
// that matches makes the device READ the data into the buffer and answer the sender with a
// FIN message (its TMH alone). Everything else takes an ordinary receive of the SRQ, whole.
enum class TmhOp : uint8_t { NoTag = 0, Rndv = 1, Fin = 2, Eager = 3 };
constexpr uint32_t kTmhBytes = 16, kRvhBytes = 16;

// A list operation on a tag matching SRQ (ibv_ops_wr): ADD a tagged buffer (at most one SGE;
// its handle comes back in `handle`), DEL one by handle, or only SYNC. With kTmOpSync the
// operation reports `unexpected_cnt`, the unexpected messages software has handled: tags
// match only while that equals the count the SRQ delivered.
enum class TmOpcode : uint8_t { Add = 0, Del = 1, Sync = 2 };
enum TmOpFlags : uint32_t { kTmOpSignaled = 1, kTmOpSync = 2 };
struct TmOp {
  uint64_t wr_id = 0;
  TmOpcode opcode = TmOpcode::Add;
  uint32_t flags = kTmOpSignaled;
  uint32_t unexpected_cnt = 0;
  uint32_t handle = 0;
  uint64_t recv_wr_id = 0;      // ADD: the wr_id of the message's completion
  std::span<const Sge> sg_list; // ADD
  uint64_t tag = 0;             // ADD: a message matches if (its tag ^ tag) & mask == 0
  uint64_t mask = 0;
};

// The network header of a received RoCE v2 datagram, numbered as RoCE NICs report it in a UD
// completion's service-level field (the CQE's L3 header type), where clients such as UCX read it.
enum class NetworkHeader : uint8_t { None = 0, Ipv6 = 1, Ipv4 = 2 };

// Wc::tm_flags, as libibverbs numbers them: software must sync the unexpected count
// (kWcTmSyncReq); the message matched a posted tag (kWcTmMatch); its data is in the tag's
// buffer (kWcTmDataValid: an eager message, or a rendezvous once its READ finished).
enum WcTmFlags : uint8_t { kWcTmSyncReq = 1 << 4, kWcTmMatch = 1 << 5, kWcTmDataValid = 1 << 6 };

struct Wc {
  uint64_t wr_id = 0;
  WcStatus status = WcStatus::Success;
  WcOpcode opcode = WcOpcode::Send;
  uint8_t tm_flags = 0;  // WcTmFlags
  uint32_t byte_len = 0;
  uint32_t imm_data = 0;  // host order, valid when with_imm
  bool with_imm = false;
  bool with_inv = false;  // a SEND with invalidate: invalidated_rkey is no longer valid here
  uint32_t invalidated_rkey = 0;
  bool solicited = false;
  bool with_grh = false;  // UD: the buffer starts with the 40-byte GRH area
  NetworkHeader network_hdr = NetworkHeader::None;  // UD: what the datagram came in
  uint32_t qp_num = 0;
  uint32_t src_qp = 0;
  uint32_t vendor_err = 0;
  uint32_t tm_priv = 0;       // a matched message's TMH application context
  uint64_t timestamp_ns = 0;  // when the device completed it, on its clock (Device::clock_ns)
  uint64_t tm_tag = 0;        // a matched message's tag
};

// A 128-bit GID. RoCE v2 over IPv4 uses the IPv4-mapped IPv6 form ::ffff:a.b.c.d.
struct Gid {
  std::array<uint8_t, 16> raw{};
  static Gid from_ipv4(uint32_t ip_host_order);
  std::optional<uint32_t> ipv4() const;  // host order
  std::string to_string() const;
  static std::optional<Gid> parse(const std::string& s);
  // Two word compares, not a call to memcmp: GIDs are compared on every packet.
  bool operator==(const Gid& o) const {
    uint64_t a[2], b[2];
    std::memcpy(a, raw.data(), 16);
    std::memcpy(b, o.raw.data(), 16);
    return ((a[0] ^ b[0]) | (a[1] ^ b[1])) == 0;
  }
  auto operator<=>(const Gid&) const = default;
};

// Address handle for UD sends: where a datagram goes (RoCE v2: an IPv6 or IPv4-mapped GID) and
// which of our GIDs it leaves from.
struct Ah {
  Gid dgid;
  uint8_t hop_limit = 64;
  uint8_t traffic_class = 0;
  uint8_t sgid_index = 0;
  // The sender of a UD receive, from the 40-byte GRH area at the start of its buffer.
  static Ah from_grh(const void* grh);
};

inline constexpr uint32_t kGrhBytes = 40;  // UD receives start with this much room for the GRH

// Asynchronous events (values as IBV_EVENT_*).
enum class AsyncEventType : uint8_t {
  CqErr = 0, QpFatal = 1, PortActive = 9, SrqLimitReached = 15, QpLastWqeReached = 16,
};
const char* to_string(AsyncEventType t);

struct AsyncEvent {
  AsyncEventType type = AsyncEventType::PortActive;
  uint32_t qp_num = 0;      // QP events
  uint32_t srq_handle = 0;  // SRQ events
  uint32_t cq_handle = 0;   // CQ events
  uint8_t port_num = 1;     // port events
};

struct QpCap {
  uint32_t max_send_wr = 128;
  uint32_t max_recv_wr = 128;
  uint32_t max_send_sge = 1;
  uint32_t max_recv_sge = 1;
  uint32_t max_inline_data = 0;
};

// Attribute mask bits, as IBV_QP_*.
enum QpAttrMask : uint32_t {
  kQpState = 1u << 0, kQpCurState = 1u << 1, kQpEnSqdAsyncNotify = 1u << 2, kQpAccessFlags = 1u << 3,
  kQpPkeyIndex = 1u << 4, kQpPort = 1u << 5, kQpQkey = 1u << 6, kQpAv = 1u << 7, kQpPathMtu = 1u << 8,
  kQpTimeout = 1u << 9, kQpRetryCnt = 1u << 10, kQpRnrRetry = 1u << 11, kQpRqPsn = 1u << 12,
  kQpMaxQpRdAtomic = 1u << 13, kQpAltPath = 1u << 14, kQpMinRnrTimer = 1u << 15, kQpSqPsn = 1u << 16,
  kQpMaxDestRdAtomic = 1u << 17, kQpPathMigState = 1u << 18, kQpCap = 1u << 19, kQpDestQpn = 1u << 20,
  kQpRateLimit = 1u << 25,  // QpAttr::rate_limit_kbps, at RTR->RTS and RTS->RTS
};

// A QP's rate limit (ibv_qp_rate_limit_attr, packet pacing): its packets leave at no more than
// `kbps` (0: no limit), counting each packet's RoCE bytes (BTH to ICRC; a raw frame whole);
// after an idle time up to `max_burst_bytes` may leave back to back (0: one packet). Under
// congestion control the lower of the two rates wins. typical_pkt_bytes is a hint, not used.
struct RateLimit {
  uint32_t kbps = 0;
  uint32_t max_burst_bytes = 0;
  uint16_t typical_pkt_bytes = 0;
};

struct QpAttr {
  QpState qp_state = QpState::Reset;
  QpState cur_qp_state = QpState::Reset;
  Mtu path_mtu = Mtu::Mtu1024;
  uint32_t qkey = 0;
  uint32_t rq_psn = 0;
  uint32_t sq_psn = 0;
  uint32_t dest_qp_num = 0;
  uint32_t qp_access_flags = 0;
  QpCap cap;
  Gid dgid;               // address vector: the peer's GID
  uint8_t sgid_index = 0;
  uint8_t hop_limit = 64;
  uint8_t traffic_class = 0;
  uint16_t pkey_index = 0;
  uint8_t port_num = 1;
  uint8_t max_rd_atomic = 1;
  uint8_t max_dest_rd_atomic = 1;
  uint8_t min_rnr_timer = 12;   // IBA Table 45 code: 0.64 ms
  uint8_t timeout = 14;         // 4.096 us * 2^timeout; 0 = infinite
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;        // 7 = retry forever
  bool sq_sig_all = false;
  uint32_t rate_limit_kbps = 0; // kQpRateLimit: RateLimit::kbps (no burst)
};

// What one side tells the other to connect an RC QP (exchanged out of band, see oob.hpp).
struct Endpoint {
  Gid gid;
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint64_t addr = 0;  // optional: a memory region the peer may access
  uint32_t rkey = 0;
  uint64_t len = 0;
};

// How an RC QP recovers lost packets: go-back-N (standard RoCE: everything from the first loss
// is sent again) or selective repeat (the responder keeps what arrives past a hole and says so;
// only the holes are sent again). A QP under selective repeat announces it and uses it only
// with a responder that answers in kind: toward rxe or a NIC it is go-back-N.
enum class Reliability : uint8_t { Gbn, Sr };
// A QP sender's congestion control: none (as fast as the window allows), DCQCN (CNPs cut the
// rate; paced), TIMELY (RC: the rate follows measured round trips; paced) or Swift (RC: a window
// of packets in flight follows round trips against a target delay).
enum class CongestionControl : uint8_t { None, Dcqcn, Timely, Swift };
// DCQCN's named parameter sets: the paper's, or one like Mellanox's defaults.
enum class DcqcnSet : uint8_t { Paper, Mellanox };

// Their names ("gbn", "sr"; "none", "dcqcn", "timely", "swift"; "dcqcn_paper", "mellanox"), as
// the environment, tools and error messages spell them.
std::string_view to_string(Reliability r);
std::string_view to_string(CongestionControl c);
std::string_view to_string(DcqcnSet s);
std::optional<Reliability> parse_reliability(std::string_view s);
std::optional<CongestionControl> parse_congestion_control(std::string_view s);
std::optional<DcqcnSet> parse_dcqcn_set(std::string_view s);
inline constexpr std::string_view kReliabilityNames = "gbn or sr";
inline constexpr std::string_view kCongestionControlNames = "none, dcqcn, timely or swift";
inline constexpr std::string_view kDcqcnSetNames = "dcqcn_paper or mellanox";

// The port's traffic classes, as IEEE 802.1Qaz (`dcb ets`, `mlnx_qos`) sets them on a RoCE
// NIC. A packet's DSCP (the top six bits of its QP's traffic class) picks one of 8 priorities.
// The transmit scheduler serves strict priorities first, highest first, then shares what is
// left among the ETS priorities by weight (an idle one's share goes to the others). ACKs, NAKs
// and CNPs leave ahead of all of them. By default every priority is ETS with weight 1.
struct PortQos {
  static constexpr int kPriorities = 8;
  std::array<uint8_t, 64> dscp_prio;      // DSCP -> priority; default DSCP >> 3, as a NIC trusting DSCP
  std::array<bool, kPriorities> strict{};  // strict priority; else ETS
  std::array<uint8_t, kPriorities> weight;  // ETS weights, 1..100
  // The port's transmit rate in kb/s (0: as fast as the link takes packets). Below it the
  // scheduler, not the link, decides whose packet goes next. On a device the host NIC shares,
  // every process with a rate books the one port: together they keep to it.
  uint64_t port_kbps = 0;
  // This process's weight against the others on a shared port (1..100): while several wait for
  // the port, each gets bytes in proportion to its share.
  uint8_t share = 1;
  PortQos() {
    for (int d = 0; d < 64; ++d) dscp_prio[size_t(d)] = uint8_t(d >> 3);
    weight.fill(1);
  }
  uint8_t priority_of(uint8_t traffic_class) const { return dscp_prio[traffic_class >> 2]; }
};

struct ConnectOptions {
  std::optional<Mtu> path_mtu;  // unset: the port's active MTU
  std::optional<uint8_t> sgid_index;  // unset: our first GID of the remote's IP version
  uint32_t access = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
  uint8_t timeout = 14, retry_cnt = 7, rnr_retry = 7, min_rnr_timer = 12;
  uint8_t max_rd_atomic = 16, max_dest_rd_atomic = 16;
  // The GRH traffic class: its DSCP goes on the wire and picks the port's priority (PortQos).
  uint8_t traffic_class = 0;
  // RC: how this QP recovers losses (see DeviceOptions::reliability); unset: the device's.
  std::optional<Reliability> reliability;
  // This QP's congestion control (see DeviceOptions::cc); unset: the device's.
  std::optional<CongestionControl> cc;
};


// A steering rule for raw packet QPs (ibv_create_flow): a frame goes to the QP if, in every
// layer the rule names, each field equals its value where the mask has bits. Naming a layer
// also asks for it: an IPv4 rule matches IPv4 frames only, a TCP rule TCP segments only.
// Numbers are in host order (an IPv4 address as 0x01020304 for 1.2.3.4); MACs and IPv6
// addresses as they travel. Of the rules a frame matches, the lowest priority wins, then the
// oldest.
struct FlowRule {
  uint16_t priority = 0;
  struct Eth {
    std::array<uint8_t, 6> dst{}, dst_mask{}, src{}, src_mask{};
    uint16_t ether_type = 0, ether_type_mask = 0;
    uint16_t vlan_tag = 0, vlan_tag_mask = 0;  // the 802.1Q TCI; a mask asks for a tagged frame
  };
  struct Ipv4 {
    uint32_t src = 0, src_mask = 0, dst = 0, dst_mask = 0;
    uint8_t proto = 0, proto_mask = 0, tos = 0, tos_mask = 0, ttl = 0, ttl_mask = 0;
  };
  struct Ipv6 {
    std::array<uint8_t, 16> src{}, src_mask{}, dst{}, dst_mask{};
    uint32_t flow_label = 0, flow_label_mask = 0;
    uint8_t next_hdr = 0, next_hdr_mask = 0, traffic_class = 0, traffic_class_mask = 0;
    uint8_t hop_limit = 0, hop_limit_mask = 0;
  };
  enum class L4 : uint8_t { None, Tcp, Udp };
  std::optional<Eth> eth;
  std::optional<Ipv4> ipv4;
  std::optional<Ipv6> ipv6;
  L4 l4 = L4::None;
  uint16_t src_port = 0, src_port_mask = 0, dst_port = 0, dst_port_mask = 0;
};

// Receive-side scaling (an RSS QP over an indirection table of work queues, ibv_create_wq and
// ibv_create_rwq_ind_table): a frame's Toeplitz hash, over the fields named, under the key,
// picks its work queue from the table (hash modulo the table's size, a power of two).
enum RxHashField : uint64_t {
  kHashSrcIpv4 = 1 << 0, kHashDstIpv4 = 1 << 1, kHashSrcIpv6 = 1 << 2, kHashDstIpv6 = 1 << 3,
  kHashSrcPortTcp = 1 << 4, kHashDstPortTcp = 1 << 5, kHashSrcPortUdp = 1 << 6, kHashDstPortUdp = 1 << 7,
};
inline constexpr uint64_t kHashFieldsKnown = 0xff;
// A work queue's state (ibv_wq_state): frames reach it only in Ready; moving to Err completes
// its posted receives with WR_FLUSH_ERR, moving to Reset discards them.
enum class WqState : uint8_t { Reset = 0, Ready = 1, Err = 2 };
struct RxHash {
  std::vector<uint8_t> key;  // at least 4 bytes longer than the fields hashed (40 for IPv6 and ports)
  uint64_t fields = 0;       // RxHashField bits
};

}  // namespace uroce
