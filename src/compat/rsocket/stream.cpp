// rsockets: moving a stream's bytes. A send copies into the send ring (or goes inline) and
// WRITEs with immediate into the ring half the peer offered; a receive copies out of our ring in
// the order the immediates came, and the space it frees goes back to the peer as credits.
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "compat/rsocket/rsocket.hpp"

namespace uroce::compat::rs {

namespace {
bool conn_can_send(Socket* s) { return can_send(s) || !(s->state & kWritable); }
bool conn_has_rdata(Socket* s) { return has_rdata(s) || !(s->state & kReadable); }

size_t total(const iovec* iov, int cnt) {
  size_t n = 0;
  for (int i = 0; i < cnt; ++i) n += iov[i].iov_len;
  return n;
}

// Copies n bytes into the send ring at its cursor, wrapping once: the SGEs that hold them.
int stage(Socket* s, Cursor& from, uint32_t n, ibv_sge sg[2]) {
  uint32_t left = s->sbuf_size - s->scursor;
  uint8_t* at = s->sbuf + s->scursor;
  if (n <= left) {
    from.copy_out(at, n);
    sg[0] = {uintptr_t(at), n, s->smr->lkey};
    s->scursor = n < left ? s->scursor + n : 0;
    return 1;
  }
  from.copy_out(at, left);
  from.copy_out(s->sbuf, n - left);
  sg[0] = {uintptr_t(at), left, s->smr->lkey};
  sg[1] = {uintptr_t(s->sbuf), n - left, s->smr->lkey};
  s->scursor = n - left;
  return 2;
}

}  // namespace

int post_piece(Socket* s, Cursor& from, uint32_t n, ibv_wr_opcode op, uint32_t msg, uint64_t addr, uint32_t rkey) {
  ibv_sge sg[2];
  uint8_t inl[256];
  int nsge, flags = 0;
  if (n <= s->sq_inline && n <= sizeof inl) {
    from.copy_out(inl, n);
    sg[0] = {uintptr_t(inl), n, 0};
    nsge = 1;
    flags = IBV_SEND_INLINE;
  } else {
    nsge = stage(s, from, n, sg);
  }
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = msg;
  wr.sg_list = sg;
  wr.num_sge = nsge;
  wr.opcode = op;
  wr.send_flags = flags;
  if (op == IBV_WR_RDMA_WRITE_WITH_IMM) wr.imm_data = htonl(msg);
  wr.wr.rdma.remote_addr = addr;
  wr.wr.rdma.rkey = rkey;
  --s->sqe_avail;
  s->sbuf_bytes_avail -= n;
  if (int e = ibv_post_send(s->id->qp, &wr, &bad)) return fail(e);
  return 0;
}

int wait_room(Socket* s, int flags) {
  if (can_send(s)) return 0;
  if (int ret = get_comp(s, nonblocking(s, flags), conn_can_send)) return ret;
  return (s->state & kWritable) ? 0 : fail(ECONNRESET);
}

namespace {
// One WRITE with immediate of n bytes into the peer's current ring half.
int write_data(Socket* s, Cursor& from, uint32_t n) {
  WireSge& t = s->target_sgl[s->target_sge];
  uint64_t addr = t.addr;
  ++s->sseq_no;
  t.addr += n;
  t.length -= n;
  if (!t.length && ++s->target_sge == kSglEntries) s->target_sge = 0;
  return post_piece(s, from, n, IBV_WR_RDMA_WRITE_WITH_IMM, pack(kOpData, n), addr, t.key);
}

// The socket for a send or receive: one still connecting (non-blocking) takes its next step
// first, and is not ready (EAGAIN) until it has connected.
Socket* for_io(int socket) {
  Socket* s = lookup(socket);
  if (!s) {
    errno = EBADF;
    return nullptr;
  }
  if ((s->state & kOpening) && do_connect(s)) {
    if (errno == EINPROGRESS) errno = EAGAIN;
    return nullptr;
  }
  return s;
}

ssize_t sendv(int socket, const iovec* iov, int iovcnt, int flags) {
  Socket* s = for_io(socket);
  if (!s) return -1;
  std::lock_guard g(s->send_mu);
  if (s->state == kError && s->err) return fail(s->err);
  if (!(s->state & kWritable)) return fail(s->state & kConnected || s->state >= kDisconnected ? ECONNRESET : ENOTCONN);
  int ret = 0;
  if ((ret = send_iomaps(s, flags))) return ret;
  Cursor from{iov, iovcnt};
  size_t len = total(iov, iovcnt), left = len;
  uint32_t olen = kFirstTransfer;
  while (left) {
    if ((ret = wait_room(s, flags))) break;
    // Small first pieces so the peer starts copying early; then up to 64 KiB each.
    uint32_t n = left > olen ? olen : uint32_t(left);
    if (left > olen && olen < kMaxTransfer) olen <<= 1;
    n = std::min({n, s->sbuf_bytes_avail, s->target_sgl[s->target_sge].length});
    if ((ret = write_data(s, from, n))) break;
    left -= n;
  }
  return ret && left == len ? ret : ssize_t(len - left);
}

ssize_t recvv(int socket, const iovec* iov, int iovcnt, int flags) {
  Socket* s = for_io(socket);
  if (!s) return -1;
  std::lock_guard g(s->recv_mu);
  if (s->state < kConnected) return fail(ENOTCONN);
  size_t len = total(iov, iovcnt), left = len;
  int ret = 0;
  do {
    if (!has_rdata(s) && (ret = get_comp(s, nonblocking(s, flags), conn_has_rdata))) break;
    // A broken connection (a protocol error, a failed WQE) ends with its error, as a reset TCP
    // connection does, once the data that came before it is read.
    if (!has_rdata(s) && s->state == kError) {
      ret = fail(s->err ? s->err : ECONNRESET);
      break;
    }
    Cursor to{iov, iovcnt};
    // Skip what earlier rounds of MSG_WAITALL filled.
    for (size_t done = len - left; done;) {
      size_t take = std::min(done, to.iov->iov_len - to.off);
      done -= take, to.off += take;
      if (to.off == to.iov->iov_len) ++to.iov, --to.cnt, to.off = 0;
    }
    bool peek = flags & MSG_PEEK;
    size_t head = s->rmsg_head, offset = s->rbuf_offset, got = 0;
    while (left - got && head != s->rmsg_tail) {
      uint32_t avail = s->rmsg[head].len;
      uint32_t n = uint32_t(std::min<size_t>(left - got, avail));
      uint32_t end = s->rbuf_size - uint32_t(offset);
      uint32_t first = std::min(n, end);
      to.copy_in(s->rbuf + offset, first);
      to.copy_in(s->rbuf, n - first);
      offset = (offset + n) % s->rbuf_size;
      got += n;
      if (peek) {
        if (n < avail) break;
        if (++head == s->rmsg.size()) head = 0;
        continue;
      }
      s->rbuf_bytes_avail += n;
      if (n < avail) {
        s->rmsg[head].len -= n;
      } else {
        ++s->rseq_no;
        if (++head == s->rmsg.size()) head = 0;
      }
    }
    if (!peek) {
      s->rmsg_head = head;
      s->rbuf_offset = uint32_t(offset);
    }
    left -= got;
    if (peek) break;
  } while (left && (flags & MSG_WAITALL) && (s->state & kReadable));
  return ret && left == len ? ret : ssize_t(len - left);
}
}  // namespace

}  // namespace uroce::compat::rs

