// Split packets on the same-host link: payloads from private memory travel in their slots'
// payload entries and arrive byte-exact through SEND, WRITE and READ, and MIDDLE packets in a
// row are taken as runs. A forged peer's split slots are checked before the transport sees
// them: impossible lengths are dropped and counted, a run never crosses the ring's end (where
// the entries stop being adjacent) nor joins slots of other flows, messages or PSNs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../common/api_side.hpp"
#include "../common/seed.hpp"
#include "../common/shm_forged_peer.hpp"
#include "wire/packet.hpp"
#include "uroce/uroce.hpp"

using namespace uroce;
namespace shm = uroce::link::shm;

namespace {

constexpr size_t kBytes = 1 << 20;  // ApiSide's region

// An end with heap memory: no file behind its region.
struct Side : test::ApiSide {
  Side() : test::ApiSide(DeviceOptions{}) {}
  uint8_t* p() { return buf.data(); }
};

// Split slots written into a forged peer's ring towards the victim's QP; whole slots too. Slots
// are published by go(), the last first: the victim finds them all ready at once.
struct SlotWriter {
  test::ForgedPeer& f;
  Gid victim;
  uint32_t qpn, rkey;
  uint64_t base;
  uint32_t next = 0;     // the next slot's index
  uint32_t written = 0;  // slots written and not yet published from here on
  uint32_t dma_len = 16 * 4096;  // a FIRST packet's RETH length

  shm::Slot& slot() { return f.area->ring[0].slots[next % shm::kSlots]; }
  void fill(shm::Slot& s, uint32_t len) {
    s.len = len;
    test::ForgedPeer::address(s, victim);
    ++next;
  }
  void go() {
    for (uint32_t i = next; i-- > written;) f.area->ring[0].slots[i % shm::kSlots].seq.store(i + 1, std::memory_order_release);
    written = next;
    f.wake();
  }
  // A WRITE packet whose payload (`payload` bytes from `bytes`) goes into the slot's entry;
  // claimed: what the slot says of it (0: its length); at: where it goes in the packet (0: after
  // the headers); dest: another QP than the victim's (0: the victim's).
  void split(wire::Opcode op, uint32_t psn, const uint8_t* bytes, uint32_t payload, uint64_t at_remote = 0,
             uint32_t claimed = 0, uint32_t at = 0, uint32_t flags = shm::kSlotNoIcrc, uint32_t dest = 0) {
    wire::Packet p;
    p.bth.opcode = op;
    p.bth.dest_qp = dest ? dest : qpn;
    p.bth.psn = wire::Psn(psn);
    if (wire::opcode_info(op).flags & wire::kFirst) p.reth = {base + at_remote, rkey, dma_len};
    shm::Slot& s = slot();
    std::memcpy(f.area->ring[0].payload[next % shm::kSlots], bytes, payload);
    const size_t hdr = wire::encode_headers(p, s.data + sizeof(shm::Split));
    const shm::Split d{at ? at : uint32_t(hdr), claimed ? claimed : payload};
    std::memcpy(s.data, &d, sizeof d);
    std::memset(s.data + sizeof d + hdr, 0, wire::kIcrcLen);
    fill(s, uint32_t(sizeof d + hdr + wire::kIcrcLen) | shm::kSlotSplit | flags);
  }
  // 64 bytes that are no packet anyone takes: they fill a slot.
  void filler() {
    shm::Slot& s = slot();
    std::memset(s.data, 0, 64);
    fill(s, 64);
  }
};

template <class Side>
uint64_t until(Side& v, const char* counter, uint64_t want) {
  Wc wc[4];
  for (int i = 0; i < 20000 && v.counter(counter) < want; ++i) (void)v.cq->wait(wc, 1);
  return v.counter(counter);
}

}  // namespace

