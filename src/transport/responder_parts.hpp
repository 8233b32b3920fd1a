// What responder.cpp shares with rd_atomic.cpp, which executes the requests that take a
// responder resource and answers their duplicates: its NAKs and its queue of answers.
#pragma once
#include <cstddef>

#include "transport/roles.hpp"

namespace uroce::transport::resp {

// Class A and C (IBA 9.9.3): NAK, then the QP goes to ERR (a request on trial is dropped).
Verdict fatal_nak(Context& cx, Qp& qp, wire::Psn psn, wire::NakCode code);
// READ, atomic, FLUSH and ATOMIC WRITE answers queued and not yet sent: what
// max_dest_rd_atomic bounds.
size_t rd_atomic_jobs(const Qp& qp);
// Duplicates' answers queued: bounded by the number of resources.
size_t duplicate_jobs(const Qp& qp);
// Queues the READ response(s) for [va, va + len) at psn; len 0: one empty READ RESPONSE ONLY.
void queue_read(Context& cx, Qp& qp, wire::Psn psn, uint64_t va, verbs::Rkey rkey, uint32_t len, bool dup);

// rd_atomic.cpp: READ, the atomics, FLUSH and ATOMIC WRITE in sequence, and a duplicate of any.
Verdict do_read(Context& cx, Qp& qp, const wire::Packet& p);
Verdict do_atomic(Context& cx, Qp& qp, const wire::Packet& p);
Verdict do_flush(Context& cx, Qp& qp, const wire::Packet& p);
Verdict do_atomic_write(Context& cx, Qp& qp, const wire::Packet& p);
Verdict on_duplicate_rd_atomic(Context& cx, Qp& qp, const wire::Packet& p);

}  // namespace uroce::transport::resp
