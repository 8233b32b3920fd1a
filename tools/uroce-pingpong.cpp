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

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "uroce/oob.hpp"
#include "uroce/uroce.hpp"

using namespace uroce;

namespace {

[[noreturn]] void die(const std::string& m) {
  std::fprintf(stderr, "uroce-pingpong: %s\n", m.c_str());
  std::exit(1);
}

constexpr size_t kMsg = sizeof "0000:000000:000000:00000000000000000000000000000000";  // with its NUL

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

}  // namespace

int main(int argc, char** argv) {
  int port = 18515, iters = 1000, gidx = 0;
  size_t size = 4096;
  std::optional<Mtu> mtu;  // ibv_*_pingpong's default, 1024, unless the port's is smaller
  QpType type = QpType::RC;
  int c;
  while ((c = getopt(argc, argv, "T:p:s:n:m:g:d:ec")) != -1) {
    switch (c) {
      case 'T':
        type = std::string(optarg) == "uc" ? QpType::UC : std::string(optarg) == "ud" ? QpType::UD : QpType::RC;
        break;
      case 'p': port = std::atoi(optarg); break;
      case 's': size = std::strtoul(optarg, nullptr, 0); break;
      case 'n': iters = std::atoi(optarg); break;
      case 'm': {
        int m = std::atoi(optarg);
        mtu = m == 256 ? Mtu::Mtu256 : m == 512 ? Mtu::Mtu512 : m == 2048 ? Mtu::Mtu2048 : m == 4096 ? Mtu::Mtu4096 : Mtu::Mtu1024;
        break;
      }
      case 'g': gidx = std::atoi(optarg); break;
      case 'd': case 'e': case 'c': break;  // accepted for ibv_rc_pingpong compatibility
      default: die("usage: uroce-pingpong [-T rc|uc|ud] [-p port] [-s size] [-n iters] [-m mtu] [-g gid-index] [server]");
    }
  }
  std::string server = optind < argc ? argv[optind] : "";
  if (size == 0 || size > (1u << 24)) die("size must be 1..16 MiB");

  auto dev = Device::open();
  if (!dev) die(dev.error().message);
  auto pd = std::move(*(*dev)->alloc_pd());
  auto cq = std::move(*(*dev)->create_cq(1024));
  const bool ud = type == QpType::UD;
  const size_t grh = ud ? kGrhBytes : 0, slot = size + grh;  // UD receives start with the GRH area
  constexpr uint32_t kQkey = 0x11111111;                      // ibv_ud_pingpong's
  std::vector<uint8_t> sbuf(size), rbuf(slot * 16), expect(size);
  auto smr = std::move(*pd->reg_mr(sbuf.data(), sbuf.size(), kAccessLocalWrite));
  auto rmr = std::move(*pd->reg_mr(rbuf.data(), rbuf.size(), kAccessLocalWrite));
  auto qp = std::move(*pd->create_qp({type, cq.get(), cq.get(), QpCap{16, 16, 1, 1, 0}, false}));
  auto my_gid = (*dev)->query_gid(gidx);
  if (!my_gid) die(my_gid.error().message);
  Gid gid = *my_gid;
  uint32_t psn = std::random_device{}() & 0xffffff;
  std::string mine = wire_dest(qp->qp_num(), psn, gid);

  Endpoint peer;
  ConnectOptions co;
  Mtu active = (*dev)->query_port().active_mtu;
  co.path_mtu = mtu ? *mtu : std::min(Mtu::Mtu1024, active);
  co.sgid_index = uint8_t(gidx);
  co.max_rd_atomic = co.max_dest_rd_atomic = 1;
  char msg[kMsg];
  auto connect_qp = [&] {
    Status st = ud ? qp->activate_ud(kQkey, psn) : qp->connect(peer, psn, co);
    if (!st) die("connect: " + st.error().message);
    for (uint64_t i = 0; i < 16; ++i) {
      Sge s{uint64_t(rbuf.data() + i * slot), uint32_t(slot), rmr->lkey()};
      if (!qp->post_recv({i, {&s, 1}})) die("post_recv");
    }
  };
  auto must = [](Status st, const char* what) {
    if (!st) die(std::string(what) + ": " + st.error().message);
  };
  // The client sends its address, the server answers with its own once its QP is ready, and
  // the client confirms with "done" (NUL included).
  auto oob = server.empty() ? OobChannel::accept("0.0.0.0", uint16_t(port))
                            : OobChannel::connect(server, uint16_t(port), 30'000);
  if (!oob) die(oob.error().message);
  char done[5];
  if (server.empty()) {
    must(oob->recv_bytes(msg, kMsg), "reading the client's address");
    peer = parse_dest(msg);
    connect_qp();
    must(oob->send_bytes(mine.data(), kMsg), "sending our address");
    must(oob->recv_bytes(done, sizeof done), "waiting for the client's done");
  } else {
    must(oob->send_bytes(mine.data(), kMsg), "sending our address");
    must(oob->recv_bytes(msg, kMsg), "reading the server's address");
    peer = parse_dest(msg);
    must(oob->send_bytes("done", sizeof done), "sending done");
    connect_qp();
  }
  std::printf("  local address:  LID 0x0000, QPN 0x%06x, PSN 0x%06x, GID %s\n", qp->qp_num(), psn, gid.to_string().c_str());
  std::printf("  remote address: LID 0x0000, QPN 0x%06x, PSN 0x%06x, GID %s\n", peer.qpn, peer.psn, peer.gid.to_string().c_str());

  bool client = !server.empty();
  Ah peer_ah{peer.gid};
  peer_ah.sgid_index = uint8_t(gidx);
  uint64_t sent = 0, send_done = 0, received = 0, bad = 0;
  bool peer_echoes = true;
  auto t0 = std::chrono::steady_clock::now();
  auto send_next = [&] {
    fill(sbuf, size, sent);
    Sge s{uint64_t(sbuf.data()), uint32_t(size), smr->lkey()};
    SendWr w{1000 + sent, WrOpcode::Send, kSendSignaled, {&s, 1}};
    w.ah = &peer_ah;
    w.remote_qpn = peer.qpn;
    w.remote_qkey = kQkey;
    if (Status st = qp->post_send(w); !st) die("post_send: " + st.error().message);
    ++sent;
  };
  if (client) send_next();
  // Like ibv_rc_pingpong: done when every message was received and every send completed.
  auto settled = [&] { return received == uint64_t(iters) && send_done == uint64_t(iters); };
  while (!settled()) {
    Wc wc[4];
    auto r = cq->wait(wc, 10'000);
    if (!r || *r == 0) die("no completion for 10 s (sent " + std::to_string(sent) + ", received " + std::to_string(received) + ")");
    // Once settled, the rest of a batch is not the exchange's: after the error below, the QP
    // flushes the receives still posted.
    for (int k = 0; k < *r && !settled(); ++k) {
      if (wc[k].status != WcStatus::Success) {
        // The peer may leave as soon as it has everything; if the ACK of our last message was
        // lost, its retransmission finds nobody. Every message having been received (for a
        // client, the reply to that last message proves its delivery) settles the exchange.
        bool last = wc[k].wr_id == 1000 + uint64_t(iters) - 1;
        if (last && wc[k].status == WcStatus::RetryExcErr && received == uint64_t(iters)) {
          std::printf("note: the peer left before acknowledging our last message\n");
          ++send_done;
          continue;
        }
        die(std::string("completion error ") + to_string(wc[k].status));
      }
      if (wc[k].opcode != WcOpcode::Recv) {
        ++send_done;
        continue;
      }
      uint8_t* got = rbuf.data() + wc[k].wr_id * slot + grh;
      if (wc[k].byte_len != slot) ++bad;
      // An ibv_rc_pingpong client starts with its initial buffer (0x7b bytes, --chk's page
      // zeros) and then echoes our previous message; a uroce-pingpong client sends fresh data,
      // message k being our pattern k. The first message says which.
      if (!client && received == 0) {
        fill(expect, size, 0);
        peer_echoes = std::memcmp(got, expect.data(), size) != 0;
        for (size_t i = 0; i < size; i += 4096) bad += got[i] != 0;
        for (size_t i = 0; peer_echoes && i < size; ++i) bad += (i % 4096) && got[i] != 0x7b;
      } else {
        fill(expect, size, client || !peer_echoes ? received : received - 1);
        if (std::memcmp(got, expect.data(), size) != 0) ++bad;
      }
      ++received;
      Sge s{uint64_t(got - grh), uint32_t(slot), rmr->lkey()};
      if (!qp->post_recv({wc[k].wr_id, {&s, 1}})) die("post_recv");
      if (sent < uint64_t(iters)) send_next();
    }
  }
  double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%zu bytes in %.2f seconds = %.2f Mbit/sec\n", size * size_t(iters) * 2, sec,
              double(size) * iters * 2 * 8 / sec / 1e6);
  std::printf("%d iters in %.2f seconds = %.2f usec/iter\n", iters, sec, sec * 1e6 / iters);
  std::printf("verified %llu messages: %s\n", (unsigned long long)received, bad ? "MISMATCH" : "all bytes equal");
  return bad ? 1 : 0;
}
