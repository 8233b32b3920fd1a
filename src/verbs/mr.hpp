// Memory regions and their keys: the NIC's protection table. Every local SGE and every remote
// access is checked here (PD, key, bounds, access) before any byte is touched.
#pragma once
#include <cstdint>
#include <random>
#include <unordered_map>

#include "verbs/ids.hpp"
#include "uroce/result.hpp"
#include "uroce/types.hpp"

namespace uroce::verbs {

struct Mr {
  PdHandle pd;
  uint64_t addr = 0;  // the I/O virtual address its users name it by (IOVA): SGEs and remote VAs
  uint64_t length = 0;
  uint32_t access = 0;
  Lkey lkey;
  Rkey rkey;
  uint64_t host = 0;  // where its bytes lie in this process: addr unless registered at another IOVA
  uint32_t windows = 0;  // memory windows bound to it
  bool odp() const { return access & kAccessOnDemand; }  // its bytes move through verbs/region_access.hpp
};

// A memory window (IBA 10.6.7): remote access to part of a region, granted and taken back by
// its owner without reregistering. Its rkey's upper 24 bits are its index, fixed for its life;
// each bind gives the low 8 bits a new value, so an old rkey stops working.
struct Mw {
  PdHandle pd;
  uint8_t type = 1;  // 1, or 2 (IBA's 2B: bound to the QP that bound it)
  Rkey rkey;
  bool bound = false;
  Lkey mr;           // while bound: the region it lies in
  uint64_t addr = 0, length = 0;
  uint32_t access = 0;
  uint32_t qpn = 0;  // type 2, while bound: the one QP that may use it
  uint32_t index() const { return rkey.value() >> 8; }
};

// Missing: the checks passed, but memory of an on-demand region is not mapped (or not writable).
enum class KeyCheck : uint8_t { Ok, BadKey, WrongPd, OutOfBounds, NoAccess, Missing };
const char* to_string(KeyCheck k);

class MrTable {
 public:
  explicit MrTable(uint64_t seed) : rng_(seed) {}

  // Registers [host, host+length), named from `iova` on (a zero-based region: 0).
  Result<Mr> reg(PdHandle pd, uint64_t host, uint64_t length, uint32_t access, uint64_t iova);
  Result<Mr> reg(PdHandle pd, uint64_t addr, uint64_t length, uint32_t access) {
    return reg(pd, addr, length, access, addr);
  }
  // Reregister Memory Region: the region keeps its keys (as rxe's does) and from now on has
  // this PD, range and access; every check after it sees only the new ones.
  Result<Mr> rereg(Lkey lkey, PdHandle pd, uint64_t host, uint64_t length, uint32_t access, uint64_t iova);
  // Also unbinds the windows bound to it (a caller that must refuse instead asks windows_on).
  bool dereg(Lkey lkey);
  const Mr* by_lkey(Lkey lkey) const;
  uint32_t windows_on(Lkey lkey) const {
    const Mr* mr = by_lkey(lkey);
    return mr ? mr->windows : 0;
  }

  // Memory windows, named by index (Mw::index()). A new window is unbound.
  Result<Mw> alloc_mw(PdHandle pd, uint8_t type);
  bool dealloc_mw(uint32_t index);
  const Mw* mw(uint32_t index) const;
  size_t mw_count() const { return mws_.size(); }
  // A BIND_MW work request on a QP of PD qp_pd, number qpn: Success, or MwBindErr with
  // nothing changed (an unknown window or region, another PD, a region that does not allow
  // binding or does not hold the range, rights the region cannot back, a new rkey of another
  // index, a type 2 window already bound).
  WcStatus bind_mw(PdHandle qp_pd, uint32_t qpn, const MwBind& b);
  // LOCAL_INV, or a received SEND with invalidate, on QP qpn of PD pd: true if rkey named a
  // bound type 2 window of that QP, which is now unbound.
  bool invalidate(Rkey rkey, PdHandle pd, uint32_t qpn);
  bool can_invalidate(Rkey rkey, PdHandle pd, uint32_t qpn) const;
  size_t size() const { return by_lkey_.size(); }

  // Local SGE: lkey of this PD, [addr, addr+len) inside the MR, and the access it needs
  // (LOCAL_WRITE when the NIC writes into it). Zero-length accesses touch nothing and pass.
  // On Ok, *host (if given) is where the bytes lie, *odp whether they belong to an on-demand
  // region (to be moved with verbs/region_access.hpp).
  KeyCheck check_local(Lkey lkey, PdHandle pd, uint64_t addr, uint64_t len, uint32_t need,
                       uint8_t** host = nullptr, bool* odp = nullptr) const;
  // Remote access by rkey (IBA C9-88: no check for a zero-length transfer), through a region
  // or a bound window (a type 2 window only from the QP qpn it is bound to). On Ok, *host is
  // the address to read or write.
  KeyCheck check_remote(Rkey rkey, PdHandle pd, uint64_t va, uint64_t len, uint32_t need,
                        uint8_t** host, uint32_t qpn = 0, bool* odp = nullptr) const;
  // What rkey grants, whatever the length: its whole range ([*va, *va + *len), a region's or a
  // bound window's), if it grants `need` to QP qpn of PD pd. A FLUSH of a whole region asks.
  KeyCheck remote_extent(Rkey rkey, PdHandle pd, uint32_t need, uint32_t qpn, uint64_t& va, uint64_t& len) const;

 private:
  uint32_t fresh_key();  // a key in no window's block
  void count_block(uint32_t key, int d);
  void unbind(Mw& w);
  static Status validate(uint64_t host, uint64_t length, uint32_t access, uint64_t iova);
  std::mt19937_64 rng_;
  std::unordered_map<Lkey, Mr> by_lkey_;
  // Remote accesses find their MR in one lookup; unordered_map nodes never move, so the
  // pointers stay valid until dereg erases both entries.
  std::unordered_map<Rkey, const Mr*> by_rkey_;
  std::unordered_map<uint32_t, Mw> mws_;  // by index
  // How many region keys lie in each block of 256 (key >> 8): a window takes a block no
  // region key is in, so that no rkey it takes can be a region's.
  std::unordered_map<uint32_t, uint32_t> blocks_;
};

}  // namespace uroce::verbs
