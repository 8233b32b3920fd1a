// Requests that take a responder resource (IBA 9.7.5.1, 9.7.6.1.4): RDMA READ, the atomics,
// and IBA 1.5's memory placement operations as rxe numbers them, RDMA FLUSH (the writes before
// it made visible at a placement type) and RDMA ATOMIC WRITE (8 bytes stored at once), which
// are answered by a READ RESPONSE ONLY without payload. Each executed one is remembered; a
// duplicate that repeats one is answered from it: a READ is read again, the others are never
// executed twice.
//
// Checked in responder.cpp's order (IBA 9.7.5.2): the QP's rights and max_dest_rd_atomic and
// the request's form (class C, Invalid Request NAK), then the key, bounds and region's rights
// (class C, Remote Access Error NAK).
#include <atomic>
#include <cstring>

#include "transport/recovery/recovery.hpp"
#include "transport/responder_parts.hpp"
#include "verbs/region_access.hpp"

namespace uroce::transport::resp {

using verbs::Rkey;
using wire::NakCode;
using wire::Opcode;
using wire::Psn;

namespace {

bool check_read(Context& cx, Qp& qp, verbs::PdHandle pd, uint64_t va, Rkey rkey, uint32_t len) {
  return cx.check_remote(qp, pd, rkey, va, len, kAccessRemoteRead) == verbs::KeyCheck::Ok;
}

// An 8-byte word aligned at its IOVA but not where it lies (a region registered at an IOVA
// aligned otherwise than its memory): no atomic access there, as rxe checks the address too.
bool misaligned(const uint8_t* host) { return reinterpret_cast<uintptr_t>(host) & 7; }

// Keeps what was executed, for a duplicate of it: the last max_dest_rd_atomic.
void remember(Qp& qp, const RdAtomicResource& res) {
  auto& r = qp.resp;
  if (r.resources.empty()) return;
  RdAtomicResource& slot = r.resources[r.resource_next++ % r.resources.size()];
  slot = res;
  slot.pd = qp.pd();
}

}  // namespace

Verdict do_read(Context& cx, Qp& qp, const wire::Packet& p) {
  auto& r = qp.resp;
  if (!(qp.attr().qp_access_flags & kAccessRemoteRead) || p.reth.dma_len > kMaxMessage ||
      rd_atomic_jobs(qp) >= qp.attr().max_dest_rd_atomic) {
    return fatal_nak(cx, qp, p.bth.psn, NakCode::InvalidRequest);  // class C
  }
  if (!check_read(cx, qp, qp.pd(), p.reth.va, Rkey(p.reth.rkey), p.reth.dma_len)) {
    return fatal_nak(cx, qp, p.bth.psn, NakCode::RemoteAccessError);  // class C
  }
  uint32_t n = packets_for(p.reth.dma_len, qp.mtu());
  remember(qp, {true, ResKind::Read, p.bth.psn, n, p.reth.va, Rkey(p.reth.rkey), p.reth.dma_len, 0});
  queue_read(cx, qp, p.bth.psn, p.reth.va, Rkey(p.reth.rkey), p.reth.dma_len, false);
  r.epsn = p.bth.psn + n;
  ++r.msn;
  return Verdict::Execute;
}

Verdict do_atomic(Context& cx, Qp& qp, const wire::Packet& p) {
  auto& r = qp.resp;
  if (!(qp.attr().qp_access_flags & kAccessRemoteAtomic) || (p.atomic.va & 7) ||
      rd_atomic_jobs(qp) >= qp.attr().max_dest_rd_atomic) {
    return fatal_nak(cx, qp, p.bth.psn, NakCode::InvalidRequest);  // misaligned, not allowed, too many: class C
  }
  uint8_t* host = nullptr;
  bool odp = false;
  uint64_t orig = 0;
  const verbs::KeyCheck k = cx.check_remote(qp, Rkey(p.atomic.rkey), p.atomic.va, 8, kAccessRemoteAtomic, &host, &odp);
  if (k == verbs::KeyCheck::Ok && misaligned(host)) return fatal_nak(cx, qp, p.bth.psn, NakCode::InvalidRequest);
  if (k != verbs::KeyCheck::Ok ||
      !verbs::region_atomic(host, odp, p.bth.opcode == Opcode::RC_COMPARE_SWAP, p.atomic.compare, p.atomic.swap_add,
                            orig)) {
    return fatal_nak(cx, qp, p.bth.psn, NakCode::RemoteAccessError);  // class C
  }
  remember(qp, {true, ResKind::Atomic, p.bth.psn, 1, p.atomic.va, Rkey(p.atomic.rkey), 8, orig});
  RespJob j;
  j.kind = RespJobKind::AtomicAck;
  j.psn = p.bth.psn;
  j.atomic_orig = orig;
  r.jobs.push_back(j);
  cx.schedule(qp);
  r.epsn = p.bth.psn + 1;
  ++r.msn;
  return Verdict::Execute;
}

namespace {

// A FETH: placement type in bits 3-0, selectivity level in bits 5-4; the other bits reserved.
uint32_t feth_type(uint32_t feth) { return feth & 0xf; }
uint32_t feth_level(uint32_t feth) { return (feth >> 4) & 0x3; }

// The rights a FLUSH of these placement types needs, of the QP and of the region.
uint32_t flush_rights(uint32_t type) {
  return (type & kFlushGlobal ? uint32_t(kAccessFlushGlobal) : 0u) |
         (type & kFlushPersistent ? uint32_t(kAccessFlushPersistent) : 0u);
}

// Executed: remembered for a duplicate, answered with an empty READ RESPONSE ONLY.
Verdict executed(Context& cx, Qp& qp, const wire::Packet& p, uint64_t what) {
  remember(qp, {true, ResKind::Placement, p.bth.psn, 1, p.reth.va, Rkey(p.reth.rkey), p.reth.dma_len, what});
  queue_read(cx, qp, p.bth.psn, 0, Rkey(p.reth.rkey), 0, false);
  qp.resp.epsn = p.bth.psn + 1;
  ++qp.resp.msn;
  return Verdict::Execute;
}

}  // namespace

Verdict do_flush(Context& cx, Qp& qp, const wire::Packet& p) {
  const uint32_t type = feth_type(p.feth), level = feth_level(p.feth), need = flush_rights(type);
  if (!type || (type & ~uint32_t(kFlushGlobal | kFlushPersistent)) || (p.feth & ~0x3fu) ||
      level > uint32_t(FlushLevel::Region) || (qp.attr().qp_access_flags & need) != need ||
      rd_atomic_jobs(qp) >= qp.attr().max_dest_rd_atomic)
    return fatal_nak(cx, qp, p.bth.psn, NakCode::InvalidRequest);  // class C
  // The key must grant the rights over its whole range (a whole-region FLUSH) or over the
  // range named, even an empty one.
  uint64_t va = 0, len = 0;
  verbs::KeyCheck k = cx.mrs().remote_extent(Rkey(p.reth.rkey), qp.pd(), need, qp.qpn().value(), va, len);
  if (k == verbs::KeyCheck::Ok && level == uint32_t(FlushLevel::Range) &&
      (p.reth.va < va || p.reth.va - va > len || p.reth.dma_len > len - (p.reth.va - va)))
    k = verbs::KeyCheck::OutOfBounds;
  if (k != verbs::KeyCheck::Ok) return fatal_nak(cx, qp, p.bth.psn, NakCode::RemoteAccessError);  // class C
  // Global visibility: every earlier request of this QP was placed with ordinary stores by this
  // thread; the fence orders them before the answer, on any CPU. Persistence cannot be asked
  // for: no region has the right (MrTable refuses it).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return executed(cx, qp, p, p.feth);
}

Verdict do_atomic_write(Context& cx, Qp& qp, const wire::Packet& p) {
  if (!(qp.attr().qp_access_flags & kAccessRemoteWrite) || p.reth.dma_len != 8 || p.payload.size() != 8 ||
      (p.reth.va & 7) || rd_atomic_jobs(qp) >= qp.attr().max_dest_rd_atomic)
    return fatal_nak(cx, qp, p.bth.psn, NakCode::InvalidRequest);  // not 8 aligned bytes, not allowed: class C
  uint8_t* host = nullptr;
  bool odp = false;
  const verbs::KeyCheck k = cx.check_remote(qp, Rkey(p.reth.rkey), p.reth.va, 8, kAccessRemoteWrite, &host, &odp);
  if (k == verbs::KeyCheck::Ok && misaligned(host)) return fatal_nak(cx, qp, p.bth.psn, NakCode::InvalidRequest);
  if (k != verbs::KeyCheck::Ok || !verbs::region_atomic_store(host, odp, p.payload.data()))
    return fatal_nak(cx, qp, p.bth.psn, NakCode::RemoteAccessError);  // class C
  uint64_t bytes;
  std::memcpy(&bytes, p.payload.data(), 8);
  return executed(cx, qp, p, bytes);
}

namespace {

// Whether a duplicate FLUSH or ATOMIC WRITE repeats what `res` executed.
bool same_placement(const RdAtomicResource& res, const wire::Packet& p) {
  uint64_t what = p.feth;
  if (p.info().flags & wire::kAtomicWrite) {
    if (p.payload.size() != 8) return false;
    std::memcpy(&what, p.payload.data(), 8);
  }
  return res.psn == p.bth.psn && Rkey(p.reth.rkey) == res.rkey && p.reth.va == res.va &&
         p.reth.dma_len == res.len && what == res.orig;
}

ResKind resource_kind(const wire::Packet& p) {
  const uint32_t f = p.info().flags;
  return f & wire::kRead ? ResKind::Read : f & wire::kAtomic ? ResKind::Atomic : ResKind::Placement;
}

const RdAtomicResource* find_resource(const Qp& qp, Psn psn, ResKind kind) {
  for (const auto& res : qp.resp.resources)
    if (res.valid && res.kind == kind && Psn::distance(res.psn, psn) < res.npkts) return &res;
  return nullptr;
}

// True if a queued job will still send the response with this PSN.
bool will_answer(const Qp& qp, Psn psn) {
  const uint32_t mtu = qp.mtu();
  for (const RespJob& j : qp.resp.jobs) {
    if (j.kind == RespJobKind::Aeth || j.kind == RespJobKind::Sack) continue;
    uint32_t first_unsent = j.kind == RespJobKind::Read ? j.sent / mtu : 0;
    uint32_t n = j.kind == RespJobKind::Read ? packets_for(j.len, mtu) : 1;
    uint32_t k = Psn::distance(j.psn, psn);
    if (k < n && k >= first_unsent) return true;
  }
  return false;
}

}  // namespace

// A duplicate READ, atomic, FLUSH or ATOMIC WRITE is answered again only if it repeats (the
// rest of) one of the requests this responder executed; anything else is dropped (IBA 9.7.5.1).
// Only a READ is executed again; the others are answered from their resource.
Verdict on_duplicate_rd_atomic(Context& cx, Qp& qp, const wire::Packet& p) {
  const ResKind kind = resource_kind(p);
  const bool atomic = kind == ResKind::Atomic;
  const RdAtomicResource* res = find_resource(qp, p.bth.psn, kind);
  uint64_t off = res ? uint64_t(Psn::distance(res->psn, p.bth.psn)) * qp.mtu() : 0;
  // The rest of the READ from this PSN on; or, from a requester under selective repeat, any
  // whole packets of it (it asks again only for the responses it lacks).
  const auto length_ok = [&] {
    if (p.reth.dma_len == res->len - off) return true;
    return recovery::takes_partial_read(qp, p) && p.reth.dma_len < res->len - off &&
           p.reth.dma_len % qp.mtu() == 0 && p.reth.dma_len;
  };
  bool match = res && (atomic                       ? p.atomic.va == res->va && Rkey(p.atomic.rkey) == res->rkey
                       : kind == ResKind::Placement ? same_placement(*res, p)
                                                    : Rkey(p.reth.rkey) == res->rkey && p.reth.va == res->va + off &&
                                                          off <= res->len && length_ok());
  if (!match) {
    ++cx.ctr().rx_dup_unmatched;
    return Verdict::DuplicateDropped;
  }
  if (will_answer(qp, p.bth.psn)) return Verdict::DuplicateDropped;  // its answer is still queued
  if (duplicate_jobs(qp) >= qp.resp.resources.size()) {
    ++cx.ctr().resp_queue_full;
    return Verdict::DuplicateDropped;
  }
  if (atomic) {
    ++cx.ctr().rx_atomic_replays;
    RespJob j;
    j.kind = RespJobKind::AtomicAck;
    j.psn = p.bth.psn;
    j.atomic_orig = res->orig;
    j.dup = true;
    qp.resp.jobs.push_back(j);
    cx.schedule(qp);
    return Verdict::Duplicate;
  }
  if (kind == ResKind::Placement) {
    ++cx.ctr().rx_placement_replays;
    queue_read(cx, qp, p.bth.psn, 0, res->rkey, 0, true);
    return Verdict::Duplicate;
  }
  const uint32_t len = p.reth.dma_len;
  if (!check_read(cx, qp, res->pd, res->va + off, res->rkey, len)) return Verdict::DuplicateDropped;  // deregistered since
  ++cx.ctr().rx_read_dup;
  queue_read(cx, qp, p.bth.psn, res->va + off, res->rkey, len, true);
  qp.resp.jobs.back().pd = res->pd;  // read where it was read first
  return Verdict::Duplicate;
}


}  // namespace uroce::transport::resp
