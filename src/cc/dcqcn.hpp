// DCQCN (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015):
// RoCE's ECN-based congestion control, in its three parts.
//  - Congestion point (a switch queue, or the simulator's and the test link's): marks ECN CE
//    with a probability that grows from 0 at Kmin to Pmax at Kmax, then 1 (RED).
//  - Notification point (the receiver): answers CE-marked packets of a QP with a CNP, at most
//    one per QP per interval.
//  - Reaction point (the sender): cuts its rate by alpha/2 on a CNP and remembers the rate
//    it had as the target; alpha tracks how often CNPs come. Without CNPs it climbs back in
//    stages driven by a timer (every T) and a byte counter (every B bytes): F steps of fast
//    recovery halfway to the target, then additive increase of the target by R_AI, then,
//    once both counters are past F, hyper increase by i * R_HAI.
#pragma once
#include <cstdint>
#include <string_view>

#include "cc/rate_control.hpp"

namespace uroce::cc {

struct DcqcnParams {
  double line_rate_bps = 40e9;   // where a QP starts, and the most it is given
  double min_rate_bps = 10e6;    // a CNP never takes the rate below this
  double g = 1.0 / 256;          // alpha's gain
  uint64_t alpha_timer_ns = 55'000;     // K: alpha decays once per K without a CNP
  uint64_t increase_timer_ns = 55'000;  // T
  uint64_t byte_counter = 10ull << 20;  // B
  uint32_t fast_recovery_steps = 5;     // F, for each of the two counters
  double ai_bps = 40e6;                 // R_AI
  double hai_bps = 400e6;               // R_HAI
  uint64_t cnp_interval_ns = 50'000;    // notification point: one CNP per QP per interval
  uint64_t kmin_bytes = 5'000, kmax_bytes = 200'000;  // congestion point
  double pmax = 0.01;

  // The paper's: CNP interval 50 us, K = T = 55 us, B = 10 MB (read as MiB), F = 5, g = 1/256,
  // R_AI = 40 Mb/s, Kmin/Kmax 5 KB/200 KB and Pmax 1 % at 40 Gb/s (scaled with the line rate
  // at other rates). R_HAI is not among the paper's numbers: ten times R_AI, our choice.
  static DcqcnParams paper(double line_rate_bps);
  // Values in the style of ConnectX (mlx5) tuning guides: one step of each stage
  // (rp_threshold 1), T = 300 us, B = 32767 bytes, R_AI 5 Mb/s, R_HAI 50 Mb/s, g = 5/1024
  // (rp_dce_tcp_g 1019 of 1024), a CNP at most every 4 us; K and the marking as the paper's.
  static DcqcnParams mellanox(double line_rate_bps);
  // A named set (uroce::DcqcnSet) at a line rate.
  static DcqcnParams of(DcqcnSet set, double line_rate_bps);
};

// Congestion point: the probability that a packet joining a queue of `queue_bytes` is marked.
double mark_probability(const DcqcnParams& p, uint64_t queue_bytes);

// Notification point, one per QP.
class DcqcnNp {
 public:
  explicit DcqcnNp(uint64_t interval_ns) : interval_(interval_ns) {}
  // A CE-marked packet of the QP arrived: true if a CNP goes back for it now.
  bool on_ce(uint64_t now);
  uint64_t cnps() const { return cnps_; }

 private:
  uint64_t interval_;
  uint64_t last_ = 0;
  uint64_t cnps_ = 0;
};

// Reaction point, one per QP.
class DcqcnRp final : public RateControl {
 public:
  explicit DcqcnRp(const DcqcnParams& p);  // at the line rate; its timers start at the first CNP
  double rate_bps() const override { return rc_; }
  double target_bps() const { return rt_; }
  double alpha() const { return alpha_; }
  // Increase events of each counter since the last CNP.
  uint32_t timer_events() const { return timer_events_; }
  uint32_t byte_events() const { return byte_events_; }

  void on_sent(uint64_t bytes, uint64_t now) override;
  void on_cnp(uint64_t now) override;
  void on_rtt(uint64_t, uint64_t now) override { advance(now); }
  void advance(uint64_t now) override;
  uint64_t next_timer() const override;

 private:
  void increase();

  DcqcnParams p_;
  double rc_, rt_;      // current and target rate
  double alpha_ = 1.0;  // the paper starts it at 1
  uint64_t next_alpha_ = 0, next_increase_ = 0;  // set by the first CNP
  uint64_t bytes_ = 0;  // sent since the last byte-counter event
  bool recovering_ = false;  // below the line rate since a CNP: the increase stages run
  bool reacted_ = false;     // a CNP came: the timers run from then on
  uint32_t timer_events_ = 0, byte_events_ = 0;
};

}  // namespace uroce::cc
