// What the responder decided about one request packet, or the completer about one response,
// by name: tests assert it and a trace hook (CoreConfig::trace) can log it.
#pragma once
#include <cstdint>

namespace uroce::transport {

enum class Verdict : uint8_t {
  Execute,          // in sequence and valid: carried out
  Duplicate,        // already executed: re-ACKed, or its READ/atomic answered again
  DuplicateDropped, // an old READ/atomic that repeats nothing executed, or already being answered
  NakSequence,      // the first packet past a gap: PSN sequence error NAK (C9-91)
  OutOfSequence,    // a later packet of the same gap: dropped silently
  Rnr,              // no receive WQE: RNR NAK
  NakInvalid,       // invalid request: NAK, the QP goes to ERR
  NakAccess,        // remote access error: NAK, the QP goes to ERR
  NakOperational,   // remote operational error: NAK, the QP goes to ERR
  UcDropped,        // UC: the packet of a damaged or out-of-sequence message, dropped
  Dying,            // a fatal NAK waits to leave: nothing more is taken
  Held,             // selective repeat: past a hole, kept until the hole is filled
  Conflict,         // selective repeat: another request held for its PSN; neither is trusted, both dropped
  HeldUnfit,        // selective repeat: a held request that does not fit where its turn came: dropped
  // The completer, on ACKs, NAKs, READ responses and atomic ACKs:
  Acked,            // moved the send queue on: WQEs retired, READ data or an atomic result placed
  Stale,            // an old or repeated answer: nothing new
  Unexpected,       // a PSN never sent, or a response of the wrong shape: dropped
  GapRetry,         // responses are missing before it (implied NAK): resend from the first
  RnrWait,          // RNR NAK: wait out its timer, then resend
  GoBack,           // PSN sequence NAK: resend from its PSN
  Fatal,            // the QP went to ERR (a fatal NAK, retries exhausted, a local protection error)
  FatalPending,     // a fatal NAK waits for READ responses missing before it
  Resend,           // a selective ACK shows holes: only those are sent again
};

constexpr const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::Execute: return "execute";
    case Verdict::Duplicate: return "duplicate";
    case Verdict::DuplicateDropped: return "duplicate-dropped";
    case Verdict::NakSequence: return "nak-sequence";
    case Verdict::OutOfSequence: return "out-of-sequence";
    case Verdict::Rnr: return "rnr";
    case Verdict::NakInvalid: return "nak-invalid";
    case Verdict::NakAccess: return "nak-access";
    case Verdict::NakOperational: return "nak-operational";
    case Verdict::UcDropped: return "uc-dropped";
    case Verdict::Dying: return "dying";
    case Verdict::Held: return "held";
    case Verdict::Conflict: return "conflict";
    case Verdict::HeldUnfit: return "held-unfit";
    case Verdict::Acked: return "acked";
    case Verdict::Stale: return "stale";
    case Verdict::Unexpected: return "unexpected";
    case Verdict::GapRetry: return "gap-retry";
    case Verdict::RnrWait: return "rnr-wait";
    case Verdict::GoBack: return "go-back";
    case Verdict::Fatal: return "fatal";
    case Verdict::FatalPending: return "fatal-pending";
    case Verdict::Resend: return "resend";
  }
  return "?";
}

}  // namespace uroce::transport
