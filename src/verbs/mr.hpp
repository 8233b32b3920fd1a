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
};

enum class KeyCheck : uint8_t { Ok, BadKey, WrongPd, OutOfBounds, NoAccess };
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
  bool dereg(Lkey lkey);
  const Mr* by_lkey(Lkey lkey) const;
  size_t size() const { return by_lkey_.size(); }

  // Local SGE: lkey of this PD, [addr, addr+len) inside the MR, and the access it needs
  // (LOCAL_WRITE when the NIC writes into it). Zero-length accesses touch nothing and pass.
  // On Ok, *host (if given) is where the bytes lie.
  KeyCheck check_local(Lkey lkey, PdHandle pd, uint64_t addr, uint64_t len, uint32_t need,
                       uint8_t** host = nullptr) const;
  // Remote access by rkey (IBA C9-88: no check for a zero-length transfer). On Ok, *host is
  // the address to read or write.
  KeyCheck check_remote(Rkey rkey, PdHandle pd, uint64_t va, uint64_t len, uint32_t need,
                        uint8_t** host) const;

 private:
  uint32_t fresh_key();
  static Status validate(uint64_t host, uint64_t length, uint32_t access, uint64_t iova);
  std::mt19937_64 rng_;
  std::unordered_map<Lkey, Mr> by_lkey_;
  // Remote accesses find their MR in one lookup; unordered_map nodes never move, so the
  // pointers stay valid until dereg erases both entries.
  std::unordered_map<Rkey, const Mr*> by_rkey_;
};

}  // namespace uroce::verbs
