// The communication manager's state machine, two managers wired back to back in virtual time:
// connection set-up, rejection, lost messages and their retransmission, duplicates, timeouts,
// disconnection, SIDR and hostile MADs. Every exchange is checked message by message.
#include <gtest/gtest.h>

#include <functional>

#include "cm/demux.hpp"
#include "cm/ip_cm.hpp"
#include "cm/manager.hpp"

using namespace uroce;
using namespace uroce::cm;

namespace {

const Gid kA = Gid::from_ipv4(0x7f000001), kB = Gid::from_ipv4(0x7f000002);
const uint64_t kSvc = ip_service_id(PortSpace::Tcp, 7174);

CmAttr attr_of(const Outgoing& o) { return CmAttr(read_header(o.mad)->attr_id); }

struct Pair {
  Manager a{{0xa, 1, 10, 3}}, b{{0xb, 2, 10, 3}};  // 10: ~4 ms per retry, 3 retries
  uint64_t now = 0;
  std::vector<CmAttr> wire;                // every MAD that was sent, in order
  std::function<bool(const Outgoing&)> lose = [](const Outgoing&) { return false; };
  std::function<void(const Outgoing&)> on_wire = [](const Outgoing&) {};  // sees every MAD sent
  std::vector<Event> ea, eb;

  // Delivers everything in flight, both ways, until both are quiet.
  void flow() {
    for (int round = 0; round < 20; ++round) {
      auto oa = a.take_outgoing(), ob = b.take_outgoing();
      if (oa.empty() && ob.empty()) break;
      for (auto& o : oa) {
        wire.push_back(attr_of(o));
        on_wire(o);
        EXPECT_EQ(o.to, kB);
        if (!lose(o)) b.on_mad(o.mad, kA, now);
      }
      for (auto& o : ob) {
        wire.push_back(attr_of(o));
        on_wire(o);
        EXPECT_EQ(o.to, kA);
        if (!lose(o)) a.on_mad(o.mad, kB, now);
      }
    }
    for (auto& e : a.take_events()) ea.push_back(e);
    for (auto& e : b.take_events()) eb.push_back(e);
  }
  // Advances to the next timer of either side and runs it.
  void tick() {
    now = std::max(now, std::min(a.next_deadline(), b.next_deadline()));
    a.on_timer(now);
    b.on_timer(now);
    flow();
  }
  Req req() {
    Req r;
    r.local_qpn = 0x111;
    r.starting_psn = 0x1000;
    r.path_mtu = 3;
    r.local_gid = kA;
    r.remote_gid = kB;
    r.private_data = {1, 2, 3};
    return r;
  }
  Rep rep() {
    Rep r;
    r.local_qpn = 0x222;
    r.starting_psn = 0x2000;
    r.private_data = {4, 5};
    return r;
  }
  // B listens on the UD service svc and A asks for it (the SIDR_REQ is not delivered yet).
  CommId sidr_to_b(uint64_t svc) {
    EXPECT_TRUE(b.listen(svc, 5));
    SidrReq q;
    q.service_id = svc;
    return *a.sidr_request(kB, q, now);
  }
  // A through REQ, REP and RTU; returns (A's ID, B's ID).
  std::pair<CommId, CommId> establish() {
    EXPECT_TRUE(b.listen(kSvc, 77));
    Req r = req();
    r.service_id = kSvc;
    CommId ida = *a.connect(kB, r, now);
    flow();
    EXPECT_EQ(eb.size(), 1u);
    CommId idb = eb.at(0).id;
    EXPECT_TRUE(b.accept(idb, rep(), now));
    flow();
    EXPECT_TRUE(a.establish(ida, {}, now));
    flow();
    return {ida, idb};
  }
};

std::vector<EventType> types(const std::vector<Event>& v) {
  std::vector<EventType> t;
  for (auto& e : v) t.push_back(e.type);
  return t;
}

}  // namespace

