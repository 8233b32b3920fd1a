#include "transport/flow_table.hpp"

#include "transport/qp_transport.hpp"

#include <algorithm>
#include <cstring>

namespace uroce::transport {
namespace {

uint16_t be16(const uint8_t* p) { return uint16_t(p[0] << 8 | p[1]); }
uint32_t be32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }

template <size_t N>
bool bytes_match(const uint8_t* got, const std::array<uint8_t, N>& want, const std::array<uint8_t, N>& mask) {
  for (size_t i = 0; i < N; ++i)
    if ((got[i] ^ want[i]) & mask[i]) return false;
  return true;
}
template <class T>
bool field_match(T got, T want, T mask) {
  return ((got ^ want) & mask) == 0;
}

constexpr uint16_t kEtherIpv4 = 0x0800, kEtherIpv6 = 0x86dd, kEtherVlan = 0x8100;
constexpr uint8_t kTcp = 6, kUdp = 17;

// Where each layer starts in a frame, as far as the frame holds it.
struct Layers {
  uint16_t ether_type = 0;
  bool tagged = false;
  uint16_t tci = 0;
  const uint8_t* ip = nullptr;  // its IPv4 or IPv6 header, whole
  bool v6 = false;
  uint8_t proto = 0;
  const uint8_t* l4 = nullptr;  // 4 bytes of ports at least; null for a later fragment
};

Layers parse(std::span<const uint8_t> f) {
  Layers l;
  if (f.size() < 14) return l;
  size_t at = 12;
  l.ether_type = be16(&f[at]);
  if (l.ether_type == kEtherVlan) {
    if (f.size() < 18) return l;
    l.tagged = true;
    l.tci = be16(&f[14]);
    at = 16;
    l.ether_type = be16(&f[at]);
  }
  at += 2;
  const size_t left = f.size() - at;
  if (l.ether_type == kEtherIpv4 && left >= 20 && f[at] >> 4 == 4) {
    const size_t ihl = size_t(f[at] & 0xf) * 4;
    if (ihl < 20 || left < ihl) return l;
    l.ip = &f[at];
    l.proto = f[at + 9];
    const bool later_fragment = (be16(&f[at + 6]) & 0x1fff) != 0;
    if (!later_fragment && left >= ihl + 4) l.l4 = &f[at + ihl];
  } else if (l.ether_type == kEtherIpv6 && left >= 40 && f[at] >> 4 == 6) {
    l.ip = &f[at];
    l.v6 = true;
    l.proto = f[at + 6];  // extension headers are not walked: a rule on ports sees the first header
    if (left >= 44) l.l4 = &f[at + 40];
  }
  return l;
}

bool eth_matches(const FlowRule::Eth& e, std::span<const uint8_t> f, const Layers& l) {
  if (f.size() < 14) return false;
  if (!bytes_match(&f[0], e.dst, e.dst_mask) || !bytes_match(&f[6], e.src, e.src_mask)) return false;
  if (!field_match(l.ether_type, e.ether_type, e.ether_type_mask)) return false;
  if (e.vlan_tag_mask && (!l.tagged || !field_match(l.tci, e.vlan_tag, e.vlan_tag_mask))) return false;
  return true;
}

bool ipv4_matches(const FlowRule::Ipv4& r, const Layers& l) {
  if (!l.ip || l.v6) return false;
  return field_match(be32(l.ip + 12), r.src, r.src_mask) && field_match(be32(l.ip + 16), r.dst, r.dst_mask) &&
         field_match(l.proto, r.proto, r.proto_mask) && field_match(l.ip[1], r.tos, r.tos_mask) &&
         field_match(l.ip[8], r.ttl, r.ttl_mask);
}

bool ipv6_matches(const FlowRule::Ipv6& r, const Layers& l) {
  if (!l.ip || !l.v6) return false;
  const uint32_t first = be32(l.ip);
  return bytes_match(l.ip + 8, r.src, r.src_mask) && bytes_match(l.ip + 24, r.dst, r.dst_mask) &&
         field_match(first & 0xfffff, r.flow_label, r.flow_label_mask) &&
         field_match(uint8_t(first >> 20), r.traffic_class, r.traffic_class_mask) &&
         field_match(l.proto, r.next_hdr, r.next_hdr_mask) && field_match(l.ip[7], r.hop_limit, r.hop_limit_mask);
}

bool matches(const FlowRule& r, std::span<const uint8_t> frame, const Layers& l) {
  if (frame.size() < 14) return false;
  if (r.eth && !eth_matches(*r.eth, frame, l)) return false;
  if (r.ipv4 && !ipv4_matches(*r.ipv4, l)) return false;
  if (r.ipv6 && !ipv6_matches(*r.ipv6, l)) return false;
  if (r.l4 != FlowRule::L4::None) {
    if (!l.ip || l.proto != (r.l4 == FlowRule::L4::Tcp ? kTcp : kUdp) || !l.l4) return false;
    if (!field_match(be16(l.l4), r.src_port, r.src_port_mask) || !field_match(be16(l.l4 + 2), r.dst_port, r.dst_port_mask))
      return false;
  }
  return true;
}

}  // namespace

