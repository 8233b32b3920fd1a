// The same-host link on its own, over a wire that only counts: how often it reads the wire
// while its rings bring packets (on every pass while they bring none), what it does with
// more than a ring holds, what a peer that left leaves behind, and what a peer that never
// answers costs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../common/proc.hpp"
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
  void send(std::span<wire::PacketBuf* const> pkts, uint64_t) override { sent += int(pkts.size()); }
  int poll_rx(link::PacketSink&, uint64_t, int) override { return ++reads, 0; }
  int reads = 0;
  int sent = 0;

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

// Sends packets from .. from + n - 1 (numbered) in one call.
void send_numbered(link::SameHostLink& l, const wire::FlowAddr& f, uint32_t from, uint32_t n) {
  std::vector<wire::PacketBuf> batch;
  for (uint32_t k = from; k < from + n; ++k) batch.push_back(numbered(k, f));
  std::vector<wire::PacketBuf*> ptrs;
  for (auto& p : batch) ptrs.push_back(&p);
  l.send(ptrs, 0);
}

bool attach(link::SameHostLink& a, const Gid& peer) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < end) {
    if (a.attach_peer(peer, 0)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the peer's listener is a thread
  }
  return false;
}

// Two links of this host (a's addresses at `host`, b's at host + 1) and the flow from a to b.
struct LinkPair {
  explicit LinkPair(uint32_t host)
      : ga(local_addr(host)), gb(local_addr(host + 1)), wa(ga), wb(gb), a(wa, nullptr), b(wb, nullptr),
        f{ga, gb, 49152, wire::kRoceV2Port} {}
  // b reads until it has `want` packets (bounded); a moves its backlog on meanwhile.
  void drain(RecordingSink& sink, size_t want) {
    CountingSink none;
    for (int round = 0; round < 100 && sink.got.size() < want; ++round) {
      b.poll_rx(sink, 0, 4096);
      a.poll_rx(none, 0, 256);  // makes room: the backlog moves on into the ring
    }
  }
  Gid ga, gb;
  CountingWire wa, wb;
  link::SameHostLink a, b;
  wire::FlowAddr f;
};

}  // namespace

// More than a ring holds waits in the sender's backlog and arrives whole and in order; the
// sender does not sleep while it waits.
TEST(SameHostLink, ABacklogArrivesWholeAndInOrder) {
  LinkPair l(3);
  link::SameHostLink& a = l.a;
  ASSERT_TRUE(attach(a, l.gb));
  constexpr uint32_t kPackets = 3 * link::shm::kSlots + 17;
  for (uint32_t i = 0; i < kPackets; i += 100) send_numbered(a, l.f, i, std::min(100u, kPackets - i));
  EXPECT_FALSE(a.prepare_sleep());  // its backlog waits for room
  RecordingSink sink;
  l.drain(sink, kPackets);
  ASSERT_EQ(sink.got.size(), kPackets);
  for (uint32_t i = 0; i < kPackets; ++i) {
    wire::PacketBuf want = numbered(i, l.f);
    ASSERT_EQ(sink.got[i], std::vector<uint8_t>(want.data, want.data + want.len)) << "packet " << i;
  }
  EXPECT_EQ(a.stats().tx_full_drops, 0u);
  EXPECT_TRUE(a.prepare_sleep());
  a.woke();
}

