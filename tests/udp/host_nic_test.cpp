// A host NIC shared by several processes: devices on one address through the host NIC daemon
// (uroced, started by the first of them), as two processes of a host open it. Each gets its
// own steering slot, its QPNs carry it, and RC traffic between them is byte-exact (through
// shared-memory rings, each process a peer of its own by slot, or UDP without them); a slot is
// given again once its device closes; what strangers send to the daemon's own slot (forged,
// short, MADs for nobody), or a local program to the daemon itself, changes nothing for anyone.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>

#include <cstring>
#include <random>
#include <string>

#include "../common/api_side.hpp"
#include "../common/seed.hpp"
#include "link/host_nic_proto.hpp"

using namespace uroce;
using uroce::test::ApiSide;

namespace {

constexpr int kQpnLocalBits = 18;  // link/steering.hpp: a 6-bit slot above 18 bits of QPN

DeviceOptions shared_at(const std::string& addr) {
  DeviceOptions o;
  o.addr = addr;
  o.shared = true;
  return o;
}

std::string own_address() { return "127.0.1." + std::to_string(10 + getpid() % 200); }

// A WRITE, a SEND and a READ from a to b, each of n patterned bytes, completed and compared.
void exchange(ApiSide& a, ApiSide& b, uint32_t n, uint64_t seed) {
  ConnectOptions o;
  o.timeout = 18;  // ~1 s: a retransmission from a thread not scheduled in time would change the counts
  ASSERT_TRUE(a.qp->connect(b.endpoint(100), 200, o));
  ASSERT_TRUE(b.qp->connect(a.endpoint(200), 100, o));
  test::fill_pattern(a.buf.data(), n, seed);
  Sge s = a.mr->sge(0, n);
  SendWr w{1, WrOpcode::RdmaWrite, kSendSignaled, {&s, 1}};
  w.remote_addr = uint64_t(b.buf.data());
  w.rkey = b.mr->rkey();
  ASSERT_TRUE(a.qp->post_send(w));
  Wc wc[1];
  ASSERT_EQ(*a.cq->wait(wc, 10000), 1);
  ASSERT_EQ(wc[0].status, WcStatus::Success);
  EXPECT_EQ(0, std::memcmp(a.buf.data(), b.buf.data(), n)) << "WRITE, seed " << seed;

  test::fill_pattern(a.buf.data(), n, seed + 1);
  Sge r = b.mr->sge(n, n);
  ASSERT_TRUE(b.qp->post_recv({7, {&r, 1}}));
  ASSERT_TRUE(a.qp->post_send({2, WrOpcode::Send, kSendSignaled, {&s, 1}}));
  ASSERT_EQ(*b.cq->wait(wc, 10000), 1);
  ASSERT_EQ(wc[0].status, WcStatus::Success);
  EXPECT_EQ(wc[0].byte_len, n);
  ASSERT_EQ(*a.cq->wait(wc, 10000), 1);
  EXPECT_EQ(0, std::memcmp(a.buf.data(), b.buf.data() + n, n)) << "SEND, seed " << seed;

  Sge into = a.mr->sge(2 * n, n);
  SendWr rd{3, WrOpcode::RdmaRead, kSendSignaled, {&into, 1}};
  rd.remote_addr = uint64_t(b.buf.data());
  rd.rkey = b.mr->rkey();
  ASSERT_TRUE(a.qp->post_send(rd));
  ASSERT_EQ(*a.cq->wait(wc, 10000), 1);
  ASSERT_EQ(wc[0].status, WcStatus::Success);
  EXPECT_EQ(0, std::memcmp(a.buf.data() + 2 * n, b.buf.data(), n)) << "READ, seed " << seed;
}

}  // namespace

