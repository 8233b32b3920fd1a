// uroce-perf: latency and bandwidth of RC operations between two uroce devices, with every
// byte it moves verified. Without --server/--connect it runs both sides itself on loopback
// (two processes). Usage: uroce-perf --help
#include <getopt.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "uroce/oob.hpp"
#include "uroce/uroce.hpp"

using namespace uroce;
using Clock = std::chrono::steady_clock;

namespace {

enum class Op { Send, SendImm, Write, WriteImm, Read, Faa, Cas };
enum class Mode { Lat, Bw };

struct Opts {
  Op op = Op::Send;
  Mode mode = Mode::Lat;
  uint32_t size = 64;
  uint64_t iters = 1000;
  uint32_t qps = 1;
  bool server = false;
  std::string connect;
  uint16_t port = 18515;
  bool json = false;
  uint32_t mtu = 0;  // path MTU in bytes; 0: the port's active MTU
  uint32_t gid = 0;  // our GID index (each side names its own)
};

const char* op_name(Op o) {
  static const char* n[] = {"send", "send_imm", "write", "write_imm", "read", "atomic", "cas"};
  return n[int(o)];
}

bool parse_op(const std::string& s, Op& o) {
  for (int i = 0; i < 7; ++i)
    if (s == op_name(Op(i))) return o = Op(i), true;
  if (s == "faa" || s == "fetch_add") return o = Op::Faa, true;
  return false;
}

bool is_atomic(Op o) { return o == Op::Faa || o == Op::Cas; }
bool needs_recv(Op o) { return o == Op::Send || o == Op::SendImm || o == Op::WriteImm; }
WrOpcode wr_opcode(Op o) {
  switch (o) {
    case Op::Send: return WrOpcode::Send;
    case Op::SendImm: return WrOpcode::SendWithImm;
    case Op::Write: return WrOpcode::RdmaWrite;
    case Op::WriteImm: return WrOpcode::RdmaWriteWithImm;
    case Op::Read: return WrOpcode::RdmaRead;
    case Op::Faa: return WrOpcode::AtomicFetchAdd;
    case Op::Cas: return WrOpcode::AtomicCmpSwp;
  }
  return WrOpcode::Send;
}

Device* g_dev = nullptr;  // for counters in error reports

[[noreturn]] void die(const std::string& m) {
  std::fprintf(stderr, "uroce-perf[%d]: %s\n", getpid(), m.c_str());
  if (g_dev) {
    std::string c;
    for (auto& [k, v] : g_dev->counters())
      if (v) c += " " + k + "=" + std::to_string(v);
    std::fprintf(stderr, "uroce-perf[%d]: counters:%s\n", getpid(), c.c_str());
  }
  std::exit(2);
}

template <class T>
T must(Result<T> r, const char* what) {
  if (!r) die(std::string(what) + ": " + r.error().message);
  return std::move(*r);
}
void must(Status s, const char* what) {
  if (!s) die(std::string(what) + ": " + s.error().message);
}

// Slot contents: the message sequence number in the first 8 bytes (or fewer), the rest a
// pattern fixed per slot, so checking a message is one compare against a precomputed slot.
void fill_slot(uint8_t* p, uint32_t n, uint32_t slot) {
  for (uint32_t i = 0; i < n; ++i) p[i] = uint8_t(slot * 131 + i * 7 + (i >> 9));
}
void stamp(uint8_t* p, uint32_t n, uint64_t seq) { std::memcpy(p, &seq, std::min<uint32_t>(n, 8)); }
bool check_msg(const uint8_t* got, const uint8_t* slot_pattern, uint32_t n, uint64_t seq) {
  uint8_t head[8];
  std::memcpy(head, slot_pattern, std::min<uint32_t>(n, 8));
  stamp(head, n, seq);
  return std::memcmp(got, head, std::min<uint32_t>(n, 8)) == 0 &&
         (n <= 8 || std::memcmp(got + 8, slot_pattern + 8, n - 8) == 0);
}

constexpr uint32_t kWindow = 64;      // outstanding sends/writes per QP in bandwidth mode
constexpr uint32_t kRdWindow = 16;    // outstanding READs/atomics per QP (max_rd_atomic)

struct Conn {
  std::unique_ptr<Device> dev;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> scq, rcq;
  std::vector<std::unique_ptr<QueuePair>> qps;
  std::vector<uint8_t> region;      // per QP: kWindow slots of `size` bytes + 8-byte atomic cell
  std::vector<uint8_t> patterns;    // kWindow slot patterns
  std::unique_ptr<MemoryRegion> mr;
  std::vector<Endpoint> peer;
  uint32_t slot_bytes = 0;
  size_t per_qp = 0;

