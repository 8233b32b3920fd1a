// The protocol core of one device: object tables, receive dispatch, the run list of QPs with
// work, and timers. It performs no I/O and reads no clock: callers pass packets and `now`,
// and collect packets (take_tx), completion events and the next deadline. The threaded engine,
// the in-memory test link and the simulator all drive it through this interface.
//
// Its parts, one file each: object tables (tables.cpp), posting and work queues (post.cpp), the
// run list and timers (schedule.cpp), receive dispatch and transmit buffers (packets.cpp),
// completions and QP lifecycle (completion.cpp). The requester, completer and responder
// (roles.hpp) see it only through Context (context.hpp).
//
// Threading: control calls (create/modify/destroy, reg_mr) and the engine calls (on_packet,
// progress, take_*) must be serialized by the caller (the engine lock). post_send/post_recv and
// CQ polling are safe from application threads concurrently with the engine.
#pragma once
#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <random>
#include <set>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cc/dcqcn.hpp"
#include "cc/swift.hpp"
#include "cc/timely.hpp"
#include "transport/counters.hpp"
#include "transport/flow_table.hpp"
#include "transport/guard.hpp"
#include "transport/qp_transport.hpp"
#include "transport/reliability.hpp"
#include "transport/tx_scheduler.hpp"
#include "transport/verdict.hpp"
#include "uroce/result.hpp"
#include "verbs/cq.hpp"
#include "verbs/mr.hpp"
#include "verbs/qpn_index.hpp"
#include "verbs/spinlock.hpp"
#include "verbs/srq.hpp"
#include "wire/ip_udp.hpp"
#include "wire/packet_buf.hpp"

namespace uroce::wire { struct Packet; }

