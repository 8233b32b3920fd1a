// The same-host shared-memory link: two devices of this user agree on rings by themselves, the
// transport above is unchanged (every byte, every completion), a device with it off still
// talks UDP to one with it on, a restarted peer gets a new channel, a peer that writes
// garbage into the rings is dropped and counted, never trusted, rings it could shrink are
// refused, a stopped peer stalls nothing, and a name someone else took is said and not trusted.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <csignal>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <new>
#include <random>
#include <thread>
#include <vector>

#include "../common/api_side.hpp"
#include "../common/proc.hpp"
#include "../common/seed.hpp"
#include "../common/shm_forged_peer.hpp"
#include "link/fd_passing.hpp"
#include "link/shm_registry.hpp"
#include "link/shm_ring.hpp"
#include "uroce/uroce.hpp"

using namespace uroce;

namespace {

struct Side : test::ApiSide {
  explicit Side(bool shm, const std::string& addr = "") : ApiSide(options(shm, addr)) {}
  static DeviceOptions options(bool shm, const std::string& addr) {
    DeviceOptions o;
    o.same_host_shm = shm;
    o.addr = addr;
    return o;
  }
};

// Nothing is lost between these devices, so a retransmission would mean a thread that was not
// scheduled for the default timeout's 67 ms: ~1 s instead keeps packet counts exact on a
// loaded machine.
ConnectOptions patient() {
  ConnectOptions o;
  o.timeout = 18;
  return o;
}

void connect(test::ApiSide& a, test::ApiSide& b) {
  ASSERT_TRUE(a.qp->connect(b.endpoint(7), 5, patient()));
  ASSERT_TRUE(b.qp->connect(a.endpoint(5), 7, patient()));
}

// An address of this process alone in 127.<net>/16, away from the first-free 127.0.0.x pool:
// tests run side by side.
std::string own_addr(uint32_t net) {
  return Gid::from_ipv4((127u << 24) | (net << 16) | uint32_t(getpid() & 0xff00) | uint32_t(1 + getpid() % 254)).to_string();
}

std::vector<Wc> wait_for(test::ApiSide& s, size_t want) {
  std::vector<Wc> got;
  Wc wc[16];
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (got.size() < want && std::chrono::steady_clock::now() < end) {
    auto r = s.cq->wait(wc, 10);
    EXPECT_TRUE(r);
    if (r) got.insert(got.end(), wc, wc + *r);
  }
  return got;
}

// n SENDs of len bytes from a to b and one 256 KiB WRITE, all checked.
void traffic(Side& a, Side& b, uint64_t seed, int n = 50, uint32_t len = 10'000) {
  std::mt19937_64 rng(seed);
  for (auto& x : a.buf) x = uint8_t(rng());
  for (int i = 0; i < n; ++i) {
    Sge r = b.mr->sge(uint64_t(i % 8) * len, len);
    ASSERT_TRUE(b.qp->post_recv({uint64_t(i), {&r, 1}}));
    Sge s = a.mr->sge(uint64_t(i) * 100, len);
    ASSERT_TRUE(a.qp->post_send({uint64_t(i), WrOpcode::Send, kSendSignaled, {&s, 1}}));
    auto rx = wait_for(b, 1);
    ASSERT_EQ(rx.size(), 1u) << "message " << i;
    ASSERT_EQ(rx[0].status, WcStatus::Success);
    ASSERT_EQ(rx[0].byte_len, len);
    ASSERT_EQ(std::memcmp(b.buf.data() + (i % 8) * len, a.buf.data() + i * 100, len), 0) << "message " << i;
    auto tx = wait_for(a, 1);
    ASSERT_EQ(tx.size(), 1u);
    ASSERT_EQ(tx[0].status, WcStatus::Success);
  }
  Sge w = a.mr->sge(4096, 256 << 10);
  SendWr wr{99, WrOpcode::RdmaWrite, kSendSignaled, {&w, 1}};
  wr.remote_addr = uint64_t(b.buf.data()) + (512 << 10);
  wr.rkey = b.mr->rkey();
  ASSERT_TRUE(a.qp->post_send(wr));
  auto tx = wait_for(a, 1);
  ASSERT_EQ(tx.size(), 1u);
  ASSERT_EQ(tx[0].status, WcStatus::Success);
  ASSERT_EQ(std::memcmp(b.buf.data() + (512 << 10), a.buf.data() + 4096, 256 << 10), 0);
}

}  // namespace

