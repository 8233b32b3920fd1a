// Placed payloads on the same-host link: a region registered in a shared file (memfd,
// /dev/shm) is found behind its address; its payloads travel as where they lie and arrive
// byte-exact through SEND, WRITE and READ, while private memory keeps the ring; a peer that
// names files it has no right to, or the wrong file, or bytes past its end, is refused and
// counted; and a peer that shrinks its file under a payload kills nobody.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/statfs.h>
#include <linux/magic.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../common/api_side.hpp"
#include "../common/seed.hpp"
#include "../common/shm_forged_peer.hpp"
#include "link/shared_regions.hpp"
#include "wire/packet.hpp"
#include "uroce/uroce.hpp"

using namespace uroce;

namespace {

constexpr size_t kBytes = 1 << 20;

// Memory in a memfd mapped shared, or on the heap.
struct Memory {
  uint8_t* p = nullptr;
  int fd = -1;
  std::vector<uint8_t> heap;
  explicit Memory(bool shared) {
    if (!shared) {
      heap.assign(kBytes, 0);
      p = heap.data();
      return;
    }
    fd = memfd_create("place_test", MFD_CLOEXEC);
    EXPECT_EQ(ftruncate(fd, kBytes), 0);
    p = static_cast<uint8_t*>(mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    EXPECT_NE(p, MAP_FAILED);
  }
  ~Memory() {
    if (fd >= 0) {
      munmap(p, kBytes);
      close(fd);
    }
  }
};

struct Side {
  Memory mem;
  std::unique_ptr<Device> dev;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> cq;
  std::unique_ptr<QueuePair> qp;
  std::unique_ptr<MemoryRegion> mr;
  explicit Side(bool shared) : mem(shared) {
    dev = std::move(*Device::open("uroce_lo"));
    pd = std::move(*dev->alloc_pd());
    cq = std::move(*dev->create_cq(256));
    qp = std::move(*pd->create_qp({QpType::RC, cq.get(), cq.get(), {}, false, nullptr}));
    mr = std::move(*pd->reg_mr(mem.p, kBytes, kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead));
  }
  Endpoint endpoint(uint32_t psn) { return {*dev->query_gid(0), qp->qp_num(), psn, uint64_t(mem.p), mr->rkey(), kBytes}; }
  uint64_t counter(const char* name) { return dev->counters()[name]; }
  Wc wait_one() { return test::wait_one(*cq); }
};

void connect(Side& a, Side& b) {
  ConnectOptions o;
  o.timeout = 18;  // nothing is lost here: a retransmission would be a thread not scheduled for 1 s
  ASSERT_TRUE(a.qp->connect(b.endpoint(3), 9, o));
  ASSERT_TRUE(b.qp->connect(a.endpoint(9), 3, o));
}

// A SEND, a WRITE and a READ of odd lengths between a and b, each checked byte for byte.
void traffic(Side& a, Side& b, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < kBytes; ++i) a.mem.p[i] = uint8_t(rng()), b.mem.p[i] = uint8_t(rng());
  const uint32_t len = 200'003;
  Sge r = b.mr->sge(1000, len);
  ASSERT_TRUE(b.qp->post_recv({1, {&r, 1}}));
  Sge s = a.mr->sge(12, len);
  ASSERT_TRUE(a.qp->post_send({2, WrOpcode::Send, kSendSignaled, {&s, 1}}));
  Wc rx = b.wait_one();
  ASSERT_EQ(rx.status, WcStatus::Success);
  ASSERT_EQ(rx.byte_len, len);
  ASSERT_EQ(a.wait_one().status, WcStatus::Success);
  ASSERT_EQ(std::memcmp(b.mem.p + 1000, a.mem.p + 12, len), 0);

