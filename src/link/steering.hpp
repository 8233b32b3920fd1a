// Flow steering for a host NIC shared by several processes (as a NIC's steering rules pick a
// receive queue by destination QP). A device's receive sockets form one SO_REUSEPORT group of
// kSlots sockets, all created and held by the host NIC daemon (uroced); the kernel picks the
// socket for each datagram with a classic BPF program on the BTH: the slot in the destination
// QPN's top bits. Each process is given the socket of its slot and numbers its QPs (and its CM
// communication IDs) inside that slot, so a peer still addresses a QP by GID and QPN only.
// Slot 0 is the daemon's: QP1's MADs, which it passes on by service or communication ID, and
// the packets a flow rule may match (the daemon's flow table puts its tests in front of this
// program: nicd/rules.hpp).
#pragma once
#include <cstdint>
#include <linux/filter.h>
#include <vector>

namespace uroce::link::steering {

inline constexpr int kSlotBits = 6;
inline constexpr uint32_t kSlots = 1u << kSlotBits;       // 63 processes per device, slot 0 the daemon's
inline constexpr int kQpnLocalBits = 24 - kSlotBits;       // 262,144 QPNs per process
inline constexpr int kCommIdLocalBits = 32 - kSlotBits;

inline uint32_t slot_of_qpn(uint32_t qpn) { return (qpn & 0xffffff) >> kQpnLocalBits; }
inline uint32_t slot_of_comm_id(uint32_t id) { return id >> kCommIdLocalBits; }

// For SO_ATTACH_REUSEPORT_CBPF: the kernel runs it with the data at the UDP payload, and sends
// the datagram to the group's socket of that index (all kSlots exist, so every index is one).
// With UDP GRO a run of one flow's datagrams goes where its first one's BTH says.
std::vector<sock_filter> reuseport_program();

}  // namespace uroce::link::steering
