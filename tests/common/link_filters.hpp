// Link filters for the core-pair tests: which packets A and B exchange on the simulator's
// link, and losing some of them on purpose (the first send of a PSN, or while a flag holds).
#pragma once
#include <algorithm>
#include <memory>
#include <vector>

#include "core_pair.hpp"

namespace uroce::test {

// The PSN of a request A sends to B (requests only: B's answers go the other way).
inline bool request_psn(const wire::FlowAddr& f, const std::vector<uint8_t>& b, uint32_t& psn) {
  if (f.dst != Gid::from_ipv4(kIpB)) return false;
  wire::Packet p;
  if (wire::decode(b, p) != wire::ParseError::None || !(p.info().flags & wire::kRequest)) return false;
  psn = p.bth.psn.value();
  return true;
}

// The PSN of a READ response B sends to A.
inline bool response_psn(const wire::FlowAddr& f, const std::vector<uint8_t>& b, uint32_t& psn) {
  if (f.dst != Gid::from_ipv4(kIpA)) return false;
  wire::Packet p;
  if (wire::decode(b, p) != wire::ParseError::None || !(p.info().flags & wire::kReadResponse)) return false;
  psn = p.bth.psn.value();
  return true;
}

// Loses the first transmission of each listed PSN of B's READ responses.
inline sim::LossyLink::Filter lose_responses_once(std::vector<uint32_t> psns) {
  auto seen = std::make_shared<std::vector<uint32_t>>();
  return [psns, seen](const wire::FlowAddr& f, std::vector<uint8_t>& b) {
    uint32_t psn;
    if (!response_psn(f, b, psn)) return true;
    bool listed = std::find(psns.begin(), psns.end(), psn) != psns.end();
    bool first = std::find(seen->begin(), seen->end(), psn) == seen->end();
    seen->push_back(psn);
    return !(listed && first);
  };
}

// Loses the first transmission of each listed PSN of A's requests.
inline sim::LossyLink::Filter lose_once(std::vector<uint32_t> psns) {
  auto seen = std::make_shared<std::vector<uint32_t>>();
  return [psns, seen](const wire::FlowAddr& f, std::vector<uint8_t>& b) {
    uint32_t psn;
    if (!request_psn(f, b, psn)) return true;
    bool listed = std::find(psns.begin(), psns.end(), psn) != psns.end();
    bool first = std::find(seen->begin(), seen->end(), psn) == seen->end();
    seen->push_back(psn);
    return !(listed && first);
  };
}

// Loses one PSN of A's requests for as long as `block` holds.
inline sim::LossyLink::Filter lose_while(const bool& block, uint32_t psn) {
  return [&block, psn](const wire::FlowAddr& f, std::vector<uint8_t>& b) {
    uint32_t got;
    return !(block && request_psn(f, b, got) && got == psn);
  };
}

}  // namespace uroce::test
