// The public API with its real engine and UDP link, in one process: events reach the
// application through file descriptors, as an event-driven program uses them; a process short
// of descriptors gets a clean error from the open.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "../common/proc.hpp"
#include "uroce/uroce.hpp"

using namespace uroce;

namespace {
bool readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, timeout_ms) == 1;
}

// Two RC QPs of one device, connected to each other: a signaled WRITE of n patterned bytes from
// the front of a buffer to its back half; it must complete successfully, every byte equal.
void write_to_self(Device& dev, const Gid& gid, size_t n) {
  auto pd = std::move(*dev.alloc_pd());
  auto cq = std::move(*dev.create_cq(16));
  std::vector<char> buf(2 * n, 0);
  auto mr = std::move(*pd->reg_mr(buf.data(), buf.size(), kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead));
  auto a = std::move(*pd->create_qp({QpType::RC, cq.get(), cq.get()}));
  auto b = std::move(*pd->create_qp({QpType::RC, cq.get(), cq.get()}));
  ASSERT_TRUE(a->connect({.gid = gid, .qpn = b->qp_num(), .psn = 7}, 9));
  ASSERT_TRUE(b->connect({.gid = gid, .qpn = a->qp_num(), .psn = 9}, 7));
  for (size_t i = 0; i < n; ++i) buf[i] = char('a' + i % 26);
  Sge src = mr->sge(0, uint32_t(n));
  SendWr w{1, WrOpcode::RdmaWrite, kSendSignaled, {&src, 1}};
  w.remote_addr = uint64_t(buf.data() + n);
  w.rkey = mr->rkey();
  ASSERT_TRUE(a->post_send(w));
  Wc wc[1];
  auto got = cq->wait(wc, 60000);  // correctness, not speed: a lossy or throttled engine is slow
  ASSERT_TRUE(got && *got == 1);
  EXPECT_EQ(wc[0].status, WcStatus::Success);
  EXPECT_EQ(0, std::memcmp(buf.data(), buf.data() + n, n));
}
}  // namespace

TEST(Api, SrqLimitEventThroughTheAsyncFd) {
  auto dev = std::move(*Device::open("uroce_lo"));
  auto first = dev->get_async_event();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->type, AsyncEventType::PortActive);
  EXPECT_EQ(dev->get_async_event().error().code, EAGAIN);
  EXPECT_FALSE(readable(dev->async_fd(), 0));  // drained

  auto pd = std::move(*dev->alloc_pd());
  auto cq = std::move(*dev->create_cq(64));
  auto srq = std::move(*pd->create_srq(16, 1, 0));
  std::vector<uint8_t> buf(16 * 256 + 64, 0);
  auto mr = std::move(*pd->reg_mr(buf.data(), buf.size(), kAccessLocalWrite));
  for (uint64_t i = 0; i < 8; ++i) {
    Sge s = mr->sge(i * 256, 256);
    ASSERT_TRUE(srq->post_recv({i, {&s, 1}}));
  }
  ASSERT_TRUE(srq->arm_limit(7));
  QpInit with_srq{QpType::RC, cq.get(), cq.get(), {}, false, srq.get()};
  QpInit plain{QpType::RC, cq.get(), cq.get(), {}, false, nullptr};
  auto rx1 = std::move(*pd->create_qp(with_srq)), rx2 = std::move(*pd->create_qp(with_srq));
  auto tx1 = std::move(*pd->create_qp(plain)), tx2 = std::move(*pd->create_qp(plain));
  Gid gid = *dev->query_gid(0);
  ASSERT_TRUE(tx1->connect({gid, rx1->qp_num(), 1, 0, 0, 0}, 2));
  ASSERT_TRUE(rx1->connect({gid, tx1->qp_num(), 2, 0, 0, 0}, 1));
  ASSERT_TRUE(tx2->connect({gid, rx2->qp_num(), 3, 0, 0, 0}, 4));
  ASSERT_TRUE(rx2->connect({gid, tx2->qp_num(), 4, 0, 0, 0}, 3));
  QpAttr q = rx1->query();
  EXPECT_EQ(q.qp_state, QpState::Rts);
  EXPECT_EQ(q.dest_qp_num, tx1->qp_num());
  EXPECT_EQ(q.path_mtu, Mtu::Mtu4096);

  std::memcpy(buf.data() + 16 * 256, "from-1", 6);
  Sge s = mr->sge(16 * 256, 6);
  ASSERT_TRUE(tx1->post_send({100, WrOpcode::Send, 0, {&s, 1}}));
  ASSERT_TRUE(tx2->post_send({200, WrOpcode::Send, 0, {&s, 1}}));
  // Two receives taken from the SRQ: 6 left, below the limit of 7.
  Wc wc[4];
  int got = 0;
  for (int i = 0; i < 200 && got < 2; ++i) {
    auto r = cq->wait({wc + got, size_t(4 - got)}, 50);
    ASSERT_TRUE(r);
    got += *r;
  }
  ASSERT_EQ(got, 2);
  EXPECT_EQ(wc[0].wr_id, 0u);
  EXPECT_EQ(wc[1].wr_id, 1u);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(buf.data()), 6), "from-1");
  ASSERT_TRUE(readable(dev->async_fd(), 5000));
  auto e = dev->get_async_event();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->type, AsyncEventType::SrqLimitReached);
  EXPECT_EQ(e->srq_handle, srq->handle());
  EXPECT_EQ(srq->limit(), 0u);
  EXPECT_EQ(srq->posted(), 6u);
  EXPECT_FALSE(dev->get_async_event());
}

