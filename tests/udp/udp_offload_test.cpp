// Segmentation and receive offload on the UDP link: a run of equal-size packets leaves in one
// send and arrives in one GRO buffer; every segment's ICRC is made for the IP ID segmentation
// gives it and checked exactly against the ID expected of it; a corrupted segment is dropped
// alone; IPv6 runs alike.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "link/udp_link.hpp"
#include "uroce/uroce.hpp"
#include "wire/icrc.hpp"
#include "wire/ip_udp.hpp"
#include "wire/opcode.hpp"
#include "wire/packet_buf.hpp"

using namespace uroce;

namespace {

// Checks every packet's ICRC as the protocol core does, and keeps what it found.
struct CheckingSink final : link::PacketSink {
  struct Got {
    size_t len;
    wire::IcrcMatch match;
    uint16_t id;
    uint8_t first;  // the packet's first byte: which one it is
  };
  wire::Ipv4Fields deliver(std::span<const uint8_t> pkt, const wire::FlowAddr& from, uint64_t,
                           const wire::Ipv4Fields& ip) override {
    wire::Ipv4Fields f = ip;
    wire::IcrcMatch m = wire::icrc_check(from, pkt, f);
    got.push_back({pkt.size(), m, f.id, pkt.empty() ? uint8_t(0) : pkt[0]});
    return m == wire::IcrcMatch::Bad ? ip : f;
  }
  std::vector<Got> got;
};

// Packets of `len` bytes (BTH .. ICRC) from `from` to `to`, random bytes with a valid ICRC for
// IP ID 0; packet i starts with byte i.
std::vector<std::unique_ptr<wire::PacketBuf>> run_of(size_t n, size_t len, const wire::FlowAddr& flow, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::unique_ptr<wire::PacketBuf>> out;
  for (size_t i = 0; i < n; ++i) {
    auto p = std::make_unique<wire::PacketBuf>();
    p->flow = flow;
    p->len = uint32_t(len);
    for (size_t b = 0; b < len; ++b) p->data[b] = uint8_t(rng());
    p->data[0] = uint8_t(i);
    wire::icrc_fill(*p, len - wire::kIcrcLen);
    out.push_back(std::move(p));
  }
  return out;
}

void receive(link::UdpLink& l, CheckingSink& sink, size_t want) {
  for (int i = 0; i < 400 && sink.got.size() < want; ++i) {
    l.poll_rx(sink, 0, 256);
    if (sink.got.size() < want) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

struct Pair {
  std::unique_ptr<link::UdpLink> a, b;
  wire::FlowAddr flow;  // a to b
  Pair() {
    auto x = link::UdpLink::open(Gid{}, "", link::UdpLink::Rx::Udp);
    auto y = link::UdpLink::open(Gid{}, "", link::UdpLink::Rx::Udp);
    if (!x.ok() || !y.ok()) return;
    a = std::move(*x);
    b = std::move(*y);
    flow.src = a->gids().back();
    flow.dst = b->gids().back();
    flow.src_port = a->src_port_for(1);
  }
};

}  // namespace

TEST(UdpOffload, ARunArrivesInOneBufferWithEachSegmentsIdExact) {
  Pair p;
  ASSERT_TRUE(p.a && p.b);
  const size_t kN = 40, kLen = 12 + 1024 + 4, kLast = kLen - 64;
  auto pkts = run_of(kN, kLen, p.flow, 1);
  pkts.back()->len = kLast;  // a run's last segment may be shorter
  wire::icrc_fill(*pkts.back(), kLast - wire::kIcrcLen);
  std::vector<wire::PacketBuf*> q;
  for (auto& x : pkts) q.push_back(x.get());
  p.a->send(q, 0);
  // What left: segment k's ICRC is the one for IP ID k.
  for (size_t k = 0; k < kN; ++k) {
    wire::Ipv4Fields ip;
    ip.id = uint16_t(k);
    EXPECT_TRUE(wire::icrc_ok(p.flow, {pkts[k]->data, pkts[k]->len}, ip)) << "segment " << k;
  }
  CheckingSink sink;
  receive(*p.b, sink, kN);
  ASSERT_EQ(sink.got.size(), kN);
  for (size_t k = 0; k < kN; ++k) {
    EXPECT_EQ(sink.got[k].first, uint8_t(k));
    EXPECT_EQ(sink.got[k].len, k + 1 == kN ? kLast : kLen);
    // Assumed: the expected ID matched, exactly. A segment seen apart from its run would have
    // been expected to carry 0 and been solved instead.
    EXPECT_EQ(sink.got[k].match, wire::IcrcMatch::Assumed) << "segment " << k;
    EXPECT_EQ(sink.got[k].id, k);
  }
}

// A run whose segment 5 was damaged on the way: that one fails the check (the expected ID does
// not match and no other does), the others pass exactly. Sent by hand, as a peer would.
TEST(UdpOffload, ACorruptedSegmentOfARunIsDroppedAlone) {
  Pair p;
  ASSERT_TRUE(p.a && p.b);
  const size_t kN = 12, kLen = 12 + 256 + 4;
  auto pkts = run_of(kN, kLen, p.flow, 2);
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(wire::v4_of(p.flow.dst));
  to.sin_port = htons(wire::kRoceV2Port);
  sockaddr_in me{};
  me.sin_family = AF_INET;
  me.sin_addr.s_addr = htonl(wire::v4_of(p.flow.src));
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&me), sizeof me), 0);
  int pmtu = IP_PMTUDISC_DO;  // DF, and with it ID 0
  setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
  socklen_t ml = sizeof me;
  getsockname(fd, reinterpret_cast<sockaddr*>(&me), &ml);
  wire::FlowAddr f = p.flow;
  f.src_port = ntohs(me.sin_port);
  std::vector<uint8_t> run;
  for (size_t k = 0; k < kN; ++k) {  // each segment's ICRC for this socket's port and ID k
    wire::Ipv4Fields ip;
    ip.id = uint16_t(k);
    std::span<const uint8_t> body(pkts[k]->data, kLen - wire::kIcrcLen);
    wire::icrc_store(pkts[k]->data + body.size(), wire::icrc_for_flow(f, body, ip));
    run.insert(run.end(), pkts[k]->data, pkts[k]->data + kLen);
  }
  run[5 * kLen + 100] ^= 0x40;  // damaged after its ICRC was made
  int seg = int(kLen);  // as an option, an int (as a control message, 16 bits)
  ASSERT_EQ(setsockopt(fd, SOL_UDP, UDP_SEGMENT, &seg, sizeof seg), 0);
  ASSERT_EQ(sendto(fd, run.data(), run.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to), ssize_t(run.size()))
      << std::strerror(errno);
  CheckingSink sink;
  receive(*p.b, sink, kN);
  ASSERT_EQ(sink.got.size(), kN);
  for (size_t k = 0; k < kN; ++k) {
    EXPECT_EQ(sink.got[k].first, uint8_t(k));
    EXPECT_EQ(sink.got[k].match, k == 5 ? wire::IcrcMatch::Bad : wire::IcrcMatch::Assumed) << "segment " << k;
    if (k != 5) {
      EXPECT_EQ(sink.got[k].id, k);
    }
  }
  close(fd);
}