// Between two devices with heap memory: every payload of 2 KiB or more goes split, each is
// taken, every run taken whole by the responder, and the bytes arrive exact.
TEST(SameHostSplit, HeapPayloadsGoInPayloadEntries) {
  uint64_t seed = test::test_seed(51);
  SCOPED_TRACE("seed " + std::to_string(seed));
  Side a, b;
  ConnectOptions o;
  o.timeout = 18;
  ASSERT_TRUE(a.qp->connect({*b.dev->query_gid(0), b.qp->qp_num(), 3, uint64_t(b.p()), b.mr->rkey(), kBytes}, 9, o));
  ASSERT_TRUE(b.qp->connect({*a.dev->query_gid(0), a.qp->qp_num(), 9, uint64_t(a.p()), a.mr->rkey(), kBytes}, 3, o));
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < kBytes; ++i) a.p()[i] = uint8_t(rng()), b.p()[i] = uint8_t(rng());

  // SEND of 200003 bytes: 48 packets of 4096 split, and one of 3395 (and a pad byte) whole:
  // the transport takes a payload apart in whole words.
  Sge r = b.mr->sge(1000, 200'003);
  ASSERT_TRUE(b.qp->post_recv({1, {&r, 1}}));
  Sge s = a.mr->sge(12, 200'003);
  ASSERT_TRUE(a.qp->post_send({2, WrOpcode::Send, kSendSignaled, {&s, 1}}));
  ASSERT_EQ(b.wait_one().status, WcStatus::Success);
  ASSERT_EQ(a.wait_one().status, WcStatus::Success);
  ASSERT_EQ(std::memcmp(b.p() + 1000, a.p() + 12, 200'003), 0);
  // WRITE of 300001 bytes: 73 of 4096 split, the last (1017 bytes) stays in its slot.
  Sge w = a.mr->sge(300'000, 300'001);
  SendWr wr{3, WrOpcode::RdmaWrite, kSendSignaled, {&w, 1}};
  wr.remote_addr = uint64_t(b.p()) + 500'000;
  wr.rkey = b.mr->rkey();
  ASSERT_TRUE(a.qp->post_send(wr));
  ASSERT_EQ(a.wait_one().status, WcStatus::Success);
  ASSERT_EQ(std::memcmp(b.p() + 500'000, a.p() + 300'000, 300'001), 0);
  // READ of 250000 bytes: b's 61 responses of 4096 split, the last (144 bytes) not.
  Sge rd = a.mr->sge(700'000, 250'000);
  SendWr rw{4, WrOpcode::RdmaRead, kSendSignaled, {&rd, 1}};
  rw.remote_addr = uint64_t(b.p()) + 4;
  rw.rkey = b.mr->rkey();
  ASSERT_TRUE(a.qp->post_send(rw));
  ASSERT_EQ(a.wait_one().status, WcStatus::Success);
  ASSERT_EQ(std::memcmp(a.p() + 700'000, b.p() + 4, 250'000), 0);

  EXPECT_EQ(a.counter("shm_tx_split"), 48u + 73u);
  EXPECT_EQ(b.counter("shm_tx_split"), 61u);
  EXPECT_EQ(b.counter("shm_rx_split"), a.counter("shm_tx_split"));
  EXPECT_EQ(a.counter("shm_rx_split"), b.counter("shm_tx_split"));
  EXPECT_EQ(a.counter("shm_tx_placed") + b.counter("shm_tx_placed"), 0u) << "heap memory is never placed";
  // How many slots a pass finds ready is the scheduler's; whatever runs of the SEND and the
  // WRITE b's ring made, its responder took whole (a's runs are READ responses, which its
  // requester takes packet by packet).
  EXPECT_EQ(b.counter("rx_runs_whole"), b.counter("shm_rx_split_runs"));
  EXPECT_EQ(a.counter("retransmitted_packets") + b.counter("retransmitted_packets"), 0u);
  EXPECT_EQ(a.counter("rx_malformed") + b.counter("rx_malformed") + a.counter("shm_rx_malformed") +
                b.counter("shm_rx_malformed"),
            0u);
}

// A forged peer's split slots: what claims more than an entry, a payload that starts past the
// slot's bytes, or a packet with its ICRC (a split packet never has one) is dropped and
// counted. MIDDLE packets in a row are taken as one run, but a run stops at the ring's end
// (the entries after the last one are the next ring's memory), at a slot of another QP, and
// at a PSN that does not follow; every byte lands where its own packet says.
TEST(SameHostSplit, ForgedSplitSlotsAreCheckedAndRunsStopWhereTheyMust) {
  Side victim;
  test::ForgedPeer f(*victim.dev->query_gid(0), /*sealed=*/true);
  ASSERT_EQ(f.answer, 'Y');
  ConnectOptions o;
  o.timeout = 18;
  ASSERT_TRUE(victim.qp->connect({Gid::from_ipv4(0x7f0000fe), 0x123, 100, 0, 0, 0}, 500, o));
  std::memset(victim.p(), 0xaa, kBytes);
  std::vector<uint8_t> data(16 * 4096);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 13 + 7);
  SlotWriter w{f, *victim.dev->query_gid(0), victim.qp->qp_num(), victim.mr->rkey(), uint64_t(victim.p())};
  using wire::Opcode;

  w.split(Opcode::RC_WRITE_MIDDLE, 100, data.data(), 4096, 0, shm::kPayloadBytes + 4);  // more than an entry
  w.split(Opcode::RC_WRITE_MIDDLE, 100, data.data(), 4096, 0, 0, 400);                  // past the slot's bytes
  w.split(Opcode::RC_WRITE_MIDDLE, 100, data.data(), 4096, 0, 0, 0, 0);                 // an ICRC
  w.go();
  EXPECT_EQ(until(victim, "shm_rx_malformed", 3), 3u);
  EXPECT_EQ(victim.counter("rx_packets"), 0u) << "nothing malformed reached the transport";
  EXPECT_EQ(victim.counter("shm_rx_split"), 0u);

  // Fill the ring up to its last four slots: whole packets no QP takes.
  while (w.next % shm::kSlots != shm::kSlots - 5) w.filler();
  w.go();
  ASSERT_EQ(until(victim, "shm_rx_packets", w.next - 3), w.next - 3);
  const uint64_t packets_before = victim.counter("shm_rx_packets");

  // A 16-packet WRITE: FIRST in the ring's slot 251, MIDDLE in 252..255 and 0..9 (the ring's
  // end between), LAST in 10; then published at once, all ready together.
  const uint32_t start = w.next;
  w.split(Opcode::RC_WRITE_FIRST, 100, data.data(), 4096, 4096);
  for (uint32_t k = 1; k < 15; ++k) w.split(Opcode::RC_WRITE_MIDDLE, 100 + k, data.data() + k * 4096, 4096);
  w.split(Opcode::RC_WRITE_LAST, 115, data.data() + 15 * 4096, 4096);
  ASSERT_EQ(start % shm::kSlots, shm::kSlots - 5);
  w.go();
  ASSERT_EQ(until(victim, "shm_rx_packets", packets_before + 16), packets_before + 16);
  EXPECT_EQ(std::memcmp(victim.p() + 4096, data.data(), 16 * 4096), 0);
  EXPECT_EQ(victim.p()[4095], 0xaa);
  EXPECT_EQ(victim.p()[17 * 4096], 0xaa);
  // MIDDLE packets in 252..255 are one run, those in 0..9 another: two, each taken whole.
  EXPECT_EQ(victim.counter("shm_rx_split"), 16u);
  EXPECT_EQ(victim.counter("shm_rx_split_runs"), 2u);
  EXPECT_EQ(victim.counter("rx_runs_whole"), 2u);

  // MIDDLE packets that do not continue each other: another QP's slot in between, then a PSN
  // that skips one. None of them joins the slot before it.
  const uint64_t runs = victim.counter("shm_rx_split_runs");
  w.dma_len = 4 * 4096;
  w.split(Opcode::RC_WRITE_FIRST, 116, data.data(), 4096, 20 * 4096);
  w.split(Opcode::RC_WRITE_MIDDLE, 117, data.data() + 4096, 4096);
  w.split(Opcode::RC_WRITE_MIDDLE, 118, data.data() + 2 * 4096, 4096, 0, 0, 0, shm::kSlotNoIcrc, 0x777);
  w.split(Opcode::RC_WRITE_MIDDLE, 118, data.data() + 2 * 4096, 4096);
  w.split(Opcode::RC_WRITE_MIDDLE, 120, data.data() + 3 * 4096, 4096);  // 119 skipped
  w.go();
  ASSERT_GE(until(victim, "shm_rx_split", 21), 21u);
  EXPECT_EQ(victim.counter("shm_rx_split_runs"), runs) << "no run across another QP's slot or a PSN gap";
  EXPECT_EQ(std::memcmp(victim.p() + 20 * 4096, data.data(), 3 * 4096), 0);
  EXPECT_EQ(victim.p()[23 * 4096], 0xaa) << "the packet after the gap is not placed";
}

// A storm of forged split slots, seeded: lengths, offsets, flags, opcodes, PSNs and QPs drawn
// at random around the valid ones, published in bursts of random size over several laps of
// the ring (so runs are tried at every place, the ring's end included). The victim reads every
// slot, counts what it drops, and afterwards still carries a byte-exact WRITE from a real peer.
TEST(SameHostSplit, ARandomStormOfForgedSlotsHarmsNothing) {
  const uint64_t seed = test::test_seed(53);
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  Side victim;
  test::ForgedPeer f(*victim.dev->query_gid(0), /*sealed=*/true);
  ASSERT_EQ(f.answer, 'Y');
  auto forged_qp = std::move(*victim.pd->create_qp({QpType::RC, victim.cq.get(), victim.cq.get(), {}, false, nullptr}));
  ConnectOptions o;
  o.timeout = 18;
  ASSERT_TRUE(forged_qp->connect({Gid::from_ipv4(0x7f0000fe), 0x123, 100, 0, 0, 0}, 500, o));
  std::memset(victim.p(), 0xaa, kBytes);
  std::vector<uint8_t> data(4096);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(rng());
  SlotWriter w{f, *victim.dev->query_gid(0), forged_qp->qp_num(), victim.mr->rkey(), uint64_t(victim.p())};
  using wire::Opcode;
  constexpr Opcode kOps[] = {Opcode::RC_WRITE_FIRST, Opcode::RC_WRITE_MIDDLE, Opcode::RC_WRITE_MIDDLE,
                             Opcode::RC_WRITE_MIDDLE, Opcode::RC_WRITE_LAST,   Opcode::RC_SEND_MIDDLE,
                             Opcode::RC_WRITE_ONLY};
  constexpr uint32_t kSlotsSent = 6 * shm::kSlots;
  uint32_t psn = 100;
  Wc wc[4];
  while (w.next < kSlotsSent) {
    const uint32_t burst = 1 + uint32_t(rng() % 40);
    // A producer never overtakes its consumer: room for the burst first.
    for (int i = 0; i < 20000 && w.next + burst - f.area->ring[0].head.load() > shm::kSlots; ++i)
      (void)victim.cq->wait(wc, 1);
    ASSERT_LE(w.next + burst - f.area->ring[0].head.load(), shm::kSlots) << "the victim stopped reading";
    for (uint32_t i = 0; i < burst && w.next < kSlotsSent; ++i) {
      const Opcode op = kOps[rng() % std::size(kOps)];
      const uint32_t r = uint32_t(rng() % 16);
      const uint32_t payload = r < 10 ? 4096 : 4 * uint32_t(rng() % 1025);
      const uint32_t claimed = r == 10 ? uint32_t(rng() % 9000) : 0;
      const uint32_t at = r == 11 ? uint32_t(rng() % 256) : 0;
      const uint32_t flags = r == 12 ? uint32_t(rng() % 8) << 29 : shm::kSlotNoIcrc;
      const uint32_t dest = r == 13 ? uint32_t(rng() & 0xffffff) : 0;
      w.dma_len = uint32_t(rng() % (2 * kBytes));
      if (rng() % 4 == 0) psn = 100 + uint32_t(rng() % 64);
      w.split(op, psn++, data.data(), std::max<uint32_t>(payload, 4), rng() % kBytes, claimed, at, flags, dest);
    }
    w.go();
  }
  // Every slot read: the victim's head is where the forged peer's tail is.
  for (int i = 0; i < 20000 && f.area->ring[0].head.load() != w.next; ++i) (void)victim.cq->wait(wc, 1);
  ASSERT_EQ(f.area->ring[0].head.load(), w.next);
  EXPECT_GT(victim.counter("shm_rx_split_runs"), 0u);
  EXPECT_GT(victim.counter("shm_rx_malformed"), 0u);
  EXPECT_EQ(victim.counter("shm_rx_split") + victim.counter("shm_rx_malformed") <= w.next, true);

  // The victim carries a real peer's WRITE, byte for byte, after all that.
  Side peer;
  ASSERT_TRUE(peer.qp->connect(victim.endpoint(7), 8, o));
  ASSERT_TRUE(victim.qp->connect(peer.endpoint(8), 7, o));
  for (size_t i = 0; i < kBytes; ++i) peer.p()[i] = uint8_t(rng());
  Sge s = peer.mr->sge(0, 300'000);
  SendWr wr{1, WrOpcode::RdmaWrite, kSendSignaled, {&s, 1}};
  wr.remote_addr = uint64_t(victim.p()) + 4096;
  wr.rkey = victim.mr->rkey();
  ASSERT_TRUE(peer.qp->post_send(wr));
  ASSERT_EQ(peer.wait_one().status, WcStatus::Success);
  EXPECT_EQ(std::memcmp(victim.p() + 4096, peer.p(), 300'000), 0);
}
