#include "cc/dcqcn.hpp"

#include <algorithm>
#include <cmath>

namespace uroce::cc {

DcqcnParams DcqcnParams::paper(double line_rate_bps) {
  DcqcnParams p;
  p.line_rate_bps = line_rate_bps;
  const double scale = line_rate_bps / 40e9;  // the marking thresholds are the paper's at 40 Gb/s
  p.kmin_bytes = uint64_t(5'000 * scale);
  p.kmax_bytes = uint64_t(200'000 * scale);
  return p;
}

DcqcnParams DcqcnParams::mellanox(double line_rate_bps) {
  DcqcnParams p = paper(line_rate_bps);
  p.fast_recovery_steps = 1;
  p.increase_timer_ns = 300'000;
  p.byte_counter = 32767;
  p.ai_bps = 5e6;
  p.hai_bps = 50e6;
  p.g = 5.0 / 1024;
  p.cnp_interval_ns = 4'000;
  return p;
}

DcqcnParams DcqcnParams::of(DcqcnSet set, double line_rate_bps) {
  return set == DcqcnSet::Mellanox ? mellanox(line_rate_bps) : paper(line_rate_bps);
}

double mark_probability(const DcqcnParams& p, uint64_t queue_bytes) {
  if (queue_bytes <= p.kmin_bytes) return 0;
  if (queue_bytes > p.kmax_bytes) return 1;
  return p.pmax * double(queue_bytes - p.kmin_bytes) / double(p.kmax_bytes - p.kmin_bytes);
}

bool DcqcnNp::on_ce(uint64_t now) {
  if (cnps_ && now - last_ < interval_) return false;
  last_ = now;
  ++cnps_;
  return true;
}

DcqcnRp::DcqcnRp(const DcqcnParams& p) : p_(p), rc_(p.line_rate_bps), rt_(p.line_rate_bps) {}

void DcqcnRp::advance(uint64_t now) {
  if (!reacted_) return;  // the reaction point starts at the first CNP, with alpha at 1
  // The two timers touch different state (alpha; the rates), so their order does not matter.
  // However long the QP was idle, this is a bounded amount of work: alpha's decays are one
  // power, and increases stop mattering once both rates are back at the line rate.
  if (next_alpha_ <= now) {
    const uint64_t n = (now - next_alpha_) / p_.alpha_timer_ns + 1;
    alpha_ *= std::pow(1 - p_.g, double(n));
    next_alpha_ += n * p_.alpha_timer_ns;
  }
  for (; recovering_ && next_increase_ <= now; next_increase_ += p_.increase_timer_ns) {
    ++timer_events_;
    increase();
  }
  if (next_increase_ <= now)  // recovered: keep the timer's phase without running it
    next_increase_ += ((now - next_increase_) / p_.increase_timer_ns + 1) * p_.increase_timer_ns;
}

uint64_t DcqcnRp::next_timer() const { return reacted_ ? std::min(next_alpha_, next_increase_) : UINT64_MAX; }

void DcqcnRp::on_sent(uint64_t bytes, uint64_t now) {
  advance(now);
  if (!recovering_) return;  // at the line rate the byte counter has nothing to raise
  for (bytes_ += bytes; bytes_ >= p_.byte_counter; bytes_ -= p_.byte_counter) {
    ++byte_events_;
    increase();
  }
}

void DcqcnRp::on_cnp(uint64_t now) {
  advance(now);
  rt_ = rc_;
  rc_ = std::max(rc_ * (1 - alpha_ / 2), p_.min_rate_bps);
  alpha_ = (1 - p_.g) * alpha_ + p_.g;
  // Every stage starts again from fast recovery, and alpha decays only after K without a CNP.
  timer_events_ = byte_events_ = 0;
  bytes_ = 0;
  recovering_ = reacted_ = true;
  next_alpha_ = now + p_.alpha_timer_ns;
  next_increase_ = now + p_.increase_timer_ns;
}

void DcqcnRp::increase() {
  const uint32_t f = p_.fast_recovery_steps;
  const uint32_t hi = std::max(timer_events_, byte_events_), lo = std::min(timer_events_, byte_events_);
  if (lo > f) rt_ += (lo - f) * p_.hai_bps;  // hyper increase: both counters past fast recovery
  else if (hi > f) rt_ += p_.ai_bps;         // additive increase: one of them
  rt_ = std::min(rt_, p_.line_rate_bps);
  rc_ = std::min((rt_ + rc_) / 2, p_.line_rate_bps);
  if (rc_ == p_.line_rate_bps && rt_ == p_.line_rate_bps) recovering_ = false;
}

}  // namespace uroce::cc
