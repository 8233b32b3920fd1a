// The connection both sides of uroce-perf set up, and the work requests they post on it.
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <random>

#include "common/tool.hpp"
#include "perf/perf.hpp"

namespace uroce::perf {

using tool::die;
using tool::must;

namespace {
constexpr const char* kOpNames[] = {"send", "send_imm", "write", "write_imm", "read", "atomic", "cas"};

void fill_slot(uint8_t* p, uint32_t n, uint32_t slot) {
  for (uint32_t i = 0; i < n; ++i) p[i] = uint8_t(slot * 131 + i * 7 + (i >> 9));
}
}  // namespace

const char* op_name(Op o) { return kOpNames[int(o)]; }
const char* mode_name(Mode m) { return m == Mode::Bw ? "bw" : "lat"; }

bool parse_op(const std::string& s, Op& o) {
  for (int i = 0; i < 7; ++i)
    if (s == kOpNames[i]) return o = Op(i), true;
  if (s == "faa" || s == "fetch_add") return o = Op::Faa, true;
  return false;
}

Kind kind_of(Op o) {
  switch (o) {
    case Op::Send: case Op::SendImm: case Op::WriteImm: return Kind::Message;
    case Op::Write: return Kind::Write;
    case Op::Read: case Op::Faa: case Op::Cas: return Kind::RdAtomic;
  }
  return Kind::Message;
}

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

void stamp(uint8_t* p, uint32_t n, uint64_t seq) { std::memcpy(p, &seq, std::min<uint32_t>(n, 8)); }

bool check_msg(const uint8_t* got, const uint8_t* slot_pattern, uint32_t n, uint64_t seq) {
  uint8_t head[8];
  std::memcpy(head, slot_pattern, std::min<uint32_t>(n, 8));
  stamp(head, n, seq);
  return std::memcmp(got, head, std::min<uint32_t>(n, 8)) == 0 &&
         (n <= 8 || std::memcmp(got + 8, slot_pattern + 8, n - 8) == 0);
}

Buffer::~Buffer() {
  if (mapped_) munmap(p_, n_);
  if (fd_ >= 0) close(fd_);
}

void Buffer::allocate(size_t n, bool memfd) {
  n_ = n;
  if (!memfd) {
    heap_.assign(n, 0);
    p_ = heap_.data();
    return;
  }
  int fd = memfd_create("uroce-perf", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, off_t(n)) != 0) die(std::string("memfd: ") + std::strerror(errno));
  void* m = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) die(std::string("mmap of the memfd: ") + std::strerror(errno));
  fd_ = fd;  // kept, as programs that share such memory keep it: it names the file to a peer
  p_ = static_cast<uint8_t*>(m);
  mapped_ = true;
}

void setup(Conn& c, const Opts& o, OobChannel& ch, bool serving) {
  DeviceOptions d;
  d.rx_loss = o.loss;
  d.rx_loss_seed = serving ? 2 : 1;
  d.reliability = o.reliability;
  // Both sides here (neither --server nor --connect): two processes on loopback, as the usage
  // says; otherwise the host's first device, the one its traffic leaves by.
  const bool here = !o.server && o.connect.empty();
  c.dev = must(Device::open(here ? "uroce_lo" : "", d), "open device");
  tool::set_device(c.dev.get());
  c.pd = must(c.dev->alloc_pd(), "alloc_pd");
  c.scq = must(c.dev->create_cq(kMaxOutstanding + 64), "create_cq");
  // A SEND server keeps kWindow receives posted on every QP.
  c.rcq = must(c.dev->create_cq(std::max<uint32_t>(4096, std::min<uint32_t>(o.qps * kWindow, 1u << 20))), "create_cq");
  c.slot_bytes = std::max<uint32_t>(8, (o.size + 63) & ~63u);
  c.per_qp = size_t(kWindow) * c.slot_bytes + 64;
  c.region.allocate(c.per_qp * o.qps, o.memfd);
  c.patterns.resize(size_t(kWindow) * c.slot_bytes);
  for (uint32_t s = 0; s < kWindow; ++s) fill_slot(&c.patterns[size_t(s) * c.slot_bytes], c.slot_bytes, s);
  for (uint32_t q = 0; q < o.qps; ++q)
    for (uint32_t s = 0; s < kWindow; ++s) std::memcpy(c.slot(q, s), c.pattern(s), c.slot_bytes);
  c.mr = must(c.pd->reg_mr(c.region.data(), c.region.size(),
                           kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic),
              "reg_mr");
  std::vector<Endpoint> mine;
  Gid gid = must(c.dev->query_gid(int(o.gid)), "query_gid");
  std::mt19937 psns(std::random_device{}());  // one device read, not one per QP
  for (uint32_t q = 0; q < o.qps; ++q) {
    QpInit init{QpType::RC, c.scq.get(), c.rcq.get(), QpCap{kWindow + 8, kWindow + 8, 1, 1, 64}, false};
    c.qps.push_back(must(c.pd->create_qp(init), "create_qp"));
    mine.push_back({gid, c.qps.back()->qp_num(), uint32_t(psns() & 0xffffff),
                    uint64_t(c.region.data() + q * c.per_qp), c.mr->rkey(), c.per_qp});
  }
  c.peer = must(ch.exchange(mine), "exchange endpoints");
  if (c.peer.size() != o.qps) die("peer has a different number of QPs");
  ConnectOptions co;
  co.min_rnr_timer = 1;  // 10 us: a streaming receiver reposts quickly
  co.reliability = o.reliability;  // both ends are this tool: agreed per QP
  if (o.mtu) co.path_mtu = tool::mtu_from_bytes(o.mtu);  // else the port's active MTU
  for (uint32_t q = 0; q < o.qps; ++q) must(c.qps[q]->connect(c.peer[q], mine[q].psn, co), "connect");
  if (o.rate_kbps)  // the side that drives the test sends; a limit on the server's QPs means nothing
    for (auto& q : c.qps) must(q->set_rate_limit(RateLimit{o.rate_kbps}), "set_rate_limit");
}

