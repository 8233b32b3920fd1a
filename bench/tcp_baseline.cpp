// Kernel TCP over loopback, measured the way uroce-perf measures RDMA: ping-pong half round
// trip for latency, one-way streaming for bandwidth. Two processes. Prints one JSON line.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using Clock = std::chrono::steady_clock;

static bool full_io(int fd, void* p, size_t n, bool rd) {
  auto* b = static_cast<uint8_t*>(p);
  while (n) {
    ssize_t r = rd ? read(fd, b, n) : write(fd, b, n);
    if (r <= 0) return false;
    b += r;
    n -= size_t(r);
  }
  return true;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: tcp_baseline lat|bw SIZE ITERS\n");
    return 2;
  }
  bool lat = std::string(argv[1]) == "lat";
  size_t size = std::strtoul(argv[2], nullptr, 0);
  long iters = std::strtol(argv[3], nullptr, 0);
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(0x7f000001);
  bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t al = sizeof a;
  getsockname(ls, reinterpret_cast<sockaddr*>(&a), &al);
  listen(ls, 1);
  pid_t pid = fork();
  std::vector<uint8_t> buf(size, 0x5a);
  int one = 1;
  if (pid == 0) {
    int fd = accept(ls, nullptr, nullptr);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    for (long i = 0; i < iters; ++i) {
      if (!full_io(fd, buf.data(), size, true)) _exit(1);
      if (lat && !full_io(fd, buf.data(), size, false)) _exit(1);
    }
    if (!lat) full_io(fd, buf.data(), 1, false);
    _exit(0);
  }
  close(ls);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return 1;
  std::vector<double> lats;
  auto t0 = Clock::now();
  for (long i = 0; i < iters; ++i) {
    auto s = Clock::now();
    full_io(fd, buf.data(), size, false);
    if (lat) {
      full_io(fd, buf.data(), size, true);
      lats.push_back(std::chrono::duration<double, std::micro>(Clock::now() - s).count() / 2);
    }
  }
  if (!lat) full_io(fd, buf.data(), 1, true);
  double sec = std::chrono::duration<double>(Clock::now() - t0).count();
  int st;
  waitpid(pid, &st, 0);
  double p50 = 0, p99 = 0;
  if (!lats.empty()) {
    std::sort(lats.begin(), lats.end());
    p50 = lats[lats.size() / 2];
    p99 = lats[size_t(double(lats.size() - 1) * 0.99)];
  }
  std::printf("{\"op\":\"tcp\",\"mode\":\"%s\",\"size\":%zu,\"iters\":%ld,\"lat_p50_us\":%.3f,\"lat_p99_us\":%.3f,"
              "\"bw_gbps\":%.4f}\n",
              lat ? "lat" : "bw", size, iters, p50, p99, double(size) * double(iters) * 8 / sec / 1e9);
  return 0;
}
