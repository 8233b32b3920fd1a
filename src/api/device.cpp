#include <arpa/inet.h>
#include <sys/eventfd.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "api/config.hpp"
#include "api/device_stack.hpp"
#include "engine/clock.hpp"
#include "link/iface.hpp"
#include "link/steering.hpp"
#include "api/holds.hpp"
#include "verbs/region_access.hpp"
#include "transport/bringup.hpp"
#include "wire/mtu.hpp"
#include "uroce/uroce.hpp"

namespace uroce {

using detail::DeviceStack;

// ---------------------------------------------------------------- Device

Result<std::unique_ptr<Device>> Device::open(const std::string& wanted, DeviceOptions opts) {
  auto placed = detail::place_device(wanted, opts);
  if (!placed) return placed.error();
  const std::string& name = *placed;
  auto settings = detail::device_settings(opts);
  if (!settings) return settings.error();
  detail::DeviceSettings& d = *settings;
  Result<std::unique_ptr<link::UdpLink>> link = make_error(0, "");
  uint32_t slot = 0;
  if (d.shared) {
    auto lease = link::HostNicLease::attach(d.addr);
    if (!lease) return make_error(lease.error().code, name + " at " + d.addr.to_string() + ": " + lease.error().message);
    slot = (*lease)->slot();
    link = link::UdpLink::open_shared(std::move(*lease), d.pcap, d.rx, d.gso);
  } else {
    link = link::UdpLink::open(d.addr, d.pcap, d.rx, d.gso);
  }
  if (!link) return link.error();
  auto stack = std::make_shared<DeviceStack>();
  stack->name = name;
  stack->link = std::move(*link);
  transport::CoreConfig cfg = std::move(d.core);
  cfg.gids = stack->link->gids();
  cfg.port_mtu = wire::active_mtu_for(stack->link->ip_mtu());
  link::UdpLink* l = stack->link.get();
  cfg.src_port_for = [l](uint32_t qpn) { return l->src_port_for(qpn); };
  cfg.link_gathers = true;  // both links send payloads from where they lie
  cfg.qpn_high = slot;
  cfg.qpn_high_bits = slot ? link::steering::kSlotBits : 0;
  if (link::HostNicLease* lease = stack->link->lease()) {  // the host NIC's one port
    auto* port = static_cast<transport::SharedPort*>(lease->port_page());
    if (port && lease->port_page_bytes() >= sizeof(transport::SharedPort) &&
        port->magic == transport::SharedPort::kMagic && port->procs == transport::SharedPort::kProcs) {
      cfg.shared_port = port;
      cfg.shared_port_slot = slot;
    }
  }
  // Same-host rings: between the processes sharing a host NIC too, named by address and slot.
  if (d.same_host_shm) {
    stack->shm = std::make_unique<link::SameHostLink>(*stack->link, stack->link->pcap(), slot);
    if (!stack->shm->status()) return stack->shm->status().error();
    link::SameHostLink* h = stack->shm.get();
    cfg.carried_intact = [h](const Gid& dst, uint32_t dest_qpn) { return h->carries(dst, dest_qpn); };
    cfg.held_moved_at = [h](const Gid& dst, uint32_t qpn, uint64_t now) { return h->held_moved_at(dst, qpn, now); };
    cfg.intact_window_pkts = link::shm::kSlots;
  }
  stack->pc = std::make_unique<transport::ProtocolCore>(std::move(cfg));
  if (link::HostNicLease* lease = stack->link->lease())  // asked in the engine's pass, under its lock
    lease->reporter = [s = stack.get()] { return detail::status_records(*s); };
  stack->engine = std::make_unique<engine::Engine>(*stack->pc, stack->active_link(), d.spin_ns);
  if (!stack->engine->status()) return stack->engine->status().error();
  stack->engine->set_rx_loss(d.rx_loss, d.rx_loss_seed);
  stack->engine->start(d.progress_thread);
  return std::unique_ptr<Device>(new Device(std::move(stack)));
}

Device::~Device() = default;

const std::string& Device::name() const { return stack_->name; }
uint32_t Device::ipv4() const { return stack_->link->local_ip(); }

uint32_t Device::share_slot() const {
  const link::HostNicLease* l = stack_->link->lease();
  return l ? l->slot() : 0;
}

Status Device::claim_service(uint64_t service_id) {
  link::HostNicLease* l = stack_->link->lease();
  return l ? l->listen(service_id) : Status{};
}

void Device::release_service(uint64_t service_id) {
  if (link::HostNicLease* l = stack_->link->lease()) l->unlisten(service_id);
}

DeviceAttr Device::query_device() const {
  const auto& l = stack_->pc->limits();
  DeviceAttr a;
  a.name = stack_->name;
  a.node_guid = stack_->link->node_guid();
  a.max_ah = kMaxAh;
  a.max_mr_size = l.max_msg;
  a.max_qp = l.max_qp;
  a.max_qp_wr = l.max_qp_wr;
  a.max_sge = l.max_sge;
  a.max_cq = 1 << 16;
  a.max_cqe = l.max_cqe;
  a.max_mr = l.max_mr;
  a.max_pd = l.max_pd;
  a.max_qp_rd_atom = l.max_rd_atomic;
  a.max_qp_init_rd_atom = l.max_rd_atomic;
  a.max_inline_data = l.max_inline;
  a.max_mcast_grp = l.max_mcast_grp;
  a.max_mcast_qp_attach = l.max_mcast_qp_attach;
  a.max_total_mcast_qp_attach = l.max_total_mcast_qp_attach;
  a.atomic_supported = true;
  a.max_dm_size = detail::kMaxDmBytes;
  a.odp = verbs::odp_available();
  a.max_tm_tags = l.max_tm_tags;
  a.max_tm_ops = l.max_tm_ops;
  a.max_rndv_hdr = l.max_rndv_hdr;
  a.min_rate_kbps = l.min_rate_kbps;
  a.max_rate_kbps = l.max_rate_kbps;
  return a;
}

uint64_t Device::clock_ns() const { return engine::monotonic_ns(); }

PortAttr Device::query_port() const {
  const auto& cfg = stack_->pc->config();
  return PortAttr{true, Mtu::Mtu4096, cfg.port_mtu, uint32_t(cfg.gids.size()), "Ethernet"};
}

uint8_t Device::gid_index_for(const Gid& peer) const { return stack_->pc->sgid_index_for(peer); }

Result<Gid> Device::query_gid(int index) const {
  const auto& gids = stack_->pc->config().gids;
  if (index < 0 || size_t(index) >= gids.size())
    return make_error(EINVAL, "query_gid: the GID table has " + std::to_string(gids.size()) + " entries");
  return gids[size_t(index)];
}

std::map<std::string, uint64_t> Device::counters() const {
  std::map<std::string, uint64_t> m;
  auto g = stack_->lock();
  stack_->pc->counters().for_each([&](const char* n, uint64_t v) { m[n] = v; });
  m["rx_injected_loss"] = stack_->engine->rx_lost();
  if (stack_->shm) {
    link::ShmStats s = stack_->shm->stats();
    m["shm_channels"] = s.channels;
    m["shm_tx_packets"] = s.tx_packets;
    m["shm_rx_packets"] = s.rx_packets;
    m["shm_tx_full_drops"] = s.tx_full_drops;
    m["shm_tx_placed"] = s.tx_placed;
    m["shm_rx_placed"] = s.rx_placed;
    m["shm_rx_placed_refused"] = s.rx_placed_refused;
    m["shm_tx_runs"] = s.tx_runs;
    m["shm_tx_split"] = s.tx_split;
    m["shm_rx_split"] = s.rx_split;
    m["shm_rx_split_runs"] = s.rx_split_runs;
    m["shm_rx_runs"] = s.rx_runs;
    m["shm_rx_malformed"] = s.rx_malformed;
    m["shm_names_taken"] = s.names_taken;
    m["shm_offers_refused"] = s.offers_refused;
  }
  stack_->link->for_each_counter([&](const char* n, uint64_t v) { m[n] = v; });
  return m;
}

void Device::flush(int timeout_ms) { stack_->engine->flush(uint64_t(timeout_ms) * 1'000'000); }

int Device::async_fd() const { return stack_->engine->async_fd(); }

Result<AsyncEvent> Device::get_async_event() {
  auto g = stack_->lock();
  auto e = stack_->pc->get_async_event();
  if (!stack_->pc->has_async_events()) {
    // The fd is readable exactly while events wait; the engine raises and signals under the
    // lock we hold, so no signal is lost.
    uint64_t v;
    (void)!read(stack_->engine->async_fd(), &v, sizeof v);
  }
  return e;
}

Result<std::unique_ptr<ProtectionDomain>> Device::alloc_pd() {
  auto g = stack_->lock();
  auto pd = stack_->pc->alloc_pd();
  if (!pd) return pd.error();
  std::unique_ptr<ProtectionDomain> p(new ProtectionDomain);
  p->h_ = std::make_shared<detail::PdHold>(stack_, *pd);
  return p;
}

Result<std::unique_ptr<CompletionQueue>> Device::create_cq(uint32_t depth) {
  int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (efd < 0) return make_error(errno, std::string("create_cq: eventfd: ") + std::strerror(errno));
  auto g = stack_->lock();
  auto cq = stack_->pc->create_cq(depth);
  if (!cq) {
    close(efd);
    return cq.error();
  }
  (*cq)->event_fd = efd;
  std::unique_ptr<CompletionQueue> c(new CompletionQueue);
  c->h_ = std::make_shared<detail::CqHold>(stack_, *cq, efd);
  return c;
}

// ---------------------------------------------------------------- ProtectionDomain

ProtectionDomain::~ProtectionDomain() = default;

bool ProtectionDomain::busy() const {
  auto g = h_->stack->lock();
  return h_->stack->pc->pd_busy(h_->pd);
}

Result<std::unique_ptr<QueuePair>> ProtectionDomain::create_qp(const QpInit& init) {
  if (init.type == QpType::XrcSend && init.send_cq && !init.recv_cq) {  // it receives nothing
    QpInit i = init;
    i.recv_cq = init.send_cq;
    return create_qp(i);
  }
  if (!init.send_cq || !init.recv_cq) return make_error(EINVAL, "create_qp: send_cq and recv_cq are required");
  auto& stack = h_->stack;
  auto g = stack->lock();
  if (init.gsi && (init.type != QpType::UD || init.srq))
    return make_error(EINVAL, "create_qp: the GSI QP is a UD QP with its own receive queue");
  auto qp = init.gsi ? stack->pc->create_gsi_qp(h_->pd, init.send_cq->h_->cq, init.recv_cq->h_->cq, init.cap)
                     : stack->pc->create_qp(h_->pd, init.type, init.send_cq->h_->cq, init.recv_cq->h_->cq, init.cap,
                                            init.sq_sig_all, init.srq ? init.srq->h_->srq : nullptr);
  if (!qp) return qp.error();
  if (init.type == QpType::RawPacket)  // its frames need the interface: where the process may
    if (Status s = detail::hold_raw_port(*stack, *qp); !s) return s.error();
  std::unique_ptr<QueuePair> q(new QueuePair);
  q->stack_ = stack;
  q->pd_ = h_;
  q->send_cq_ = init.send_cq->h_;
  q->recv_cq_ = init.recv_cq->h_;
  if (init.srq) q->srq_ = init.srq->h_;
  q->qp_ = *qp;
  return q;
}

Result<std::unique_ptr<SharedReceiveQueue>> ProtectionDomain::create_srq(uint32_t max_wr, uint32_t max_sge,
                                                                         uint32_t limit) {
  auto g = h_->stack->lock();
  return wrap_srq(h_->stack->pc->create_srq(h_->pd, max_wr, max_sge), limit);
}

Result<std::unique_ptr<SharedReceiveQueue>> ProtectionDomain::wrap_srq(Result<verbs::Srq*> srq, uint32_t limit) {
  auto& stack = h_->stack;
  if (!srq) return srq.error();
  if (Status s = stack->pc->modify_srq(**srq, limit); !s) {
    (void)stack->pc->destroy_srq(*srq);
    return s.error();
  }
  std::unique_ptr<SharedReceiveQueue> q(new SharedReceiveQueue);
  q->h_ = std::make_shared<detail::SrqHold>(stack, h_, *srq);
  return q;
}

// ---------------------------------------------------------------- SharedReceiveQueue

SharedReceiveQueue::~SharedReceiveQueue() = default;

uint32_t SharedReceiveQueue::handle() const { return h_->srq->handle(); }
uint32_t SharedReceiveQueue::posted() const { return h_->srq->posted(); }
uint32_t SharedReceiveQueue::capacity() const { return h_->srq->rq.capacity(); }
uint32_t SharedReceiveQueue::max_sge() const { return h_->srq->rq.max_sge(); }
uint32_t SharedReceiveQueue::limit() const { return h_->srq->limit.load(); }

bool SharedReceiveQueue::busy() const {
  auto g = h_->stack->lock();
  return h_->stack->pc->srq_busy(h_->srq);
}

Status SharedReceiveQueue::post_recv(std::span<const RecvWr> wrs, size_t* bad) {
  return h_->stack->pc->post_srq_recv(*h_->srq, wrs, bad);
}

Status SharedReceiveQueue::arm_limit(uint32_t limit) {
  auto g = h_->stack->lock();
  return h_->stack->pc->modify_srq(*h_->srq, limit);
}

// ---------------------------------------------------------------- CompletionQueue

CompletionQueue::~CompletionQueue() = default;

int CompletionQueue::fd() const { return h_->event_fd; }

int CompletionQueue::poll(std::span<Wc> out) {
  h_->stack->engine->send_gathered();
  if (int n = h_->cq->poll(out)) return n;
  h_->stack->engine->polled_empty();  // receive on this thread, then look again
  return h_->cq->poll(out);
}

Status CompletionQueue::req_notify(bool solicited_only) {
  h_->cq->arm(solicited_only ? verbs::CqArm::Solicited : verbs::CqArm::Next);
  h_->stack->engine->cq_armed();
  return {};
}

uint32_t CompletionQueue::capacity() const { return h_->cq->capacity(); }

Status CompletionQueue::resize(uint32_t depth) {
  auto g = h_->stack->lock();
  return h_->stack->pc->resize_cq(h_->cq, depth);
}
bool CompletionQueue::overrun() const { return h_->cq->overrun(); }

bool CompletionQueue::busy() const {
  auto g = h_->stack->lock();
  return h_->stack->pc->cq_busy(h_->cq);
}

Result<int> CompletionQueue::wait(std::span<Wc> out, int timeout_ms) {
  if (!h_->stack->engine->threaded()) {  // nobody else would make progress: poll until then
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      if (int n = poll(out); n || (timeout_ms >= 0 && std::chrono::steady_clock::now() >= end)) return n;
    }
  }
  for (;;) {
    int n = poll(out);
    if (n) return n;
    (void)req_notify(false);
    n = poll(out);  // a completion that raced with arming
    if (n) return n;
    pollfd p{fd(), POLLIN, 0};
    int r = ::poll(&p, 1, timeout_ms);
    if (r < 0 && errno != EINTR) return make_error(errno, std::string("wait: ") + std::strerror(errno));
    uint64_t v;
    (void)!read(fd(), &v, sizeof v);
    if (r == 0) return poll(out);
  }
}

