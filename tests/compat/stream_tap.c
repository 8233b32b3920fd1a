/* A preload library that checks a socket program's bytes without changing the program: it
 * passes read/recv/write/send on to the next library (librspreload.so, then libc) and hashes
 * the bytes each call moved, per socket and direction. At every 4 MiB of a socket's stream it
 * prints to stderr
 *     stream_tap: <r|w> <MiB> <hash>
 * the hash (FNV-1a, 64 bits) of the stream's bytes so far. A sender's "w" lines and its
 * receiver's "r" lines agree at every point both reached when every byte arrived as it was
 * sent; a receiver that stops early (iperf3 stops at its test's end) leaves less than one step
 * of the stream unchecked.
 *   usage: LD_PRELOAD="libstream_tap.so librspreload.so" program ... */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <unistd.h>

#define STEP (4u << 20)
#define MAX_FDS 4096

struct dir_state {
  uint64_t hash, bytes;
};
struct fd_state {
  int known, sock; /* whether fd has been looked at since it was opened, and if it is a socket */
  struct dir_state dir[2];
};
static struct fd_state fds[MAX_FDS];

static ssize_t (*next_read)(int, void *, size_t);
static ssize_t (*next_write)(int, const void *, size_t);
static ssize_t (*next_recv)(int, void *, size_t, int);
static ssize_t (*next_send)(int, const void *, size_t, int);
static int (*next_close)(int);

__attribute__((constructor)) static void init(void) {
  next_read = (ssize_t (*)(int, void *, size_t))dlsym(RTLD_NEXT, "read");
  next_write = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
  next_recv = (ssize_t (*)(int, void *, size_t, int))dlsym(RTLD_NEXT, "recv");
  next_send = (ssize_t (*)(int, const void *, size_t, int))dlsym(RTLD_NEXT, "send");
  next_close = (int (*)(int))dlsym(RTLD_NEXT, "close");
  for (int i = 0; i < MAX_FDS; i++) fds[i].dir[0].hash = fds[i].dir[1].hash = 0xcbf29ce484222325ull;
}

static void tap(int fd, int writing, const void *buf, ssize_t n, int peek) {
  if (fd < 0 || fd >= MAX_FDS || n <= 0 || peek) return;
  struct fd_state *f = &fds[fd];
  if (!f->known) {
    struct stat st;
    f->known = 1;
    /* librspreload.so holds an rsocket's number with a descriptor of /dev/null. */
    f->sock = fstat(fd, &st) == 0 && (S_ISSOCK(st.st_mode) || (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3)));
  }
  if (!f->sock) return;
  struct dir_state *d = &f->dir[writing];
  const uint8_t *p = buf;
  for (ssize_t i = 0; i < n; i++) {
    d->hash = (d->hash ^ p[i]) * 0x100000001b3ull;
    if (++d->bytes % STEP == 0) {
      char line[80];
      int len = snprintf(line, sizeof line, "stream_tap: %c %llu %016llx\n", writing ? 'w' : 'r',
                         (unsigned long long)(d->bytes >> 20), (unsigned long long)d->hash);
      (void)!next_write(2, line, (size_t)len);
    }
  }
}

ssize_t read(int fd, void *buf, size_t len) {
  ssize_t n = next_read(fd, buf, len);
  tap(fd, 0, buf, n, 0);
  return n;
}
ssize_t recv(int fd, void *buf, size_t len, int flags) {
  ssize_t n = next_recv(fd, buf, len, flags);
  tap(fd, 0, buf, n, flags & MSG_PEEK);
  return n;
}
ssize_t write(int fd, const void *buf, size_t len) {
  ssize_t n = next_write(fd, buf, len);
  tap(fd, 1, buf, n, 0);
  return n;
}
ssize_t send(int fd, const void *buf, size_t len, int flags) {
  ssize_t n = next_send(fd, buf, len, flags);
  tap(fd, 1, buf, n, 0);
  return n;
}
int close(int fd) {
  if (fd >= 0 && fd < MAX_FDS) {
    fds[fd].known = 0;
    fds[fd].dir[0] = fds[fd].dir[1] = (struct dir_state){0xcbf29ce484222325ull, 0};
  }
  return next_close(fd);
}
