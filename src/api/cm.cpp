// ConnectionManager: the CM state machine (src/cm) on the device's QP1. A thread receives MADs
// and runs timers; calls from the consumer send at once. Its clock is the steady clock.
#include "uroce/cm.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "cm/ip_cm.hpp"
#include "cm/manager.hpp"
#include "link/steering.hpp"

namespace uroce {

namespace {
// QP1's queues, as deep as the kernel's MAD layer makes them (mad_recvq_size 512,
// mad_sendq_size 128): a burst of REQs from many connects must not find no receive posted.
constexpr uint32_t kRecvSlots = 512, kSendSlots = 128;
constexpr size_t kRecvSlot = kGrhBytes + cm::kMadBytes;
// MADs waiting for a free send slot, at most. Only connections' MADs wait (a REQ, REP, RTU, DREQ
// or DREP each, and their retransmissions); what a stranger's flood asks for is best-effort and
// never waits.
constexpr size_t kMaxWaiting = 4096;

uint64_t now_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch()).count());
}
}  // namespace

uint64_t ip_service_id(uint16_t port_space, uint16_t port) {
  return cm::ip_service_id(cm::PortSpace(port_space), port);
}

std::vector<uint8_t> ip_cm_private_data(const Gid& src, const Gid& dst, uint16_t src_port,
                                        std::span<const uint8_t> user) {
  static_assert(kIpCmHeaderBytes == cm::kIpCmHeaderBytes);
  std::vector<uint8_t> d(cm::kIpCmHeaderBytes);
  cm::write_ip_cm_header({0, uint8_t(src.ipv4() ? 4 : 6), src_port, src, dst}, d);
  d.insert(d.end(), user.begin(), user.end());
  return d;
}

std::optional<IpCmAddresses> read_ip_cm_private_data(std::span<const uint8_t> data) {
  auto h = cm::read_ip_cm_header(data);
  if (!h) return std::nullopt;
  return IpCmAddresses{h->src, h->dst, h->src_port};
}

const char* to_string(CmEventType t) {
  switch (t) {
    case CmEventType::ConnectRequest: return "connect request";
    case CmEventType::ConnectReply: return "connect reply";
    case CmEventType::Established: return "established";
    case CmEventType::Rejected: return "rejected";
    case CmEventType::Unreachable: return "unreachable";
    case CmEventType::Disconnected: return "disconnected";
    case CmEventType::DisconnectDone: return "disconnect done";
    case CmEventType::SidrRequest: return "SIDR request";
    case CmEventType::SidrReply: return "SIDR reply";
  }
  return "?";
}

namespace {

cm::ManagerConfig manager_config(const Device& d, const CmOptions& o) {
  cm::ManagerConfig c;
  c.ca_guid = d.query_device().node_guid;
  c.response_timeout = o.response_timeout;
  c.max_retries = o.max_retries;
  c.id_high = d.share_slot();  // a shared device's daemon passes MADs on by these bits
  c.id_high_bits = c.id_high ? link::steering::kSlotBits : 0;
  return c;
}

}  // namespace

struct ConnectionManager::Impl {
  Device& dev;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> cq;
  std::unique_ptr<QueuePair> qp;
  std::vector<uint8_t> mem;  // kRecvSlots receive slots, then kSendSlots send slots
  std::unique_ptr<MemoryRegion> mr;
  std::mutex mu;             // the manager, the send ring and the event queue
  cm::Manager mgr;
  uint32_t send_next = 0, send_free = kSendSlots;
  std::deque<cm::Outgoing> waiting;  // MADs for the send ring, in order, while it is full
  std::deque<CmEvent> events;
  size_t max_events;
  uint64_t requests_dropped = 0, sends_waited = 0, sends_dropped = 0;
  int evfd = -1;             // semaphore: one count per queued event
  std::atomic<bool> stop{false};
  std::thread thread;

  Impl(Device& d, CmOptions o)
      : dev(d), mgr(manager_config(d, o)),
        max_events(o.max_events) {}

  uint8_t* recv_slot(uint32_t i) { return mem.data() + size_t(i) * kRecvSlot; }
  uint8_t* send_slot(uint32_t i) { return mem.data() + size_t(kRecvSlots) * kRecvSlot + size_t(i) * cm::kMadBytes; }

  Status post_recv(uint32_t i) {
    Sge s{uint64_t(recv_slot(i)), uint32_t(kRecvSlot), mr->lkey()};
    return qp->post_recv({i, {&s, 1}});
  }