TEST(CmManager, ConnectAcceptEstablish) {
  Pair p;
  auto [ida, idb] = p.establish();
  EXPECT_EQ(p.wire, (std::vector<CmAttr>{CmAttr::Req, CmAttr::Rep, CmAttr::Rtu}));
  ASSERT_EQ(types(p.eb), (std::vector<EventType>{EventType::ReqReceived, EventType::Established}));
  ASSERT_EQ(types(p.ea), (std::vector<EventType>{EventType::RepReceived, EventType::Established}));
  const Req& r = *p.eb[0].req;
  EXPECT_EQ(p.eb[0].listener, 77u);
  EXPECT_EQ(p.eb[0].peer, kA);
  EXPECT_EQ(r.local_comm_id, ida);
  EXPECT_EQ(r.local_qpn, 0x111u);
  EXPECT_EQ(r.starting_psn, 0x1000u);
  EXPECT_EQ(r.local_ca_guid, 0xaull);
  EXPECT_EQ(std::vector<uint8_t>(r.private_data.begin(), r.private_data.begin() + 3), (std::vector<uint8_t>{1, 2, 3}));
  const Rep& rep = *p.ea[0].rep;
  EXPECT_EQ(rep.local_comm_id, idb);
  EXPECT_EQ(rep.remote_comm_id, ida);
  EXPECT_EQ(rep.local_qpn, 0x222u);
  EXPECT_EQ(rep.local_ca_guid, 0xbull);
  EXPECT_EQ(p.a.next_deadline(), UINT64_MAX) << "nothing waits once established";
  EXPECT_EQ(p.b.next_deadline(), UINT64_MAX);
}

TEST(CmManager, NoListenerIsRejectedAsInvalidServiceId) {
  Pair p;
  Req r = p.req();
  r.service_id = kSvc;
  CommId id = *p.a.connect(kB, r, p.now);
  p.flow();
  EXPECT_EQ(p.wire, (std::vector<CmAttr>{CmAttr::Req, CmAttr::Rej}));
  ASSERT_EQ(types(p.ea), (std::vector<EventType>{EventType::Rejected}));
  EXPECT_EQ(p.ea[0].id, id);
  EXPECT_EQ(p.ea[0].rej->reason, uint16_t(RejReason::InvalidServiceId));
  EXPECT_EQ(p.a.connections(), 0u);
  EXPECT_EQ(p.b.connections(), 0u);
}

TEST(CmManager, ConsumerRejectCarriesPrivateData) {
  Pair p;
  ASSERT_TRUE(p.b.listen(kSvc, 1));
  Req r = p.req();
  r.service_id = kSvc;
  (void)*p.a.connect(kB, r, p.now);
  p.flow();
  ASSERT_TRUE(p.b.reject(p.eb.at(0).id, uint16_t(RejReason::ConsumerReject), {42, 43}, p.now));
  p.flow();
  ASSERT_EQ(types(p.ea), (std::vector<EventType>{EventType::Rejected}));
  EXPECT_EQ(p.ea[0].rej->reason, 28);
  EXPECT_EQ(p.ea[0].rej->private_data[0], 42);
  EXPECT_EQ(p.ea[0].rej->private_data[1], 43);
  EXPECT_FALSE(p.b.accept(p.eb.at(0).id, p.rep(), p.now)) << "a rejected request cannot be accepted";
}

TEST(CmManager, LostReqIsRetransmitted) {
  Pair p;
  int reqs = 0;
  p.lose = [&](const Outgoing& o) { return attr_of(o) == CmAttr::Req && reqs++ == 0; };
  ASSERT_TRUE(p.b.listen(kSvc, 1));
  Req r = p.req();
  r.service_id = kSvc;
  (void)*p.a.connect(kB, r, p.now);
  p.flow();
  EXPECT_TRUE(p.eb.empty());
  p.tick();
  EXPECT_EQ(p.now, cm_timeout_ns(10));
  ASSERT_EQ(types(p.eb), (std::vector<EventType>{EventType::ReqReceived}));
  EXPECT_EQ(p.a.counters().retransmits, 1u);
}

