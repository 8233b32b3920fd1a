// The CM's messages against a real exchange: rping between two Linux kernels (rdma_cm over rxe),
// tests/data/captures/cm-rping.pcap. Every CM MAD decodes to the values tshark shows, and
// encoding what was decoded gives back the same 232 bytes.
#include <gtest/gtest.h>

#include <cstring>

#include "../common/pcap_reader.hpp"
#include "cm/ip_cm.hpp"
#include "cm/mad.hpp"
#include "cm/messages.hpp"
#include "wire/bytes.hpp"

using namespace uroce;
using namespace uroce::cm;

namespace {

constexpr size_t kMadAt = 14 + 20 + 8 + 12 + 8;  // Ethernet, IPv4, UDP, BTH, DETH

// The CM MADs of the capture (UD SEND_ONLY to QP 1), in order.
std::vector<std::vector<uint8_t>> cm_mads(const char* file = "cm-rping.pcap") {
  std::vector<std::vector<uint8_t>> out;
  for (auto& f : test::read_pcap(std::string(UROCE_TEST_DATA "/captures/") + file)) {
    const auto& b = f.bytes;
    if (b.size() < kMadAt + kMadBytes + 4 || b[42] != 100 || wire::read_be24(b.data() + 42 + 5) != kGsiQpn) continue;
    out.emplace_back(b.begin() + long(kMadAt), b.begin() + long(kMadAt + kMadBytes));
  }
  return out;
}

ConstMadData data_of(const std::vector<uint8_t>& mad) { return ConstMadData(mad.data() + kMadHeaderBytes, kMadDataBytes); }

template <class M>
void expect_round_trip(const M& m, const std::vector<uint8_t>& mad) {
  std::array<uint8_t, kMadDataBytes> again{};
  ASSERT_TRUE(encode(m, MadData(again)));
  EXPECT_EQ(0, std::memcmp(again.data(), mad.data() + kMadHeaderBytes, kMadDataBytes)) << "re-encoding differs";
}

}  // namespace

TEST(Cm, RpingExchangeHasTheFiveMads) {
  auto mads = cm_mads();
  ASSERT_EQ(mads.size(), 5u);
  std::vector<CmAttr> want = {CmAttr::Req, CmAttr::Rep, CmAttr::Rtu, CmAttr::Dreq, CmAttr::Drep};
  for (size_t i = 0; i < mads.size(); ++i) {
    auto h = read_header(mads[i]);
    ASSERT_TRUE(h);
    EXPECT_EQ(h->base_version, 1);
    EXPECT_EQ(h->mgmt_class, kMgmtClassCm);
    EXPECT_EQ(h->class_version, kCmClassVersion);
    EXPECT_EQ(h->method, kMethodSend);
    EXPECT_EQ(CmAttr(h->attr_id), want[i]) << i;
  }
  EXPECT_EQ(read_header(mads[0])->tid, 0x00000002c15a4f3eull);
  EXPECT_FALSE(read_header(std::span<const uint8_t>(mads[0].data(), 100))) << "a short MAD has no header";
}

TEST(Cm, ReqFromTheKernel) {
  auto mads = cm_mads();
  ASSERT_EQ(mads.size(), 5u);
  Req r = decode_req(data_of(mads[0]));
  EXPECT_EQ(r.local_comm_id, 0x3e4f5ac1u);
  EXPECT_EQ(r.service_id, 0x0000000001061c06ull);
  auto svc = parse_ip_service_id(r.service_id);
  ASSERT_TRUE(svc);
  EXPECT_EQ(svc->first, PortSpace::Tcp);
  EXPECT_EQ(svc->second, 7174);  // rping's port
  EXPECT_EQ(r.local_ca_guid, 0x505400fffe990002ull);
  EXPECT_EQ(r.local_qpn, 0x11u);
  EXPECT_EQ(r.responder_resources, 1);
  EXPECT_EQ(r.initiator_depth, 1);
  EXPECT_EQ(r.remote_cm_response_timeout, 20);
  EXPECT_EQ(r.transport, TransportType::RC);
  EXPECT_EQ(r.starting_psn, 0x97365eu);
  EXPECT_EQ(r.local_cm_response_timeout, 20);
  EXPECT_EQ(r.retry_count, 7);
  EXPECT_EQ(r.pkey, 0xffff);
  EXPECT_EQ(r.path_mtu, 3);  // 1024
  EXPECT_EQ(r.rnr_retry_count, 7);
  EXPECT_EQ(r.max_cm_retries, 15);
  EXPECT_FALSE(r.srq);
  EXPECT_EQ(r.local_gid, Gid::from_ipv4(0x0a630002));
  EXPECT_EQ(r.remote_gid, Gid::from_ipv4(0x0a630003));
  EXPECT_EQ(r.hop_limit, 64);
  EXPECT_EQ(r.local_ack_timeout, 19);
  auto ip = read_ip_cm_header(r.private_data);
  ASSERT_TRUE(ip);
  EXPECT_EQ(ip->ip_version, 4);
  EXPECT_EQ(ip->src_port, 0x8865);
  EXPECT_EQ(ip->src, Gid::from_ipv4(0x0a630002));
  EXPECT_EQ(ip->dst, Gid::from_ipv4(0x0a630003));
  expect_round_trip(r, mads[0]);
}