  uint8_t* slot(uint32_t q, uint32_t s) { return region.data() + q * per_qp + size_t(s) * slot_bytes; }
  uint8_t* cell(uint32_t q) { return region.data() + q * per_qp + size_t(kWindow) * slot_bytes; }
  const uint8_t* pattern(uint32_t s) { return patterns.data() + size_t(s) * slot_bytes; }
  uint64_t remote_slot(uint32_t q, uint32_t s) { return peer[q].addr + size_t(s) * slot_bytes; }
  uint64_t remote_cell(uint32_t q) { return peer[q].addr + size_t(kWindow) * slot_bytes; }
};

void setup(Conn& c, const Opts& o, OobChannel& ch) {
  c.dev = must(Device::open(), "open device");
  g_dev = c.dev.get();
  c.pd = must(c.dev->alloc_pd(), "alloc_pd");
  c.scq = must(c.dev->create_cq(4096), "create_cq");
  c.rcq = must(c.dev->create_cq(4096), "create_cq");
  c.slot_bytes = std::max<uint32_t>(8, (o.size + 63) & ~63u);
  c.per_qp = size_t(kWindow) * c.slot_bytes + 64;
  c.region.assign(c.per_qp * o.qps, 0);
  c.patterns.resize(size_t(kWindow) * c.slot_bytes);
  for (uint32_t s = 0; s < kWindow; ++s) fill_slot(&c.patterns[size_t(s) * c.slot_bytes], c.slot_bytes, s);
  for (uint32_t q = 0; q < o.qps; ++q)
    for (uint32_t s = 0; s < kWindow; ++s) std::memcpy(c.slot(q, s), c.pattern(s), c.slot_bytes);
  c.mr = must(c.pd->reg_mr(c.region.data(), c.region.size(),
                           kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic),
              "reg_mr");
  std::vector<Endpoint> mine;
  Gid gid = must(c.dev->query_gid(int(o.gid)), "query_gid");
  for (uint32_t q = 0; q < o.qps; ++q) {
    QpInit init{QpType::RC, c.scq.get(), c.rcq.get(), QpCap{256, 256, 1, 1, 64}, false};
    c.qps.push_back(must(c.pd->create_qp(init), "create_qp"));
    mine.push_back({gid, c.qps.back()->qp_num(), uint32_t(std::random_device()() & 0xffffff),
                    uint64_t(c.region.data() + q * c.per_qp), c.mr->rkey(), c.per_qp});
  }
  c.peer = must(ch.exchange(mine), "exchange endpoints");
  if (c.peer.size() != o.qps) die("peer has a different number of QPs");
  ConnectOptions co;
  co.min_rnr_timer = 1;  // 10 us: a streaming receiver reposts quickly
  if (o.mtu) co.path_mtu = Mtu(std::countr_zero(o.mtu) - 7);  // else the port's active MTU
  for (uint32_t q = 0; q < o.qps; ++q) must(c.qps[q]->connect(c.peer[q], mine[q].psn, co), "connect");
}

void post_recv(Conn& c, uint32_t q, uint32_t s, uint32_t size) {
  Sge sge{uint64_t(c.slot(q, s)), std::max<uint32_t>(size, 1), c.mr->lkey()};
  must(c.qps[q]->post_recv({uint64_t(q) << 32 | s, {&sge, 1}}), "post_recv");
}

// Polls a CQ: spins for a few microseconds, then sleeps on its completion channel, so that on
// a machine with few cores the NIC engines get the CPU. Gives up after 30 s.
Wc poll_one(CompletionQueue& cq) {
  Wc wc[1];
  auto end = Clock::now() + std::chrono::seconds(30);
  for (;;) {
    int n = 0;
    for (int spin = 0; spin < 200 && (n = cq.poll(wc)) == 0; ++spin) __builtin_ia32_pause();
    if (n == 0) {
      auto r = cq.wait(wc, 100);
      if (!r) die("wait: " + r.error().message);
      n = *r;
    }
    if (n == 1) {
      if (wc[0].status != WcStatus::Success)
        die(std::string("completion error: ") + to_string(wc[0].status) + " (" + to_string(wc[0].opcode) + ")");
      return wc[0];
    }
    if (Clock::now() > end) die("timed out waiting for a completion");
  }
}

void send_to_peer(Conn& c, uint32_t q, Op op, uint32_t size, uint32_t s, uint64_t seq, bool signaled,
                  uint32_t remote_s) {
  uint8_t* buf = c.slot(q, s);  // holds pattern(s) since setup: only the sequence stamp changes
  stamp(buf, size, seq);
  Sge sge{uint64_t(buf), size, c.mr->lkey()};
  SendWr w{uint64_t(q) << 32 | s, wr_opcode(op), signaled ? uint32_t(kSendSignaled) : 0u, {&sge, 1}};
  w.imm_data = uint32_t(seq);
  if (op == Op::Write || op == Op::WriteImm) {
    w.remote_addr = c.remote_slot(q, remote_s);
    w.rkey = c.peer[q].rkey;
  }
  must(c.qps[q]->post_send(w), "post_send");
}

// Write ping-pong through memory, as perftest's write_lat: messages go from slot s into the
// peer's slot kEcho + s, whose last byte the receiver watches. Sources and targets never overlap.
constexpr uint32_t kEcho = kWindow / 2;

bool arrived(Conn& c, uint32_t s, uint32_t size, uint64_t seq) {
  const uint8_t* t = c.slot(0, kEcho + s);
  if (size > 8 && reinterpret_cast<const volatile uint8_t*>(t)[size - 1] != c.pattern(s)[size - 1]) return false;
  std::atomic_thread_fence(std::memory_order_acquire);
  return check_msg(t, c.pattern(s), size, seq);
}

void wait_arrival(Conn& c, uint32_t s, uint32_t size, uint64_t seq) {
  auto end = Clock::now() + std::chrono::seconds(30);
  for (uint64_t spin = 0; !arrived(c, s, size, seq); ++spin) {
    if ((spin & 0xfff) == 0 && Clock::now() > end) die("write ping-pong timed out at message " + std::to_string(seq));
    if ((spin & 63) == 63) sched_yield();  // memory polling cannot sleep: at least let the engine run
  }
  if (size > 8) c.slot(0, kEcho + s)[size - 1] ^= 0xff;  // so the next arrival is a visible change
}

// ---------------------------------------------------------------- server

std::string server_run(Conn& c, const Opts& o, OobChannel& ch) {
  uint32_t size = o.size;
  bool recv_side = needs_recv(o.op);
  if (recv_side)
    for (uint32_t q = 0; q < o.qps; ++q)
      for (uint32_t s = 0; s < kWindow; ++s) post_recv(c, q, s, size);
  if (is_atomic(o.op))
    for (uint32_t q = 0; q < o.qps; ++q) std::memset(c.cell(q), 0, 8);
  if (o.op == Op::Read)
    for (uint32_t q = 0; q < o.qps; ++q)
      for (uint32_t s = 0; s < kWindow; ++s) std::memcpy(c.slot(q, s), c.pattern(s), size);
  // Before the barrier: after it, the client's first write may already be landing here.
  if (o.mode == Mode::Lat && o.op == Op::Write)
    for (uint32_t s = 0; s < kEcho; ++s)
      if (size > 8) c.slot(0, kEcho + s)[size - 1] = uint8_t(~c.pattern(s)[size - 1]);
  must(ch.barrier(), "barrier");
  std::string bad;
  if (o.mode == Mode::Lat && (o.op == Op::Send || o.op == Op::SendImm || o.op == Op::WriteImm)) {
    for (uint64_t i = 0; i < o.iters; ++i) {
      Wc w = poll_one(*c.rcq);
      uint32_t s = uint32_t(w.wr_id);
      if (o.op != Op::WriteImm && !check_msg(c.slot(0, s), c.pattern(i % kWindow), size, i) && bad.empty())
        bad = "message " + std::to_string(i) + " differs";
      if (w.byte_len != size && bad.empty()) bad = "byte_len " + std::to_string(w.byte_len);
      post_recv(c, 0, s, size);
      send_to_peer(c, 0, o.op, size, uint32_t(i % kWindow), i, false, uint32_t(i % kWindow));
    }
  } else if (o.mode == Mode::Lat && o.op == Op::Write) {
    for (uint64_t i = 0; i < o.iters; ++i) {
      uint32_t s = uint32_t(i % kEcho);
      wait_arrival(c, s, size, i);
      send_to_peer(c, 0, o.op, size, s, i, (i % 16) == 15, kEcho + s);
      if ((i % 16) == 15) poll_one(*c.scq);
    }
  } else if (recv_side) {
    // Bandwidth: receive everything, check it, keep receives posted.
    std::vector<uint64_t> next(o.qps, 0);
    for (uint64_t got = 0; got < o.iters; ++got) {
      Wc w = poll_one(*c.rcq);
      uint32_t q = uint32_t(w.wr_id >> 32), s = uint32_t(w.wr_id);
      uint64_t seq = next[q]++;
      if (o.op != Op::WriteImm && !check_msg(c.slot(q, s), c.pattern(s), size, seq * o.qps + q) && bad.empty())
        bad = "message " + std::to_string(seq) + " on QP " + std::to_string(q) + " differs";
      if (o.op == Op::WriteImm && w.imm_data != uint32_t(seq * o.qps + q) && bad.empty()) bad = "immediate differs";
      post_recv(c, q, s, size);
    }
  }
  must(ch.barrier(), "barrier");  // the client is done
  if (o.mode == Mode::Bw && o.op == Op::Write) {
    // The last write into each slot stays: check every slot that was written.
    for (uint32_t q = 0; q < o.qps; ++q) {
      uint64_t n = o.iters / o.qps + (q < o.iters % o.qps ? 1 : 0);
      for (uint32_t s = 0; s < kWindow && s < n; ++s) {
        uint64_t last = ((n - 1 - s) / kWindow) * kWindow + s;
        if (!check_msg(c.slot(q, s), c.pattern(s), size, last * o.qps + q) && bad.empty())
          bad = "slot " + std::to_string(s) + " on QP " + std::to_string(q) + " differs";
      }
    }
  }
  if (is_atomic(o.op)) {
    for (uint32_t q = 0; q < o.qps; ++q) {
      uint64_t v;
      std::memcpy(&v, c.cell(q), 8);
      uint64_t n = o.iters / o.qps + (q < o.iters % o.qps ? 1 : 0);
      if (v != n && bad.empty()) bad = "atomic cell " + std::to_string(v) + ", expected " + std::to_string(n);
    }
  }
  return bad;
}

// ---------------------------------------------------------------- client

struct Stats {
  std::vector<double> lat_us;
  double seconds = 0;
  uint64_t bytes = 0;
  std::string bad;
};

void progress(const Opts& o, Clock::time_point start, Clock::time_point& last, uint64_t done) {
  auto now = Clock::now();
  if (now - start > std::chrono::seconds(2) && now - last > std::chrono::seconds(1)) {
    last = now;
    std::fprintf(stderr, "\r%s %s: %" PRIu64 "/%" PRIu64 " (%.0f%%)", op_name(o.op), o.mode == Mode::Lat ? "lat" : "bw",
                 done, o.iters, 100.0 * double(done) / double(o.iters));
  }
}

Stats client_run(Conn& c, const Opts& o, OobChannel& ch) {
  Stats st;
  uint32_t size = o.size;
  if (needs_recv(o.op) && o.mode == Mode::Lat)
    for (uint32_t s = 0; s < kWindow; ++s) post_recv(c, 0, s, size);
  if (o.mode == Mode::Lat && o.op == Op::Write)
    for (uint32_t s = 0; s < kEcho; ++s)
      if (size > 8) c.slot(0, kEcho + s)[size - 1] = uint8_t(~c.pattern(s)[size - 1]);
  must(ch.barrier(), "barrier");
  auto start = Clock::now(), last = start;
  std::vector<uint64_t> atomic_seen;
  auto post_rd_atomic = [&](uint32_t q, uint32_t s, uint64_t seq) {
    bool atomic = is_atomic(o.op);
    Sge sge{uint64_t(c.slot(q, s)), atomic ? 8u : size, c.mr->lkey()};
    SendWr w{uint64_t(q) << 32 | s, wr_opcode(o.op), kSendSignaled, {&sge, 1}};
    w.remote_addr = atomic ? c.remote_cell(q) : c.remote_slot(q, s);
    w.rkey = c.peer[q].rkey;
    w.compare_add = o.op == Op::Cas ? seq : 1;
    w.swap = seq + 1;
    if (!atomic) std::memset(c.slot(q, s), 0, size);
    must(c.qps[q]->post_send(w), "post_send");
  };
  auto check_rd_atomic = [&](const Wc& w, uint64_t seq) {
    uint32_t q = uint32_t(w.wr_id >> 32), s = uint32_t(w.wr_id);
    if (o.op == Op::Read) {
      if (std::memcmp(c.slot(q, s), c.pattern(s), size) != 0 && st.bad.empty()) st.bad = "READ data differs";
    } else {
      uint64_t v;
      std::memcpy(&v, c.slot(q, s), 8);
      if (v != seq && st.bad.empty()) st.bad = "atomic returned " + std::to_string(v) + ", expected " + std::to_string(seq);
    }
  };
  if (o.mode == Mode::Lat) {
    st.lat_us.reserve(o.iters);
    for (uint64_t i = 0; i < o.iters; ++i) {
      uint32_t s = uint32_t(i % kWindow);
      auto t0 = Clock::now();
      if (o.op == Op::Read || is_atomic(o.op)) {
        post_rd_atomic(0, s, i);
        check_rd_atomic(poll_one(*c.scq), i);
        st.lat_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      } else if (o.op == Op::Write) {
        uint32_t e = uint32_t(i % kEcho);
        send_to_peer(c, 0, o.op, size, e, i, (i % 16) == 15, kEcho + e);
        wait_arrival(c, e, size, i);
        st.lat_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / 2);
        if ((i % 16) == 15) poll_one(*c.scq);
      } else {
        send_to_peer(c, 0, o.op, size, s, i, false, s);
        Wc w = poll_one(*c.rcq);
        st.lat_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / 2);
        uint32_t rs = uint32_t(w.wr_id);
        if (o.op != Op::WriteImm && !check_msg(c.slot(0, rs), c.pattern(i % kWindow), size, i) && st.bad.empty())
          st.bad = "reply " + std::to_string(i) + " differs";
        post_recv(c, 0, rs, size);
      }
      progress(o, start, last, i + 1);
    }
  } else {
    bool rd = o.op == Op::Read || is_atomic(o.op);
    uint32_t window = rd ? kRdWindow : kWindow;
    std::vector<uint64_t> posted(o.qps, 0), done(o.qps, 0);
    std::vector<uint64_t> quota(o.qps);
    for (uint32_t q = 0; q < o.qps; ++q) quota[q] = o.iters / o.qps + (q < o.iters % o.qps ? 1 : 0);
    uint64_t total_done = 0;
    while (total_done < o.iters) {
      for (uint32_t q = 0; q < o.qps; ++q) {
        while (posted[q] < quota[q] && posted[q] - done[q] < window) {
          uint64_t i = posted[q]++;
          uint32_t s = uint32_t(i % kWindow);
          if (rd)
            post_rd_atomic(q, s, o.op == Op::Cas ? i : 0);
          else
            send_to_peer(c, q, o.op, size, s, i * o.qps + q, true, s);
        }
      }
      Wc w = poll_one(*c.scq);
      uint32_t q = uint32_t(w.wr_id >> 32);
      if (rd) check_rd_atomic(w, o.op == Op::Cas ? done[q] : 0);
      if (o.op == Op::Faa) {
        uint64_t v;
        std::memcpy(&v, c.slot(q, uint32_t(w.wr_id)), 8);
        atomic_seen.push_back(v);
      }
      ++done[q];
      ++total_done;
      progress(o, start, last, total_done);
    }
    if (o.op == Op::Faa) {
      // Fetch-and-add of 1 returns every value 0..n-1 exactly once per QP (st.bad was set by
      // check_rd_atomic comparing against 0; judge by the set of values instead).
      st.bad.clear();
      std::sort(atomic_seen.begin(), atomic_seen.end());
      uint64_t per = o.iters / o.qps;
      if (o.qps == 1)
        for (uint64_t i = 0; i < atomic_seen.size(); ++i)
          if (atomic_seen[i] != i) {
            st.bad = "fetch-and-add values are not 0..n-1";
            break;
          }
      (void)per;
    }
  }
  st.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  st.bytes = uint64_t(is_atomic(o.op) ? 8 : size) * o.iters;
  if (st.seconds > 2) std::fprintf(stderr, "\r%60s\r", "");
  must(ch.barrier(), "barrier");
  return st;
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  size_t k = std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5));
  std::nth_element(v.begin(), v.begin() + long(k), v.end());
  return v[k];
}

