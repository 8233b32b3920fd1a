// What each side does for each {kind of operation, mode}: the table at the end picks one pair.
// Every message is checked: its bytes, its length, its immediate, its atomic result.
#include <algorithm>
#include <cstring>

#include "common/tool.hpp"
#include "perf/perf.hpp"

namespace uroce::perf {

using tool::poll_one;

namespace {

double since_us(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

void note(std::string& bad, const std::string& what) {
  if (bad.empty()) bad = what;
}

// ---------------------------------------------------------------- latency

// SEND / SEND with immediate / WRITE with immediate: the server answers each message in kind.
std::string echo_messages(Conn& c, const Opts& o) {
  std::string bad;
  for (uint64_t i = 0; i < o.iters; ++i) {
    Wc w = poll_one(*c.rcq);
    uint32_t s = uint32_t(w.wr_id);
    if (o.op != Op::WriteImm && !check_msg(c.slot(0, s), c.pattern(i % kWindow), o.size, i))
      note(bad, "message " + std::to_string(i) + " differs");
    if (w.byte_len != o.size) note(bad, "byte_len " + std::to_string(w.byte_len));
    post_recv(c, 0, s, o.size);
    send_to_peer(c, 0, o.op, o.size, uint32_t(i % kWindow), i, false, uint32_t(i % kWindow));
  }
  return bad;
}

void message_pingpong(Conn& c, const Opts& o, Stats& st) {
  auto start = Clock::now(), last = start;
  for (uint64_t i = 0; i < o.iters; ++i) {
    uint32_t s = uint32_t(i % kWindow);
    auto t0 = Clock::now();
    send_to_peer(c, 0, o.op, o.size, s, i, false, s);
    Wc w = poll_one(*c.rcq);
    st.lat_us.push_back(since_us(t0) / 2);
    uint32_t rs = uint32_t(w.wr_id);
    if (o.op != Op::WriteImm && !check_msg(c.slot(0, rs), c.pattern(i % kWindow), o.size, i))
      note(st.bad, "reply " + std::to_string(i) + " differs");
    post_recv(c, 0, rs, o.size);
    show_progress(o, start, last, i + 1);
  }
}

// WRITE: each side watches its memory for the other's write, as perftest's write_lat.
std::string echo_writes(Conn& c, const Opts& o) {
  for (uint64_t i = 0; i < o.iters; ++i) {
    uint32_t s = uint32_t(i % kEcho);
    wait_arrival(c, s, o.size, i);
    send_to_peer(c, 0, o.op, o.size, s, i, (i % 16) == 15, kEcho + s);
    if ((i % 16) == 15) poll_one(*c.scq);
  }
  return {};
}

void write_pingpong(Conn& c, const Opts& o, Stats& st) {
  auto start = Clock::now(), last = start;
  for (uint64_t i = 0; i < o.iters; ++i) {
    uint32_t e = uint32_t(i % kEcho);
    auto t0 = Clock::now();
    send_to_peer(c, 0, o.op, o.size, e, i, (i % 16) == 15, kEcho + e);
    wait_arrival(c, e, o.size, i);
    st.lat_us.push_back(since_us(t0) / 2);
    if ((i % 16) == 15) poll_one(*c.scq);
    show_progress(o, start, last, i + 1);
  }
}

// READ data equals the peer's slot pattern; an atomic returns the cell's value before it.
void check_rd_atomic(Conn& c, const Opts& o, const Wc& w, uint64_t seq, std::string& bad) {
  uint32_t q = uint32_t(w.wr_id >> 32), s = uint32_t(w.wr_id);
  if (o.op == Op::Read) {
    if (std::memcmp(c.slot(q, s), c.pattern(s), o.size) != 0) note(bad, "READ data differs");
    return;
  }
  uint64_t v;
  std::memcpy(&v, c.slot(q, s), 8);
  if (v != seq) note(bad, "atomic returned " + std::to_string(v) + ", expected " + std::to_string(seq));
}

void rd_atomic_lat(Conn& c, const Opts& o, Stats& st) {
  auto start = Clock::now(), last = start;
  for (uint64_t i = 0; i < o.iters; ++i) {
    auto t0 = Clock::now();
    post_rd_atomic(c, o.op, o.size, 0, uint32_t(i % kWindow), i);
    check_rd_atomic(c, o, poll_one(*c.scq), i, st.bad);
    st.lat_us.push_back(since_us(t0));
    show_progress(o, start, last, i + 1);
  }
}

// ---------------------------------------------------------------- bandwidth

// Receives everything, checks it, keeps receives posted.
std::string receive_stream(Conn& c, const Opts& o) {
  std::string bad;
  std::vector<uint64_t> next(o.qps, 0);
  for (uint64_t got = 0; got < o.iters; ++got) {
    Wc w = poll_one(*c.rcq);
    uint32_t q = uint32_t(w.wr_id >> 32), s = uint32_t(w.wr_id);
    uint64_t seq = next[q]++;
    if (o.op != Op::WriteImm && !check_msg(c.slot(q, s), c.pattern(s), o.size, seq * o.qps + q))
      note(bad, "message " + std::to_string(seq) + " on QP " + std::to_string(q) + " differs");
    if (o.op == Op::WriteImm && w.imm_data != uint32_t(seq * o.qps + q)) note(bad, "immediate differs");
    post_recv(c, q, s, o.size);
  }
  return bad;
}

// Keeps `window` operations in flight on every QP until each has done its quota; post(q, i)
// posts QP q's i-th, done(w, k) sees the k-th completion of w's QP.
template <class Post, class Done>
void stream(const Opts& o, Conn& c, uint32_t window, Post post, Done done_fn) {
  std::vector<uint64_t> posted(o.qps, 0), done(o.qps, 0);
  auto start = Clock::now(), last = start;
  for (uint32_t q = 0; q < o.qps; ++q)
    while (posted[q] < quota(o, q) && posted[q] < window) post(q, posted[q]++);
  // Each completion makes room for one more on its QP: the work per completion does not grow
  // with the number of QPs.
  for (uint64_t total = 0; total < o.iters;) {
    Wc w = poll_one(*c.scq);
    uint32_t q = uint32_t(w.wr_id >> 32);
    done_fn(w, done[q]++);
    if (posted[q] < quota(o, q)) post(q, posted[q]++);
    show_progress(o, start, last, ++total);
  }
}

void send_stream(Conn& c, const Opts& o, Stats&) {
  stream(
      o, c, window_for(o),
      [&, b = buffers_for(o)](uint32_t q, uint64_t i) {
        send_to_peer(c, q, o.op, o.size, uint32_t(i % b), i * o.qps + q, true, uint32_t(i % b));
      },
      [](const Wc&, uint64_t) {});
}

void rd_atomic_stream(Conn& c, const Opts& o, Stats& st) {
  std::vector<uint64_t> fetched;  // fetch-and-add: the values returned
  stream(
      o, c, window_for(o),
      [&](uint32_t q, uint64_t i) { post_rd_atomic(c, o.op, o.size, q, uint32_t(i % kWindow), o.op == Op::Cas ? i : 0); },
      [&](const Wc& w, uint64_t k) {
        if (o.op != Op::Faa) return check_rd_atomic(c, o, w, o.op == Op::Cas ? k : 0, st.bad);
        uint64_t v;
        std::memcpy(&v, c.slot(uint32_t(w.wr_id >> 32), uint32_t(w.wr_id)), 8);
        fetched.push_back(v);
      });
  // Fetch-and-add of 1 on one QP returns every value 0..n-1 exactly once; with several QPs
  // on one cell each, the server's cell check covers it.
  if (o.op != Op::Faa || o.qps != 1) return;
  std::sort(fetched.begin(), fetched.end());
  for (uint64_t i = 0; i < fetched.size(); ++i)
    if (fetched[i] != i) return note(st.bad, "fetch-and-add values are not 0..n-1");
}

// ---------------------------------------------------------------- the server's final checks

// The last write into each slot stays: every slot that was written holds its last message.
std::string verify_written_slots(Conn& c, const Opts& o) {
  std::string bad;
  for (uint32_t q = 0; q < o.qps; ++q) {
    uint64_t n = quota(o, q);
    const uint32_t b = buffers_for(o);
    for (uint32_t s = 0; s < b && s < n; ++s) {
      uint64_t last = ((n - 1 - s) / b) * b + s;
      if (!check_msg(c.slot(q, s), c.pattern(s), o.size, last * o.qps + q))
        note(bad, "slot " + std::to_string(s) + " on QP " + std::to_string(q) + " differs");
    }
  }
  return bad;
}

// Each QP's atomic cell counted exactly its operations (CAS swaps in seq + 1, FAA adds 1).
std::string verify_atomic_cells(Conn& c, const Opts& o) {
  std::string bad;
  if (!is_atomic(o.op)) return bad;
  for (uint32_t q = 0; q < o.qps; ++q) {
    uint64_t v;
    std::memcpy(&v, c.cell(q), 8);
    if (v != quota(o, q)) note(bad, "atomic cell " + std::to_string(v) + ", expected " + std::to_string(quota(o, q)));
  }
  return bad;
}

constexpr Runner kRunners[] = {
    {Kind::Message, Mode::Lat, echo_messages, message_pingpong, nullptr},
    {Kind::Write, Mode::Lat, echo_writes, write_pingpong, nullptr},
    {Kind::RdAtomic, Mode::Lat, nullptr, rd_atomic_lat, verify_atomic_cells},
    {Kind::Message, Mode::Bw, receive_stream, send_stream, nullptr},
    {Kind::Write, Mode::Bw, nullptr, send_stream, verify_written_slots},
    {Kind::RdAtomic, Mode::Bw, nullptr, rd_atomic_stream, verify_atomic_cells},
};

}  // namespace

const Runner& runner_for(const Opts& o) {
  for (const Runner& r : kRunners)
    if (r.kind == kind_of(o.op) && r.mode == o.mode) return r;
  tool::die("no runner for this operation and mode");
}

}  // namespace uroce::perf
