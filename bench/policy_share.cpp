// The port's scheduler between two hosts, as a user sees it (make bench, section "policy").
//   policy_share --server [--port P]
//   policy_share --connect HOST [--port P] --test share --tclass T0,T1,... [--seconds S]
//   policy_share --connect HOST [--port P] --test latency --tclass LAT,BULK [--pings N]
// share: one QP per traffic class streams 64 KiB RDMA WRITEs (16 in flight) for S seconds;
// prints a JSON line per 100 ms with the bytes each QP completed in it, then the totals.
// latency: QP 0 ping-pongs 64 B SENDs (N round trips), first alone, then while QP 1 streams
// WRITEs; prints p50/p99 half round trips of both phases and the bulk's rate meanwhile.
// The client's device takes its scheduler from $UROCE_QOS. At the end the server checks every
// byte each QP wrote and the client exits 1 unless it says "verified".
#include <getopt.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/tool.hpp"
#include "uroce/oob.hpp"
#include "uroce/uroce.hpp"

using namespace uroce;
using Clock = std::chrono::steady_clock;

namespace {

constexpr uint32_t kSize = 64 * 1024, kDepth = 16, kPing = 64;

using tool::die;
using tool::must;

uint8_t pattern(uint32_t qp, size_t i) { return uint8_t(qp * 37 + i * 13 + (i >> 11)); }

// Completions from cq: polled for 20 us, then waited for on its channel. A ping-pong that
// spins on both hosts holds two of a small machine's cores, and the engines that carry the
// bulk would wait for them.
int poll_or_wait(CompletionQueue& cq, std::span<Wc> out) {
  const auto until = Clock::now() + std::chrono::microseconds(20);
  int n = 0;
  for (uint32_t spin = 0; (n = cq.poll(out)) == 0; ++spin)
    if ((spin & 15) == 15 && Clock::now() > until) return must(cq.wait(out, 100), "wait");
  return n;
}

struct Side {
  std::unique_ptr<Device> dev;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> scq, rcq;
  std::vector<uint8_t> region;  // per QP: kDepth slots of kSize, then a ping slot
  std::unique_ptr<MemoryRegion> mr;
  std::vector<std::unique_ptr<QueuePair>> qps;
  std::vector<Endpoint> peer;
  static constexpr size_t kPerQp = size_t(kDepth) * kSize + 4096;
  uint8_t* at(uint32_t q, size_t off = 0) { return region.data() + q * kPerQp + off; }
  uint8_t* ping(uint32_t q) { return at(q, size_t(kDepth) * kSize); }

