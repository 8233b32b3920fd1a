// The bound for large WRITEs between two processes on one host: a stream of messages whose
// bytes cross from one core to the other with one memcpy each. A producer process writes each
// message into the next of 64 rotating slots of shared memory (a memset of the whole message,
// so its lines are dirty in the producer's cache, as the ring's slots are after the sender's
// copy into them); a consumer process on the other core copies each slot whole into its own
// buffer, checks it and frees the slot. uroce's ring makes two copies (the sender's into a
// slot, the receiver's out of it) on two cores at once; pipelined perfectly, the receiver's
// copy of lines the sender just wrote, this one, is what bounds it.
//
// With "two", the producer copies each message from a private buffer of its own (as uroce's
// sender copies from its registered memory into the ring's slots, 4 KiB at a time) instead of
// writing it in place: two copies pipelined on two cores with no protocol around them, the
// most any design that copies twice can reach here.
//
// usage: copy_stream SIZE [BYTES] [two]     prints one JSON line: {"size":..,"gbps":..}
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Control {
  alignas(64) std::atomic<uint64_t> produced;  // messages handed out
  alignas(64) std::atomic<uint64_t> consumed;  // messages copied out (their slots free again)
};

// Spins until ready() (true), or gives up after 10 s without it (false): a peer that died.
template <class Ready>
bool wait_for(Ready ready) {
  const auto end = Clock::now() + std::chrono::seconds(10);
  for (uint32_t spin = 0; !ready(); ++spin)
    if ((spin & 0xffff) == 0 && Clock::now() > end) return false;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: copy_stream SIZE [BYTES] [two]\n");
    return 2;
  }
  const size_t size = std::strtoull(argv[1], nullptr, 10);
  const double bytes = argc > 2 ? std::strtod(argv[2], nullptr) : 4e9;
  const bool two = argc > 3 && std::strcmp(argv[3], "two") == 0;
  if (size < 16 || size > (4u << 20) || (argc > 3 && !two)) return 2;  // its stamp: 8 bytes and the last
  const size_t slots = 64;  // in flight, each in a buffer of its own on both sides: as uroce-perf's WRITE stream
  const uint64_t warm = slots, n = std::max<uint64_t>(2 * slots, uint64_t(bytes / double(size)));
  void* mem = mmap(nullptr, sizeof(Control) + slots * size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return 1;
  auto* ctl = new (mem) Control{};
  auto* ring = static_cast<uint8_t*>(mem) + sizeof(Control);
  std::memset(ring, 1, slots * size);
  std::vector<uint8_t> dst(slots * size, 2);
  pid_t producer = fork();
  if (producer < 0) return 1;
  if (producer == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    std::vector<uint8_t> src(two ? slots * size : 0, 3);  // the sender's registered memory
    for (uint64_t i = 0; i < warm + n; ++i) {
      if (!wait_for([&] { return i - ctl->consumed.load(std::memory_order_acquire) < slots; })) _exit(1);
      uint8_t* slot = ring + (i % slots) * size;
      if (two) {
        uint8_t* from = src.data() + (i % slots) * size;  // its stamp: the only bytes that change
        std::memcpy(from, &i, sizeof i);
        from[size - 1] = uint8_t(i);
        for (size_t at = 0; at < size; at += 4096) std::memcpy(slot + at, from + at, std::min<size_t>(4096, size - at));
      } else {
        std::memset(slot, uint8_t(i), size);
        std::memcpy(slot, &i, sizeof i);
      }
      ctl->produced.store(i + 1, std::memory_order_release);
    }
    _exit(0);
  }
  bool ok = true;
  auto t0 = Clock::now();
  for (uint64_t i = 0; i < warm + n; ++i) {
    if (i == warm) t0 = Clock::now();
    if (!wait_for([&] { return ctl->produced.load(std::memory_order_acquire) > i; })) {
      std::fprintf(stderr, "copy_stream: the producer stopped at message %llu\n", static_cast<unsigned long long>(i));
      kill(producer, SIGKILL);
      waitpid(producer, nullptr, 0);
      return 1;
    }
    uint8_t* out = dst.data() + (i % slots) * size;
    std::memcpy(out, ring + (i % slots) * size, size);
    uint64_t seq;
    std::memcpy(&seq, out, sizeof seq);
    ok &= seq == i && out[size - 1] == uint8_t(i);
    ctl->consumed.store(i + 1, std::memory_order_release);
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  waitpid(producer, nullptr, 0);
  if (!ok) {
    std::fprintf(stderr, "copy_stream: a message was overwritten before it was copied\n");
    return 1;
  }
  std::printf("{\"size\":%zu,\"messages\":%llu,\"gbps\":%.3f}\n", size, static_cast<unsigned long long>(n),
              double(n) * double(size) * 8 / s / 1e9);
  return 0;
}