// ---------------------------------------------------------------- QueuePair

// The transport's QP behind the public object's verbs QP.
static transport::Qp& tq(verbs::Qp* q) { return transport::of(*q); }

QueuePair::~QueuePair() {
  auto g = stack_->lock();
  for (const Gid& group : stack_->pc->groups_of(tq(qp_)))  // a group whose last member goes is left
    if (auto last = stack_->pc->detach_mcast(tq(qp_), group); last && *last) stack_->link->leave_group(group);
  stack_->pc->destroy_flows_of(tq(qp_));
  const bool raw = qp_->type() == QpType::RawPacket;
  (void)stack_->pc->destroy_qp(&tq(qp_));
  if (raw) detail::release_raw_port(*stack_);
}

Status QueuePair::attach_mcast(const Gid& gid) {
  auto g = stack_->lock();
  auto first = stack_->pc->attach_mcast(tq(qp_), gid);
  if (!first) return first.error();
  if (!*first) return {};
  Status joined = stack_->link->join_group(gid);
  if (!joined) (void)stack_->pc->detach_mcast(tq(qp_), gid);
  return joined;
}

size_t QueuePair::mcast_groups() const {
  auto g = stack_->lock();
  return stack_->pc->groups_of(tq(qp_)).size();
}

Status QueuePair::detach_mcast(const Gid& gid) {
  auto g = stack_->lock();
  auto last = stack_->pc->detach_mcast(tq(qp_), gid);
  if (!last) return last.error();
  if (*last) stack_->link->leave_group(gid);
  return {};
}

