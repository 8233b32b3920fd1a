// The host NIC's flow table: rule words both ways, exact matching, the policer, the rules
// file, and the steering program in the kernel: a group of 64 sockets on loopback with the
// program the daemon attaches, and datagrams from two source addresses, which must land on
// the daemon's socket (0) when a rule may match them and on their QPN's slot otherwise.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "link/steering.hpp"
#include "nicd/rules.hpp"
#include "wire/bytes.hpp"

using namespace uroce;
using namespace uroce::nicd;

namespace {

Rule rule(const char* words) {
  auto r = parse_rule(words);
  EXPECT_TRUE(r.ok()) << words << ": " << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : Rule{};
}

// A BTH with this opcode and destination QP, and some payload.
std::vector<uint8_t> packet(uint8_t opcode, uint32_t qpn) {
  std::vector<uint8_t> p(12 + 64, 0);
  p[0] = opcode;
  wire::write_be32(p.data() + 4, qpn);
  return p;
}

const Gid kA = Gid::from_ipv4(0x0a000003), kB = Gid::from_ipv4(0x0a000104);

}  // namespace

TEST(Rules, WordsGoBothWays) {
  for (const char* w : {"src 10.0.0.0/24 sport 49152-65535 qpn 0x100-0x1ff opcode write dscp 46 action drop",
                        "action count", "src fe80::1/64 action mirror /tmp/x.pcap",
                        "opcode cnp action police 10000kbit burst 65536", "src 10.0.0.0/8 qpn 0x40000-0x7ffff action prio 5"}) {
    const Rule r = rule(w);
    const Rule again = rule(r.words().c_str());
    EXPECT_EQ(again.words(), r.words()) << w;
  }
  EXPECT_EQ(rule("src 10.0.0.3 action drop").words(), "src 10.0.0.3/32 action drop");
  EXPECT_EQ(rule("action police 8mbit").burst_bytes, 16u << 10);    // 10 ms of 8 Mb/s is less than 16 KiB
  EXPECT_EQ(rule("action police 20mbit").burst_bytes, 25000u);     // 10 ms of 20 Mb/s
  EXPECT_EQ(rule("action police 1gbit burst 1m").burst_bytes, 1u << 20);
  EXPECT_EQ(rule(rule("action police 1234567").words().c_str()).rate_bps, 1234567u);  // bit/s kept exactly
  EXPECT_FALSE(parse_rule("action police 20000000000gbit").ok());                    // past 2^40 b/s
}

TEST(Rules, BadWordsAreRefusedSayingWhy) {
  for (const char* w : {"", "src 10.0.0.1", "action", "action jump", "src 300.1.1.1 action drop", "src 10.0.0.1/33 action drop",
                        "src ::1/129 action drop", "sport 5-1 action drop", "sport 70000 action drop", "qpn 0x1000000 action drop",
                        "opcode push action drop", "dscp 64 action drop", "action police", "action police 7kbit",
                        "action police 1mbit burst 100", "action mirror x.pcap", "action drop action count", "color red action drop",
                        "action prio 8", "action prio"}) {
    auto r = parse_rule(w);
    ASSERT_FALSE(r.ok()) << w;
    EXPECT_EQ(r.error().code, EINVAL);
    EXPECT_EQ(r.error().message.rfind("rule: ", 0), 0u) << r.error().message;
  }
}

TEST(Rules, MatchEveryField) {
  const auto p = packet(0x0a, 0x150);  // RC WRITE ONLY to QP 0x150
  EXPECT_TRUE(rule("action drop").matches(p, kA, 1000, 0));
  EXPECT_TRUE(rule("src 10.0.0.0/24 action drop").matches(p, kA, 1000, 0));
  EXPECT_FALSE(rule("src 10.0.0.0/24 action drop").matches(p, kB, 1000, 0));
  EXPECT_TRUE(rule("src 10.0.0.0/23 action drop").matches(p, kB, 1000, 0));
  EXPECT_FALSE(rule("src ::/0 action drop").matches(p, kA, 1000, 0));  // an IPv6 rule: IPv6 sources only
  EXPECT_TRUE(rule("sport 1000-1001 action drop").matches(p, kA, 1000, 0));
  EXPECT_FALSE(rule("sport 1001-2000 action drop").matches(p, kA, 1000, 0));
  EXPECT_TRUE(rule("qpn 0x100-0x1ff action drop").matches(p, kA, 1000, 0));
  EXPECT_FALSE(rule("qpn 0x151-0x1ff action drop").matches(p, kA, 1000, 0));
  EXPECT_TRUE(rule("dscp 46 action drop").matches(p, kA, 1000, 46 << 2 | 2));
  EXPECT_FALSE(rule("dscp 46 action drop").matches(p, kA, 1000, 2));
  const std::pair<uint8_t, const char*> classes[] = {
      {0x04, "send"}, {0x24, "send"}, {0x64, "send"}, {0x17, "send"}, {0x0a, "write"}, {0x2a, "write"},
      {0x1d, "write"}, {0x0c, "read"}, {0x10, "read"}, {0x11, "ack"}, {0x12, "atomic"}, {0x14, "atomic"},
      {0x81, "cnp"}, {0xa4, "send"}};
  for (auto [op, name] : classes)
    for (const char* c : {"send", "write", "read", "atomic", "ack", "cnp"}) {
      const std::string w = std::string("opcode ") + c + " action drop";
      EXPECT_EQ(rule(w.c_str()).matches(packet(op, 5), kA, 1, 0), std::string(c) == name) << int(op) << " " << c;
    }
  EXPECT_FALSE(rule("action drop").matches(std::vector<uint8_t>(11), kA, 1, 0));  // shorter than a BTH
}

