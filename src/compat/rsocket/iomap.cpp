// rsockets: direct placement (riomap, riowrite). A program maps a buffer of its own at an offset;
// a writable mapping is sent to the peer's iomap table (a WRITE with immediate naming the slot),
// and the peer's riowrite then WRITEs straight into it, without a copy on this side.
#include <sys/mman.h>

#include <cerrno>

#include "compat/rsocket/rsocket.hpp"

namespace uroce::compat::rs {
namespace {
// The peer's table entry that holds offset, as the peer last wrote it; nullptr if none does.
const WireIomap* find(const Socket* s, uint64_t offset) {
  for (int i = 0; i < s->target_iomap_size; ++i) {
    const WireIomap& m = s->target_iomap[i];
    if (m.sge.length && offset >= m.offset && offset - m.offset < m.sge.length) return &m;
  }
  return nullptr;
}
}  // namespace

// Sends the writable mappings not yet sent (send_mu held).
int send_iomaps(Socket* s, int flags) {
  if (!s->iomaps_unsent.load(std::memory_order_acquire)) return 0;  // every send asks
  std::lock_guard g(s->map_mu);
  for (IoMapping& m : s->iomaps) {
    if (m.index < 0 || m.sent) continue;
    if (int ret = wait_room(s, flags)) return ret;
    WireIomap e{m.offset, {uintptr_t(m.mr->addr), m.mr->rkey, uint32_t(m.mr->length)}};
    if (s->swap) {
      e = {__builtin_bswap64(e.offset),
           {__builtin_bswap64(e.sge.addr), __builtin_bswap32(e.sge.key), __builtin_bswap32(e.sge.length)}};
    }
    iovec v{&e, sizeof e};
    Cursor from{&v, 1};
    ++s->sseq_no;
    uint64_t at = s->remote_iomap.addr + uint64_t(m.index) * sizeof(WireIomap);
    if (int ret = post_piece(s, from, sizeof e, IBV_WR_RDMA_WRITE_WITH_IMM, pack(kOpIomapSgl, uint32_t(m.index)), at,
                             s->remote_iomap.key))
      return ret;
    m.sent = true;
  }
  s->iomaps_unsent.store(false, std::memory_order_release);
  return 0;
}

}  // namespace uroce::compat::rs

using namespace uroce::compat::rs;

extern "C" {

off_t riomap(int socket, void* buf, size_t len, int prot, int, off_t offset) {
  Socket* s = lookup(socket);
  if (!s) return fail(EBADF);
  if (!s->id->pd || (prot & ~PROT_WRITE) || !buf || !len) return fail(EINVAL);
  std::lock_guard g(s->map_mu);
  IoMapping m;
  int access = IBV_ACCESS_LOCAL_WRITE;
  if (prot & PROT_WRITE) {
    // A slot of the peer's table that no mapping of ours holds.
    for (int i = 0; i < int(s->remote_iomap.length) && m.index < 0; ++i) {
      bool taken = false;
      for (const IoMapping& o : s->iomaps) taken |= o.index == i;
      if (!taken) m.index = i;
    }
    if (m.index < 0) return fail(ENOMEM);
    access |= IBV_ACCESS_REMOTE_WRITE;
  }
  m.mr = ibv_reg_mr(s->id->pd, buf, len, access);
  if (!m.mr) return -1;
  m.offset = offset == -1 ? uintptr_t(buf) : uint64_t(offset);
  s->iomaps.push_back(m);
  if (m.index >= 0) s->iomaps_unsent.store(true, std::memory_order_release);
  return off_t(m.offset);
}

int riounmap(int socket, void* buf, size_t len) {
  Socket* s = lookup(socket);
  if (!s) return fail(EBADF);
  std::lock_guard g(s->map_mu);
  for (auto it = s->iomaps.begin(); it != s->iomaps.end(); ++it) {
    if (it->mr->addr != buf || it->mr->length != len) continue;
    ibv_dereg_mr(it->mr);
    s->iomaps.erase(it);
    return 0;
  }
  return fail(EINVAL);
}

size_t riowrite(int socket, const void* buf, size_t count, off_t offset, int flags) {
  Socket* s = lookup(socket);
  if (!s) return size_t(fail(EBADF));
  std::lock_guard g(s->send_mu);
  if (!(s->state & kWritable)) return size_t(fail(ECONNRESET));
  int ret = send_iomaps(s, flags);
  iovec v{const_cast<void*>(buf), count};
  Cursor from{&v, 1};
  size_t left = count;
  uint32_t olen = kFirstTransfer;
  auto off = uint64_t(offset);
  while (!ret && left) {
    const WireIomap* m = find(s, off);
    if (!m) {
      if (left == count) ret = fail(EINVAL);
      break;
    }
    if ((ret = wait_room(s, flags))) break;
    uint32_t n = left > olen ? olen : uint32_t(left);
    if (left > olen && olen < kMaxTransfer) olen <<= 1;
    n = uint32_t(std::min<uint64_t>({n, s->sbuf_bytes_avail, m->offset + m->sge.length - off}));
    if ((ret = post_piece(s, from, n, IBV_WR_RDMA_WRITE, pack(kOpWrite, n), m->sge.addr + (off - m->offset),
                          m->sge.key)))
      break;
    left -= n;
    off += n;
  }
  return ret && left == count ? size_t(ret) : count - left;
}

}  // extern "C"
