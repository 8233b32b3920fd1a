// The payload lifetime rules of link/link.hpp, checked as debug and sanitizer builds check
// them: a sink that keeps a delivered packet past deliver() finds it overwritten once the
// link's poll returns (on every link), and a transmit buffer handed back is overwritten and,
// under AddressSanitizer, poisoned until it is handed out again. Release builds do not check,
// and have none of these tests: the sanitizer stage of `make test` runs them.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "link/shm_link.hpp"
#include "link/udp_link.hpp"
#include "sim/fabric.hpp"
#include "wire/packet_buf.hpp"

#ifndef NDEBUG
using namespace uroce;

namespace {

// Keeps the span it is given, against the rule, and a copy of the bytes, as the rule says.
struct KeepingSink final : link::PacketSink {
  wire::Ipv4Fields deliver(std::span<const uint8_t> pkt, const wire::FlowAddr&, uint64_t,
                           const wire::Ipv4Fields& ip) override {
    kept.push_back(pkt);
    copies.emplace_back(pkt.begin(), pkt.end());
    return ip;
  }
  std::vector<std::span<const uint8_t>> kept;
  std::vector<std::vector<uint8_t>> copies;
};

// Whether bytes kept past their life are seen to have ended: overwritten with the expired
// pattern, or, under AddressSanitizer, no longer addressable at all (freed or poisoned).
bool expired(std::span<const uint8_t> bytes) {
#if defined(__SANITIZE_ADDRESS__)
  if (__asan_region_is_poisoned(const_cast<uint8_t*>(bytes.data()), bytes.size())) return true;
#endif
  return std::all_of(bytes.begin(), bytes.end(), [](uint8_t b) { return b == wire::kExpiredByte; });
}

// What a sink that kept the span finds after the poll: every packet expired.
void expect_expired(const KeepingSink& sink, size_t packets, size_t len, uint8_t sent_byte) {
  ASSERT_EQ(sink.kept.size(), packets);
  for (size_t i = 0; i < packets; ++i) {
    ASSERT_EQ(sink.copies[i].size(), len);
    EXPECT_TRUE(std::all_of(sink.copies[i].begin(), sink.copies[i].end(), [&](uint8_t b) { return b == sent_byte; }))
        << "packet " << i << " as delivered";
    EXPECT_TRUE(expired(sink.kept[i])) << "packet " << i << " read after deliver() returned";
  }
}

wire::PacketBuf filled(const wire::FlowAddr& f, uint32_t len, uint8_t byte) {
  wire::PacketBuf p;
  p.flow = f;
  p.len = len;
  std::fill_n(p.data, len, byte);
  return p;
}

}  // namespace

// The simulated wire delivers from a frame it then frees: only a sanitizer may look after it.
#if defined(__SANITIZE_ADDRESS__)
TEST(PayloadLifetime, ASimulatedWireExpiresWhatItDelivered) {
  const Gid ga = Gid::from_ipv4(0x0a000001), gb = Gid::from_ipv4(0x0a000002);
  sim::LossyLink wire(1, {});
  auto a = wire.attach(ga), b = wire.attach(gb);
  wire::PacketBuf p = filled({ga, gb, 49152, wire::kRoceV2Port}, 300, 0x5a);
  wire::PacketBuf* one[] = {&p};
  a->send(one, 0);
  a->send(one, 0);
  KeepingSink sink;
  EXPECT_EQ(b->poll_rx(sink, 1'000'000'000, 16), 2);
  expect_expired(sink, 2, 300, 0x5a);
}
#endif

TEST(PayloadLifetime, TheUdpLinkExpiresWhatItDelivered) {
  auto l = link::UdpLink::open(Gid{}, "", link::UdpLink::Rx::Udp);
  ASSERT_TRUE(l.ok()) << l.error().message;
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl((*l)->local_ip());
  to.sin_port = htons(wire::kRoceV2Port);
  const std::vector<uint8_t> bytes(200, 0x3c);
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(sendto(fd, bytes.data(), bytes.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to),
              ssize_t(bytes.size()));
  KeepingSink sink;
  // Loopback delivery is not synchronous with sendto's return: bounded polls until all three.
  for (int i = 0; i < 200 && sink.kept.size() < 3; ++i) {
    (*l)->poll_rx(sink, 0, 64);
    if (sink.kept.size() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  close(fd);
  expect_expired(sink, 3, 200, 0x3c);
}

TEST(PayloadLifetime, TheSameHostLinkExpiresWhatItDelivered) {
  // Addresses of this process alone: the registry is per user, tests run side by side.
  const uint32_t base = (127u << 24) | ((uint32_t(getpid()) & 0xffff) << 8);
  const Gid ga = Gid::from_ipv4(base | 21), gb = Gid::from_ipv4(base | 22);
  sim::LossyLink nowhere(1, {});
  auto wa = nowhere.attach(ga), wb = nowhere.attach(gb);
  link::SameHostLink a(*wa, nullptr), b(*wb, nullptr);
  bool attached = false;
  for (int i = 0; i < 2000 && !(attached = a.attach_peer(gb, 0)); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // b's listener is a thread
  ASSERT_TRUE(attached);
  wire::PacketBuf p = filled({ga, gb, 49152, wire::kRoceV2Port}, 1000, 0x77);
  wire::PacketBuf* one[] = {&p};
  a.send(one, 0);
  a.send(one, 0);
  KeepingSink sink;
  for (int i = 0; i < 200 && sink.kept.size() < 2; ++i) b.poll_rx(sink, 0, 16);
  expect_expired(sink, 2, 1000, 0x77);
}

// The send() rule from the other side: what the core takes back is no longer the link's.
TEST(PayloadLifetime, ABufferHandedBackIsExpired) {
  wire::BufferPool pool(256);
  wire::PacketBuf* p = pool.alloc();
  ASSERT_NE(p, nullptr);
  std::fill_n(p->data, 100, uint8_t(0x11));
  const uint8_t memory[8] = {};
  p->ref = memory;
  pool.release(p);
  EXPECT_EQ(p->ref, nullptr);
#if defined(__SANITIZE_ADDRESS__)
  EXPECT_TRUE(__asan_address_is_poisoned(p->data));
  EXPECT_TRUE(__asan_address_is_poisoned(p->data + sizeof p->data - 16));  // ASan poisons whole 8-byte granules
#else
  EXPECT_TRUE(std::all_of(p->data, p->data + sizeof p->data, [](uint8_t b) { return b == wire::kExpiredByte; }));
#endif
  wire::PacketBuf* again = pool.alloc();
  ASSERT_EQ(again, p);  // the pool reuses the last one handed back
#if defined(__SANITIZE_ADDRESS__)
  EXPECT_FALSE(__asan_address_is_poisoned(again->data));
#endif
  again->data[0] = 1;  // writable again
  pool.release(again);
}

#endif  // NDEBUG
