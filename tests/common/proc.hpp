// Runs a function in a child process (forked before any engine thread exists) and waits for
// it with a time limit. Children report through their exit code. And what a process holds:
// its descriptors and mappings, and a same-host registry name.
#pragma once
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

namespace uroce::test {

inline pid_t spawn(const std::function<int()>& fn) {
  pid_t pid = fork();
  if (pid == 0) _exit(fn());
  return pid;
}

// Exit code of the child, or -1 if it had to be killed after timeout_s.
inline int reap(pid_t pid, int timeout_s) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  int st = 0;
  while (waitpid(pid, &st, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > end) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// A TCP port that was free a moment ago, for an out-of-band channel.
inline uint16_t free_tcp_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(0x7f000001);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t l = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &l);
  close(fd);
  return ntohs(a.sin_port);
}

// Descriptors this process holds (not counting the one that lists them).
inline int open_fds() {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n - 1;
}

// RLIMIT_NOFILE bounds descriptor numbers, not their count: fills the gaps below the highest
// open descriptor (with /dev/null), so that a limit of open_fds() + n leaves exactly n free.
inline void fill_fd_gaps() {
  int highest = -1;
  if (DIR* d = opendir("/proc/self/fd")) {
    const int own = dirfd(d);
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.' && std::atoi(e->d_name) != own) highest = std::max(highest, std::atoi(e->d_name));
    closedir(d);
  }
  for (int fd = open("/dev/null", O_RDONLY | O_CLOEXEC); fd >= 0; fd = open("/dev/null", O_RDONLY | O_CLOEXEC))
    if (fd > highest) {
      close(fd);
      break;
    }
}

// Mappings of this process whose line in /proc/self/maps contains `what` (a same-host ring is
// "/memfd:uroce-shm").
inline int mappings(const char* what) {
  std::ifstream f("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(f, line);) n += line.find(what) != std::string::npos;
  return n;
}

// A socket on the same-host name of a device at addr with steering slot `slot`, as uid's
// ("uroce-shm/<uid>/<addr>/<slot>" in the abstract namespace), that listens and never accepts: what a stopped device looks like,
// or someone who took the name first. -1 if the name is taken.
inline int hold_registry_name(const std::string& addr, uid_t uid = getuid(), uint32_t slot = 0) {
  int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const std::string name = "uroce-shm/" + std::to_string(uid) + "/" + addr + "/" + std::to_string(slot);
  std::memcpy(a.sun_path + 1, name.data(), name.size());
  const auto len = socklen_t(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (s >= 0 && (bind(s, reinterpret_cast<sockaddr*>(&a), len) != 0 || listen(s, 64) != 0)) {
    close(s);
    s = -1;
  }
  return s;
}

}  // namespace uroce::test