uint32_t QueuePair::qp_num() const { return qp_->qpn().value(); }
QpState QueuePair::state() const { return qp_->state(); }

QpAttr QueuePair::query() const {
  auto g = stack_->lock();
  QpAttr a = qp_->attr();
  a.qp_state = a.cur_qp_state = state();
  return a;
}

// Once a connected QP has its peer's address (RTR): a peer on this host gets its shared-memory
// channel now, and posts on the QP then run the device inline (engine lock held). The peer's
// answer is waited for with the lock released (a stopped process never answers, and the
// device's other traffic must not wait for it); a QP whose peer is slower than that starts
// on UDP.
static void note_peer(detail::DeviceStack& c, transport::Qp& qp, detail::ControlLock& g) {
  bool shm = false;
  if (c.shm && qp.type() != QpType::UD) {
    const Gid dst = qp.attr().dgid;
    const uint32_t dqp = qp.attr().dest_qp_num;
    shm = c.shm->attach_peer(dst, engine::monotonic_ns(), dqp);
    if (!shm) {  // a handshake may be under way: the peer has a second to answer
      g.unlock();
      c.shm->wait_handshake(dst, 2000, dqp);
      g = c.lock();
      shm = c.shm->attach_peer(dst, engine::monotonic_ns(), dqp);
    }
  }
  qp.same_host.store(shm, std::memory_order_relaxed);
}

