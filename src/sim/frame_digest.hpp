// The trace digest the scenarios print: every frame the link decides, in order, by its time,
// fate, length and BTH (opcode, QP, PSN; not what follows: a RETH holds buffer addresses, which
// differ from one process to the next). Same run, same digest.
#pragma once
#include <algorithm>
#include <cstdint>

#include "sim/fabric.hpp"
#include "sim/sha256.hpp"

namespace uroce::sim {

inline void digest_frames(sim::LossyLink& link, Sha256& digest) {
  link.set_trace([&digest](const sim::LossyLink::Frame& fr, bool dropped) {
    const uint64_t head[4] = {fr.seq, fr.due, dropped, fr.bytes.size()};
    digest.update(head, sizeof head);
    digest.update(fr.bytes.data(), std::min<size_t>(fr.bytes.size(), 12));
  });
}

}  // namespace uroce::sim
