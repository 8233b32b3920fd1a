// Two processes, each with its own uroce device on its own 127.0.0.x, connect an RC QP through
// the TCP helper and run every operation over real UDP. Data is checked byte for byte on both
// sides; the client's capture must decode in tshark as InfiniBand with the expected opcodes.
// A long-lived device meets short-lived peer processes and keeps nothing of them.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "../common/proc.hpp"
#include "../common/seed.hpp"
#include "uroce/oob.hpp"
#include "uroce/uroce.hpp"

using namespace uroce;
using namespace uroce::test;

namespace {

constexpr size_t kRegion = 1 << 20;
constexpr size_t kReadOff = 0, kReadLen = 64 * 1024;
constexpr size_t kWimmOff = 256 * 1024, kWimmLen = 20000;
constexpr size_t kWriteOff = 600 * 1024, kWriteLen = 100000;
constexpr size_t kAtomicOff = 512 * 1024;

#define CHILD_CHECK(c)                                                  \
  do {                                                                  \
    if (!(c)) {                                                         \
      std::fprintf(stderr, "server check failed: %s (line %d)\n", #c, __LINE__); \
      return 1;                                                         \
    }                                                                   \
  } while (0)

Wc wait_one(CompletionQueue& cq) {
  Wc wc[1];
  for (int i = 0; i < 2000; ++i) {
    auto r = cq.wait(wc, 10);
    if (r && *r == 1) return wc[0];
  }
  Wc none;
  none.status = WcStatus::GeneralErr;
  return none;
}

int server(uint16_t port) {
  auto dev = Device::open("uroce_lo");
  CHILD_CHECK(dev.ok());
  auto pd = (*dev)->alloc_pd();
  auto cq = (*dev)->create_cq(64);
  CHILD_CHECK(pd.ok() && cq.ok());
  std::vector<uint8_t> region(kRegion, 0), rbuf(4 * 65536, 0);
  fill_pattern(region.data() + kReadOff, kReadLen, 1000);
  uint64_t counter = 100;
  std::memcpy(region.data() + kAtomicOff, &counter, 8);
  auto mr = (*pd)->reg_mr(region.data(), region.size(),
                          kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic);
  auto rmr = (*pd)->reg_mr(rbuf.data(), rbuf.size(), kAccessLocalWrite);
  CHILD_CHECK(mr.ok() && rmr.ok());
  auto qp = (*pd)->create_qp({QpType::RC, cq->get(), cq->get(), {}, false});
  CHILD_CHECK(qp.ok());
  auto ch = OobChannel::accept("127.0.0.1", port, 20'000);
  CHILD_CHECK(ch.ok());
  Endpoint me{*(*dev)->query_gid(0), (*qp)->qp_num(), 0x123456, uint64_t(region.data()), (*mr)->rkey(), kRegion};
  auto peer = ch->exchange(me);
  CHILD_CHECK(peer.ok());
  CHILD_CHECK((*qp)->connect(*peer, me.psn));
  for (int i = 0; i < 3; ++i) {
    Sge s = (*rmr)->sge(size_t(i) * 65536, 65536);
    CHILD_CHECK((*qp)->post_recv({uint64_t(i), {&s, 1}}));
  }
  CHILD_CHECK(ch->barrier());
  std::vector<uint8_t> expect(65536);
  // 1: SEND 5000 B; 2: SEND_WITH_IMM 100 B; 3: RDMA WRITE_WITH_IMM 20000 B.
  Wc w = wait_one(**cq);
  CHILD_CHECK(w.status == WcStatus::Success && w.wr_id == 0 && w.byte_len == 5000 && !w.with_imm);
  fill_pattern(expect.data(), 5000, 1);
  CHILD_CHECK(std::memcmp(rbuf.data(), expect.data(), 5000) == 0);
  w = wait_one(**cq);
  CHILD_CHECK(w.status == WcStatus::Success && w.wr_id == 1 && w.byte_len == 100 && w.with_imm && w.imm_data == 0x42);
  fill_pattern(expect.data(), 100, 2);
  CHILD_CHECK(std::memcmp(rbuf.data() + 65536, expect.data(), 100) == 0);
  w = wait_one(**cq);
  CHILD_CHECK(w.status == WcStatus::Success && w.wr_id == 2 && w.opcode == WcOpcode::RecvRdmaWithImm &&
              w.byte_len == kWimmLen && w.imm_data == 0x43);
  fill_pattern(expect.data(), kWimmLen, 3);
  CHILD_CHECK(std::memcmp(region.data() + kWimmOff, expect.data(), kWimmLen) == 0);
  CHILD_CHECK(ch->barrier());  // the client now runs WRITE, READ and atomics
  CHILD_CHECK(ch->barrier());
  std::vector<uint8_t> wexp(kWriteLen);
  fill_pattern(wexp.data(), kWriteLen, 4);
  CHILD_CHECK(std::memcmp(region.data() + kWriteOff, wexp.data(), kWriteLen) == 0);
  std::memcpy(&counter, region.data() + kAtomicOff, 8);
  CHILD_CHECK(counter == 1234);  // 100 + 23 (FETCH_ADD), then CMP_SWAP 123 -> 1234
  CHILD_CHECK(ch->send_line("server-ok"));
  return 0;
}

struct ClientResult {
  std::string failure;
};

std::string run_client(uint16_t port, const std::string& pcap) {
  DeviceOptions o;
  o.pcap = pcap;
  auto dev = Device::open("uroce_lo", o);
  if (!dev) return "open: " + dev.error().message;
  auto pd = (*dev)->alloc_pd();
  auto cq = (*dev)->create_cq(64);
  std::vector<uint8_t> buf(kRegion, 0);
  auto mr = (*pd)->reg_mr(buf.data(), buf.size(), kAccessLocalWrite);
  auto qp = (*pd)->create_qp({QpType::RC, cq->get(), cq->get(), {}, false});
  if (!qp) return "create_qp: " + qp.error().message;
  auto ch = OobChannel::connect("127.0.0.1", port, 20'000);
  if (!ch) return "oob: " + ch.error().message;
  Endpoint me{*(*dev)->query_gid(0), (*qp)->qp_num(), 0xfffff0, 0, 0, 0};  // wraps during the run
  auto peer = ch->exchange(me);
  if (!peer) return "exchange: " + peer.error().message;
  if (Status s = (*qp)->connect(*peer, me.psn); !s) return "connect: " + s.error().message;
  if (!ch->barrier()) return "barrier";
  auto post = [&](SendWr w) -> std::string {
    Status s = (*qp)->post_send(w);
    if (!s) return "post_send: " + s.error().message;
    Wc wc = wait_one(**cq);
    if (wc.status != WcStatus::Success || wc.wr_id != w.wr_id)
      return std::string("completion ") + std::to_string(w.wr_id) + ": " + to_string(wc.status);
    return "";
  };
  std::string err;
  fill_pattern(buf.data(), 5000, 1);
  Sge s = (*mr)->sge(0, 5000);
  if (!(err = post({10, WrOpcode::Send, kSendSignaled, {&s, 1}})).empty()) return err;
  fill_pattern(buf.data(), 100, 2);
  s = (*mr)->sge(0, 100);
  if (!(err = post({11, WrOpcode::SendWithImm, kSendSignaled, {&s, 1}, 0x42})).empty()) return err;
  fill_pattern(buf.data(), kWimmLen, 3);
  s = (*mr)->sge(0, kWimmLen);
  SendWr w{12, WrOpcode::RdmaWriteWithImm, kSendSignaled, {&s, 1}, 0x43, peer->addr + kWimmOff, peer->rkey};
  if (!(err = post(w)).empty()) return err;
  if (!ch->barrier()) return "barrier 2";
  fill_pattern(buf.data(), kWriteLen, 4);
  s = (*mr)->sge(0, kWriteLen);
  w = {13, WrOpcode::RdmaWrite, kSendSignaled, {&s, 1}, 0, peer->addr + kWriteOff, peer->rkey};
  if (!(err = post(w)).empty()) return err;
  std::memset(buf.data(), 0, kReadLen);
  s = (*mr)->sge(0, kReadLen);
  w = {14, WrOpcode::RdmaRead, kSendSignaled, {&s, 1}, 0, peer->addr + kReadOff, peer->rkey};
  if (!(err = post(w)).empty()) return err;
  std::vector<uint8_t> rexp(kReadLen);
  fill_pattern(rexp.data(), kReadLen, 1000);
  if (std::memcmp(buf.data(), rexp.data(), kReadLen) != 0) return "READ data differs";
  s = (*mr)->sge(kRegion - 8, 8);
  w = {15, WrOpcode::AtomicFetchAdd, kSendSignaled, {&s, 1}, 0, peer->addr + kAtomicOff, peer->rkey, 23};
  if (!(err = post(w)).empty()) return err;
  uint64_t v;
  std::memcpy(&v, buf.data() + kRegion - 8, 8);
  if (v != 100) return "FETCH_ADD returned " + std::to_string(v);
  w = {16, WrOpcode::AtomicCmpSwp, kSendSignaled, {&s, 1}, 0, peer->addr + kAtomicOff, peer->rkey, 123, 1234};
  if (!(err = post(w)).empty()) return err;
  std::memcpy(&v, buf.data() + kRegion - 8, 8);
  if (v != 123) return "CMP_SWAP returned " + std::to_string(v);
  if (!ch->barrier()) return "barrier 3";
  auto ok = ch->recv_line();
  if (!ok || *ok != "server-ok") return "server did not confirm";
  auto c = (*dev)->counters();
  if (c["rx_bad_icrc"] || c["rx_malformed"]) return "bad packets received";
  return "";
}

std::string tmp_path(const char* name) { return std::string("/tmp/uroce-test-") + std::to_string(getpid()) + "-" + name; }

// A short-lived peer: when told, opens a device, connects a QP to the other end's, sends 100
// bytes through shared memory and exits at once, closing nothing itself (as a process that
// crashes: the kernel closes what it held).
int short_lived_peer(OobChannel& ch) {
  if (!ch.recv_line()) return 1;
  auto dev = Device::open("uroce_lo");
  if (!dev) return 2;
  auto pd = (*dev)->alloc_pd();
  auto cq = (*dev)->create_cq(16);
  if (!pd || !cq) return 3;
  std::vector<uint8_t> buf(100, 'p');
  auto mr = (*pd)->reg_mr(buf.data(), buf.size(), kAccessLocalWrite);
  auto qp = (*pd)->create_qp({QpType::RC, cq->get(), cq->get(), {}, false});
  if (!mr || !qp) return 4;
  Endpoint me{*(*dev)->query_gid(0), (*qp)->qp_num(), 1, 0, 0, 0};
  auto peer = ch.exchange(me);
  if (!peer || !(*qp)->connect(*peer, me.psn) || !ch.barrier()) return 5;  // its receive is posted
  Sge s = (*mr)->sge(0, 100);
  if (!(*qp)->post_send({1, WrOpcode::Send, kSendSignaled, {&s, 1}}) || wait_one(**cq).status != WcStatus::Success) return 6;
  _exit((*dev)->counters()["shm_tx_packets"] > 0 ? 0 : 7);
}

}  // namespace

TEST(TwoProcesses, EveryOpOverUdpLoopback) {
  uint16_t port = free_tcp_port();
  pid_t child = spawn([port] { return server(port); });
  std::string err = run_client(port, "");
  EXPECT_EQ(err, "");
  EXPECT_EQ(reap(child, 60), 0) << "server process failed (see stderr)";
}

TEST(TwoProcesses, CaptureDecodesInTshark) {
  if (system("command -v tshark >/dev/null 2>&1") != 0) FAIL() << "tshark is not installed (make test installs it)";
  uint16_t port = free_tcp_port();
  std::string pcap = tmp_path("cap.pcap");
  pid_t child = spawn([port] { return server(port); });
  ASSERT_EQ(run_client(port, pcap), "");
  ASSERT_EQ(reap(child, 60), 0);
  std::string out = tmp_path("tshark.txt");
  std::string cmd = "tshark -r " + pcap + " -T fields -e infiniband.bth.opcode -e _ws.malformed -e _ws.expert.severity > " + out + " 2>/dev/null";
  ASSERT_EQ(system(cmd.c_str()), 0);
  std::ifstream f(out);
  std::map<int, int> ops;
  std::string line;
  int lines = 0;
  while (std::getline(f, line)) {
    ++lines;
    std::istringstream is(line);
    std::string op, malformed;
    std::getline(is, op, '\t');
    std::getline(is, malformed, '\t');
    EXPECT_TRUE(malformed.empty()) << "malformed: " << line;
    ASSERT_FALSE(op.empty()) << "not decoded as InfiniBand: " << line;
    ops[std::stoi(op)]++;
  }
  EXPECT_GT(lines, 50);
  // SEND 5000 B at 4096 MTU: FIRST+LAST; SEND_ONLY_IMM; WRITE_ONLY_IMM; WRITE 100000 B:
  // FIRST, 23 MIDDLE, LAST; READ 64 KiB: request, FIRST, 14 MIDDLE, LAST; two atomics.
  EXPECT_EQ(ops[0], 1);   // SEND_FIRST
  EXPECT_EQ(ops[2], 1);   // SEND_LAST
  EXPECT_EQ(ops[5], 1);   // SEND_ONLY_IMM
  EXPECT_EQ(ops[6], 2);   // WRITE_FIRST (the 20000 B write-with-imm and the 100000 B write)
  EXPECT_EQ(ops[9], 1);   // WRITE_LAST_IMM
  EXPECT_EQ(ops[8], 1);   // WRITE_LAST
  EXPECT_EQ(ops[12], 1);  // READ_REQUEST
  EXPECT_EQ(ops[13], 1);  // READ_RESPONSE_FIRST
  EXPECT_EQ(ops[15], 1);  // READ_RESPONSE_LAST
  EXPECT_EQ(ops[14], 14); // READ_RESPONSE_MIDDLE
  EXPECT_EQ(ops[19], 1);  // COMPARE_SWAP
  EXPECT_EQ(ops[20], 1);  // FETCH_ADD
  EXPECT_EQ(ops[18], 2);  // ATOMIC_ACKNOWLEDGE
  EXPECT_GE(ops[17], 4);  // ACKNOWLEDGE
  // The two processes talked through shared memory, where the ICRC is left out; the capture
  // still shows every packet as a wire would carry it, ICRC included.
  std::string check = std::string(UROCE_BIN_DIR) + "/uroce-pcap-check " + pcap + " > /dev/null";
  EXPECT_EQ(system(check.c_str()), 0) << "bad ICRC or malformed packets in the capture";
  unlink(pcap.c_str());
  unlink(out.c_str());
}

// Two ends of one out-of-band channel across a fork: lines and endpoints go both ways, and
// the parent sees the child's end close when it exits.
TEST(TwoProcesses, AChannelPairCrossesAFork) {
  auto p = OobChannel::pair();
  ASSERT_TRUE(p);
  auto& [parent_end, child_end] = *p;
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto line = child_end.recv_line();
    bool ok = line && *line == "hello child" && child_end.send_line("hello parent");
    Endpoint mine{Gid::from_ipv4(0x7f000002), 0x1234, 77, 0x1000, 0x55, 4096};
    auto theirs = child_end.exchange(mine);
    ok = ok && theirs && theirs->qpn == 0x4321 && theirs->psn == 88;
    _exit(ok ? 0 : 1);
  }
  { OobChannel gone = std::move(child_end); }  // the parent holds only its own end
  ASSERT_TRUE(parent_end.send_line("hello child"));
  auto line = parent_end.recv_line();
  ASSERT_TRUE(line);
  EXPECT_EQ(*line, "hello parent");
  Endpoint mine{Gid::from_ipv4(0x7f000001), 0x4321, 88, 0x2000, 0x66, 8192};
  auto theirs = parent_end.exchange(mine);
  ASSERT_TRUE(theirs);
  EXPECT_EQ(theirs->qpn, 0x1234u);
  EXPECT_EQ(theirs->psn, 77u);
  EXPECT_EQ(theirs->rkey, 0x55u);
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  EXPECT_FALSE(parent_end.recv_line());  // the child's end is closed
}

// Both ends send their endpoints before reading the other's: 20000 each way is more than a
// socket pair buffers, and neither may wait on the other for ever. (The child gives up after
// 30 s; the parent then sees the channel close.)
TEST(TwoProcesses, ThousandsOfEndpointsGoBothWaysAtOnce) {
  auto p = OobChannel::pair();
  ASSERT_TRUE(p);
  auto& [parent_end, child_end] = *p;
  auto list = [](uint32_t base) {
    std::vector<Endpoint> v;
    for (uint32_t i = 0; i < 20000; ++i) v.push_back({Gid::from_ipv4(0x7f000001), base + i, i, 0, 7, 0});
    return v;
  };
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(30);
    auto got = child_end.exchange(list(100000));
    bool ok = got && got->size() == 20000 && (*got)[19999].qpn == 219999;
    _exit(ok ? 0 : 1);
  }
  { OobChannel gone = std::move(child_end); }
  auto got = parent_end.exchange(list(200000));
  ASSERT_TRUE(got);
  ASSERT_EQ(got->size(), 20000u);
  for (uint32_t i = 0; i < 20000; ++i) ASSERT_EQ((*got)[i].qpn, 100000 + i);
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

// Each peer process that connected and left takes its same-host channels with it: once the
// device has read what the peer sent, the channel's descriptors are closed and its ring
// unmapped. Peer after peer, the device holds what it held before the first (it used to keep
// 3 descriptors and 8.65 MB for every channel it ever had, and ran out of descriptors).
TEST(TwoProcesses, ChannelsOfPeersThatExitedAreFreed) {
  constexpr int kPeers = 12;
  // Every peer is forked now, before this process has an engine thread; each waits its turn.
  std::vector<OobChannel> ends;
  std::vector<pid_t> peers;
  for (int i = 0; i < kPeers; ++i) {
    auto p = OobChannel::pair();
    ASSERT_TRUE(p);
    peers.push_back(spawn([&p] {
      alarm(60);  // a parent that failed early never says go
      { OobChannel parents = std::move(p->first); }
      return short_lived_peer(p->second);
    }));
    ends.push_back(std::move(p->first));
  }
  auto dev = Device::open("uroce_lo");
  ASSERT_TRUE(dev);
  auto pd = std::move(*(*dev)->alloc_pd());
  auto cq = std::move(*(*dev)->create_cq(16));
  std::vector<uint8_t> buf(100 * kPeers);
  auto mr = std::move(*pd->reg_mr(buf.data(), buf.size(), kAccessLocalWrite));
  const int fds = open_fds();  // with the kPeers ends, closed one by one below
  for (int i = 0; i < kPeers; ++i) {
    SCOPED_TRACE("peer " + std::to_string(i));
    {
      auto qp = std::move(*pd->create_qp({QpType::RC, cq.get(), cq.get(), {}, false}));
      ASSERT_TRUE(ends[size_t(i)].send_line("go"));
      Endpoint me{*(*dev)->query_gid(0), qp->qp_num(), 1, 0, 0, 0};
      auto peer = ends[size_t(i)].exchange(me);
      ASSERT_TRUE(peer);
      ASSERT_TRUE(qp->connect(*peer, me.psn));
      Sge r = mr->sge(uint64_t(i) * 100, 100);
      ASSERT_TRUE(qp->post_recv({uint64_t(i), {&r, 1}}));
      ASSERT_TRUE(ends[size_t(i)].barrier());
      Wc w = wait_one(*cq);
      ASSERT_EQ(w.status, WcStatus::Success);
      ASSERT_EQ(buf[size_t(i) * 100 + 99], 'p');
      ASSERT_EQ(reap(peers[size_t(i)], 30), 0) << "the peer did not send through shared memory";
    }
    { OobChannel gone = std::move(ends[size_t(i)]); }
    const int want = fds - (i + 1);
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while ((open_fds() != want || mappings("/memfd:uroce-shm") != 0) && std::chrono::steady_clock::now() < end)
      (*dev)->flush(10);
    EXPECT_EQ(open_fds(), want) << "descriptors left by peers that exited";
    EXPECT_EQ(mappings("/memfd:uroce-shm"), 0) << "rings left by peers that exited";
  }
  EXPECT_GE((*dev)->counters()["shm_rx_packets"], uint64_t(kPeers));
}
