#include "verbs/mr.hpp"

#include <cerrno>

#include "verbs/region_access.hpp"

namespace uroce::verbs {

const char* to_string(KeyCheck k) {
  switch (k) {
    case KeyCheck::Ok: return "ok";
    case KeyCheck::BadKey: return "unknown key";
    case KeyCheck::WrongPd: return "key belongs to another protection domain";
    case KeyCheck::OutOfBounds: return "access outside the memory region";
    case KeyCheck::NoAccess: return "memory region lacks the access right";
    case KeyCheck::Missing: return "memory of an on-demand region is not mapped";
  }
  return "?";
}

uint32_t MrTable::fresh_key() {
  // Random 32-bit keys: knowing one key says nothing about another.
  for (;;) {
    uint32_t k = uint32_t(rng_());
    if (k != 0 && !by_lkey_.count(Lkey(k)) && !by_rkey_.count(Rkey(k)) && !mws_.count(k >> 8)) return k;
  }
}

void MrTable::count_block(uint32_t key, int d) {
  uint32_t& n = blocks_[key >> 8];
  n += d;
  if (n == 0) blocks_.erase(key >> 8);
}

Status MrTable::validate(uint64_t host, uint64_t length, uint32_t access, uint64_t iova) {
  constexpr uint32_t kKnown = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic |
                              kAccessMwBind | kAccessOnDemand | kAccessFlushGlobal;
  if (access & kAccessFlushPersistent)  // as rxe refuses it for memory that is not persistent
    return make_error(EINVAL, "reg_mr: FLUSH_PERSISTENT needs persistent memory; this device has none");
  if (access & ~kKnown) return make_error(EINVAL, "reg_mr: unsupported access flags");
  if ((access & kAccessOnDemand) && !odp_available())
    return make_error(EOPNOTSUPP, "reg_mr: on-demand paging needs process_vm_readv, which this process may not use");
  // IBA 10.6.3.1: remote write or atomic access requires local write.
  if ((access & (kAccessRemoteWrite | kAccessRemoteAtomic)) && !(access & kAccessLocalWrite))
    return make_error(EINVAL, "reg_mr: REMOTE_WRITE and REMOTE_ATOMIC require LOCAL_WRITE");
  // An implicit on-demand region: the whole address space, from 0.
  const bool implicit = (access & kAccessOnDemand) && host == 0 && iova == 0 && length == UINT64_MAX;
  if (host == 0 && length != 0 && !implicit) return make_error(EINVAL, "reg_mr: null address");
  if (host + length < host) return make_error(EINVAL, "reg_mr: region wraps the address space");
  if (iova + length < iova) return make_error(EINVAL, "reg_mr: the IOVA range wraps");
  return {};
}

Result<Mr> MrTable::reg(PdHandle pd, uint64_t host, uint64_t length, uint32_t access, uint64_t iova) {
  if (Status s = validate(host, length, access, iova); !s) return s.error();
  Lkey lkey(fresh_key());
  Mr& mr = by_lkey_[lkey];  // holds the lkey while the rkey is chosen
  mr = Mr{pd, iova, length, access, lkey, Rkey(fresh_key()), host};
  by_rkey_[mr.rkey] = &mr;
  count_block(lkey.value(), 1);
  count_block(mr.rkey.value(), 1);
  return mr;
}

Result<Mr> MrTable::rereg(Lkey lkey, PdHandle pd, uint64_t host, uint64_t length, uint32_t access, uint64_t iova) {
  auto it = by_lkey_.find(lkey);
  if (it == by_lkey_.end()) return make_error(EINVAL, "rereg_mr: unknown memory region");
  if (Status s = validate(host, length, access, iova); !s) return s.error();
  Mr& mr = it->second;
  if (mr.windows) return make_error(EBUSY, "rereg_mr: memory windows are bound to it");
  mr = Mr{pd, iova, length, access, mr.lkey, mr.rkey, host};
  return mr;
}

bool MrTable::dereg(Lkey lkey) {
  auto it = by_lkey_.find(lkey);
  if (it == by_lkey_.end()) return false;
  if (it->second.windows)
    for (auto& [index, w] : mws_)
      if (w.bound && w.mr == lkey) unbind(w);
  count_block(lkey.value(), -1);
  count_block(it->second.rkey.value(), -1);
  by_rkey_.erase(it->second.rkey);
  by_lkey_.erase(it);
  return true;
}

// ---------------------------------------------------------------- memory windows

Result<Mw> MrTable::alloc_mw(PdHandle pd, uint8_t type) {
  if (type != 1 && type != 2) return make_error(EINVAL, "alloc_mw: type must be 1 or 2");
  for (;;) {
    const uint32_t k = uint32_t(rng_());
    if ((k >> 8) == 0 || blocks_.count(k >> 8) || mws_.count(k >> 8)) continue;
    Mw& w = mws_[k >> 8];
    w.pd = pd;
    w.type = type;
    w.rkey = Rkey(k);
    return w;
  }
}

void MrTable::unbind(Mw& w) {
  if (!w.bound) return;
  auto it = by_lkey_.find(w.mr);
  if (it != by_lkey_.end()) --it->second.windows;
  w.bound = false;
  w.length = 0;
  w.access = 0;
  w.qpn = 0;
}

bool MrTable::dealloc_mw(uint32_t index) {
  auto it = mws_.find(index);
  if (it == mws_.end()) return false;
  unbind(it->second);
  mws_.erase(it);
  return true;
}

const Mw* MrTable::mw(uint32_t index) const {
  auto it = mws_.find(index);
  return it == mws_.end() ? nullptr : &it->second;
}

WcStatus MrTable::bind_mw(PdHandle qp_pd, uint32_t qpn, const MwBind& b) {
  constexpr uint32_t kRemote = kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
  auto it = mws_.find(b.mw);
  if (it == mws_.end()) return WcStatus::MwBindErr;
  Mw& w = it->second;
  if (w.pd != qp_pd || (b.new_rkey >> 8) != w.index() || (w.type == 2 && w.bound)) return WcStatus::MwBindErr;
  if (b.access & ~(kRemote | kAccessLocalWrite)) return WcStatus::MwBindErr;
  if (b.length == 0 && w.type == 1) {  // a zero-length bind unbinds a type 1 window
    unbind(w);
    w.rkey = Rkey(b.new_rkey);
    return WcStatus::Success;
  }
  auto m = by_lkey_.find(Lkey(b.mr_lkey));
  if (m == by_lkey_.end()) return WcStatus::MwBindErr;
  Mr& mr = m->second;
  if (mr.pd != qp_pd || !(mr.access & kAccessMwBind)) return WcStatus::MwBindErr;
  if (b.addr < mr.addr || b.addr + b.length < b.addr || b.addr + b.length > mr.addr + mr.length)
    return WcStatus::MwBindErr;
  // IBA 10.6.7.2.2: what a window may write, the region must let the NIC write.
  if ((b.access & (kAccessRemoteWrite | kAccessRemoteAtomic)) && !(mr.access & kAccessLocalWrite))
    return WcStatus::MwBindErr;
  unbind(w);  // a type 1 window rebinds in one step
  w.bound = true;
  w.rkey = Rkey(b.new_rkey);
  w.mr = mr.lkey;
  w.addr = b.addr;
  w.length = b.length;
  w.access = b.access & kRemote;
  w.qpn = w.type == 2 ? qpn : 0;
  ++mr.windows;
  return WcStatus::Success;
}

bool MrTable::can_invalidate(Rkey rkey, PdHandle pd, uint32_t qpn) const {
  auto it = mws_.find(rkey.value() >> 8);
  if (it == mws_.end()) return false;
  const Mw& w = it->second;
  return w.type == 2 && w.bound && w.rkey == rkey && w.pd == pd && w.qpn == qpn;
}

bool MrTable::invalidate(Rkey rkey, PdHandle pd, uint32_t qpn) {
  if (!can_invalidate(rkey, pd, qpn)) return false;
  unbind(mws_.at(rkey.value() >> 8));
  return true;
}

const Mr* MrTable::by_lkey(Lkey lkey) const {
  auto it = by_lkey_.find(lkey);
  return it == by_lkey_.end() ? nullptr : &it->second;
}

static KeyCheck check_range(const Mr& mr, PdHandle pd, uint64_t addr, uint64_t len, uint32_t need) {
  if (mr.pd != pd) return KeyCheck::WrongPd;
  if (addr < mr.addr || addr + len < addr || addr + len > mr.addr + mr.length) return KeyCheck::OutOfBounds;
  if ((mr.access & need) != need) return KeyCheck::NoAccess;
  return KeyCheck::Ok;
}

// Where the bytes at addr of mr lie (check_range passed).
static uint8_t* host_of(const Mr& mr, uint64_t addr) { return reinterpret_cast<uint8_t*>(mr.host + (addr - mr.addr)); }

KeyCheck MrTable::check_local(Lkey lkey, PdHandle pd, uint64_t addr, uint64_t len, uint32_t need,
                              uint8_t** host, bool* odp) const {
  if (len == 0) {
    if (host) *host = reinterpret_cast<uint8_t*>(addr);  // nothing is touched through it
    return KeyCheck::Ok;
  }
  const Mr* mr = by_lkey(lkey);
  if (!mr) return KeyCheck::BadKey;
  KeyCheck k = check_range(*mr, pd, addr, len, need);
  if (k == KeyCheck::Ok && host) *host = host_of(*mr, addr);
  if (odp) *odp = mr->odp();
  return k;
}

// Through a window: its own PD, QP, bounds and rights, then the region's bytes.
static KeyCheck check_window(const Mw& w, const Mr* mr, PdHandle pd, uint64_t va, uint64_t len, uint32_t need,
                             uint32_t qpn) {
  if (!w.bound || !mr) return KeyCheck::BadKey;
  if (w.pd != pd || (w.type == 2 && w.qpn != qpn)) return KeyCheck::WrongPd;
  if (va < w.addr || va + len < va || va + len > w.addr + w.length) return KeyCheck::OutOfBounds;
  if ((w.access & need) != need) return KeyCheck::NoAccess;
  return KeyCheck::Ok;
}

KeyCheck MrTable::check_remote(Rkey rkey, PdHandle pd, uint64_t va, uint64_t len, uint32_t need,
                               uint8_t** host, uint32_t qpn, bool* odp) const {
  if (len == 0) return KeyCheck::Ok;
  auto it = by_rkey_.find(rkey);
  if (it == by_rkey_.end()) {
    auto w = mws_.find(rkey.value() >> 8);
    if (w == mws_.end() || w->second.rkey != rkey) return KeyCheck::BadKey;
    const Mr* mr = w->second.bound ? by_lkey(w->second.mr) : nullptr;
    KeyCheck k = check_window(w->second, mr, pd, va, len, need, qpn);
    if (k == KeyCheck::Ok && host) *host = host_of(*mr, va);
    if (k == KeyCheck::Ok && odp) *odp = mr->odp();
    return k;
  }
  KeyCheck k = check_range(*it->second, pd, va, len, need);
  if (k == KeyCheck::Ok && host) *host = host_of(*it->second, va);
  if (odp) *odp = it->second->odp();
  return k;
}

KeyCheck MrTable::remote_extent(Rkey rkey, PdHandle pd, uint32_t need, uint32_t qpn, uint64_t& va,
                                uint64_t& len) const {
  if (auto it = by_rkey_.find(rkey); it != by_rkey_.end()) {
    va = it->second->addr;
    len = it->second->length;
    return check_range(*it->second, pd, va, len, need);
  }
  auto w = mws_.find(rkey.value() >> 8);
  if (w == mws_.end() || w->second.rkey != rkey) return KeyCheck::BadKey;
  va = w->second.addr;
  len = w->second.length;
  return check_window(w->second, w->second.bound ? by_lkey(w->second.mr) : nullptr, pd, va, len, need, qpn);
}

}  // namespace uroce::verbs
