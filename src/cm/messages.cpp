#include "cm/messages.hpp"

#include <algorithm>
#include <cstring>

#include "wire/bytes.hpp"

namespace uroce::cm {

using wire::read_be16;
using wire::read_be24;
using wire::read_be32;
using wire::read_be64;
using wire::write_be16;
using wire::write_be24;
using wire::write_be32;
using wire::write_be64;

namespace {

// A field of `width` bits that starts `msb` bits below the top of byte p[0] (IBA's bit
// numbering within a byte counts from the most significant bit).
uint8_t get_bits(const uint8_t* p, unsigned msb, unsigned width) {
  return uint8_t((p[0] >> (8 - msb - width)) & ((1u << width) - 1));
}
void put_bits(uint8_t* p, unsigned msb, unsigned width, unsigned v) {
  unsigned shift = 8 - msb - width, mask = ((1u << width) - 1) << shift;
  p[0] = uint8_t((p[0] & ~mask) | ((v << shift) & mask));
}

Gid get_gid(const uint8_t* p) {
  Gid g;
  std::memcpy(g.raw.data(), p, 16);
  return g;
}
void put_gid(uint8_t* p, const Gid& g) { std::memcpy(p, g.raw.data(), 16); }

bool put_private(uint8_t* p, size_t room, const std::vector<uint8_t>& data) {
  if (data.size() > room) return false;
  if (!data.empty()) std::memcpy(p, data.data(), data.size());
  return true;
}
std::vector<uint8_t> get_private(const uint8_t* p, size_t room) { return {p, p + room}; }

// The two communication IDs that open most messages.
void put_ids(uint8_t* p, uint32_t local, uint32_t remote) {
  write_be32(p, local);
  write_be32(p + 4, remote);
}

}  // namespace

bool encode(const Req& m, MadData out) {
  uint8_t* p = out.data();
  std::fill(out.begin(), out.end(), 0);
  write_be32(p + 0, m.local_comm_id);
  write_be24(p + 5, m.vendor_id);
  write_be64(p + 8, m.service_id);
  write_be64(p + 16, m.local_ca_guid);
  write_be32(p + 28, m.local_qkey);
  write_be24(p + 32, m.local_qpn);
  p[35] = m.responder_resources;
  p[39] = m.initiator_depth;
  put_bits(p + 43, 0, 5, m.remote_cm_response_timeout);
  put_bits(p + 43, 5, 2, unsigned(m.transport));
  put_bits(p + 43, 7, 1, m.end_to_end_flow_control);
  write_be24(p + 44, m.starting_psn);
  put_bits(p + 47, 0, 5, m.local_cm_response_timeout);
  put_bits(p + 47, 5, 3, m.retry_count);
  write_be16(p + 48, m.pkey);
  put_bits(p + 50, 0, 4, m.path_mtu);
  put_bits(p + 50, 5, 3, m.rnr_retry_count);
  put_bits(p + 51, 0, 4, m.max_cm_retries);
  put_bits(p + 51, 4, 1, m.srq);
  write_be16(p + 52, m.local_lid);
  write_be16(p + 54, m.remote_lid);
  put_gid(p + 56, m.local_gid);
  put_gid(p + 72, m.remote_gid);
  write_be32(p + 88, (m.flow_label & 0xfffff) << 12);
  put_bits(p + 91, 2, 6, m.packet_rate);
  p[92] = m.traffic_class;
  p[93] = m.hop_limit;
  put_bits(p + 94, 0, 4, m.sl);
  put_bits(p + 94, 4, 1, m.subnet_local);
  put_bits(p + 95, 0, 5, m.local_ack_timeout);
  return put_private(p + 140, kReqPrivate, m.private_data);
}

Req decode_req(ConstMadData in) {
  const uint8_t* p = in.data();
  Req m;
  m.local_comm_id = read_be32(p + 0);
  m.vendor_id = read_be24(p + 5);
  m.service_id = read_be64(p + 8);
  m.local_ca_guid = read_be64(p + 16);
  m.local_qkey = read_be32(p + 28);
  m.local_qpn = read_be24(p + 32);
  m.responder_resources = p[35];
  m.initiator_depth = p[39];
  m.remote_cm_response_timeout = get_bits(p + 43, 0, 5);
  m.transport = TransportType(get_bits(p + 43, 5, 2));
  m.end_to_end_flow_control = get_bits(p + 43, 7, 1);
  m.starting_psn = read_be24(p + 44);
  m.local_cm_response_timeout = get_bits(p + 47, 0, 5);
  m.retry_count = get_bits(p + 47, 5, 3);
  m.pkey = read_be16(p + 48);
  m.path_mtu = get_bits(p + 50, 0, 4);
  m.rnr_retry_count = get_bits(p + 50, 5, 3);
  m.max_cm_retries = get_bits(p + 51, 0, 4);
  m.srq = get_bits(p + 51, 4, 1);
  m.local_lid = read_be16(p + 52);
  m.remote_lid = read_be16(p + 54);
  m.local_gid = get_gid(p + 56);
  m.remote_gid = get_gid(p + 72);
  m.flow_label = read_be32(p + 88) >> 12;
  m.packet_rate = get_bits(p + 91, 2, 6);
  m.traffic_class = p[92];
  m.hop_limit = p[93];
  m.sl = get_bits(p + 94, 0, 4);
  m.subnet_local = get_bits(p + 94, 4, 1);
  m.local_ack_timeout = get_bits(p + 95, 0, 5);
  m.private_data = get_private(p + 140, kReqPrivate);
  return m;
}

bool encode(const Rep& m, MadData out) {
  uint8_t* p = out.data();
  std::fill(out.begin(), out.end(), 0);
  put_ids(p, m.local_comm_id, m.remote_comm_id);
  write_be32(p + 8, m.local_qkey);
  write_be24(p + 12, m.local_qpn);
  p[15] = uint8_t(m.vendor_id >> 16);
  p[19] = uint8_t(m.vendor_id >> 8);
  write_be24(p + 20, m.starting_psn);
  p[23] = uint8_t(m.vendor_id);
  p[24] = m.responder_resources;
  p[25] = m.initiator_depth;
  put_bits(p + 26, 0, 5, m.target_ack_delay);
  put_bits(p + 26, 5, 2, m.failover_accepted);
  put_bits(p + 26, 7, 1, m.end_to_end_flow_control);
  put_bits(p + 27, 0, 3, m.rnr_retry_count);
  put_bits(p + 27, 3, 1, m.srq);
  write_be64(p + 28, m.local_ca_guid);
  return put_private(p + 36, kRepPrivate, m.private_data);
}

Rep decode_rep(ConstMadData in) {
  const uint8_t* p = in.data();
  Rep m;
  m.local_comm_id = read_be32(p);
  m.remote_comm_id = read_be32(p + 4);
  m.local_qkey = read_be32(p + 8);
  m.local_qpn = read_be24(p + 12);
  m.vendor_id = uint32_t(p[15]) << 16 | uint32_t(p[19]) << 8 | p[23];
  m.starting_psn = read_be24(p + 20);
  m.responder_resources = p[24];
  m.initiator_depth = p[25];
  m.target_ack_delay = get_bits(p + 26, 0, 5);
  m.failover_accepted = get_bits(p + 26, 5, 2);
  m.end_to_end_flow_control = get_bits(p + 26, 7, 1);
  m.rnr_retry_count = get_bits(p + 27, 0, 3);
  m.srq = get_bits(p + 27, 3, 1);
  m.local_ca_guid = read_be64(p + 28);
  m.private_data = get_private(p + 36, kRepPrivate);
  return m;
}

bool encode(const Rtu& m, MadData out) {
  std::fill(out.begin(), out.end(), 0);
  put_ids(out.data(), m.local_comm_id, m.remote_comm_id);
  return put_private(out.data() + 8, kRtuPrivate, m.private_data);
}

Rtu decode_rtu(ConstMadData in) {
  return {read_be32(in.data()), read_be32(in.data() + 4), get_private(in.data() + 8, kRtuPrivate)};
}

bool encode(const Rej& m, MadData out) {
  uint8_t* p = out.data();
  std::fill(out.begin(), out.end(), 0);
  if (m.ari.size() > 72) return false;
  put_ids(p, m.local_comm_id, m.remote_comm_id);
  put_bits(p + 8, 0, 2, unsigned(m.rejected));
  put_bits(p + 9, 0, 7, m.ari.empty() ? m.ari_length : uint8_t(m.ari.size()));
  write_be16(p + 10, m.reason);
  if (!m.ari.empty()) std::memcpy(p + 12, m.ari.data(), m.ari.size());
  return put_private(p + 84, kRejPrivate, m.private_data);
}

Rej decode_rej(ConstMadData in) {
  const uint8_t* p = in.data();
  Rej m;
  m.local_comm_id = read_be32(p);
  m.remote_comm_id = read_be32(p + 4);
  m.rejected = MsgRef(get_bits(p + 8, 0, 2));
  m.ari_length = get_bits(p + 9, 0, 7);
  m.reason = read_be16(p + 10);
  m.ari.assign(p + 12, p + 12 + std::min<size_t>(m.ari_length, 72));
  m.private_data = get_private(p + 84, kRejPrivate);
  return m;
}

bool encode(const Mra& m, MadData out) {
  uint8_t* p = out.data();
  std::fill(out.begin(), out.end(), 0);
  put_ids(p, m.local_comm_id, m.remote_comm_id);
  put_bits(p + 8, 0, 2, unsigned(m.mraed));
  put_bits(p + 9, 0, 5, m.service_timeout);
  return put_private(p + 10, kMraPrivate, m.private_data);
}

Mra decode_mra(ConstMadData in) {
  const uint8_t* p = in.data();
  return {read_be32(p), read_be32(p + 4), MsgRef(get_bits(p + 8, 0, 2)), get_bits(p + 9, 0, 5),
          get_private(p + 10, kMraPrivate)};
}

bool encode(const Dreq& m, MadData out) {
  uint8_t* p = out.data();
  std::fill(out.begin(), out.end(), 0);
  put_ids(p, m.local_comm_id, m.remote_comm_id);
  write_be24(p + 8, m.remote_qpn);
  return put_private(p + 12, kDreqPrivate, m.private_data);
}

Dreq decode_dreq(ConstMadData in) {
  const uint8_t* p = in.data();
  return {read_be32(p), read_be32(p + 4), read_be24(p + 8), get_private(p + 12, kDreqPrivate)};
}

bool encode(const Drep& m, MadData out) {
  std::fill(out.begin(), out.end(), 0);
  put_ids(out.data(), m.local_comm_id, m.remote_comm_id);
  return put_private(out.data() + 8, kDrepPrivate, m.private_data);
}

Drep decode_drep(ConstMadData in) {
  return {read_be32(in.data()), read_be32(in.data() + 4), get_private(in.data() + 8, kDrepPrivate)};
}

bool encode(const SidrReq& m, MadData out) {
  uint8_t* p = out.data();
  std::fill(out.begin(), out.end(), 0);
  write_be32(p, m.request_id);
  write_be16(p + 4, m.pkey);
  write_be64(p + 8, m.service_id);
  return put_private(p + 16, kSidrReqPrivate, m.private_data);
}

SidrReq decode_sidr_req(ConstMadData in) {
  const uint8_t* p = in.data();
  return {read_be32(p), read_be16(p + 4), read_be64(p + 8), get_private(p + 16, kSidrReqPrivate)};
}

bool encode(const SidrRep& m, MadData out) {
  uint8_t* p = out.data();
  std::fill(out.begin(), out.end(), 0);
  write_be32(p, m.request_id);
  p[4] = uint8_t(m.status);
  write_be16(p + 6, uint16_t(m.vendor_id >> 8));
  write_be24(p + 8, m.qpn);
  p[11] = uint8_t(m.vendor_id);
  write_be64(p + 12, m.service_id);
  write_be32(p + 20, m.qkey);
  return put_private(p + 96, kSidrRepPrivate, m.private_data);
}

SidrRep decode_sidr_rep(ConstMadData in) {
  const uint8_t* p = in.data();
  SidrRep m;
  m.request_id = read_be32(p);
  m.status = SidrStatus(p[4]);
  m.vendor_id = uint32_t(read_be16(p + 6)) << 8 | p[11];
  m.qpn = read_be24(p + 8);
  m.service_id = read_be64(p + 12);
  m.qkey = read_be32(p + 20);
  m.private_data = get_private(p + 96, kSidrRepPrivate);
  return m;
}

}  // namespace uroce::cm
