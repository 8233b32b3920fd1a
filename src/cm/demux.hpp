// Whom a received CM MAD is for, on a host NIC several processes share (link/steering.hpp): a
// REQ or SIDR_REQ names a service (the process listening on it); every other CM message names
// the recipient's own communication ID (or SIDR request ID), whose top bits are its slot.
#pragma once
#include <cstdint>
#include <optional>
#include <span>

namespace uroce::cm {

struct MadRecipient {
  bool by_service = false;
  uint64_t service_id = 0;  // by_service
  uint32_t comm_id = 0;     // otherwise
};

// nullopt for what is not a CM MAD the recipient can be told from (it is dropped).
std::optional<MadRecipient> recipient(std::span<const uint8_t> mad);

}  // namespace uroce::cm
