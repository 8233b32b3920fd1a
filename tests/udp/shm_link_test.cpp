// The same-host link on its own, over a wire that only counts: how often it reads the wire
// while its rings bring packets (on every pass while they bring none), and what it does with
// more than a ring holds.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "link/shm_backlog.hpp"
#include "link/shm_link.hpp"
#include "link/shm_ring.hpp"

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

namespace {

struct RecordingSink final : link::PacketSink {
  wire::Ipv4Fields deliver(std::span<const uint8_t> pkt, const wire::FlowAddr&, uint64_t,
                           const wire::Ipv4Fields& ip) override {
    got.emplace_back(pkt.begin(), pkt.end());
    return ip;
  }
  std::vector<std::vector<uint8_t>> got;
};

// Packet i: a length between 1 and 4164 bytes, and bytes only it has.
wire::PacketBuf numbered(uint32_t i, const wire::FlowAddr& f) {
  wire::PacketBuf p;
  p.flow = f;
  p.len = 1 + (i * 2654435761u) % wire::kMaxPacket;
  for (uint32_t k = 0; k < p.len; ++k) p.data[k] = uint8_t(i * 31 + k);
  return p;
}

bool attach(link::SameHostLink& a, const Gid& peer) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < end) {
    if (a.attach_peer(peer, 0)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the peer's listener is a thread
  }
  return false;
}

}  // namespace

// More than a ring holds waits in the sender's backlog and arrives whole and in order; the
// sender does not sleep while it waits.
TEST(SameHostLink, ABacklogArrivesWholeAndInOrder) {
  const Gid ga = local_addr(3), gb = local_addr(4);
  CountingWire wa(ga), wb(gb);
  link::SameHostLink a(wa, nullptr), b(wb, nullptr);
  ASSERT_TRUE(attach(a, gb));
  const wire::FlowAddr f{ga, gb, 49152, wire::kRoceV2Port};
  constexpr uint32_t kPackets = 3 * link::shm::kSlots + 17;
  for (uint32_t i = 0; i < kPackets; i += 100) {  // in sends of up to 100 packets
    std::vector<wire::PacketBuf> batch;
    for (uint32_t k = i; k < std::min(i + 100, kPackets); ++k) batch.push_back(numbered(k, f));
    std::vector<wire::PacketBuf*> ptrs;
    for (auto& p : batch) ptrs.push_back(&p);
    a.send(ptrs, 0);
  }
  EXPECT_FALSE(a.prepare_sleep());  // its backlog waits for room
  RecordingSink sink;
  for (int round = 0; round < 100 && sink.got.size() < kPackets; ++round) {
    b.poll_rx(sink, 0, 4096);
    CountingSink none;
    a.poll_rx(none, 0, 256);  // makes room: the backlog moves on into the ring
  }
  ASSERT_EQ(sink.got.size(), kPackets);
  for (uint32_t i = 0; i < kPackets; ++i) {
    wire::PacketBuf want = numbered(i, f);
    ASSERT_EQ(sink.got[i], std::vector<uint8_t>(want.data, want.data + want.len)) << "packet " << i;
  }
  EXPECT_EQ(a.stats().tx_full_drops, 0u);
  EXPECT_TRUE(a.prepare_sleep());
  a.woke();
}

// A backlog holds 65536 packets or 64 MiB, whichever comes first; beyond that packets are
// dropped and counted (the transport recovers them as losses on a wire).
TEST(SameHostLink, ABacklogBeyondItsBoundDrops) {
  uint8_t host = 20;
  for (const uint32_t len : {100u, wire::kMaxPacket}) {
    const Gid ga = local_addr(host++), gb = local_addr(host++);
    CountingWire wa(ga), wb(gb);
    link::SameHostLink a(wa, nullptr), b(wb, nullptr);
    ASSERT_TRUE(attach(a, gb));
    const wire::FlowAddr f{ga, gb, 49152, wire::kRoceV2Port};
    const uint64_t held = std::min<uint64_t>(link::shm::kMaxBacklogPackets,
                                             (link::shm::kMaxBacklogBytes + len - 1) / len);
    const uint64_t total = link::shm::kSlots + held + 5;
    std::vector<wire::PacketBuf> batch(256);
    for (auto& p : batch) p.flow = f, p.len = len;
    std::vector<wire::PacketBuf*> ptrs;
    for (auto& p : batch) ptrs.push_back(&p);
    for (uint64_t sent = 0; sent < total; sent += batch.size())
      a.send(std::span(ptrs).first(std::min<uint64_t>(batch.size(), total - sent)), 0);
    EXPECT_EQ(a.stats().tx_full_drops, 5u) << "packets of " << len << " bytes";
    CountingSink got;
    for (int round = 0; round < 10000 && uint64_t(got.packets) < total - 5; ++round) {
      b.poll_rx(got, 0, 4096);
      CountingSink none;
      a.poll_rx(none, 0, 256);
    }
    EXPECT_EQ(uint64_t(got.packets), total - 5) << "packets of " << len << " bytes";
  }
}

// A peer that goes away leaves nothing behind that would keep the sender awake for ever.
TEST(SameHostLink, ABacklogToAPeerThatLeftIsDropped) {
  const Gid ga = local_addr(5), gb = local_addr(6);
  CountingWire wa(ga), wb(gb);
  link::SameHostLink a(wa, nullptr);
  auto b = std::make_unique<link::SameHostLink>(wb, nullptr);
  ASSERT_TRUE(attach(a, gb));
  const wire::FlowAddr f{ga, gb, 49152, wire::kRoceV2Port};
  std::vector<wire::PacketBuf> batch;
  for (uint32_t i = 0; i < link::shm::kSlots + 50; ++i) batch.push_back(numbered(i, f));
  std::vector<wire::PacketBuf*> ptrs;
  for (auto& p : batch) ptrs.push_back(&p);
  a.send(ptrs, 0);
  EXPECT_FALSE(a.prepare_sleep());
  b.reset();
  bool slept = false;
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  CountingSink none;
  while (!slept && std::chrono::steady_clock::now() < end) {
    a.poll_rx(none, 0, 256);  // the watcher marks the channel dead; the next receive lets it go
    if ((slept = a.prepare_sleep())) a.woke();
    else std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(slept);
}
