#include "sim/loss_scenario.hpp"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "sim/bdp.hpp"
#include "sim/frame_digest.hpp"
#include "sim/sha256.hpp"
#include "sim/sim.hpp"
#include "sim/stats.hpp"
#include "transport/bringup.hpp"

namespace uroce::sim {

constexpr uint32_t kIpA = 0x0a000001, kIpB = 0x0a000002;  // the sender and the receiver

LossResult run_loss(const LossScenario& s) {
  sim::FaultConfig f;
  f.drop = s.loss;
  f.rate_bps = s.rate_gbps * 1e9;
  f.delay_ns = s.delay_ns;
  Sim sim(s.seed, f);
  Sha256 trace;
  digest_frames(sim.link(), trace);
  transport::CoreConfig cfg;
  cfg.seed = s.seed;
  cfg.reliability = s.reliability;
  cfg.sr_window_pkts = sr_window_pkts(s.rate_gbps, base_rtt_ns(s.rate_gbps, s.delay_ns, 2, 1, s.mtu), s.mtu);
  const uint32_t window = cfg.window_pkts(s.reliability == transport::Reliability::Sr);
  auto& a = sim.add_core(kIpA, cfg);
  cfg.seed = s.seed + 1;
  auto& b = sim.add_core(kIpB, cfg);
  auto pa = *a.alloc_pd();
  auto pb = *b.alloc_pd();
  verbs::Cq* scq = *a.create_cq(4096);
  verbs::Cq* rcq_a = *a.create_cq(64);
  verbs::Cq* scq_b = *b.create_cq(64);
  verbs::Cq* rcq = *b.create_cq(64);
  const QpCap cap{std::max(64u, s.in_flight * 2), 16, 1, 1, 0};
  transport::Qp* qa = *a.create_qp(pa, QpType::RC, scq, rcq_a, cap, false);
  transport::Qp* qb = *b.create_qp(pb, QpType::RC, scq_b, rcq, cap, false);
  ConnectOptions c;
  c.path_mtu = s.mtu;
  c.timeout = 8;  // 1 ms
  c.retry_cnt = 7;
  Endpoint ea{Gid::from_ipv4(kIpB), qb->qpn().value(), 0x100};
  Endpoint eb{Gid::from_ipv4(kIpA), qa->qpn().value(), 0x200};
  LossResult r;
  if (!transport::connect_rc(a, *qa, ea, 0x200, c) || !transport::connect_rc(b, *qb, eb, 0x100, c)) {
    r.qp_error = true;  // not with these fixed settings; said rather than hidden
    return r;
  }

  // Every WRITE goes from the same source to the same target: the bytes are not the point.
  std::vector<uint8_t> src(s.msg_bytes, 0xab), dst(s.msg_bytes);
  auto ms = *a.reg_mr(pa, src.data(), src.size(), kAccessLocalWrite);
  auto md = *b.reg_mr(pb, dst.data(), dst.size(), kAccessLocalWrite | kAccessRemoteWrite);
  Sge sge{uint64_t(uintptr_t(src.data())), s.msg_bytes, ms.lkey.value()};
  std::vector<uint64_t> posted_at;
  std::vector<double> fct;
  auto post = [&] {
    SendWr wr;
    wr.wr_id = posted_at.size();
    wr.opcode = WrOpcode::RdmaWrite;
    wr.sg_list = std::span<const Sge>(&sge, 1);
    wr.remote_addr = uint64_t(uintptr_t(dst.data()));
    wr.rkey = md.rkey.value();
    wr.send_flags = kSendSignaled;
    posted_at.push_back(sim.now());
    (void)a.post_send(*qa, std::span<const SendWr>(&wr, 1));
  };
  const uint64_t start = sim.now(), end = start + uint64_t(s.duration_ms * 1e6), half = (start + end) / 2;
  std::vector<uint64_t> queue;
  const Gid sender = Gid::from_ipv4(kIpA);
  sim.link().set_wire_probe([&](const Gid& from, uint64_t q) {
    if (from == sender && sim.now() >= half) queue.push_back(q);
  });
  for (uint32_t i = 0; i < s.in_flight; ++i) post();
  sim.run_until(
      [&] {
        Wc wc[32];
        int n;
        while ((n = scq->poll(wc)) > 0)
          for (int i = 0; i < n; ++i) {
            if (wc[i].status != WcStatus::Success) {
              r.qp_error = true;
              continue;
            }
            ++r.messages;
            fct.push_back(double(sim.now() - posted_at[wc[i].wr_id]) / 1e3);
            post();
          }
        return r.qp_error || sim.now() >= end;
      },
      end - start);
  const double secs = double(std::max(sim.now(), end) - start) / 1e9;
  r.goodput_gbps = double(r.messages) * s.msg_bytes * 8 / secs / 1e9;
  r.goodput_ratio = r.goodput_gbps / s.rate_gbps;
  r.retransmitted_pkts = a.counters().retransmitted_packets + b.counters().retransmitted_packets;
  r.drops = sim.link().stats().dropped;
  r.fct_p50_us = percentile(fct, 0.5);
  r.fct_p99_us = percentile(fct, 0.99);
  r.queue_p99_bytes = percentile(queue, 0.99);
  r.window_pkts = window;
  r.jain_fairness = jain_fairness({r.goodput_gbps});
  r.trace_sha256 = trace.hex();
  sim.link().set_wire_probe(nullptr);
  return r;
}

std::string to_json(const LossScenario& s, const LossResult& r) {
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "{\"scenario\":\"loss\",\"reliability\":\"%s\",\"loss\":%g,\"rate_gbps\":%g,\"msg_bytes\":%u,"
                "\"duration_ms\":%g,\"seed\":%llu,\"goodput_gbps\":%.4f,\"goodput_ratio\":%.5f,\"messages\":%llu,"
                "\"retransmitted_pkts\":%llu,\"drops\":%llu,\"fct_p50_us\":%.3f,\"fct_p99_us\":%.3f,"
                "\"queue_p99_bytes\":%llu,\"window_pkts\":%u,\"jain_fairness\":%.5f,\"qp_error\":%s,\"trace_sha256\":\"%s\"}",
                std::string(to_string(s.reliability)).c_str(), s.loss, s.rate_gbps, s.msg_bytes, s.duration_ms, (unsigned long long)s.seed, r.goodput_gbps,
                r.goodput_ratio, (unsigned long long)r.messages, (unsigned long long)r.retransmitted_pkts,
                (unsigned long long)r.drops, r.fct_p50_us, r.fct_p99_us, (unsigned long long)r.queue_p99_bytes,
                r.window_pkts, r.jain_fairness, r.qp_error ? "true" : "false",
                r.trace_sha256.c_str());
  return buf;
}

}  // namespace uroce::sim
