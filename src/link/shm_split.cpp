// Split packets on the same-host link (shm_ring.hpp, kSlotSplit): a packet's payload lies in
// its slot's entry of the ring's payload area, and the entries of consecutive slots lie one
// after another. A MIDDLE packet of a whole entry and the slots right behind it that continue
// its message (ready, the same flow and other bytes but for the next PSNs, no wrap of the ring
// between them) go to the transport as one run (wire::ApartPayload), which it copies into
// place in one piece: receive coalescing, as GRO does for a socket. Nothing is taken on trust:
// lengths are checked here, every packet's headers by the transport as for any other.
#include <cstring>

#include "link/shm_channel.hpp"
#include "link/shm_link.hpp"

namespace uroce::link {

namespace {

// Whether slot s (ready) holds the k-th packet of the run that `first` starts (data and flags
// `word`): the same length, flags, flow and bytes, but for the PSN.
bool continues(const shm::Slot& s, const shm::Slot& first, uint32_t word, uint32_t k) {
  if (reinterpret_cast<const volatile uint32_t&>(s.len) != word || s.src != first.src || s.dst != first.dst ||
      s.src_port != first.src_port || s.dst_port != first.dst_port)
    return false;
  const size_t bth = sizeof(shm::Split), len = word & ~shm::kSlotFlags;
  // The Split, the BTH of the next packet, then everything after the BTH.
  return std::memcmp(s.data, first.data, bth) == 0 && wire::bth_follows(first.data + bth, s.data + bth, k) &&
         std::memcmp(s.data + bth + wire::kBthLen, first.data + bth + wire::kBthLen, len - bth - wire::kBthLen) == 0;
}

}  // namespace

uint32_t SameHostLink::take_split(Channel& c, const shm::Slot& s, uint32_t flags, PacketSink& sink, uint64_t now,
                                  const wire::Ipv4Fields& sent) {
  shm::Ring& r = *c.rx;
  const uint32_t h = r.head.load(std::memory_order_relaxed);
  const uint32_t slot_len = rx_buf_.len;  // a capture makes rx_buf_ the whole packet
  shm::Split d{};
  if (slot_len >= sizeof d) std::memcpy(&d, s.data, sizeof d);  // read once: the peer may write meanwhile
  const uint32_t rest = slot_len >= sizeof d ? slot_len - uint32_t(sizeof d) : 0;
  if (slot_len < sizeof d || d.len > shm::kPayloadBytes || !wire::run_unit(1, d.at, d.len, rest) ||
      !rx_buf_.icrc_skipped) {
    ++st_.rx_malformed;
    r.expire_front(slot_len);
    r.pop();
    return 0;
  }
  const uint8_t* other = s.data + sizeof d;
  uint32_t n = 1;
  if (d.len == shm::kPayloadBytes && rest >= wire::kBthLen &&
      (wire::opcode_info(wire::Opcode(other[0])).flags & wire::kMiddle)) {
    const uint32_t word = slot_len | flags;
    while (n < wire::kMaxRunPackets && (h + n) % shm::kSlots != 0 && r.ready_at(h + n) &&
           continues(r.slots[(h + n) % shm::kSlots], s, word, n))
      ++n;
  }
  hand_apart({other, rest}, {d.at, {r.payload[h % shm::kSlots], size_t(n) * d.len}, n}, sink, now, sent);
  for (uint32_t i = 0; i < n; ++i) {
    wire::expire(r.payload[(h + i) % shm::kSlots], d.len);
    r.expire_front(slot_len);
    r.pop();
  }
  st_.rx_split += n;
  st_.rx_split_runs += n > 1;
  return n;
}

}  // namespace uroce::link