  void send(const cm::Outgoing& o) {
    uint32_t i = send_next++ % kSendSlots;
    --send_free;
    std::memcpy(send_slot(i), o.mad.data(), o.mad.size());
    Sge s{uint64_t(send_slot(i)), uint32_t(cm::kMadBytes), mr->lkey()};
    Ah ah{o.to};
    ah.sgid_index = dev.gid_index_for(o.to);
    SendWr w{uint64_t(1) << 32 | i, WrOpcode::Send, kSendSignaled, {&s, 1}};
    w.ah = &ah;
    w.remote_qpn = cm::kGsiQpn;
    w.remote_qkey = cm::kGsiQkey;
    if (!qp->post_send(w)) {
      ++send_free;
      ++sends_dropped;
    }
  }

  // Hands the manager's events to the consumer and sends what it queued (mu held). Past
  // max_events a request is not queued: a REQ is forgotten (the peer sends it again, as to a
  // kernel whose rdma_cm backlog is full) and a SIDR_REQ refused. While the send ring is full,
  // MADs wait in order; a best-effort one (a refusal a stranger can ask for) is sent only into
  // a free slot with nothing waiting, so that a flood of them cannot crowd out a connection's.
  void flush() {
    for (auto& e : mgr.take_events()) {
      bool request = e.type == cm::EventType::ReqReceived || e.type == cm::EventType::SidrReqReceived;
      if (request && events.size() >= max_events) {
        ++requests_dropped;
        if (e.type == cm::EventType::ReqReceived) {
          mgr.forget(e.id);
        } else {
          cm::SidrRep rej;
          rej.status = cm::SidrStatus::Rejected;
          rej.service_id = e.sidr_req->service_id;
          (void)mgr.sidr_reply(e.id, e.peer, std::move(rej));
        }
        continue;
      }
      events.push_back(convert(e));
      uint64_t one = 1;
      (void)!write(evfd, &one, sizeof one);
    }
    while (send_free && !waiting.empty()) {
      send(waiting.front());
      waiting.pop_front();
    }
    for (auto& o : mgr.take_outgoing()) {
      if (send_free && waiting.empty()) {
        send(o);
      } else if (!o.best_effort && waiting.size() < kMaxWaiting) {
        waiting.push_back(std::move(o));
        ++sends_waited;
      } else {
        ++sends_dropped;  // the CM's retransmission, or the peer's, sends it again
      }
    }
  }

  // Runs f(manager, now) under the lock and sends what it queued.
  template <class F>
  auto call(F f) {
    std::lock_guard g(mu);
    auto r = f(mgr, now_ns());
    flush();
    return r;
  }

  static CmEvent convert(const cm::Event& e);
  void run();
};

CmEvent ConnectionManager::Impl::convert(const cm::Event& e) {
  CmEvent c;
  c.id = e.id;
  c.listener = e.listener;
  c.peer = e.peer;
  c.private_data = e.private_data;
  switch (e.type) {
    case cm::EventType::ReqReceived: {
      const cm::Req& r = *e.req;
      c.type = CmEventType::ConnectRequest;
      c.local = r.remote_gid;
      c.service_id = r.service_id;
      c.qp_type = r.transport == cm::TransportType::UC ? QpType::UC : QpType::RC;
      c.remote_qpn = r.local_qpn;
      c.sq_psn = r.starting_psn;
      c.mtu = Mtu(std::clamp<uint8_t>(r.path_mtu, 1, 5));
      c.traffic_class = r.traffic_class;
      c.responder_resources = r.responder_resources;
      c.initiator_depth = r.initiator_depth;
      c.retry_count = r.retry_count;
      c.rnr_retry_count = r.rnr_retry_count;
      c.srq = r.srq;
      c.private_data = r.private_data;
      c.ece_vendor_id = r.vendor_id;
      c.ece_options = r.ece_options;
      break;
    }
    case cm::EventType::RepReceived: {
      const cm::Rep& r = *e.rep;
      c.type = CmEventType::ConnectReply;
      c.ece_vendor_id = r.vendor_id;
      c.ece_options = r.ece_options;
      c.remote_qpn = r.local_qpn;
      c.sq_psn = r.starting_psn;
      c.responder_resources = r.responder_resources;
      c.initiator_depth = r.initiator_depth;
      c.rnr_retry_count = r.rnr_retry_count;
      c.srq = r.srq;
      c.private_data = r.private_data;
      break;
    }
    case cm::EventType::Established: c.type = CmEventType::Established; break;
    case cm::EventType::Rejected:
      c.type = CmEventType::Rejected;
      c.reject_reason = e.rej->reason;
      c.private_data = e.rej->private_data;
      break;
    case cm::EventType::Unreachable: c.type = CmEventType::Unreachable; break;
    case cm::EventType::DreqReceived: c.type = CmEventType::Disconnected; break;
    case cm::EventType::Disconnected: c.type = CmEventType::DisconnectDone; break;
    case cm::EventType::SidrReqReceived:
      c.type = CmEventType::SidrRequest;
      c.service_id = e.sidr_req->service_id;
      c.private_data = e.sidr_req->private_data;
      break;
    case cm::EventType::SidrRepReceived:
      c.type = CmEventType::SidrReply;
      c.service_id = e.sidr_rep->service_id;
      c.remote_qpn = e.sidr_rep->qpn;
      c.qkey = e.sidr_rep->qkey;
      c.sidr_status = uint8_t(e.sidr_rep->status);
      c.private_data = e.sidr_rep->private_data;
      break;
  }
  return c;
}

