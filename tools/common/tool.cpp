#include "common/tool.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace uroce::tool {

namespace {
const char* g_program = "uroce";
int g_fail_status = 2;
Device* g_device = nullptr;
}  // namespace

void set_program(const char* name, int fail_status) {
  g_program = name;
  g_fail_status = fail_status;
}
void set_device(Device* dev) { g_device = dev; }

void die(const std::string& msg) {
  std::fprintf(stderr, "%s[%d]: %s\n", g_program, getpid(), msg.c_str());
  if (g_device) std::fprintf(stderr, "%s[%d]: counters:%s\n", g_program, getpid(), nonzero_counters(*g_device).c_str());
  std::exit(g_fail_status);
}

std::string nonzero_counters(Device& dev) {
  std::string s;
  for (auto& [k, v] : dev.counters())
    if (v) s += " " + k + "=" + std::to_string(v);
  return s;
}

static Wc checked(const Wc& w) {
  if (w.status != WcStatus::Success)
    die(std::string("completion error: ") + to_string(w.status) + " (" + to_string(w.opcode) + ")");
  return w;
}

Wc poll_one(CompletionQueue& cq, int timeout_s) {
  Wc wc[1];
  // A completion that comes within a few polls costs no clock read: the tool's own overhead
  // stays out of the latencies it measures.
  for (int spin = 0; spin < 64; ++spin)
    if (cq.poll(wc) == 1) return checked(wc[0]);
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    // Busy-poll for a while, as latency tools do (a poll runs the device on this thread), then
    // block so that an idle run does not burn a core.
    int n = 0;
    auto spin_end = std::chrono::steady_clock::now() + std::chrono::milliseconds(5);
    for (uint32_t spin = 0; (n = cq.poll(wc)) == 0; ++spin)
      if ((spin & 63) == 63 && std::chrono::steady_clock::now() > spin_end) break;
    if (n == 0) n = must(cq.wait(wc, 100), "wait");
    if (n == 1) return checked(wc[0]);
    if (std::chrono::steady_clock::now() > end) die("timed out waiting for a completion");
  }
}

std::optional<Mtu> mtu_from_bytes(uint32_t bytes) {
  for (Mtu m : {Mtu::Mtu256, Mtu::Mtu512, Mtu::Mtu1024, Mtu::Mtu2048, Mtu::Mtu4096})
    if (mtu_bytes(m) == bytes) return m;
  return std::nullopt;
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  size_t k = std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5));
  std::nth_element(v.begin(), v.begin() + long(k), v.end());
  return v[k];
}

}  // namespace uroce::tool
