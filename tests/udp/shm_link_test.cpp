// The same-host link on its own, over a wire that only counts: how often it reads the wire
// while its rings bring packets, and that it reads it on every pass while they bring none.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "link/shm_link.hpp"

using namespace uroce;

namespace {

// A wire with nothing on it that counts how often it is read.
class CountingWire final : public link::Link {
 public:
  explicit CountingWire(Gid g) : gid_(g) {}
  std::vector<Gid> gids() const override { return {gid_}; }
  uint16_t src_port_for(uint32_t) const override { return 49152; }
  void send(std::span<wire::PacketBuf* const>, uint64_t) override {}
  int poll_rx(link::PacketSink&, uint64_t, int) override { return ++reads, 0; }
  int reads = 0;

 private:
  Gid gid_;
};

struct CountingSink final : link::PacketSink {
  wire::Ipv4Fields deliver(std::span<const uint8_t>, const wire::FlowAddr&, uint64_t,
                           const wire::Ipv4Fields& ip) override {
    ++packets;
    return ip;
  }
  int packets = 0;
};

// Addresses of this process alone: tests run side by side, the registry is per user.
Gid local_addr(uint32_t host) { return Gid::from_ipv4((127u << 24) | ((uint32_t(getpid()) & 0xffff) << 8) | host); }

}  // namespace

TEST(SameHostLink, ReadsTheWireOnEvery16thPassThatRingsBringPackets) {
  const Gid ga = local_addr(1), gb = local_addr(2);
  CountingWire wa(ga), wb(gb);
  link::SameHostLink a(wa, nullptr), b(wb, nullptr);
  bool attached = false;
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!(attached = a.attach_peer(gb, 0)) && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // b's listener is a thread
  ASSERT_TRUE(attached);

  wire::PacketBuf p;
  p.flow = {ga, gb, 49152, wire::kRoceV2Port};
  p.len = 64;
  wire::PacketBuf* one[] = {&p};
  CountingSink sink;
  // b sees the channel on its first receive; every pass from then on brings one packet.
  for (int i = 0; i < 64; ++i) {
    a.send(one, 0);
    b.poll_rx(sink, 0, 256);
  }
  EXPECT_EQ(sink.packets, 64);
  EXPECT_EQ(wb.reads, 4);
  // Nothing in the rings: the wire on every pass.
  for (int i = 0; i < 10; ++i) b.poll_rx(sink, 0, 256);
  EXPECT_EQ(wb.reads, 14);
  // A polling application's passes never read it while channels exist.
  a.send(one, 0);
  for (int i = 0; i < 10; ++i) b.poll_rx_inline(sink, 0, 256);
  EXPECT_EQ(sink.packets, 65);
  EXPECT_EQ(wb.reads, 14);
}
