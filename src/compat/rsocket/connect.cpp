// rsockets: making a socket, its QP and rings, and connecting it (rconnect, raccept).
#include <dirent.h>
#include <endian.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "compat/cma/cma.hpp"
#include "compat/rsocket/rsocket.hpp"

namespace uroce::compat::rs {

namespace {
std::mutex g_mu;
std::unordered_map<int, Socket*> g_sockets;

// Defaults as librdmacm's: 128 KiB rings, 384 WQEs each way, 64 bytes inline.
constexpr uint32_t kDefMem = 1 << 17, kDefWmem = 1 << 17;
constexpr uint16_t kDefQueue = 384, kDefInline = 64;

uint8_t* ring_alloc(size_t len) {
  void* p = nullptr;
  size_t page = size_t(sysconf(_SC_PAGESIZE));
  if (posix_memalign(&p, page, (len + page - 1) / page * page)) return nullptr;
  std::memset(p, 0, len);
  return static_cast<uint8_t*>(p);
}


// The queue sizes the device allows, and the rings around them.
int init_buffers(Socket* s) {
  ibv_device_attr attr{};
  uint16_t most = kQpMax;
  if (!ibv_query_device(s->id->verbs, &attr)) most = uint16_t(std::min<int>(attr.max_qp_wr, kQpMax));
  s->sq_size = std::clamp<uint16_t>(s->sq_size, kQpMin, most);
  s->rq_size = std::clamp<uint16_t>(s->rq_size, kQpMin, most);

  s->id->recv_cq_channel = ibv_create_comp_channel(s->id->verbs);
  if (!s->id->recv_cq_channel) return -1;
  s->id->recv_cq = ibv_create_cq(s->id->verbs, s->sq_size + s->rq_size, s->id, s->id->recv_cq_channel, 0);
  if (!s->id->recv_cq) return -1;
  if (s->fs_flags & O_NONBLOCK) fcntl(s->id->recv_cq_channel->fd, F_SETFL, O_NONBLOCK);
  ibv_req_notify_cq(s->id->recv_cq, 0);
  s->id->send_cq_channel = s->id->recv_cq_channel;
  s->id->send_cq = s->id->recv_cq;

  ibv_qp_init_attr qa{};
  qa.qp_context = s;
  qa.send_cq = qa.recv_cq = s->id->recv_cq;
  qa.qp_type = IBV_QPT_RC;
  qa.sq_sig_all = 1;
  qa.cap.max_send_wr = s->sq_size;
  qa.cap.max_recv_wr = s->rq_size;
  qa.cap.max_send_sge = 2;
  qa.cap.max_recv_sge = 1;
  qa.cap.max_inline_data = s->sq_inline;
  if (rdma_create_qp(s->id, nullptr, &qa)) return -1;
  s->sq_inline = uint16_t(qa.cap.max_inline_data);

  // Control messages (16 bytes at most) that do not fit inline go from slots after the ring.
  uint32_t sbuf_total = s->sbuf_size + kCtrlSlots * sizeof(WireSge);
  s->sbuf = ring_alloc(sbuf_total);
  s->rbuf = ring_alloc(s->rbuf_size);
  size_t tlen = sizeof(WireSge) * kSglEntries + sizeof(WireIomap) * s->target_iomap_size;
  s->targets = ring_alloc(tlen);
  if (!s->sbuf || !s->rbuf || !s->targets) return fail(ENOMEM);
  s->smr = ibv_reg_mr(s->id->pd, s->sbuf, sbuf_total, IBV_ACCESS_LOCAL_WRITE);
  s->rmr = ibv_reg_mr(s->id->pd, s->rbuf, s->rbuf_size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  s->target_mr = ibv_reg_mr(s->id->pd, s->targets, tlen, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!s->smr || !s->rmr || !s->target_mr) return -1;
  s->target_sgl = reinterpret_cast<WireSge*>(s->targets);
  if (s->target_iomap_size) s->target_iomap = reinterpret_cast<WireIomap*>(s->target_sgl + kSglEntries);

  s->sbuf_bytes_avail = s->sbuf_size;
  s->rbuf_free_offset = s->rbuf_bytes_avail = s->rbuf_size / 2;  // the second half, not yet offered
  s->sqe_avail = int(s->sq_size) - int(s->ctrl_max_seqno);
  s->rseq_comp = s->rq_size / 2;
  s->rmsg.assign(s->rq_size + 1u, {});
  for (uint16_t i = 0; i < s->rq_size; ++i) {
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = kRecvFlag;
    if (int e = ibv_post_recv(s->id->qp, &wr, &bad)) return fail(e);
  }
  return 0;
}

void format_conn_data(const Socket* s, ConnData* c) {
  std::memset(c, 0, sizeof *c);
  c->version = 1;
  c->flags = kConnIomap | (__BYTE_ORDER == __BIG_ENDIAN ? kConnBigEndian : 0);
  c->credits = htobe16(s->rq_size);
  c->iomap_size = uint8_t(value_to_scale(s->target_iomap_size, 8));
  c->target_sgl = {htobe64(uintptr_t(s->target_sgl)), htobe32(s->target_mr->rkey), htobe32(kSglEntries)};
  c->data_buf = {htobe64(uintptr_t(s->rbuf)), htobe32(s->rmr->rkey), htobe32(s->rbuf_size / 2)};
}

// The peer's rings as its ConnData names them; false if it is no rsocket of version 1.
bool save_conn_data(Socket* s, const void* data, size_t len) {
  if (!data || len < sizeof(ConnData)) return false;
  ConnData c;
  std::memcpy(&c, data, sizeof c);
  if (c.version != 1) return false;
  s->remote_sgl = {be64toh(c.target_sgl.addr), be32toh(c.target_sgl.key), be32toh(c.target_sgl.length)};
  if (!s->remote_sgl.length) return false;
  s->remote_sge = 1;  // entry 0 holds the first half already
  s->swap = bool(c.flags & kConnBigEndian) != (__BYTE_ORDER == __BIG_ENDIAN);
  if (c.flags & kConnIomap) {
    s->remote_iomap = {s->remote_sgl.addr + sizeof(WireSge) * s->remote_sgl.length, s->remote_sgl.key,
                       uint32_t(scale_to_value(c.iomap_size, 8))};
  }
  s->target_sgl[0] = {be64toh(c.data_buf.addr), be32toh(c.data_buf.key), be32toh(c.data_buf.length)};
  s->sseq_comp = be16toh(c.credits);
  return true;
}
}  // namespace

int fail(int e) {
  errno = e;
  return -1;
}

// The iomap table's size travels in a byte: up to 128 as it is, above in units of 256.
int value_to_scale(int value, int bits) {
  return value <= (1 << (bits - 1)) ? value : (1 << (bits - 1)) | (value >> bits);
}
int scale_to_value(int value, int bits) {
  return value <= (1 << (bits - 1)) ? value : (value & ~(1 << (bits - 1))) << bits;
}

void for_each_socket(const std::function<void(Socket*)>& f) {
  std::lock_guard g(g_mu);
  for (auto& [index, s] : g_sockets) f(s);
}

Socket* lookup(int index) {
  std::lock_guard g(g_mu);
  auto it = g_sockets.find(index);
  return it == g_sockets.end() ? nullptr : it->second;
}
void insert(Socket* s) {
  std::lock_guard g(g_mu);
  g_sockets[s->index] = s;
}
void remove(Socket* s) {
  std::lock_guard g(g_mu);
  auto it = g_sockets.find(s->index);
  if (it != g_sockets.end() && it->second == s) g_sockets.erase(it);
}

// A socket's number: a descriptor of its own, readable with the cm channel (the same eventfd),
// numbered above every descriptor open now. librspreload.so opens the program's descriptor
// just before, and librdmacm 44's select() pairs the two by scanning numbers upward and taking
// the first that maps to the socket: a number below the program's, as the lowest free one can
// be, would be taken for it.
int take_index(Socket* s) {
  int above = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) above = std::max(above, atoi(e->d_name));
    closedir(d);
  }
  s->index = fcntl(s->id->channel->fd, F_DUPFD_CLOEXEC, above + 1);
  if (s->index < 0) return -1;
  insert(s);
  return s->index;
}

