// Test seeds: fixed by default, overridable with UROCE_TEST_SEED, always printed on failure.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <string>

namespace uroce::test {

inline uint64_t test_seed(uint64_t fallback) {
  const char* s = std::getenv("UROCE_TEST_SEED");
  return s ? std::strtoull(s, nullptr, 0) : fallback;
}

inline uint64_t env_count(const char* name, uint64_t fallback) {
  const char* s = std::getenv(name);
  return s ? std::strtoull(s, nullptr, 0) : fallback;
}

inline uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Deterministic message contents: byte i of message m.
inline void fill_pattern(uint8_t* p, size_t n, uint64_t m) {
  uint64_t s = splitmix(m);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v = s ^ (i * 0x9e3779b97f4a7c15ull);
    __builtin_memcpy(p + i, &v, 8);
  }
  for (; i < n; ++i) p[i] = uint8_t(s >> (i & 7));
}

}  // namespace uroce::test
