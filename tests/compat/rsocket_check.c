/* rsockets through librdmacm's API (built against Debian's library, run on uroce's): a server
 * and a client thread of one process, over 127.0.0.1. Checks bytes, lengths, errnos and poll
 * events: a stream of seeded random sizes read back in other sizes, one-byte exchanges (a
 * control channel's), MSG_PEEK and MSG_WAITALL, non-blocking EAGAIN, rpoll and rselect beside a
 * pipe, riomap/riowrite, SHUT_WR then EOF, a close after data (POLLIN, then POLLHUP), options
 * and names; and a peer that sends and closes while the reader sleeps, its data and its cm
 * id's departure waking the reader at once: every byte is read before EOF.
 *   usage: rsocket_check [seed] */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rsocket.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"

#define STREAM (3u << 20)
#define IOMAP_LEN 65536
static struct sockaddr_in addr;
static uint8_t *expect;
static uint8_t iomap_src[IOMAP_LEN];
static int server_closed;

/* The reader's wake-up, held (see the last case): this program's poll() comes before libc's for
 * the library's calls. A thread with hold_wakeup set that sleeps on two descriptors (an
 * rsocket's CQ channel and cm channel) returns only once both have something. */
static __thread int hold_wakeup;
static int reader_asleep;
int poll(struct pollfd *fds, nfds_t n, int timeout) {
  static int (*libc_poll)(struct pollfd *, nfds_t, int);
  if (!libc_poll) libc_poll = (int (*)(struct pollfd *, nfds_t, int))dlsym(RTLD_NEXT, "poll");
  if (!hold_wakeup || n != 2 || timeout >= 0) return libc_poll(fds, n, timeout);
  hold_wakeup = 0;
  __atomic_store_n(&reader_asleep, 1, __ATOMIC_RELEASE);
  int r = libc_poll(fds, n, 10000);
  for (int i = 0; i < 2 && r > 0; i++)
    if (!fds[i].revents) {
      libc_poll(&fds[i], 1, 10000);
      r = libc_poll(fds, n, 0);
    }
  return r;
}

static uint8_t byte_at(size_t i) { return (uint8_t)(i * 2654435761u >> 13) ^ (uint8_t)seed; }

static int send_all(int s, const void *buf, size_t len) {
  size_t off = 0;
  while (off < len) {
    ssize_t n = rsend(s, (const char *)buf + off, len - off, 0);
    if (n <= 0) return -1;
    off += (size_t)n;
  }
  return 0;
}

static int recv_all(int s, void *buf, size_t len) {
  ssize_t n = rrecv(s, buf, len, MSG_WAITALL);
  return n == (ssize_t)len ? 0 : -1;
}

