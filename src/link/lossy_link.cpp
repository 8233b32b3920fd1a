#include "link/lossy_link.hpp"

namespace uroce::link {

void LossyLink::send(const uint8_t* data, size_t len, const wire::FlowAddr& flow, uint64_t now) {
  ++st_.sent;
  if (chance(f_.drop)) {
    ++st_.dropped;
    return;
  }
  int copies = chance(f_.duplicate) ? 2 : 1;
  if (copies == 2) ++st_.duplicated;
  for (int c = 0; c < copies; ++c) {
    Frame fr;
    fr.flow = flow;
    fr.bytes.assign(data, data + len);
    fr.due = now + f_.delay_ns;
    if (chance(f_.reorder)) {
      ++st_.reordered;
      fr.due += std::uniform_int_distribution<uint64_t>(1, f_.reorder_ns)(rng_);
    }
    if (len > 5 && chance(f_.corrupt)) {
      ++st_.corrupted;
      // Byte 4 (BTH resv8a) is outside the ICRC by definition (A17.4.1): flip any other.
      size_t at = std::uniform_int_distribution<size_t>(0, len - 2)(rng_);
      fr.bytes[at < 4 ? at : at + 1] ^= uint8_t(1 + rng_() % 255);
    }
    fr.seq = seq_++;
    q_.push(std::move(fr));
  }
}

bool LossyLink::pop_due(uint64_t now, Frame& out) {
  if (q_.empty() || q_.top().due > now) return false;
  out = std::move(const_cast<Frame&>(q_.top()));
  q_.pop();
  ++st_.delivered;
  return true;
}

}  // namespace uroce::link
