#include "verbs/mr.hpp"

#include <cerrno>

namespace uroce::verbs {

const char* to_string(KeyCheck k) {
  switch (k) {
    case KeyCheck::Ok: return "ok";
    case KeyCheck::BadKey: return "unknown key";
    case KeyCheck::WrongPd: return "key belongs to another protection domain";
    case KeyCheck::OutOfBounds: return "access outside the memory region";
    case KeyCheck::NoAccess: return "memory region lacks the access right";
  }
  return "?";
}

uint32_t MrTable::fresh_key() {
  // Random 32-bit keys: knowing one key says nothing about another.
  for (;;) {
    uint32_t k = uint32_t(rng_());
    if (k != 0 && !by_lkey_.count(Lkey(k)) && !by_rkey_.count(Rkey(k))) return k;
  }
}

Status MrTable::validate(uint64_t host, uint64_t length, uint32_t access, uint64_t iova) {
  constexpr uint32_t kKnown = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
  if (access & ~kKnown) return make_error(EINVAL, "reg_mr: unsupported access flags");
  // IBA 10.6.3.1: remote write or atomic access requires local write.
  if ((access & (kAccessRemoteWrite | kAccessRemoteAtomic)) && !(access & kAccessLocalWrite))
    return make_error(EINVAL, "reg_mr: REMOTE_WRITE and REMOTE_ATOMIC require LOCAL_WRITE");
  if (host == 0 && length != 0) return make_error(EINVAL, "reg_mr: null address");
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
  return mr;
}

Result<Mr> MrTable::rereg(Lkey lkey, PdHandle pd, uint64_t host, uint64_t length, uint32_t access, uint64_t iova) {
  auto it = by_lkey_.find(lkey);
  if (it == by_lkey_.end()) return make_error(EINVAL, "rereg_mr: unknown memory region");
  if (Status s = validate(host, length, access, iova); !s) return s.error();
  Mr& mr = it->second;
  mr = Mr{pd, iova, length, access, mr.lkey, mr.rkey, host};
  return mr;
}

bool MrTable::dereg(Lkey lkey) {
  auto it = by_lkey_.find(lkey);
  if (it == by_lkey_.end()) return false;
  by_rkey_.erase(it->second.rkey);
  by_lkey_.erase(it);
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
                              uint8_t** host) const {
  if (len == 0) {
    if (host) *host = reinterpret_cast<uint8_t*>(addr);  // nothing is touched through it
    return KeyCheck::Ok;
  }
  const Mr* mr = by_lkey(lkey);
  if (!mr) return KeyCheck::BadKey;
  KeyCheck k = check_range(*mr, pd, addr, len, need);
  if (k == KeyCheck::Ok && host) *host = host_of(*mr, addr);
  return k;
}

KeyCheck MrTable::check_remote(Rkey rkey, PdHandle pd, uint64_t va, uint64_t len, uint32_t need,
                               uint8_t** host) const {
  if (len == 0) return KeyCheck::Ok;
  auto it = by_rkey_.find(rkey);
  if (it == by_rkey_.end()) return KeyCheck::BadKey;
  KeyCheck k = check_range(*it->second, pd, va, len, need);
  if (k == KeyCheck::Ok && host) *host = host_of(*it->second, va);
  return k;
}

}  // namespace uroce::verbs