namespace uroce::transport {

using wire::kMaxPacket;
// The largest message (IBA: 2^31 bytes); longer requests are refused on both sides, which
// also keeps a message's PSNs well inside the 2^23 that PSN comparison can tell apart.
inline constexpr uint32_t kMaxMessage = 1u << 31;

using PacketBuf = wire::PacketBuf;
using verbs::Lkey;
using verbs::PdHandle;
using verbs::Qpn;
using verbs::Rkey;

struct CoreConfig {
  std::vector<Gid> gids = {Gid::from_ipv4(0x7f000001)};  // the port's GID table: our addresses
  uint64_t seed = 0;                    // 0: from std::random_device
  // Requester window per QP in packets of MTU 4096 (1 MiB in flight); go-back-N scales it to the
  // QP's path MTU, so that a QP at 1024 keeps 1024 packets, the same bytes, in flight.
  uint32_t max_inflight_pkts = 256;
  // Selective repeat's window (IRN's BDP-FC): packets in flight at most, the fabric's
  // bandwidth-delay product; 0: max_inflight_pkts. Go-back-N keeps max_inflight_pkts.
  uint32_t sr_window_pkts = 0;
  uint32_t window_pkts(bool sr) const {
    return sr && sr_window_pkts ? std::min(max_inflight_pkts, sr_window_pkts) : max_inflight_pkts;
  }
  // Go-back-N's window, in packets of any size, towards a peer the link carries intact
  // (carried_intact: a same-host ring, where nothing is lost and the ring's slots are the
  // buffer): as many packets as the ring has slots keep the receiver's copy going while the
  // ACKs for the last pass come back. 0: max_inflight_pkts, as on the wire.
  uint32_t intact_window_pkts = 0;
  uint32_t ack_req_every = 16;          // ask for an ACK at least every N packets
  uint32_t budget_per_qp = 32;          // packets of MTU 4096 one QP may send per pass (scaled alike)
  // Packets all QPs together may send per pass: a pass stays short however many QPs have work
  // (the rest wait, in order, for the next one), so the time it stamps on its packets is true.
  uint32_t budget_per_pass = 1024;
  uint32_t tx_pool = 4096;              // packet buffers
  Mtu port_mtu = Mtu::Mtu4096;          // the port's active MTU: path MTUs and UD datagrams fit in it
  // QPNs have qpn_high in their top qpn_high_bits (0: the whole 24 bits are free): a host NIC
  // shared by several processes steers packets by these bits (link/steering.hpp).
  uint32_t qpn_high = 0;
  int qpn_high_bits = 0;
  std::function<uint16_t(uint32_t qpn)> src_port_for;  // UDP source port per QP (flow entropy)
  // True if the link carries packets to this address and QP intact (shared memory): their ICRC is
  // left out (ICRC offload, as a NIC's internal loopback). Unset: every packet has one.
  std::function<bool(const Gid& dst, uint32_t dest_qpn)> carried_intact;
  // While the link still holds packets for this address and QP that the peer has not taken (a
  // same-host ring and what waits for room in it), the last time it saw the peer take some; 0
  // when it holds none. Those packets are not lost, only queued: a transport timer that expires
  // while that queue moves starts again instead of resending into it (a burst on thousands of
  // QPs would otherwise collapse into retransmissions), and counts once it stalls.
  std::function<uint64_t(const Gid& dst, uint32_t dest_qpn, uint64_t now)> held_moved_at;
  // The link sends a payload from where it lies (wire::PacketBuf::ref), so payloads in one SGE
  // are not copied into packets. Unset: every packet is whole in its buffer.
  bool link_gathers = false;
  // The largest frame a raw packet QP sends: the interface MTU, its Ethernet header and a VLAN
  // tag (set when the raw port opens on the interface: ProtocolCore::set_raw_frame_max).
  uint32_t raw_frame_max = 1500 + 18;
  // DCQCN's notification point: a QP answers CE-marked requests with at most one CNP per
  // interval (the paper's 50 us).
  uint64_t cnp_interval_ns = 50'000;
  // The senders' congestion control, for every RC and UC QP: none (as fast as the window
  // allows) or DCQCN (CNPs cut a QP's rate; a pacer spaces its packets). dcqcn's line rate is
  // the rate a QP starts at and returns to.
  cc::Algo cc = cc::Algo::None;
  cc::DcqcnParams dcqcn = cc::DcqcnParams::paper(100e9);
  cc::TimelyParams timely = cc::TimelyParams::paper(100e9);  // TIMELY: a rate from round trips
  cc::SwiftParams swift = cc::SwiftParams::for_line_rate(100e9);  // Swift: a window from delay
  // A paced QP sends while its pacer is at most this far ahead of now: the packets of one
  // pass share its time, and a strict pacer would let a QP send one packet per pass.
  uint64_t pace_slack_ns = 10'000;
  // The port's traffic classes: which priority a QP's packets take, how the transmit scheduler
  // serves the priorities, the port's rate (tx_scheduler.hpp).
  PortQos qos;
  // A host NIC's port, shared by every process on the device, and this process's place in it
  // (shared_port.hpp); unset: the port is this core's alone.
  SharedPort* shared_port = nullptr;
  uint32_t shared_port_slot = 0;
  // How RC QPs recover losses (reliability.hpp). Under selective repeat, a QP that has heard
  // nothing for sr_probe_ns (or, once measured, three round trips, at least sr_probe_min_ns)
  // probes: a loss at the tail of a burst has nothing behind it to be reported by, and waiting
  // out the QP's full timeout for it would cost far more than one duplicate packet (IRN's short
  // RTO, TCP's tail-loss probe).
  Reliability reliability = Reliability::Gbn;
  uint64_t sr_probe_ns = 500'000;
  uint64_t sr_probe_min_ns = 100'000;  // once round trips are measured: 3 of them, at least this
  // Called with the verdict on every request (responder) and response (completer), if set.
  std::function<void(const Qp&, const wire::Packet&, Verdict)> trace;
};

struct DeviceLimits {
  uint32_t max_qp = 1 << 16, max_qp_wr = 1 << 14, max_sge = 32, max_cqe = 1 << 20, max_mr = 1 << 20;
  uint32_t max_inline = 512, max_rd_atomic = verbs::kMaxRdAtomic, max_pd = 1 << 16, max_xrcd = 1 << 16;
  uint64_t max_msg = kMaxMessage;
  // Multicast: groups joined (each is a socket of the link's), QPs per group, attachments in all.
  uint32_t max_mcast_grp = 64, max_mcast_qp_attach = 56, max_total_mcast_qp_attach = 64 * 56;
  uint32_t max_flows = 1024;  // flow rules (raw packet QPs)
  uint32_t max_rwq_table = 1 << 10;  // work queues in an RSS QP's indirection table
  // Tag matching SRQs: tagged buffers in one's list, list operations outstanding (all complete
  // at once here), and the rendezvous request header (TMH, RVH and the sender's own).
  uint32_t max_tm_tags = 1024, max_tm_ops = 1 << 14, max_rndv_hdr = 64;
  // Rate limits (packet pacing): 1 kb/s to 100 Gb/s, bursts up to 16 MiB.
  uint32_t min_rate_kbps = 1, max_rate_kbps = 100'000'000, max_rate_burst = 1 << 24;
};

class Context;

class ProtocolCore {
 public:
  explicit ProtocolCore(CoreConfig cfg);
  ~ProtocolCore();
  ProtocolCore(const ProtocolCore&) = delete;
  ProtocolCore& operator=(const ProtocolCore&) = delete;