TEST(HostNic, TwoDevicesOnOneAddressEachHaveASlotAndTheirQpsItsNumbers) {
  const std::string addr = own_address();
  ApiSide a(shared_at(addr)), b(shared_at(addr));
  const uint32_t sa = a.dev->share_slot(), sb = b.dev->share_slot();
  ASSERT_NE(sa, 0u);
  ASSERT_NE(sb, 0u);
  ASSERT_NE(sa, sb);
  EXPECT_EQ(*a.dev->query_gid(0), *b.dev->query_gid(0)) << "one address, one GID table";
  EXPECT_EQ(a.qp->qp_num() >> kQpnLocalBits, sa);
  EXPECT_EQ(b.qp->qp_num() >> kQpnLocalBits, sb);
  exchange(a, b, 200'000, test::test_seed(11));
  // Same-host peers keep the shared-memory path: each process sharing the address is a peer
  // of its own, found by the slot its QPNs carry; the MADs of QP1 stay the daemon's.
  EXPECT_EQ(a.counter("shm_channels"), 1u);
  // 200,000 B at MTU 4096: a WRITE and a SEND of 49 packets each, a READ request.
  EXPECT_EQ(a.counter("shm_tx_packets"), 99u);
  EXPECT_EQ(b.counter("shm_rx_packets"), 99u);
  EXPECT_EQ(a.counter("shm_tx_full_drops"), 0u);
}

// Without the rings (same_host_shm off) the two reach each other through the kernel's UDP
// and the daemon's steering, byte for byte the same.
TEST(HostNic, WithoutRingsTheSameTrafficTakesUdp) {
  const std::string addr = own_address();
  DeviceOptions o = shared_at(addr);
  o.same_host_shm = false;
  ApiSide a(o), b(o);
  exchange(a, b, 100'000, test::test_seed(12));
  EXPECT_EQ(a.counter("shm_tx_packets"), 0u);
  EXPECT_EQ(b.counter("shm_rx_packets"), 0u);
  // 100,000 B: 25 packets each for the WRITE and the SEND, a READ request; all on UDP.
  EXPECT_EQ(a.counter("tx_packets") - a.counter("retransmitted_packets"), 51u);
}

TEST(HostNic, AClosedDevicesSlotIsGivenAgainAndWorks) {
  const std::string addr = own_address();
  ApiSide b(shared_at(addr));
  uint32_t first;
  {
    ApiSide a(shared_at(addr));
    first = a.dev->share_slot();
    exchange(a, b, 5000, test::test_seed(21));
  }
  // The daemon frees the slot when it sees the process's connection close: bounded wait.
  uint32_t again = 0;
  for (int i = 0; i < 200 && again != first; ++i) {
    ApiSide c(shared_at(addr));
    again = c.dev->share_slot();
    if (again == first) {
      b.new_qp();
      exchange(c, b, 5000, test::test_seed(22));
      // b's answers go to c, not into the ring of the slot's last holder, which b may not yet
      // have seen hang up: nothing was lost.
      EXPECT_EQ(c.counter("retransmit_timeouts"), 0u);
    }
  }
  EXPECT_EQ(again, first) << "the lowest free slot is the closed device's";
}

TEST(HostNic, WhatStrangersSendToTheDaemonsSlotChangesNothing) {
  const uint64_t seed = test::test_seed(31);
  const std::string addr = own_address();
  ApiSide a(shared_at(addr)), b(shared_at(addr));
  // Slot 0 is the daemon's: QPN 1 (MADs), and every other QPN below 2^18.
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(4791);
  inet_pton(AF_INET, addr.c_str(), &to.sin_addr);
  std::mt19937_64 rng(seed);
  uint8_t pkt[300];
  for (int i = 0; i < 2000; ++i) {
    for (auto& x : pkt) x = uint8_t(rng());
    size_t len = 1 + rng() % sizeof pkt;
    const uint32_t qpn = i % 2 ? 1 : uint32_t(rng() % (1u << kQpnLocalBits));
    pkt[0] = i % 3 ? 0x64 : pkt[0];  // mostly UD SEND_ONLY, as a MAD comes
    pkt[4] = 0;
    pkt[5] = uint8_t(qpn >> 16);
    pkt[6] = uint8_t(qpn >> 8);
    pkt[7] = uint8_t(qpn);
    if (len > 21 + 24) {
      pkt[21] = 0x07;  // CM class, a random attribute, random IDs naming any slot
      pkt[22] = 2;
    }
    sendto(fd, pkt, len, 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
  }
  close(fd);
  exchange(a, b, 64'000, seed);
  ApiSide c(shared_at(addr));  // the daemon still gives slots
  EXPECT_NE(c.dev->share_slot(), 0u) << "seed " << seed;
}

namespace {

namespace proto = uroce::link::nicproto;

// A connection to the host NIC daemon speaking its protocol by hand, as any local program can.
struct RawClient {
  int fd = -1;
  std::vector<int> fds;  // what an attach handed over
  RawClient() {
    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path + 1, proto::kName, sizeof proto::kName - 1);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), socklen_t(offsetof(sockaddr_un, sun_path) + sizeof proto::kName)), 0);
  }
  ~RawClient() {
    for (int f : fds) close(f);
    close(fd);
  }
  proto::Reply call(const void* msg, size_t len) {
    proto::Reply r;
    r.err = -1;
    if (send(fd, msg, len, MSG_NOSIGNAL) != ssize_t(len)) return r;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 5000) != 1) return r;
    iovec iov{&r, sizeof r};
    alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int) * (proto::kMaxGids + 1))];
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctrl;
    m.msg_controllen = sizeof ctrl;
    if (recvmsg(fd, &m, MSG_CMSG_CLOEXEC) != ssize_t(sizeof r)) r.err = -1;
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
      for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); ++i) {
        int f;
        std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
        fds.push_back(f);
      }
    return r;
  }
  proto::Reply call(proto::Op op, uint64_t arg = 0, const std::string& addr = "") {
    proto::Request q;
    q.op = op;
    q.arg = arg;
    if (!addr.empty()) std::memcpy(q.addr, Gid::parse(addr)->raw.data(), 16);
    return call(&q, sizeof q);
  }
};

}  // namespace

