// Two RC queue pairs on one uroce device: a SEND carries "hello, RDMA" from one to the other.
#include <cstdio>
#include <random>
#include <uroce/uroce.hpp>
using namespace uroce;

int main() {
  auto dev = std::move(*Device::open("uroce_lo"));  // loopback: binds a free 127.0.0.x:4791
  auto pd = std::move(*dev->alloc_pd());
  auto cq = std::move(*dev->create_cq(16));
  char buf[2][32] = {"hello, RDMA", ""};
  auto mr = std::move(*pd->reg_mr(buf, sizeof buf, kAccessLocalWrite));
  auto a = std::move(*pd->create_qp({.type = QpType::RC, .send_cq = cq.get(), .recv_cq = cq.get()}));
  auto b = std::move(*pd->create_qp({.type = QpType::RC, .send_cq = cq.get(), .recv_cq = cq.get()}));
  Gid gid = *dev->query_gid(0);                      // ::ffff:127.0.0.x, a RoCE v2 GID
  std::random_device rnd;                            // random initial PSNs, as rdma-core tools use
  uint32_t psn_a = rnd() & 0xffffff, psn_b = rnd() & 0xffffff;
  if (!a->connect({.gid = gid, .qpn = b->qp_num(), .psn = psn_b}, psn_a) ||
      !b->connect({.gid = gid, .qpn = a->qp_num(), .psn = psn_a}, psn_b)) return 1;
  Sge dst = mr->sge(32, 32), src = mr->sge(0, 12);
  if (!b->post_recv({1, {&dst, 1}}) || !a->post_send({2, WrOpcode::Send, kSendSignaled, {&src, 1}})) return 1;
  Wc wc[2];
  for (int got = 0; got < 2;) got += *cq->wait({wc + got, size_t(2 - got)}, 1000);
  std::printf("%s: %s\n", to_string(wc[0].status), buf[1]);  // SUCCESS: hello, RDMA
  return wc[0].status == WcStatus::Success && wc[1].status == WcStatus::Success ? 0 : 1;
}
