// uroce-perf: latency and bandwidth of RC operations between two uroce devices, with every
// byte it moves verified. Without --server/--connect it runs both sides itself on loopback
// (two processes). Usage: uroce-perf --help
#include <getopt.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/tool.hpp"
#include "perf/perf.hpp"

using namespace uroce;
using namespace uroce::perf;
using tool::die;
using tool::must;

namespace {

// What must be in place before the start barrier: after it, the peer's first message may land.
void prepare(Conn& c, const Opts& o, bool server) {
  Kind k = kind_of(o.op);
  if (k == Kind::Message && (server || o.mode == Mode::Lat))
    for (uint32_t q = 0; q < (server ? o.qps : 1); ++q)
      for (uint32_t s = 0; s < kWindow; ++s) post_recv(c, q, s, o.size);
  if (k == Kind::Write && o.mode == Mode::Lat) arm_echo_slots(c, o.size);
  if (!server) return;
  for (uint32_t q = 0; q < o.qps; ++q) {
    if (is_atomic(o.op)) std::memset(c.cell(q), 0, 8);
    if (o.op == Op::Read)
      for (uint32_t s = 0; s < kWindow; ++s) std::memcpy(c.slot(q, s), c.pattern(s), o.size);
  }
}

std::string serve(Conn& c, const Opts& o, OobChannel& ch) {
  const Runner& r = runner_for(o);
  prepare(c, o, true);
  must(ch.barrier(), "barrier");
  std::string bad = r.server ? r.server(c, o) : "";
  must(ch.barrier(), "barrier");  // the client is done
  std::string late = r.verify ? r.verify(c, o) : "";
  return bad.empty() ? late : bad;
}

Stats drive(Conn& c, const Opts& o, OobChannel& ch) {
  const Runner& r = runner_for(o);
  Stats st;
  prepare(c, o, false);
  if (o.mode == Mode::Lat) st.lat_us.reserve(o.iters);
  must(ch.barrier(), "barrier");
  auto start = Clock::now();
  r.client(c, o, st);
  st.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  st.bytes = uint64_t(is_atomic(o.op) ? 8 : o.size) * o.iters;
  if (st.seconds > 2) std::fprintf(stderr, "\r%60s\r", "");
  must(ch.barrier(), "barrier");
  return st;
}

int serve_on(const Opts& base, OobChannel& ch) {
  auto line = must(ch.recv_line(), "read options");
  Opts o = base;
  char op[32], mode[8], rel[8];
  unsigned long long iters;
  // The ninth field, the message slots a WRITE stream takes (--buffers), is what the server
  // checks at the end; a client that leaves it out takes the default.
  const int n = std::sscanf(line.c_str(), "perf %31s %7s %u %llu %u %u %lf %7s %u", op, mode, &o.size, &iters, &o.qps,
                            &o.mtu, &o.loss, rel, &o.buffers);
  if (n < 8 || !parse_op(op, o.op) || !parse_reliability(rel) || o.buffers > kWindow)
    die("bad options from client: " + line);
  o.reliability = *parse_reliability(rel);
  o.iters = iters;
  o.mode = std::string(mode) == "bw" ? Mode::Bw : Mode::Lat;
  Conn c;
  setup(c, o, ch, true);
  std::string bad = serve(c, o, ch);
  if (std::getenv("UROCE_PERF_COUNTERS"))
    std::fprintf(stderr, "server counters:%s\n", tool::nonzero_counters(*c.dev).c_str());
  must(ch.send_line(bad.empty() ? "verified" : "FAILED " + bad), "send result");
  return bad.empty() ? 0 : 1;
}

int run_server(const Opts& base, uint16_t port, const char* listen_on) {
  auto ch = must(OobChannel::accept(listen_on, port, base.server ? -1 : 30'000), "out-of-band accept");
  return serve_on(base, ch);
}

void report(const Opts& o, Stats& st, bool verified, uint64_t resent) {
  double p50 = tool::percentile(st.lat_us, 0.5), p99 = tool::percentile(st.lat_us, 0.99);
  double bw = st.seconds > 0 ? double(st.bytes) * 8 / st.seconds / 1e9 : 0;
  double rate = st.seconds > 0 ? double(o.iters) / st.seconds / 1e6 : 0;
  auto iters = (unsigned long long)o.iters;
  // Goodput: message bytes delivered per second (bw_gbps is the same number, kept for scripts).
  if (o.json)
    std::printf("{\"op\":\"%s\",\"mode\":\"%s\",\"size\":%u,\"iters\":%llu,\"qps\":%u,\"window\":%u,\"buffers\":%u,\"verified\":%s,"
                "\"lat_p50_us\":%.3f,\"lat_p99_us\":%.3f,\"bw_gbps\":%.4f,\"msg_rate_mps\":%.4f,\"seconds\":%.3f,"
                "\"loss\":%.9g,\"reliability\":\"%s\",\"goodput_gbps\":%.4f,\"retransmitted_pkts\":%llu}\n",
                op_name(o.op), mode_name(o.mode), o.size, iters, o.qps, o.mode == Mode::Bw ? window_for(o) : 1,
                o.mode == Mode::Bw ? buffers_for(o) : 1, verified ? "true" : "false", p50, p99, bw, rate, st.seconds, o.loss, std::string(to_string(o.reliability)).c_str(), bw,
                (unsigned long long)resent);
  else
    std::printf("%-9s %-3s size %-8u iters %-8llu qps %-2u verified %-3s p50 %8.2f us  p99 %8.2f us  %8.3f Gb/s  %8.4f Mmsg/s\n",
                op_name(o.op), mode_name(o.mode), o.size, iters, o.qps, verified ? "yes" : "NO", p50, p99, bw, rate);
}

int drive_on(const Opts& o, OobChannel& ch) {
  char line[160];
  std::snprintf(line, sizeof line, "perf %s %s %u %llu %u %u %.9g %s %u", op_name(o.op), mode_name(o.mode), o.size,
                (unsigned long long)o.iters, o.qps, o.mtu, o.loss, std::string(to_string(o.reliability)).c_str(),
                o.buffers);
  must(ch.send_line(line), "send options");
  Conn c;
  setup(c, o, ch, false);
  Stats st = drive(c, o, ch);
  auto verdict = must(ch.recv_line(), "server verdict");
  if (std::getenv("UROCE_PERF_COUNTERS"))
    std::fprintf(stderr, "client counters:%s\n", tool::nonzero_counters(*c.dev).c_str());
  bool verified = st.bad.empty() && verdict == "verified";
  report(o, st, verified, c.dev->counters()["retransmitted_packets"]);
  if (!verified) std::fprintf(stderr, "uroce-perf: verification failed: %s %s\n", st.bad.c_str(), verdict.c_str());
  return verified ? 0 : 1;
}

int run_client(const Opts& o, const std::string& host) {
  auto ch = must(OobChannel::connect(host, o.port, 30'000), "out-of-band connect");
  return drive_on(o, ch);
}

void usage() {
  std::printf(
      "usage: uroce-perf [--op send|send_imm|write|write_imm|read|atomic|cas] [--mode lat|bw]\n"
      "                  [--size BYTES] [--iters N] [--qps K (1..4096)] [--window W] [--json]\n"
      "                  [--server | --connect HOST] [--port P] [--mtu 256..4096] [--gid INDEX]\n"
      "                  [--loss P] [--reliability gbn|sr] [--rate-limit KBPS] [--memory heap|memfd]\n"
      "                  [--buffers B]\n"
      "Without --server/--connect both sides run here, as two processes on loopback.\n"
      "Latency is half the round trip for send/write ping-pong, the whole operation for read/atomics.\n"
      "--window: requests in flight per QP in bw mode (default and most: 64, 16 for read/atomics,\n"
      "and 32768 over all QPs).\n"
      "--loss P: each side loses this share of the packets it receives (0 <= P < 1, seeded);\n"
      "--reliability gbn|sr: go-back-N (default) or selective repeat, on both sides;\n"
      "--rate-limit KBPS: each of this side's QPs sends at most KBPS kb/s (packet pacing);\n"
      "--memory memfd: messages live in a memfd mapped shared (as DPDK or MPI memory), which a\n"
      "peer on this host reads where it lies; heap (default): private memory.\n"
      "--buffers B: WRITE bandwidth only, both sides: the WRITEs take B message slots in turn\n"
      "(default and most: 64); 1 writes every message from one buffer into one, as perftest and\n"
      "ucx_perftest do. The slots written last are checked at the end.\n");
}

// Returns -1 to go on, or the exit status.
int parse_args(int argc, char** argv, Opts& o) {
  static option longopts[] = {{"op", 1, nullptr, 'o'},     {"mode", 1, nullptr, 'm'}, {"size", 1, nullptr, 's'},
                              {"iters", 1, nullptr, 'n'},  {"qps", 1, nullptr, 'q'},  {"server", 0, nullptr, 'S'},
                              {"connect", 1, nullptr, 'c'}, {"port", 1, nullptr, 'p'}, {"json", 0, nullptr, 'j'},
                              {"mtu", 1, nullptr, 'M'},    {"gid", 1, nullptr, 'g'},  {"help", 0, nullptr, 'h'},
                              {"window", 1, nullptr, 'w'}, {"loss", 1, nullptr, 'L'},
                              {"reliability", 1, nullptr, 'R'}, {"rate-limit", 1, nullptr, 'r'},
                              {"memory", 1, nullptr, 'x'}, {"buffers", 1, nullptr, 'b'},
                              {nullptr, 0, nullptr, 0}};
  int ch;
  while ((ch = getopt_long(argc, argv, "o:m:s:n:q:Sc:p:jM:g:hw:L:R:r:x:b:", longopts, nullptr)) != -1) {
    switch (ch) {
      case 'o': if (!parse_op(optarg, o.op)) die(std::string("unknown --op ") + optarg); break;
      case 'm': o.mode = std::string(optarg) == "bw" ? Mode::Bw : Mode::Lat; break;
      case 's': o.size = uint32_t(std::strtoul(optarg, nullptr, 0)); break;
      case 'n': o.iters = std::strtoull(optarg, nullptr, 0); break;
      case 'q': o.qps = uint32_t(std::strtoul(optarg, nullptr, 0)); break;
      case 'S': o.server = true; break;
      case 'c': o.connect = optarg; break;
      case 'p': o.port = uint16_t(std::strtoul(optarg, nullptr, 0)); break;
      case 'j': o.json = true; break;
      case 'M': o.mtu = uint32_t(std::strtoul(optarg, nullptr, 0)); break;
      case 'g': o.gid = uint32_t(std::strtoul(optarg, nullptr, 0)); break;
      case 'w':
        o.window = uint32_t(std::strtoul(optarg, nullptr, 0));
        if (o.window == 0) die("--window must be > 0");
        break;
      case 'L': {
        char* end = nullptr;
        o.loss = std::strtod(optarg, &end);
        if (!end || *end || !(o.loss >= 0 && o.loss < 1)) die("--loss is a probability in [0, 1)");
        break;
      }
      case 'R':
        if (auto r = parse_reliability(optarg)) o.reliability = *r;
        else die("--reliability is gbn or sr");
        break;
      case 'r': o.rate_kbps = uint32_t(std::strtoul(optarg, nullptr, 0)); break;
      case 'x':
        if (std::string(optarg) != "heap" && std::string(optarg) != "memfd") die("--memory is heap or memfd");
        o.memfd = std::string(optarg) == "memfd";
        break;
      case 'b':
        o.buffers = uint32_t(std::strtoul(optarg, nullptr, 0));
        if (o.buffers == 0 || o.buffers > kWindow) die("--buffers is 1.." + std::to_string(kWindow));
        break;
      default: usage(); return ch == 'h' ? 0 : 2;
    }
  }
  if (o.iters == 0 || o.qps == 0 || o.qps > kMaxQps) die("--iters must be > 0 and --qps 1.." + std::to_string(kMaxQps));
  if (o.size > (16u << 20)) die("--size at most 16 MiB");
  if (uint64_t(o.qps) * kWindow * ((uint64_t(o.size) + 63) & ~63ull) > (1ull << 30))
    die("--qps x --size: each QP has " + std::to_string(kWindow) + " message slots; at most 1 GiB of them");
  if (o.buffers && (o.op != Op::Write || o.mode != Mode::Bw)) die("--buffers is for --op write --mode bw");
  if (is_atomic(o.op)) o.size = 8;
  if (o.mtu && !tool::mtu_from_bytes(o.mtu)) die("--mtu is 256, 512, 1024, 2048 or 4096");
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  tool::set_program("uroce-perf");
  Opts o;
  if (int rc = parse_args(argc, argv, o); rc >= 0) return rc;
  if (o.server) return run_server(o, o.port, "0.0.0.0");
  if (!o.connect.empty()) return run_client(o, o.connect);
  // Both sides here: the server in a child process, the two talking over a socket pair.
  auto [server_end, client_end] = must(OobChannel::pair(), "out-of-band channel");
  pid_t pid = fork();
  if (pid == 0) {
    { OobChannel mine = std::move(client_end); }  // the child holds only its own end
    _exit(serve_on(o, server_end));
  }
  { OobChannel theirs = std::move(server_end); }
  int rc = drive_on(o, client_end);
  int st = 0;
  waitpid(pid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) rc = rc ? rc : 1;
  return rc;
}
