#include "transport/bringup.hpp"

#include "wire/ip_udp.hpp"

namespace uroce::transport {

Status connect_rc(ProtocolCore& pc, Qp& qp, const Endpoint& remote, uint32_t local_psn,
                  const ConnectOptions& o) {
  if (o.reliability)
    if (Status s = pc.set_reliability(qp, *o.reliability); !s) return s;
  if (o.cc)
    if (Status s = pc.set_congestion_control(qp, *o.cc); !s) return s;
  QpAttr a;
  a.qp_state = QpState::Init;
  a.qp_access_flags = o.access;
  if (qp.type() == QpType::UC) a.qp_access_flags &= kAccessLocalWrite | kAccessRemoteWrite;
  if (Status s = pc.modify_qp(qp, a, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags); !s) return s;
  a.qp_state = QpState::Rtr;
  a.path_mtu = o.path_mtu.value_or(pc.config().port_mtu);
  a.dest_qp_num = remote.qpn;
  a.rq_psn = remote.psn;
  a.dgid = remote.gid;
  a.traffic_class = o.traffic_class;
  a.sgid_index = o.sgid_index.value_or(pc.sgid_index_for(remote.gid));
  a.max_dest_rd_atomic = o.max_dest_rd_atomic;
  a.min_rnr_timer = o.min_rnr_timer;
  const bool rc = reliable_connected(qp.type());  // UC has no ACKs: no timers, retries or READ/atomic state
  uint32_t rtr = kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
  if (rc) rtr |= kQpMaxDestRdAtomic | kQpMinRnrTimer;
  if (Status s = pc.modify_qp(qp, a, rtr); !s) return s;
  a.qp_state = QpState::Rts;
  a.sq_psn = local_psn;
  a.timeout = o.timeout;
  a.retry_cnt = o.retry_cnt;
  a.rnr_retry = o.rnr_retry;
  a.max_rd_atomic = o.max_rd_atomic;
  uint32_t rts = kQpState | kQpSqPsn;
  if (rc) rts |= kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
  return pc.modify_qp(qp, a, rts);
}

Status activate_ud(ProtocolCore& pc, Qp& qp, uint32_t qkey, uint32_t sq_psn) {
  QpAttr a;
  a.qp_state = QpState::Init;
  a.qkey = qkey;
  if (Status s = pc.modify_qp(qp, a, kQpState | kQpPkeyIndex | kQpPort | kQpQkey); !s) return s;
  a.qp_state = QpState::Rtr;
  if (Status s = pc.modify_qp(qp, a, kQpState); !s) return s;
  a.qp_state = QpState::Rts;
  a.sq_psn = sq_psn & 0xffffff;
  return pc.modify_qp(qp, a, kQpState | kQpSqPsn);
}

}  // namespace uroce::transport
