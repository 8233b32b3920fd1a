#include "link/shared_files.hpp"

#include <fcntl.h>
#include <linux/memfd.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace uroce::link::shared_files {

namespace {

// ---- devices

std::mutex g_devs_mu;
std::vector<uint64_t> g_devs;
std::chrono::steady_clock::time_point g_devs_read{};

void add_memfd_device(unsigned flags) {
  int fd = memfd_create("uroce-device", MFD_CLOEXEC | flags);
  struct stat st{};
  if (fd >= 0 && fstat(fd, &st) == 0) g_devs.push_back(uint64_t(st.st_dev));
  if (fd >= 0) close(fd);
}

void read_devices() {
  g_devs.clear();
  add_memfd_device(0);
  add_memfd_device(MFD_HUGETLB);
  add_memfd_device(MFD_HUGETLB | MFD_HUGE_1GB);
  // "36 35 98:0 /root /mnt opts ... - tmpfs source opts": the device, and after " - " the type.
  FILE* f = std::fopen("/proc/self/mountinfo", "re");
  if (!f) return;
  char line[4096];
  while (std::fgets(line, sizeof line, f)) {
    unsigned maj = 0, min = 0;
    const char* sep = std::strstr(line, " - ");
    if (!sep || std::sscanf(line, "%*u %*u %u:%u", &maj, &min) != 2) continue;
    if (std::strncmp(sep + 3, "tmpfs ", 6) == 0 || std::strncmp(sep + 3, "hugetlbfs ", 10) == 0)
      g_devs.push_back(makedev(maj, min));
  }
  std::fclose(f);
}

// ---- guarded mappings

constexpr size_t kMaxGuarded = 4096;  // mappings guarded at once in the process, all channels (16 each)
// A slot's seq is odd while it is rewritten: the handler takes start and end only between two
// equal even reads of it.
struct Guarded {
  std::atomic<uint32_t> seq{0};
  std::atomic<uintptr_t> start{0}, end{0};
};
Guarded g_guarded[kMaxGuarded];
std::mutex g_guarded_mu;  // who rewrites slots (the handler only reads)
std::atomic<uint64_t> g_zeroed{0};
struct sigaction g_before;  // what SIGBUS did before: what is not ours goes there

bool zero_if_guarded(uintptr_t a) {
  for (Guarded& g : g_guarded) {
    const uint32_t s1 = g.seq.load(std::memory_order_acquire);
    if (s1 & 1) continue;
    const uintptr_t start = g.start.load(std::memory_order_relaxed), end = g.end.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (g.seq.load(std::memory_order_relaxed) != s1 || !start || a < start || a >= end) continue;
    void* r = mmap(reinterpret_cast<void*>(start), end - start, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (r == MAP_FAILED) return false;
    g_zeroed.fetch_add(1, std::memory_order_release);
    return true;
  }
  return false;
}

void on_sigbus(int sig, siginfo_t* info, void* ctx) {
  // si_code > 0: a fault the kernel raised, not a signal someone sent (which names no access).
  if (info->si_code > 0 && zero_if_guarded(reinterpret_cast<uintptr_t>(info->si_addr))) return;
  if (g_before.sa_flags & SA_SIGINFO) {
    if (g_before.sa_sigaction) g_before.sa_sigaction(sig, info, ctx);
    return;
  }
  if (g_before.sa_handler == SIG_IGN && info->si_code <= 0) return;  // a signal sent, ignored as before
  if (g_before.sa_handler != SIG_IGN && g_before.sa_handler != SIG_DFL) {
    g_before.sa_handler(sig);
    return;
  }
  // The default action: a fault, once the access is done again, ends the process as it would
  // have; a signal sent is sent again.
  signal(SIGBUS, SIG_DFL);
  if (info->si_code <= 0) raise(SIGBUS);
}

}  // namespace

bool shared_file_device(uint64_t dev) {
  std::lock_guard g(g_devs_mu);
  if (std::find(g_devs.begin(), g_devs.end(), dev) != g_devs.end()) return true;
  const auto now = std::chrono::steady_clock::now();
  if (now - g_devs_read < std::chrono::seconds(1)) return false;
  g_devs_read = now;
  read_devices();
  return std::find(g_devs.begin(), g_devs.end(), dev) != g_devs.end();
}

bool identify(int fd, FileId& id) {
  struct statx stx{};
  if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE | STATX_INO | STATX_SIZE, &stx) != 0 ||
      !S_ISREG(stx.stx_mode))
    return false;
  id = {makedev(stx.stx_dev_major, stx.stx_dev_minor), stx.stx_ino, stx.stx_size, stx.stx_blksize};
  return true;
}

int open_shared(const char* path, bool follow, uint64_t dev, uint64_t ino, uint64_t min_size, FileId& id) {
  if (!shared_file_device(dev)) return -1;
  const int at = open(path, O_PATH | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
  if (at < 0) return -1;
  int fd = -1;
  if (identify(at, id) && id.dev == dev && id.ino == ino && id.size >= min_size)
    fd = open(("/proc/self/fd/" + std::to_string(at)).c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  close(at);
  FileId again;
  if (fd >= 0 && (!identify(fd, again) || again.dev != dev || again.ino != ino)) {
    close(fd);
    fd = -1;
  }
  return fd;
}

bool guard(const uint8_t* p, size_t n) {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa{};
    sa.sa_sigaction = on_sigbus;
    // Not blocked in the handler (it returns or chains, never jumps), and system calls it
    // interrupts start again, as without it.
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &g_before);
  });
  std::lock_guard g(g_guarded_mu);
  for (Guarded& s : g_guarded)
    if (s.start.load(std::memory_order_relaxed) == 0) {
      s.seq.fetch_add(1, std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_release);  // the odd count before the new values
      s.end.store(reinterpret_cast<uintptr_t>(p) + n, std::memory_order_relaxed);
      s.start.store(reinterpret_cast<uintptr_t>(p), std::memory_order_relaxed);
      s.seq.fetch_add(1, std::memory_order_release);
      return true;
    }
  return false;
}

void unmap(const uint8_t* p, size_t n) {
  {
    std::lock_guard g(g_guarded_mu);
    for (Guarded& s : g_guarded)
      if (s.start.load(std::memory_order_relaxed) == reinterpret_cast<uintptr_t>(p)) {
        s.seq.fetch_add(1, std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_release);
        s.start.store(0, std::memory_order_relaxed);
        s.end.store(0, std::memory_order_relaxed);
        s.seq.fetch_add(1, std::memory_order_release);
        break;
      }
  }
  munmap(const_cast<uint8_t*>(p), n);
}

uint64_t zeroed() { return g_zeroed.load(std::memory_order_acquire); }

}  // namespace uroce::link::shared_files
