// Device counters: one list gives both the fields and their names.
#pragma once
#include <cstdint>

namespace uroce::transport {

#define UROCE_COUNTERS(X)                                                                    \
  X(rx_packets) X(tx_packets) X(rx_bytes) X(tx_bytes) X(rx_bad_icrc) X(rx_malformed)        \
  X(rx_unknown_qp) X(rx_wrong_state) X(rx_bad_source) X(rx_bad_pkey) X(rx_bad_opcode)       \
  X(rx_duplicate) X(rx_out_of_sequence) X(tx_acks) X(tx_naks_seq) X(tx_rnr_naks)            \
  X(tx_naks_fatal) X(rx_naks_seq) X(rx_rnr_naks) X(retransmit_timeouts) X(retransmit_gaps)  \
  X(retransmitted_packets) X(rx_read_dup) X(rx_atomic_replays) X(cq_overruns)              \
  X(tx_pool_exhausted) X(rx_uc_dropped) X(rx_bad_qkey) X(rx_ud_no_recv)       \
  X(rx_dup_unmatched) X(resp_queue_full) X(rx_runt) X(rx_bad_dest) X(rx_ud_too_long) \
  X(rx_icrc_ip_seen) X(rx_icrc_ip_assumed) X(rx_icrc_ip_solved) X(rx_icrc_absent)     \
  X(tx_payload_by_ref) X(rx_ce_marked) X(tx_cnps) X(rx_cnps) X(rx_sr_held) X(tx_sacks)  \
  X(rx_sacks) X(sr_probes) X(sr_lost_resends) X(rx_sr_placed)  \
  X(rx_sr_read_placed) X(sr_read_reasks) X(rx_sr_conflicts) X(rx_sr_unfit) X(rx_runs_whole) X(rx_bad_invalidate) \
  X(rx_mcast) X(rx_mcast_unjoined) X(rx_placement_replays) X(rx_bad_xrc_srq) \
  X(tx_raw_frames) X(tx_raw_dropped) X(rx_raw_frames) X(rx_raw_no_recv) X(rx_raw_not_ready) \
  X(rx_tm_matched) X(rx_tm_unexpected) X(rx_tm_no_tmh) X(tm_rndv_reads) X(tm_rndv_incomplete) \
  X(tx_prio0_bytes) X(tx_prio1_bytes) X(tx_prio2_bytes) X(tx_prio3_bytes) X(tx_prio4_bytes)         \
  X(tx_prio5_bytes) X(tx_prio6_bytes) X(tx_prio7_bytes)

struct Counters {
#define UROCE_COUNTER_FIELD(name) uint64_t name = 0;
  UROCE_COUNTERS(UROCE_COUNTER_FIELD)
#undef UROCE_COUNTER_FIELD

  template <class F>
  void for_each(F&& f) const {
#define UROCE_COUNTER_VISIT(name) f(#name, name);
    UROCE_COUNTERS(UROCE_COUNTER_VISIT)
#undef UROCE_COUNTER_VISIT
  }
};

}  // namespace uroce::transport