using namespace uroce::compat::rs;

extern "C" {

ssize_t rsend(int socket, const void* buf, size_t len, int flags) {
  iovec v{const_cast<void*>(buf), len};
  return sendv(socket, &v, 1, flags);
}
ssize_t rsendto(int socket, const void* buf, size_t len, int flags, const sockaddr*, socklen_t) {
  return rsend(socket, buf, len, flags);  // a stream's peer is fixed; the address is ignored, as TCP does
}
ssize_t rsendmsg(int socket, const msghdr* msg, int flags) {
  if (!msg) return fail(EFAULT);
  return sendv(socket, msg->msg_iov, int(msg->msg_iovlen), flags);
}
ssize_t rwrite(int socket, const void* buf, size_t count) { return rsend(socket, buf, count, 0); }
ssize_t rwritev(int socket, const iovec* iov, int iovcnt) { return sendv(socket, iov, iovcnt, 0); }

ssize_t rrecv(int socket, void* buf, size_t len, int flags) {
  iovec v{buf, len};
  return recvv(socket, &v, 1, flags);
}
ssize_t rrecvfrom(int socket, void* buf, size_t len, int flags, sockaddr* src_addr, socklen_t* addrlen) {
  ssize_t n = rrecv(socket, buf, len, flags);
  if (n >= 0 && src_addr && addrlen) rgetpeername(socket, src_addr, addrlen);
  return n;
}
ssize_t rrecvmsg(int socket, msghdr* msg, int flags) {
  if (!msg) return fail(EFAULT);
  return recvv(socket, msg->msg_iov, int(msg->msg_iovlen), flags);
}
ssize_t rread(int socket, void* buf, size_t count) { return rrecv(socket, buf, count, 0); }
ssize_t rreadv(int socket, const iovec* iov, int iovcnt) { return recvv(socket, iov, iovcnt, 0); }

}  // extern "C"
