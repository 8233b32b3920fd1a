/* A plain TCP program, for running under librspreload: the client sends a 37-byte header and
 * then BYTES of a seeded stream in 128 KiB writes (iperf3's pattern); the server reads it with
 * select() and non-blocking reads of 128 KiB, and checks every byte.
 *   usage: tcp_stream server ADDR PORT BYTES SEED | tcp_stream client ADDR PORT BYTES SEED */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

/* Kernel TCP sockets listening on port (from /proc/net/tcp and tcp6): 0 when listen() made an
 * rsocket instead. */
static int kernel_listeners(unsigned port) {
  int n = 0;
  const char *files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
  for (int f = 0; f < 2; f++) {
    FILE *in = fopen(files[f], "r");
    char line[512];
    while (in && fgets(line, sizeof line, in)) {
      char local[128];
      unsigned st;
      if (sscanf(line, " %*d: %127s %*s %x", local, &st) != 2) continue;
      char *colon = strrchr(local, ':');
      if (colon && strtoul(colon + 1, NULL, 16) == port && st == 0x0A) n++;
    }
    if (in) fclose(in);
  }
  return n;
}

static uint8_t byte_at(size_t i, unsigned seed) { return (uint8_t)((i * 2654435761u) >> 11) ^ (uint8_t)(seed + i / 4093); }

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: tcp_stream server|client ADDR PORT BYTES SEED\n");
    return 2;
  }
  int server = !strcmp(argv[1], "server");
  size_t total = strtoull(argv[4], NULL, 10) + 37;
  unsigned seed = (unsigned)atoi(argv[5]);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[3]))};
  inet_pton(AF_INET, argv[2], &a.sin_addr);
  static uint8_t buf[131072];
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (server) {
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 1)) {
      perror("bind/listen");
      return 1;
    }
    printf("tcp_stream: kernel listeners on port %s: %d\n", argv[3], kernel_listeners((unsigned)atoi(argv[3])));
    fflush(stdout);
    int c = accept(s, NULL, NULL);
    if (c < 0) {
      perror("accept");
      return 1;
    }
    fcntl(c, F_SETFL, fcntl(c, F_GETFL) | O_NONBLOCK);
    size_t off = 0, bad = 0;
    for (int idle = 0; idle < 100;) {
      fd_set rd;
      FD_ZERO(&rd);
      FD_SET(c, &rd);
      struct timeval tv = {0, 100000};
      int n = select(c + 1, &rd, NULL, NULL, &tv);
      if (n <= 0) {
        idle++;
        continue;
      }
      ssize_t r = read(c, buf, off < 37 ? 37 - off : sizeof buf);
      if (r == 0) break;
      if (r < 0) {
        if (errno == EAGAIN) continue;
        perror("read");
        return 1;
      }
      for (ssize_t i = 0; i < r; i++)
        if (buf[i] != byte_at(off + (size_t)i, seed) && bad++ < 3)
          printf("byte %zu: %u, not %u\n", off + (size_t)i, buf[i], byte_at(off + (size_t)i, seed));
      off += (size_t)r;
    }
    printf("tcp_stream: server read %zu of %zu bytes, %zu wrong\n", off, total, bad);
    close(c);
    return off != total || bad;
  }
  for (int tries = 0; connect(s, (struct sockaddr *)&a, sizeof a); tries++) {
    if (tries == 50) {
      perror("connect");
      return 1;
    }
    close(s);
    usleep(100000);
    s = socket(AF_INET, SOCK_STREAM, 0);
  }
  for (size_t off = 0; off < total;) {
    size_t n = off == 0 ? 37 : total - off < sizeof buf ? total - off : sizeof buf;
    for (size_t i = 0; i < n; i++) buf[i] = byte_at(off + i, seed);
    for (size_t done = 0; done < n;) {
      ssize_t w = write(s, buf + done, n - done);
      if (w <= 0) {
        perror("write");
        return 1;
      }
      done += (size_t)w;
    }
    off += n;
  }
  close(s);
  printf("tcp_stream: client wrote %zu bytes\n", total);
  return 0;
}
