// The incast scenario: N senders stream RDMA WRITEs to one receiver through the simulator's
// switch, whose port towards the receiver is the bottleneck; one more sender sends a short
// WRITE now and then, to see what the queue costs a small message. The congestion control of
// every QP, and lossy (tail drop) or lossless (PFC) switching, are the knobs.
#pragma once
#include <cstdint>
#include <string>

#include "cc/rate_control.hpp"
#include "transport/reliability.hpp"
#include "uroce/types.hpp"

namespace uroce::sim {

struct IncastScenario {
  uint32_t senders = 16;
  double rate_gbps = 100;          // every NIC and switch port
  uint32_t msg_bytes = 1 << 20;    // each long flow's WRITEs
  uint32_t in_flight = 4;          // WRITEs each long flow keeps outstanding
  double duration_ms = 20;
  uint64_t seed = 1;
  cc::Algo cc = cc::Algo::None;
  bool pfc = false;
  uint64_t buffer_bytes = 2u << 20;  // the bottleneck port's queue (tail drop past it; PFC: 2 x xoff)
  uint32_t short_bytes = 8192;       // the short flow's WRITEs, one every short_every_us
  double short_every_us = 100;
  uint64_t delay_ns = 1'000;         // each hop (host to switch, switch to host)
  Mtu mtu = Mtu::Mtu4096;
  transport::Reliability reliability = transport::Reliability::Gbn;
  uint8_t timeout = 8;               // every QP's transport timeout (IBA exponent: 1 ms)
};

struct IncastResult {
  double goodput_gbps = 0;    // payload of the long flows' completed WRITEs over the duration
  double goodput_ratio = 0;   // over the bottleneck's rate
  uint64_t retransmitted_pkts = 0;
  uint64_t drops = 0;         // at the switch
  uint64_t drops_second_half = 0;  // after convergence: in the second half of the run
  uint64_t pauses = 0;        // PFC pause events
  uint64_t cnps = 0;
  double fct_p50_us = 0, fct_p99_us = 0;              // the long flows' WRITEs
  double short_fct_p50_us = 0, short_fct_p99_us = 0;  // the short flow's
  uint64_t queue_p99_bytes = 0;  // the bottleneck queue as frames join it, in the second half
  double jain_fairness = 0;      // of the long flows' goodput in the second half
  bool qp_error = false;       // a connection could not be set up: nothing ran
  uint32_t failed_flows = 0;   // flows whose QP failed (retries exhausted); the others go on
  std::string trace_sha256;
};

IncastResult run_incast(const IncastScenario& s);
std::string to_json(const IncastScenario& s, const IncastResult& r);

}  // namespace uroce::sim