  Sge w = a.mr->sge(300'000, 300'001);
  SendWr wr{3, WrOpcode::RdmaWrite, kSendSignaled, {&w, 1}};
  wr.remote_addr = uint64_t(b.mem.p) + 500'000;
  wr.rkey = b.mr->rkey();
  ASSERT_TRUE(a.qp->post_send(wr));
  ASSERT_EQ(a.wait_one().status, WcStatus::Success);
  ASSERT_EQ(std::memcmp(b.mem.p + 500'000, a.mem.p + 300'000, 300'001), 0);

  Sge rd = a.mr->sge(700'000, 250'000);
  SendWr rw{4, WrOpcode::RdmaRead, kSendSignaled, {&rd, 1}};
  rw.remote_addr = uint64_t(b.mem.p) + 4;
  rw.rkey = b.mr->rkey();
  ASSERT_TRUE(a.qp->post_send(rw));
  ASSERT_EQ(a.wait_one().status, WcStatus::Success);
  ASSERT_EQ(std::memcmp(a.mem.p + 700'000, b.mem.p + 4, 250'000), 0);
}

}  // namespace

TEST(SharedRegions, FindsTheFileBehindSharedMemoryOnly) {
  Memory shared(true);
  auto b = link::find_backing(shared.p + 8192, 4096);
  ASSERT_TRUE(b);
  struct stat st{};
  ASSERT_EQ(fstat(shared.fd, &st), 0);
  EXPECT_EQ(b->dev, uint64_t(st.st_dev));
  EXPECT_EQ(b->ino, uint64_t(st.st_ino));
  EXPECT_EQ(b->offset, 8192u);
  EXPECT_NE(b->fd, shared.fd);  // a descriptor of its own
  close(b->fd);
  EXPECT_FALSE(link::find_backing(shared.p + kBytes - 10, 20)) << "past the mapping's end";

  // A file in /dev/shm, mapped at an offset.
  const std::string name = "/uroce_place_test_" + std::to_string(getpid());
  int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0);
  std::unique_ptr<const std::string, void (*)(const std::string*)> unlink_at_end(
      &name, [](const std::string* n) { shm_unlink(n->c_str()); });
  ASSERT_EQ(ftruncate(fd, 3 * 4096), 0);
  auto* m = static_cast<uint8_t*>(mmap(nullptr, 2 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 4096));
  ASSERT_NE(m, MAP_FAILED);
  close(fd);  // found by its path, not by this descriptor
  b = link::find_backing(m + 100, 4000);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->offset, 4196u);
  close(b->fd);
  munmap(m, 2 * 4096);

  // A hugetlbfs memfd, where the machine has huge pages to give.
  int hfd = memfd_create("place_test_huge", MFD_CLOEXEC | MFD_HUGETLB);
  void* huge = MAP_FAILED;
  if (hfd >= 0 && ftruncate(hfd, 2 << 20) == 0)
    huge = mmap(nullptr, 2 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, hfd, 0);
  if (huge != MAP_FAILED && *static_cast<volatile uint8_t*>(huge) == 0) {  // the page taken
    b = link::find_backing(static_cast<uint8_t*>(huge) + 65536, 65536);
    ASSERT_TRUE(b) << "a hugetlbfs memfd";
    EXPECT_EQ(b->offset, 65536u);
    close(b->fd);
    munmap(huge, 2 << 20);
  } else {
    std::printf("no huge pages here: the hugetlbfs case is not run\n");
  }
  if (hfd >= 0) close(hfd);

  // Private memory of every kind has no file a peer could map.
  Memory heap(false);
  EXPECT_FALSE(link::find_backing(heap.p, 4096));
  void* anon = mmap(nullptr, 65536, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  EXPECT_FALSE(link::find_backing(anon, 4096)) << "shared anonymous memory: no file to open";
  munmap(anon, 65536);
  void* priv = mmap(nullptr, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE, shared.fd, 0);
  EXPECT_FALSE(link::find_backing(priv, 4096)) << "a private mapping of the file: copy on write";
  munmap(priv, 65536);
}

TEST(SameHostPlacement, PayloadsFromSharedFilesAreReadWhereTheyLie) {
  uint64_t seed = test::test_seed(41);
  SCOPED_TRACE("seed " + std::to_string(seed));
  Side a(true), b(true);
  connect(a, b);
  traffic(a, b, seed);
  // a's SEND and WRITE, b's READ responses: every full payload placed, every one taken.
  EXPECT_GT(a.counter("shm_tx_placed"), 100u);
  EXPECT_GT(b.counter("shm_tx_placed"), 50u);
  EXPECT_EQ(b.counter("shm_rx_placed"), a.counter("shm_tx_placed"));
  EXPECT_EQ(a.counter("shm_rx_placed"), b.counter("shm_tx_placed"));
  EXPECT_EQ(a.counter("shm_rx_placed_refused") + b.counter("shm_rx_placed_refused"), 0u);
  EXPECT_EQ(a.counter("retransmitted_packets") + b.counter("retransmitted_packets"), 0u);
  // The MIDDLE packets of a's SEND and WRITE (47 and 72) went as runs of up to 16, and b's
  // responder took them whole; b's READ responses went as runs too.
  EXPECT_GE(a.counter("shm_tx_runs"), 3u + 5u);
  EXPECT_GE(b.counter("shm_tx_runs"), 4u);
  EXPECT_EQ(a.counter("shm_rx_runs"), b.counter("shm_tx_runs"));
  EXPECT_EQ(b.counter("shm_rx_runs"), a.counter("shm_tx_runs"));
  EXPECT_EQ(b.counter("rx_runs_whole"), a.counter("shm_tx_runs"));
}

TEST(SameHostPlacement, PrivateMemoryKeepsTheRing) {
  uint64_t seed = test::test_seed(42);
  SCOPED_TRACE("seed " + std::to_string(seed));
  Side a(false), b(true);
  connect(a, b);
  traffic(a, b, seed);
  EXPECT_EQ(a.counter("shm_tx_placed"), 0u);    // a's memory is the heap's
  EXPECT_GT(b.counter("shm_tx_placed"), 50u);   // b's READ responses come from its memfd
  EXPECT_EQ(a.counter("shm_rx_placed"), b.counter("shm_tx_placed"));
}

namespace {

// Placed WRITEs from a forged peer to the victim's QP: the slot holds the descriptor, the BTH
// and RETH, and a zero ICRC (left out).
struct PlacedWriter {
  test::ForgedPeer& f;
  Gid victim;
  uint32_t qpn, rkey;
  uint64_t base;  // the victim's region
  uint32_t next = 0;

