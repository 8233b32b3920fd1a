// The same-host link's registry and handshake helpers (shm_link.cpp, shm_dial.cpp): the name a
// device listens on, who may answer, and the endpoint a channel leads to.
#pragma once
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <string>

#include "uroce/types.hpp"

namespace uroce::link::shm {

// How long a peer has to answer a handshake (a stopped process never does).
inline constexpr auto kAnswerTime = std::chrono::seconds(1);

// "uroce-shm/<uid>/<address>/<slot>": a device of one process has slot 0; the processes
// sharing a host NIC's address each have their steering slot, so each is a peer of its own.
inline socklen_t registry_name(const Gid& addr, uint32_t slot, sockaddr_un& a) {
  std::memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  std::string name = "uroce-shm/" + std::to_string(getuid()) + "/" + addr.to_string() + "/" + std::to_string(slot);
  std::memcpy(a.sun_path + 1, name.data(), std::min(name.size(), sizeof a.sun_path - 2));
  return socklen_t(offsetof(sockaddr_un, sun_path) + 1 + std::min(name.size(), sizeof a.sun_path - 2));
}

// Channels are offered to and taken from the same user only (or root, who may read our memory
// anyway): anyone may bind a name in the abstract namespace, so who answers is checked.
inline bool trusted(int sock) {
  ucred c{};
  socklen_t len = sizeof c;
  return getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &c, &len) == 0 && (c.uid == getuid() || c.uid == 0);
}

inline void set_timeout(int sock) {
  timeval tv{1, 0};
  setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

inline void close_all(std::initializer_list<int> fds) {
  for (int fd : fds)
    if (fd >= 0) close(fd);
}

}  // namespace uroce::link::shm
