// uroced: the host NIC daemon (src/nicd/daemon.hpp). Started by the first process that opens
// a shared device; it detaches itself, and leaves once no process has used it for --idle-s
// seconds (10; 0: never, for a daemon root starts at boot so that every user shares it).
// Another daemon already serving this network namespace: exits 0 at once.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "nicd/daemon.hpp"

int main(int argc, char** argv) {
  bool foreground = false;
  uint64_t idle_s = 10;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--foreground") {
      foreground = true;
    } else if (a == "--idle-s" && i + 1 < argc) {
      idle_s = std::strtoull(argv[++i], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: uroced [--foreground] [--idle-s N]\n");
      return 2;
    }
  }
  auto d = uroce::nicd::Daemon::open();
  if (!d) {
    if (d.error().code == EADDRINUSE) return 0;  // one is serving already
    std::fprintf(stderr, "%s\n", d.error().message.c_str());
    return 1;
  }
  signal(SIGPIPE, SIG_IGN);
  if (!foreground) {
    // The name is bound already: whoever started us may connect as soon as we return.
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid > 0) _exit(0);
    setsid();
    if (chdir("/") != 0) {}
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
      dup2(null, 0);
      dup2(null, 1);
      dup2(null, 2);
    }
  }
  return (*d)->run(idle_s * 1000);
}