TEST(CmManager, LostRepIsAnsweredFromTheRepeatedReqAndLostRtuFromTheRepeatedRep) {
  Pair p;
  int reps = 0, rtus = 0;
  p.lose = [&](const Outgoing& o) {
    return (attr_of(o) == CmAttr::Rep && reps++ == 0) || (attr_of(o) == CmAttr::Rtu && rtus++ == 0);
  };
  ASSERT_TRUE(p.b.listen(kSvc, 1));
  Req r = p.req();
  r.service_id = kSvc;
  CommId ida = *p.a.connect(kB, r, p.now);
  p.flow();
  ASSERT_TRUE(p.b.accept(p.eb.at(0).id, p.rep(), p.now));
  p.flow();                  // the REP is lost
  p.now += 1;
  p.a.on_timer(p.a.next_deadline());  // A repeats its REQ; B answers with the same REP
  p.b.on_timer(0);
  p.flow();
  EXPECT_EQ(p.eb.size(), 1u) << "a repeated REQ is no new request";
  EXPECT_EQ(p.b.counters().duplicates, 1u);
  ASSERT_EQ(types(p.ea), (std::vector<EventType>{EventType::RepReceived}));
  ASSERT_TRUE(p.a.establish(ida, {}, p.now));
  p.flow();                  // the RTU is lost: B repeats its REP, A its RTU
  p.tick();
  ASSERT_EQ(types(p.eb), (std::vector<EventType>{EventType::ReqReceived, EventType::Established}));
  EXPECT_EQ(p.wire, (std::vector<CmAttr>{CmAttr::Req, CmAttr::Rep, CmAttr::Req, CmAttr::Rep, CmAttr::Rtu,
                                         CmAttr::Rep, CmAttr::Rtu}));
}

TEST(CmManager, UnansweredReqIsUnreachableAfterEveryRetry) {
  Pair p;
  p.lose = [](const Outgoing&) { return true; };
  Req r = p.req();
  r.service_id = kSvc;
  CommId id = *p.a.connect(kB, r, p.now);
  p.flow();
  for (int i = 0; i < 10 && p.ea.empty(); ++i) p.tick();
  ASSERT_EQ(types(p.ea), (std::vector<EventType>{EventType::Unreachable}));
  EXPECT_EQ(p.ea[0].id, id);
  EXPECT_EQ(p.wire.size(), 4u) << "the REQ and 3 retries";
  EXPECT_EQ(p.now, 4 * cm_timeout_ns(10));
  EXPECT_EQ(p.a.connections(), 0u);
}

TEST(CmManager, DisconnectBothWays) {
  Pair p;
  auto [ida, idb] = p.establish();
  p.ea.clear();
  p.eb.clear();
  p.wire.clear();
  ASSERT_TRUE(p.a.disconnect(ida, {9}, p.now));
  p.flow();
  EXPECT_EQ(p.wire, (std::vector<CmAttr>{CmAttr::Dreq, CmAttr::Drep}));
  ASSERT_EQ(types(p.eb), (std::vector<EventType>{EventType::DreqReceived}));
  EXPECT_EQ(p.eb[0].id, idb);
  EXPECT_EQ(p.eb[0].private_data[0], 9);
  ASSERT_EQ(types(p.ea), (std::vector<EventType>{EventType::Disconnected}));
  EXPECT_EQ(p.a.connections(), 0u);
  EXPECT_EQ(p.b.connections(), 0u);
  EXPECT_FALSE(p.a.disconnect(ida, {}, p.now)) << "already gone";
}