static void *client(void *arg) {
  (void)arg;
  int s = rsocket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  rsetsockopt(s, SOL_RDMA, RDMA_IOMAPSIZE, &one, sizeof one);
  CHECK(rconnect(s, (struct sockaddr *)&addr, sizeof addr) == 0, "rconnect: %s", strerror(errno));
  /* 1. The stream, in random pieces. */
  unsigned r = seed;
  for (size_t off = 0; off < STREAM;) {
    /* A 37-byte header then 128 KiB writes (iperf3's), then random ones. */
    size_t n = off == 0 ? 37 : off < STREAM / 2 ? 131072 : 1 + rand_r(&r) % 200000;
    if (n > STREAM - off) n = STREAM - off;
    CHECK(send_all(s, expect + off, n) == 0, "rsend at %zu: %s", off, strerror(errno));
    off += n;
  }
  /* 2. One-byte exchanges. */
  for (int i = 0; i < 200; i++) {
    uint8_t b = (uint8_t)i, got = 0;
    if (send_all(s, &b, 1) || recv_all(s, &got, 1) || got != (uint8_t)(i + 1)) {
      CHECK(0, "exchange %d: got %d", i, got);
      break;
    }
  }
  /* 3. Held back until the server polls an empty socket: it must wait for this byte. */
  uint8_t go;
  CHECK(recv_all(s, &go, 1) == 0 && go == 'p', "poll cue");
  usleep(20000);
  CHECK(send_all(s, "x", 1) == 0, "poll byte");
  /* 4. riowrite into the server's mapping (offset 0), then a byte to say so. */
  CHECK(recv_all(s, &go, 1) == 0 && go == 'm', "iomap cue");
  size_t w = riowrite(s, iomap_src, IOMAP_LEN, 0, 0);
  CHECK(w == IOMAP_LEN, "riowrite: %zd %s", (ssize_t)w, strerror(errno));
  CHECK(send_all(s, "w", 1) == 0, "iomap done");
  /* 5. The last words, then SHUT_WR: the server reads them, then EOF. */
  CHECK(send_all(s, "last words", 10) == 0, "last");
  CHECK(rshutdown(s, SHUT_WR) == 0, "rshutdown: %s", strerror(errno));
  CHECK(rsend(s, "x", 1, 0) < 0, "rsend after SHUT_WR succeeded");
  /* 6. The server sends "bye" and closes: while "bye" waits, the socket is readable, not hung
   * up (a program that stops at POLLHUP would lose it); once read, POLLHUP and EOF. */
  for (int i = 0; i < 10000 && !__atomic_load_n(&server_closed, __ATOMIC_ACQUIRE); i++) usleep(1000);
  CHECK(__atomic_load_n(&server_closed, __ATOMIC_ACQUIRE), "server closed");
  /* rclose returned once its DISCONNECT was acknowledged: it waits in our CQ now. */
  struct pollfd pf = {s, POLLIN, 0};
  CHECK(rpoll(&pf, 1, 5000) == 1 && pf.revents == POLLIN, "data before the close: revents %d", pf.revents);
  char bye[4] = {0};
  CHECK(recv_all(s, bye, 3) == 0 && !memcmp(bye, "bye", 3), "bye");
  pf.revents = 0;
  CHECK(rpoll(&pf, 1, 5000) == 1 && (pf.revents & POLLHUP), "then POLLHUP: revents %d", pf.revents);
  CHECK(rrecv(s, bye, 1, 0) == 0, "then EOF");
  rclose(s);
  return NULL;
}

/* The last case's peer: once the reader sleeps, 40000 bytes and a close. */
#define LEAVING 40000
static void *client_leaving(void *arg) {
  (void)arg;
  int s = rsocket(AF_INET, SOCK_STREAM, 0);
  CHECK(rconnect(s, (struct sockaddr *)&addr, sizeof addr) == 0, "rconnect: %s", strerror(errno));
  for (int i = 0; i < 10000 && !__atomic_load_n(&reader_asleep, __ATOMIC_ACQUIRE); i++) usleep(1000);
  CHECK(__atomic_load_n(&reader_asleep, __ATOMIC_ACQUIRE), "the reader sleeps");
  CHECK(send_all(s, expect, LEAVING) == 0, "rsend: %s", strerror(errno));
  rclose(s);
  return NULL;
}

