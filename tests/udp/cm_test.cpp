// The communication manager on real devices: two uroce devices in this process, each with its
// ConnectionManager on QP1, connect RC QPs with REQ/REP/RTU over UDP, move data both ways,
// disconnect with DREQ/DREP; a connection to a service nobody listens on is rejected; a consumer
// that takes no events holds a bounded number of requests, of which one peer only a share.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <unistd.h>

#include "uroce/cm.hpp"

using namespace uroce;

namespace {

constexpr uint64_t kSvc = 0x0000000001061c06ull;  // IP CM, TCP port space, port 7174

struct Side {
  std::unique_ptr<Device> dev;
  std::unique_ptr<ConnectionManager> cm;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> cq;
  std::unique_ptr<QueuePair> qp;
  std::vector<uint8_t> buf = std::vector<uint8_t>(8192);
  std::unique_ptr<MemoryRegion> mr;

  void open(CmOptions o = CmOptions{12, 5}, const DeviceOptions& d = {}) {  // ~17 ms per retry
    auto dv = Device::open("uroce_lo", d);
    ASSERT_TRUE(dv.ok()) << dv.error().message;
    dev = std::move(*dv);
    auto c = ConnectionManager::open(*dev, o);
    ASSERT_TRUE(c.ok()) << c.error().message;
    cm = std::move(*c);
    pd = std::move(*dev->alloc_pd());
    cq = std::move(*dev->create_cq(64));
    qp = std::move(*pd->create_qp({QpType::RC, cq.get(), cq.get(), QpCap{16, 16, 1, 1, 0}, false}));
    mr = std::move(*pd->reg_mr(buf.data(), buf.size(), kAccessLocalWrite | kAccessRemoteWrite));
  }
  Gid gid() const { return *dev->query_gid(0); }
  // The QP to RTS towards what the event says of the peer: we receive from rq_psn (the PSN we
  // announced) and send from the PSN the peer announced.
  void ready(const CmEvent& e, uint32_t rq_psn) {
    ConnectOptions o;
    o.path_mtu = e.mtu;
    ASSERT_TRUE(qp->connect({e.peer, e.remote_qpn, rq_psn}, e.sq_psn, o));
  }
  CmEvent next() {
    auto e = cm->wait(5000);
    EXPECT_TRUE(e.ok()) << "no CM event";
    return e.ok() ? *e : CmEvent{};
  }
};

// A connects to B's service, sends 3000 bytes, disconnects: every event and byte checked.
void connect_send_disconnect(Side& a, Side& b) {
  ASSERT_TRUE(b.cm->listen(kSvc, 5));
  CmConnectParams p;
  p.peer = b.gid();
  p.service_id = kSvc;
  p.qpn = a.qp->qp_num();
  p.rq_psn = 0x1111;
  p.private_data = {'h', 'i'};
  auto id = a.cm->connect(p);
  ASSERT_TRUE(id.ok()) << id.error().message;

  CmEvent req = b.next();
  ASSERT_EQ(req.type, CmEventType::ConnectRequest);
  EXPECT_EQ(req.listener, 5u);
  EXPECT_EQ(req.peer, a.gid());
  EXPECT_EQ(req.local, b.gid());
  EXPECT_EQ(req.remote_qpn, a.qp->qp_num());
  EXPECT_EQ(req.sq_psn, 0x1111u) << "B sends from the PSN A receives from";
  EXPECT_EQ(req.private_data[0], 'h');
  b.ready(req, 0x2222);
  CmAcceptParams acc;
  acc.qpn = b.qp->qp_num();
  acc.rq_psn = 0x2222;
  ASSERT_TRUE(b.cm->accept(req.id, acc));

  CmEvent rep = a.next();
  ASSERT_EQ(rep.type, CmEventType::ConnectReply);
  EXPECT_EQ(rep.id, *id);
  EXPECT_EQ(rep.remote_qpn, b.qp->qp_num());
  EXPECT_EQ(rep.sq_psn, 0x2222u);
  rep.peer = b.gid();
  rep.mtu = req.mtu;
  a.ready(rep, 0x1111);
  ASSERT_TRUE(a.cm->establish(*id));
  EXPECT_EQ(a.next().type, CmEventType::Established);
  EXPECT_EQ(b.next().type, CmEventType::Established);

  // Data both ways over the connected QPs.
  for (int i = 0; i < 3000; ++i) a.buf[size_t(i)] = uint8_t(i * 7 + 1);
  Sge r = b.mr->sge(0, 4096), s = a.mr->sge(0, 3000);
  ASSERT_TRUE(b.qp->post_recv({1, {&r, 1}}));
  ASSERT_TRUE(a.qp->post_send({2, WrOpcode::Send, kSendSignaled, {&s, 1}}));
  Wc wc[1];
  ASSERT_EQ(*b.cq->wait(wc, 5000), 1);
  EXPECT_EQ(wc[0].status, WcStatus::Success);
  EXPECT_EQ(wc[0].byte_len, 3000u);
  EXPECT_EQ(0, std::memcmp(a.buf.data(), b.buf.data(), 3000));
  ASSERT_EQ(*a.cq->wait(wc, 5000), 1);
  EXPECT_EQ(wc[0].status, WcStatus::Success);

  ASSERT_TRUE(a.cm->disconnect(*id));
  EXPECT_EQ(b.next().type, CmEventType::Disconnected);
  EXPECT_EQ(a.next().type, CmEventType::DisconnectDone);
}

// Where nothing is lost, a long response timeout costs nothing and keeps a busy machine from
// turning a late answer into a timeout: ~268 ms per retry.
constexpr CmOptions kPatient{16, 5};

}  // namespace

