// The engine's clock. Protocol code never reads time itself; the engine passes `now` in.
#pragma once
#include <cstdint>
#include <ctime>

namespace uroce::engine {

inline uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

}  // namespace uroce::engine