int main(int argc, char **argv) {
  seed = argc > 1 ? (unsigned)atoi(argv[1]) : (unsigned)getpid();
  seeded = 1;
  expect = malloc(STREAM);
  for (size_t i = 0; i < STREAM; i++) expect[i] = byte_at(i);
  for (size_t i = 0; i < IOMAP_LEN; i++) iomap_src[i] = byte_at(i + 7);

  int l = rsocket(AF_INET, SOCK_STREAM, 0);
  CHECK(l >= 0, "rsocket: %s", strerror(errno));
  CHECK(rsocket(AF_INET, SOCK_DGRAM, 0) < 0 && errno == ENOTSUP, "datagram rsocket: %s", strerror(errno));
  CHECK(rsend(12345, "x", 1, 0) < 0 && errno == EBADF, "rsend on a non-rsocket: %s", strerror(errno));
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int one = 1;
  rsetsockopt(l, SOL_RDMA, RDMA_IOMAPSIZE, &one, sizeof one);
  struct sockaddr_in any = addr;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  CHECK(rbind(l, (struct sockaddr *)&any, sizeof any) == 0, "rbind: %s", strerror(errno));
  CHECK(rlisten(l, 4) == 0, "rlisten: %s", strerror(errno));
  socklen_t alen = sizeof any; /* port 0: the one it took */
  CHECK(rgetsockname(l, (struct sockaddr *)&any, &alen) == 0 && any.sin_port != 0, "listener's port");
  addr.sin_port = any.sin_port;
  pthread_t t;
  pthread_create(&t, NULL, client, NULL);
  struct pollfd lp = {l, POLLIN, 0};
  int pr = rpoll(&lp, 1, 10000);
  CHECK(pr == 1 && (lp.revents & POLLIN), "rpoll on the listener: %d", lp.revents);
  struct sockaddr_in peer;
  socklen_t plen = sizeof peer;
  int s = raccept(l, (struct sockaddr *)&peer, &plen);
  CHECK(s >= 0, "raccept: %s", strerror(errno));
  CHECK(plen == sizeof peer && peer.sin_family == AF_INET && peer.sin_port != 0,
        "peer name: family %d, %08x:%u", peer.sin_family, ntohl(peer.sin_addr.s_addr), ntohs(peer.sin_port));
  struct sockaddr_in me;
  socklen_t mlen = sizeof me;
  CHECK(rgetsockname(s, (struct sockaddr *)&me, &mlen) == 0 && me.sin_port == addr.sin_port, "sock name");

  /* 1. Read back in other pieces; every byte checked; a peek first each tenth read. */
  uint8_t *buf = malloc(300000);
  unsigned r = seed * 7 + 1;
  size_t off = 0, bad = 0;
  for (int i = 0; off < STREAM; i++) {
    size_t want = off == 0 ? 37 : off < STREAM / 2 ? 131072 : 1 + rand_r(&r) % 300000;
    if (off > 0 && off < STREAM / 2) { /* as a select() loop reads */
      struct pollfd pf = {s, POLLIN, 0};
      if (rpoll(&pf, 1, 10000) != 1 || pf.revents != POLLIN) bad++;
    }
    if (want > STREAM - off) want = STREAM - off; /* what follows is the exchange's */
    if (i % 10 == 0) {
      uint8_t p[16];
      ssize_t n = rrecv(s, p, sizeof p, MSG_PEEK);
      if (n <= 0 || memcmp(p, expect + off, (size_t)n)) bad++;
    }
    ssize_t n = rrecv(s, buf, want, 0);
    if (n <= 0) {
      CHECK(0, "rrecv at %zu: %zd %s", off, n, strerror(errno));
      break;
    }
    if (memcmp(buf, expect + off, (size_t)n)) bad++;
    off += (size_t)n;
  }
  CHECK(off == STREAM && bad == 0, "stream: %zu of %u bytes, %zu bad pieces", off, STREAM, bad);
  /* 2. One-byte exchanges. */
  int ok = 1;
  for (int i = 0; i < 200 && ok; i++) {
    uint8_t b = 0xff;
    ok = !recv_all(s, &b, 1) && b == (uint8_t)i;
    CHECK(ok, "exchange %d: got %d", i, b);
    b++;
    ok = !send_all(s, &b, 1);  /* the client waits for it either way */
  }
  /* 3. Non-blocking: nothing yet is EAGAIN; rpoll beside a readable pipe gives the pipe
   * alone, then waits for the rsocket; rselect agrees. */
  CHECK(rfcntl(s, F_SETFL, rfcntl(s, F_GETFL) | O_NONBLOCK) == 0, "rfcntl");
  uint8_t b;
  CHECK(rrecv(s, &b, 1, 0) < 0 && errno == EAGAIN, "empty non-blocking rrecv: %s", strerror(errno));
  int pfd[2];
  CHECK(pipe(pfd) == 0 && write(pfd[1], "z", 1) == 1, "pipe");
  struct pollfd two[2] = {{s, POLLIN, 0}, {pfd[0], POLLIN, 0}};
  CHECK(rpoll(two, 2, 1000) == 1 && !two[0].revents && two[1].revents == POLLIN, "rpoll with a pipe: %d %d",
        two[0].revents, two[1].revents);
  CHECK(read(pfd[0], &b, 1) == 1, "pipe read");
  CHECK(send_all(s, "p", 1) == 0, "cue");
  two[0].revents = two[1].revents = 0;
  CHECK(rpoll(two, 2, 10000) == 1 && two[0].revents == POLLIN && !two[1].revents, "rpoll wakes for data: %d %d",
        two[0].revents, two[1].revents);
  fd_set rd;
  FD_ZERO(&rd);
  FD_SET(s, &rd);
  FD_SET(pfd[0], &rd);
  struct timeval tv = {1, 0};
  int nfds = (s > pfd[0] ? s : pfd[0]) + 1;
  CHECK(rselect(nfds, &rd, NULL, NULL, &tv) == 1 && FD_ISSET(s, &rd) && !FD_ISSET(pfd[0], &rd), "rselect");
  CHECK(rrecv(s, &b, 1, 0) == 1 && b == 'x', "the polled byte");
  CHECK(rfcntl(s, F_SETFL, rfcntl(s, F_GETFL) & ~O_NONBLOCK) == 0, "rfcntl back");
  /* 4. riomap: the client writes into this buffer directly. */
  uint8_t *region = mmap(NULL, IOMAP_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(riomap(s, region, IOMAP_LEN, PROT_WRITE, 0, 0) == 0, "riomap: %s", strerror(errno));
  CHECK(send_all(s, "m", 1) == 0, "iomap cue");  /* also carries the mapping to the peer */
  CHECK(recv_all(s, &b, 1) == 0 && b == 'w', "iomap done");
  CHECK(!memcmp(region, iomap_src, IOMAP_LEN), "riowrite's bytes");
  CHECK(riounmap(s, region, IOMAP_LEN) == 0, "riounmap");
  /* 5. The last words, then EOF; we can still send. */
  char last[16] = {0};
  CHECK(recv_all(s, last, 10) == 0 && !memcmp(last, "last words", 10), "last words");
  CHECK(rrecv(s, last, sizeof last, 0) == 0, "EOF after SHUT_WR");
  CHECK(send_all(s, "bye", 3) == 0, "send after the peer's SHUT_WR");
  int v = -1;
  socklen_t vl = sizeof v;
  CHECK(rgetsockopt(s, SOL_SOCKET, SO_ERROR, &v, &vl) == 0 && v == 0, "SO_ERROR %d", v);
  CHECK(rgetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, &vl) == 0 && v > 0, "SO_RCVBUF");
  CHECK(rsetsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0, "TCP_NODELAY");
  rclose(s);
  __atomic_store_n(&server_closed, 1, __ATOMIC_RELEASE);
  pthread_join(t, NULL);
  /* 7. A peer sends and closes while we sleep in a blocking rrecv; we wake with its data in our
   * CQ and its cm id's DISCONNECTED event at once. The event must not cost the data before it. */
  pthread_create(&t, NULL, client_leaving, NULL);
  s = raccept(l, NULL, NULL);
  CHECK(s >= 0, "raccept: %s", strerror(errno));
  off = bad = 0;
  hold_wakeup = 1;
  for (int i = 0; i < 1000; i++) {
    ssize_t n = rrecv(s, buf, 300000, 0);
    if (n <= 0) break;
    if (off + (size_t)n > LEAVING || memcmp(buf, expect + off, (size_t)n)) bad++;
    off += (size_t)n;
  }
  hold_wakeup = 0;
  CHECK(__atomic_load_n(&reader_asleep, __ATOMIC_ACQUIRE), "the wake-up was held");
  CHECK(off == LEAVING && bad == 0, "a peer's data before its close: %zu of %d bytes before EOF, %zu bad", off,
        LEAVING, bad);
  pthread_join(t, NULL);
  rclose(s);
  rclose(l);
  printf("rsocket_check: %d passed, %d failed\n", passed, failed);
  return failed != 0;
}