TEST(Rules, ThePolicerLetsItsBurstThenItsRate) {
  Rule r = rule("action police 8mbit burst 10k");  // a byte a microsecond
  uint64_t t = 1'000'000'000;
  int passed = 0;
  for (int i = 0; i < 20; ++i) passed += r.conforms(1024, t);
  EXPECT_EQ(passed, 10);  // the bucket: ten 1 KiB packets at once
  t += 1024'000;          // 1024 us: 1024 bytes more
  EXPECT_TRUE(r.conforms(1024, t));
  EXPECT_FALSE(r.conforms(1024, t));
  t += 1'000'000'000;  // a second later: full, never more than full
  passed = 0;
  for (int i = 0; i < 20; ++i) passed += r.conforms(1024, t);
  EXPECT_EQ(passed, 10);
}

TEST(Rules, TheTableKeepsOrderFileAndLimit) {
  RuleTable t;
  ASSERT_TRUE(t.add(rule("src 10.0.0.3 action drop")).ok());
  ASSERT_TRUE(t.add(rule("action count")).ok());
  auto p = packet(0x04, 7);
  EXPECT_EQ(t.first_match(p, kA, 1, 0)->id, 1u);  // first match decides
  EXPECT_EQ(t.first_match(p, kB, 1, 0)->id, 2u);
  RuleTable prio;  // a class for what this host sends, not a rule for what it receives
  ASSERT_TRUE(prio.add(rule("src 10.0.0.3 action prio 5")).ok());
  EXPECT_EQ(prio.first_match(p, kA, 1, 0), nullptr);
  transport::SharedPort port;
  ASSERT_TRUE(prio.add(rule("src 10.0.0.0/8 qpn 0x40000-0x7ffff action prio 2")).ok());
  prio.publish_classes(port);
  EXPECT_EQ(port.class_version.load() % 2, 0u);
  ASSERT_EQ(port.nclasses, 2u);
  EXPECT_EQ(port.classes[0].prio, 5);
  EXPECT_EQ(port.classes[0].bits, 128);
  EXPECT_EQ(std::memcmp(port.classes[0].gid, kA.raw.data(), 16), 0);
  EXPECT_EQ(port.classes[0].qpn_hi, 0xffffffu);
  EXPECT_EQ(port.classes[1].bits, 96 + 8);
  EXPECT_EQ(port.classes[1].qpn_lo, 0x40000u);
  char path[] = "/tmp/uroce-rules-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  ASSERT_TRUE(t.save(path).ok());
  RuleTable back;
  ASSERT_TRUE(back.load(path).ok());
  ASSERT_EQ(back.rules().size(), 2u);
  EXPECT_EQ(back.rules()[0].words(), t.rules()[0].words());
  EXPECT_EQ(back.rules()[1].words(), "action count");
  EXPECT_EQ(back.rules()[1].id, 2u);
  EXPECT_EQ(back.del(1).ok(), true);
  EXPECT_EQ(back.del(1).error().code, ENOENT);
  ASSERT_TRUE(back.save(path).ok());  // ids survive: rule 2 is still 2, and the next is 3
  RuleTable again;
  ASSERT_TRUE(again.load(path).ok());
  ASSERT_EQ(again.rules().size(), 1u);
  EXPECT_EQ(again.rules()[0].id, 2u);
  EXPECT_EQ(*again.add(rule("action drop")), 3u);
  { std::ofstream(path) << "id 7 action drop\naction count\nid 3 action drop\n"; }
  ASSERT_TRUE(again.load(path).ok());
  EXPECT_EQ(again.rules()[1].id, 8u);
  EXPECT_EQ(*again.add(rule("action drop")), 9u);
  { std::ofstream(path) << "id 7 action drop\nid 7 action count\n"; }
  EXPECT_NE(again.load(path).error().message.find(":2: rule: id 7 twice"), std::string::npos);
  { std::ofstream(path) << "# comment\n\naction drop\nsrc nowhere action drop\n"; }
  auto bad = back.load(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find(std::string(path) + ":4: rule: src takes"), std::string::npos) << bad.error().message;
  EXPECT_EQ(back.rules().size(), 1u);  // a bad file leaves the table as it was
  std::remove(path);
  RuleTable full;
  for (size_t i = 0; i < RuleTable::kMaxRules; ++i) ASSERT_TRUE(full.add(rule("action count")).ok());
  EXPECT_EQ(full.add(rule("action count")).error().code, ENOSPC);
}

