// Which copy should carry a large payload between two processes on one host: the receiver
// reading it straight out of the sender's memory with process_vm_readv (one copy, in the
// kernel), or the shared-memory ring (the sender copies into a slot, the receiver out of it:
// one memcpy on each side, the two sides running in parallel)? The receiver's cost decides:
// per size, one process_vm_readv against one memcpy of the same bytes. Beside them, pread from
// a memfd: how a receiver would copy out of a peer's shared file without mapping it (a mapping
// the peer shrinks turns a read past its new end into SIGBUS; a read is only cut short).
//
// usage: copy_paths [iterations per size]     prints one JSON line
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 2000;
  const std::vector<size_t> sizes = {4096, 16384, 65536, 262144, 1 << 20, 4 << 20};
  const size_t region = 32 << 20;  // messages rotate through up to 64 slots of it, as a stream's buffers do
  std::vector<char> src(region, 1);
  int go[2];
  if (pipe(go) != 0) return 1;
  pid_t peer = fork();  // the sender: its memory is what the receiver reads
  if (peer == 0) {
    char b;
    (void)!read(go[0], &b, 1);
    _exit(0);
  }
  std::vector<char> dst(region, 2);  // after fork(): no copy-on-write faults in the timing
  const int memfd = memfd_create("copy_paths", MFD_CLOEXEC);
  if (memfd < 0 || pwrite(memfd, src.data(), region, 0) != ssize_t(region)) return 1;
  std::printf("{\"rows\":[");
  bool permitted = true;
  for (size_t k = 0; k < sizes.size(); ++k) {
    const size_t z = sizes[k], slots = std::min<size_t>(region / z, 64);
    double pvm = -1;
    if (permitted) {
      auto t0 = Clock::now();
      for (int i = -int(slots); i < iters; ++i) {  // one pass over the slots first, untimed
        if (i == 0) t0 = Clock::now();
        size_t off = (size_t(i + int(slots)) % slots) * z;
        iovec l{dst.data() + off, z}, r{src.data() + off, z};
        if (process_vm_readv(peer, &l, 1, &r, 1, 0) != ssize_t(z)) {
          permitted = false;  // ptrace rules say no: the ring is the only path
          break;
        }
      }
      if (permitted) pvm = us_since(t0) / iters;
    }
    auto t1 = Clock::now();
    for (int i = -int(slots); i < iters; ++i) {
      if (i == 0) t1 = Clock::now();
      size_t off = (size_t(i + int(slots)) % slots) * z;
      std::memcpy(dst.data() + off, src.data() + off, z);
    }
    double cpy = us_since(t1) / iters;
    auto t2 = Clock::now();
    for (int i = -int(slots); i < iters; ++i) {
      if (i == 0) t2 = Clock::now();
      size_t off = (size_t(i + int(slots)) % slots) * z;
      if (pread(memfd, dst.data() + off, z, off_t(off)) != ssize_t(z)) return 1;
    }
    double prd = us_since(t2) / iters;
    std::printf("%s{\"size\":%zu,\"process_vm_readv_us\":%.3f,\"memcpy_us\":%.3f,\"pread_memfd_us\":%.3f}", k ? "," : "",
                z, pvm, cpy, prd);
  }
  std::printf("],\"process_vm_readv_permitted\":%s}\n", permitted ? "true" : "false");
  close(memfd);
  (void)!write(go[1], "x", 1);
  waitpid(peer, nullptr, 0);
  return 0;
}