  void setup(OobChannel& ch, const std::vector<uint8_t>& tclass, bool client) {
    dev = must(Device::open(), "open device");
    pd = must(dev->alloc_pd(), "alloc_pd");
    scq = must(dev->create_cq(4096), "create_cq");
    rcq = must(dev->create_cq(4096), "create_cq");
    const uint32_t n = uint32_t(tclass.size());
    region.assign(n * kPerQp, 0);
    if (client)
      for (uint32_t q = 0; q < n; ++q)
        for (size_t i = 0; i < size_t(kDepth) * kSize; ++i) *at(q, i) = pattern(q, i);
    mr = must(pd->reg_mr(region.data(), region.size(), kAccessLocalWrite | kAccessRemoteWrite), "reg_mr");
    const Gid gid = must(dev->query_gid(0), "query_gid");
    std::vector<Endpoint> mine;
    for (uint32_t q = 0; q < n; ++q) {
      QpInit init{QpType::RC, scq.get(), rcq.get(), QpCap{kDepth + 8, 64, 1, 1, 64}, false};
      qps.push_back(must(pd->create_qp(init), "create_qp"));
      mine.push_back({gid, qps.back()->qp_num(), 0x100 + q, uint64_t(at(q)), mr->rkey(), kPerQp});
    }
    peer = must(ch.exchange(mine), "exchange endpoints");
    if (peer.size() != n) die("the peer has another number of QPs");
    for (uint32_t q = 0; q < n; ++q) {
      ConnectOptions co;
      co.traffic_class = tclass[q];
      co.min_rnr_timer = 1;
      must(qps[q]->connect(peer[q], mine[q].psn, co), "connect");
    }
  }
  void post_ping_recv(uint32_t q) {
    Sge s{uint64_t(ping(q)), kPing, mr->lkey()};
    must(qps[q]->post_recv({q, {&s, 1}}), "post_recv");
  }
  void send_ping(uint32_t q, uint8_t flag) {
    ping(q)[0] = flag;
    Sge s{uint64_t(ping(q)), kPing, mr->lkey()};
    must(qps[q]->post_send({uint64_t(q) << 32 | 0xffff, WrOpcode::Send, kSendSignaled | kSendInline, {&s, 1}}),
         "post ping");
  }
  void write_slot(uint32_t q, uint32_t slot) {
    Sge s{uint64_t(at(q, size_t(slot) * kSize)), kSize, mr->lkey()};
    SendWr w{uint64_t(q) << 32 | slot, WrOpcode::RdmaWrite, kSendSignaled, {&s, 1}};
    w.remote_addr = peer[q].addr + uint64_t(slot) * kSize;
    w.rkey = peer[q].rkey;
    must(qps[q]->post_send(w), "post write");
  }
};

std::vector<uint8_t> parse_tclasses(const std::string& s) {
  std::vector<uint8_t> out;
  std::stringstream ss(s);
  for (std::string t; std::getline(ss, t, ',');) {
    char* end = nullptr;
    const unsigned long v = std::strtoul(t.c_str(), &end, 0);
    if (t.empty() || *end || v > 255) die("--tclass takes traffic classes 0..255, not '" + t + "'");
    out.push_back(uint8_t(v));
  }
  if (out.empty() || out.size() > 8) die("--tclass takes 1 to 8 traffic classes");
  return out;
}

int serve(uint16_t port) {
  auto ch = must(OobChannel::accept("0.0.0.0", port, 60'000), "accept");
  std::istringstream hello(must(ch.recv_line(), "options"));
  std::string test, tcs;
  hello >> test >> tcs;
  Side s;
  s.setup(ch, parse_tclasses(tcs), false);
  if (test == "latency") {  // echo QP 0's pings until the one flagged last
    for (int i = 0; i < 8; ++i) s.post_ping_recv(0);
    must(ch.barrier(), "barrier");
    const auto end = Clock::now() + std::chrono::seconds(120);
    for (bool last = false; !last && Clock::now() < end;) {
      Wc wc[16];
      const int n = poll_or_wait(*s.rcq, wc);
      for (int i = 0; i < n; ++i) {
        if (wc[i].status != WcStatus::Success) die("receive failed");
        last = s.ping(0)[0] == 0xee;
        s.post_ping_recv(0);
        s.send_ping(0, s.ping(0)[0]);
      }
      Wc sc[16];
      s.scq->poll(sc);
    }
  } else {
    must(ch.barrier(), "barrier");
  }
  must(ch.recv_line(), "done");
  bool ok = true;
  for (uint32_t q = 0; q < s.qps.size(); ++q)
    if (test == "share" || q > 0)
      for (size_t i = 0; i < size_t(kDepth) * kSize; ++i) ok &= *s.at(q, i) == pattern(q, i);
  must(ch.send_line(ok ? "verified" : "corrupt"), "verdict");
  return 0;
}

struct Client {
  Side s;
  std::vector<uint32_t> inflight;
  std::vector<uint64_t> done_bytes;
  std::vector<uint32_t> next_slot;
  bool pong = false;
  // Tops up the streaming QPs (from `first` on), polls both CQs.
  void pump(uint32_t first) {
    for (uint32_t q = first; q < s.qps.size(); ++q)
      while (inflight[q] < kDepth) {
        s.write_slot(q, next_slot[q]);
        next_slot[q] = (next_slot[q] + 1) % kDepth;
        ++inflight[q];
      }
    Wc wc[64];
    for (int n; (n = s.scq->poll(wc)) > 0;)
      for (int i = 0; i < n; ++i) {
        if (wc[i].status != WcStatus::Success) die("a send failed");
        const uint32_t q = uint32_t(wc[i].wr_id >> 32);
        if ((wc[i].wr_id & 0xffffffff) == 0xffff) continue;  // a ping's send
        --inflight[q];
        done_bytes[q] += kSize;
      }
    for (int n; (n = s.rcq->poll(wc)) > 0;)
      for (int i = 0; i < n; ++i) {
        if (wc[i].status != WcStatus::Success) die("a receive failed");
        pong = true;
      }
  }
};

double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, size_t(p * double(v.size())))];
}