Socket* make_socket(const Socket* inherit) {
  auto* s = new Socket;
  s->sbuf_size = inherit ? inherit->sbuf_size : kDefWmem;
  s->rbuf_size = inherit ? inherit->rbuf_size : kDefMem;
  s->sq_size = inherit ? inherit->sq_size : kDefQueue;
  s->rq_size = inherit ? inherit->rq_size : kDefQueue;
  s->sq_inline = inherit ? inherit->sq_inline : kDefInline;
  s->target_iomap_size = inherit ? inherit->target_iomap_size : 0;
  if (inherit) {
    s->fs_flags = inherit->fs_flags;
    s->fd_flags = inherit->fd_flags;
    s->so_opts = inherit->so_opts;
    s->tcp_opts = inherit->tcp_opts;
  }
  return s;
}

int set_nonblocking(Socket* s, bool on) {
  auto apply = [on](int fd) {
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
  };
  int ret = 0;
  if (s->id->recv_cq_channel) ret = apply(s->id->recv_cq_channel->fd);
  if (!ret && (s->state < kConnected || s->state == kListening)) ret = apply(s->id->channel->fd);
  return ret;
}

// One step of connecting, as far as it goes without waiting where the socket is non-blocking
// (EINPROGRESS then; the next call continues). The cm id is synchronous: each call that starts
// something also collects its event, or fails with EAGAIN until it comes.
int do_connect(Socket* s) {
  using cma::complete;
  using cma::from;
  std::lock_guard g(s->send_mu);
  int ret = 0;
  auto connected = [&] {
    const auto& conn = s->id->event->param.conn;
    if (!save_conn_data(s, conn.private_data, conn.private_data_len)) return fail(ENOTSUP);
    s->state = kConnectRdwr;
    return 0;
  };
  switch (s->state) {
    case kInit:
    case kBound:
      ret = rdma_resolve_addr(s->id, nullptr, &s->id->route.addr.dst_addr, 2000);
      if (ret && (errno == EAGAIN || errno == EWOULDBLOCK)) s->state = kResolvingAddr;
      if (ret) break;
      [[fallthrough]];
    case kResolvingAddr:
      if (s->state == kResolvingAddr && (ret = complete(from(s->id), RDMA_CM_EVENT_ADDR_RESOLVED))) break;
      ret = rdma_resolve_route(s->id, 2000);
      if (ret && (errno == EAGAIN || errno == EWOULDBLOCK)) s->state = kResolvingRoute;
      if (ret) break;
      [[fallthrough]];
    case kResolvingRoute: {
      if (s->state == kResolvingRoute && (ret = complete(from(s->id), RDMA_CM_EVENT_ROUTE_RESOLVED))) break;
      if ((ret = init_buffers(s))) break;
      ConnData c;
      format_conn_data(s, &c);
      rdma_conn_param p{};
      p.private_data = &c;
      p.private_data_len = sizeof c;
      p.flow_control = 1;
      p.retry_count = 7;
      p.rnr_retry_count = 7;
      p.responder_resources = p.initiator_depth = 2;
      s->state = kConnecting;
      if ((ret = rdma_connect(s->id, &p))) break;
      ret = connected();
      break;
    }
    case kConnecting:
      if (!(ret = complete(from(s->id), RDMA_CM_EVENT_ESTABLISHED))) ret = connected();
      break;
    case kConnectError:
    case kDisconnected:
    case kError:
      return fail(ENOTCONN);
    default:
      return (s->state & kConnected) ? 0 : fail(EINVAL);
  }
  if (ret) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      errno = EINPROGRESS;
    } else {
      s->state = kConnectError;
      s->err = errno;
    }
  }
  return ret;
}

}  // namespace uroce::compat::rs

