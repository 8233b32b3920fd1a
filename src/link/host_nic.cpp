#include "link/host_nic.hpp"

#include <dlfcn.h>
#include <poll.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "link/host_nic_proto.hpp"

extern char** environ;

namespace uroce::link {

namespace {

using namespace nicproto;

socklen_t daemon_name(sockaddr_un& a) {
  a = {};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path + 1, kName, sizeof kName - 1);  // abstract: a leading NUL
  return socklen_t(offsetof(sockaddr_un, sun_path) + sizeof kName);
}

int dial(int* err) {
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *err = errno;
    return -1;
  }
  sockaddr_un a;
  socklen_t len = daemon_name(a);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), len) != 0) {
    *err = errno;
    close(fd);
    return -1;
  }
  return fd;
}

// Runs the daemon; it detaches itself (its first process exits at once, reaped here).
Status start_daemon() {
  std::string path = daemon_path();
  if (path.empty()) return make_error(ENOENT, "the host NIC daemon (uroced) is not installed next to uroce");
  char* argv[] = {const_cast<char*>(path.c_str()), nullptr};
  pid_t pid;
  if (int rc = posix_spawn(&pid, path.c_str(), nullptr, nullptr, argv, environ); rc != 0)
    return make_error(rc, "cannot start " + path + ": " + std::strerror(rc));
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  return {};
}

// The daemon is trusted if it runs as this user or as root: anyone may take an abstract name.
Status check_daemon(int fd) {
  ucred cr{};
  socklen_t len = sizeof cr;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0) return make_error(errno, "host NIC: SO_PEERCRED failed");
  if (cr.uid != geteuid() && cr.uid != 0)
    return make_error(EACCES, "the host NIC name @" + std::string(kName) + " is held by uid " + std::to_string(cr.uid) +
                                  " (pid " + std::to_string(cr.pid) + "), neither this user nor root: not trusted "
                                  "(where several users share a host, root runs uroced --idle-s 0 before them)");
  return {};
}

}  // namespace

std::string daemon_path() {
  if (const char* e = std::getenv("UROCE_NICD"); e && *e) return e;
  Dl_info info{};
  std::vector<std::string> candidates;
  if (dladdr(reinterpret_cast<void*>(&daemon_path), &info) && info.dli_fname) {
    std::string self = info.dli_fname;
    if (self.find('/') == std::string::npos) {  // the main program, named by argv[0]: ask the kernel
      char buf[4096];
      ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
      self = n > 0 ? std::string(buf, size_t(n)) : std::string();
    }
    std::string dir = self.substr(0, self.rfind('/') + 1);
    candidates = {dir + "uroced", dir + "../bin/uroced"};
  }
#ifdef UROCE_BINDIR
  candidates.push_back(std::string(UROCE_BINDIR) + "/uroced");
#endif
  for (const std::string& c : candidates)
    if (access(c.c_str(), X_OK) == 0) return c;
  return {};
}

Result<std::unique_ptr<HostNicLease>> HostNicLease::attach(const Gid& addr) {
  // A daemon leaving (idle) as we connect drops our connection unanswered: the next try starts
  // a new one.
  for (int attempt = 0;; ++attempt) {
    auto l = attach_once(addr);
    if (l || attempt == 2 || l.error().code != EPIPE) return l;
  }
}

Result<std::unique_ptr<HostNicLease>> HostNicLease::attach_once(const Gid& addr) {
  int err = 0;
  int fd = dial(&err);
  if (fd < 0 && (err == ECONNREFUSED || err == ENOENT)) {
    if (Status s = start_daemon(); !s) return s.error();
    // Bounded: the daemon binds its name within milliseconds of starting.
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while ((fd = dial(&err)) < 0 && (err == ECONNREFUSED || err == ENOENT) && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (fd < 0) return make_error(err, std::string("cannot reach the host NIC daemon (uroced): ") + std::strerror(err));
  std::unique_ptr<HostNicLease> l(new HostNicLease);
  l->ctl_fd_ = fd;
  if (Status s = check_daemon(fd); !s) return s.error();
  Reply r;
  std::vector<int> fds;
  if (Status s = l->call(uint32_t(Op::Attach), 0, addr, &r, &fds); !s) {
    for (int f : fds) close(f);
    return s.error();
  }
  const size_t page = r.port_page ? 1 : 0;
  if (r.ngids == 0 || r.ngids > kMaxGids || fds.size() != (r.forwarded ? 1 : r.ngids + 1 + page) ||
      (r.forwarded && page) || r.port_page > (1u << 20)) {
    for (int f : fds) close(f);
    return make_error(EPROTO, "host NIC: a malformed answer to attach");
  }
  l->slot_ = r.slot;
  for (uint32_t i = 0; i < r.ngids; ++i) {
    Gid g;
    std::memcpy(g.raw.data(), r.gids[i], 16);
    l->gids_.push_back(g);
  }
  l->fwd_fd_ = fds[0];
  if (page) {
    void* m = mmap(nullptr, r.port_page, PROT_READ | PROT_WRITE, MAP_SHARED, fds[1], 0);
    close(fds[1]);
    if (m != MAP_FAILED) {
      l->port_page_ = m;
      l->port_bytes_ = r.port_page;
    }
  }
  l->rx_fds_.assign(fds.begin() + 1 + ptrdiff_t(page), fds.end());
  return l;
}

HostNicLease::~HostNicLease() {
  if (ctl_fd_ >= 0) close(ctl_fd_);
  if (fwd_fd_ >= 0) close(fwd_fd_);
  for (int f : rx_fds_) close(f);
  if (port_page_) munmap(port_page_, port_bytes_);
}

Status HostNicLease::call(uint32_t op, uint64_t arg, const Gid& addr, void* reply, std::vector<int>* fds) {
  std::lock_guard g(mu_);
  Request q;
  q.op = Op(op);
  q.arg = arg;
  std::memcpy(q.addr, addr.raw.data(), 16);
  if (send(ctl_fd_, &q, sizeof q, MSG_NOSIGNAL) != ssize_t(sizeof q))
    return make_error(EPIPE, "the host NIC daemon (uroced) is gone");
  pollfd p{ctl_fd_, POLLIN, 0};
  if (poll(&p, 1, 5000) != 1) return make_error(ETIMEDOUT, "the host NIC daemon (uroced) did not answer within 5 s");
  Reply& r = *static_cast<Reply*>(reply);
  iovec iov{&r, sizeof r};
  alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int) * (kMaxGids + 2))];
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = ctrl;
  m.msg_controllen = sizeof ctrl;
  ssize_t n = recvmsg(ctl_fd_, &m, MSG_CMSG_CLOEXEC);
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < k; ++i) {
        int f;
        std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
        if (fds) fds->push_back(f);
        else close(f);
      }
    }
  if (n != ssize_t(sizeof r) || r.op != Op::Reply) return make_error(EPIPE, "the host NIC daemon (uroced) is gone");
  r.text[sizeof r.text - 1] = 0;
  if (r.err) return make_error(r.err, r.text);
  return {};
}

Status HostNicLease::listen(uint64_t service_id) {
  Reply r;
  return call(uint32_t(Op::Listen), service_id, Gid{}, &r, nullptr);
}

void HostNicLease::unlisten(uint64_t service_id) {
  Reply r;
  (void)call(uint32_t(Op::Unlisten), service_id, Gid{}, &r, nullptr);
}

}  // namespace uroce::link
