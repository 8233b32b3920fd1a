// A same-host channel's parts (shm_link.hpp), which shm_link.cpp and shm_place.cpp share.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "link/shm_backlog.hpp"
#include "link/shm_link.hpp"
#include "link/shm_ring.hpp"
#include "wire/icrc.hpp"
#include "wire/opcode.hpp"

namespace uroce::link {

namespace shm {
// A peer's file mapped for reading placed payloads out of it (link/shm_place.cpp).
struct Import {
  uint64_t dev = 0, ino = 0;
  uint64_t file_offset = 0;  // of the window mapped at base
  const uint8_t* base = nullptr;
  size_t size = 0;
  uint64_t used_ns = 0;  // when it was used last: the oldest goes first, and any idle for long
};
// The ICRC a packet built for shared memory lacks, for the wire or a capture.
inline void complete_icrc(wire::PacketBuf& p) {
  if (!p.icrc_skipped) return;
  wire::icrc_fill(p, p.len - wire::kIcrcLen);
  p.icrc_skipped = false;
}

}  // namespace shm

struct SameHostLink::Channel {
  std::vector<Gid> peer;  // the other device's addresses
  uint32_t peer_slot = 0;  // and its slot on them
  shm::Area* area = nullptr;
  shm::Ring* tx = nullptr;
  shm::Ring* rx = nullptr;
  int sock = -1, tx_efd = -1, rx_efd = -1;
  std::atomic<bool> dead{false};
  bool retired = false;  // dead and read to the end: the watcher frees it (under mu_)
  bool adopted = false;  // engine side: seen by refresh()
  shm::Backlog backlog;  // engine side: waiting for room in tx
  uint32_t tx_tail = 0, tx_head_seen = 0;  // engine side: see shm::Ring::push
  uint32_t head_checked = 0;  // engine side: tx's head at held_moved_at's last look
  uint64_t moved_at = 0;      // and the last look that found it further on
  pid_t peer_pid = 0;         // the peer process, if its files can be opened from here (placed payloads)
  std::vector<shm::Import> imports;  // engine side: the peer's files mapped for placed payloads
  uint64_t zeroed_seen = 0;           // engine side: mappings zeroed in the process, as of imports
  uint64_t placed_again_at = 0;       // engine side: after a refusal, when placed payloads are taken again
  uint32_t refusals = 0;              // engine side: refusals in a row, without a placed payload taken
};

}  // namespace uroce::link
