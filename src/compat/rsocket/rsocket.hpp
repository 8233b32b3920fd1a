// rsockets: librdmacm's socket API over RC QPs, in the librdmacm drop-in. The wire format is
// librdmacm's, so a uroce rsocket talks to one on any other host (rxe, a RoCE NIC):
//  - rdma_cm private data carries ConnData: each side's receive ring, the SGL array the peer may
//    write new ring halves into, its receive credits and its iomap table;
//  - data moves by RDMA WRITE with immediate into the peer's ring, the immediate naming what it
//    was (Op) and how long; SGL updates and control messages are WRITEs with immediate too, so
//    every message takes one of the peer's receive WQEs (the credits).
// Stream sockets only: datagram rsockets answer ENOTSUP, and the preload library then gives the
// program a kernel socket.
#pragma once

#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#include <sys/uio.h>

#include <algorithm>
#include <cstdint>
#include <atomic>
#include <cstring>
#include <functional>
#include <mutex>
#include <vector>

namespace uroce::compat::rs {

// The immediate: operation in bits 31..29, its datum (a length, credits, an index) below.
enum Op : uint32_t { kOpData = 0, kOpWrite = 2, kOpSgl = 4, kOpIomapSgl = 6, kOpCtrl = 7 };
enum Ctrl : uint32_t { kCtrlDisconnect = 0, kCtrlKeepalive = 1, kCtrlShutdown = 2 };
constexpr uint32_t pack(uint32_t op, uint32_t datum) { return op << 29 | (datum & 0x1fffffff); }
constexpr uint32_t op_of(uint32_t msg) { return msg >> 29; }
constexpr uint32_t datum_of(uint32_t msg) { return msg & 0x1fffffff; }

// Written by the peer into our memory, in the writer's byte order (kConnBigEndian tells).
struct WireSge {
  uint64_t addr;
  uint32_t key;
  uint32_t length;
};
struct WireIomap {
  uint64_t offset;
  WireSge sge;
};
// The private data of the REQ and REP (after rdma_cm's own header), big-endian.
struct ConnData {
  uint8_t version;  // 1
  uint8_t flags;
  uint16_t credits;  // receive WQEs the sender may use
  uint8_t reserved[3];
  uint8_t iomap_size;  // entries in target_iomap, scaled (scale_of)
  WireSge target_sgl;  // where the peer writes new ring halves: length counts entries
  WireSge data_buf;    // the first ring half
};
static_assert(sizeof(ConnData) == 40);
constexpr uint8_t kConnBigEndian = 1;
constexpr uint8_t kConnIomap = 2;

constexpr uint32_t kSndLowat = 2048;       // a send waits for at least this much ring space
constexpr uint32_t kFirstTransfer = 2048;  // a large send's first WRITE; each next one doubles
constexpr uint32_t kMaxTransfer = 65536;
constexpr uint16_t kQpMin = 16, kQpMax = 0xfffe;
constexpr uint32_t kCtrlSlots = 4;  // control messages in flight (a power of 2)
constexpr int kSglEntries = 2;      // ring halves advertised at once
constexpr uint64_t kRecvFlag = uint64_t(1) << 63;
constexpr uint64_t kSpinUs = 10;  // a blocking call polls this long before it sleeps

// A socket's state: bits, ordered passive < opening < connected < closed, as in librdmacm.
enum State : int {
  kInit = 0,
  kBound = 0x1,
  kListening = 0x2,
  kOpening = 0x4,
  kResolvingAddr = kOpening | 0x10,
  kResolvingRoute = kOpening | 0x20,
  kConnecting = kOpening | 0x40,
  kAccepting = kOpening | 0x80,
  kConnected = 0x100,
  kWritable = 0x200,
  kReadable = 0x400,
  kConnectRdwr = kConnected | kReadable | kWritable,
  kConnectError = 0x800,
  kDisconnected = 0x1000,
  kError = 0x2000,
};

// A region the program mapped with riomap: sent to the peer's iomap table if writable.
struct IoMapping {
  uint64_t offset = 0;
  ibv_mr* mr = nullptr;
  int index = -1;  // slot in the peer's table; -1 for a local (read-only) mapping
  bool sent = false;
};

struct Socket {
  int index = -1;  // the number programs use: a dup of the cm id's event channel fd
  rdma_cm_id* id = nullptr;
  int state = kInit;
  int err = 0;  // SO_ERROR
  int fs_flags = 0, fd_flags = 0;
  uint64_t so_opts = 0, tcp_opts = 0, ipv6_opts = 0;
  int ip_tos = 0;
  std::atomic<unsigned> keepalive_time{7200};  // TCP_KEEPIDLE, seconds (the keepalive thread reads it)
  std::atomic<uint64_t> keepalive_next_us{0};  // when the next keepalive goes (0: not scheduled)
  bool swap = false;  // the peer's byte order differs: what we write into it is swapped

  uint32_t sbuf_size, rbuf_size;
  uint16_t sq_size, rq_size, sq_inline, target_iomap_size;

