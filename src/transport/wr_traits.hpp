// What each work-request opcode is, in one table: the requester, completer, responder and
// posting checks ask here instead of spelling out opcode lists.
#pragma once
#include <array>
#include <cstdint>

#include "uroce/types.hpp"

namespace uroce::transport {

struct WrTraits {
  const char* name;
  WcOpcode wc;      // the opcode of its send completion
  bool send;        // SEND family: consumes a receive WQE at the responder
  bool write;       // RDMA WRITE family: carries a RETH in its first packet
  bool imm;         // carries immediate data in its last packet
  bool read;        // RDMA READ: the responder answers with data
  bool atomic;      // 8-byte atomic: one packet, answered with the original value
  bool uc;          // allowed on UC QPs
  bool ud;          // allowed on UD QPs
  bool local;       // done by the NIC alone (memory windows), no packet: executed in order
  bool rc = true;   // allowed on RC QPs
  // FLUSH, ATOMIC WRITE: one packet, answered by an empty READ RESPONSE ONLY; a responder
  // resource at the peer, as a READ is (IBA 1.5)
  bool empty_reply = false;
  bool rd_atomic() const { return read || atomic || empty_reply; }  // counts against max_rd_atomic
};

inline constexpr std::array<WrTraits, 12> kWrTraits = {{
    // name              wc                    send   write  imm    read   atomic uc     ud     local
    {"RDMA_WRITE",          WcOpcode::RdmaWrite, false, true,  false, false, false, true,  false, false},
    {"RDMA_WRITE_WITH_IMM", WcOpcode::RdmaWrite, false, true,  true,  false, false, true,  false, false},
    {"SEND",                WcOpcode::Send,      true,  false, false, false, false, true,  true,  false},
    {"SEND_WITH_IMM",       WcOpcode::Send,      true,  false, true,  false, false, true,  true,  false},
    {"RDMA_READ",           WcOpcode::RdmaRead,  false, false, false, true,  false, false, false, false},
    {"ATOMIC_CMP_AND_SWP",  WcOpcode::CompSwap,  false, false, false, false, true,  false, false, false},
    {"ATOMIC_FETCH_AND_ADD", WcOpcode::FetchAdd, false, false, false, false, true,  false, false, false},
    {"SEND_WITH_INV",       WcOpcode::Send,      true,  false, false, false, false, false, false, false},
    {"BIND_MW",             WcOpcode::BindMw,    false, false, false, false, false, true,  false, true},
    {"LOCAL_INV",           WcOpcode::LocalInv,  false, false, false, false, false, true,  false, true},
    {"FLUSH",               WcOpcode::Flush,     false, false, false, false, false, false, false, false, true, true},
    {"ATOMIC_WRITE",        WcOpcode::AtomicWrite, false, false, false, false, false, false, false, false, true, true},
}};
static_assert(uint8_t(WrOpcode::AtomicWrite) + 1 == kWrTraits.size(), "one row per WrOpcode, in order");

inline bool known_opcode(WrOpcode op) { return uint8_t(op) < kWrTraits.size(); }
// For a known opcode (post_send refuses the others before anything asks).
inline const WrTraits& traits(WrOpcode op) { return kWrTraits[uint8_t(op)]; }

}  // namespace uroce::transport