TEST(CmManager, LostDrepIsAnsweredStatelessly) {
  Pair p;
  auto [ida, idb] = p.establish();
  (void)idb;
  int dreps = 0;
  p.lose = [&](const Outgoing& o) { return attr_of(o) == CmAttr::Drep && dreps++ == 0; };
  p.ea.clear();
  ASSERT_TRUE(p.a.disconnect(ida, {}, p.now));
  p.flow();
  EXPECT_TRUE(p.ea.empty());
  p.tick();  // A repeats the DREQ; B no longer knows the connection and answers anyway
  ASSERT_EQ(types(p.ea), (std::vector<EventType>{EventType::Disconnected}));
  EXPECT_EQ(p.eb.back().type, EventType::DreqReceived);
  EXPECT_EQ(p.b.counters().duplicates, 1u);
}

TEST(CmManager, SidrResolvesAService) {
  Pair p;
  const uint64_t udp = ip_service_id(PortSpace::Udp, 7174);
  CommId id = p.sidr_to_b(udp);
  p.flow();
  ASSERT_EQ(types(p.eb), (std::vector<EventType>{EventType::SidrReqReceived}));
  EXPECT_EQ(p.eb[0].id, id);
  SidrRep rep;
  rep.qpn = 0x19;
  rep.qkey = 0x01234567;
  rep.service_id = udp;
  ASSERT_TRUE(p.b.sidr_reply(id, kA, rep));
  p.flow();
  ASSERT_EQ(types(p.ea), (std::vector<EventType>{EventType::SidrRepReceived}));
  EXPECT_EQ(p.ea[0].sidr_rep->qpn, 0x19u);
  EXPECT_EQ(p.ea[0].sidr_rep->qkey, 0x01234567u);
  EXPECT_EQ(p.ea[0].sidr_rep->status, SidrStatus::Valid);
  // A service nobody listens on: status NoService.
  SidrReq q;
  q.service_id = ip_service_id(PortSpace::Udp, 1);
  (void)*p.a.sidr_request(kB, q, p.now);
  p.flow();
  EXPECT_EQ(p.ea.back().sidr_rep->status, SidrStatus::NoService);
  EXPECT_EQ(p.a.next_deadline(), UINT64_MAX);
}

TEST(CmManager, HostileMadsAreDroppedAndCounted) {
  Pair p;
  auto [ida, idb] = p.establish();
  uint64_t dropped = p.b.counters().dropped;
  Mad m{};
  MadHeader h;
  h.attr_id = uint16_t(CmAttr::Rtu);
  write_header(h, m);
  m[1] = 0x04;  // another management class
  p.b.on_mad(m, kA, p.now);
  write_header(h, m);
  m[2] = 1;     // CM class version 1
  p.b.on_mad(m, kA, p.now);
  p.b.on_mad(std::span<const uint8_t>(m.data(), 200), kA, p.now);  // short
  h.attr_id = 0x7777;
  write_header(h, m);
  p.b.on_mad(m, kA, p.now);  // unknown attribute
  EXPECT_EQ(p.b.counters().dropped, dropped + 4);
  // A REP for A's connection but from a third address changes nothing.
  Rep fake;
  fake.remote_comm_id = ida;
  fake.local_comm_id = 99;
  Mad f{};
  h.attr_id = uint16_t(CmAttr::Rep);
  write_header(h, f);
  ASSERT_TRUE(encode(fake, MadData(f.data() + kMadHeaderBytes, kMadDataBytes)));
  uint64_t a_dropped = p.a.counters().dropped;
  p.a.on_mad(f, Gid::from_ipv4(0x7f000009), p.now);
  EXPECT_EQ(p.a.counters().dropped, a_dropped + 1);
  EXPECT_TRUE(p.a.take_outgoing().empty());
  EXPECT_TRUE(p.a.disconnect(ida, {}, p.now)) << "still established";
  (void)idb;
}