TEST(CmLive, ConnectSendDisconnect) {
  Side a, b;
  a.open(kPatient);
  b.open(kPatient);
  EXPECT_EQ(ConnectionManager::open(*a.dev).error().code, EBUSY) << "one CM per device";
  connect_send_disconnect(a, b);
}

// Two devices sharing one address through the host NIC daemon, as two processes of a host do:
// every MAD reaches the right one through the daemon (the REQ by its service ID, the rest by
// communication ID), and a service ID is one device's at a time.
TEST(CmLive, ConnectSendDisconnectOnASharedAddress) {
  DeviceOptions d;
  d.addr = "127.0.0." + std::to_string(100 + getpid() % 150);
  d.shared = true;
  Side a, b;
  a.open(kPatient, d);
  b.open(kPatient, d);
  ASSERT_EQ(a.gid(), b.gid());
  ASSERT_NE(a.dev->share_slot(), 0u);
  ASSERT_NE(a.dev->share_slot(), b.dev->share_slot());
  auto taken = a.cm->listen(kSvc, 1);
  ASSERT_TRUE(taken);
  EXPECT_EQ(b.cm->listen(kSvc, 5).error().code, EADDRINUSE) << "A listens on it";
  a.cm->unlisten(kSvc);
  connect_send_disconnect(a, b);
}

TEST(CmLive, NobodyListensIsRejected) {
  Side a, b;
  a.open(CmOptions{16, 15});  // the REJ has minutes to come back, however slow the machine
  b.open();
  CmConnectParams p;
  p.peer = b.gid();
  p.service_id = kSvc + 1;
  p.qpn = a.qp->qp_num();
  ASSERT_TRUE(a.cm->connect(p));
  CmEvent e = a.next();
  EXPECT_EQ(e.type, CmEventType::Rejected);
  EXPECT_EQ(e.reject_reason, 8) << "invalid service ID, which rdma_cm reports as connection refused";
}

TEST(CmLive, NoPeerIsUnreachable) {
  Side a;
  a.open();
  CmConnectParams p;
  p.peer = Gid::from_ipv4(0x7f0000fe);  // no device there
  p.service_id = kSvc;
  p.qpn = a.qp->qp_num();
  ASSERT_TRUE(a.cm->connect(p));
  CmEvent e = a.next();  // 6 sends, ~17 ms apart
  EXPECT_EQ(e.type, CmEventType::Unreachable);
}