  const CoreConfig& config() const { return cfg_; }
  bool is_local(const Gid& a) const {
    for (const Gid& g : cfg_.gids)
      if (g == a) return true;
    return false;
  }
  // The GID a path to `peer` leaves from by default: our first of the peer's IP version
  // (index 0 if there is none).
  uint8_t sgid_index_for(const Gid& peer) const {
    for (size_t i = 0; i < cfg_.gids.size(); ++i)
      if (wire::is_v4(cfg_.gids[i]) == wire::is_v4(peer)) return uint8_t(i);
    return 0;
  }
  const DeviceLimits& limits() const { return limits_; }
  const Counters& counters() const { return ctr_; }
  // Each QP, for a status report (the engine lock held).
  template <class F>
  void for_each_qp(F&& f) const {
    for (const auto& [n, q] : qps_) f(static_cast<const Qp&>(*q));
  }

  // The lock its users hold for control calls and engine passes (the engine sets it; unset, as
  // in the simulator and the tests, one thread drives the core). Debug builds check it at
  // every entry point below marked "engine lock held" (UROCE_ASSERT_HELD).
  void set_guard(const CoreMutex* m) { guard_ = m; }
  bool held() const { return !guard_ || guard_->held_here(); }

  // ---- control path (engine lock held) ----
  Result<PdHandle> alloc_pd();
  Status dealloc_pd(PdHandle pd);
  // iova: the address SGEs and remote VAs name addr by (addr itself unless given).
  Result<verbs::Mr> reg_mr(PdHandle pd, void* addr, uint64_t len, uint32_t access,
                           std::optional<uint64_t> iova = std::nullopt);
  // The region keeps its keys and takes this PD, range and access from the next packet on.
  Result<verbs::Mr> rereg_mr(Lkey lkey, PdHandle pd, void* addr, uint64_t len, uint32_t access, uint64_t iova);
  Status dereg_mr(Lkey lkey);  // unbinds the windows bound to it
  // ibv_advise_mr's prefetch: each SGE must lie in an on-demand region of pd (EINVAL); with
  // `populate` its pages are touched now (EFAULT if one is not mapped).
  Status prefetch(PdHandle pd, std::span<const Sge> sges, bool populate);
  uint32_t mr_windows(Lkey lkey) const { return mrs_.windows_on(lkey); }
  // Memory windows (type 1 or 2), named by index; a window holds its PD like a region.
  Result<verbs::Mw> alloc_mw(PdHandle pd, uint8_t type);
  Status dealloc_mw(uint32_t index);
  const verbs::Mw* mw(uint32_t index) const { return mrs_.mw(index); }
  Result<verbs::Cq*> create_cq(uint32_t depth);
  Status destroy_cq(verbs::Cq* cq);
  // EINVAL for a depth out of range or below the completions that wait in it.
  Status resize_cq(verbs::Cq* cq, uint32_t depth);
  Result<Qp*> create_qp(PdHandle pd, QpType type, verbs::Cq* send_cq, verbs::Cq* recv_cq,
                              const QpCap& cap, bool sq_sig_all, verbs::Srq* srq = nullptr);
  // QP1 (the GSI): a UD QP with the well-known number 1; EBUSY if the port has one already.
  Result<Qp*> create_gsi_qp(PdHandle pd, verbs::Cq* send_cq, verbs::Cq* recv_cq, const QpCap& cap);
  Result<verbs::Srq*> create_srq(PdHandle pd, uint32_t depth, uint32_t max_sge);
  // XRC (xrc.cpp): domains, their SRQs (numbered by handle, completing to their CQ), and
  // target QPs, which take each message's receive, PD and CQ from the XRC SRQ it names.
  // Initiator QPs are made by create_qp (QpType::XrcSend; their receive CQ is unused).
  Result<uint32_t> create_xrcd();
  Status destroy_xrcd(uint32_t xrcd);  // EBUSY while SRQs or QPs use it
  bool xrcd_busy(uint32_t xrcd) const;
  Result<verbs::Srq*> create_xrc_srq(PdHandle pd, uint32_t xrcd, verbs::Cq* cq, uint32_t depth, uint32_t max_sge);
  Result<Qp*> create_xrc_tgt(uint32_t xrcd);
  verbs::Srq* xrc_srq(uint32_t srqn, uint32_t xrcd) const;
  Status destroy_srq(verbs::Srq* srq);
  // Tag matching (tag_matching.cpp): an SRQ with a list of up to max_tags tagged buffers,
  // completing to cq; its list operations, done at once (EINVAL for another SRQ or a bad
  // operation, ENOMEM for an ADD to a full list; *bad: the first not done).
  Result<verbs::Srq*> create_tm_srq(PdHandle pd, verbs::Cq* cq, uint32_t depth, uint32_t max_sge, uint32_t max_tags,
                                    uint32_t max_ops);
  Status post_srq_ops(verbs::Srq& srq, std::span<TmOp> ops, size_t* bad = nullptr);
  // Arms the limit event (limit > 0) or disarms it (0).
  Status modify_srq(verbs::Srq& srq, uint32_t limit);
  // Oldest async event, or an EAGAIN error when there is none.
  Result<AsyncEvent> get_async_event();
  bool has_async_events() const { return !async_.empty(); }
  // True while children use it: destroying it would fail with EBUSY.
  bool pd_busy(PdHandle pd) const;
  bool cq_busy(verbs::Cq* cq) const;
  bool srq_busy(verbs::Srq* srq) const;
  Status modify_qp(Qp& qp, const QpAttr& attr, uint32_t mask);
  // This QP's reliability, instead of the device's (RC, in RESET or INIT: before it talks).
  Status set_reliability(Qp& qp, Reliability r);
  // This QP's congestion control, instead of the device's (RC; DCQCN also UC; in RESET or INIT).
  Status set_congestion_control(Qp& qp, cc::Algo a);
  // The QP's rate limit (packet pacing, RateLimit; kbps 0 lifts it), in any state; RESET
  // clears it. EINVAL for a rate outside min_rate_kbps..max_rate_kbps, too deep a burst, or a
  // QP that sends nothing.
  Status set_rate_limit(Qp& qp, const RateLimit& l);
  Status destroy_qp(Qp* qp);
  Qp* qp(Qpn qpn);
  // Multicast (IBA 10.5): a UD QP attached to a group receives every packet sent to it. Attach
  // returns true when the group is new here (the link must join it; attaching twice is no
  // error), detach true when its last QP left (the link leaves it); EINVAL for a QP that is
  // not UD, a GID that is no group, or a detach of a QP not attached; ENOMEM past the limits.
  Result<bool> attach_mcast(Qp& qp, const Gid& group);
  Result<bool> detach_mcast(Qp& qp, const Gid& group);
  std::vector<Gid> groups_of(const Qp& qp) const;
  // Flow rules (raw.cpp): frames from the interface that match go to a raw packet QP. EINVAL
  // for another QP type or a rule that names a layer without the one beneath it.
  Result<uint32_t> create_flow(Qp& qp, const FlowRule& rule);
  Status destroy_flow(Qp& qp, uint32_t handle);  // EINVAL unless qp's rule
  // Receive-side scaling (raw.cpp): work queues (receive queues with a CQ of their own, made
  // their state set by modify_wq; destroyed by destroy_srq) and RSS QPs, raw packet QPs that
  // spread the frames of their rules over a table of a PD's work queues by hash. The table's
  // size is a power of two; a work queue in a QP's table is busy.
  Result<verbs::Srq*> create_wq(PdHandle pd, verbs::Cq* cq, uint32_t depth, uint32_t max_sge);
  Status modify_wq(verbs::Srq& wq, WqState state);
  Result<Qp*> create_rss_qp(PdHandle pd, std::vector<verbs::Srq*> table, const RxHash& hash);
  void destroy_flows_of(Qp& qp) {
    UROCE_ASSERT_HELD(*this);
    flows_.remove_rules_of(&qp);
  }
  size_t flows_of(const Qp& qp) const {
    UROCE_ASSERT_HELD(*this);
    return flows_.rules_of(&qp);
  }
  void set_raw_frame_max(uint32_t bytes) {
    UROCE_ASSERT_HELD(*this);
    cfg_.raw_frame_max = bytes;
  }

