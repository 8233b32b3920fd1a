#include "uroce/oob.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <thread>

namespace uroce {

namespace {

Result<sockaddr_in> resolve(const std::string& host, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &a.sin_addr) == 1) return a;
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res)
    return make_error(EHOSTUNREACH, "cannot resolve " + host);
  a.sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return a;
}

std::string sys_error(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

}  // namespace

OobChannel& OobChannel::operator=(OobChannel&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
    buf_ = std::move(o.buf_);
  }
  return *this;
}

OobChannel::~OobChannel() {
  if (fd_ >= 0) close(fd_);
}

Result<std::pair<OobChannel, OobChannel>> OobChannel::pair() {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return make_error(errno, sys_error("socketpair"));
  return std::pair<OobChannel, OobChannel>(OobChannel(fds[0]), OobChannel(fds[1]));
}

Result<OobChannel> OobChannel::accept(const std::string& host, uint16_t port, int timeout_ms) {
  auto a = resolve(host, port);
  if (!a) return a.error();
  int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(ls, reinterpret_cast<sockaddr*>(&*a), sizeof *a) != 0 || listen(ls, 1) != 0) {
    Error e = make_error(errno, sys_error(("listen on " + host + ":" + std::to_string(port)).c_str()));
    close(ls);
    return e;
  }
  pollfd p{ls, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) <= 0) {
    close(ls);
    return make_error(ETIMEDOUT, "no peer connected to " + host + ":" + std::to_string(port));
  }
  int fd = ::accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
  close(ls);
  if (fd < 0) return make_error(errno, sys_error("accept"));
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return OobChannel(fd);
}

Result<OobChannel> OobChannel::connect(const std::string& host, uint16_t port, int timeout_ms) {
  auto a = resolve(host, port);
  if (!a) return a.error();
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&*a), sizeof *a) == 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return OobChannel(fd);
    }
    int err = errno;
    close(fd);
    if (std::chrono::steady_clock::now() > end)
      return make_error(err, "cannot connect to " + host + ":" + std::to_string(port) + ": " + std::strerror(err));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

Status OobChannel::send_bytes(const void* p, size_t n) {
  // Both ends of an exchange send first and read after: while our send waits for room, take
  // in what the peer sends, or two large sends (thousands of endpoints) would wait on each
  // other forever once both sockets' buffers are full.
  auto* b = static_cast<const char*>(p);
  while (n) {
    ssize_t k = ::send(fd_, b, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      b += k;
      n -= size_t(k);
      continue;
    }
    if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return make_error(errno, sys_error("out-of-band send"));
    pollfd pf{fd_, POLLOUT | POLLIN, 0};
    if (poll(&pf, 1, -1) < 0 && errno != EINTR) return make_error(errno, sys_error("out-of-band poll"));
    if ((pf.revents & POLLIN) && !(pf.revents & POLLOUT))
      if (Status s = fill_buffer(); !s) return s;
  }
  return {};
}

Status OobChannel::send_line(const std::string& s) {
  std::string l = s + "\n";
  return send_bytes(l.data(), l.size());
}

Status OobChannel::fill_buffer() {
  char tmp[4096];
  ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
  if (n <= 0) return make_error(n == 0 ? ECONNRESET : errno, "out-of-band peer closed the connection");
  buf_.append(tmp, size_t(n));
  return {};
}

Result<std::string> OobChannel::recv_line() {
  for (;;) {
    if (auto nl = buf_.find('\n'); nl != std::string::npos) {
      std::string l = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      return l;
    }
    if (Status s = fill_buffer(); !s) return s.error();
  }
}

Status OobChannel::recv_bytes(void* p, size_t n) {
  while (buf_.size() < n)
    if (Status s = fill_buffer(); !s) return s;
  std::memcpy(p, buf_.data(), n);
  buf_.erase(0, n);
  return {};
}

Result<std::vector<Endpoint>> OobChannel::exchange(const std::vector<Endpoint>& mine) {
  if (Status s = send_line("uroce-endpoints " + std::to_string(mine.size())); !s) return s.error();
  for (const Endpoint& e : mine) {
    char line[256];
    std::snprintf(line, sizeof line, "%s %u %u %" PRIu64 " %u %" PRIu64, e.gid.to_string().c_str(), e.qpn, e.psn,
                  e.addr, e.rkey, e.len);
    if (Status s = send_line(line); !s) return s.error();
  }
  auto head = recv_line();
  if (!head) return head.error();
  unsigned n = 0;
  if (std::sscanf(head->c_str(), "uroce-endpoints %u", &n) != 1 || n > 65536)
    return make_error(EPROTO, "out-of-band peer sent a bad header: " + *head);
  std::vector<Endpoint> out;
  for (unsigned i = 0; i < n; ++i) {
    auto l = recv_line();
    if (!l) return l.error();
    char gid[64];
    Endpoint e;
    unsigned long long addr = 0, len = 0;
    if (std::sscanf(l->c_str(), "%63s %u %u %llu %u %llu", gid, &e.qpn, &e.psn, &addr, &e.rkey, &len) != 6)
      return make_error(EPROTO, "out-of-band peer sent a bad endpoint: " + *l);
    auto g = Gid::parse(gid);
    if (!g) return make_error(EPROTO, std::string("bad GID from out-of-band peer: ") + gid);
    e.gid = *g;
    e.addr = addr;
    e.len = len;
    out.push_back(e);
  }
  return out;
}

Result<Endpoint> OobChannel::exchange(const Endpoint& mine) {
  auto v = exchange(std::vector<Endpoint>{mine});
  if (!v) return v.error();
  if (v->size() != 1) return make_error(EPROTO, "out-of-band peer sent " + std::to_string(v->size()) + " endpoints, expected 1");
  return (*v)[0];
}

Status OobChannel::barrier() {
  if (Status s = send_line("sync"); !s) return s;
  auto l = recv_line();
  if (!l) return l.error();
  if (*l != "sync") return make_error(EPROTO, "out-of-band peer is out of step: " + *l);
  return {};
}

}  // namespace uroce
