// uroce-pingpong: RC SEND ping-pong that speaks ibv_rc_pingpong's out-of-band protocol
// (rdma-core's libibverbs/examples), so that uroce and an unmodified ibv_rc_pingpong (on rxe or
// a RoCE NIC) can be each other's peer. ibv_rc_pingpong sends from the buffer it receives into,
// so every message it returns must equal the one we sent before: we check every byte. Our data
// keeps a zero at the start of each 4 KiB page, which is what its --chk verifies.
// -T uc / -T ud use UC or UD QPs and pair with ibv_uc_pingpong / ibv_ud_pingpong (same
// exchange; UD uses their Q_Key 0x11111111 and receives into SIZE + 40 bytes, GRH first).
//   server: uroce-pingpong [-T rc|uc|ud] [-p PORT] [-s SIZE] [-n ITERS] [-m MTU]
//   client: uroce-pingpong [-T rc|uc|ud] [-p PORT] [-s SIZE] [-n ITERS] [-m MTU] SERVER
#include <getopt.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/tool.hpp"
#include "uroce/oob.hpp"
#include "uroce/uroce.hpp"

using namespace uroce;

namespace {

using tool::die;
using tool::must;

constexpr size_t kMsg = sizeof "0000:000000:000000:00000000000000000000000000000000";  // with its NUL
constexpr uint32_t kQkey = 0x11111111;                                                // ibv_ud_pingpong's
constexpr uint64_t kRecvs = 16;

std::string wire_dest(uint32_t qpn, uint32_t psn, const Gid& gid) {
  char m[kMsg];
  int n = std::snprintf(m, sizeof m, "%04x:%06x:%06x:", 0, qpn, psn);
  for (int i = 0; i < 16; ++i) n += std::snprintf(m + n, sizeof m - size_t(n), "%02x", gid.raw[size_t(i)]);
  return std::string(m, kMsg);
}

Endpoint parse_dest(const char* m) {
  unsigned lid, qpn, psn;
  char g[33] = {};
  if (std::sscanf(m, "%x:%x:%x:%32s", &lid, &qpn, &psn, g) != 4 || std::strlen(g) != 32)
    die(std::string("bad peer address message: ") + m);
  Endpoint e;
  e.qpn = qpn;
  e.psn = psn;
  for (int i = 0; i < 16; ++i) e.gid.raw[size_t(i)] = uint8_t(std::strtoul(std::string(g + 2 * i, 2).c_str(), nullptr, 16));
  return e;
}

void fill(std::vector<uint8_t>& b, size_t size, uint64_t k) {
  std::mt19937_64 r(k * 7919 + 1);
  for (size_t i = 0; i < size; ++i) b[i] = (i % 4096 == 0) ? 0 : uint8_t(r() >> 56);
}

struct Args {
  int port = 18515, iters = 1000, gidx = 0;
  size_t size = 4096;
  std::optional<Mtu> mtu;  // ibv_*_pingpong's default, 1024, unless the port's is smaller
  QpType type = QpType::RC;
  std::string server;      // empty: we are the server
};

Args parse_args(int argc, char** argv) {
  Args a;
  int c;
  while ((c = getopt(argc, argv, "T:p:s:n:m:g:d:ec")) != -1) {
    switch (c) {
      case 'T':
        a.type = std::string(optarg) == "uc" ? QpType::UC : std::string(optarg) == "ud" ? QpType::UD : QpType::RC;
        break;
      case 'p': a.port = std::atoi(optarg); break;
      case 's': a.size = std::strtoul(optarg, nullptr, 0); break;
      case 'n': a.iters = std::atoi(optarg); break;
      case 'm': a.mtu = tool::mtu_from_bytes(uint32_t(std::atoi(optarg))).value_or(Mtu::Mtu1024); break;
      case 'g': a.gidx = std::atoi(optarg); break;
      case 'd': case 'e': case 'c': break;  // accepted for ibv_rc_pingpong compatibility
      default: die("usage: uroce-pingpong [-T rc|uc|ud] [-p port] [-s size] [-n iters] [-m mtu] [-g gid-index] [server]");
    }
  }
  if (optind < argc) a.server = argv[optind];
  if (a.size == 0 || a.size > (1u << 24)) die("size must be 1..16 MiB");
  return a;
}

// One side: its QP, a send buffer and kRecvs receive slots (UD slots start with the GRH area).
struct Side {
  const Args& a;
  std::unique_ptr<Device> dev;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> cq;
  std::unique_ptr<QueuePair> qp;
  std::vector<uint8_t> sbuf, rbuf, expect;
  std::unique_ptr<MemoryRegion> smr, rmr;
  bool ud;
  size_t grh, slot;
  Gid gid;
  uint32_t psn = std::random_device{}() & 0xffffff;
  Endpoint peer;
  Ah peer_ah;

