// Connecting an RC or UC QP: RESET -> INIT -> RTR -> RTS towards a remote endpoint, with the
// attributes each transition requires for its type. Engine lock held by the caller.
#pragma once
#include "transport/protocol_core.hpp"
#include "uroce/types.hpp"

namespace uroce::transport {

Status connect_rc(ProtocolCore& pc, Qp& qp, const Endpoint& remote, uint32_t local_psn,
                  const ConnectOptions& o);

// UD: RESET -> INIT (with its Q_Key) -> RTR -> RTS; datagrams need no remote endpoint.
Status activate_ud(ProtocolCore& pc, Qp& qp, uint32_t qkey, uint32_t sq_psn);

}  // namespace uroce::transport