TEST(SameHost, TwoDevicesUseTheRingsForEveryPacket) {
  uint64_t seed = test::test_seed(21);
  SCOPED_TRACE("seed " + std::to_string(seed));
  Side a(true), b(true);
  connect(a, b);
  traffic(a, b, seed);
  EXPECT_EQ(a.counter("shm_channels"), 1u);
  EXPECT_EQ(b.counter("shm_channels"), 1u);
  // Every packet either way went through shared memory, none was lost or malformed.
  EXPECT_EQ(a.counter("shm_tx_packets"), a.counter("tx_packets"));
  EXPECT_EQ(b.counter("shm_tx_packets"), b.counter("tx_packets"));
  EXPECT_EQ(a.counter("shm_rx_packets"), a.counter("rx_packets"));
  EXPECT_EQ(b.counter("shm_rx_packets"), a.counter("shm_tx_packets"));
  EXPECT_EQ(a.counter("rx_bad_icrc") + b.counter("rx_bad_icrc"), 0u);
  // ICRC offload: the channel exists from the QPs' RTR on, so no packet carries an ICRC.
  EXPECT_EQ(a.counter("rx_icrc_absent"), a.counter("rx_packets"));
  EXPECT_EQ(b.counter("rx_icrc_absent"), b.counter("rx_packets"));
  EXPECT_EQ(a.counter("retransmitted_packets") + b.counter("retransmitted_packets"), 0u);
  EXPECT_GT(a.counter("tx_packets"), 100u);
}

// A payload that lies in one SGE goes by reference: the same-host link copies it from the MR
// straight into the ring, UDP sends it from the MR (one copy fewer either way). A packet whose
// bytes span SGEs is gathered as before; READ responses go by reference too. Every byte
// arrives, every ICRC is right.
TEST(SameHost, PayloadsInOneSgeGoByReference) {
  uint64_t seed = test::test_seed(27);
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (bool shm : {true, false}) {
    SCOPED_TRACE(shm ? "shared memory" : "udp");
    Side a(shm), b(shm);
    QpCap cap;
    cap.max_send_sge = 3;
    a.qp = std::move(*a.pd->create_qp({QpType::RC, a.cq.get(), a.cq.get(), cap, false, nullptr}));
    ConnectOptions o = patient();
    o.path_mtu = Mtu::Mtu1024;
    ASSERT_TRUE(a.qp->connect(b.endpoint(7), 5, o));
    ASSERT_TRUE(b.qp->connect(a.endpoint(5), 7, o));
    std::mt19937_64 rng(seed);
    for (auto& x : a.buf) x = uint8_t(rng());
    for (auto& x : b.buf) x = uint8_t(rng());

    // 10000 bytes in one SGE: 10 packets, each by reference.
    Sge r1 = b.mr->sge(0, 10000);
    ASSERT_TRUE(b.qp->post_recv({1, {&r1, 1}}));
    Sge s1 = a.mr->sge(100, 10000);
    ASSERT_TRUE(a.qp->post_send({1, WrOpcode::Send, kSendSignaled, {&s1, 1}}));
    // 4500 bytes in three SGEs of 1500: packets 1 and 2 span two SGEs and are gathered.
    Sge r2 = b.mr->sge(20000, 4500);
    ASSERT_TRUE(b.qp->post_recv({2, {&r2, 1}}));
    Sge s2[3] = {a.mr->sge(30000, 1500), a.mr->sge(40000, 1500), a.mr->sge(50000, 1500)};
    ASSERT_TRUE(a.qp->post_send({2, WrOpcode::Send, kSendSignaled, {s2, 3}}));
    // A READ of 100000 bytes: 98 responses from b.
    Sge d = a.mr->sge(200000, 100000);
    SendWr rd{3, WrOpcode::RdmaRead, kSendSignaled, {&d, 1}};
    rd.remote_addr = uint64_t(b.buf.data()) + 300000;
    rd.rkey = b.mr->rkey();
    ASSERT_TRUE(a.qp->post_send(rd));

    auto rx = wait_for(b, 2);
    ASSERT_EQ(rx.size(), 2u);
    for (const Wc& w : rx) EXPECT_EQ(w.status, WcStatus::Success);
    auto tx = wait_for(a, 3);
    ASSERT_EQ(tx.size(), 3u);
    for (const Wc& w : tx) EXPECT_EQ(w.status, WcStatus::Success);
    EXPECT_EQ(std::memcmp(b.buf.data(), a.buf.data() + 100, 10000), 0);
    for (int i = 0; i < 3; ++i)
      EXPECT_EQ(std::memcmp(b.buf.data() + 20000 + i * 1500, a.buf.data() + 30000 + i * 10000, 1500), 0) << i;
    EXPECT_EQ(std::memcmp(a.buf.data() + 200000, b.buf.data() + 300000, 100000), 0);

    // UDP sends them from the MR too (an iovec per piece); the ICRC covers the pieces.
    EXPECT_EQ(a.counter("tx_payload_by_ref"), 10u + 3u);
    EXPECT_EQ(b.counter("tx_payload_by_ref"), 98u);
    EXPECT_EQ(a.counter("rx_bad_icrc") + b.counter("rx_bad_icrc"), 0u);
    EXPECT_EQ(a.counter("retransmitted_packets") + b.counter("retransmitted_packets"), 0u);
  }
}