int drive(const std::string& host, uint16_t port, const std::string& test, const std::string& tcs, double seconds,
          uint32_t pings) {
  auto ch = must(OobChannel::connect(host, port, 30'000), "connect");
  must(ch.send_line(test + " " + tcs), "options");
  Client c;
  c.s.setup(ch, parse_tclasses(tcs), true);
  const size_t n = c.s.qps.size();
  c.inflight.assign(n, 0);
  c.done_bytes.assign(n, 0);
  c.next_slot.assign(n, 0);
  if (test == "latency") {
    if (n != 2) die("--test latency takes two traffic classes: the pings', the bulk's");
    for (int i = 0; i < 8; ++i) c.s.post_ping_recv(0);
    must(ch.barrier(), "barrier");
    double rates[2] = {};
    std::vector<double> lat[2];
    for (int phase = 0; phase < 2; ++phase) {
      const uint32_t first_streaming = phase == 0 ? uint32_t(n) : 1;
      const auto t0 = Clock::now();
      const uint64_t bytes0 = c.done_bytes[1];
      for (uint32_t i = 0; i < pings + 100; ++i) {
        c.pong = false;
        const auto sent = Clock::now();
        c.s.send_ping(0, 1);
        c.pump(first_streaming);
        while (!c.pong) {
          Wc wc[16];
          const int k = poll_or_wait(*c.s.rcq, wc);
          for (int j = 0; j < k; ++j)
            if (wc[j].status != WcStatus::Success) die("a receive failed");
          c.pong = k > 0;
          c.pump(first_streaming);
          if (!c.pong && Clock::now() - sent > std::chrono::seconds(10)) die("no pong in 10 s");
        }
        c.s.post_ping_recv(0);
        if (i >= 100)  // past the warm-up
          lat[phase].push_back(std::chrono::duration<double, std::micro>(Clock::now() - sent).count() / 2);
      }
      rates[phase] = double(c.done_bytes[1] - bytes0) * 8 /
                     std::chrono::duration<double>(Clock::now() - t0).count() / 1e9;
    }
    c.s.send_ping(0, 0xee);  // the server's last echo
    for (auto end = Clock::now() + std::chrono::seconds(10); !c.pong && Clock::now() < end;) c.pump(uint32_t(n));
    for (auto end = Clock::now() + std::chrono::seconds(10); c.inflight[1] && Clock::now() < end;) c.pump(uint32_t(n));
    must(ch.send_line("done"), "done");
    const bool ok = must(ch.recv_line(), "verdict") == "verified";
    std::printf("{\"test\":\"latency\",\"idle_p50_us\":%.2f,\"idle_p99_us\":%.2f,\"bulk_p50_us\":%.2f,"
                "\"bulk_p99_us\":%.2f,\"bulk_gbps\":%.3f,\"verified\":%s}\n",
                pct(lat[0], 0.5), pct(lat[0], 0.99), pct(lat[1], 0.5), pct(lat[1], 0.99), rates[1],
                ok ? "true" : "false");
    return ok ? 0 : 1;
  }
  must(ch.barrier(), "barrier");
  const auto start = Clock::now();
  auto tick = start;
  std::vector<uint64_t> at_tick(n, 0);
  for (uint64_t spin = 0;; ++spin) {
    c.pump(0);
    const auto now = Clock::now();
    if (now - tick >= std::chrono::milliseconds(100)) {
      std::printf("{\"t\":%.3f,\"bytes\":[", std::chrono::duration<double>(now - start).count());
      for (size_t q = 0; q < n; ++q) {
        std::printf("%s%llu", q ? "," : "", (unsigned long long)(c.done_bytes[q] - at_tick[q]));
        at_tick[q] = c.done_bytes[q];
      }
      std::printf("]}\n");
      tick = now;
    }
    if (now - start >= std::chrono::duration<double>(seconds)) break;
    if ((spin & 63) == 63) sched_yield();
  }
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  const std::vector<uint64_t> total = c.done_bytes;
  for (auto end = Clock::now() + std::chrono::seconds(10); Clock::now() < end;) {
    bool idle = true;
    for (uint32_t f : c.inflight) idle &= f == 0;
    if (idle) break;
    c.pump(uint32_t(n));
  }
  must(ch.send_line("done"), "done");
  const bool ok = must(ch.recv_line(), "verdict") == "verified";
  std::printf("{\"test\":\"share\",\"seconds\":%.3f,\"bytes\":[", secs);
  for (size_t q = 0; q < n; ++q) std::printf("%s%llu", q ? "," : "", (unsigned long long)total[q]);
  std::printf("],\"verified\":%s}\n", ok ? "true" : "false");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  tool::set_program("policy_share");
  static option opts[] = {{"server", 0, nullptr, 'S'}, {"connect", 1, nullptr, 'c'}, {"port", 1, nullptr, 'p'},
                          {"test", 1, nullptr, 't'},   {"tclass", 1, nullptr, 'T'},  {"seconds", 1, nullptr, 's'},
                          {"pings", 1, nullptr, 'n'},  {nullptr, 0, nullptr, 0}};
  bool server = false;
  std::string host, test = "share", tcs = "0";
  uint16_t port = 18600;
  double seconds = 3;
  uint32_t pings = 2000;
  for (int o; (o = getopt_long(argc, argv, "Sc:p:t:T:s:n:", opts, nullptr)) != -1;) {
    switch (o) {
      case 'S': server = true; break;
      case 'c': host = optarg; break;
      case 'p': port = uint16_t(std::strtoul(optarg, nullptr, 10)); break;
      case 't': test = optarg; break;
      case 'T': tcs = optarg; break;
      case 's': seconds = std::strtod(optarg, nullptr); break;
      case 'n': pings = uint32_t(std::strtoul(optarg, nullptr, 10)); break;
      default: die("see the usage at the top of bench/policy_share.cpp");
    }
  }
  if (test != "share" && test != "latency") die("--test is share or latency");
  if (!(seconds > 0 && seconds <= 60) || pings == 0 || pings > 1'000'000) die("--seconds 0..60, --pings 1..1000000");
  if (server) return serve(port);
  if (host.empty()) die("--server or --connect HOST");
  return drive(host, port, test, tcs, seconds, pings);
}
