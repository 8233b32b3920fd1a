// The loss scenario: one RC QP pair streaming RDMA WRITEs over the simulator's link at a line
// rate, with random loss, for a stretch of virtual time. What a user of a lossy fabric sees:
// goodput against the line rate, retransmissions, and message completion times.
#pragma once
#include <cstdint>
#include <string>

#include "transport/reliability.hpp"
#include "uroce/types.hpp"

namespace uroce::sim {

struct LossScenario {
  double loss = 0;              // probability each packet is dropped (either way)
  double rate_gbps = 100;       // each sender's line rate
  uint32_t msg_bytes = 1 << 20;  // every WRITE's size
  double duration_ms = 10;      // virtual time the stream runs
  uint64_t seed = 1;
  uint32_t in_flight = 4;       // WRITEs outstanding at once
  uint64_t delay_ns = 2'000;    // one-way propagation
  Mtu mtu = Mtu::Mtu4096;
  transport::Reliability reliability = transport::Reliability::Gbn;
};

struct LossResult {
  double goodput_gbps = 0;  // payload of completed WRITEs over the duration
  double goodput_ratio = 0;  // over the line rate
  uint64_t messages = 0;    // WRITEs completed
  uint64_t retransmitted_pkts = 0;
  uint64_t drops = 0;
  double fct_p50_us = 0, fct_p99_us = 0;  // post to completion
  // The queue in front of the sender's wire as each of its frames joins it, in the second half
  // (the requester's window waits there), and Jain's index of the one flow (1: the CLI's
  // fields are the incast's).
  uint64_t queue_p99_bytes = 0;
  uint32_t window_pkts = 0;  // the requester's: two BDPs under selective repeat (sim/bdp.hpp)
  double jain_fairness = 0;
  bool qp_error = false;    // the QP failed (retries exhausted): the run stopped there
  std::string trace_sha256;  // of every frame the link decided: time, order, fate, headers
};

LossResult run_loss(const LossScenario& s);
std::string to_json(const LossScenario& s, const LossResult& r);

}  // namespace uroce::sim