Status QueuePair::modify(const QpAttr& attr, uint32_t mask) {
  auto g = stack_->lock();
  Status s = stack_->pc->modify_qp(tq(qp_), attr, mask);
  if (s && (mask & kQpAv)) note_peer(*stack_, tq(qp_), g);
  return s;
}

Status QueuePair::connect(const Endpoint& remote, uint32_t local_psn, const ConnectOptions& o) {
  auto g = stack_->lock();
  Status s = transport::connect_rc(*stack_->pc, tq(qp_), remote, local_psn, o);
  if (s) note_peer(*stack_, tq(qp_), g);
  return s;
}

Status QueuePair::set_reliability(Reliability r) {
  auto g = stack_->lock();
  return stack_->pc->set_reliability(tq(qp_), r);
}

Status QueuePair::set_congestion_control(CongestionControl c) {
  auto g = stack_->lock();
  return stack_->pc->set_congestion_control(tq(qp_), c);
}

Status QueuePair::set_rate_limit(const RateLimit& l) {
  auto g = stack_->lock();
  return stack_->pc->set_rate_limit(tq(qp_), l);
}

CongestionControl QueuePair::congestion_control() const {
  auto g = stack_->lock();
  if (!tq(qp_).rate) return CongestionControl::None;
  return tq(qp_).cc_choice.value_or(stack_->pc->config().cc);
}

bool QueuePair::selective_repeat() const {
  auto g = stack_->lock();
  return tq(qp_).req.sr;
}

Status QueuePair::activate_ud(uint32_t qkey, uint32_t sq_psn) {
  auto g = stack_->lock();
  return transport::activate_ud(*stack_->pc, tq(qp_), qkey, sq_psn);
}

Status QueuePair::post_send(std::span<const SendWr> wrs, size_t* bad) {
  engine::Engine& e = *stack_->engine;
  Status s;
  {
    engine::Engine::PostScope scope(e);
    s = stack_->pc->post_send(tq(qp_), wrs, bad);
  }
  // A datagram's payload is read before the post returns (inline ones were copied already).
  transport::Qp& q = tq(qp_);
  if (q.type() == QpType::UD &&
      std::any_of(wrs.begin(), wrs.end(), [](const SendWr& w) { return !(w.send_flags & kSendInline); })) {
    e.gather_datagrams(q);
  }
  e.after_post(q.same_host.load(std::memory_order_relaxed));
  return s;
}

Status QueuePair::post_recv(std::span<const RecvWr> wrs, size_t* bad) {
  return stack_->pc->post_recv(tq(qp_), wrs, bad);
}

}  // namespace uroce