void post_recv(Conn& c, uint32_t q, uint32_t s, uint32_t size) {
  Sge sge{uint64_t(c.slot(q, s)), std::max<uint32_t>(size, 1), c.mr->lkey()};
  must(c.qps[q]->post_recv({uint64_t(q) << 32 | s, {&sge, 1}}), "post_recv");
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

void post_rd_atomic(Conn& c, Op op, uint32_t size, uint32_t q, uint32_t s, uint64_t seq) {
  bool atomic = is_atomic(op);
  Sge sge{uint64_t(c.slot(q, s)), atomic ? 8u : size, c.mr->lkey()};
  SendWr w{uint64_t(q) << 32 | s, wr_opcode(op), kSendSignaled, {&sge, 1}};
  w.remote_addr = atomic ? c.remote_cell(q) : c.remote_slot(q, s);
  w.rkey = c.peer[q].rkey;
  w.compare_add = op == Op::Cas ? seq : 1;
  w.swap = seq + 1;
  if (!atomic) std::memset(c.slot(q, s), 0, size);
  must(c.qps[q]->post_send(w), "post_send");
}

void arm_echo_slots(Conn& c, uint32_t size) {
  for (uint32_t s = 0; s < kEcho; ++s)
    if (size > 8) c.slot(0, kEcho + s)[size - 1] = uint8_t(~c.pattern(s)[size - 1]);
}

namespace {
bool arrived(Conn& c, uint32_t s, uint32_t size, uint64_t seq) {
  const uint8_t* t = c.slot(0, kEcho + s);
  if (size > 8 && reinterpret_cast<const volatile uint8_t*>(t)[size - 1] != c.pattern(s)[size - 1]) return false;
  std::atomic_thread_fence(std::memory_order_acquire);
  return check_msg(t, c.pattern(s), size, seq);
}
}  // namespace

void wait_arrival(Conn& c, uint32_t s, uint32_t size, uint64_t seq) {
  auto end = Clock::now() + std::chrono::seconds(30);
  for (uint64_t spin = 0; !arrived(c, s, size, seq); ++spin) {
    if ((spin & 0xfff) == 0 && Clock::now() > end) die("write ping-pong timed out at message " + std::to_string(seq));
    // As perftest's write_lat polls its send CQ while it watches memory: a poll, even for no
    // completion, lets this thread receive the peer's write.
    c.scq->poll({});
    if ((spin & 63) == 63) sched_yield();
  }
  if (size > 8) c.slot(0, kEcho + s)[size - 1] ^= 0xff;  // so the next arrival is a visible change
}

void show_progress(const Opts& o, Clock::time_point start, Clock::time_point& last, uint64_t done) {
  auto now = Clock::now();
  if (now - start > std::chrono::seconds(2) && now - last > std::chrono::seconds(1)) {
    last = now;
    std::fprintf(stderr, "\r%s %s: %" PRIu64 "/%" PRIu64 " (%.0f%%)", op_name(o.op), mode_name(o.mode), done, o.iters,
                 100.0 * double(done) / double(o.iters));
  }
}

}  // namespace uroce::perf