int run_server(const Opts& base, uint16_t port, const char* listen_on) {
  auto ch = must(OobChannel::accept(listen_on, port, base.server ? -1 : 30'000), "out-of-band accept");
  auto line = must(ch.recv_line(), "read options");
  Opts o = base;
  char op[32], mode[8];
  unsigned long long iters;
  if (std::sscanf(line.c_str(), "perf %31s %7s %u %llu %u %u", op, mode, &o.size, &iters, &o.qps, &o.mtu) != 6 ||
      !parse_op(op, o.op))
    die("bad options from client: " + line);
  o.iters = iters;
  o.mode = std::string(mode) == "bw" ? Mode::Bw : Mode::Lat;
  Conn c;
  setup(c, o, ch);
  std::string bad = server_run(c, o, ch);
  must(ch.send_line(bad.empty() ? "verified" : "FAILED " + bad), "send result");
  return bad.empty() ? 0 : 1;
}

int run_client(const Opts& o, const std::string& host) {
  auto ch = must(OobChannel::connect(host, o.port, 30'000), "out-of-band connect");
  char line[128];
  std::snprintf(line, sizeof line, "perf %s %s %u %llu %u %u", op_name(o.op), o.mode == Mode::Bw ? "bw" : "lat",
                o.size, (unsigned long long)o.iters, o.qps, o.mtu);
  must(ch.send_line(line), "send options");
  Conn c;
  setup(c, o, ch);
  Stats st = client_run(c, o, ch);
  auto verdict = must(ch.recv_line(), "server verdict");
  if (std::getenv("UROCE_PERF_COUNTERS")) {
    std::string cs;
    for (auto& [k, v] : c.dev->counters())
      if (v) cs += " " + k + "=" + std::to_string(v);
    std::fprintf(stderr, "client counters:%s\n", cs.c_str());
  }
  bool verified = st.bad.empty() && verdict == "verified";
  double p50 = percentile(st.lat_us, 0.5), p99 = percentile(st.lat_us, 0.99);
  double bw = st.seconds > 0 ? double(st.bytes) * 8 / st.seconds / 1e9 : 0;
  double rate = st.seconds > 0 ? double(o.iters) / st.seconds / 1e6 : 0;
  if (o.json) {
    std::printf("{\"op\":\"%s\",\"mode\":\"%s\",\"size\":%u,\"iters\":%llu,\"qps\":%u,\"verified\":%s,"
                "\"lat_p50_us\":%.3f,\"lat_p99_us\":%.3f,\"bw_gbps\":%.4f,\"msg_rate_mps\":%.4f,\"seconds\":%.3f}\n",
                op_name(o.op), o.mode == Mode::Bw ? "bw" : "lat", o.size, (unsigned long long)o.iters, o.qps,
                verified ? "true" : "false", p50, p99, bw, rate, st.seconds);
  } else {
    std::printf("%-9s %-3s size %-8u iters %-8llu qps %-2u verified %-3s p50 %8.2f us  p99 %8.2f us  %8.3f Gb/s  %8.4f Mmsg/s\n",
                op_name(o.op), o.mode == Mode::Bw ? "bw" : "lat", o.size, (unsigned long long)o.iters, o.qps,
                verified ? "yes" : "NO", p50, p99, bw, rate);
  }
  if (!verified) std::fprintf(stderr, "uroce-perf: verification failed: %s %s\n", st.bad.c_str(), verdict.c_str());
  return verified ? 0 : 1;
}

void usage() {
  std::printf(
      "usage: uroce-perf [--op send|send_imm|write|write_imm|read|atomic|cas] [--mode lat|bw]\n"
      "                  [--size BYTES] [--iters N] [--qps K] [--json]\n"
      "                  [--server | --connect HOST] [--port P] [--mtu 256..4096] [--gid INDEX]\n"
      "Without --server/--connect both sides run here, as two processes on loopback.\n"
      "Latency is half the round trip for send/write ping-pong, the whole operation for read/atomics.\n");
}

}  // namespace

int main(int argc, char** argv) {
  Opts o;
  static option longopts[] = {{"op", 1, nullptr, 'o'},     {"mode", 1, nullptr, 'm'}, {"size", 1, nullptr, 's'},
                              {"iters", 1, nullptr, 'n'},  {"qps", 1, nullptr, 'q'},  {"server", 0, nullptr, 'S'},
                              {"connect", 1, nullptr, 'c'}, {"port", 1, nullptr, 'p'}, {"json", 0, nullptr, 'j'},
                              {"mtu", 1, nullptr, 'M'},    {"gid", 1, nullptr, 'g'},  {"help", 0, nullptr, 'h'},
                              {nullptr, 0, nullptr, 0}};
  int ch;
  while ((ch = getopt_long(argc, argv, "o:m:s:n:q:Sc:p:jM:g:h", longopts, nullptr)) != -1) {
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
      default: usage(); return ch == 'h' ? 0 : 2;
    }
  }
  if (o.iters == 0 || o.qps == 0 || o.qps > 64) die("--iters must be > 0 and --qps 1..64");
  if (o.size > (16u << 20)) die("--size at most 16 MiB");
  if (is_atomic(o.op)) o.size = 8;
  if (o.mtu && (o.mtu < 256 || o.mtu > 4096 || (o.mtu & (o.mtu - 1)))) die("--mtu is 256, 512, 1024, 2048 or 4096");
  if (o.server) return run_server(o, o.port, "0.0.0.0");
  if (!o.connect.empty()) return run_client(o, o.connect);
  // Both sides here: the server in a child process, on a port the kernel picks for us.
  Opts local = o;
  local.port = uint16_t(20000 + getpid() % 20000);
  pid_t pid = fork();
  if (pid == 0) _exit(run_server(local, local.port, "127.0.0.1"));
  int rc = run_client(local, "127.0.0.1");
  int st = 0;
  waitpid(pid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) rc = rc ? rc : 1;
  return rc;
}