// A polling thread reads only the rings while same-host channels exist; what comes over UDP
// meanwhile (here from a device with shared memory off) is the engine thread's, which sleeps
// on the socket: a busy-polling application still gets it.
TEST(SameHost, APollingThreadStillGetsWhatComesOverUdp) {
  Side a(true), b(true), c(false);
  connect(a, b);
  traffic(b, a, test::test_seed(28), 2);  // a channel between a and b exists
  ASSERT_EQ(a.counter("shm_channels"), 1u);
  auto qp2 = std::move(*a.pd->create_qp({QpType::RC, a.cq.get(), a.cq.get(), {}, false, nullptr}));
  Endpoint a2{*a.dev->query_gid(0), qp2->qp_num(), 9, uint64_t(a.buf.data()), a.mr->rkey(), a.buf.size()};
  ASSERT_TRUE(qp2->connect(c.endpoint(8), 9));
  ASSERT_TRUE(c.qp->connect(a2, 8));
  Sge r = a.mr->sge(0, 100);
  ASSERT_TRUE(qp2->post_recv({77, {&r, 1}}));
  std::memcpy(c.buf.data(), "over-udp", 8);
  Sge s = c.mr->sge(0, 100);
  ASSERT_TRUE(c.qp->post_send({1, WrOpcode::Send, 0, {&s, 1}}));
  Wc wc[4];
  int got = 0;
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!got && std::chrono::steady_clock::now() < end) got = a.cq->poll(wc);  // busy polling
  ASSERT_EQ(got, 1);
  EXPECT_EQ(wc[0].wr_id, 77u);
  EXPECT_EQ(wc[0].status, WcStatus::Success);
  EXPECT_EQ(std::memcmp(a.buf.data(), "over-udp", 8), 0);
  EXPECT_EQ(c.counter("shm_tx_packets"), 0u);
}

