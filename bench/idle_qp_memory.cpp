// Host memory per idle connected RC QP (RSS growth over N QPs with default 128/128 depths) and
// the CPU an idle engine uses. Prints one JSON line.
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <vector>

#include "uroce/uroce.hpp"

using namespace uroce;

static long rss_kib() {
  std::ifstream f("/proc/self/statm");
  long size = 0, resident = 0;
  f >> size >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 1000;
  double idle_s = argc > 2 ? std::atof(argv[2]) : 3.0;
  auto dev = Device::open();
  if (!dev) {
    std::fprintf(stderr, "%s\n", dev.error().message.c_str());
    return 1;
  }
  auto pd = *(*dev)->alloc_pd();
  auto cq = *(*dev)->create_cq(256);
  Gid gid = *(*dev)->query_gid(0);
  std::vector<std::unique_ptr<QueuePair>> qps;
  qps.reserve(size_t(n));
  long before = rss_kib();
  for (int i = 0; i < n; ++i) {
    auto qp = pd->create_qp({QpType::RC, cq.get(), cq.get(), QpCap{}, false});
    if (!qp) {
      std::fprintf(stderr, "create_qp %d: %s\n", i, qp.error().message.c_str());
      return 1;
    }
    qps.push_back(std::move(*qp));
  }
  // Connect them in pairs to each other on this device.
  for (int i = 0; i + 1 < n; i += 2) {
    Endpoint a{gid, qps[size_t(i)]->qp_num(), 1000, 0, 0, 0}, b{gid, qps[size_t(i) + 1]->qp_num(), 2000, 0, 0, 0};
    if (!qps[size_t(i)]->connect(b, a.psn) || !qps[size_t(i) + 1]->connect(a, b.psn)) return 1;
  }
  long after = rss_kib();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let the engine settle into its idle state
  double c0 = cpu_seconds();
  auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(idle_s));
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double cpu = cpu_seconds() - c0;
  std::printf("{\"qps\":%d,\"rss_before_kib\":%ld,\"rss_after_kib\":%ld,\"bytes_per_qp\":%.0f,"
              "\"idle_cpu_percent\":%.3f,\"idle_seconds\":%.1f}\n",
              n, before, after, double(after - before) * 1024.0 / n, 100.0 * cpu / wall, wall);
  return 0;
}
