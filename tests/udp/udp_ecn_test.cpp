// ECN on the UDP link: what it sends carries ECT(0), and the ECN bits of what arrives reach the
// core with the packet (a CE mark there makes the responder answer with a CNP).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "link/udp_link.hpp"
#include "wire/ip_udp.hpp"
#include "wire/packet_buf.hpp"

using namespace uroce;

namespace {

struct TosSink final : link::PacketSink {
  wire::Ipv4Fields deliver(std::span<const uint8_t> pkt, const wire::FlowAddr&, uint64_t,
                           const wire::Ipv4Fields& ip) override {
    got.push_back({pkt.size(), ip.tos});
    return ip;
  }
  std::vector<std::pair<size_t, uint8_t>> got;
};

int udp_socket(uint32_t ip, uint16_t port) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(ip);
  a.sin_port = htons(port);
  if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// A listener at RoCEv2's port on a loopback address of its own (127.<net>.<pid>.x) that
// reports the TOS of what arrives; -1 if none could be bound.
int tos_listener(uint8_t net, uint32_t& peer) {
  int fd = -1;
  for (uint32_t host = 2; host < 250 && fd < 0; ++host) {
    peer = (127u << 24) | (uint32_t(net) << 16) | ((uint32_t(getpid()) & 0xff) << 8) | host;
    fd = udp_socket(peer, wire::kRoceV2Port);
  }
  int one = 1;
  timeval tv{5, 0};
  if (fd >= 0 && (setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof one) != 0 ||
                  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0)) {
    close(fd);
    return -1;
  }
  return fd;
}

// The next datagram into buf, and its TOS (-1 if it came without one).
ssize_t recv_tos(int fd, uint8_t* buf, size_t room, int& tos) {
  alignas(cmsghdr) char ctrl[64];
  iovec iov{buf, room};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = ctrl;
  m.msg_controllen = sizeof ctrl;
  const ssize_t n = recvmsg(fd, &m, 0);
  tos = -1;
  for (cmsghdr* cm = n >= 0 ? CMSG_FIRSTHDR(&m) : nullptr; cm; cm = CMSG_NXTHDR(&m, cm))
    if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_TOS) tos = *CMSG_DATA(cm);
  return n;
}

}  // namespace

TEST(UdpLinkEcn, ReceivedEcnBitsReachTheCore) {
  auto l = link::UdpLink::open(Gid{}, "", link::UdpLink::Rx::Udp);
  ASSERT_TRUE(l.ok()) << l.error().message;
  const uint32_t ip = (*l)->local_ip();
  int fd = udp_socket(0x7f000001, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(ip);
  to.sin_port = htons(wire::kRoceV2Port);
  const uint8_t tos_sent[] = {wire::kEcnCe, 0, wire::kEcnEct0, wire::kEcnCe};
  std::vector<uint8_t> bytes(40, 0x11);
  for (size_t i = 0; i < sizeof tos_sent; ++i) {
    int tos = tos_sent[i];
    ASSERT_EQ(setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos), 0);
    bytes.resize(40 + i);  // different lengths: no GRO merging, and the order is checked
    ASSERT_EQ(sendto(fd, bytes.data(), bytes.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to),
              ssize_t(bytes.size()));
  }
  TosSink sink;
  for (int i = 0; i < 200 && sink.got.size() < 4; ++i) {
    (*l)->poll_rx(sink, 0, 64);
    if (sink.got.size() < 4) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(sink.got.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(sink.got[i].first, 40 + i);
    EXPECT_EQ(sink.got[i].second, tos_sent[i]) << "datagram " << i;
  }
  close(fd);
}

TEST(UdpLinkEcn, WhatItSendsCarriesEct0) {
  auto l = link::UdpLink::open(Gid{}, "", link::UdpLink::Rx::Udp);
  ASSERT_TRUE(l.ok()) << l.error().message;
  // A listener on another loopback address, at RoCEv2's port, that reads the TOS of arrivals.
  uint32_t peer = 0;
  int fd = tos_listener(0xec, peer);
  ASSERT_GE(fd, 0);
  wire::PacketBuf p;
  p.flow = wire::FlowAddr::ipv4((*l)->local_ip(), peer, 49152);
  p.len = 64;
  std::memset(p.data, 0x22, p.len);
  wire::PacketBuf* ps[] = {&p};
  (*l)->send(ps, 0);
  uint8_t buf[256];
  int tos = -1;
  ASSERT_EQ(recv_tos(fd, buf, sizeof buf, tos), 64);
  EXPECT_EQ(tos, wire::kEcnEct0);
  close(fd);
}

// Each packet's traffic class (its QP's DSCP) goes into its IP header, ECN kept at ECT(0),
// even within what would otherwise be one GSO run (same flow, same size).
TEST(UdpLinkEcn, EachPacketsDscpGoesOnTheWire) {
  auto l = link::UdpLink::open(Gid{}, "", link::UdpLink::Rx::Udp);
  ASSERT_TRUE(l.ok()) << l.error().message;
  uint32_t peer = 0;
  int fd = tos_listener(0xed, peer);
  ASSERT_GE(fd, 0);
  // 0, EF (46), EF again, AF31 (26), and EF with ECN bits the QP may not set.
  const uint8_t tclass[] = {0x00, 0xb8, 0xb8, 0x68, 0xbb};
  const uint8_t want[] = {0x02, 0xba, 0xba, 0x6a, 0xba};
  constexpr size_t kN = sizeof tclass;
  wire::PacketBuf p[kN];
  wire::PacketBuf* ps[kN];
  for (size_t i = 0; i < kN; ++i) {
    p[i].flow = wire::FlowAddr::ipv4((*l)->local_ip(), peer, 49152);
    p[i].len = 64;
    p[i].tclass = tclass[i];
    std::memset(p[i].data, int(0x30 + i), p[i].len);
    ps[i] = &p[i];
  }
  (*l)->send(ps, 0);
  for (size_t i = 0; i < kN; ++i) {
    uint8_t buf[256];
    int tos = -1;
    ASSERT_EQ(recv_tos(fd, buf, sizeof buf, tos), 64) << "datagram " << i;
    EXPECT_EQ(buf[0], 0x30 + i) << "in order";
    EXPECT_EQ(tos, want[i]) << "datagram " << i;
  }
  close(fd);
}
