// What the command-line tools share: fatal errors that name the program (and, once a device is
// open, its non-zero counters), unwrapping results, waiting for one completion without burning
// a core, MTU parsing, percentiles.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "uroce/uroce.hpp"

namespace uroce::tool {

// The program name in messages and its exit status on a fatal error; the device whose
// counters a fatal error prints.
void set_program(const char* name, int fail_status = 2);
void set_device(Device* dev);

[[noreturn]] void die(const std::string& msg);

template <class T>
T must(Result<T> r, const char* what) {
  if (!r) die(std::string(what) + ": " + r.error().message);
  return std::move(*r);
}
inline void must(const Status& s, const char* what) {
  if (!s) die(std::string(what) + ": " + s.error().message);
}

// The device's non-zero counters as " name=value ...".
std::string nonzero_counters(Device& dev);

// One successful completion from cq: spins briefly, then sleeps on its completion channel, so
// that on a machine with few cores the engine threads get the CPU. Any error status, or no
// completion within timeout_s, is fatal.
Wc poll_one(CompletionQueue& cq, int timeout_s = 30);

// 256, 512, 1024, 2048 or 4096 bytes as an IB MTU; nullopt for anything else.
std::optional<Mtu> mtu_from_bytes(uint32_t bytes);

// The p-quantile (0..1) of v, reordering v; 0 if v is empty.
double percentile(std::vector<double>& v, double p);

}  // namespace uroce::tool
