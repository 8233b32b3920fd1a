// uroce-cm-connect: opens an RC connection to an rdma_cm listener (any RoCE peer: rping -s on
// a Linux host, another uroce) through the IB CM on QP1, then disconnects. It shows the CM
// exchange a connection takes and what the peer offered. With -l it is the listener: it accepts
// one connection (from rping -c, say), waits for the peer's first message, then disconnects.
// Usage:
//   uroce-cm-connect ADDRESS [PORT]        (PORT: the listener's TCP port space port, 7174 = rping)
//   uroce-cm-connect -l [PORT]
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "common/tool.hpp"
#include "uroce/cm.hpp"

using namespace uroce;
using tool::die;
using tool::must;

namespace {

CmEvent expect(ConnectionManager& cm, CmEventType want) {
  CmEvent e = must(cm.wait(10'000), "waiting for the CM");
  std::printf("cm: %s (id 0x%08x)\n", to_string(e.type), e.id);
  if (e.type != want) {
    if (e.type == CmEventType::Rejected) die("rejected, reason " + std::to_string(e.reject_reason));
    die(std::string("expected ") + to_string(want));
  }
  return e;
}

}  // namespace

// Passive side: accept the first connection request for the port, then disconnect.
int listen_once(uint16_t port) {
  auto dev = must(Device::open(), "open device");
  auto cm = must(ConnectionManager::open(*dev), "open the connection manager");
  auto pd = must(dev->alloc_pd(), "alloc_pd");
  auto cq = must(dev->create_cq(16), "create_cq");
  auto qp = must(pd->create_qp({QpType::RC, cq.get(), cq.get(), QpCap{8, 8, 1, 1, 0}, false}), "create_qp");
  std::vector<uint8_t> buf(4096);
  auto mr = must(pd->reg_mr(buf.data(), buf.size(), kAccessLocalWrite), "reg_mr");
  must(cm->listen(ip_service_id(0x0106, port), 1), "listen");
  std::printf("cm: listening on port %u\n", port);
  std::fflush(stdout);
  CmEvent req = must(cm->wait(60'000), "waiting for a connection request");
  if (req.type != CmEventType::ConnectRequest) die(std::string("expected a connect request, got ") + to_string(req.type));
  std::printf("cm: connect request from %s, QPN 0x%06x, our send PSN 0x%06x, MTU %u\n",
              req.peer.to_string().c_str(), req.remote_qpn, req.sq_psn, mtu_bytes(req.mtu));
  uint32_t rq_psn = std::random_device{}() & 0xffffff;
  ConnectOptions o;
  o.path_mtu = std::min(req.mtu, dev->query_port().active_mtu);
  must(qp->connect({req.peer, req.remote_qpn, rq_psn}, req.sq_psn, o), "QP to RTS");
  Sge sge = mr->sge(0, uint32_t(buf.size()));
  must(qp->post_recv({1, {&sge, 1}}), "post_recv");
  CmAcceptParams a;
  a.qpn = qp->qp_num();
  a.rq_psn = rq_psn;
  a.responder_resources = std::min<uint8_t>(req.initiator_depth, 16);
  a.initiator_depth = std::min<uint8_t>(req.responder_resources, 16);
  must(cm->accept(req.id, a), "accept");
  expect(*cm, CmEventType::Established);
  // The peer's first message says it is connected too (rping sends its buffer's address).
  Wc wc[1];
  int got = must(cq->wait(wc, 10'000), "waiting for the peer's first message");
  if (got == 1 && wc[0].status == WcStatus::Success)
    std::printf("cm: the peer's first message: %u bytes\n", wc[0].byte_len);
  else
    std::printf("cm: no message from the peer within 10 s (%d, %s)\n", got, got ? to_string(wc[0].status) : "-");
  must(cm->disconnect(req.id), "disconnect");
  expect(*cm, CmEventType::DisconnectDone);
  std::printf("uroce-cm-connect: accepted and disconnected\n");
  return 0;
}

int main(int argc, char** argv) {
  tool::set_program("uroce-cm-connect", 1);
  if (argc >= 2 && std::string(argv[1]) == "-l") return listen_once(uint16_t(argc > 2 ? std::atoi(argv[2]) : 7174));
  if (argc < 2) die("usage: uroce-cm-connect ADDRESS [PORT] | -l [PORT]");
  auto peer = Gid::parse(argv[1]);
  if (!peer || !peer->ipv4()) die("ADDRESS must be an IPv4 address");
  uint16_t port = uint16_t(argc > 2 ? std::atoi(argv[2]) : 7174);
  auto dev = must(Device::open(), "open device");
  auto cm = must(ConnectionManager::open(*dev), "open the connection manager");
  auto pd = must(dev->alloc_pd(), "alloc_pd");
  auto cq = must(dev->create_cq(16), "create_cq");
  auto qp = must(pd->create_qp({QpType::RC, cq.get(), cq.get(), QpCap{8, 8, 1, 1, 0}, false}), "create_qp");
  Gid local = must(dev->query_gid(dev->gid_index_for(*peer)), "query_gid");  // what the REQ leaves from
  uint32_t rq_psn = std::random_device{}() & 0xffffff;
  CmConnectParams p;
  p.peer = *peer;
  p.service_id = ip_service_id(0x0106, port);
  p.qpn = qp->qp_num();
  p.rq_psn = rq_psn;
  p.mtu = std::min(Mtu::Mtu1024, dev->query_port().active_mtu);
  p.private_data = ip_cm_private_data(local, *peer, uint16_t(0x8000 | (rq_psn & 0x3fff)));
  std::printf("cm: REQ to %s, service 0x%016llx, QPN 0x%06x, receive PSN 0x%06x\n", peer->to_string().c_str(),
              (unsigned long long)p.service_id, p.qpn, rq_psn);
  uint32_t id = must(cm->connect(p), "connect");
  CmEvent rep = expect(*cm, CmEventType::ConnectReply);
  std::printf("cm: peer QPN 0x%06x, our send PSN 0x%06x, responder resources %u, initiator depth %u\n",
              rep.remote_qpn, rep.sq_psn, rep.responder_resources, rep.initiator_depth);
  ConnectOptions o;
  o.path_mtu = p.mtu;
  must(qp->connect({*peer, rep.remote_qpn, rq_psn}, rep.sq_psn, o), "QP to RTS");
  must(cm->establish(id), "establish");
  expect(*cm, CmEventType::Established);
  must(cm->disconnect(id), "disconnect");
  expect(*cm, CmEventType::DisconnectDone);
  std::printf("uroce-cm-connect: connected and disconnected\n");
  return 0;
}