TEST(Api, SolicitedOnlyArmingWakesOnSolicitedCompletions) {
  auto dev = std::move(*Device::open("uroce_lo"));
  auto pd = std::move(*dev->alloc_pd());
  auto scq = std::move(*dev->create_cq(16)), rcq = std::move(*dev->create_cq(16));
  std::vector<uint8_t> buf(1024);
  auto mr = std::move(*pd->reg_mr(buf.data(), buf.size(), kAccessLocalWrite));
  auto a = std::move(*pd->create_qp({QpType::RC, scq.get(), scq.get()}));
  auto b = std::move(*pd->create_qp({QpType::RC, rcq.get(), rcq.get()}));
  Gid gid = *dev->query_gid(0);
  ASSERT_TRUE(a->connect({gid, b->qp_num(), 9, 0, 0, 0}, 8));
  ASSERT_TRUE(b->connect({gid, a->qp_num(), 8, 0, 0, 0}, 9));
  for (uint64_t i = 0; i < 2; ++i) {
    Sge r = mr->sge(512 + i * 256, 256);
    ASSERT_TRUE(b->post_recv({i, {&r, 1}}));
  }
  ASSERT_TRUE(rcq->req_notify(/*solicited_only=*/true));
  Sge s = mr->sge(0, 16);
  ASSERT_TRUE(a->post_send({1, WrOpcode::Send, 0, {&s, 1}}));  // not solicited: no event
  Wc wc[2];
  int got = 0;
  for (int i = 0; i < 2000 && (got = rcq->poll(wc)) == 0; ++i) usleep(5000);  // without the fd, 10 s at most
  ASSERT_EQ(got, 1);
  EXPECT_FALSE(readable(rcq->fd(), 100));
  ASSERT_TRUE(a->post_send({2, WrOpcode::Send, kSendSolicited, {&s, 1}}));
  ASSERT_TRUE(readable(rcq->fd(), 5000));
  ASSERT_EQ(rcq->poll(wc), 1);
  EXPECT_TRUE(wc[0].solicited);
  EXPECT_EQ(wc[0].wr_id, 1u);
}

