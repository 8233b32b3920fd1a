// Tag matching (IBV_SRQT_TM, as mlx5 offers it): an SRQ whose SENDs carry a tag matching
// header and land in the tagged buffer their tag matches (tag_matching.cpp). The responder
// calls in at a SEND's first packet, for the bytes each packet places, and at its completion;
// the requester carries out rendezvous READs and FINs as WQEs of its own.
#pragma once
#include <span>

#include "transport/context.hpp"

namespace uroce::transport::tm {

// A WQE the device posted itself for a rendezvous: never reported on the send CQ. Beyond the
// flags a program may set (post_send refuses them), so a program cannot forge one.
constexpr uint32_t kSendRendezvous = 1u << 31;
// Send queue slots kept for rendezvous on a QP of a tag matching SRQ: a READ and a FIN each.
constexpr uint32_t kRendezvousSlots = 32;

// At a SEND's first packet: reads its TMH and takes the tagged buffer it matches, else an
// ordinary receive of the SRQ (false: none posted, an RNR NAK).
bool take_recv(Context& cx, Qp& qp, const wire::Packet& p);
// What of packet p goes into the receive: a matched message's bytes after its TMH (a
// rendezvous request's header only as far as the buffer holds it), else all of them.
std::span<const uint8_t> placed(const Qp& qp, const wire::Packet& p);
// The message's completion, to the SRQ's CQ: its opcode, flags and tag; a matched rendezvous
// request then starts its READ (or completes RNDV_INCOMPLETE when it cannot).
void complete(Context& cx, Qp& qp, Wc& wc);
// A rendezvous WQE of qp completed with st (engine lock held).
void rendezvous_done(Context& cx, Qp& qp, WrOpcode op, WcStatus st);

}  // namespace uroce::transport::tm