  // ---- data path (application threads) ----
  // On error returns it and sets *bad to the index of the first rejected request.
  Status post_send(Qp& qp, std::span<const SendWr> wrs, size_t* bad = nullptr);
  Status post_recv(Qp& qp, std::span<const RecvWr> wrs, size_t* bad = nullptr);
  Status post_srq_recv(verbs::Srq& srq, std::span<const RecvWr> wrs, size_t* bad = nullptr);
  // Called after posting; the engine installs a waker to leave its idle sleep.
  void set_waker(std::function<void()> w) { waker_ = std::move(w); }
  bool has_doorbells() const { return doorbell_count_.load(std::memory_order_seq_cst) != 0; }

  // ---- engine side (engine lock held) ----
  // A received UDP payload (BTH .. ICRC) from flow `from` (its ICRC is checked here). `ip`
  // holds the IPv4 fields the ICRC covers; when the link could not see them (!ip.seen) the
  // sender's IP ID is solved for. Returns the fields the ICRC matched (for captures).
  // With `apart`, the packet's payload is there and udp_payload holds its other bytes (a link
  // that carries packets intact: ip.icrc_absent).
  wire::Ipv4Fields on_packet(std::span<const uint8_t> udp_payload, const wire::FlowAddr& from, uint64_t now,
                             wire::Ipv4Fields ip = {}, const wire::ApartPayload* apart = nullptr);
  // An Ethernet frame from the device's interface (whole, from its destination MAC): to the
  // raw packet QP whose flow rule it matches, if any.
  // True if a QP took it (completed a receive).
  bool on_frame(std::span<const uint8_t> frame);
  // Frames raw packet QPs sent, in order; the engine hands them to the interface and clears.
  std::vector<std::vector<uint8_t>>& frames_out() { return frames_out_; }
  void count_raw_dropped(uint64_t n) { ctr_.tx_raw_dropped += n; }  // frames the interface did not take
  // Rings doorbells, runs expired timers, lets QPs with work send. True if anything happened.
  bool progress(uint64_t now);
  // Builds a UD QP's posted datagrams now, their payloads copied from the application's memory
  // as it is at the post, as a NIC reads them at the doorbell (and rxe runs a UD requester in
  // the post): UCX's UD transport reuses a send buffer it considers acknowledged before the
  // send completes. The packets leave with the next pass's.
  void gather_datagrams(Qp& qp, uint64_t now);
  // Earliest timer deadline, or UINT64_MAX.
  uint64_t next_deadline();
  // Work for a pass now (QPs waiting only for the port rate are not: next_deadline has its time).
  bool has_work() const { return (!sched_.empty() && !sched_.port_closed(now_)) || !ack_list_.empty(); }
  // Packets to send, in order; the link sends them, then release_tx() takes the buffers back.
  std::span<PacketBuf* const> tx_queue() const { return tx_; }
  void release_tx() {
    UROCE_ASSERT_HELD(*this);
    for (PacketBuf* p : tx_) pool_.release(p);
    tx_.clear();
  }
  std::vector<verbs::Cq*>& cq_events() { return cq_events_; }
  uint64_t wcs_made() const { return wcs_made_; }  // completions ever pushed to a CQ
  // True once after new async events were queued: the engine then signals the async fd.
  bool take_async_signal() { return std::exchange(async_signal_, false); }