using namespace uroce::compat::rs;

extern "C" {

int rsocket(int domain, int type, int protocol) {
  int kind = type & ~(SOCK_CLOEXEC | SOCK_NONBLOCK);
  if ((domain != AF_INET && domain != AF_INET6) || kind != SOCK_STREAM || (protocol && protocol != IPPROTO_TCP))
    return fail(ENOTSUP);
  Socket* s = make_socket(nullptr);
  s->fd_flags = (type & SOCK_CLOEXEC) ? FD_CLOEXEC : 0;
  s->fs_flags = (type & SOCK_NONBLOCK) ? O_NONBLOCK : 0;
  if (rdma_create_id(nullptr, &s->id, s, RDMA_PS_TCP)) {
    int e = errno;
    delete s;
    return fail(e);
  }
  s->id->route.addr.src_addr.sa_family = sa_family_t(domain);
  if (take_index(s) < 0) {
    int e = errno;
    free_socket(s);
    return fail(e);
  }
  if (s->fs_flags & O_NONBLOCK) set_nonblocking(s, true);
  return s->index;
}

int rbind(int socket, const sockaddr* addr, socklen_t) {
  Socket* s = lookup(socket);
  if (!s) return fail(EBADF);
  if (rdma_bind_addr(s->id, const_cast<sockaddr*>(addr))) return -1;
  s->state = kBound;
  return 0;
}

int rlisten(int socket, int backlog) {
  Socket* s = lookup(socket);
  if (!s) return fail(EBADF);
  if (s->state == kListening) return 0;
  if (rdma_listen(s->id, backlog)) return -1;
  s->state = kListening;
  return 0;
}

// Takes the next connection request, gives it a QP and rings, and accepts it. The new id has a
// channel of its own (rdma_get_request's), whose fd is the new socket's number.
int raccept(int socket, sockaddr* addr, socklen_t* addrlen) {
  Socket* l = lookup(socket);
  if (!l) return fail(EBADF);
  if (l->state != kListening) return fail(EINVAL);
  for (;;) {
    rdma_cm_id* cid = nullptr;
    if (rdma_get_request(l->id, &cid)) return -1;
    Socket* s = make_socket(l);
    s->id = cid;
    cid->context = s;
    const auto& conn = cid->event->param.conn;
    ConnData c;
    if (init_buffers(s) || !save_conn_data(s, conn.private_data, conn.private_data_len)) {
      rdma_reject(cid, nullptr, 0);
      free_socket(s);
      continue;  // as the kernel drops a connection that failed before accept() saw it
    }
    format_conn_data(s, &c);
    rdma_conn_param p = conn;
    p.private_data = &c;
    p.private_data_len = sizeof c;
    s->state = kAccepting;
    if (rdma_accept(cid, &p)) {
      free_socket(s);
      continue;
    }
    s->state = kConnectRdwr;
    if (take_index(s) < 0) {
      int e = errno;
      free_socket(s);
      return fail(e);
    }
    if (s->fs_flags & O_NONBLOCK) set_nonblocking(s, true);
    if (addr && addrlen) rgetpeername(s->index, addr, addrlen);
    return s->index;
  }
}

int rconnect(int socket, const sockaddr* addr, socklen_t addrlen) {
  Socket* s = lookup(socket);
  if (!s) return fail(EBADF);
  if (!addr || addrlen > sizeof(s->id->route.addr.dst_storage)) return fail(EINVAL);
  if (s->state == kInit || s->state == kBound) std::memcpy(&s->id->route.addr.dst_addr, addr, addrlen);
  return do_connect(s);
}

static int copy_addr(const sockaddr* src, sockaddr* dst, socklen_t* len) {
  if (!dst || !len) return fail(EFAULT);
  socklen_t n = src->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  std::memcpy(dst, src, std::min(*len, n));
  *len = n;
  return 0;
}

int rgetpeername(int socket, sockaddr* addr, socklen_t* addrlen) {
  Socket* s = lookup(socket);
  if (!s) return fail(EBADF);
  return copy_addr(&s->id->route.addr.dst_addr, addr, addrlen);
}

int rgetsockname(int socket, sockaddr* addr, socklen_t* addrlen) {
  Socket* s = lookup(socket);
  if (!s) return fail(EBADF);
  return copy_addr(&s->id->route.addr.src_addr, addr, addrlen);
}

}  // extern "C"
