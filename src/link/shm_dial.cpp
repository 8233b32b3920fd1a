// The same-host link's handshakes (see shm_link.hpp): the watcher dials a peer's registry name
// and hands it a memfd and two eventfds, accepts the channels peers offer, and says when a name
// is someone else's.
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "link/fd_passing.hpp"
#include "link/shm_link.hpp"
#include "link/shm_registry.hpp"

namespace uroce::link {

using shm::close_all;
using shm::kAnswerTime;
using shm::registry_name;
using shm::set_timeout;
using shm::trusted;

namespace {

// A descriptor a peer passed as an eventfd: one it must be, and one that never blocks (the
// engine reads its own after every sleep and writes the peer's to wake it, under the engine
// lock). O_NONBLOCK is set on the open file, which the peer shares: an honest peer made it so.
bool nonblocking_eventfd(int fd) {
  char link[64] = {};
  const std::string self = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = readlink(self.c_str(), link, sizeof link - 1);
  if (n <= 0 || std::string(link, size_t(n)) != "anon_inode:[eventfd]") return false;
  const int fl = fcntl(fd, F_GETFL);
  return fl >= 0 && ((fl & O_NONBLOCK) || fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0);
}

}  // namespace

// Someone holds the name this device would listen on (anyone may take a name first): peers
// that look the address up reach them, and hand them nothing unless they are us, so the
// address stays on UDP. Said once, with who holds it if they answer, and counted.
void SameHostLink::name_taken(const Gid& g) {
  ++st_.names_taken;
  sockaddr_un a;
  socklen_t len = registry_name(g, slot_, a);
  std::string who = "another socket";
  int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  ucred c{};
  socklen_t clen = sizeof c;
  if (s >= 0 && connect(s, reinterpret_cast<sockaddr*>(&a), len) == 0 &&
      getsockopt(s, SOL_SOCKET, SO_PEERCRED, &c, &clen) == 0)
    who = "pid " + std::to_string(c.pid) + " (uid " + std::to_string(c.uid) + ")";
  close_all({s});
  std::fprintf(stderr, "uroce: same-host name of %s is held by %s: local peers reach it over UDP only\n",
               g.to_string().c_str(), who.c_str());
}

// The first half of a handshake, on the watcher's thread. Nothing here waits for the peer: a
// UNIX connect either succeeds at once or fails (a full backlog: EAGAIN), and the answer is
// polled for with the watcher's other sockets until kAnswerTime.
void SameHostLink::dial(const ShmPeer& dst) {
  Dial d{dst};
  d.sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_un a;
  socklen_t len = registry_name(dst.addr, dst.slot, a);
  if (d.sock < 0 || connect(d.sock, reinterpret_cast<sockaddr*>(&a), len) != 0 || !trusted(d.sock))
    return dialed(d, false);
  d.memfd = memfd_create("uroce-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  d.e0 = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  d.e1 = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  void* m = MAP_FAILED;
  // Sealed at its size: the peer checks that before it maps the rings (shm::sealed_at_size).
  if (d.memfd >= 0 && ftruncate(d.memfd, sizeof(shm::Area)) == 0 && fcntl(d.memfd, F_ADD_SEALS, shm::kSeals) == 0)
    m = mmap(nullptr, sizeof(shm::Area), PROT_READ | PROT_WRITE, MAP_SHARED, d.memfd, 0);
  if (m == MAP_FAILED || d.e0 < 0 || d.e1 < 0) return dialed(d, false);
  // A new memfd reads as zeros, which is every ring empty: only the header is written (each
  // side's adopt() maps the area populated, far cheaper than a fault per page: see
  // docs/performance.md, the same-host link).
  auto* area = static_cast<shm::Area*>(m);
  area->magic = shm::kMagic;
  area->slots = shm::kSlots;
  area->slot_bytes = sizeof(shm::Slot);
  for (auto& r : area->ring) r.consumer_sleeping.store(1);  // wake each side until it polls
  munmap(m, sizeof(shm::Area));

  shm::Hello h{shm::kMagic, uint32_t(sizeof(shm::Area)), 0, slot_, {}};
  for (const Gid& g : own_)
    if (h.ngids < shm::kMaxPeerGids) h.gids[h.ngids++] = g;
  int fds[3] = {d.memfd, d.e0, d.e1};
  if (!send_with_fds(d.sock, &h, sizeof h, fds, 3)) return dialed(d, false);
  d.deadline = std::chrono::steady_clock::now() + kAnswerTime;
  dials_.push_back(d);
}

// The peer answered (or hung up): 'Y' once it has mapped the memory.
void SameHostLink::answered(Dial& d) {
  char ok = 0;
  if (recv(d.sock, &ok, 1, MSG_DONTWAIT) != 1 || ok != 'Y') return dialed(d, false);
  Channel* c = adopt(d.sock, d.memfd, d.e0, d.e1, true, {d.dst.addr}, d.dst.slot);
  d.sock = d.memfd = d.e0 = d.e1 = -1;  // adopt() took them
  dialed(d, c != nullptr);
}

// A handshake ended: the engine side learns it in refresh(), a waiting attach in wait_handshake().
void SameHostLink::dialed(Dial& d, bool ok) {
  close_all({d.sock, d.memfd, d.e0, d.e1});
  d.sock = d.memfd = d.e0 = d.e1 = -1;
  std::lock_guard g(mu_);
  if (auto it = std::find(dialing_.begin(), dialing_.end(), d.dst); it != dialing_.end()) dialing_.erase(it);
  dial_ends_.emplace_back(d.dst, ok);
  gen_.fetch_add(1, std::memory_order_release);
  dial_ended_.notify_all();
}

void SameHostLink::wait_handshake(const Gid& to, int timeout_ms, uint32_t dest_qpn) {
  const ShmPeer dst = peer_of(to, dest_qpn);
  std::unique_lock g(mu_);
  dial_ended_.wait_for(g, std::chrono::milliseconds(timeout_ms),
                       [&] { return std::find(dialing_.begin(), dialing_.end(), dst) == dialing_.end(); });
}

// The watcher's side of a connection: the peer's hello and descriptors.
void SameHostLink::accept_one() {
  for (int lfd : listen_fds_) {
    int s = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (s < 0) continue;
    if (!trusted(s)) {
      close(s);
      continue;
    }
    set_timeout(s);
    shm::Hello h{};
    int fds[3] = {-1, -1, -1};
    int got = 0;
    ssize_t n = recv_with_fds(s, &h, sizeof h, fds, 3, &got);
    if (n != ssize_t(sizeof h) || got != 3 || h.magic != shm::kMagic || h.area_bytes != sizeof(shm::Area) ||
        h.ngids == 0 || h.ngids > shm::kMaxPeerGids || !nonblocking_eventfd(fds[1]) || !nonblocking_eventfd(fds[2])) {
      refused_.fetch_add(1, std::memory_order_relaxed);
      close_all({s, fds[0], fds[1], fds[2]});
      continue;
    }
    // ring[0] is theirs to fill (its eventfd wakes us), ring[1] ours.
    Channel* c = adopt(s, fds[0], fds[2], fds[1], false, std::vector<Gid>(h.gids, h.gids + h.ngids), h.slot);
    if (c) (void)!::send(s, "Y", 1, MSG_NOSIGNAL);
  }
}

}  // namespace uroce::link