// A peer that sends REQs faster than the consumer answers them cannot make the CM hold more
// than max_pending: the rest are refused with REJ "no resources" (SIDR: status "rejected").
TEST(CmManager, UnansweredRequestsAreBounded) {
  Pair p;
  p.b = Manager({0xb, 2, 10, 3, 4});
  ASSERT_TRUE(p.b.listen(kSvc, 1));
  Req r = p.req();
  r.service_id = kSvc;
  for (int i = 0; i < 10; ++i) (void)*p.a.connect(kB, r, p.now);
  p.flow();
  EXPECT_EQ(p.eb.size(), 4u);
  EXPECT_EQ(p.b.pending(), 4u);
  EXPECT_EQ(p.b.counters().refused, 6u);
  ASSERT_EQ(p.ea.size(), 6u);
  for (auto& e : p.ea) {
    EXPECT_EQ(e.type, EventType::Rejected);
    EXPECT_EQ(e.rej->reason, uint16_t(RejReason::NoResources));
  }
  // Answering one makes room for one more.
  ASSERT_TRUE(p.b.reject(p.eb[0].id, uint16_t(RejReason::ConsumerReject), {}, p.now));
  ASSERT_TRUE(p.b.accept(p.eb[1].id, p.rep(), p.now));
  EXPECT_EQ(p.b.pending(), 2u);
  p.eb.clear();
  (void)*p.a.connect(kB, r, p.now);
  p.flow();
  EXPECT_EQ(p.eb.size(), 1u);
  EXPECT_EQ(p.b.pending(), 3u);
  // SIDR requests count against the same bound.
  const uint64_t udp = ip_service_id(PortSpace::Udp, 9);
  ASSERT_TRUE(p.b.listen(udp, 2));
  SidrReq q;
  q.service_id = udp;
  p.ea.clear();
  for (int i = 0; i < 3; ++i) (void)*p.a.sidr_request(kB, q, p.now);
  p.flow();
  EXPECT_EQ(p.b.pending(), 4u);
  ASSERT_EQ(p.ea.size(), 2u);
  EXPECT_EQ(p.ea[0].sidr_rep->status, SidrStatus::Rejected);
}

// Copies of one SIDR_REQ (the peer's retransmissions, or one MAD sent again and again) are one
// request while the consumer has not answered it: dropped and counted, not answered, as the
// kernel's CM drops them. The same request ID from another source is another request; once
// answered, a copy asks again (the SIDR_REP may have been lost).
TEST(CmManager, CopiesOfAnUnansweredSidrReqAreDropped) {
  Pair p;
  const uint64_t udp = ip_service_id(PortSpace::Udp, 7174);
  CommId id = p.sidr_to_b(udp);
  auto out = p.a.take_outgoing();
  ASSERT_EQ(out.size(), 1u);
  for (int i = 0; i < 1000; ++i) p.b.on_mad(out[0].mad, kA, p.now);
  auto eb = p.b.take_events();
  ASSERT_EQ(types(eb), (std::vector<EventType>{EventType::SidrReqReceived}));
  EXPECT_EQ(eb[0].id, id);
  EXPECT_EQ(p.b.pending(), 1u);
  EXPECT_EQ(p.b.counters().duplicates, 999u);
  EXPECT_TRUE(p.b.take_outgoing().empty()) << "a copy is not answered";
  const Gid kC = Gid::from_ipv4(0x7f000003);
  p.b.on_mad(out[0].mad, kC, p.now);
  EXPECT_EQ(p.b.take_events().size(), 1u) << "the same request ID from another source";
  EXPECT_EQ(p.b.pending(), 2u);
  SidrRep rep;
  rep.qpn = 0x19;
  ASSERT_TRUE(p.b.sidr_reply(id, kA, rep));
  EXPECT_FALSE(p.b.sidr_reply(id, kA, rep)) << "answered once";
  EXPECT_EQ(p.b.pending(), 1u);
  p.b.on_mad(out[0].mad, kA, p.now);
  EXPECT_EQ(p.b.take_events().size(), 1u) << "answered: a copy is a request again";
}