TEST(SameHost, OffOnEitherSideMeansUdp) {
  uint64_t seed = test::test_seed(22);
  SCOPED_TRACE("seed " + std::to_string(seed));
  Side a(false), b(true);
  connect(a, b);
  traffic(a, b, seed, 10);
  for (Side* s : {&a, &b}) {
    EXPECT_EQ(s->counter("shm_tx_packets"), 0u);
    EXPECT_EQ(s->counter("shm_rx_packets"), 0u);
  }
  EXPECT_EQ(b.counter("shm_channels"), 0u);
  EXPECT_GT(b.counter("rx_packets"), 10u);
}

TEST(SameHost, ARestartedPeerGetsANewChannel) {
  uint64_t seed = test::test_seed(23);
  SCOPED_TRACE("seed " + std::to_string(seed));
  Side a(true);
  // Not from the first-free 127.0.0.x pool: a test running beside this one could take that
  // address between b's exit and b2's start.
  const uint32_t ip = 0x7f170000u | uint32_t(getpid() & 0xff00) | uint32_t(1 + getpid() % 254);  // 127.23.x.y
  const std::string addr = Gid::from_ipv4(ip).to_string();
  {
    Side b(true, addr);
    ASSERT_EQ(*b.dev->query_gid(0), Gid::from_ipv4(ip));
    connect(a, b);
    traffic(a, b, seed, 5);
    EXPECT_EQ(a.counter("shm_channels"), 1u);
  }
  // b's process side is gone: its socket hung up. A new device takes the same address.
  Side b2(true, addr);
  a.new_qp();
  connect(a, b2);
  uint64_t before = a.counter("shm_tx_packets");
  traffic(a, b2, seed + 1, 5);
  EXPECT_EQ(a.counter("shm_channels"), 1u);  // the dead one is gone
  EXPECT_GT(a.counter("shm_tx_packets"), before);
  EXPECT_EQ(b2.counter("shm_rx_packets"), b2.counter("rx_packets"));
}