// What a local program can say to the daemon by hand: malformed and out-of-order requests get
// an error and change nothing; a process asked for its status can speak only of its own QPs
// (the records it adds naming another process are dropped); an answer nobody asked for is
// dropped.
TEST(HostNic, TheDaemonTakesNothingForgedFromALocalProgram) {
  const std::string addr = own_address();
  ApiSide a(shared_at(addr));  // a real process's device, with one RC QP
  RawClient fake;
  EXPECT_EQ(fake.call("short", 5).err, EPROTO);
  EXPECT_EQ(fake.call(proto::Op(99)).err, EINVAL);
  EXPECT_EQ(fake.call(proto::Op::Listen, 0x1234).err, EINVAL) << "listen before attach";
  proto::Reply r = fake.call(proto::Op::Attach, 0, addr);
  ASSERT_EQ(r.err, 0) << r.text;
  ASSERT_FALSE(fake.fds.empty());
  const int channel = fake.fds[0];
  EXPECT_EQ(fake.call(proto::Op::Attach, 0, addr).err, EALREADY);
  // Unasked, an answer is dropped.
  const std::string early = std::string(proto::kStatusTag, 4) + "qp qpn=0x000bad type=RC state=RTS\n";
  ASSERT_EQ(send(channel, early.data(), early.size(), 0), ssize_t(early.size()));

  RawClient asker;
  proto::Request q;
  q.op = proto::Op::Status;
  ASSERT_EQ(send(asker.fd, &q, sizeof q, 0), ssize_t(sizeof q));
  // The fake is asked on its channel, and answers with a forged process record around its own.
  pollfd p{channel, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1);
  proto::Forwarded ask;
  ASSERT_EQ(recv(channel, &ask, sizeof ask, 0), ssize_t(sizeof ask));
  ASSERT_EQ(ask.kind, proto::kStatusRequest);
  const std::string answer = std::string(proto::kStatusTag, 4) +
                             "process pid=1 uid=0 addr=x slot=42 receive=steered services=- answered=yes\n"
                             "qp qpn=0x00f00d type=RC state=RTS dest_qpn=0x000001 dgid=x sq_psn=1 epsn=1\n"
                             "device addr=forged gids=1 processes=9\n";
  ASSERT_EQ(send(channel, answer.data(), answer.size(), 0), ssize_t(answer.size()));
  p = {asker.fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1);
  ASSERT_EQ(recv(asker.fd, &r, sizeof r, 0), ssize_t(sizeof r));
  ASSERT_EQ(r.err, 0) << r.text;
  ASSERT_EQ(poll(&p, 1, 5000), 1);
  std::string text(1 << 16, '\0');
  ssize_t n = recv(asker.fd, text.data(), text.size(), 0);
  ASSERT_GT(n, 0);
  text.resize(size_t(n));
  char a_qpn[16];
  std::snprintf(a_qpn, sizeof a_qpn, "qpn=0x%06x", a.qp->qp_num());
  EXPECT_NE(text.find(a_qpn), std::string::npos) << "the real process's QP\n" << text;
  EXPECT_NE(text.find("qpn=0x00f00d"), std::string::npos) << "the fake's own QP record\n" << text;
  EXPECT_EQ(text.find("qpn=0x000bad"), std::string::npos) << "the unasked answer\n" << text;
  EXPECT_EQ(text.find("pid=1 "), std::string::npos) << "the forged process\n" << text;
  EXPECT_EQ(text.find("slot=42"), std::string::npos) << text;
  EXPECT_EQ(text.find("forged"), std::string::npos) << text;
  EXPECT_NE(text.find("slot=" + std::to_string(a.dev->share_slot()) + " "), std::string::npos) << text;
}
