// rsockets: rpoll and rselect over rsockets and ordinary descriptors together. An rsocket is
// ready by its CQ (connected), its cm id's channel (connecting, listening) or its state; the
// wait is one poll() over the CQ channels, cm channels and the program's own fds.
#include <poll.h>
#include <sys/select.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "compat/rsocket/rsocket.hpp"

namespace uroce::compat::rs {
namespace {
constexpr int kRecheckMs = 500;  // a bound on each sleep, so a missed wakeup costs no more

bool poll_all(Socket*) { return true; }
bool is_armed(Socket* s) { return s->cq_armed; }
bool has_cq(const Socket* s) { return (s->state & kConnected) || s->state == kDisconnected || s->state == kError; }

short poll_socket(Socket* s, short events, bool nonblock, Test test) {
  if ((s->state & kOpening) && do_connect(s)) {
    if (errno == EINPROGRESS) return 0;
  }
  if (has_cq(s)) {
    process_cq(s, nonblock, test);
    short rev = 0;
    if ((events & POLLIN) && (has_rdata(s) || !(s->state & kReadable))) rev |= POLLIN;
    if ((events & POLLOUT) && can_send(s)) rev |= POLLOUT;
    // A peer's close is a hang-up once its data has been read, as TCP reports it: a program
    // that treats POLLHUP as the end would otherwise lose what came before it.
    if (!(s->state & kConnected) && !(s->state == kDisconnected && has_rdata(s)))
      rev |= s->state == kDisconnected ? POLLHUP : POLLERR;
    return rev;
  }
  if (s->state == kListening) {  // a request waits on the channel
    pollfd p{s->id->channel->fd, POLLIN, 0};
    return poll(&p, 1, 0) > 0 ? short(events & POLLIN) : 0;
  }
  if (s->state == kConnectError) return short((events & (POLLIN | POLLOUT)) | POLLERR);
  return 0;
}

// Every descriptor once, without waiting: how many are ready.
int check(pollfd* fds, nfds_t n) {
  int cnt = 0;
  for (nfds_t i = 0; i < n; ++i) {
    if (Socket* s = lookup(fds[i].fd))
      fds[i].revents = poll_socket(s, fds[i].events, true, poll_all);
    else
      poll(&fds[i], 1, 0);
    cnt += fds[i].revents != 0;
  }
  return cnt;
}
}  // namespace
}  // namespace uroce::compat::rs

using namespace uroce::compat::rs;

extern "C" {

int rpoll(pollfd* fds, nfds_t nfds, int timeout) {
  uint64_t start = now_us();
  for (;;) {
    int cnt = check(fds, nfds);
    if (cnt || timeout == 0) return cnt;
    if (now_us() - start > kSpinUs) break;
  }
  // Two slots each: an rsocket's CQ channel and cm channel, or the program's fd alone.
  std::vector<pollfd> w(2 * nfds);
  for (;;) {
    bool ready = false;
    for (nfds_t i = 0; i < nfds; ++i) {
      w[2 * i] = {fds[i].fd, fds[i].events, 0};
      w[2 * i + 1] = {-1, 0, 0};
      Socket* s = lookup(fds[i].fd);
      if (!s) continue;
      fds[i].revents = poll_socket(s, fds[i].events, false, is_armed);  // arms the CQ
      ready |= fds[i].revents != 0;
      w[2 * i] = {has_cq(s) ? s->id->recv_cq_channel->fd : s->id->channel->fd, POLLIN, 0};
      if (has_cq(s)) w[2 * i + 1] = {s->id->channel->fd, POLLIN, 0};
    }
    if (ready) return check(fds, nfds);
    int wait = kRecheckMs;
    if (timeout > 0) {
      int64_t left = int64_t(timeout) - int64_t((now_us() - start) / 1000);
      if (left <= 0) return 0;
      wait = int(std::min<int64_t>(left, kRecheckMs));
    }
    if (poll(w.data(), w.size(), wait) < 0) return -1;
    int cnt = 0;
    for (nfds_t i = 0; i < nfds; ++i) {
      Socket* s = lookup(fds[i].fd);
      if (!s) {
        fds[i].revents = w[2 * i].revents;
      } else {
        if (has_cq(s) && (w[2 * i].revents || w[2 * i + 1].revents)) {
          std::lock_guard g(s->wait_mu);
          wait_event(s, 0);
        }
        fds[i].revents = poll_socket(s, fds[i].events, true, poll_all);
      }
      cnt += fds[i].revents != 0;
    }
    if (cnt) return cnt;
  }
}

int rselect(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds, timeval* timeout) {
  if (nfds < 0 || nfds > FD_SETSIZE) {
    errno = EINVAL;
    return -1;
  }
  std::vector<pollfd> p;
  for (int fd = 0; fd < nfds; ++fd) {
    short ev = 0;
    if (readfds && FD_ISSET(fd, readfds)) ev |= POLLIN;
    if (writefds && FD_ISSET(fd, writefds)) ev |= POLLOUT;
    if (exceptfds && FD_ISSET(fd, exceptfds)) ev |= POLLPRI;
    if (ev) p.push_back({fd, ev, 0});
  }
  int ms = timeout ? int(timeout->tv_sec * 1000 + (timeout->tv_usec + 999) / 1000) : -1;
  int ret = rpoll(p.data(), p.size(), ms);
  if (ret < 0) return ret;
  for (fd_set* set : {readfds, writefds, exceptfds})
    if (set) FD_ZERO(set);
  int cnt = 0;
  for (const pollfd& q : p) {
    bool r = readfds && (q.revents & (POLLIN | POLLHUP | POLLERR)) && (q.events & POLLIN);
    bool wr = writefds && (q.revents & (POLLOUT | POLLERR)) && (q.events & POLLOUT);
    bool x = exceptfds && (q.revents & POLLPRI) && (q.events & POLLPRI);
    if (r) FD_SET(q.fd, readfds);
    if (wr) FD_SET(q.fd, writefds);
    if (x) FD_SET(q.fd, exceptfds);
    cnt += r + wr + x;
  }
  return cnt;
}

}  // extern "C"
