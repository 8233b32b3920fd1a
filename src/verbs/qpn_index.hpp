// QPN -> QP for every received packet and every doorbell: an open-addressing table of
// (QPN, pointer) pairs in one array, so a lookup among thousands of QPs reads one or two
// cache lines before the QP itself (a node-based hash map reads a node first).
// Linear probing, at most half full, deletion by moving later entries back.
#pragma once
#include <cstdint>
#include <vector>

namespace uroce::verbs {

template <class T>
class QpnIndex {
 public:
  T* find(uint32_t qpn) const {
    if (slots_.empty()) return nullptr;
    for (size_t i = home(qpn);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.qpn == qpn) return s.obj;
      if (s.qpn == kEmpty) return nullptr;
    }
  }
  void insert(uint32_t qpn, T* obj) {
    if ((used_ + 1) * 2 > slots_.size()) grow();
    size_t i = home(qpn);
    while (slots_[i].qpn != kEmpty && slots_[i].qpn != qpn) i = (i + 1) & mask_;
    if (slots_[i].qpn == kEmpty) ++used_;
    slots_[i] = {qpn, obj};
  }
  void erase(uint32_t qpn) {
    if (slots_.empty()) return;
    size_t i = home(qpn);
    while (slots_[i].qpn != qpn) {
      if (slots_[i].qpn == kEmpty) return;
      i = (i + 1) & mask_;
    }
    // Later entries of the same run that may stand at i instead move back into the hole.
    for (size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
      if (slots_[j].qpn == kEmpty) break;
      size_t h = home(slots_[j].qpn);
      if (((j - h) & mask_) >= ((j - i) & mask_)) {  // h is not between the hole and j
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i] = {kEmpty, nullptr};
    --used_;
  }
  size_t size() const { return used_; }

 private:
  static constexpr uint32_t kEmpty = ~0u;  // QPNs have 24 bits
  struct Slot {
    uint32_t qpn = kEmpty;
    T* obj = nullptr;
  };
  size_t home(uint32_t qpn) const { return (uint64_t(qpn) * 0x9e3779b97f4a7c15ull >> 32) & mask_; }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{});
    mask_ = slots_.size() - 1;
    used_ = 0;
    for (const Slot& s : old)
      if (s.qpn != kEmpty) insert(s.qpn, s.obj);
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0, used_ = 0;
};

}  // namespace uroce::verbs
