// SHA-256 (FIPS 180-4), for the simulator's trace digest: the same run gives the same digest,
// and anyone can recompute it from the trace with standard tools.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace uroce::sim {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t len);
  std::array<uint8_t, 32> digest();  // finishes; the object is then spent
  std::string hex();                 // digest() as 64 lowercase hex digits

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t used_ = 0;
  uint64_t total_ = 0;
};

}  // namespace uroce::sim
