// A tag matching SRQ's list of tagged buffers (IBV_SRQT_TM) and its phase. A message's tag
// matches the earliest posted buffer whose tag agrees with it under the buffer's mask, as MPI
// matching needs. Software and the device keep count of the unexpected messages (tagged ones
// that matched nothing and took an ordinary receive): tags match only while the count
// software last reported equals the device's, so a buffer posted before software saw an
// unexpected message it would also have matched is never taken ahead of that message.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "uroce/types.hpp"

namespace uroce::verbs {

struct TaggedBuffer {
  uint64_t tag = 0;
  uint64_t mask = 0;
  uint64_t recv_wr_id = 0;
  Sge sge{};           // length 0: an empty buffer (a message with no data after its TMH)
  uint64_t order = 0;  // when it was posted; 0: the handle is free
};

class TagList {
 public:
  explicit TagList(uint32_t max_tags) : entries_(max_tags) {
    for (uint32_t h = max_tags; h-- > 0;) free_.push_back(h);
  }
  uint32_t capacity() const { return uint32_t(entries_.size()); }
  uint32_t posted() const { return uint32_t(order_.size()); }
  // Its handle, or nothing when the list is full.
  std::optional<uint32_t> add(const TaggedBuffer& b) {
    if (free_.empty()) return std::nullopt;
    const uint32_t h = free_.back();
    free_.pop_back();
    entries_[h] = b;
    entries_[h].order = next_order_++;
    order_.emplace(entries_[h].order, h);
    return h;
  }
  // False if the handle holds no posted buffer (consumed meanwhile, or never added).
  bool remove(uint32_t h) {
    if (h >= entries_.size() || !entries_[h].order) return false;
    release(h);
    return true;
  }
  // The earliest posted buffer that `tag` matches, taken off the list.
  std::optional<TaggedBuffer> take_match(uint64_t tag) {
    for (const auto& [order, h] : order_) {
      const TaggedBuffer& b = entries_[h];
      if (((tag ^ b.tag) & b.mask) == 0) {
        TaggedBuffer taken = b;
        release(h);
        return taken;
      }
    }
    return std::nullopt;
  }
  bool matching() const { return reported == unexpected; }

  uint32_t unexpected = 0;  // unexpected messages delivered
  uint32_t reported = 0;    // the count software last reported (kTmOpSync)

 private:
  void release(uint32_t h) {
    order_.erase(entries_[h].order);
    entries_[h].order = 0;
    free_.push_back(h);
  }
  std::vector<TaggedBuffer> entries_;
  std::vector<uint32_t> free_;
  std::map<uint64_t, uint32_t> order_;  // posting order -> handle
  uint64_t next_order_ = 1;
};

}  // namespace uroce::verbs
