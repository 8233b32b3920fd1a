// The communication manager of a device's port (IBA chapter 12), as RoCE peers speak it: REQ,
// REP, RTU, REJ, DREQ and DREP on QP1, SIDR for UD services. It connects QPs with any RoCE
// peer whose CM listens (another uroce device, the Linux kernel's rdma_cm, a NIC), and is what
// librdmacm's rdma_connect/rdma_accept run on. It does not touch QPs: each event says what
// the peer offered (QPN, PSN, MTU, resources), and the consumer moves its QP through the
// states, as the kernel's rdma_cm does with the IB CM.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "uroce/uroce.hpp"

namespace uroce {

struct CmOptions {
  uint8_t response_timeout = 16;  // our CM response timeout: 4.096 us * 2^16 = 268 ms per retry
  uint8_t max_retries = 15;       // sends of a REQ, REP, DREQ or SIDR_REQ before giving up
  // Events not yet taken, at most: past it a new REQ is dropped (the peer sends it again) and a
  // new SIDR_REQ refused with status "rejected", each counted as requests_dropped.
  size_t max_events = 4096;
};

// The RDMA IP CM service ID of a port space (0x0106 TCP, 0x0111 UDP, 0x013f IB) and port.
uint64_t ip_service_id(uint16_t port_space, uint16_t port);
// Private data for a REQ (or SIDR_REQ) to an rdma_cm listener: the RDMA IP CM header naming
// both addresses (of one IP version) and our source port, then `user` (56 bytes at most in a REQ).
std::vector<uint8_t> ip_cm_private_data(const Gid& src, const Gid& dst, uint16_t src_port,
                                        std::span<const uint8_t> user = {});

// What the RDMA IP CM header at the front of a REQ's (or SIDR_REQ's) private data says: both
// addresses and the sender's port. nullopt if the data holds no such header.
inline constexpr size_t kIpCmHeaderBytes = 36;
struct IpCmAddresses {
  Gid src, dst;
  uint16_t src_port = 0;
};
std::optional<IpCmAddresses> read_ip_cm_private_data(std::span<const uint8_t> data);

struct CmConnectParams {
  Gid peer;
  std::optional<uint8_t> sgid_index;  // unset: our first GID of the peer's IP version
  uint64_t service_id = 0;
  QpType type = QpType::RC;           // RC or UC
  uint32_t qpn = 0;                   // our QP
  // The first PSN our QP expects to receive; the peer's send queue starts there. (The REQ's
  // starting PSN: each side names the PSN it receives from, as Linux's CM reads it.)
  uint32_t rq_psn = 0;
  Mtu mtu = Mtu::Mtu1024;
  uint8_t responder_resources = 1;    // READ/atomics we take at once
  uint8_t initiator_depth = 1;        // READ/atomics we send at once
  uint8_t retry_count = 7, rnr_retry_count = 7;
  bool srq = false;
  uint8_t hop_limit = 64, traffic_class = 0;
  uint32_t flow_label = 0;
  std::vector<uint8_t> private_data;  // up to 92 bytes (IP CM: its 36-byte header first)
  // ECE (enhanced connection establishment): a vendor's QP options offered to the peer, in the
  // REQ's vendor ID and its MAD's attribute modifier, as Linux's CM carries them. 0: none.
  uint32_t ece_vendor_id = 0, ece_options = 0;
};

struct CmAcceptParams {
  uint32_t qpn = 0;
  uint32_t rq_psn = 0;                // the first PSN our QP expects to receive (the REP's starting PSN)
  uint8_t responder_resources = 1, initiator_depth = 1;
  uint8_t rnr_retry_count = 7;
  bool srq = false;
  std::vector<uint8_t> private_data;  // up to 196 bytes
  uint32_t ece_vendor_id = 0, ece_options = 0;  // ECE agreed, as in a REQ
};

enum class CmEventType : uint8_t {
  ConnectRequest,  // passive: accept() or reject()
  ConnectReply,    // active: the peer accepted; ready the QP (RTR, RTS), then establish()
  Established,     // both
  Rejected,        // active: reject_reason says why (8: nobody listens; 28: the peer's consumer)
  Unreachable,     // no answer after every retry
  Disconnected,    // the peer disconnected (its DREQ is answered)
  DisconnectDone,  // our disconnect() was answered, or never will be
  SidrRequest,     // passive UD: sidr_reply()
  SidrReply,       // active UD: remote_qpn and qkey, or sidr_status
};
const char* to_string(CmEventType t);

struct CmEvent {
  CmEventType type = CmEventType::Established;
  uint32_t id = 0;              // the connection (or SIDR request)
  uint64_t listener = 0;        // ConnectRequest, SidrRequest: the cookie given to listen()
  Gid peer;                     // the peer's GID
  Gid local;                    // ConnectRequest: our GID the peer named
  uint64_t service_id = 0;
  // What the peer offered (ConnectRequest: from its REQ; ConnectReply: from its REP).
  QpType qp_type = QpType::RC;
  uint32_t remote_qpn = 0;
  uint32_t sq_psn = 0;          // the first PSN our send queue must use: the one the peer expects
  Mtu mtu = Mtu::Mtu1024;
  uint8_t traffic_class = 0;    // ConnectRequest: the REQ's path's, which the passive side's QP takes
  uint8_t responder_resources = 0, initiator_depth = 0, retry_count = 0, rnr_retry_count = 0;
  bool srq = false;
  uint16_t reject_reason = 0;   // Rejected
  uint32_t qkey = 0;            // SidrReply
  uint8_t sidr_status = 0;      // SidrReply: 0 valid, 1 no such service, 2 rejected
  uint32_t ece_vendor_id = 0, ece_options = 0;  // ConnectRequest, ConnectReply: the peer's ECE
  std::vector<uint8_t> private_data;
};

class ConnectionManager {
 public:
  // Takes the device's QP1 and runs the CM on a thread of its own; EBUSY if the device has one.
  // The device must outlive the ConnectionManager.
  static Result<std::unique_ptr<ConnectionManager>> open(Device& dev, CmOptions opts = {});
  ~ConnectionManager();

  // Readable while events wait.
  int fd() const;
  std::optional<CmEvent> poll();
  // Waits up to timeout_ms (-1: forever) for the next event; ETIMEDOUT if none came.
  Result<CmEvent> wait(int timeout_ms);

  Status listen(uint64_t service_id, uint64_t cookie);
  void unlisten(uint64_t service_id);
  Result<uint32_t> connect(const CmConnectParams& p);
  Status accept(uint32_t id, const CmAcceptParams& p);
  Status reject(uint32_t id, uint16_t reason, std::vector<uint8_t> private_data = {});
  Status establish(uint32_t id, std::vector<uint8_t> private_data = {});
  Status disconnect(uint32_t id, std::vector<uint8_t> private_data = {});
  void forget(uint32_t id);
  Result<uint32_t> sidr_request(const Gid& peer, uint8_t sgid_index, uint64_t service_id,
                                std::vector<uint8_t> private_data = {});
  Status sidr_reply(uint32_t id, const Gid& peer, uint32_t qpn, uint32_t qkey, uint8_t status = 0,
                    std::vector<uint8_t> private_data = {});

  // What the CM counted: MADs in and out, duplicates, requests refused (REJ "no resources",
  // SIDR status "rejected") or dropped, MADs that waited for QP1's send queue or were dropped.
  std::map<std::string, uint64_t> counters() const;

  struct Impl;

 private:
  explicit ConnectionManager(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace uroce