 private:
  friend class Context;  // the narrow view the requester, completer and responder get

  // ---- for the requester, completer and responder, through Context ----
  PacketBuf* alloc_tx();
  void emit(PacketBuf* p, size_t ib_len);  // appends the ICRC and queues the packet
  void push_wc(verbs::Cq* cq, const Wc& wc);
  void complete_send(Qp& qp, verbs::SendWqe& w, WcStatus st);
  void qp_to_error(Qp& qp, bool fatal = true);
  bool pop_recv(Qp& qp, verbs::RecvWqe& w, std::vector<Sge>& sges);
  // The same from a given queue (srq: the SRQ or work queue it belongs to, for its limit).
  bool pop_recv_from(verbs::WorkQueue<verbs::RecvWqe>& rq, verbs::Srq* srq, verbs::RecvWqe& w, std::vector<Sge>& sges);
  void raise(const AsyncEvent& e);
  void schedule(Qp& qp);             // put on the run list
  void arm_timer(Qp& qp, uint64_t deadline);
  void want_ack(Qp& qp);             // coalesced ACK at the end of this pass

  // A packet whose ICRC is good: decode and dispatch to its QP's responder or completer.
  void receive(std::span<const uint8_t> buf, const wire::FlowAddr& from, uint64_t now, const wire::Ipv4Fields& ip,
               const wire::ApartPayload* apart);
  // A decoded packet of `bytes` to its QP; a run of n (wire::ApartPayload) is taken whole by
  // the responder where that is the same as taking its packets one by one, else one by one.
  void dispatch(wire::Packet& p, const wire::FlowAddr& from, uint64_t now, const wire::Ipv4Fields& ip, size_t bytes,
                uint32_t n);
  void dispatch_each(wire::Packet& p, const wire::FlowAddr& from, uint64_t now, const wire::Ipv4Fields& ip,
                     size_t bytes, uint32_t n);
  void ring_doorbell(Qp& qp);
  void drain_doorbells();
  void run_timers(uint64_t now);
  bool flush_acks(Context& cx);  // the coalesced ACKs due; true if any were
  void flush(Qp& qp);
  void reset_qp(Qp& qp);
  // The QP's configured options, fresh: its sender congestion control (CoreConfig::cc: a rate
  // control and an idle pacer for RC/UC QPs under DCQCN, nothing otherwise) and its
  // reliability (CoreConfig::reliability, RC only), with nothing held or acknowledged selectively.
  Status check_rate_limit(const Qp& qp, const RateLimit& l) const;
  void start_qp_options(Qp& qp);
  // Checks a request against the QP; on success, its total length.
  Result<uint32_t> check_send_wr(const Qp& qp, const SendWr& wr) const;
  Result<Qp*> make_qp(PdHandle pd, QpType type, verbs::Cq* scq, verbs::Cq* rcq, const QpCap& cap, bool sig_all,
                            verbs::Srq* srq, std::optional<Qpn> qpn);
  Status post_recv_wrs(verbs::WorkQueue<verbs::RecvWqe>& rq, std::span<const RecvWr> wrs, size_t* bad);
  // An XRC SRQ goes: its domain, CQ and target QPs that hold it let go (xrc.cpp).
  void release_xrc_srq(verbs::Srq& srq);

