#include "link/fd_passing.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace uroce::link {

namespace {
constexpr int kMaxFds = 8;

msghdr message(iovec& iov, char* ctl, size_t ctl_len) {
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = ctl;
  msg.msg_controllen = ctl_len;
  return msg;
}
}  // namespace

bool send_with_fds(int sock, const void* data, size_t len, const int* fds, int n) {
  if (n < 0 || n > kMaxFds) return false;
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
  iovec iov{const_cast<void*>(data), len};
  msghdr msg = message(iov, ctl, CMSG_SPACE(sizeof(int) * size_t(n)));
  cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int) * size_t(n));
  std::memcpy(CMSG_DATA(cm), fds, sizeof(int) * size_t(n));
  return sendmsg(sock, &msg, MSG_NOSIGNAL) == ssize_t(len);
}

ssize_t recv_with_fds(int sock, void* data, size_t len, int* fds, int max, int* got) {
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
  iovec iov{data, len};
  msghdr msg = message(iov, ctl, sizeof ctl);
  ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  *got = 0;
  for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); n >= 0 && cm; cm = CMSG_NXTHDR(&msg, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
    int k = int((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    for (int i = 0; i < k; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(cm) + sizeof(int) * size_t(i), sizeof fd);
      if (*got < max)
        fds[(*got)++] = fd;
      else
        close(fd);
    }
  }
  return n;
}

}  // namespace uroce::link