bool flow_matches(const FlowRule& r, std::span<const uint8_t> frame) { return matches(r, frame, parse(frame)); }

namespace {

uint32_t hash_layers(const RxHash& h, const Layers& l) {
  uint8_t in[36];  // IPv6's two addresses and one protocol's ports at most
  size_t n = 0;
  auto take = [&](const uint8_t* p, size_t len) {
    std::memcpy(in + n, p, len);
    n += len;
  };
  if (l.ip && !l.v6) {
    if (h.fields & kHashSrcIpv4) take(l.ip + 12, 4);
    if (h.fields & kHashDstIpv4) take(l.ip + 16, 4);
  } else if (l.ip) {
    if (h.fields & kHashSrcIpv6) take(l.ip + 8, 16);
    if (h.fields & kHashDstIpv6) take(l.ip + 24, 16);
  }
  if (l.l4 && (l.proto == kTcp || l.proto == kUdp)) {
    const bool tcp = l.proto == kTcp;
    if (h.fields & (tcp ? kHashSrcPortTcp : kHashSrcPortUdp)) take(l.l4, 2);
    if (h.fields & (tcp ? kHashDstPortTcp : kHashDstPortUdp)) take(l.l4 + 2, 2);
  }
  // Toeplitz: for each input bit that is set, XOR in the 32 key bits starting at that bit.
  uint32_t result = 0;
  for (size_t i = 0; i < n; ++i)
    for (int b = 0; b < 8; ++b) {
      if (!(in[i] & (0x80 >> b))) continue;
      const size_t bit = i * 8 + size_t(b);
      uint32_t window = 0;
      for (size_t k = 0; k < 32; ++k) {
        const size_t kb = bit + k;
        const bool set = kb / 8 < h.key.size() && (h.key[kb / 8] & (0x80 >> (kb % 8)));
        window = window << 1 | uint32_t(set);
      }
      result ^= window;
    }
  return result;
}

}  // namespace

uint32_t rss_hash(const RxHash& h, std::span<const uint8_t> frame) { return hash_layers(h, parse(frame)); }

uint32_t FlowTable::add(Qp* qp, const FlowRule& rule) {
  const uint32_t h = next_handle_++;
  auto at = std::upper_bound(rules_.begin(), rules_.end(), rule.priority,
                             [](uint16_t p, const Entry& e) { return p < e.rule.priority; });
  rules_.insert(at, Entry{h, qp, rule});
  return h;
}

bool FlowTable::remove(uint32_t handle) {
  return std::erase_if(rules_, [&](const Entry& e) { return e.handle == handle; }) != 0;
}

bool FlowTable::owns(uint32_t handle, const Qp* qp) const {
  return std::any_of(rules_.begin(), rules_.end(), [&](const Entry& e) { return e.handle == handle && e.qp == qp; });
}

void FlowTable::remove_rules_of(const Qp* qp) {
  std::erase_if(rules_, [&](const Entry& e) { return e.qp == qp; });
}

size_t FlowTable::rules_of(const Qp* qp) const {
  return size_t(std::count_if(rules_.begin(), rules_.end(), [&](const Entry& e) { return e.qp == qp; }));
}

FlowTable::Steered FlowTable::steer(std::span<const uint8_t> frame) const {
  if (rules_.empty()) return {};
  const Layers l = parse(frame);  // once, for all rules and the hash
  for (const Entry& e : rules_)
    if (matches(e.rule, frame, l)) return {e.qp, e.qp->rss ? hash_layers(e.qp->rss->hash, l) : 0};
  return {};
}

}  // namespace uroce::transport