  explicit Side(const Args& args)
      : a(args), ud(args.type == QpType::UD), grh(ud ? kGrhBytes : 0), slot(args.size + grh) {
    dev = must(Device::open(), "open device");
    tool::set_device(dev.get());  // a failure prints the counters
    pd = must(dev->alloc_pd(), "alloc_pd");
    cq = must(dev->create_cq(1024), "create_cq");
    sbuf.resize(a.size);
    rbuf.resize(slot * kRecvs);
    expect.resize(a.size);
    smr = must(pd->reg_mr(sbuf.data(), sbuf.size(), kAccessLocalWrite), "reg_mr");
    rmr = must(pd->reg_mr(rbuf.data(), rbuf.size(), kAccessLocalWrite), "reg_mr");
    qp = must(pd->create_qp({a.type, cq.get(), cq.get(), QpCap{16, 16, 1, 1, 0}, false}), "create_qp");
    gid = must(dev->query_gid(a.gidx), "query_gid");
  }

  void post_recv(uint64_t i) {
    Sge s{uint64_t(rbuf.data() + i * slot), uint32_t(slot), rmr->lkey()};
    must(qp->post_recv({i, {&s, 1}}), "post_recv");
  }

  void connect() {
    ConnectOptions co;
    co.path_mtu = a.mtu ? *a.mtu : std::min(Mtu::Mtu1024, dev->query_port().active_mtu);
    co.sgid_index = uint8_t(a.gidx);
    co.max_rd_atomic = co.max_dest_rd_atomic = 1;
    must(ud ? qp->activate_ud(kQkey, psn) : qp->connect(peer, psn, co), "connect");
    for (uint64_t i = 0; i < kRecvs; ++i) post_recv(i);
    peer_ah = Ah{peer.gid};
    peer_ah.sgid_index = uint8_t(a.gidx);
  }

  // The client sends its address, the server answers with its own once its QP is ready, and
  // the client confirms with "done" (NUL included).
  void exchange() {
    auto oob = must(a.server.empty() ? OobChannel::accept("0.0.0.0", uint16_t(a.port))
                                     : OobChannel::connect(a.server, uint16_t(a.port), 30'000),
                    "out-of-band channel");
    std::string mine = wire_dest(qp->qp_num(), psn, gid);
    char msg[kMsg], done[5];
    if (a.server.empty()) {
      must(oob.recv_bytes(msg, kMsg), "reading the client's address");
      peer = parse_dest(msg);
      connect();
      must(oob.send_bytes(mine.data(), kMsg), "sending our address");
      must(oob.recv_bytes(done, sizeof done), "waiting for the client's done");
    } else {
      must(oob.send_bytes(mine.data(), kMsg), "sending our address");
      must(oob.recv_bytes(msg, kMsg), "reading the server's address");
      peer = parse_dest(msg);
      must(oob.send_bytes("done", sizeof done), "sending done");
      connect();
    }
    std::printf("  local address:  LID 0x0000, QPN 0x%06x, PSN 0x%06x, GID %s\n", qp->qp_num(), psn, gid.to_string().c_str());
    std::printf("  remote address: LID 0x0000, QPN 0x%06x, PSN 0x%06x, GID %s\n", peer.qpn, peer.psn,
                peer.gid.to_string().c_str());
  }
};

// The ping-pong itself; returns how many messages differed from what was expected.
class Exchange {
 public:
  explicit Exchange(Side& s) : s_(s), client_(!s.a.server.empty()), iters_(uint64_t(s.a.iters)) {}