TEST(Cm, RepRtuDreqDrepFromTheKernel) {
  auto mads = cm_mads();
  ASSERT_EQ(mads.size(), 5u);
  Rep rep = decode_rep(data_of(mads[1]));
  EXPECT_EQ(rep.local_comm_id, 0x85b80adbu);
  EXPECT_EQ(rep.remote_comm_id, 0x3e4f5ac1u);
  EXPECT_EQ(rep.local_qpn, 0x11u);
  EXPECT_EQ(rep.local_ca_guid, 0x505400fffe990003ull);
  expect_round_trip(rep, mads[1]);
  Rtu rtu = decode_rtu(data_of(mads[2]));
  EXPECT_EQ(rtu.local_comm_id, 0x3e4f5ac1u);
  EXPECT_EQ(rtu.remote_comm_id, 0x85b80adbu);
  expect_round_trip(rtu, mads[2]);
  Dreq dreq = decode_dreq(data_of(mads[3]));
  EXPECT_EQ(dreq.remote_qpn, 0x11u);
  expect_round_trip(dreq, mads[3]);
  Drep drep = decode_drep(data_of(mads[4]));
  EXPECT_EQ(drep.local_comm_id, dreq.remote_comm_id);
  EXPECT_EQ(drep.remote_comm_id, dreq.local_comm_id);
  expect_round_trip(drep, mads[4]);
}

// udaddy between the kernels: SIDR resolves a UD service to a QPN and Q_Key.
TEST(Cm, SidrFromTheKernel) {
  auto mads = cm_mads("ud-send.pcap");
  ASSERT_EQ(mads.size(), 2u);
  EXPECT_EQ(CmAttr(read_header(mads[0])->attr_id), CmAttr::SidrReq);
  EXPECT_EQ(CmAttr(read_header(mads[1])->attr_id), CmAttr::SidrRep);
  SidrReq q = decode_sidr_req(data_of(mads[0]));
  EXPECT_EQ(q.request_id, 0x8fc8f15cu);
  EXPECT_EQ(q.pkey, 0xffff);
  EXPECT_EQ(q.service_id, ip_service_id(PortSpace::Udp, 7174));
  auto ip = read_ip_cm_header(q.private_data);
  ASSERT_TRUE(ip);
  EXPECT_EQ(ip->src, Gid::from_ipv4(0x0a630002));
  EXPECT_EQ(ip->dst, Gid::from_ipv4(0x0a630003));
  expect_round_trip(q, mads[0]);
  SidrRep r = decode_sidr_rep(data_of(mads[1]));
  EXPECT_EQ(r.request_id, q.request_id);
  EXPECT_EQ(r.status, SidrStatus::Valid);
  EXPECT_EQ(r.qpn, 0x19u);
  EXPECT_EQ(r.service_id, q.service_id);
  EXPECT_EQ(r.qkey, 0x01234567u);  // rdma_cm's UDP Q_Key
  expect_round_trip(r, mads[1]);
}

// Messages the captures lack: each field survives encode and decode, private data longer than
// the message's room is refused.
TEST(Cm, RejMraSidrRoundTrip) {
  std::array<uint8_t, kMadDataBytes> buf{};
  Rej rej{0x11223344, 0x55667788, MsgRef::Rep, 0, uint16_t(RejReason::ConsumerReject), {1, 2, 3}, {9, 8, 7}};
  ASSERT_TRUE(encode(rej, MadData(buf)));
  Rej rej2 = decode_rej(ConstMadData(buf));
  EXPECT_EQ(rej2.local_comm_id, 0x11223344u);
  EXPECT_EQ(rej2.remote_comm_id, 0x55667788u);
  EXPECT_EQ(rej2.rejected, MsgRef::Rep);
  EXPECT_EQ(rej2.reason, 28);
  EXPECT_EQ(rej2.ari, (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_EQ(std::vector<uint8_t>(rej2.private_data.begin(), rej2.private_data.begin() + 3), (std::vector<uint8_t>{9, 8, 7}));
  Mra mra{1, 2, MsgRef::Req, 17, {}};
  ASSERT_TRUE(encode(mra, MadData(buf)));
  Mra mra2 = decode_mra(ConstMadData(buf));
  EXPECT_EQ(mra2.mraed, MsgRef::Req);
  EXPECT_EQ(mra2.service_timeout, 17);
  SidrReq sq{0xabcdef01, 0xffff, ip_service_id(PortSpace::Udp, 7471), {}};
  ASSERT_TRUE(encode(sq, MadData(buf)));
  EXPECT_EQ(decode_sidr_req(ConstMadData(buf)).service_id, 0x0000000001111d2full);
  SidrRep sp{0xabcdef01, SidrStatus::Valid, 0x123456, 0x0a0b0c, ip_service_id(PortSpace::Udp, 7471), 0x01234567, {}};
  ASSERT_TRUE(encode(sp, MadData(buf)));
  SidrRep sp2 = decode_sidr_rep(ConstMadData(buf));
  EXPECT_EQ(sp2.qpn, 0x123456u);
  EXPECT_EQ(sp2.vendor_id, 0x0a0b0cu);
  EXPECT_EQ(sp2.service_id, sp.service_id);
  EXPECT_EQ(sp2.qkey, 0x01234567u);
  Req big;
  big.private_data.assign(kReqPrivate + 1, 0);
  EXPECT_FALSE(encode(big, MadData(buf)));
  EXPECT_FALSE(parse_ip_service_id(0x0000000002061c06ull)) << "not an IP CM service ID";
}

TEST(Cm, IpCmHeaderIpv6) {
  IpCmHeader h;
  h.ip_version = 6;
  h.src_port = 4242;
  h.src = *Gid::parse("fe80::1");
  h.dst = *Gid::parse("fe80::2");
  std::array<uint8_t, kIpCmHeaderBytes> b{};
  write_ip_cm_header(h, b);
  auto r = read_ip_cm_header(b);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->ip_version, 6);
  EXPECT_EQ(r->src_port, 4242);
  EXPECT_EQ(r->src, h.src);
  EXPECT_EQ(r->dst, h.dst);
  b[1] = 0x50;
  EXPECT_FALSE(read_ip_cm_header(b)) << "IP version 5";
}
