// Steering of raw Ethernet frames to raw packet QPs (ibv_create_flow): a match-action table
// whose action is "to this QP". Frames are parsed once (Ethernet, one 802.1Q tag, IPv4 or
// IPv6, the TCP/UDP ports) and never trusted: a field a frame is too short to hold does not
// match.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "uroce/types.hpp"

namespace uroce::transport {

struct Qp;

// Whether the frame matches every layer the rule names.
bool flow_matches(const FlowRule& rule, std::span<const uint8_t> frame);
// The Toeplitz hash of the frame's fields that h names (those it has: an IPv4 frame gives no
// IPv6 address, a UDP datagram no TCP port), as NICs compute RSS.
uint32_t rss_hash(const RxHash& h, std::span<const uint8_t> frame);

class FlowTable {
 public:
  // A new rule steering to qp; its handle.
  uint32_t add(Qp* qp, const FlowRule& rule);
  bool remove(uint32_t handle);  // false if no such rule
  bool owns(uint32_t handle, const Qp* qp) const;
  void remove_rules_of(const Qp* qp);
  size_t size() const { return rules_.size(); }
  size_t rules_of(const Qp* qp) const;
  // The QP of the winning rule (lowest priority, then oldest), or null; for an RSS QP also
  // the frame's hash, from the same parse.
  struct Steered {
    Qp* qp = nullptr;
    uint32_t hash = 0;
  };
  Steered steer(std::span<const uint8_t> frame) const;

 private:
  struct Entry {
    uint32_t handle;
    Qp* qp;
    FlowRule rule;
  };
  std::vector<Entry> rules_;  // by priority, then age
  uint32_t next_handle_ = 1;
};

}  // namespace uroce::transport
