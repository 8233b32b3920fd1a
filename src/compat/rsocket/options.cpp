// rsockets: socket options and fcntl. Ring and queue sizes count only before the rings exist;
// TCP's own knobs are accepted and mean nothing over a reliable connection, as in librdmacm.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstring>
#include <utility>

#include "compat/rsocket/rsocket.hpp"

namespace uroce::compat::rs {
namespace {
int int_opt(const void* v, socklen_t len) {
  int x = 0;
  std::memcpy(&x, v, std::min<size_t>(len, sizeof x));
  return x;
}
void flag(uint64_t& set, int name, bool on) {
  if (name < 64) set = on ? set | (uint64_t(1) << name) : set & ~(uint64_t(1) << name);
}
bool has(uint64_t set, int name) { return name < 64 && (set >> name & 1); }
}  // namespace

bool wants_keepalive(const Socket* s) { return has(s->so_opts, SO_KEEPALIVE); }

namespace {
int put_int(void* v, socklen_t* len, int x) {
  if (!v || !len || *len < sizeof(int)) return fail(EINVAL);
  std::memcpy(v, &x, sizeof x);
  *len = sizeof x;
  return 0;
}
}  // namespace
}  // namespace uroce::compat::rs

using namespace uroce::compat::rs;

extern "C" {

int rsetsockopt(int socket, int level, int optname, const void* optval, socklen_t optlen) {
  Socket* s = lookup(socket);
  if (!s) return fail(EBADF);
  if (!optval || optlen < sizeof(int)) return fail(EINVAL);
  int v = int_opt(optval, optlen);
  bool unsized = !s->sbuf;  // the rings are made at connect/accept
  switch (level) {
    case SOL_SOCKET:
      switch (optname) {
        case SO_REUSEADDR:
          rdma_set_option(s->id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &v, sizeof v);
          flag(s->so_opts, optname, v);
          return 0;
        case SO_RCVBUF:
          if (unsized && v > 0) s->rbuf_size = std::max<uint32_t>(uint32_t(v) << 1, 2 * kSndLowat);
          return 0;
        case SO_SNDBUF:
          if (unsized && v > 0) s->sbuf_size = std::max<uint32_t>(uint32_t(v) << 1, 2 * kSndLowat);
          return 0;
        case SO_LINGER:
          if (optlen < sizeof(linger)) return fail(EINVAL);
          flag(s->so_opts, optname, !static_cast<const linger*>(optval)->l_onoff);  // inverted: default on
          return 0;
        case SO_KEEPALIVE:
          flag(s->so_opts, optname, v);
          if (v) keepalive_wanted(s);
          return 0;
        case SO_OOBINLINE:
          flag(s->so_opts, optname, v);
          return 0;
      }
      break;
    case IPPROTO_IP:
      if (optname == IP_TOS) {
        s->ip_tos = v;
        return rdma_set_option(s->id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &v, sizeof v);
      }
      break;
    case IPPROTO_TCP:
      switch (optname) {
        case TCP_NODELAY:
          flag(s->tcp_opts, optname, v);
          return 0;
        case TCP_KEEPIDLE:
          if (v <= 0) return fail(EINVAL);
          s->keepalive_time.store(unsigned(v), std::memory_order_relaxed);
          if (has(s->so_opts, SO_KEEPALIVE)) keepalive_wanted(s);
          return 0;
        case TCP_KEEPCNT:
        case TCP_KEEPINTVL:
        case TCP_MAXSEG:
        case TCP_CONGESTION:
          return 0;
      }
      break;
    case IPPROTO_IPV6:
      if (optname == IPV6_V6ONLY) {
        flag(s->ipv6_opts, optname, v);
        return rdma_set_option(s->id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &v, sizeof v);
      }
      break;
    case SOL_RDMA:
      if (s->state >= kOpening) return fail(EINVAL);
      switch (optname) {
        case RDMA_SQSIZE:
          s->sq_size = uint16_t(std::clamp<uint32_t>(uint32_t(v), 1, kQpMax));
          return 0;
        case RDMA_RQSIZE:
          s->rq_size = uint16_t(std::clamp<uint32_t>(uint32_t(v), 1, kQpMax));
          return 0;
        case RDMA_INLINE:
          s->sq_inline = uint16_t(std::min<uint32_t>(uint32_t(v), kQpMax));
          return 0;
        case RDMA_IOMAPSIZE:
          s->target_iomap_size = uint16_t(scale_to_value(uint8_t(value_to_scale(v, 8)), 8));
          return 0;
      }
      break;
  }
  return fail(ENOTSUP);
}

int rgetsockopt(int socket, int level, int optname, void* optval, socklen_t* optlen) {
  Socket* s = lookup(socket);
  if (!s) return fail(EBADF);
  switch (level) {
    case SOL_SOCKET:
      switch (optname) {
        case SO_REUSEADDR:
        case SO_KEEPALIVE:
        case SO_OOBINLINE:
          return put_int(optval, optlen, has(s->so_opts, optname));
        case SO_RCVBUF:
          return put_int(optval, optlen, int(s->rbuf_size));
        case SO_SNDBUF:
          return put_int(optval, optlen, int(s->sbuf_size));
        case SO_ERROR:
          return put_int(optval, optlen, std::exchange(s->err, 0));
        case SO_TYPE:
          return put_int(optval, optlen, SOCK_STREAM);
        case SO_LINGER:
          if (!optval || !optlen || *optlen < sizeof(linger)) return fail(EINVAL);
          *static_cast<linger*>(optval) = {!has(s->so_opts, optname), 0};
          *optlen = sizeof(linger);
          return 0;
      }
      break;
    case IPPROTO_IP:
      if (optname == IP_TOS) return put_int(optval, optlen, s->ip_tos);
      break;
    case IPPROTO_TCP:
      switch (optname) {
        case TCP_NODELAY:
          return put_int(optval, optlen, has(s->tcp_opts, optname));
        case TCP_KEEPIDLE:
          return put_int(optval, optlen, int(s->keepalive_time.load(std::memory_order_relaxed)));
        case TCP_KEEPCNT:
        case TCP_KEEPINTVL:
          return put_int(optval, optlen, 1);
        case TCP_MAXSEG:
          return put_int(optval, optlen, s->id->route.num_paths ? 128 << s->id->route.path_rec->mtu : 2048);
        case TCP_INFO: {
          if (!optval || !optlen) return fail(EINVAL);
          tcp_info info{};
          info.tcpi_state = (s->state & kConnected) ? TCP_ESTABLISHED : TCP_CLOSE;
          info.tcpi_snd_cwnd = s->sq_size;
          std::memcpy(optval, &info, std::min<size_t>(*optlen, sizeof info));
          *optlen = socklen_t(std::min<size_t>(*optlen, sizeof info));
          return 0;
        }
      }
      break;
    case IPPROTO_IPV6:
      if (optname == IPV6_V6ONLY) return put_int(optval, optlen, has(s->ipv6_opts, optname));
      break;
    case SOL_RDMA:
      switch (optname) {
        case RDMA_SQSIZE:
          return put_int(optval, optlen, s->sq_size);
        case RDMA_RQSIZE:
          return put_int(optval, optlen, s->rq_size);
        case RDMA_INLINE:
          return put_int(optval, optlen, s->sq_inline);
        case RDMA_IOMAPSIZE:
          return put_int(optval, optlen, s->target_iomap_size);
      }
      break;
  }
  return fail(ENOTSUP);
}

int rfcntl(int socket, int cmd, ...) {
  Socket* s = lookup(socket);
  if (!s) return fail(EBADF);
  va_list ap;
  va_start(ap, cmd);
  int arg = (cmd == F_SETFL || cmd == F_SETFD) ? va_arg(ap, int) : 0;
  va_end(ap);
  switch (cmd) {
    case F_GETFL:
      return s->fs_flags;
    case F_SETFL:
      if (((s->fs_flags ^ arg) & O_NONBLOCK) && set_nonblocking(s, arg & O_NONBLOCK)) return -1;
      s->fs_flags = arg;
      return 0;
    case F_GETFD:
      return s->fd_flags;
    case F_SETFD:
      s->fd_flags = arg;
      return 0;
  }
  return fail(ENOTSUP);
}

}  // extern "C"