// One source holds at most max_pending_per_source of the requests the consumer has not answered,
// REQs and SIDR_REQs together: past it, REJ "no resources" (SIDR: status "rejected") while
// other sources still get in; answering one of its requests makes room for one more.
TEST(CmManager, OneSourceHoldsAtMostItsShareOfThePendingRequests) {
  Pair p;
  ManagerConfig cfg{0xb, 2, 10, 3, 8};
  cfg.max_pending_per_source = 3;
  p.b = Manager(cfg);
  ASSERT_TRUE(p.b.listen(kSvc, 1));
  const uint64_t udp = ip_service_id(PortSpace::Udp, 9);
  ASSERT_TRUE(p.b.listen(udp, 2));
  Req r = p.req();
  r.service_id = kSvc;
  for (int i = 0; i < 2; ++i) (void)*p.a.connect(kB, r, p.now);
  SidrReq q;
  q.service_id = udp;
  for (int i = 0; i < 2; ++i) (void)*p.a.sidr_request(kB, q, p.now);
  for (int i = 0; i < 2; ++i) (void)*p.a.connect(kB, r, p.now);
  p.flow();
  EXPECT_EQ(types(p.eb), (std::vector<EventType>{EventType::ReqReceived, EventType::ReqReceived,
                                                  EventType::SidrReqReceived}));
  EXPECT_EQ(p.b.pending(), 3u);
  EXPECT_EQ(p.b.counters().refused, 3u);
  ASSERT_EQ(types(p.ea), (std::vector<EventType>{EventType::SidrRepReceived, EventType::Rejected, EventType::Rejected}));
  EXPECT_EQ(p.ea[0].sidr_rep->status, SidrStatus::Rejected);
  EXPECT_EQ(p.ea[1].rej->reason, uint16_t(RejReason::NoResources));
  // Another source (another peer, or an address a flood spoofs) has a share of its own.
  (void)*p.a.connect(kB, r, p.now);
  auto out = p.a.take_outgoing();
  ASSERT_EQ(out.size(), 1u);
  for (uint32_t i = 0; i < 3; ++i) p.b.on_mad(out[0].mad, Gid::from_ipv4(0x0a000001 + i), p.now);
  EXPECT_EQ(p.b.take_events().size(), 3u);
  EXPECT_EQ(p.b.pending(), 6u);
  EXPECT_EQ(p.b.take_outgoing().size(), 0u);
  // Answered, one of A's makes room for one more of A's.
  ASSERT_TRUE(p.b.accept(p.eb[0].id, p.rep(), p.now));
  p.flow();
  p.eb.clear();
  (void)*p.a.connect(kB, r, p.now);
  p.flow();
  EXPECT_EQ(types(p.eb), (std::vector<EventType>{EventType::ReqReceived}));
  EXPECT_EQ(p.b.counters().refused, 3u);
}

// What anyone can make the CM send (a REJ for a service nobody listens on, a SIDR_REP refusing a
// request, a DREP for a DREQ of no connection) is best-effort on QP1; a connection's MADs are not.
TEST(CmManager, RefusalsOfStrangersAreBestEffort) {
  Pair p;
  Req r = p.req();
  r.service_id = kSvc;
  (void)*p.a.connect(kB, r, p.now);
  auto req = p.a.take_outgoing();
  ASSERT_EQ(req.size(), 1u);
  EXPECT_FALSE(req[0].best_effort);
  p.b.on_mad(req[0].mad, kA, p.now);
  SidrReq q;
  q.service_id = ip_service_id(PortSpace::Udp, 1);
  (void)*p.a.sidr_request(kB, q, p.now);
  p.b.on_mad(p.a.take_outgoing().at(0).mad, kA, p.now);
  Mad m{};
  MadHeader h;
  h.attr_id = uint16_t(CmAttr::Dreq);
  write_header(h, m);
  ASSERT_TRUE(encode(Dreq{0x1234, 0x5678, 0x11, {}}, MadData(m.data() + kMadHeaderBytes, kMadDataBytes)));
  p.b.on_mad(m, kA, p.now);
  auto out = p.b.take_outgoing();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(attr_of(out[0]), CmAttr::Rej);
  EXPECT_EQ(attr_of(out[1]), CmAttr::SidrRep);
  EXPECT_EQ(attr_of(out[2]), CmAttr::Drep);
  for (auto& o : out) EXPECT_TRUE(o.best_effort);
  p.b.take_events();
  p.a.take_events();
  auto [ida, idb] = p.establish();
  (void)idb;
  ASSERT_TRUE(p.a.disconnect(ida, {}, p.now));
  for (auto& o : p.a.take_outgoing()) EXPECT_FALSE(o.best_effort);
}