  // op: a WRITE opcode; dma_len: the RETH's length (0: the payload's).
  void send(link::shm::Placed d, uint32_t psn, uint64_t at, wire::Opcode op = wire::Opcode::RC_WRITE_ONLY,
            uint32_t dma_len = 0) {
    wire::Packet p;
    p.bth.opcode = op;
    p.bth.dest_qp = qpn;
    p.bth.psn = wire::Psn(psn);
    p.bth.ack_req = true;
    p.reth = {base + at, rkey, dma_len ? dma_len : d.len};
    link::shm::Slot& s = f.area->ring[0].slots[next % link::shm::kSlots];
    const size_t hdr = wire::encode_headers(p, s.data + sizeof d);
    if (d.at == 0) d.at = uint32_t(hdr);
    std::memcpy(s.data, &d, sizeof d);
    std::memset(s.data + sizeof d + hdr, 0, wire::kIcrcLen);
    s.len = uint32_t(sizeof d + hdr + wire::kIcrcLen) | link::shm::kSlotPlaced | link::shm::kSlotNoIcrc;
    test::ForgedPeer::address(s, victim);
    s.seq.store(++next, std::memory_order_release);
    f.wake();
  }
};

}  // namespace

// A peer that names what is not its shared file (the wrong inode, a pipe, /dev/null, a
// descriptor it does not have, bytes past the file's end, a payload outside the slot) is
// refused and counted, and nothing reaches the transport; the victim goes on. A peer that
// shrinks its file under a payload the victim already mapped reads as zeros there and kills
// nobody; grown again, the file is mapped anew and read right.
TEST(SameHostPlacement, ForgedDescriptorsAreRefusedAndAShrunkFileKillsNobody) {
  Side victim(false);
  test::ForgedPeer f(*victim.dev->query_gid(0), /*sealed=*/true);
  ASSERT_EQ(f.answer, 'Y');
  constexpr uint32_t kTakes = link::shm::kTakesPlaced | link::shm::kTakesRuns;
  ASSERT_EQ(f.area->ring[0].takes_placed.load(), kTakes) << "the victim can open our files: it says so";
  ConnectOptions o;
  o.timeout = 18;
  ASSERT_TRUE(victim.qp->connect({Gid::from_ipv4(0x7f0000fe), 0x123, 100, 0, 0, 0}, 500, o));
  std::memset(victim.mem.p, 0xaa, kBytes);

  constexpr size_t kFile = 65536;
  Memory file(true);  // 1 MiB memfd: the forged peer's payloads, its first 64 KiB in use
  ASSERT_EQ(ftruncate(file.fd, kFile), 0);
  for (size_t i = 0; i < kFile; ++i) file.p[i] = uint8_t(i * 7 + 1);
  struct stat st{};
  ASSERT_EQ(fstat(file.fd, &st), 0);
  const link::shm::Placed good{uint64_t(st.st_dev), uint64_t(st.st_ino), 0, file.fd, 0, 4096, 0};
  PlacedWriter w{f, *victim.dev->query_gid(0), victim.qp->qp_num(), victim.mr->rkey(), uint64_t(victim.mem.p)};
  auto until = [&](const char* counter, uint64_t want) {
    Wc wc[4];
    for (int i = 0; i < 20000 && victim.counter(counter) != want; ++i) (void)victim.cq->wait(wc, 1);
    return victim.counter(counter);
  };

  // Refused before any file of the peer is mapped: the victim maps a file by its identity once,
  // and a descriptor that names that identity again is read from the same mapping.
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  std::vector<link::shm::Placed> bad(5, good);
  bad[0].ino += 1;               // another file than the one named
  bad[1].fd = pipefd[0];         // not a file
  bad[2].fd = devnull;           // a device
  bad[3].offset = kFile - 2048;  // past the file's end
  bad[4].fd = 1 << 20;           // no such descriptor
  // A regular file on no tmpfs or hugetlbfs device (this program, where it is on a disk).
  int exe = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  struct statfs efs{};
  struct stat est{};
  if (exe >= 0 && fstatfs(exe, &efs) == 0 && efs.f_type != TMPFS_MAGIC && fstat(exe, &est) == 0) {
    bad.push_back({uint64_t(est.st_dev), uint64_t(est.st_ino), 0, exe, 0, 4096, 0});
  } else {
    std::printf("this program lies on tmpfs: the case of a file elsewhere is not run\n");
  }
  for (size_t i = 0; i < bad.size(); ++i) {
    w.send(bad[i], 100, 0);
    EXPECT_EQ(until("shm_rx_placed_refused", i + 1), i + 1) << "descriptor " << i;
    // Told to copy from now on; asked again a second after the first refusal (the pauses
    // after more in a row are longer).
    EXPECT_EQ(f.area->ring[0].takes_placed.load(), 0u) << "descriptor " << i;
    if (i == 0) {
      Wc wc[4];
      for (int k = 0; k < 5000 && f.area->ring[0].takes_placed.load() == 0; ++k) (void)victim.cq->wait(wc, 1);
      EXPECT_EQ(f.area->ring[0].takes_placed.load(), kTakes) << "placed payloads taken again after the pause";
    }
  }
  link::shm::Placed outside = good;
  outside.at = 4000;  // the payload would start past the slot's bytes
  w.send(outside, 100, 0);
  EXPECT_EQ(until("shm_rx_malformed", 1), 1u);
  EXPECT_EQ(victim.counter("rx_packets"), 0u) << "nothing refused reached the transport";
  EXPECT_EQ(victim.mem.p[0], 0xaa);
  close(pipefd[0]);
  close(pipefd[1]);
  close(devnull);
  if (exe >= 0) close(exe);

  w.send(good, 100, 0);
  ASSERT_EQ(until("shm_rx_placed", 1), 1u);
  ASSERT_EQ(until("rx_packets", 1), 1u);
  EXPECT_EQ(std::memcmp(victim.mem.p, file.p, 4096), 0);

  // Shrunk under the victim's mapping: the victim's copy of the next payload reads zeros.
  ASSERT_EQ(ftruncate(file.fd, 0), 0);
  w.send(good, 101, 8192);
  ASSERT_EQ(until("shm_rx_placed", 2), 2u);
  ASSERT_EQ(until("rx_packets", 2), 2u);
  EXPECT_EQ(std::vector<uint8_t>(victim.mem.p + 8192, victim.mem.p + 8192 + 4096), std::vector<uint8_t>(4096, 0));
  // Grown and written again: mapped anew, read right.
  ASSERT_EQ(ftruncate(file.fd, kFile), 0);
  for (size_t i = 0; i < kFile; ++i) file.p[i] = uint8_t(i * 3 + 5);
  w.send(good, 102, 16384);
  ASSERT_EQ(until("shm_rx_placed", 3), 3u);
  ASSERT_EQ(until("rx_packets", 3), 3u);
  EXPECT_EQ(std::memcmp(victim.mem.p + 16384, file.p, 4096), 0);
  EXPECT_EQ(victim.counter("rx_malformed"), 0u);
  EXPECT_EQ(victim.counter("shm_rx_placed_refused"), bad.size());
}

// Runs of placed packets from a forged peer: more packets than a run may hold, a length that
// does not divide among them, packets shorter than a placed payload are refused as malformed
// before anything reaches the transport; a good run lands as its packets.
TEST(SameHostPlacement, ForgedRunsAreCheckedBeforeTheTransportSeesThem) {
  Side victim(false);
  test::ForgedPeer f(*victim.dev->query_gid(0), /*sealed=*/true);
  ASSERT_EQ(f.answer, 'Y');
  ConnectOptions o;
  o.timeout = 18;
  ASSERT_TRUE(victim.qp->connect({Gid::from_ipv4(0x7f0000fe), 0x123, 100, 0, 0, 0}, 500, o));
  std::memset(victim.mem.p, 0xaa, kBytes);
  constexpr size_t kFile = 65536;
  Memory file(true);
  ASSERT_EQ(ftruncate(file.fd, kFile), 0);
  for (size_t i = 0; i < kFile; ++i) file.p[i] = uint8_t(i * 5 + 3);
  struct stat st{};
  ASSERT_EQ(fstat(file.fd, &st), 0);
  auto placed = [&](uint64_t offset, uint32_t len, uint32_t packets) {
    return link::shm::Placed{uint64_t(st.st_dev), uint64_t(st.st_ino), offset, file.fd, 0, len, packets};
  };
  PlacedWriter w{f, *victim.dev->query_gid(0), victim.qp->qp_num(), victim.mr->rkey(), uint64_t(victim.mem.p)};
  auto until = [&](const char* counter, uint64_t want) {
    Wc wc[4];
    for (int i = 0; i < 20000 && victim.counter(counter) != want; ++i) (void)victim.cq->wait(wc, 1);
    return victim.counter(counter);
  };
  w.send(placed(0, 4096, 1), 100, 0, wire::Opcode::RC_WRITE_FIRST, 4 * 4096);
  ASSERT_EQ(until("rx_packets", 1), 1u);
  constexpr auto kMiddle = wire::Opcode::RC_WRITE_MIDDLE;
  w.send(placed(4096, (wire::kMaxRunPackets + 1) * 4096, wire::kMaxRunPackets + 1), 101, 0, kMiddle);
  w.send(placed(4096, 3 * 4096 + 4, 3), 101, 0, kMiddle);
  w.send(placed(4096, 2 * 1024, 2), 101, 0, kMiddle);
  EXPECT_EQ(until("shm_rx_malformed", 3), 3u);
  EXPECT_EQ(victim.counter("rx_packets"), 1u) << "nothing refused reached the transport";
  EXPECT_EQ(victim.counter("shm_rx_placed_refused"), 0u) << "refused before any file was looked at";

  w.send(placed(4096, 2 * 4096, 2), 101, 0, kMiddle);
  w.send(placed(3 * 4096, 4096, 1), 103, 0, wire::Opcode::RC_WRITE_LAST);
  ASSERT_EQ(until("rx_packets", 4), 4u);
  EXPECT_EQ(victim.counter("shm_rx_runs"), 1u);
  EXPECT_EQ(victim.counter("rx_runs_whole"), 1u);
  EXPECT_EQ(victim.counter("shm_rx_placed"), 4u);
  EXPECT_EQ(std::memcmp(victim.mem.p, file.p, 4 * 4096), 0);
  EXPECT_EQ(victim.mem.p[4 * 4096], 0xaa);
  EXPECT_EQ(victim.counter("rx_malformed") + victim.counter("tx_naks_fatal"), 0u);
}

// The handler that turns a shrunk peer file into zeros leaves every other SIGBUS as it was: a
// program's own read past the end of its own shrunk mapping still ends it.
TEST(SameHostPlacement, ASigbusOfTheProgramsOwnStillEndsIt) {
  const std::string style = GTEST_FLAG_GET(death_test_style);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  {
    Side a(true), b(true);
    connect(a, b);
    traffic(a, b, test::test_seed(43));  // b maps a's file: the handler is there
    ASSERT_GT(b.counter("shm_rx_placed"), 0u);
  }
  auto own_sigbus = [] {
    int fd = memfd_create("own", MFD_CLOEXEC);
    if (ftruncate(fd, 8192) != 0) _exit(3);
    auto* m = static_cast<volatile uint8_t*>(mmap(nullptr, 8192, PROT_READ, MAP_SHARED, fd, 0));
    if (ftruncate(fd, 0) != 0) _exit(4);
    (void)m[4096];
    _exit(0);
  };
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer's handler was there before ours: it gets the fault, says so and ends the
  // process (an exit, or an abort with abort_on_error).
  auto ended = [](int status) {
    return (WIFEXITED(status) && WEXITSTATUS(status) == 1) || (WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
  };
  EXPECT_EXIT(own_sigbus(), ended, "AddressSanitizer: BUS");
#else
  EXPECT_EXIT(own_sigbus(), testing::KilledBySignal(SIGBUS), "");
  // A SIGBUS someone sends names no access: it does what it did before, here end the process.
  EXPECT_EXIT(raise(SIGBUS), testing::KilledBySignal(SIGBUS), "");
#endif
  GTEST_FLAG_SET(death_test_style, style);
}

// More in flight than the ring holds (two QPs, each with a ring's worth): what waits behind it
// waits as slots, and is placed too.
TEST(SameHostPlacement, WhatWaitsForRoomIsPlacedToo) {
  uint64_t seed = test::test_seed(44);
  SCOPED_TRACE("seed " + std::to_string(seed));
  Side a(true), b(true);
  connect(a, b);
  auto qa = std::move(*a.pd->create_qp({QpType::RC, a.cq.get(), a.cq.get(), {}, false, nullptr}));
  auto qb = std::move(*b.pd->create_qp({QpType::RC, b.cq.get(), b.cq.get(), {}, false, nullptr}));
  ConnectOptions o;
  o.timeout = 18;
  ASSERT_TRUE(qa->connect({*b.dev->query_gid(0), qb->qp_num(), 1, 0, 0, 0}, 2, o));
  ASSERT_TRUE(qb->connect({*a.dev->query_gid(0), qa->qp_num(), 2, 0, 0, 0}, 1, o));
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < kBytes; ++i) a.mem.p[i] = uint8_t(rng());
  constexpr int kWrites = 8;  // per QP, 256 packets of 4 KiB each: 4096 in all, 4 rings' worth
  const size_t half = kBytes / 2;
  for (int i = 0; i < kWrites; ++i)
    for (int q = 0; q < 2; ++q) {
      Sge w = a.mr->sge(q * half, uint32_t(half));
      SendWr wr{uint64_t(i), WrOpcode::RdmaWrite, kSendSignaled, {&w, 1}};
      wr.remote_addr = uint64_t(b.mem.p) + q * half;
      wr.rkey = b.mr->rkey();
      ASSERT_TRUE((q ? qa : a.qp)->post_send(wr));
    }
  for (int i = 0; i < 2 * kWrites; ++i) ASSERT_EQ(a.wait_one().status, WcStatus::Success) << "WRITE " << i;
  EXPECT_EQ(std::memcmp(b.mem.p, a.mem.p, kBytes), 0);
  const uint64_t packets = 2 * kWrites * (half / 4096);
  EXPECT_EQ(a.counter("shm_tx_placed"), packets);
  EXPECT_EQ(b.counter("shm_rx_placed"), packets);
  EXPECT_EQ(a.counter("shm_tx_full_drops"), 0u);
}

// UC requests complete once sent, and their buffers are the program's again: their payloads
// are never placed, even from a shared file.
TEST(SameHostPlacement, UnreliableRequestsAreNeverPlaced) {
  uint64_t seed = test::test_seed(45);
  SCOPED_TRACE("seed " + std::to_string(seed));
  Side a(true), b(true);
  auto qa = std::move(*a.pd->create_qp({QpType::UC, a.cq.get(), a.cq.get(), {}, false, nullptr}));
  auto qb = std::move(*b.pd->create_qp({QpType::UC, b.cq.get(), b.cq.get(), {}, false, nullptr}));
  ASSERT_TRUE(qa->connect({*b.dev->query_gid(0), qb->qp_num(), 1, 0, 0, 0}, 2));
  ASSERT_TRUE(qb->connect({*a.dev->query_gid(0), qa->qp_num(), 2, 0, 0, 0}, 1));
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < kBytes; ++i) a.mem.p[i] = uint8_t(rng());
  Sge w = a.mr->sge(0, 300'000);
  SendWr wr{1, WrOpcode::RdmaWriteWithImm, kSendSignaled, {&w, 1}};
  wr.remote_addr = uint64_t(b.mem.p) + 4096;
  wr.rkey = b.mr->rkey();
  Sge r = b.mr->sge(0, 16);
  ASSERT_TRUE(qb->post_recv({7, {&r, 1}}));
  ASSERT_TRUE(qa->post_send(wr));
  ASSERT_EQ(a.wait_one().status, WcStatus::Success);
  ASSERT_EQ(b.wait_one().status, WcStatus::Success);
  EXPECT_EQ(std::memcmp(b.mem.p + 4096, a.mem.p, 300'000), 0);
  EXPECT_GT(a.counter("tx_payload_by_ref"), 70u);
  EXPECT_EQ(a.counter("shm_tx_placed"), 0u);
}

// This process's read-only shared mappings of files named `name`, and the largest of them.
static size_t windows_of(const char* name, size_t* largest = nullptr) {
  FILE* maps = std::fopen("/proc/self/maps", "re");
  if (!maps) return 0;
  char line[512];
  size_t windows = 0;
  while (std::fgets(line, sizeof line, maps)) {
    uintptr_t lo = 0, hi = 0;
    char perms[8] = {};
    if (std::strstr(line, name) && std::sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 &&
        std::strcmp(perms, "r--s") == 0) {
      ++windows;
      if (largest) *largest = std::max<size_t>(*largest, hi - lo);
    }
  }
  std::fclose(maps);
  return windows;
}

// A file larger than the window the receiver maps: payloads far into it, and one across two
// windows, arrive byte-exact from windows of it; windows left unused go.
TEST(SameHostPlacement, LargeFilesAreMappedByWindows) {
  constexpr size_t kLarge = size_t(130) << 20;  // sparse: only what is written takes memory
  int fd = memfd_create("place_test_large", MFD_CLOEXEC);
  ASSERT_EQ(ftruncate(fd, kLarge), 0);
  auto* big = static_cast<uint8_t*>(mmap(nullptr, kLarge, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  ASSERT_NE(big, MAP_FAILED);
  Side a(true), b(true);
  auto mr = std::move(*a.pd->reg_mr(big, kLarge, kAccessLocalWrite));
  connect(a, b);
  const size_t at[] = {size_t(100) << 20, (size_t(64) << 20) - 2048, size_t(129) << 20};
  std::mt19937_64 rng(test::test_seed(46));
  for (size_t k = 0; k < 3; ++k) {
    for (size_t i = 0; i < 65536; ++i) big[at[k] + i] = uint8_t(rng());
    Sge w = mr->sge(at[k], 65536);
    SendWr wr{k, WrOpcode::RdmaWrite, kSendSignaled, {&w, 1}};
    wr.remote_addr = uint64_t(b.mem.p) + k * 65536;
    wr.rkey = b.mr->rkey();
    ASSERT_TRUE(a.qp->post_send(wr));
    ASSERT_EQ(a.wait_one().status, WcStatus::Success);
    EXPECT_EQ(std::memcmp(b.mem.p + k * 65536, big + at[k], 65536), 0) << "at " << at[k];
  }
  EXPECT_EQ(b.counter("shm_rx_placed"), 3 * 16u);
  EXPECT_EQ(b.counter("shm_rx_placed_refused"), 0u);
  // b's mappings of the file (read-only, shared): windows, none of it whole.
  size_t largest = 0;
  EXPECT_GE(windows_of("place_test_large", &largest), 2u);
  EXPECT_LE(largest, size_t(128) << 20);
  // a lets the file go; b's windows, idle, go by themselves within seconds (they would keep
  // its pages allocated), though no packet comes to wake b's engine.
  mr.reset();
  munmap(big, kLarge);
  close(fd);
  const auto start = std::chrono::steady_clock::now();
  size_t left = 1;
  for (int i = 0; i < 200 && (left = windows_of("place_test_large")) > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(left, 0u) << "windows still mapped after 10 s";
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1500)) << "not while still in use";
}

// Many regions in one file hold one descriptor between them, kept until the last goes.
TEST(SharedRegions, RegionsOfOneFileShareADescriptor) {
  Memory shared(true);
  link::SharedRegions r;
  std::vector<link::SharedRegions::Entry> e;
  int keys[3];
  for (int i = 0; i < 3; ++i) r.add(&keys[i], shared.p + size_t(i) * 65536, 65536);
  r.snapshot(e);
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[1].backing.fd, e[0].backing.fd);
  EXPECT_EQ(e[2].backing.fd, e[0].backing.fd);
  EXPECT_EQ(e[2].backing.offset, 2 * 65536u);
  const int fd = e[0].backing.fd;
  r.remove(&keys[0]);
  r.remove(&keys[2]);
  struct stat st{}, mine{};
  ASSERT_EQ(fstat(shared.fd, &mine), 0);
  ASSERT_EQ(fstat(fd, &st), 0) << "still open for the region left";
  EXPECT_EQ(st.st_ino, mine.st_ino);
  r.remove(&keys[1]);
  EXPECT_TRUE(fstat(fd, &st) != 0 || st.st_ino != mine.st_ino) << "closed with the last";
  r.add(&keys[0], shared.p, 4096);  // below kMinSharedRegion: not looked up
  r.snapshot(e);
  EXPECT_TRUE(e.empty());
}

// A region left registered while its addresses are mapped again from another file, or from
// private memory, names its file no more once a later registration covers them: a payload
// there is found in the new region's file, or in none. Regions whose addresses still lie where
// they say stay.
TEST(SharedRegions, ARegionWhoseMemoryWasMappedAgainPlacesNothing) {
  Memory one(true), two(true);
  link::SharedRegions r;
  std::vector<link::SharedRegions::Entry> e;
  struct stat st_two{};
  ASSERT_EQ(fstat(two.fd, &st_two), 0);
  int keys[4];
  r.add(&keys[0], one.p, 2 * 65536);
  r.add(&keys[1], one.p + 4 * 65536, 65536);
  r.add(&keys[2], one.p + 65536, 65536);  // the same file at the same place: nothing changed
  r.snapshot(e);
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(link::backing_of(e, one.p + 100, 4000), &e[0]);

  // two's file where the first region lies, and a registration of it there.
  ASSERT_NE(mmap(one.p, 2 * 65536, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, two.fd, 65536), MAP_FAILED);
  const uint64_t gen = r.generation();
  r.add(&keys[3], one.p, 65536);
  EXPECT_NE(r.generation(), gen);
  r.snapshot(e);
  ASSERT_EQ(e.size(), 4u);
  EXPECT_TRUE(e[0].stale);
  // Its addresses hold two's bytes too, but no new region covers them: a work request there
  // comes through its own region, which keeps the memory it was registered with (as a NIC's
  // translation does).
  EXPECT_FALSE(e[2].stale);
  EXPECT_FALSE(e[1].stale) << "not touched";
  const auto* found = link::backing_of(e, one.p + 100, 4000);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->key, &keys[3]);
  EXPECT_EQ(found->backing.ino, uint64_t(st_two.st_ino));
  EXPECT_EQ(found->backing.offset, 65536u);
  EXPECT_EQ(link::backing_of(e, one.p + 65536 + 100, 4000), &e[2]);
  EXPECT_EQ(link::backing_of(e, one.p + 4 * 65536, 4096), &e[1]);

  // Private memory there, registered small (not kept itself): the new region goes stale too.
  ASSERT_NE(mmap(one.p, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0), MAP_FAILED);
  int small;
  r.add(&small, one.p, 4096);
  r.snapshot(e);
  EXPECT_TRUE(e[3].stale);
  EXPECT_EQ(link::backing_of(e, one.p + 100, 4000), nullptr);
  for (int& k : keys) r.remove(&k);
  r.snapshot(e);
  EXPECT_TRUE(e.empty());
}

// An honest pair where the receiver cannot read the sender's file (here its descriptor names
// /dev/null by then): the one packet refused is sent again, copied, and the data arrives whole.
TEST(SameHostPlacement, ARefusalCostsAResendNotTheData) {
  uint64_t seed = test::test_seed(47);
  SCOPED_TRACE("seed " + std::to_string(seed));
  Side a(true), b(true);
  connect(a, b);
  std::vector<link::SharedRegions::Entry> regions;
  link::shared_regions().snapshot(regions);
  auto mine = std::find_if(regions.begin(), regions.end(), [&](const auto& e) { return e.addr == a.mem.p; });
  ASSERT_NE(mine, regions.end());
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(dup2(devnull, mine->backing.fd), 0);
  close(devnull);
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < kBytes; ++i) a.mem.p[i] = uint8_t(rng());
  Sge w = a.mr->sge(0, 65536);
  SendWr wr{1, WrOpcode::RdmaWrite, kSendSignaled, {&w, 1}};
  wr.remote_addr = uint64_t(b.mem.p);
  wr.rkey = b.mr->rkey();
  ASSERT_TRUE(a.qp->post_send(wr));
  ASSERT_EQ(a.wait_one().status, WcStatus::Success);
  EXPECT_EQ(std::memcmp(b.mem.p, a.mem.p, 65536), 0);
  EXPECT_GE(b.counter("shm_rx_placed_refused"), 1u);
  EXPECT_GE(a.counter("retransmitted_packets"), 1u);
}