// A completion means its send-queue slot is free: a program that keeps the queue full, posting
// one request per completion it polls, must never see the queue full.
TEST(Api, CompletionFreesItsSlotBeforeItIsSeen) {
  auto dev = std::move(*Device::open("uroce_lo"));
  auto pd = std::move(*dev->alloc_pd());
  auto cq = std::move(*dev->create_cq(64)), rcq = std::move(*dev->create_cq(64));
  std::vector<uint8_t> src(64, 1), dst(64, 0);
  auto sm = std::move(*pd->reg_mr(src.data(), src.size(), kAccessLocalWrite));
  auto dm = std::move(*pd->reg_mr(dst.data(), dst.size(), kAccessLocalWrite | kAccessRemoteWrite));
  auto a = std::move(*pd->create_qp({QpType::RC, cq.get(), cq.get(), QpCap{4, 1, 1, 1, 0}}));
  auto b = std::move(*pd->create_qp({QpType::RC, rcq.get(), rcq.get()}));
  Gid gid = *dev->query_gid(0);
  ASSERT_TRUE(a->connect({gid, b->qp_num(), 5, 0, 0, 0}, 6));
  ASSERT_TRUE(b->connect({gid, a->qp_num(), 6, 0, 0, 0}, 5));
  Sge s = sm->sge(0, 64);
  SendWr w{0, WrOpcode::RdmaWrite, kSendSignaled, {&s, 1}, 0, uint64_t(dst.data()), dm->rkey()};
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(a->post_send(w));
  int done = 0;
  // Busy-polls, as the programs this protects do, but yields when the CQ is empty so that the
  // engine gets the CPU on a loaded machine. Bounded by 60 s.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (long spins = 0; done < 20000; ++spins) {
    if ((spins & 1023) == 0) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "after " << done;
    }
    Wc wc[4];
    int n = cq->poll(wc);
    if (n == 0) std::this_thread::yield();
    for (int k = 0; k < n; ++k) {
      ASSERT_EQ(wc[k].status, WcStatus::Success);
      auto st = a->post_send(w);
      ASSERT_TRUE(st) << "after " << done << " completions: " << st.error().message;
      ++done;
    }
  }
  EXPECT_GE(done, 20000);  // the last poll may return more than one
}

// A CQ or PD destroyed while a QP or MR still uses it lives on until its last user is gone:
// its event fd stays open (the engine may still write it) and the QP keeps working.
TEST(Api, ParentsLiveAsLongAsTheirChildren) {
  auto dev = std::move(*Device::open("uroce_lo"));
  auto pd = std::move(*dev->alloc_pd());
  auto cq = std::move(*dev->create_cq(16));
  auto live = std::move(*dev->create_cq(16));
  auto a = std::move(*pd->create_qp({QpType::RC, cq.get(), cq.get()}));
  auto b = std::move(*pd->create_qp({QpType::RC, live.get(), live.get()}));
  std::vector<char> buf(128, 0);
  auto mr = std::move(*pd->reg_mr(buf.data(), buf.size(), kAccessLocalWrite));
  EXPECT_TRUE(cq->busy());
  EXPECT_TRUE(pd->busy());
  const int fd = cq->fd();
  ASSERT_TRUE(cq->req_notify());
  cq.reset();
  pd.reset();
  EXPECT_NE(fcntl(fd, F_GETFD), -1) << "the event fd of a CQ that a QP still uses was closed";
  Gid gid = *dev->query_gid(0);
  ASSERT_TRUE(a->connect({.gid = gid, .qpn = b->qp_num(), .psn = 1}, 2));
  ASSERT_TRUE(b->connect({.gid = gid, .qpn = a->qp_num(), .psn = 2}, 1));
  std::strcpy(buf.data(), "still here");
  Sge src = mr->sge(0, 11), dst = mr->sge(64, 11);
  ASSERT_TRUE(b->post_recv({1, {&dst, 1}}));
  ASSERT_TRUE(a->post_send({2, WrOpcode::Send, kSendSignaled, {&src, 1}}));
  Wc wc[1];
  auto got = live->wait(wc, 10000);
  ASSERT_TRUE(got && *got == 1);
  EXPECT_EQ(wc[0].status, WcStatus::Success);
  EXPECT_STREQ(buf.data() + 64, "still here");
  a.reset();  // the CQ's last user: now it goes, and its fd with it
  EXPECT_EQ(fcntl(fd, F_GETFD), -1);
}

