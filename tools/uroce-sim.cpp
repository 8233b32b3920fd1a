// uroce-sim: the protocol core on the simulator's virtual time, for studies of lossy fabrics.
// Same arguments and seed, same output, trace digest included.
#include <getopt.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/tool.hpp"
#include "sim/loss_scenario.hpp"

namespace {

void usage() {
  std::printf(
      "usage: uroce-sim --scenario loss [--reliability gbn] [--loss P] [--rate-gbps R] [--msg-bytes M]\n"
      "                 [--duration-ms D] [--seed S] [--in-flight N] [--mtu 256..4096] [--json]\n"
      "One RC QP pair streams RDMA WRITEs of M bytes (N outstanding) over a link of R Gb/s that\n"
      "drops each packet with probability P, for D ms of virtual time.\n");
}

int fail(const std::string& why) {
  std::fprintf(stderr, "uroce-sim: %s\n", why.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  static option opts[] = {{"scenario", 1, nullptr, 'c'}, {"reliability", 1, nullptr, 'r'}, {"loss", 1, nullptr, 'l'},
                          {"rate-gbps", 1, nullptr, 'R'}, {"msg-bytes", 1, nullptr, 'm'},
                          {"duration-ms", 1, nullptr, 'd'}, {"seed", 1, nullptr, 's'}, {"in-flight", 1, nullptr, 'n'},
                          {"mtu", 1, nullptr, 'M'}, {"json", 0, nullptr, 'j'}, {"help", 0, nullptr, 'h'},
                          {nullptr, 0, nullptr, 0}};
  uroce::sim::LossScenario s;
  std::string scenario, reliability = "gbn";
  bool json = false;
  uint32_t mtu = 4096;
  int ch;
  while ((ch = getopt_long(argc, argv, "", opts, nullptr)) != -1) {
    switch (ch) {
      case 'c': scenario = optarg; break;
      case 'r': reliability = optarg; break;
      case 'l': s.loss = std::strtod(optarg, nullptr); break;
      case 'R': s.rate_gbps = std::strtod(optarg, nullptr); break;
      case 'm': s.msg_bytes = uint32_t(std::strtoul(optarg, nullptr, 0)); break;
      case 'd': s.duration_ms = std::strtod(optarg, nullptr); break;
      case 's': s.seed = std::strtoull(optarg, nullptr, 0); break;
      case 'n': s.in_flight = uint32_t(std::strtoul(optarg, nullptr, 0)); break;
      case 'M': mtu = uint32_t(std::strtoul(optarg, nullptr, 0)); break;
      case 'j': json = true; break;
      case 'h': usage(); return 0;
      default: usage(); return 2;
    }
  }
  if (scenario != "loss") return fail(scenario.empty() ? "--scenario is required (loss)" : "unknown --scenario " + scenario + " (this build has: loss)");
  if (reliability != "gbn") return fail("--reliability " + reliability + ": this build has go-back-N (gbn) only");
  if (!(s.loss >= 0 && s.loss < 1)) return fail("--loss must be in [0, 1)");
  if (!(s.rate_gbps > 0) || !(s.duration_ms > 0)) return fail("--rate-gbps and --duration-ms must be > 0");
  if (s.msg_bytes == 0 || s.msg_bytes > (64u << 20)) return fail("--msg-bytes must be 1 .. 64 MiB");
  if (s.in_flight == 0 || s.in_flight > 1024) return fail("--in-flight must be 1 .. 1024");
  const auto m = uroce::tool::mtu_from_bytes(mtu);
  if (!m) return fail("--mtu must be 256, 512, 1024, 2048 or 4096");
  s.mtu = *m;
  const uroce::sim::LossResult r = uroce::sim::run_loss(s);
  if (json) {
    std::printf("%s\n", uroce::sim::to_json(s, r).c_str());
  } else {
    std::printf("loss %g at %g Gb/s, %u-byte WRITEs, %g ms, seed %llu: goodput %.3f Gb/s (%.4f of the line), "
                "%llu messages, %llu packets retransmitted, %llu dropped, completion p50 %.1f us p99 %.1f us%s\n"
                "trace sha256 %s\n",
                s.loss, s.rate_gbps, s.msg_bytes, s.duration_ms, (unsigned long long)s.seed, r.goodput_gbps,
                r.goodput_ratio, (unsigned long long)r.messages, (unsigned long long)r.retransmitted_pkts,
                (unsigned long long)r.drops, r.fct_p50_us, r.fct_p99_us, r.qp_error ? " (the QP failed: retries exhausted)" : "",
                r.trace_sha256.c_str());
  }
  return 0;
}