// Receives MADs and runs the retransmission timers; it sleeps on the CQ until the next timer
// (at most 100 ms, so that closing does not wait long).
void ConnectionManager::Impl::run() {
  while (!stop.load()) {
    int timeout_ms = 100;
    {
      std::lock_guard g(mu);
      uint64_t d = mgr.next_deadline(), n = now_ns();
      if (d != UINT64_MAX) timeout_ms = int(std::min<uint64_t>(100, d > n ? (d - n) / 1'000'000 + 1 : 0));
    }
    Wc wc[64];
    auto r = cq->wait(wc, timeout_ms);
    std::lock_guard g(mu);
    for (int k = 0; r && k < *r; ++k) {
      if (wc[k].wr_id >> 32) {  // a send slot is free again
        ++send_free;
        continue;
      }
      auto i = uint32_t(wc[k].wr_id);
      if (wc[k].status == WcStatus::Success && wc[k].byte_len == kRecvSlot) {
        Ah from = Ah::from_grh(recv_slot(i));
        mgr.on_mad(std::span<const uint8_t>(recv_slot(i) + kGrhBytes, cm::kMadBytes), from.dgid, now_ns());
      }
      if (wc[k].status != WcStatus::WrFlushErr) (void)post_recv(i);
    }
    mgr.on_timer(now_ns());
    flush();
  }
}

Result<std::unique_ptr<ConnectionManager>> ConnectionManager::open(Device& dev, CmOptions opts) {
  auto impl = std::make_unique<Impl>(dev, opts);
  Impl& m = *impl;
  auto pd = dev.alloc_pd();
  if (!pd) return pd.error();
  m.pd = std::move(*pd);
  auto cq = dev.create_cq(2 * (kRecvSlots + kSendSlots));
  if (!cq) return cq.error();
  m.cq = std::move(*cq);
  QpInit init{QpType::UD, m.cq.get(), m.cq.get(), QpCap{kSendSlots, kRecvSlots, 1, 1, 0}, false};
  init.gsi = true;
  auto qp = m.pd->create_qp(init);
  if (!qp) return qp.error();
  m.qp = std::move(*qp);
  if (Status s = m.qp->activate_ud(cm::kGsiQkey); !s) return s.error();
  m.mem.assign(size_t(kRecvSlots) * kRecvSlot + size_t(kSendSlots) * cm::kMadBytes, 0);
  auto mr = m.pd->reg_mr(m.mem.data(), m.mem.size(), kAccessLocalWrite);
  if (!mr) return mr.error();
  m.mr = std::move(*mr);
  for (uint32_t i = 0; i < kRecvSlots; ++i)
    if (Status s = m.post_recv(i); !s) return s.error();
  m.evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE);
  if (m.evfd < 0) return make_error(errno, "cm: eventfd failed");
  m.thread = std::thread([&m] { m.run(); });
  return std::unique_ptr<ConnectionManager>(new ConnectionManager(std::move(impl)));
}

ConnectionManager::ConnectionManager(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ConnectionManager::~ConnectionManager() {
  impl_->stop = true;
  impl_->thread.join();
  close(impl_->evfd);
}

int ConnectionManager::fd() const { return impl_->evfd; }

std::optional<CmEvent> ConnectionManager::poll() {
  std::lock_guard g(impl_->mu);
  if (impl_->events.empty()) return std::nullopt;
  uint64_t v;
  (void)!read(impl_->evfd, &v, sizeof v);
  CmEvent e = std::move(impl_->events.front());
  impl_->events.pop_front();
  return e;
}

Result<CmEvent> ConnectionManager::wait(int timeout_ms) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
  for (;;) {
    if (auto e = poll()) return *e;
    if (timeout_ms >= 0 && std::chrono::steady_clock::now() >= end) return make_error(ETIMEDOUT, "cm: no event");
    pollfd p{impl_->evfd, POLLIN, 0};
    (void)::poll(&p, 1, timeout_ms < 0 ? 100 : std::max(1, int(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                                end - std::chrono::steady_clock::now()).count())));
  }
}

Status ConnectionManager::listen(uint64_t service_id, uint64_t cookie) {
  std::lock_guard g(impl_->mu);
  if (Status s = impl_->mgr.listen(service_id, cookie); !s) return s;
  if (Status s = impl_->dev.claim_service(service_id); !s) {  // another process of the host has it
    impl_->mgr.unlisten(service_id);
    return s;
  }
  return {};
}