// Runts, an empty datagram among them, are dropped and counted.
TEST(Api, EmptyAndShortDatagramsAreCounted) {
  // An address of this process alone: on the first free 127.0.0.x, a device of a test running
  // beside this one could still be resending to it, and its packets would count too.
  DeviceOptions o;
  o.addr = "127.0.2." + std::to_string(10 + getpid() % 200);
  auto dev = std::move(*Device::open("uroce_lo", o));
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(s, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(4791);
  to.sin_addr.s_addr = htonl(dev->ipv4());
  const char junk[8] = {};
  ASSERT_EQ(sendto(s, junk, 0, 0, reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
  ASSERT_EQ(sendto(s, junk, 8, 0, reinterpret_cast<sockaddr*>(&to), sizeof to), 8);
  close(s);
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (dev->counters()["rx_runt"] < 2 && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto c = dev->counters();
  EXPECT_EQ(c["rx_runt"], 2u);
  EXPECT_EQ(c["rx_packets"], 2u);
}

// A datagram's payload is read as it is posted, as a NIC reads it at the doorbell: a sender
// that reuses its buffer at once (UCX's UD transport does, for a request it takes as
// answered) still sends what it posted. The application polls first, so the device would
// otherwise build the packet at its next poll, from the buffer as it is then.
TEST(Api, ADatagramCarriesItsBufferAsPosted) {
  auto dev = std::move(*Device::open("uroce_lo"));
  auto pd = std::move(*dev->alloc_pd());
  auto scq = std::move(*dev->create_cq(16));
  auto rcq = std::move(*dev->create_cq(16));
  auto a = std::move(*pd->create_qp({QpType::UD, scq.get(), scq.get()}));
  auto b = std::move(*pd->create_qp({QpType::UD, rcq.get(), rcq.get()}));
  ASSERT_TRUE(a->activate_ud(0x11));
  ASSERT_TRUE(b->activate_ud(0x11));
  constexpr uint32_t kLen = 256, kGrh = 40;
  std::vector<uint8_t> src(kLen, 0x5a), dst(kGrh + kLen, 0);
  auto smr = std::move(*pd->reg_mr(src.data(), src.size(), kAccessLocalWrite));
  auto rmr = std::move(*pd->reg_mr(dst.data(), dst.size(), kAccessLocalWrite));
  Sge r = rmr->sge(0, uint32_t(dst.size()));
  ASSERT_TRUE(b->post_recv({1, {&r, 1}}));
  Wc wc[1];
  for (int i = 0; i < 8; ++i) ASSERT_EQ(scq->poll(wc), 0);  // a polling application
  const Ah ah{*dev->query_gid(0)};
  Sge s = smr->sge(0, kLen);
  SendWr w{2, WrOpcode::Send, kSendSignaled, {&s, 1}};
  w.ah = &ah;
  w.remote_qpn = b->qp_num();
  w.remote_qkey = 0x11;
  ASSERT_TRUE(a->post_send(w));
  std::memset(src.data(), 0xee, src.size());  // reused at once
  auto sent = scq->wait(wc, 10000);
  ASSERT_TRUE(sent && *sent == 1);
  EXPECT_EQ(wc[0].status, WcStatus::Success);
  auto got = rcq->wait(wc, 10000);
  ASSERT_TRUE(got && *got == 1);
  EXPECT_EQ(wc[0].status, WcStatus::Success);
  EXPECT_EQ(wc[0].byte_len, kGrh + kLen);
  EXPECT_EQ(std::vector<uint8_t>(dst.begin() + kGrh, dst.end()), std::vector<uint8_t>(kLen, 0x5a));
}

// A device bound to an IPv6 address: its GID table holds that address only, and RC works
// over it (one device, two QPs, as on loopback ::1).
TEST(Api, Ipv6LoopbackDevice) {
  DeviceOptions o;
  o.addr = "::1";
  auto dev = Device::open("uroce_lo", o);
  ASSERT_TRUE(dev) << dev.error().message;
  ASSERT_EQ((*dev)->query_port().gid_tbl_len, 1u);
  Gid gid = *(*dev)->query_gid(0);
  EXPECT_EQ(gid.to_string(), "::1");
  EXPECT_EQ((*dev)->query_gid(1).error().code, EINVAL);
  EXPECT_EQ((*dev)->ipv4(), 0u);
  write_to_self(**dev, gid, 3000);
  auto c = (*dev)->counters();
  EXPECT_GT(c["rx_icrc_ip_seen"], 0u);
  EXPECT_EQ(c["rx_bad_icrc"], 0u);
}

// Congestion control from the options or, where they leave it unset, the environment: an
// unknown name in UROCE_CC or UROCE_CC_PARAMS, or a bad line rate, is refused with EINVAL and
// named; DCQCN at 25 Gb/s paces a 256 KiB WRITE through the real engine and it arrives whole.
TEST(Api, CongestionControlFromOptionsOrEnvironment) {
  EXPECT_FALSE(parse_congestion_control("bbr"));
  for (auto c : {CongestionControl::None, CongestionControl::Dcqcn, CongestionControl::Timely, CongestionControl::Swift})
    EXPECT_EQ(parse_congestion_control(to_string(c)), c);
  DeviceOptions o;
  setenv("UROCE_CC", "bogus", 1);
  auto bad = Device::open("uroce_lo", o);
  unsetenv("UROCE_CC");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, EINVAL);
  EXPECT_NE(bad.error().message.find("UROCE_CC: unknown value 'bogus'"), std::string::npos) << bad.error().message;
  o.cc = CongestionControl::Dcqcn;
  setenv("UROCE_CC_PARAMS", "nope", 1);
  EXPECT_EQ(Device::open("uroce_lo", o).error().code, EINVAL);
  unsetenv("UROCE_CC_PARAMS");
  o.cc_params = DcqcnSet::Mellanox;
  o.line_gbps = -1;
  EXPECT_EQ(Device::open("uroce_lo", o).error().code, EINVAL);
  o.line_gbps = 25;
  auto dev = Device::open("uroce_lo", o);
  ASSERT_TRUE(dev) << dev.error().message;
  write_to_self(**dev, *(*dev)->query_gid(0), 256 * 1024);
  EXPECT_EQ((*dev)->counters()["rx_cnps"], 0u);
}

// Swift through the real engine: its window follows loopback's round trips (the smallest one
// measured is the base) and a 4 MiB WRITE, a thousand packets, arrives whole; with 1 % of the
// packets lost too, under selective repeat.
TEST(Api, SwiftWindowsTheRealEngine) {
  for (double loss : {0.0, 0.01}) {
    DeviceOptions o;
    o.cc = CongestionControl::Swift;
    o.reliability = Reliability::Sr;
    o.rx_loss = loss;
    o.rx_loss_seed = 3;
    auto dev = Device::open("uroce_lo", o);
    ASSERT_TRUE(dev) << dev.error().message;
    write_to_self(**dev, *(*dev)->query_gid(0), 4 << 20);
    auto c = (*dev)->counters();
    EXPECT_EQ(c["rx_injected_loss"] > 0, loss > 0);
  }
}

// Reliability from the environment, and the engine's injected loss: an unknown mode in
// UROCE_RELIABILITY or a bad loss is refused with EINVAL; a 4 MiB WRITE under selective repeat
// through a device that loses 2% of what it receives arrives whole, its holes held and reported.
TEST(Api, SelectiveRepeatThroughALossyEngine) {
  DeviceOptions o;
  setenv("UROCE_RELIABILITY", "bogus", 1);
  auto bad = Device::open("uroce_lo", o);
  unsetenv("UROCE_RELIABILITY");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, EINVAL);
  EXPECT_NE(bad.error().message.find("'bogus' (gbn or sr)"), std::string::npos) << bad.error().message;
  o.reliability = Reliability::Sr;
  o.rx_loss = 1.5;
  EXPECT_EQ(Device::open("uroce_lo", o).error().code, EINVAL);
  o.rx_loss = 0.02;
  o.rx_loss_seed = 5;
  auto dev = Device::open("uroce_lo", o);
  ASSERT_TRUE(dev) << dev.error().message;
  write_to_self(**dev, *(*dev)->query_gid(0), 4 << 20);
  auto c = (*dev)->counters();
  EXPECT_GT(c["rx_injected_loss"], 0u);
  EXPECT_GT(c["rx_sr_held"], 0u);
  EXPECT_GT(c["rx_sacks"], 0u);
  EXPECT_EQ(c["tx_naks_seq"], 0u);
}

// Reliability per QP: ConnectOptions::reliability or set_reliability in RESET/INIT, over the
// device's default; refused once the QP talks, and for UD.
TEST(Api, ReliabilityPerQp) {
  auto dev = std::move(*Device::open("uroce_lo"));
  auto pd = std::move(*dev->alloc_pd());
  auto cq = std::move(*dev->create_cq(16));
  auto a = std::move(*pd->create_qp({QpType::RC, cq.get(), cq.get()}));
  auto b = std::move(*pd->create_qp({QpType::RC, cq.get(), cq.get()}));
  auto u = std::move(*pd->create_qp({QpType::UD, cq.get(), cq.get()}));
  EXPECT_FALSE(a->selective_repeat());  // the device's default: go-back-N
  EXPECT_FALSE(parse_reliability("fast"));
  EXPECT_EQ(u->set_reliability(Reliability::Sr).error().code, EINVAL);
  ASSERT_TRUE(b->set_reliability(Reliability::Sr));
  EXPECT_TRUE(b->selective_repeat());
  const Gid gid = *dev->query_gid(0);
  ConnectOptions o;
  o.reliability = Reliability::Sr;
  ASSERT_TRUE(a->connect({.gid = gid, .qpn = b->qp_num(), .psn = 7}, 9, o));
  ASSERT_TRUE(b->connect({.gid = gid, .qpn = a->qp_num(), .psn = 9}, 7));
  EXPECT_TRUE(a->selective_repeat());
  EXPECT_EQ(a->set_reliability(Reliability::Gbn).error().code, EINVAL);  // in RTS
  EXPECT_EQ(b->connect({.gid = gid, .qpn = a->qp_num(), .psn = 9}, 7, o).error().code, EINVAL);  // in RTS
}

// Congestion control per QP, the same way: over the device's default, refused for TIMELY and
// Swift on UC (no ACKs to time), and once the QP talks.
TEST(Api, CongestionControlPerQp) {
  auto dev = std::move(*Device::open("uroce_lo"));
  auto pd = std::move(*dev->alloc_pd());
  auto cq = std::move(*dev->create_cq(16));
  auto a = std::move(*pd->create_qp({QpType::RC, cq.get(), cq.get()}));
  auto b = std::move(*pd->create_qp({QpType::RC, cq.get(), cq.get()}));
  auto uc = std::move(*pd->create_qp({QpType::UC, cq.get(), cq.get()}));
  EXPECT_EQ(a->congestion_control(), CongestionControl::None);
  EXPECT_EQ(uc->set_congestion_control(CongestionControl::Timely).error().code, EINVAL);
  EXPECT_EQ(uc->set_congestion_control(CongestionControl::Swift).error().code, EINVAL);
  ASSERT_TRUE(uc->set_congestion_control(CongestionControl::Dcqcn));
  EXPECT_EQ(uc->congestion_control(), CongestionControl::Dcqcn);
  ASSERT_TRUE(b->set_congestion_control(CongestionControl::Timely));
  const Gid gid = *dev->query_gid(0);
  ConnectOptions o;
  o.cc = CongestionControl::Dcqcn;
  ASSERT_TRUE(a->connect({.gid = gid, .qpn = b->qp_num(), .psn = 7}, 9, o));
  ASSERT_TRUE(b->connect({.gid = gid, .qpn = a->qp_num(), .psn = 9}, 7));
  EXPECT_EQ(a->congestion_control(), CongestionControl::Dcqcn);
  EXPECT_EQ(b->congestion_control(), CongestionControl::Timely);
  EXPECT_EQ(a->set_congestion_control(CongestionControl::None).error().code, EINVAL);  // in RTS
  auto c = std::move(*pd->create_qp({QpType::RC, cq.get(), cq.get()}));
  ASSERT_TRUE(c->set_congestion_control(CongestionControl::Swift));
  EXPECT_EQ(c->congestion_control(), CongestionControl::Swift);
}

// A device takes about twenty descriptors (UDP sockets, eventfds, epoll sets, its same-host
// registry socket). Under an RLIMIT_NOFILE that leaves 0, 1, ... 40 free, the open either
// succeeds or fails with EMFILE and names what it could not make; it leaves no descriptor
// behind either way, and closing it returns (a device opened half built used to hang for ever
// in its destructor). In a child, forked before any engine thread exists.
// Not built with the sanitizers: UBSan's vptr check opens a pipe to test the memory it checks,
// and out of descriptors reports objects under construction as invalid. The release stage of
// `make test` runs it.
#ifndef __SANITIZE_ADDRESS__
TEST(Api, OpeningShortOfDescriptorsFailsCleanly) {
  pid_t child = test::spawn([] {
    rlimit old{};
    if (getrlimit(RLIMIT_NOFILE, &old) != 0) return 10;
    test::fill_fd_gaps();
    int failed = 0, opened = 0;
    for (int spare = 0; spare <= 40; ++spare) {
      const int before = test::open_fds();
      rlimit low{rlim_t(before + spare), old.rlim_max};
      if (setrlimit(RLIMIT_NOFILE, &low) != 0) return 11;
      {
        auto dev = Device::open("uroce_lo", {});
        if (dev) {
          ++opened;
        } else if (dev.error().code != EMFILE || dev.error().message.find(std::strerror(EMFILE)) == std::string::npos) {
          std::fprintf(stderr, "%d spare: %d, %s\n", spare, dev.error().code, dev.error().message.c_str());
          return 12;
        } else {
          ++failed;
        }
      }
      if (setrlimit(RLIMIT_NOFILE, &old) != 0) return 13;
      if (test::open_fds() != before) {
        std::fprintf(stderr, "%d spare: %d descriptors left\n", spare, test::open_fds() - before);
        return 14;
      }
    }
    return failed > 0 && opened > 0 ? 0 : 15;
  });
  EXPECT_EQ(test::reap(child, 60), 0) << "-1: it hung (see stderr for the rest)";
}
#endif  // __SANITIZE_ADDRESS__

// Completions carry the time the device made them, on its clock: a SEND's two completions lie
// between two readings of Device::clock_ns around it, the receive's no earlier than the
// moment the SEND was posted.
TEST(Api, CompletionsCarryTheDeviceClock) {
  auto dev = std::move(*Device::open("uroce_lo"));
  auto pd = std::move(*dev->alloc_pd());
  auto cq = std::move(*dev->create_cq(16));
  std::vector<char> buf(256, 0);
  auto mr = std::move(*pd->reg_mr(buf.data(), buf.size(), kAccessLocalWrite));
  auto a = std::move(*pd->create_qp({QpType::RC, cq.get(), cq.get()}));
  auto b = std::move(*pd->create_qp({QpType::RC, cq.get(), cq.get()}));
  Gid gid = *dev->query_gid(0);
  ASSERT_TRUE(a->connect({.gid = gid, .qpn = b->qp_num(), .psn = 3}, 4));
  ASSERT_TRUE(b->connect({.gid = gid, .qpn = a->qp_num(), .psn = 4}, 3));
  Sge src = mr->sge(0, 32), dst = mr->sge(128, 32);
  ASSERT_TRUE(b->post_recv({1, {&dst, 1}}));
  const uint64_t t0 = dev->clock_ns();
  ASSERT_TRUE(a->post_send({2, WrOpcode::Send, kSendSignaled, {&src, 1}}));
  Wc wc[2];
  int got = 0;
  for (int i = 0; i < 100 && got < 2; ++i) {
    auto n = cq->wait({wc + got, size_t(2 - got)}, 100);
    ASSERT_TRUE(n);
    got += *n;
  }
  const uint64_t t1 = dev->clock_ns();
  ASSERT_EQ(got, 2);
  for (const Wc& w : wc) {
    EXPECT_EQ(w.status, WcStatus::Success);
    EXPECT_GE(w.timestamp_ns, t0) << "wr " << w.wr_id;
    EXPECT_LE(w.timestamp_ns, t1) << "wr " << w.wr_id;
  }
}