// On a host NIC that processes share, each manager's IDs carry its slot in their top 6 bits,
// and every MAD names its recipient from its bytes alone: a REQ or SIDR_REQ by service ID,
// every other message by the recipient's own ID, so the daemon can pass each to its process.
TEST(CmManager, EveryMadNamesItsRecipientBySlotOrService) {
  Pair p;
  ManagerConfig ca{0xa, 1, 10, 3}, cb{0xb, 2, 10, 3};
  ca.id_high = 5;
  cb.id_high = 9;
  ca.id_high_bits = cb.id_high_bits = 6;
  p.a = Manager(ca);
  p.b = Manager(cb);
  std::vector<CmAttr> by_service, by_id;
  p.on_wire = [&](const Outgoing& o) {
    auto r = recipient(o.mad);
    ASSERT_TRUE(r) << to_string(attr_of(o));
    if (r->by_service) {
      EXPECT_EQ(r->service_id, kSvc);
      by_service.push_back(attr_of(o));
    } else {
      EXPECT_EQ(r->comm_id >> 26, o.to == kB ? 9u : 5u) << to_string(attr_of(o));
      by_id.push_back(attr_of(o));
    }
  };
  auto [ida, idb] = p.establish();
  EXPECT_EQ(ida >> 26, 5u);
  EXPECT_EQ(idb >> 26, 9u);
  ASSERT_TRUE(p.a.disconnect(ida, {}, p.now));
  p.flow();
  p.b.unlisten(kSvc);
  Req r = p.req();
  r.service_id = kSvc;
  ASSERT_TRUE(p.a.connect(kB, r, p.now));  // nobody listens now: a REJ comes back
  p.flow();
  ASSERT_TRUE(p.b.listen(kSvc, 1));
  SidrReq q;
  q.service_id = kSvc;
  auto sid = p.a.sidr_request(kB, q, p.now);
  ASSERT_TRUE(sid);
  EXPECT_EQ(*sid >> 26, 5u);
  p.flow();
  ASSERT_FALSE(p.eb.empty());
  ASSERT_EQ(p.eb.back().type, EventType::SidrReqReceived);
  SidrRep rep;
  rep.qpn = 0x333;
  ASSERT_TRUE(p.b.sidr_reply(p.eb.back().id, kA, rep));
  p.flow();
  EXPECT_EQ(by_service, (std::vector<CmAttr>{CmAttr::Req, CmAttr::Req, CmAttr::SidrReq}));
  EXPECT_EQ(by_id, (std::vector<CmAttr>{CmAttr::Rep, CmAttr::Rtu, CmAttr::Dreq, CmAttr::Drep, CmAttr::Rej,
                                        CmAttr::SidrRep}));
  EXPECT_EQ(p.ea.back().type, EventType::SidrRepReceived);
  // What the daemon cannot attribute is left for it to drop.
  Mad junk{};
  EXPECT_FALSE(recipient(junk)) << "not the CM class";
  EXPECT_FALSE(recipient(std::span<const uint8_t>(junk.data(), 10))) << "shorter than a MAD";
}