  uint64_t run() {
    if (client_) send_next();
    // Like ibv_rc_pingpong: done when every message was received and every send completed.
    while (!settled()) {
      Wc wc[4];
      auto r = s_.cq->wait(wc, 10'000);
      if (!r || *r == 0)
        die("no completion for 10 s (sent " + std::to_string(sent_) + ", received " + std::to_string(received_) + ")");
      // Once settled, the rest of a batch is not the exchange's: after the error below, the QP
      // flushes the receives still posted.
      for (int k = 0; k < *r && !settled(); ++k) on_completion(wc[k]);
    }
    return bad_;
  }
  uint64_t received() const { return received_; }

 private:
  bool settled() const { return received_ == iters_ && send_done_ == iters_; }

  void send_next() {
    fill(s_.sbuf, s_.a.size, sent_);
    Sge sge{uint64_t(s_.sbuf.data()), uint32_t(s_.a.size), s_.smr->lkey()};
    SendWr w{1000 + sent_, WrOpcode::Send, kSendSignaled, {&sge, 1}};
    w.ah = &s_.peer_ah;
    w.remote_qpn = s_.peer.qpn;
    w.remote_qkey = kQkey;
    must(s_.qp->post_send(w), "post_send");
    ++sent_;
  }

  void on_completion(const Wc& wc) {
    if (wc.status != WcStatus::Success) {
      // The peer may leave as soon as it has everything; if the ACK of our last message was
      // lost, its retransmission finds nobody. Every message having been received (for a
      // client, the reply to that last message proves its delivery) settles the exchange.
      bool last = wc.wr_id == 1000 + iters_ - 1;
      if (last && wc.status == WcStatus::RetryExcErr && received_ == iters_) {
        std::printf("note: the peer left before acknowledging our last message\n");
        ++send_done_;
        return;
      }
      die(std::string("completion error ") + to_string(wc.status));
    }
    if (wc.opcode != WcOpcode::Recv) {
      ++send_done_;
      return;
    }
    check(s_.rbuf.data() + wc.wr_id * s_.slot + s_.grh, wc.byte_len);
    ++received_;
    s_.post_recv(wc.wr_id);
    if (sent_ < iters_) send_next();
  }

  // An ibv_rc_pingpong client starts with its initial buffer (0x7b bytes, --chk's page zeros)
  // and then echoes our previous message; a uroce-pingpong client sends fresh data, message k
  // being our pattern k. The first message says which.
  void check(const uint8_t* got, uint32_t byte_len) {
    size_t size = s_.a.size;
    if (byte_len != s_.slot) ++bad_;
    if (!client_ && received_ == 0) {
      fill(s_.expect, size, 0);
      peer_echoes_ = std::memcmp(got, s_.expect.data(), size) != 0;
      for (size_t i = 0; i < size; i += 4096) bad_ += got[i] != 0;
      for (size_t i = 0; peer_echoes_ && i < size; ++i) bad_ += (i % 4096) && got[i] != 0x7b;
      return;
    }
    fill(s_.expect, size, client_ || !peer_echoes_ ? received_ : received_ - 1);
    if (std::memcmp(got, s_.expect.data(), size) != 0) ++bad_;
  }

  Side& s_;
  const bool client_;
  const uint64_t iters_;
  uint64_t sent_ = 0, send_done_ = 0, received_ = 0, bad_ = 0;
  bool peer_echoes_ = true;
};

}  // namespace

int main(int argc, char** argv) {
  tool::set_program("uroce-pingpong", 1);
  Args a = parse_args(argc, argv);
  Side side(a);
  side.exchange();
  auto t0 = std::chrono::steady_clock::now();
  Exchange x(side);
  uint64_t bad = x.run();
  double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%zu bytes in %.2f seconds = %.2f Mbit/sec\n", a.size * size_t(a.iters) * 2, sec,
              double(a.size) * a.iters * 2 * 8 / sec / 1e6);
  std::printf("%d iters in %.2f seconds = %.2f usec/iter\n", a.iters, sec, sec * 1e6 / a.iters);
  std::printf("verified %llu messages: %s\n", (unsigned long long)x.received(), bad ? "MISMATCH" : "all bytes equal");
  return bad ? 1 : 0;
}
