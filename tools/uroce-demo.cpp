// uroce-demo: two processes on loopback, each with its own uroce device, connect RC queue
// pairs through the TCP helper and run every operation (uroce-perf does the work and checks
// every byte); prints one table, with what an idle machine shows beside each row, and marks
// the rows far from it (a busy machine, not a fault: the bytes are verified either way).
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::string self_dir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  buf[n] = 0;
  std::string p(buf);
  return p.substr(0, p.rfind('/'));
}

double field(const std::string& json, const char* key) {
  std::string k = std::string("\"") + key + "\":";
  auto at = json.find(k);
  return at == std::string::npos ? -1 : std::atof(json.c_str() + at + k.size());
}

bool flag(const std::string& json, const char* key) {
  return json.find(std::string("\"") + key + "\":true") != std::string::npos;
}

struct Row {
  const char* label;
  const char* op;
  const char* mode;
  unsigned size;
  unsigned iters;
  // What an idle 2-core x86 machine shows (p50 in us, or Gb/s; docs/performance.md). A row
  // kFar times worse is marked: other programs had the cores.
  double idle;
};
constexpr double kFar = 5;

// The 1-minute load average and the cores there are to carry it.
std::string load() {
  double l = -1;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &l) != 1) l = -1;
    std::fclose(f);
  }
  char buf[96];
  std::snprintf(buf, sizeof buf, "load average %.2f on %ld cores", l, sysconf(_SC_NPROCESSORS_ONLN));
  return l < 0 ? std::string("load average unknown") : std::string(buf);
}

}  // namespace

int main() {
  std::string perf = self_dir() + "/uroce-perf";
  const Row rows[] = {
      {"SEND/RECV", "send", "lat", 64, 20000, 1},
      {"SEND/RECV", "send", "bw", 65536, 2000, 40},
      {"SEND with immediate", "send_imm", "lat", 64, 20000, 1},
      {"SEND with immediate", "send_imm", "bw", 65536, 2000, 40},
      {"RDMA WRITE", "write", "lat", 64, 20000, 1},
      {"RDMA WRITE", "write", "bw", 65536, 2000, 35},
      {"RDMA WRITE with immediate", "write_imm", "bw", 65536, 2000, 35},
      {"RDMA READ", "read", "lat", 64, 20000, 3.5},
      {"RDMA READ", "read", "bw", 65536, 2000, 35},
      {"ATOMIC FETCH_AND_ADD", "atomic", "lat", 8, 20000, 3.5},
      {"ATOMIC CMP_AND_SWP", "cas", "lat", 8, 20000, 3.5},
  };
  std::printf("uroce demo: two processes, each with its own device on 127.0.0.x, RC over RoCEv2/UDP.\n");
  std::printf("Latency: half round trip for SEND/WRITE ping-pong, whole operation for READ/atomics.\n");
  std::printf("'idle': what an idle 2-core machine shows (p50 us or Gb/s). This one: %s.\n\n", load().c_str());
  std::printf("%-27s %-5s %8s %9s %9s %11s %11s %11s %7s\n", "operation", "mode", "size", "messages", "verified",
              "p50 (us)", "p99 (us)", "Gb/s", "idle");
  std::printf("%s\n", std::string(105, '-').c_str());
  int failures = 0, far = 0;
  for (const Row& r : rows) {
    std::string cmd = perf + " --json --op " + r.op + " --mode " + r.mode + " --size " + std::to_string(r.size) +
                      " --iters " + std::to_string(r.iters) + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[512];
    while (p && fgets(buf, sizeof buf, p)) out += buf;
    int rc = p ? pclose(p) : -1;
    bool ok = rc == 0 && flag(out, "verified");
    failures += !ok;
    bool lat = std::strcmp(r.mode, "lat") == 0;
    char p50[32] = "-", p99[32] = "-", bw[32] = "-", idle[32];
    bool slow;
    if (lat) {
      const double v = field(out, "lat_p50_us");
      std::snprintf(p50, sizeof p50, "%.1f", v);
      std::snprintf(p99, sizeof p99, "%.1f", field(out, "lat_p99_us"));
      slow = v > r.idle * kFar;
    } else {
      const double v = field(out, "bw_gbps");
      std::snprintf(bw, sizeof bw, "%.2f", v);
      slow = v < r.idle / kFar;
    }
    std::snprintf(idle, sizeof idle, "~%g", r.idle);
    slow = ok && slow;
    far += slow;
    std::printf("%-27s %-5s %8u %9u %9s %11s %11s %11s %7s%s\n", r.label, r.mode, r.size, r.iters, ok ? "yes" : "NO",
                p50, p99, bw, idle, slow ? "  << far from idle" : "");
    if (!ok) std::printf("    %s", out.c_str());
    std::fflush(stdout);
  }
  std::printf("\n%s\n", failures ? "Some operations FAILED." : "Every byte of every operation was verified on both sides.");
  if (far)
    std::printf("%d row(s) were %gx or more from an idle machine's numbers: other programs had the cores\n"
                "(see the load average above). Run it again when the machine is idle; `make bench` measures\n"
                "against sockperf and iperf3 in the same run.\n",
                far, kFar);
  return failures ? 1 : 0;
}