  // Send side: WQEs, ring bytes, and the peer's credits (sseq_comp: the last message allowed).
  int sqe_avail = 0;
  uint32_t ctrl_seqno = 0, ctrl_max_seqno = kCtrlSlots;
  uint16_t sseq_no = 0, sseq_comp = 0;
  uint8_t* sbuf = nullptr;
  ibv_mr* smr = nullptr;
  uint32_t sbuf_bytes_avail = 0, scursor = 0;
  WireSge remote_sgl{}, remote_iomap{};  // the peer's SGL array and iomap table
  int remote_sge = 0;                    // next entry of remote_sgl we write

  // What the peer writes to: ring halves it may fill (target_sgl) and its iomaps.
  uint8_t* targets = nullptr;
  ibv_mr* target_mr = nullptr;
  WireSge* target_sgl = nullptr;
  WireIomap* target_iomap = nullptr;
  int target_sge = 0;

  // Receive side: the ring and the messages that landed in it, in order.
  struct RMsg {
    uint32_t op, len;
  };
  uint8_t* rbuf = nullptr;
  ibv_mr* rmr = nullptr;
  uint32_t rbuf_offset = 0, rbuf_free_offset = 0, rbuf_bytes_avail = 0;
  std::vector<RMsg> rmsg;
  size_t rmsg_head = 0, rmsg_tail = 0;
  uint16_t rseq_no = 0, rseq_comp = 0;

  bool cq_armed = false;
  // The cm id said the peer is gone: the socket is disconnected once the completions already in
  // the CQ (the peer's last data among them) have been taken.
  bool peer_gone = false;
  unsigned unack_cqe = 0;

  std::vector<IoMapping> iomaps;  // riomap'd regions (fixed slots for the peer's table first)
  std::atomic<bool> iomaps_unsent{false};  // a writable mapping waits to be sent

  std::mutex send_mu, recv_mu, cq_mu, wait_mu, map_mu;
};

// A program's iovecs, read or written in order.
struct Cursor {
  const iovec* iov;
  int cnt;
  size_t off = 0;
  void copy_out(uint8_t* dst, size_t n) {  // from the iovecs
    for (; n; ++iov, --cnt, off = 0) {
      size_t take = std::min(n, iov->iov_len - off);
      std::memcpy(dst, static_cast<const uint8_t*>(iov->iov_base) + off, take);
      dst += take, n -= take, off += take;
      if (off < iov->iov_len) return;
    }
  }
  void copy_in(const uint8_t* src, size_t n) {  // into the iovecs
    for (; n; ++iov, --cnt, off = 0) {
      size_t take = std::min(n, iov->iov_len - off);
      std::memcpy(static_cast<uint8_t*>(iov->iov_base) + off, src, take);
      src += take, n -= take, off += take;
      if (off < iov->iov_len) return;
    }
  }
};

// Posts n bytes of `from` (inline if small, else copied into the send ring) as one WRITE, with
// immediate `msg` unless op is a plain WRITE; the completion's wr_id is msg. Takes a WQE and the
// ring bytes; the completion gives them back.
int post_piece(Socket* s, Cursor& from, uint32_t n, ibv_wr_opcode op, uint32_t msg, uint64_t addr, uint32_t rkey);

// Sockets by number; nullptr if the number is not an rsocket.
Socket* lookup(int index);
void insert(Socket* s);
void remove(Socket* s);

// Connection (connect.cpp).
Socket* make_socket(const Socket* inherit);
int do_connect(Socket* s);
void free_socket(Socket* s);
int set_nonblocking(Socket* s, bool on);
// Every socket of the process, the socket table locked (a socket is not freed meanwhile).
void for_each_socket(const std::function<void(Socket*)>& f);
bool wants_keepalive(const Socket* s);
// SO_KEEPALIVE or TCP_KEEPIDLE set: the next keepalive is a period from now (keepalive.cpp).
void keepalive_wanted(Socket* s);
int fail(int e);
int value_to_scale(int value, int bits);
int scale_to_value(int value, int bits);

// Data path (stream.cpp).
bool can_send(Socket* s);
bool has_rdata(const Socket* s);
bool nonblocking(const Socket* s, int flags);
using Test = bool (*)(Socket*);
int process_cq(Socket* s, bool nonblock, Test test);
int get_comp(Socket* s, bool nonblock, Test test);
int post_msg(Socket* s, uint32_t msg);
void handle_cm_event(Socket* s);
int wait_event(Socket* s, int timeout_ms);  // wait_mu held
bool all_sends_done(Socket* s);
bool can_send_ctrl(Socket* s);
int send_iomaps(Socket* s, int flags);
// Waits (as the socket and flags allow) until one more message may be sent; ECONNRESET once
// the socket can send no more (send_mu held).
int wait_room(Socket* s, int flags);
uint64_t now_us();  // CLOCK_MONOTONIC

}  // namespace uroce::compat::rs
