// A same-host peer of a test's own making: it connects to a victim device's registry name and
// hands over rings in a memfd (sealed at its size, as a uroce device seals them, or not), then
// reads the answer. Its address is 127.0.0.254; ring[0] carries what it writes.
#pragma once
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <new>

#include "link/fd_passing.hpp"
#include "link/shm_registry.hpp"
#include "link/shm_ring.hpp"
#include "uroce/types.hpp"

namespace uroce::test {

struct ForgedPeer {
  int s = -1, memfd = -1, e0 = -1, e1 = -1;
  int pipe_w[2] = {-1, -1};  // with `pipes`: the write ends of what it passed as eventfds
  link::shm::Area* area = nullptr;
  char answer = 0;  // 'Y' once the victim mapped the rings; 0 if it hung up instead

  // Its eventfds block (a uroce device makes them non-blocking); `pipes`: it passes pipes
  // instead of eventfds.
  ForgedPeer(const Gid& victim, bool sealed, bool pipes = false) {
    s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un a;
    const socklen_t len = link::shm::registry_name(victim, 0, a);
    EXPECT_EQ(::connect(s, reinterpret_cast<sockaddr*>(&a), len), 0);
    memfd = memfd_create("fake", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    EXPECT_EQ(ftruncate(memfd, sizeof(link::shm::Area)), 0);
    if (sealed) {
      EXPECT_EQ(fcntl(memfd, F_ADD_SEALS, link::shm::kSeals), 0);
    }
    void* m = mmap(nullptr, sizeof(link::shm::Area), PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    EXPECT_NE(m, MAP_FAILED);
    if (m == MAP_FAILED) return;  // answer stays 0: the test fails on it
    area = new (m) link::shm::Area;
    area->magic = link::shm::kMagic;
    area->slots = link::shm::kSlots;
    area->slot_bytes = sizeof(link::shm::Slot);
    e0 = eventfd(0, EFD_CLOEXEC);
    e1 = eventfd(0, EFD_CLOEXEC);
    if (pipes) {
      int p0[2], p1[2];
      EXPECT_EQ(pipe2(p0, O_CLOEXEC), 0);
      EXPECT_EQ(pipe2(p1, O_CLOEXEC), 0);
      close(e0);
      close(e1);
      e0 = p0[0], pipe_w[0] = p0[1];
      e1 = p1[0], pipe_w[1] = p1[1];
    }
    link::shm::Hello hello{link::shm::kMagic, uint32_t(sizeof(link::shm::Area)), 1, 0, {Gid::from_ipv4(0x7f0000fe)}};
    int fds[3] = {memfd, e0, e1};
    EXPECT_TRUE(link::send_with_fds(s, &hello, sizeof hello, fds, 3));
    timeval tv{5, 0};  // bounded: a victim that neither answers nor hangs up fails the test
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (recv(s, &answer, 1, 0) != 1) answer = 0;
  }
  // A slot of ring[0] addressed as this peer's packets to `victim` are: from 127.0.0.254.
  static void address(link::shm::Slot& s, const Gid& victim) {
    s.src = Gid::from_ipv4(0x7f0000fe);
    s.dst = victim;
    s.src_port = 50000;
    s.dst_port = 4791;
  }
  // Tells the victim that ring[0] has slots ready.
  void wake() const {
    uint64_t one = 1;
    EXPECT_EQ(write(e0, &one, sizeof one), 8);
  }
  ~ForgedPeer() {
    if (area) munmap(area, sizeof(link::shm::Area));
    for (int fd : {s, memfd, e0, e1, pipe_w[0], pipe_w[1]})
      if (fd >= 0) close(fd);
  }
};

}  // namespace uroce::test