// Over IPv6 (no ID): a device on ::1 sends a run to itself.
TEST(UdpOffload, AnIpv6RunArrivesWholeAndExact) {
  auto l = link::UdpLink::open(*Gid::parse("::1"), "", link::UdpLink::Rx::Udp);
  ASSERT_TRUE(l.ok()) << l.error().message;  // ::1 is there wherever Api.Ipv6LoopbackDevice passes
  wire::FlowAddr flow{(*l)->gids().back(), (*l)->gids().back(), (*l)->src_port_for(1)};
  const size_t kN = 30, kLen = 12 + 2048 + 4;
  auto pkts = run_of(kN, kLen, flow, 3);
  std::vector<wire::PacketBuf*> q;
  for (auto& x : pkts) q.push_back(x.get());
  (*l)->send(q, 0);
  CheckingSink sink;
  receive(**l, sink, kN);
  ASSERT_EQ(sink.got.size(), kN);
  for (size_t k = 0; k < kN; ++k) {
    EXPECT_EQ(sink.got[k].first, uint8_t(k));
    EXPECT_EQ(sink.got[k].match, wire::IcrcMatch::Seen) << "segment " << k;
  }
}

// The fuzz seeds' packets (records of [flags][len hi][len lo][bytes]), sent to a live device in
// runs of equal size as one segmented datagram each, together with a valid run whose every
// other segment is damaged: each datagram is counted once, by how its ICRC check ended, and
// the device stays whole (ASan and UBSan watch the same in the sanitizer build).
TEST(UdpOffload, HostileRunsAreEachCountedOnce) {
  DeviceOptions o;
  o.same_host_shm = false;
  auto dev = Device::open("uroce_lo", o);
  ASSERT_TRUE(dev.ok()) << dev.error().message;
  const Gid to_gid = *(*dev)->query_gid(0);
  std::vector<std::vector<uint8_t>> pkts;
  const std::string dir = std::string(UROCE_TEST_DATA) + "/../../fuzz/seeds/";
  for (const char* name : {"rc-send.bin", "rc-write.bin", "rc-read.bin", "rc-atomic.bin", "ud-send.bin", "uc-send.bin"}) {
    FILE* f = std::fopen((dir + name).c_str(), "rb");
    ASSERT_NE(f, nullptr) << dir + name;
    std::vector<uint8_t> all;
    for (int c; (c = std::fgetc(f)) != EOF;) all.push_back(uint8_t(c));
    std::fclose(f);
    for (size_t at = 0; at + 3 <= all.size();) {
      const size_t len = size_t(all[at + 1]) << 8 | all[at + 2];
      if (at + 3 + len > all.size()) break;
      if (len > 0) pkts.emplace_back(all.begin() + ptrdiff_t(at + 3), all.begin() + ptrdiff_t(at + 3 + len));
      at += 3 + len;
    }
  }
  ASSERT_GT(pkts.size(), 20u);
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in me{};
  me.sin_family = AF_INET;
  me.sin_addr.s_addr = htonl(0x7f000001);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&me), sizeof me), 0);
  socklen_t ml = sizeof me;
  getsockname(fd, reinterpret_cast<sockaddr*>(&me), &ml);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(wire::v4_of(to_gid));
  to.sin_port = htons(wire::kRoceV2Port);
  // A valid run (a good ICRC for each segment's ID) with every other segment damaged.
  {
    wire::FlowAddr f{Gid::from_ipv4(0x7f000001), to_gid, ntohs(me.sin_port)};
    auto run = run_of(8, 12 + 512 + 4, f, 4);
    for (size_t k = 0; k < run.size(); ++k) {
      wire::Ipv4Fields ip;
      ip.id = uint16_t(k);
      std::span<const uint8_t> body(run[k]->data, run[k]->len - wire::kIcrcLen);
      wire::icrc_store(run[k]->data + body.size(), wire::icrc_for_flow(f, body, ip));
      std::vector<uint8_t> p(run[k]->data, run[k]->data + run[k]->len);
      if (k % 2) p[20] ^= 0x10;
      pkts.push_back(std::move(p));
    }
  }
  size_t sent = 0;
  for (size_t i = 0; i < pkts.size();) {
    size_t n = 1;
    while (i + n < pkts.size() && n < 64 && pkts[i + n].size() == pkts[i].size() && (n + 1) * pkts[i].size() < 60000) ++n;
    std::vector<uint8_t> buf;
    for (size_t k = 0; k < n; ++k) buf.insert(buf.end(), pkts[i + k].begin(), pkts[i + k].end());
    int seg = n > 1 ? int(pkts[i].size()) : 0;
    ASSERT_EQ(setsockopt(fd, SOL_UDP, UDP_SEGMENT, &seg, sizeof seg), 0);
    ASSERT_EQ(sendto(fd, buf.data(), buf.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to), ssize_t(buf.size()))
        << std::strerror(errno);
    sent += n;
    i += n;
  }
  close(fd);
  auto accounted = [&] {
    auto c = (*dev)->counters();
    return c["rx_bad_icrc"] + c["rx_icrc_ip_assumed"] + c["rx_icrc_ip_solved"] + c["rx_icrc_ip_seen"] + c["rx_runt"];
  };
  for (int i = 0; i < 4000 && accounted() < sent; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto c = (*dev)->counters();
  EXPECT_EQ(accounted(), sent) << "bad ICRC " << c["rx_bad_icrc"] << ", assumed " << c["rx_icrc_ip_assumed"]
                               << ", solved " << c["rx_icrc_ip_solved"] << ", runts " << c["rx_runt"];
  EXPECT_GE(c["rx_bad_icrc"], 4u) << "the damaged segments";
  EXPECT_GE(c["rx_icrc_ip_assumed"], 4u) << "the good ones of that run, each at its expected ID";
  EXPECT_EQ(c["rx_packets"], sent) << "every segment of every run was received, as a packet of its own";
  EXPECT_EQ(c["rx_unknown_qp"] + c["rx_malformed"], c["rx_icrc_ip_assumed"] + c["rx_icrc_ip_solved"])
      << "what passed its ICRC was refused after: this device has no QP";
}
