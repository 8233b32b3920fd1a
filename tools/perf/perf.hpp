// uroce-perf's parts: the options, the connection both sides set up (one region of message
// slots per QP, registered once), and the runners, one {server, client} pair per kind of
// operation and mode (runners.cpp holds the table).
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "uroce/oob.hpp"
#include "uroce/uroce.hpp"

namespace uroce::perf {

using Clock = std::chrono::steady_clock;

enum class Op { Send, SendImm, Write, WriteImm, Read, Faa, Cas };
enum class Mode { Lat, Bw };

// How an operation meets the peer: as a message it receives (a receive completion), as bytes
// written into its memory, or as a READ/atomic its NIC answers alone.
enum class Kind { Message, Write, RdAtomic };

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
  uint32_t window = 0;  // bandwidth mode: requests in flight per QP (0: the most allowed, below)
  double loss = 0;      // each side's device loses this share of the packets it receives
  Reliability reliability = Reliability::Gbn;  // both sides' devices
  uint32_t rate_kbps = 0;  // the client's QPs' rate limit (QueuePair::set_rate_limit); 0: none
  bool memfd = false;      // message memory in a memfd (shared, as DPDK or MPI memory) rather than the heap
  // WRITE bandwidth: the message slots the WRITEs take in turn, on both sides (0: all kWindow).
  // 1 is what perftest and ucx_perftest do: every message from one buffer into one buffer.
  uint32_t buffers = 0;
};

const char* op_name(Op o);
const char* mode_name(Mode m);
bool parse_op(const std::string& s, Op& o);
Kind kind_of(Op o);
inline bool is_atomic(Op o) { return o == Op::Faa || o == Op::Cas; }
WrOpcode wr_opcode(Op o);
// Operations QP q carries: bandwidth runs spread them round robin, latency runs use QP 0.
inline uint64_t quota(const Opts& o, uint32_t q) {
  if (o.mode == Mode::Lat) return q == 0 ? o.iters : 0;
  return o.iters / o.qps + (q < o.iters % o.qps ? 1 : 0);
}

constexpr uint32_t kWindow = 64;      // outstanding sends/writes per QP in bandwidth mode, at most
constexpr uint32_t kRdWindow = 16;    // outstanding READs/atomics per QP (max_rd_atomic), at most
constexpr uint32_t kMaxQps = 4096;
// All QPs together keep at most this many requests outstanding (the send CQ holds them all):
// 64 on each of up to 512 QPs, 8 on each of 4096. perftest keeps its tx depth (128) on every QP.
constexpr uint32_t kMaxOutstanding = 32768;
// Requests in flight on each QP in bandwidth mode: --window if given, within those limits.
inline uint32_t window_for(const Opts& o) {
  const uint32_t per_qp = kind_of(o.op) == Kind::RdAtomic ? kRdWindow : kWindow;
  const uint32_t w = o.window ? std::min(o.window, per_qp) : per_qp;
  return std::max(1u, std::min(w, kMaxOutstanding / o.qps));
}
// Write ping-pong through memory, as perftest's write_lat: messages go from slot s into the
// peer's slot kEcho + s, whose last byte the receiver watches. Sources and targets never overlap.
constexpr uint32_t kEcho = kWindow / 2;
inline uint32_t buffers_for(const Opts& o) { return o.buffers ? o.buffers : kWindow; }

// Slot contents: the message sequence number in the first 8 bytes (or fewer), the rest a
// pattern fixed per slot, so checking a message is one compare against a precomputed slot.
void stamp(uint8_t* p, uint32_t n, uint64_t seq);
bool check_msg(const uint8_t* got, const uint8_t* slot_pattern, uint32_t n, uint64_t seq);

// The registered memory, zeroed: on the heap, or in a memfd mapped shared.
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();
  void allocate(size_t n, bool memfd);
  uint8_t* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  uint8_t* p_ = nullptr;
  size_t n_ = 0;
  bool mapped_ = false;
  int fd_ = -1;
  std::vector<uint8_t> heap_;
};

struct Conn {
  std::unique_ptr<Device> dev;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> scq, rcq;
  std::vector<std::unique_ptr<QueuePair>> qps;
  Buffer region;                    // per QP: kWindow slots of `size` bytes + 8-byte atomic cell
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

// Opens the device, registers the slots, exchanges endpoints over ch and connects every QP.
// serving: this is the side that answers (its device loses other packets than the client's).
void setup(Conn& c, const Opts& o, OobChannel& ch, bool serving);
void post_recv(Conn& c, uint32_t q, uint32_t s, uint32_t size);
// SEND/WRITE of slot s (stamped with seq) to the peer; a WRITE lands in its slot remote_s.
void send_to_peer(Conn& c, uint32_t q, Op op, uint32_t size, uint32_t s, uint64_t seq, bool signaled,
                  uint32_t remote_s);
// READ of the peer's slot s into ours, or an atomic on its cell (CAS compares with seq).
void post_rd_atomic(Conn& c, Op op, uint32_t size, uint32_t q, uint32_t s, uint64_t seq);
// Write ping-pong: marks the echo slots so that an arrival is a visible change of the last byte.
void arm_echo_slots(Conn& c, uint32_t size);
void wait_arrival(Conn& c, uint32_t s, uint32_t size, uint64_t seq);

struct Stats {
  std::vector<double> lat_us;
  double seconds = 0;
  uint64_t bytes = 0;
  std::string bad;
};

// A server's part: the empty string if everything it saw was right, else what was wrong.
using ServerFn = std::string (*)(Conn&, const Opts&);
using ClientFn = void (*)(Conn&, const Opts&, Stats&);

struct Runner {
  Kind kind;
  Mode mode;
  ServerFn server;   // between the start and end barriers
  ClientFn client;   // between the start and end barriers
  ServerFn verify;   // the server's checks after the client is done (may be null)
};
const Runner& runner_for(const Opts& o);

// Progress on stderr for runs longer than two seconds.
void show_progress(const Opts& o, Clock::time_point start, Clock::time_point& last, uint64_t done);

}  // namespace uroce::perf