// A consumer that takes no events: one peer's burst of REQs fills that peer's share of the
// requests the CM holds (a quarter of 1024), the rest are refused with REJ "no resources", and
// another peer still gets in. The burst is more than QP1's 64 send slots: its MADs wait for a
// slot, none is dropped.
TEST(CmLive, OnePeerCannotFillTheRequestsAConsumerHolds) {
  Side a, b, c;
  a.open(CmOptions{16, 15});  // ~268 ms per retry, 4 s in all: its REJs come before its REQs time out
  b.open();
  c.open();
  ASSERT_TRUE(b.cm->listen(kSvc, 5));
  CmConnectParams p;
  p.peer = b.gid();
  p.service_id = kSvc;
  p.qpn = a.qp->qp_num();
  constexpr int kBurst = 300, kShare = 256;
  for (int i = 0; i < kBurst; ++i) ASSERT_TRUE(a.cm->connect(p));
  // The held REQs get no answer until b's consumer takes them: on a loaded machine some time
  // out (a's retries run out) before the last REJ arrives (a lost REQ waits for its retry).
  int rejected = 0;
  for (int i = 0; i < kBurst && rejected < kBurst - kShare; ++i) {
    CmEvent e = a.next();
    if (e.type == CmEventType::Unreachable) continue;
    ASSERT_EQ(e.type, CmEventType::Rejected);
    EXPECT_EQ(e.reject_reason, 3) << "no resources";
    ++rejected;
  }
  EXPECT_EQ(rejected, kBurst - kShare);
  p.qpn = c.qp->qp_num();
  ASSERT_TRUE(c.cm->connect(p));
  int from_a = 0, from_c = 0;
  for (int i = 0; i < kShare + 1; ++i) {
    CmEvent e = b.next();
    ASSERT_EQ(e.type, CmEventType::ConnectRequest);
    from_a += e.peer == a.gid();
    from_c += e.peer == c.gid();
  }
  EXPECT_EQ(from_a, kShare);
  EXPECT_EQ(from_c, 1);
  EXPECT_FALSE(b.cm->poll());
  // At least the burst's excess (a REQ whose REJ came late is refused again when sent again).
  EXPECT_GE(b.cm->counters()["requests_refused"], uint64_t(kBurst - kShare));
  EXPECT_EQ(a.cm->counters()["sends_dropped"], 0u);
}

// Events the consumer has not taken, at most max_events: a REQ past it is dropped and counted,
// not refused, as a kernel whose rdma_cm backlog is full drops it; the peer sends it again and
// gets in once the consumer has taken its events.
TEST(CmLive, ARequestPastMaxEventsWaitsForThePeersRetransmission) {
  Side a, b;
  a.open(CmOptions{16, 15});  // ~268 ms per retry, for as long as a slow machine needs
  CmOptions o{12, 5};
  o.max_events = 2;
  b.open(o);
  ASSERT_TRUE(b.cm->listen(kSvc, 5));
  CmConnectParams p;
  p.peer = b.gid();
  p.service_id = kSvc;
  p.qpn = a.qp->qp_num();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(a.cm->connect(p));
  for (int i = 0; i < 100 && b.cm->counters()["requests_dropped"] == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  // The third REQ is dropped, not refused (its copy sent again may be dropped too if this
  // thread is slower than the peer's retry timer, as under a sanitizer on a loaded machine).
  EXPECT_GE(b.cm->counters()["requests_dropped"], 1u);
  EXPECT_EQ(b.cm->counters()["requests_refused"], 0u);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(b.next().type, CmEventType::ConnectRequest);
  CmEvent late = b.next();  // the third REQ, sent again
  EXPECT_EQ(late.type, CmEventType::ConnectRequest);
  EXPECT_GE(a.cm->counters()["retransmits"], 1u);
  EXPECT_FALSE(a.cm->poll()) << "no REJ reached the peer";
}