// A peer of the same user that offers a channel and then writes nonsense: first a packet
// longer than a slot, then a slot sequence no producer writes. The device counts the first,
// drops the channel at the second, and keeps working with everyone else.
TEST(SameHost, GarbageInTheRingsIsCountedAndTheChannelDropped) {
  Side victim(true), other(true);
  test::ForgedPeer f(*victim.dev->query_gid(0), /*sealed=*/true);
  ASSERT_EQ(f.answer, 'Y');
  EXPECT_EQ(victim.counter("shm_offers_refused"), 0u);
  // The rings cannot be pulled from under the victim's mapping (that would be SIGBUS there).
  EXPECT_EQ(ftruncate(f.memfd, 0), -1);
  EXPECT_EQ(errno, EPERM);

  auto poll_until = [&](const char* counter, uint64_t want) {
    Wc wc[4];
    for (int i = 0; i < 20000 && victim.counter(counter) != want; ++i) (void)victim.cq->wait(wc, 1);
    return victim.counter(counter);
  };
  link::shm::Ring& r = f.area->ring[0];
  r.slots[0].len = 1u << 30;  // longer than any slot
  r.slots[0].seq.store(1, std::memory_order_release);
  uint64_t one = 1;
  ASSERT_EQ(write(f.e0, &one, sizeof one), 8);
  EXPECT_EQ(poll_until("shm_rx_malformed", 1), 1u);
  EXPECT_EQ(victim.counter("shm_channels"), 1u);
  r.slots[1].seq.store(0x7000'0000, std::memory_order_release);  // no lap of the ring is there yet
  ASSERT_EQ(write(f.e0, &one, sizeof one), 8);
  EXPECT_EQ(poll_until("shm_channels", 0), 0u);
  EXPECT_EQ(victim.counter("rx_packets"), 0u);  // nothing of it reached the transport

  // Everyone else is unaffected.
  connect(victim, other);
  traffic(other, victim, test::test_seed(24), 5);
  EXPECT_GT(victim.counter("shm_rx_packets"), 0u);
}

// The engine reads its wake-up descriptor after every sleep and writes its peer's, under the
// engine lock: one that blocks would stop the device. A peer's blocking eventfds are made
// non-blocking (the peer shares them: it sees the flag), and a pipe passed as one is refused.
TEST(SameHost, WakeDescriptorsThatCouldBlockAreMadeNotToOrRefused) {
  Side victim(true), other(true);
  {
    test::ForgedPeer f(*victim.dev->query_gid(0), /*sealed=*/true);
    ASSERT_EQ(f.answer, 'Y');
    EXPECT_TRUE(fcntl(f.e0, F_GETFL) & O_NONBLOCK);
    EXPECT_TRUE(fcntl(f.e1, F_GETFL) & O_NONBLOCK);
    Wc wc[4];
    for (int i = 0; i < 50; ++i) (void)victim.cq->wait(wc, 1);  // the engine sleeps and wakes
  }
  {
    test::ForgedPeer f(*victim.dev->query_gid(0), /*sealed=*/true, /*pipes=*/true);
    EXPECT_EQ(f.answer, 0);
    EXPECT_EQ(victim.counter("shm_offers_refused"), 1u);
    EXPECT_FALSE(fcntl(f.e0, F_GETFL) & O_NONBLOCK);
  }
  connect(victim, other);
  traffic(other, victim, test::test_seed(26), 5);
  EXPECT_GT(victim.counter("shm_rx_packets"), 0u);
}

// Rings in a file the peer could shrink are refused: once shrunk, the victim's next read of a
// slot past the file's end would be SIGBUS, the victim's process killed by its peer. The
// victim hangs up, keeps no channel, and still talks to everyone else.
TEST(SameHost, RingsThePeerCouldShrinkAreRefused) {
  Side victim(true), other(true);
  {
    test::ForgedPeer f(*victim.dev->query_gid(0), /*sealed=*/false);
    EXPECT_EQ(f.answer, 0);
    EXPECT_EQ(victim.counter("shm_channels"), 0u);
    EXPECT_EQ(victim.counter("shm_offers_refused"), 1u);
    EXPECT_EQ(ftruncate(f.memfd, 0), 0);  // what it could have done to a mapped ring
  }
  connect(victim, other);
  traffic(other, victim, test::test_seed(25), 5);
  EXPECT_EQ(victim.counter("shm_channels"), 1u);
  EXPECT_GT(victim.counter("shm_rx_packets"), 0u);
}

// A process that forks keeps its registry entry to itself: the child holds no socket of the
// registry, so the name dies with the parent's device even while the child lives on.
TEST(SameHost, AForkedChildDoesNotHoldTheRegistry) {
  Side a(true), b(true);
  connect(a, b);
  traffic(a, b, test::test_seed(26), 2);  // a channel, with its sockets, exists
  pid_t child = fork();
  if (child == 0) {
    // Every socket this process holds: none may be a registry listener or channel.
    int held = 0;
    for (int fd = 0; fd < 4096; ++fd) {
      sockaddr_un name{};
      socklen_t len = sizeof name;
      if (getsockname(fd, reinterpret_cast<sockaddr*>(&name), &len) != 0 || name.sun_family != AF_UNIX) continue;
      sockaddr_un peer{};
      socklen_t plen = sizeof peer;
      bool registry = len > offsetof(sockaddr_un, sun_path) + 1 && std::memcmp(name.sun_path + 1, "uroce-shm/", 10) == 0;
      bool channel = getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &plen) == 0 &&
                     plen > offsetof(sockaddr_un, sun_path) + 1 && std::memcmp(peer.sun_path + 1, "uroce-shm/", 10) == 0;
      held += registry || channel;
    }
    _exit(held == 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child holds registry or channel sockets";
}

// An unreliable QP's SEND completes when it is sent, so its sender may be gone before the
// receiver looks: packets left in the ring of a peer that hung up are still delivered.
TEST(SameHost, APeerThatLeftRightAfterSendingIsStillHeard) {
  DeviceOptions quiet;  // the receiver does nothing until it polls
  quiet.progress_thread = false;
  test::ApiSide a(quiet);
  a.qp = std::move(*a.pd->create_qp({QpType::UC, a.cq.get(), a.cq.get(), {}, false, nullptr}));
  constexpr int kMsgs = 10;
  {
    Side b(true);
    b.qp = std::move(*b.pd->create_qp({QpType::UC, b.cq.get(), b.cq.get(), {}, false, nullptr}));
    connect(a, b);
    for (int i = 0; i < kMsgs; ++i) {
      Sge r = a.mr->sge(uint64_t(i) * 100, 100);
      ASSERT_TRUE(a.qp->post_recv({uint64_t(i), {&r, 1}}));
    }
    for (int i = 0; i < kMsgs; ++i) {
      std::memset(b.buf.data() + i * 100, 'a' + i, 100);
      Sge s = b.mr->sge(uint64_t(i) * 100, 100);
      ASSERT_TRUE(b.qp->post_send({uint64_t(i), WrOpcode::Send, kSendSignaled, {&s, 1}}));
    }
    ASSERT_EQ(wait_for(b, kMsgs).size(), size_t(kMsgs));  // sent, as far as UC knows
  }
  // b's device is gone; a's registry watcher sees the hang-up.
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (a.counter("shm_channels") != 0 && std::chrono::steady_clock::now() < end) usleep(1000);
  ASSERT_EQ(a.counter("shm_channels"), 0u);
  auto rx = wait_for(a, kMsgs);
  ASSERT_EQ(rx.size(), size_t(kMsgs));
  for (int i = 0; i < kMsgs; ++i) {
    EXPECT_EQ(rx[size_t(i)].status, WcStatus::Success);
    EXPECT_EQ(a.buf[size_t(i) * 100 + 99], uint8_t('a' + i));
  }
}

// A QP towards a device that is stopped (its name is there, nobody answers) waits for the
// handshake on its own thread, without the device's lock, and then starts on UDP. A ping-pong
// on another QP of the same device goes on meanwhile, and while the QP's retransmissions
// towards the stopped device ask its name again every second. (The handshake used to hold
// the lock for its one-second timeout, at RTR and every second after: ~1 s stalls.)
TEST(SameHost, AStoppedPeerStallsNothingElse) {
  // Addresses of this process alone: a device of another test that still resends to an
  // address of the shared pool (its peer gone) would open a channel to a device now there.
  Side a(true, own_addr(27)), b(true, own_addr(28));
  connect(a, b);
  traffic(a, b, test::test_seed(29), 2);
  ASSERT_EQ(a.counter("shm_channels"), 1u);
  const std::string stopped_addr = own_addr(24);
  const int stopped = test::hold_registry_name(stopped_addr);
  ASSERT_GE(stopped, 0);
  auto cq2 = std::move(*a.dev->create_cq(16));  // its error completions stay off a.cq
  auto qp2 = std::move(*a.pd->create_qp({QpType::RC, cq2.get(), cq2.get(), {}, false, nullptr}));
  std::chrono::steady_clock::duration connect_took{};
  std::atomic<bool> done{false};
  std::thread other([&] {
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_TRUE(qp2->connect({*Gid::parse(stopped_addr), 0x123, 1}, 2));
    connect_took = std::chrono::steady_clock::now() - t0;
    Sge s = a.mr->sge(0, 100);
    EXPECT_TRUE(qp2->post_send({1, WrOpcode::Send, kSendSignaled, {&s, 1}}));  // retransmitted
    done = true;
  });
  // Round trips a -> b -> a, each timed, for 3 s (the handshake and two retries) and at most
  // 10 s more while the connect has not returned.
  using Clock = std::chrono::steady_clock;
  Clock::duration worst{};
  int rounds = 0, slow = 0;
  const auto end = Clock::now() + std::chrono::seconds(3);
  for (auto t0 = Clock::now(); t0 < end || (!done && t0 < end + std::chrono::seconds(10)); t0 = Clock::now()) {
    Sge r = b.mr->sge(0, 64), s = a.mr->sge(0, 64);
    if (!b.qp->post_recv({1, {&r, 1}}) || !a.qp->post_send({2, WrOpcode::Send, kSendSignaled, {&s, 1}}) ||
        wait_for(b, 1).size() != 1 || wait_for(a, 1).size() != 1) {
      ADD_FAILURE() << "round trip " << rounds;
      break;
    }
    const auto took = Clock::now() - t0;
    worst = std::max(worst, took);
    slow += took > std::chrono::milliseconds(250);
    ++rounds;
  }
  other.join();
  // A stall under the lock lasts the handshake's second, at RTR and at each retry: several of
  // about a second. A round trip this thread was preempted in may be slow once or twice.
  EXPECT_LT(worst, std::chrono::milliseconds(900)) << rounds << " round trips";
  EXPECT_LE(slow, 2) << "round trips over 250 ms, of " << rounds;
  EXPECT_LT(connect_took, std::chrono::milliseconds(4000));
  EXPECT_EQ(a.counter("shm_channels"), 1u);  // b's; none to the stopped device
  close(stopped);
}

// Anyone may bind a device's same-host name before it opens. The device says so on stderr,
// with who holds it, counts it, and keeps UDP for that address.
TEST(SameHost, ADeviceWhoseNameIsTakenSaysSo) {
  const std::string addr = own_addr(25);
  const int holder = test::hold_registry_name(addr);
  ASSERT_GE(holder, 0);
  testing::internal::CaptureStderr();
  {
    Side a(true, addr);
    const std::string said = testing::internal::GetCapturedStderr();
    EXPECT_NE(said.find("uroce: same-host name of " + addr + " is held by pid " + std::to_string(getpid())),
              std::string::npos) << said;
    EXPECT_EQ(a.counter("shm_names_taken"), 1u);
  }
  close(holder);
  Side a(true, addr);
  EXPECT_EQ(a.counter("shm_names_taken"), 0u);
}

// The name taken by another user: a peer that looks it up checks who answers (SO_PEERCRED)
// and hands them nothing, neither memory nor eventfds; the two devices talk over UDP.
TEST(SameHost, APeerTrustsNoOtherUserWithItsMemory) {
  if (geteuid() != 0) GTEST_SKIP() << "holding the name as another user needs root";
  const std::string addr = own_addr(26);
  const uid_t uid = getuid();
  int ready[2], stop[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(stop), 0);
  // Forked before any engine thread exists. Exit code: descriptors it was handed.
  pid_t squatter = test::spawn([&] {
    if (setgid(65534) != 0 || setuid(65534) != 0) return 100;
    const int s = test::hold_registry_name(addr, uid);
    if (s < 0 || write(ready[1], "r", 1) != 1) return 101;
    int handed = 0;
    pollfd p[2] = {{s, POLLIN, 0}, {stop[0], POLLIN, 0}};
    while (poll(p, 2, 30'000) > 0 && !p[1].revents) {
      int c = accept(s, nullptr, nullptr);
      char buf[1024];
      int fds[8], got = 0;
      if (c >= 0 && link::recv_with_fds(c, buf, sizeof buf, fds, 8, &got) >= 0) handed += got;
      if (c >= 0) close(c);
    }
    return handed;
  });
  char r = 0;
  ASSERT_EQ(read(ready[0], &r, 1), 1);
  testing::internal::CaptureStderr();
  Side a(true, addr);
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("is held by pid " + std::to_string(squatter) + " (uid 65534)"), std::string::npos) << said;
  Side b(true);
  connect(b, a);  // b looks a's address up: the squatter answers
  traffic(b, a, test::test_seed(30), 5);
  EXPECT_EQ(b.counter("shm_channels"), 0u);
  EXPECT_EQ(b.counter("shm_tx_packets"), 0u);
  EXPECT_EQ(a.counter("shm_names_taken"), 1u);
  ASSERT_EQ(write(stop[1], "s", 1), 1);
  EXPECT_EQ(test::reap(squatter, 30), 0) << "descriptors handed to another user";
  for (int fd : {ready[0], ready[1], stop[0], stop[1]}) close(fd);
}
