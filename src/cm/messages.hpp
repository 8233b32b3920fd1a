// The communication manager's messages (IBA 12.6, Tables 106-120) as they travel in the 232
// bytes after the MAD header. Field offsets are the spec's, relative to the end of the header.
// RoCE carries them with GIDs for addresses and 0xffff for LIDs; paths have no alternate.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "cm/mad.hpp"
#include "uroce/types.hpp"

namespace uroce::cm {

using MadData = std::span<uint8_t, kMadDataBytes>;
using ConstMadData = std::span<const uint8_t, kMadDataBytes>;

// Private data room of each message, in bytes (IBA 12.6).
inline constexpr size_t kReqPrivate = 92, kRepPrivate = 196, kRtuPrivate = 224, kRejPrivate = 148,
                        kMraPrivate = 222, kDreqPrivate = 220, kDrepPrivate = 224, kSidrReqPrivate = 216,
                        kSidrRepPrivate = 136;

enum class TransportType : uint8_t { RC = 0, UC = 1, RD = 2 };

struct Req {
  uint32_t local_comm_id = 0;
  uint32_t vendor_id = 0;      // ECE: the vendor whose options ece_options are (0: none)
  uint32_t ece_options = 0;    // ECE: carried in the MAD header's attribute modifier, as Linux's CM does
  uint64_t service_id = 0;
  uint64_t local_ca_guid = 0;
  uint32_t local_qkey = 0;
  uint32_t local_qpn = 0;
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  uint8_t remote_cm_response_timeout = 0;  // 5 bits: 4.096 us * 2^t
  TransportType transport = TransportType::RC;
  bool end_to_end_flow_control = false;
  uint32_t starting_psn = 0;
  uint8_t local_cm_response_timeout = 0;
  uint8_t retry_count = 0;
  uint16_t pkey = 0xffff;
  uint8_t path_mtu = 0;                    // IB MTU code (3 = 1024)
  uint8_t rnr_retry_count = 0;
  uint8_t max_cm_retries = 0;
  bool srq = false;
  uint16_t local_lid = 0xffff, remote_lid = 0xffff;
  Gid local_gid, remote_gid;               // primary path
  uint32_t flow_label = 0;
  uint8_t packet_rate = 0;
  uint8_t traffic_class = 0;
  uint8_t hop_limit = 0;
  uint8_t sl = 0;
  bool subnet_local = false;
  uint8_t local_ack_timeout = 0;
  std::vector<uint8_t> private_data;       // up to kReqPrivate bytes
};

struct Rep {
  uint32_t local_comm_id = 0, remote_comm_id = 0;
  uint32_t local_qkey = 0;
  uint32_t local_qpn = 0;
  uint32_t vendor_id = 0;      // ECE, as in a REQ
  uint32_t ece_options = 0;
  uint32_t starting_psn = 0;
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  uint8_t target_ack_delay = 0;
  uint8_t failover_accepted = 0;
  bool end_to_end_flow_control = false;
  uint8_t rnr_retry_count = 0;
  bool srq = false;
  uint64_t local_ca_guid = 0;
  std::vector<uint8_t> private_data;
};

struct Rtu {
  uint32_t local_comm_id = 0, remote_comm_id = 0;
  std::vector<uint8_t> private_data;
};

// Which message a REJ or MRA answers (IBA 12.6.7, 12.6.6).
enum class MsgRef : uint8_t { Req = 0, Rep = 1, Other = 2 };

// REJ reasons (IBA 12.6.7.2, Table 109), those uroce sends or reports by name.
enum class RejReason : uint16_t {
  NoQp = 1, NoResources = 3, Timeout = 4, Unsupported = 5, InvalidCommId = 6, InvalidServiceId = 8,
  InvalidTransport = 9, StaleConn = 10, ConsumerReject = 28, InvalidClassVersion = 31,
};

struct Rej {
  uint32_t local_comm_id = 0, remote_comm_id = 0;
  MsgRef rejected = MsgRef::Req;
  uint8_t ari_length = 0;
  uint16_t reason = 0;
  std::vector<uint8_t> ari;                // additional rejection information, up to 72 bytes
  std::vector<uint8_t> private_data;
};

struct Mra {
  uint32_t local_comm_id = 0, remote_comm_id = 0;
  MsgRef mraed = MsgRef::Req;
  uint8_t service_timeout = 0;
  std::vector<uint8_t> private_data;
};

struct Dreq {
  uint32_t local_comm_id = 0, remote_comm_id = 0;
  uint32_t remote_qpn = 0;
  std::vector<uint8_t> private_data;
};

struct Drep {
  uint32_t local_comm_id = 0, remote_comm_id = 0;
  std::vector<uint8_t> private_data;
};

struct SidrReq {
  uint32_t request_id = 0;
  uint16_t pkey = 0xffff;
  uint64_t service_id = 0;
  std::vector<uint8_t> private_data;
};

// SIDR_REP status (IBA 12.11.2.2, Table 121).
enum class SidrStatus : uint8_t { Valid = 0, NoService = 1, Rejected = 2, NoQp = 3, Redirect = 4, Version = 5 };

struct SidrRep {
  uint32_t request_id = 0;
  SidrStatus status = SidrStatus::Valid;
  uint32_t qpn = 0;
  uint32_t vendor_id = 0;
  uint64_t service_id = 0;
  uint32_t qkey = 0;
  std::vector<uint8_t> private_data;
};

// Each encode writes the whole 232 bytes (reserved bits zero); private data longer than the
// message's room is an error (false). Each decode reads a received message; it never fails on
// content, only the caller judges it.
bool encode(const Req& m, MadData out);
bool encode(const Rep& m, MadData out);
bool encode(const Rtu& m, MadData out);
bool encode(const Rej& m, MadData out);
bool encode(const Mra& m, MadData out);
bool encode(const Dreq& m, MadData out);
bool encode(const Drep& m, MadData out);
bool encode(const SidrReq& m, MadData out);
bool encode(const SidrRep& m, MadData out);

// A whole MAD: the CM's header (attribute, transaction ID), then the message.
template <class M>
Mad make_mad(CmAttr attr, uint64_t tid, const M& m, uint32_t attr_mod = 0) {
  Mad mad{};
  MadHeader h;
  h.tid = tid;
  h.attr_id = uint16_t(attr);
  h.attr_mod = attr_mod;
  write_header(h, mad);
  (void)encode(m, MadData(mad.data() + kMadHeaderBytes, kMadDataBytes));
  return mad;
}

Req decode_req(ConstMadData in);
Rep decode_rep(ConstMadData in);
Rtu decode_rtu(ConstMadData in);
Rej decode_rej(ConstMadData in);
Mra decode_mra(ConstMadData in);
Dreq decode_dreq(ConstMadData in);
Drep decode_drep(ConstMadData in);
SidrReq decode_sidr_req(ConstMadData in);
SidrRep decode_sidr_rep(ConstMadData in);

}  // namespace uroce::cm