// The program in the kernel: 64 sockets on 127.0.0.1 in one group, datagrams to slot 5's QPs.
TEST(Rules, TheSteeringProgramSendsWhatARuleMayMatchToTheDaemon) {
  std::array<int, link::steering::kSlots> group;
  uint16_t port = 0;  // the kernel's choice for the first, the others join it
  for (int& s : group) {
    s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    sockaddr_in a{AF_INET, htons(port), {htonl(0x7f000001)}, {}};
    ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << "port " << port;
    socklen_t len = sizeof a;
    getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  auto attach = [&](const RuleTable& t) {
    const auto prog = t.steering_program(true);
    sock_fprog fp{uint16_t(prog.size()), const_cast<sock_filter*>(prog.data())};
    ASSERT_EQ(setsockopt(group[0], SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &fp, sizeof fp), 0);
  };
  // Where a datagram from 127.0.0.FROM to QPN qpn lands: the socket's index.
  auto lands = [&](uint32_t from, uint32_t qpn) {
    int c = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in src{AF_INET, 0, {htonl(0x7f000000 | from)}, {}};
    EXPECT_EQ(bind(c, reinterpret_cast<sockaddr*>(&src), sizeof src), 0);
    sockaddr_in dst{AF_INET, htons(port), {htonl(0x7f000001)}, {}};
    const auto p = packet(0x04, qpn);
    EXPECT_EQ(sendto(c, p.data(), p.size(), 0, reinterpret_cast<sockaddr*>(&dst), sizeof dst), ssize_t(p.size()));
    close(c);
    std::array<pollfd, link::steering::kSlots> fds;
    for (size_t i = 0; i < fds.size(); ++i) fds[i] = {group[i], POLLIN, 0};
    if (poll(fds.data(), fds.size(), 2000) <= 0) return -1;
    for (size_t i = 0; i < fds.size(); ++i)
      if (fds[i].revents & POLLIN) {
        uint8_t b[128];
        (void)recv(group[i], b, sizeof b, 0);
        return int(i);
      }
    return -1;
  };
  const uint32_t q5 = 5u << link::steering::kQpnLocalBits | 0x123;
  RuleTable t;
  attach(t);
  EXPECT_EQ(lands(2, q5), 5);
  ASSERT_TRUE(t.add(rule("src fe80::3 action drop")).ok());  // another family's: not in this program
  ASSERT_TRUE(t.add(rule("src 127.0.0.2 action prio 3")).ok());  // classifies what is sent: not steered
  ASSERT_TRUE(t.add(rule("src 127.0.0.3 action drop")).ok());
  attach(t);
  EXPECT_EQ(lands(3, q5), 0);
  EXPECT_EQ(lands(2, q5), 5);
  RuleTable u;
  // The QPN is the daemon's to check: UDP GRO gives a socket a run of one flow, steered by its
  // first datagram's BTH, so the kernel tests the source alone.
  ASSERT_TRUE(u.add(rule("src 127.0.0.0/30 qpn 0x140000-0x140200 action count")).ok());
  attach(u);
  EXPECT_EQ(lands(2, q5), 0);
  EXPECT_EQ(lands(2, q5 + 0x100), 0);  // past the range: the daemon passes it on
  EXPECT_EQ(lands(4, q5), 5);          // outside the prefix
  RuleTable v;
  ASSERT_TRUE(v.add(rule("opcode send action count")).ok());  // matched by the daemon alone
  attach(v);
  EXPECT_EQ(lands(2, q5), 0);
  for (int s : group) close(s);
}
