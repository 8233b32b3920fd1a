// uroce-sim: the protocol core on the simulator's virtual time, for studies of lossy fabrics.
// Same arguments and seed, same output, trace digest included.
#include <getopt.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/tool.hpp"
#include "sim/incast_scenario.hpp"
#include "sim/loss_scenario.hpp"

namespace {

void usage() {
  std::printf(
      "usage: uroce-sim --scenario loss [--reliability gbn|sr] [--loss P] [--rate-gbps R] [--msg-bytes M]\n"
      "                 [--duration-ms D] [--seed S] [--in-flight N] [--mtu 256..4096] [--json]\n"
      "       uroce-sim --scenario incast [--senders N] [--cc none|dcqcn|timely|swift] [--pfc] [--buffer-kb K]\n"
      "                 [--reliability gbn|sr] [--rate-gbps R] [--msg-bytes M] [--duration-ms D] [--seed S]\n"
      "                 [--in-flight N] [--mtu 256..4096] [--json]\n"
      "loss: one RC QP pair streams RDMA WRITEs of M bytes (N outstanding) over a link of R Gb/s\n"
      "that drops each packet with probability P, for D ms of virtual time.\n"
      "incast: N senders stream WRITEs of M bytes to one receiver through a switch whose port to\n"
      "it holds K KiB (tail drop, or PFC); one more sender sends an 8 KiB WRITE every 100 us.\n");
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
                          {"senders", 1, nullptr, 'N'}, {"cc", 1, nullptr, 'C'}, {"pfc", 0, nullptr, 'P'},
                          {"buffer-kb", 1, nullptr, 'B'}, {nullptr, 0, nullptr, 0}};
  uroce::sim::LossScenario s;
  uroce::sim::IncastScenario in;
  std::string scenario, reliability = "gbn", cc = "none";
  bool json = false, msg_given = false, duration_given = false;
  uint32_t mtu = 4096;
  int ch;
  while ((ch = getopt_long(argc, argv, "", opts, nullptr)) != -1) {
    switch (ch) {
      case 'c': scenario = optarg; break;
      case 'r': reliability = optarg; break;
      case 'l': s.loss = std::strtod(optarg, nullptr); break;
      case 'R': s.rate_gbps = std::strtod(optarg, nullptr); break;
      case 'm': s.msg_bytes = uint32_t(std::strtoul(optarg, nullptr, 0)); msg_given = true; break;
      case 'd': s.duration_ms = std::strtod(optarg, nullptr); duration_given = true; break;
      case 's': s.seed = std::strtoull(optarg, nullptr, 0); break;
      case 'n': s.in_flight = uint32_t(std::strtoul(optarg, nullptr, 0)); break;
      case 'M': mtu = uint32_t(std::strtoul(optarg, nullptr, 0)); break;
      case 'j': json = true; break;
      case 'N': in.senders = uint32_t(std::strtoul(optarg, nullptr, 0)); break;
      case 'C': cc = optarg; break;
      case 'P': in.pfc = true; break;
      case 'B': in.buffer_bytes = std::strtoull(optarg, nullptr, 0) * 1024; break;
      case 'h': usage(); return 0;
      default: usage(); return 2;
    }
  }
  if (scenario != "loss" && scenario != "incast")
    return fail(scenario.empty() ? "--scenario is required (loss, incast)" : "unknown --scenario " + scenario + " (loss, incast)");
  const auto rel = uroce::parse_reliability(reliability);
  if (!rel) return fail("--reliability " + reliability + ": gbn or sr");
  s.reliability = *rel;
  if (!(s.loss >= 0 && s.loss < 1)) return fail("--loss must be in [0, 1)");
  if (!(s.rate_gbps > 0) || !(s.duration_ms > 0)) return fail("--rate-gbps and --duration-ms must be > 0");
  if (s.msg_bytes == 0 || s.msg_bytes > (64u << 20)) return fail("--msg-bytes must be 1 .. 64 MiB");
  if (s.in_flight == 0 || s.in_flight > 1024) return fail("--in-flight must be 1 .. 1024");
  const auto m = uroce::tool::mtu_from_bytes(mtu);
  if (!m) return fail("--mtu must be 256, 512, 1024, 2048 or 4096");
  s.mtu = *m;

  if (scenario == "incast") {
    const auto algo = uroce::parse_congestion_control(cc);
    if (!algo) return fail("--cc " + cc + ": " + std::string(uroce::kCongestionControlNames));
    if (in.senders == 0 || in.senders > 1024) return fail("--senders must be 1 .. 1024");
    if (in.buffer_bytes < 64 * 1024) return fail("--buffer-kb must be at least 64");
    if (s.loss > 0) return fail("--loss belongs to the loss scenario");
    in.cc = *algo;
    in.reliability = s.reliability;
    in.rate_gbps = s.rate_gbps;
    if (msg_given) in.msg_bytes = s.msg_bytes;
    if (duration_given) in.duration_ms = s.duration_ms;
    in.seed = s.seed;
    in.in_flight = s.in_flight;
    in.mtu = s.mtu;
    const uroce::sim::IncastResult r = uroce::sim::run_incast(in);
    if (json) {
      std::printf("%s\n", uroce::sim::to_json(in, r).c_str());
    } else {
      std::printf("incast %u:1, cc %s, %s, %g Gb/s, %g ms, seed %llu: goodput %.3f Gb/s (%.4f of the port), "
                  "%llu drops (%llu in the second half), %llu pauses, %llu CNPs, queue p99 %llu B, Jain %.4f, "
                  "WRITE p99 %.1f us, short WRITE p99 %.1f us, %u flows failed%s\ntrace sha256 %s\n",
                  in.senders, cc.c_str(), in.pfc ? "PFC" : "tail drop", in.rate_gbps, in.duration_ms,
                  (unsigned long long)in.seed, r.goodput_gbps, r.goodput_ratio, (unsigned long long)r.drops,
                  (unsigned long long)r.drops_second_half, (unsigned long long)r.pauses, (unsigned long long)r.cnps,
                  (unsigned long long)r.queue_p99_bytes, r.jain_fairness, r.fct_p99_us, r.short_fct_p99_us,
                  r.failed_flows, r.qp_error ? " (a QP could not be connected)" : "", r.trace_sha256.c_str());
    }
    return 0;
  }
  const uroce::sim::LossResult r = uroce::sim::run_loss(s);
  if (json) {
    std::printf("%s\n", uroce::sim::to_json(s, r).c_str());
  } else {
    std::printf("%s, loss %g at %g Gb/s, %u-byte WRITEs, %g ms, seed %llu: goodput %.3f Gb/s (%.4f of the line), "
                "%llu messages, %llu packets retransmitted, %llu dropped, completion p50 %.1f us p99 %.1f us%s\n"
                "trace sha256 %s\n",
                std::string(to_string(s.reliability)).c_str(), s.loss, s.rate_gbps, s.msg_bytes, s.duration_ms,
                (unsigned long long)s.seed, r.goodput_gbps,
                r.goodput_ratio, (unsigned long long)r.messages, (unsigned long long)r.retransmitted_pkts,
                (unsigned long long)r.drops, r.fct_p50_us, r.fct_p99_us, r.qp_error ? " (the QP failed: retries exhausted)" : "",
                r.trace_sha256.c_str());
  }
  return 0;
}