void ConnectionManager::unlisten(uint64_t service_id) {
  std::lock_guard g(impl_->mu);
  impl_->mgr.unlisten(service_id);
  impl_->dev.release_service(service_id);
}

Result<uint32_t> ConnectionManager::connect(const CmConnectParams& p) {
  if (p.type != QpType::RC && p.type != QpType::UC) return make_error(EINVAL, "cm: connect RC or UC QPs");
  auto local = impl_->dev.query_gid(p.sgid_index.value_or(impl_->dev.gid_index_for(p.peer)));
  if (!local) return local.error();
  cm::Req r;
  r.service_id = p.service_id;
  r.local_qpn = p.qpn;
  r.starting_psn = p.rq_psn & 0xffffff;
  r.transport = p.type == QpType::UC ? cm::TransportType::UC : cm::TransportType::RC;
  r.responder_resources = p.responder_resources;
  r.initiator_depth = p.initiator_depth;
  r.retry_count = p.retry_count;
  r.rnr_retry_count = p.rnr_retry_count;
  r.path_mtu = uint8_t(p.mtu);
  r.srq = p.srq;
  r.local_gid = *local;
  r.remote_gid = p.peer;
  r.hop_limit = p.hop_limit;
  r.traffic_class = p.traffic_class;
  r.flow_label = p.flow_label;
  r.local_ack_timeout = 14;
  r.private_data = p.private_data;
  r.vendor_id = p.ece_vendor_id & 0xffffff;
  r.ece_options = p.ece_options;
  return impl_->call([&](cm::Manager& m, uint64_t now) { return m.connect(p.peer, std::move(r), now); });
}

Status ConnectionManager::accept(uint32_t id, const CmAcceptParams& p) {
  cm::Rep r;
  r.local_qpn = p.qpn;
  r.starting_psn = p.rq_psn & 0xffffff;
  r.responder_resources = p.responder_resources;
  r.initiator_depth = p.initiator_depth;
  r.rnr_retry_count = p.rnr_retry_count;
  r.srq = p.srq;
  r.target_ack_delay = 15;
  r.private_data = p.private_data;
  r.vendor_id = p.ece_vendor_id & 0xffffff;
  r.ece_options = p.ece_options;
  return impl_->call([&](cm::Manager& m, uint64_t now) { return m.accept(id, std::move(r), now); });
}

Status ConnectionManager::reject(uint32_t id, uint16_t reason, std::vector<uint8_t> private_data) {
  return impl_->call([&](cm::Manager& m, uint64_t now) { return m.reject(id, reason, std::move(private_data), now); });
}

Status ConnectionManager::establish(uint32_t id, std::vector<uint8_t> private_data) {
  return impl_->call([&](cm::Manager& m, uint64_t now) { return m.establish(id, std::move(private_data), now); });
}

Status ConnectionManager::disconnect(uint32_t id, std::vector<uint8_t> private_data) {
  return impl_->call([&](cm::Manager& m, uint64_t now) { return m.disconnect(id, std::move(private_data), now); });
}

void ConnectionManager::forget(uint32_t id) {
  std::lock_guard g(impl_->mu);
  impl_->mgr.forget(id);
}

Result<uint32_t> ConnectionManager::sidr_request(const Gid& peer, uint8_t, uint64_t service_id,
                                                 std::vector<uint8_t> private_data) {
  cm::SidrReq r;
  r.service_id = service_id;
  r.private_data = std::move(private_data);
  return impl_->call([&](cm::Manager& m, uint64_t now) { return m.sidr_request(peer, std::move(r), now); });
}

Status ConnectionManager::sidr_reply(uint32_t id, const Gid& peer, uint32_t qpn, uint32_t qkey, uint8_t status,
                                     std::vector<uint8_t> private_data) {
  cm::SidrRep r;
  r.qpn = qpn;
  r.qkey = qkey;
  r.status = cm::SidrStatus(status);
  r.private_data = std::move(private_data);
  return impl_->call([&](cm::Manager& m, uint64_t) { return m.sidr_reply(id, peer, std::move(r)); });
}

std::map<std::string, uint64_t> ConnectionManager::counters() const {
  std::lock_guard g(impl_->mu);
  const cm::CmCounters& c = impl_->mgr.counters();
  return {{"mads_in", c.mads_in},           {"mads_out", c.mads_out},
          {"mads_dropped", c.dropped},      {"retransmits", c.retransmits},
          {"duplicates", c.duplicates},     {"requests_refused", c.refused},
          {"requests_dropped", impl_->requests_dropped},
          {"sends_waited", impl_->sends_waited}, {"sends_dropped", impl_->sends_dropped}};
}

}  // namespace uroce
