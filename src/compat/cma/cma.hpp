// uroce's librdmacm.so.1: rdma_cm ids, event channels and the IB CM as RoCE speaks it, on the
// devices of uroce's libibverbs.so.1. The kernel's rdma_cm and librdmacm split this work between
// them; here one library does both, with the CM (uroce::ConnectionManager) of the device's QP1
// on the wire. Internal to the drop-in.
#pragma once
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "uroce/cm.hpp"

namespace uroce::compat::cma {

inline constexpr uint32_t kUdpQkey = 0x01234567;  // RDMA_UDP_QKEY: the Q_Key of rdma_cm's UD ids
inline constexpr uint16_t kRejConsumer = 28;      // IB CM REJ reason "consumer defined"
inline constexpr uint16_t kRejVendorOptionNotSupported = 35;

struct Id;
struct EventBox {
  rdma_cm_event ev{};          // first: programs hold &ev
  std::vector<uint8_t> pdata;  // what ev.param's private_data points at
  Id* owner = nullptr;         // the id it counts against until acked (a request's: the listener)
  std::optional<Gid> attach;   // MULTICAST_JOIN of a full member: attach the id's QP on delivery
};

// An event channel: fd is an eventfd readable exactly while events wait (count 1, else 0).
struct Channel {
  rdma_event_channel ch{};
  std::deque<EventBox*> queue;  // guarded by Registry::mu
  int waiters = 0;              // threads inside rdma_get_cm_event
  bool closed = false;          // destroyed while threads waited: they stay blocked, as in read()
};

// A device as rdma_cm uses it: one per device per process, opened by the first id that needs it
// and kept while the process lives (as librdmacm keeps its devices), because programs may use
// PDs and CQs of id->verbs after their ids are gone.
struct CmDevice {
  ibv_context* verbs = nullptr;
  ibv_pd* pd = nullptr;  // for QPs created without one
  Device* dev = nullptr;
  std::unique_ptr<ConnectionManager> cm;
  std::thread router;
};

enum class State : uint8_t {
  Idle, Bound, AddrResolved, RouteResolved, Listening,
  Connecting,   // active: REQ or SIDR_REQ sent
  Replied,      // active: REP received, waiting for rdma_establish
  Requested,    // passive: REQ received, waiting for rdma_accept or rdma_reject
  Accepted,     // passive: REP sent, waiting for the RTU
  Connected,
  Disconnecting,  // our DREQ is out, not yet answered
  Disconnected,   // DISCONNECTED reported
  Closed,       // rejected, unreachable or failed
};

// A multicast group an id joined (rdma_join_multicast).
struct Membership {
  Gid group;
  uint16_t port = 0;  // of the address joined: a leave names the same
  bool send_only = false;
};

struct Id {
  rdma_cm_id id{};              // first: programs hold &id
  CmDevice* dev = nullptr;
  std::vector<CmDevice*> also;  // a wildcard listener's other devices (it listens on every one)
  State state = State::Idle;
  bool sync = false;            // made without a channel: its calls wait for their events
  bool passive = false;
  std::optional<uint32_t> comm; // the CM's communication ID (a SIDR request's ID for UD)
  uint16_t port = 0;            // our port, once bound
  uint64_t service_id = 0;      // listening
  uint32_t rq_psn = 0;          // the first PSN our QP receives (0 until chosen: rq_psn_of)
  CmEvent offer;                // the peer's REQ (passive) or REP (active)
  rdma_conn_param ours{};       // resources we asked for (connect) or gave (accept)
  ibv_ece local_ece{};          // ECE for an id without a QP (rdma_set_local_ece); with one, its QP's
  uint8_t tos = 0;
  std::optional<uint8_t> ack_timeout;  // RDMA_OPTION_ID_ACK_TIMEOUT: the QP's local ACK timeout
  uint32_t qkey = kUdpQkey;
  bool own_cqs = false;         // rdma_create_qp made id->send_cq and id->recv_cq
  ibv_sa_path_rec path{};
  // rdma_create_ep listeners: the QP every request gets in rdma_get_request.
  std::optional<ibv_qp_init_attr> ep_qp;
  int events_out = 0;           // events handed to the program and not yet acked
  int backlog = 0;              // a listener's requests the program has not taken, at most
  int announce_fd = -1;         // a loopback listener's name in the host's directory
  std::optional<Gid> wire_peer; // the NIC a loopback destination leads to, when not its own
  std::vector<Membership> mcast;  // groups joined, in order
};

// Every id and the maps the router dispatches by, under one lock.
struct Registry {
  std::mutex mu;
  std::set<Id*> ids;
  std::map<std::pair<const CmDevice*, uint32_t>, Id*> by_comm;  // each device's CM numbers its own
  std::map<std::pair<int, uint16_t>, Id*> ports;  // (port space, port) -> the id bound there
  std::set<Channel*> channels;                    // live event channels
  std::condition_variable acked;                  // some id's events_out went down
  uint64_t requests_dropped = 0;                  // past a listener's backlog or a source's share
  // Drops id's entry by its communication ID. A UD request's id carries the requester's request
  // ID, which may be one of this process's own (a client of the same NIC): that one stays.
  void forget_comm(const Id* id) {
    if (!id->comm) return;
    auto it = by_comm.find({id->dev, *id->comm});
    if (it != by_comm.end() && it->second == id) by_comm.erase(it);
  }
};
Registry& registry();

// device.cpp: the process's CmDevice of the device `name` ("" for the first listed), opened at
// `addr` ("" where the device opens by default) by the first caller; errno set and nullptr on
// failure. all_devices: every listed device, opened; `loopback` adds loopback's where it is not
// listed (if it opens).
CmDevice* device(std::string name, const std::string& addr);
std::vector<CmDevice*> all_devices(bool loopback = false);
// The address a device should take to reach dst (an IPv4 or IPv6 sockaddr), as the routing table
// says (127.0.0.1 or ::1 for a loopback destination); "" if there is no route.
std::string local_address_for(const sockaddr* dst);
bool device_has(const CmDevice& d, const Gid& gid);
std::string ip_string(const Gid& gid);  // dotted quad for IPv4-mapped GIDs

// loopback.cpp: the host's directory of listeners bound to loopback or wildcard addresses.
// announce_listener returns the fd that holds the name (-1: not announced; -EADDRINUSE: another
// NIC's listener holds the port where this one would, as the kernel's rdma_cm refuses a second
// bind of it); find_listener the NIC of a listener that a loopback destination (port space,
// port, address) reaches, among those our user or root announced; take_lookups empties the
// name's queue of the clients that checked who made it (the router, now and then; mu held).
bool is_loopback(const Gid& g);  // 127/8 or ::1: this host
bool is_wildcard(const Gid& g);  // 0.0.0.0 or ::
int announce_listener(uint16_t ps, uint16_t port, const Gid& bound, const Gid& nic);
std::optional<Gid> find_listener(uint16_t ps, uint16_t port, const Gid& dst);
void take_lookups(int fd);

// Addresses.
std::optional<Gid> gid_of(const sockaddr* sa);
uint16_t port_of(const sockaddr* sa);
void set_sockaddr(sockaddr_storage& out, const Gid& gid, uint16_t port);
socklen_t sockaddr_len(const sockaddr* sa);

// events.cpp: queueing events on an id's channel (mu held; a connection request goes to its
// listener's), and waiting for one (sync ids).
EventBox* post(Id* id, rdma_cm_event_type type, int status = 0, Id* listen = nullptr);
void set_conn_data(EventBox* e, const std::vector<uint8_t>& data, size_t skip = 0);
Channel* new_channel(bool mu_held = false);  // mu_held: the caller holds Registry::mu
void drop_events(Id* id);       // mu held: the id's events still queued go away
// On delivery of a MULTICAST_JOIN (mu not held): a full member's QP, if the id has one now, is
// attached to the group, as librdmacm does; a failure turns the event into MULTICAST_ERROR.
void deliver_join(EventBox* e);
// mu held: the connection requests queued for a listener, not yet taken: all, and from `peer`.
std::pair<size_t, size_t> queued_requests(const Id* listen, const Gid& peer);
// Waits for the id's next event (sync ids); it becomes id->event. 0, or -1 with errno.
int complete(Id* id, rdma_cm_event_type expect);
// router.cpp: the router's handling of one CM event (mu held), and the route both sides keep.
void dispatch(CmDevice& d, const CmEvent& e);
void set_route(Id* id, const Gid& local, uint16_t local_port, const Gid& peer, uint16_t peer_port);
void set_ah(const CmDevice& d, ibv_ah_attr& ah, const Gid& peer);

// qp.cpp: the QP moves rdma_cm makes on the program's behalf.
int qp_attr_for(Id* id, ibv_qp_attr* a, int* mask);  // a->qp_state says which
int move_qp(Id* id, ibv_qp_state to);
int ready_qp(Id* id);  // RTR then RTS with what the peer offered
uint32_t rq_psn_of(Id* id);  // conn.cpp: the first PSN our QP receives, chosen on first use
// ECE (conn.cpp): what this id offers or agreed (its QP's, else rdma_set_local_ece's), and the
// peer's options applied to its QP (a provider that has none, or other vendors', ignores them).
ibv_ece local_ece(Id* id);
void apply_peer_ece(Id* id);
void qp_to_error(Id* id);

// -1 with errno e, as librdmacm's calls fail.
inline int fail(int e) {
  errno = e;
  return -1;
}
inline Id* from(rdma_cm_id* id) { return reinterpret_cast<Id*>(id); }
inline Channel* from(rdma_event_channel* c) { return reinterpret_cast<Channel*>(c); }

}  // namespace uroce::compat::cma
