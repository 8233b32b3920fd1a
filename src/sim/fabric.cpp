#include "sim/fabric.hpp"

#include <algorithm>


namespace uroce::sim {

using link::Link;
using link::PacketSink;

void LossyLink::send(const uint8_t* data, size_t len, const wire::FlowAddr& flow, uint64_t now) {
  ++st_.sent;
  if (std::find(attached_.begin(), attached_.end(), flow.dst) == attached_.end()) {
    ++st_.unroutable;
    return;
  }
  std::vector<uint8_t> edited;
  if (filter_) {
    edited.assign(data, data + len);
    if (!filter_(flow, edited)) {
      ++st_.filtered;
      return;
    }
    data = edited.data();
    len = edited.size();
  }
  // When its last bit is on the wire. Under PFC that is decided when it reaches the head of its
  // sender's queue (a pause may come meanwhile): it is queued there now.
  const bool queued = sw_.on && sw_.pfc;
  uint64_t leaves = now;
  if (f_.rate_bps > 0 && !queued) {
    uint64_t& free = wire_free(flow.src);
    if (wire_probe_) wire_probe_(flow.src, free > now ? uint64_t(double(free - now) * f_.rate_bps / 8e9) : 0);
    leaves = std::max(now, free) + uint64_t(double(len) * 8e9 / f_.rate_bps + 0.5);
    free = leaves;
  }
  if (chance(f_.drop)) {
    ++st_.dropped;
    if (trace_) {
      Frame fr;
      fr.flow = flow;
      fr.due = leaves;
      fr.seq = seq_++;
      fr.bytes.assign(data, data + len);
      trace_(fr, true);
    }
    return;
  }
  int copies = chance(f_.duplicate) ? 2 : 1;
  if (copies == 2) ++st_.duplicated;
  for (int c = 0; c < copies; ++c) {
    Frame fr;
    fr.flow = flow;
    fr.bytes.assign(data, data + len);
    fr.sent_at = now;
    fr.due = queued ? now : leaves + f_.delay_ns;
    if (chance(f_.reorder)) {
      ++st_.reordered;
      fr.due += std::uniform_int_distribution<uint64_t>(1, f_.reorder_ns)(rng_);
    }
    if (len > 5 && chance(f_.corrupt)) {
      ++st_.corrupted;
      // Byte 4 (BTH resv8a) is outside the ICRC by definition (A17.4.1): flip any other.
      size_t at = std::uniform_int_distribution<size_t>(0, len - 2)(rng_);
      fr.bytes[at < 4 ? at : at + 1] ^= uint8_t(1 + rng_() % 255);
    }
    if (chance(f_.ce_mark)) {  // draws nothing at 0: runs without marking keep their sequence
      ++st_.ce_marked;
      fr.tos = wire::kEcnCe;
    }
    fr.seq = seq_++;
    if (queued) {
      std::deque<Frame>& q = sender_queue(flow.src);
      q.push_back(std::move(fr));
      if (q.size() == 1) {  // the sender had nothing waiting: its turn is now
        Frame turn;
        turn.flow = flow;
        turn.due = now;
        turn.seq = seq_++;
        turn.stage = Frame::Stage::Sender;
        q_.push(std::move(turn));
      }
      continue;
    }
    fr.stage = sw_.on ? Frame::Stage::Switch : Frame::Stage::Host;
    if (trace_ && fr.stage == Frame::Stage::Host) trace_(fr, false);
    q_.push(std::move(fr));
  }
}

namespace {

// A sender's entry, made on first use (a list: up to a few hundred hosts, scanned per frame).
template <class T>
T& per_sender(std::vector<std::pair<Gid, T>>& v, const Gid& sender) {
  auto it = std::find_if(v.begin(), v.end(), [&](const auto& w) { return w.first == sender; });
  if (it == v.end()) it = v.insert(v.end(), {sender, T{}});
  return it->second;
}

}  // namespace

uint64_t& LossyLink::wire_free(const Gid& sender) { return per_sender(wire_free_, sender); }
uint64_t& LossyLink::paused_until(const Gid& sender) { return per_sender(paused_, sender); }

std::deque<LossyLink::Frame>& LossyLink::sender_queue(const Gid& sender) { return per_sender(sender_q_, sender); }

void LossyLink::at_sender(Frame turn) {
  std::deque<Frame>& q = sender_queue(turn.flow.src);
  if (q.empty()) return;
  uint64_t& free = wire_free(turn.flow.src);
  const uint64_t start = std::max({turn.due, free, paused_until(turn.flow.src)});
  if (start > turn.due) {  // its wire is busy or paused: the turn comes later
    turn.due = start;
    q_.push(std::move(turn));
    return;
  }
  Frame f = std::move(q.front());
  q.pop_front();
  const uint64_t ser = f_.rate_bps > 0 ? uint64_t(double(f.bytes.size()) * 8e9 / f_.rate_bps + 0.5) : 0;
  free = turn.due + ser;
  f.due = free + f_.delay_ns + (f.due - f.sent_at);  // plus any reordering delay it drew
  f.stage = Frame::Stage::Switch;
  q_.push(std::move(f));
  if (!q.empty()) {
    turn.due = free;
    q_.push(std::move(turn));
  }
}

void LossyLink::at_switch(Frame f) {
  auto it = std::find_if(ports_.begin(), ports_.end(), [&](const OutPort& p) { return p.dst == f.flow.dst; });
  if (it == ports_.end()) it = ports_.insert(ports_.end(), OutPort{f.flow.dst});
  OutPort& port = *it;
  const uint64_t now = f.due;
  while (!port.queue.empty() && port.queue.front().first <= now) {
    port.bytes -= port.queue.front().second;
    port.queue.pop_front();
  }
  if (std::find(port.feeders.begin(), port.feeders.end(), f.flow.src) == port.feeders.end())
    port.feeders.push_back(f.flow.src);
  const uint32_t len = uint32_t(f.bytes.size());
  if (sw_.on_enqueue) sw_.on_enqueue(port.dst, port.bytes);
  if (!sw_.pfc && port.bytes + len > sw_.buffer_bytes) {
    ++st_.switch_drops;
    ++st_.dropped;
    if (trace_) trace_(f, true);
    return;
  }
  if (sw_.mark && chance(sw_.mark(port.bytes))) {
    ++st_.ce_marked;
    f.tos = wire::kEcnCe;
  }
  const uint64_t leaves = std::max(now, port.free_at) + uint64_t(double(len) * 8e9 / sw_.port_bps + 0.5);
  port.free_at = leaves;
  port.queue.emplace_back(leaves, len);
  port.bytes += len;
  if (sw_.pfc && port.bytes > sw_.xoff_bytes) {
    // Pause every sender feeding this port until the queue is down to xon.
    const uint64_t resume = now + uint64_t(double(port.bytes - sw_.xon_bytes) * 8e9 / sw_.port_bps + 0.5);
    for (const Gid& g : port.feeders) {
      uint64_t& until = paused_until(g);
      if (until <= now) ++st_.pauses;  // a new pause, not an extended one
      until = std::max(until, resume);
    }
  }
  f.due = leaves + sw_.delay_ns;
  f.stage = Frame::Stage::Host;
  if (trace_) trace_(f, false);
  q_.push(std::move(f));
}

bool LossyLink::pop_due(uint64_t now, Frame& out) {
  while (!q_.empty() && q_.top().due <= now) {
    Frame f = std::move(const_cast<Frame&>(q_.top()));
    q_.pop();
    if (f.stage == Frame::Stage::Sender) {
      at_sender(std::move(f));
      continue;
    }
    if (f.stage == Frame::Stage::Switch) {
      at_switch(std::move(f));
      continue;
    }
    out = std::move(f);
    ++st_.delivered;
    return true;
  }
  return false;
}

bool LossyLink::pop_due_for(const Gid& ip, uint64_t now, Frame& out) {
  for (size_t i = 0; i < held_.size(); ++i)
    if (held_[i].flow.dst == ip) {
      out = std::move(held_[i]);
      held_.erase(held_.begin() + long(i));
      return true;
    }
  Frame f;
  while (pop_due(now, f)) {
    if (f.flow.dst == ip) {
      out = std::move(f);
      return true;
    }
    held_.push_back(std::move(f));
  }
  return false;
}

namespace {

class LossyPort final : public Link {
 public:
  LossyPort(LossyLink& medium, const Gid& ip) : m_(medium), ip_(ip) {}
  std::vector<Gid> gids() const override { return {ip_}; }
  uint16_t src_port_for(uint32_t qpn) const override { return wire::entropy_port(qpn); }
  void send(std::span<wire::PacketBuf* const> pkts, uint64_t now) override {
    for (wire::PacketBuf* p : pkts) {
      p->materialize();
      m_.send(p->data, p->len, p->flow, now);
    }
  }
  int poll_rx(PacketSink& sink, uint64_t now, int max) override {
    int n = 0;
    LossyLink::Frame f;
    while (n < max && m_.pop_due_for(ip_, now, f)) {
      wire::Ipv4Fields ip;  // in memory: the header is what was sent, and what marked it
      ip.tos = f.tos;
      sink.deliver(f.bytes, f.flow, now, ip);
      wire::expire(f.bytes.data(), f.bytes.size());
      ++n;
    }
    return n;
  }

 private:
  LossyLink& m_;
  Gid ip_;
};

}  // namespace

std::unique_ptr<Link> LossyLink::attach(const Gid& ip) {
  attached_.push_back(ip);
  return std::make_unique<LossyPort>(*this, ip);
}

}  // namespace uroce::sim