  CoreConfig cfg_;
  DeviceLimits limits_;
  Counters ctr_;
  verbs::MrTable mrs_;
  std::map<PdHandle, uint32_t> pds_;  // handle -> users (MRs + QPs)
  uint32_t next_pd_ = 1;
  std::map<uint32_t, std::unique_ptr<verbs::Cq>> cqs_;
  std::map<verbs::Cq*, uint32_t> cq_users_;
  std::map<uint32_t, std::unique_ptr<verbs::Srq>> srqs_;
  std::map<verbs::Srq*, uint32_t> srq_users_;
  uint32_t next_srq_ = 1;
  std::map<uint32_t, uint32_t> xrcds_;  // XRC domain -> users (XRC SRQs, target QPs)
  uint32_t next_xrcd_ = 1;
  std::deque<AsyncEvent> async_;
  bool async_signal_ = false;
  uint32_t next_cq_ = 1;
  struct QpnHash {
    size_t operator()(Qpn q) const { return std::hash<uint32_t>()(q.value()); }
  };
  std::unordered_map<Qpn, std::unique_ptr<Qp>, QpnHash> qps_;  // owns them
  verbs::QpnIndex<Qp> qp_index_;  // looked up for every received packet and doorbell
  std::mt19937_64 qpn_rng_;  // QPNs are drawn at random: not guessable from the outside
  struct McastGroup {
    Gid gid;
    std::vector<Qp*> qps;  // attached, in the order they came
  };
  std::vector<McastGroup> mcast_;  // few: each is a socket of the link's
  const McastGroup* group_for(const Gid& gid) const;  // nullptr: no QP here joined it
  void receive_multicast(const McastGroup& group, std::span<const uint8_t> buf, const wire::FlowAddr& from,
                         const wire::Ipv4Fields& ip);

  std::function<void()> waker_;
  const CoreMutex* guard_ = nullptr;
  verbs::SpinLock doorbell_lock_;
  std::vector<Qpn> doorbells_;  // under doorbell_lock_
  std::atomic<uint32_t> doorbell_count_{0};
  std::vector<Qpn> doorbells_swap_;

  TxScheduler sched_;  // the run list: QPs with something to send, by priority
  std::vector<Qp*> ack_list_;
  using TimerEntry = std::pair<uint64_t, Qpn>;  // (deadline, qpn); stale entries skipped
  std::priority_queue<TimerEntry, std::vector<TimerEntry>, std::greater<>> timers_;

  wire::BufferPool pool_;
  std::vector<std::vector<uint8_t>> frames_out_;
  FlowTable flows_;
  std::vector<PacketBuf*> tx_;
  std::vector<verbs::Cq*> cq_events_;
  uint64_t wcs_made_ = 0;
  uint64_t now_ = 0;  // the time the last entry point with one gave: completions carry it
};

}  // namespace uroce::transport