// While packets wait in the ring or for room in it, the link says when it last saw the peer
// take some: the transport's timer restarts for packets that are only queued, but not for a
// peer that stopped reading.
TEST(SameHostLink, HeldPacketsSayWhenThePeerLastTookSome) {
  LinkPair l(17);
  link::SameHostLink& a = l.a;
  ASSERT_TRUE(attach(a, l.gb));
  EXPECT_EQ(a.held_moved_at(l.gb, 0, 50), 0u);  // nothing sent
  const uint32_t total = link::shm::kSlots + 10;
  send_numbered(a, l.f, 0, total);
  EXPECT_EQ(a.held_moved_at(l.gb, 0, 100), 0u);  // held, but never seen taken
  EXPECT_EQ(a.held_moved_at(local_addr(19), 0, 100), 0u);  // nothing waits for anyone else
  RecordingSink sink;
  l.b.poll_rx(sink, 0, 5);
  EXPECT_EQ(a.held_moved_at(l.gb, 0, 200), 200u);  // five taken
  EXPECT_EQ(a.held_moved_at(l.gb, 0, 300), 200u);  // none since: its age grows
  l.drain(sink, total);
  ASSERT_EQ(sink.got.size(), total);
  EXPECT_EQ(a.held_moved_at(l.gb, 0, 400), 0u);  // none wait
  // The answer may wait in our own ring from the peer: that is read, so it moves.
  wire::PacketBuf back = numbered(0, {l.gb, l.ga, 49152, wire::kRoceV2Port});
  wire::PacketBuf* bp = &back;
  l.b.send({&bp, 1}, 0);
  EXPECT_EQ(a.held_moved_at(l.gb, 0, 500), 500u);
  RecordingSink mine;
  a.poll_rx(mine, 0, 256);
  ASSERT_EQ(mine.got.size(), 1u);
  EXPECT_EQ(a.held_moved_at(l.gb, 0, 600), 0u);
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
  send_numbered(a, f, 0, link::shm::kSlots + 50);
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

namespace {

// Calls step() until done() or 10 s have passed; true if done.
template <class Step, class Done>
bool within_10s(Step step, Done done) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    step();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace

// A peer that left keeps its channel until what it sent last is read; then the channel's socket
// and eventfds are closed and its ring unmapped. Twenty peers in turn leave nothing behind (a
// long-lived device used to keep 3 descriptors and 8.65 MB for every peer it ever met).
TEST(SameHostLink, AChannelToAPeerThatLeftIsFreedOnceReadToTheEnd) {
  const Gid ga = local_addr(7), gb = local_addr(8);
  CountingWire wa(ga), wb(gb);
  link::SameHostLink a(wa, nullptr);
  const int fds = test::open_fds();
  ASSERT_EQ(test::mappings("/memfd:uroce-shm"), 0);
  for (uint32_t peer = 0; peer < 20; ++peer) {
    SCOPED_TRACE("peer " + std::to_string(peer));
    {
      link::SameHostLink b(wb, nullptr);
      ASSERT_TRUE(attach(a, gb));
      wire::PacketBuf p = numbered(peer, {gb, ga, 49152, wire::kRoceV2Port});
      wire::PacketBuf* one[] = {&p};
      b.send(one, 0);  // its last packet, into a's ring
    }
    // b is gone: its socket hung up. Until a reads what b sent, the channel stays whole.
    ASSERT_TRUE(within_10s([] {}, [&] { return !a.carries(gb); }));
    EXPECT_EQ(test::open_fds(), fds + 3);  // its socket and two eventfds
    EXPECT_EQ(test::mappings("/memfd:uroce-shm"), 1);
    CountingSink sink;
    a.poll_rx(sink, 0, 256);
    EXPECT_EQ(sink.packets, 1);
    // Read to the end: the next receive lets it go, and the watcher closes and unmaps it.
    CountingSink none;
    EXPECT_TRUE(within_10s([&] { a.poll_rx(none, 0, 256); },
                           [&] { return test::open_fds() == fds && test::mappings("/memfd:uroce-shm") == 0; }))
        << test::open_fds() - fds << " descriptors and " << test::mappings("/memfd:uroce-shm") << " rings left";
    EXPECT_EQ(none.packets, 0);
  }
  EXPECT_EQ(a.stats().channels, 0u);
}

// A peer whose name is there but who never answers (a stopped process) costs the sender
// nothing: looking it up and sending return at once, the packets take the wire meanwhile, and
// the handshake is given up after a second. (It used to wait that second under the engine
// lock, and again every second after.)
TEST(SameHostLink, APeerThatNeverAnswersHoldsNothingUp) {
  const Gid ga = local_addr(9), gx = local_addr(10);
  CountingWire wa(ga);
  link::SameHostLink a(wa, nullptr);
  const int stopped = test::hold_registry_name(gx.to_string());
  ASSERT_GE(stopped, 0);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(a.attach_peer(gx, 0));
  wire::PacketBuf p;
  p.flow = {ga, gx, 49152, wire::kRoceV2Port};
  p.len = 64;
  wire::PacketBuf* one[] = {&p};
  for (int i = 0; i < 100; ++i) a.send(one, 0);
  const auto sent = std::chrono::steady_clock::now() - start;
  EXPECT_LT(sent, std::chrono::milliseconds(700));  // a wait for the handshake would take its second
  EXPECT_EQ(wa.sent, 100);
  a.wait_handshake(gx, 10'000);
  const auto given_up = std::chrono::steady_clock::now() - start;
  EXPECT_GE(given_up, std::chrono::milliseconds(900));  // the peer had its second
  EXPECT_LT(given_up, std::chrono::seconds(10));
  EXPECT_FALSE(a.attach_peer(gx, 0));
  EXPECT_EQ(a.stats().channels, 0u);
  close(stopped);
}

// A receive takes at most a pass's worth of ring packets, and each pass starts at the next
// channel: two peers that both keep more than that waiting are both heard, pass by pass.
TEST(SameHostLink, PeersThatKeepThePassFullTakeTurns) {
  const Gid g1 = local_addr(21), g2 = local_addr(22), gb = local_addr(23);
  CountingWire w1(g1), w2(g2), wb(gb);
  link::SameHostLink a1(w1, nullptr), a2(w2, nullptr), b(wb, nullptr);
  ASSERT_TRUE(attach(a1, gb));
  ASSERT_TRUE(attach(a2, gb));
  struct BySource final : link::PacketSink {
    wire::Ipv4Fields deliver(std::span<const uint8_t>, const wire::FlowAddr& f, uint64_t,
                             const wire::Ipv4Fields& ip) override {
      from.push_back(f.src);
      return ip;
    }
    std::vector<Gid> from;
  } sink;
  constexpr int kEach = 200;  // more than three passes' worth, and fewer than a ring holds
  static_assert(kEach < int(link::shm::kSlots));
  for (auto [a, g] : {std::pair{&a1, g1}, std::pair{&a2, g2}}) {
    std::vector<wire::PacketBuf> pkts;
    for (int i = 0; i < kEach; ++i) pkts.push_back(numbered(uint32_t(i), {g, gb, 49152, wire::kRoceV2Port}));
    std::vector<wire::PacketBuf*> q;
    for (auto& p : pkts) q.push_back(&p);
    a->send(q, 0);
  }
  // Two passes: one from each peer, whichever comes first.
  const int first = b.poll_rx(sink, 0, 256);
  const int second = b.poll_rx(sink, 0, 256);
  ASSERT_GT(first, 0);
  ASSERT_EQ(first, second);
  // Each pass read one peer (the first has a pass's worth and more), and not the same one.
  ASSERT_EQ(sink.from.size(), size_t(2 * first));
  EXPECT_EQ(std::count(sink.from.begin(), sink.from.begin() + first, sink.from.front()), first);
  EXPECT_EQ(std::count(sink.from.begin() + first, sink.from.end(), sink.from.back()), first);
  EXPECT_NE(sink.from.front(), sink.from.back()) << "both passes read the same peer";
  // The rest arrives too, all of it.
  for (int i = 0; i < 100 && sink.from.size() < size_t(2 * kEach); ++i) b.poll_rx(sink, 0, 256);
  EXPECT_EQ(std::count(sink.from.begin(), sink.from.end(), g1), kEach);
  EXPECT_EQ(std::count(sink.from.begin(), sink.from.end(), g2), kEach);
}
