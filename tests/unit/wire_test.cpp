#include <gtest/gtest.h>

#include <cstring>
#include <dirent.h>
#include <map>
#include <random>

#include "../common/pcap_reader.hpp"
#include <zlib.h>

#include "wire/bytes.hpp"
#include "wire/ip_udp.hpp"
#include "wire/crc32.hpp"
#include "wire/icrc.hpp"
#include "wire/packet.hpp"
#include "wire/packet_buf.hpp"
#include "wire/psn.hpp"

using namespace uroce::wire;

TEST(Psn, WrapsAt24Bits) {
  Psn a(0xFFFFFE);
  EXPECT_EQ((a + 1).value(), 0xFFFFFFu);
  EXPECT_EQ((a + 2).value(), 0u);
  EXPECT_EQ((a + 5).value(), 3u);
  EXPECT_TRUE(a < a + 5);
  EXPECT_TRUE(a + 5 > a);
  EXPECT_EQ(Psn::diff(a + 5, a), 5);
  EXPECT_EQ(Psn::diff(a, a + 5), -5);
  EXPECT_EQ(Psn::distance(a, a + 5), 5u);
  EXPECT_EQ(Psn::distance(a + 5, a), 0xFFFFFBu);
  EXPECT_TRUE(Psn(0) > Psn(0xFFFFFF));
  EXPECT_TRUE(Psn(0x7FFFFF) > Psn(0));
  EXPECT_TRUE(Psn(0x800001) < Psn(0));  // more than half the space ahead counts as behind
  EXPECT_EQ(Psn(0x1234567).value(), 0x234567u);
}

TEST(Opcode, TableLayout) {
  EXPECT_EQ(opcode_info(Opcode::RC_SEND_ONLY).header_len, 12);
  EXPECT_EQ(opcode_info(Opcode::RC_WRITE_FIRST).header_len, 28);
  EXPECT_EQ(opcode_info(Opcode::RC_READ_RESPONSE_MIDDLE).header_len, 12);
  EXPECT_EQ(opcode_info(Opcode::RC_READ_RESPONSE_FIRST).header_len, 16);
  EXPECT_EQ(opcode_info(Opcode::RC_ACKNOWLEDGE).header_len, 16);
  EXPECT_EQ(opcode_info(Opcode::UD_SEND_ONLY_IMM).header_len, 24);
  EXPECT_EQ(opcode_info(Opcode::UC_WRITE_ONLY_IMM).transport, Transport::UC);
  EXPECT_FALSE(opcode_supported(0x15));
  EXPECT_FALSE(opcode_supported(0xff));
  int supported = 0;
  for (int i = 0; i < 256; ++i) supported += opcode_supported(uint8_t(i));
  // RC (FLUSH, ATOMIC WRITE too), UC, UD, CNP, uroce's SACK and SENDs, XRC (RC's, mirrored)
  EXPECT_EQ(supported, 25 + 12 + 2 + 1 + 1 + 6 + 25);
  EXPECT_EQ(opcode_info(Opcode::RC_FLUSH).header_len, 32);  // BTH, FETH, RETH
  EXPECT_EQ(opcode_info(Opcode::RC_ATOMIC_WRITE).header_len, 28);
  EXPECT_TRUE(opcode_info(Opcode::RC_ATOMIC_WRITE).flags & kPayload);
  EXPECT_FALSE(opcode_info(Opcode::RC_FLUSH).flags & kPayload);
  EXPECT_EQ(opcode_info(Opcode::UROCE_SACK).header_len, 16);
  // uroce's SENDs mean what RC's do and add the 8-byte PlaceETH last.
  for (uint8_t o = 0; o <= 0x05; ++o) {
    const OpcodeInfo &rc = kOpcodeTable[o], &ur = kOpcodeTable[0xc8 + o];
    EXPECT_EQ(ur.flags, rc.flags);
    EXPECT_EQ(ur.headers, rc.headers | kPlaceEth);
    EXPECT_EQ(ur.header_len, rc.header_len + 8);
    EXPECT_EQ(ur.transport, Transport::RC);
  }
}

// Round trip of every supported opcode with every header field set to a distinct value.
TEST(Packet, EncodeDecodeRoundTripEveryOpcode) {
  std::mt19937_64 rng(7);
  for (int raw = 0; raw < 256; ++raw) {
    if (!opcode_supported(uint8_t(raw))) continue;
    SCOPED_TRACE(std::string(kOpcodeTable[raw].name));
    Packet p;
    const bool xrc = kOpcodeTable[raw].transport == Transport::XRC;  // given, and read back, as RC's opcode
    p.bth.opcode = Opcode(xrc ? raw - kXrcBase : raw);
    p.xrc = xrc;
    p.xrc_srqn = uint32_t(rng()) & kQpnMask;
    p.bth.solicited = raw & 1;
    p.bth.migreq = raw & 2;
    p.bth.pkey = uint16_t(rng());
    p.bth.dest_qp = uint32_t(rng()) & kQpnMask;
    p.bth.ack_req = raw & 4;
    p.bth.sr = raw & 8;
    p.bth.psn = Psn(uint32_t(rng()));
    p.deth = {uint32_t(rng()), uint32_t(rng()) & kQpnMask};
    p.reth = {rng(), uint32_t(rng()), uint32_t(rng())};
    p.atomic = {rng(), uint32_t(rng()), rng(), rng()};
    p.aeth = {uint8_t(rng()), uint32_t(rng()) & 0xffffff};
    p.atomic_orig = rng();
    p.imm = uint32_t(rng());
    p.ieth = uint32_t(rng());
    p.place = {uint32_t(rng()), uint32_t(rng())};
    p.feth = uint32_t(rng());
    std::vector<uint8_t> payload;
    const auto& info = opcode_info(p.bth.opcode);
    if (info.flags & kPayload) payload.resize(raw % 7 + 1, uint8_t(raw));
    if (info.transport == Transport::CNP) payload.assign(16, 0);
    p.payload = payload;
    std::vector<uint8_t> buf(encoded_len(p) + 16);
    size_t n = encode(p, buf.data());
    icrc_store(buf.data() + n, 0);
    buf.resize(n + kIcrcLen);
    EXPECT_EQ(buf.size(), encoded_len(p));
    Packet q;
    ASSERT_EQ(decode(buf, q), ParseError::None);
    EXPECT_EQ(q.bth.opcode, p.bth.opcode);
    EXPECT_EQ(q.bth.solicited, p.bth.solicited);
    EXPECT_EQ(q.bth.migreq, p.bth.migreq);
    EXPECT_EQ(q.bth.pkey, p.bth.pkey);
    EXPECT_EQ(q.bth.dest_qp, p.bth.dest_qp);
    EXPECT_EQ(q.bth.ack_req, p.bth.ack_req);
    EXPECT_EQ(q.bth.sr, p.bth.sr);
    EXPECT_EQ(q.bth.psn, p.bth.psn);
    if (info.headers & kDeth) { EXPECT_EQ(q.deth.qkey, p.deth.qkey); EXPECT_EQ(q.deth.src_qp, p.deth.src_qp); }
    if (info.headers & kPlaceEth) { EXPECT_EQ(q.place.recv_seq, p.place.recv_seq); EXPECT_EQ(q.place.pkt, p.place.pkt); }
    if (info.headers & kReth) {
      EXPECT_EQ(q.reth.va, p.reth.va); EXPECT_EQ(q.reth.rkey, p.reth.rkey); EXPECT_EQ(q.reth.dma_len, p.reth.dma_len);
    }
    if (info.headers & kAtomicEth) {
      EXPECT_EQ(q.atomic.va, p.atomic.va); EXPECT_EQ(q.atomic.rkey, p.atomic.rkey);
      EXPECT_EQ(q.atomic.swap_add, p.atomic.swap_add); EXPECT_EQ(q.atomic.compare, p.atomic.compare);
    }
    if (info.headers & kAeth) { EXPECT_EQ(q.aeth.syndrome, p.aeth.syndrome); EXPECT_EQ(q.aeth.msn, p.aeth.msn); }
    if (info.headers & kAtomicAckEth) { EXPECT_EQ(q.atomic_orig, p.atomic_orig); }
    if (info.headers & kImmDt) { EXPECT_EQ(q.imm, p.imm); }
    if (info.headers & kIeth) { EXPECT_EQ(q.ieth, p.ieth); }
    if (info.headers & kFeth) { EXPECT_EQ(q.feth, p.feth); }
    EXPECT_EQ(q.xrc, xrc);
    EXPECT_EQ(buf[0], uint8_t(raw));
    if (xrc && (info.flags & kRequest)) { EXPECT_EQ(q.xrc_srqn, p.xrc_srqn); }
    if (info.flags & kPayload) {
      ASSERT_EQ(q.payload.size(), payload.size());
      EXPECT_EQ(0, std::memcmp(q.payload.data(), payload.data(), payload.size()));
    }
  }
}

// FLUSH as rxe lays it out: the FETH right after the BTH, then the RETH.
TEST(Packet, FlushCarriesItsFethBeforeItsReth) {
  Packet p;
  p.bth.opcode = Opcode::RC_FLUSH;
  p.feth = 0x11;
  p.reth = {0x0102030405060708ull, 0xaabbccdd, 64};
  std::vector<uint8_t> buf(encoded_len(p));
  ASSERT_EQ(encode(p, buf.data()), 32u);
  const uint8_t feth[4] = {0, 0, 0, 0x11}, va[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_EQ(0, std::memcmp(buf.data() + 12, feth, 4));
  EXPECT_EQ(0, std::memcmp(buf.data() + 16, va, 8));
}

TEST(Packet, RejectsMalformed) {
  Packet p;
  std::vector<uint8_t> tiny(10, 0);
  EXPECT_EQ(decode(tiny, p), ParseError::TooShort);
  std::vector<uint8_t> buf(16, 0);
  buf[0] = 0x15;  // reserved RC opcode
  EXPECT_EQ(decode(buf, p), ParseError::UnsupportedOpcode);
  buf[0] = uint8_t(Opcode::RC_SEND_ONLY);
  buf[1] = 1;  // tver 1
  EXPECT_EQ(decode(buf, p), ParseError::BadTver);
  buf[1] = 0x30;  // pad 3 with empty payload
  EXPECT_EQ(decode(buf, p), ParseError::BadPad);
  buf[0] = uint8_t(Opcode::RC_WRITE_FIRST);  // needs RETH
  buf[1] = 0;
  EXPECT_EQ(decode(buf, p), ParseError::TooShort);
  std::vector<uint8_t> ack(12 + 4 + 4 + 4, 0);
  ack[0] = uint8_t(Opcode::RC_ACKNOWLEDGE);
  EXPECT_EQ(decode(ack, p), ParseError::PayloadNotAllowed);
  std::vector<uint8_t> odd(12 + 3 + 4, 0);
  EXPECT_EQ(decode(odd, p), ParseError::BadLength);
}

TEST(Aeth, Syndromes) {
  EXPECT_EQ(Aeth::ack(5).syndrome, 0x1f);
  EXPECT_EQ(Aeth::rnr_nak(0, 12).syndrome, 0x2c);
  EXPECT_EQ(Aeth::nak(0, NakCode::PsnSequenceError).syndrome, 0x60);
  EXPECT_EQ(Aeth::nak(0, NakCode::RemoteAccessError).syndrome, 0x62);
  EXPECT_EQ((Aeth{0x2c, 0}.type()), AethType::RnrNak);
  EXPECT_EQ(rnr_timer_ns(12), 640'000u);
  EXPECT_EQ(rnr_timer_ns(0), 655'360'000u);
  EXPECT_EQ(rnr_timer_ns(1), 10'000u);
}

// The worked example from a ConnectX-4 Lx CNP (see tests/data/captures/README.md).
TEST(Icrc, ConnectX4CnpKnownAnswer) {
  const char* hex =
      "e41d2dab2bc27cfe90643b32080045c2003c718c400040119161 0a0011010a00"
      "12010000 12b700280000 8100ffff40000118000000000000000000000000000000000000000082fd002a";
  std::vector<uint8_t> f;
  for (const char* c = hex; *c;) {
    if (*c == ' ') { ++c; continue; }
    f.push_back(uint8_t(std::stoi(std::string(c, 2), nullptr, 16)));
    c += 2;
  }
  ASSERT_EQ(f.size(), 74u);
  std::span<const uint8_t> ib(f.data() + 42, f.size() - 42);
  uint32_t crc = icrc_compute(f.data() + 14, ib.first(ib.size() - 4));
  EXPECT_EQ(crc, 0x2a00fd82u);
  EXPECT_EQ(icrc_load(f.data() + f.size() - 4), crc);
  Packet p;
  ASSERT_EQ(decode(ib, p), ParseError::None);
  EXPECT_EQ(p.bth.opcode, Opcode::CNP);
  EXPECT_EQ(p.bth.dest_qp, 0x118u);
  EXPECT_TRUE(p.bth.becn);
  EXPECT_FALSE(p.bth.fecn);
  // Ours, to the same QP: the same bytes (BTH .. reserved), so the same ICRC over that header.
  Packet cnp;
  cnp.bth.opcode = Opcode::CNP;
  cnp.bth.dest_qp = 0x118;
  cnp.bth.becn = true;
  const uint8_t reserved[16] = {};
  cnp.payload = reserved;
  std::vector<uint8_t> ours(encoded_len(cnp));
  ASSERT_EQ(encode(cnp, ours.data()), ib.size() - kIcrcLen);
  EXPECT_TRUE(std::equal(ours.begin(), ours.begin() + long(ib.size() - kIcrcLen), ib.begin()));
}

TEST(Icrc, ForFlowMatchesExplicitHeader) {
  auto f = FlowAddr::ipv4(0x7f000002, 0x7f000003, 0xc123);
  std::vector<uint8_t> ib(12 + 64, 0xab);
  uint8_t hdr[28];
  write_ip_udp(hdr, f, ib.size() + 4);
  EXPECT_EQ(icrc_compute(hdr, ib), icrc_for_flow(f, ib));
  EXPECT_EQ(ipv4_checksum(hdr, 20), 0);  // a valid header sums to zero
  // Changing a masked field does not change the ICRC; changing a covered one does.
  hdr[8] = 3;   // TTL
  EXPECT_EQ(icrc_compute(hdr, ib), icrc_for_flow(f, ib));
  hdr[5] = 9;   // IP ID
  EXPECT_NE(icrc_compute(hdr, ib), icrc_for_flow(f, ib));
}

// A packet in three pieces (headers, payload where it lies, pad) has the ICRC of the whole.
TEST(Icrc, OverPiecesEqualsOverTheWhole) {
  std::mt19937 rng(11);
  uroce::Gid v6a{}, v6b{};
  v6a.raw[0] = v6b.raw[0] = 0xfd;
  v6a.raw[15] = 1;
  v6b.raw[15] = 2;
  for (const FlowAddr& f : {FlowAddr::ipv4(0x7f000002, 0x7f000003, 0xc123), FlowAddr{v6a, v6b, 0xc001}}) {
    for (size_t head : {12u, 28u, 40u})
      for (size_t body : {0u, 1u, 64u, 4096u}) {
        std::vector<uint8_t> ib(head + body + 3);
        for (auto& x : ib) x = uint8_t(rng());
        std::span<const uint8_t> whole(ib);
        const std::span<const uint8_t> parts[3] = {whole.subspan(0, head), whole.subspan(head, body),
                                                   whole.subspan(head + body)};
        EXPECT_EQ(icrc_for_flow(f, parts), icrc_for_flow(f, whole)) << head << " " << body;
      }
  }
}

// Every packet captured from Linux Soft-RoCE parses, passes our ICRC, and re-encodes to the same bytes.
TEST(Icrc, RxeCapturesParseVerifyAndReencode) {
  std::string dir = UROCE_TEST_DATA "/captures";
  DIR* d = opendir(dir.c_str());
  ASSERT_NE(d, nullptr) << dir;
  std::map<std::string, int> per_file;
  int total = 0;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() < 5 || name.substr(name.size() - 5) != ".pcap") continue;
    auto frames = uroce::test::read_pcap(dir + "/" + name);
    for (size_t i = 0; i < frames.size(); ++i) {
      SCOPED_TRACE(name + " frame " + std::to_string(i));
      const auto& fr = frames[i].bytes;
      ASSERT_GE(fr.size(), 14u + 28 + 16);
      ASSERT_EQ(read_be16(fr.data() + 12), 0x0800);
      const uint8_t* ip = fr.data() + 14;
      ASSERT_EQ(ip[0], 0x45);
      ASSERT_EQ(read_be16(ip + 22), kRoceV2Port);
      size_t udp_len = read_be16(ip + 24);
      std::span<const uint8_t> ib(ip + 28, udp_len - 8);
      Packet p;
      ASSERT_EQ(decode(ib, p), ParseError::None);
      uint32_t crc = icrc_compute(ip, ib.first(ib.size() - kIcrcLen));
      EXPECT_EQ(crc, icrc_load(ib.data() + ib.size() - kIcrcLen));
      std::vector<uint8_t> re(encoded_len(p));
      size_t n = encode(p, re.data());
      ASSERT_EQ(n + kIcrcLen, ib.size());
      icrc_store(re.data() + n, icrc_compute(ip, std::span<const uint8_t>(re.data(), n)));
      EXPECT_TRUE(std::equal(re.begin(), re.end(), ib.begin()));
      ++per_file[name];
      ++total;
    }
  }
  closedir(d);
  EXPECT_EQ(per_file["rc-send.pcap"], 58);
  EXPECT_EQ(per_file["rc-read.pcap"], 45);
  EXPECT_EQ(per_file["rc-atomic.pcap"], 20);
  EXPECT_EQ(per_file["rc-retransmit.pcap"], 113);
  EXPECT_GE(total, 400);
}

// Each folding CRC (128-bit and 512-bit, where the CPU has them) must equal zlib's table CRC
// for every length and alignment.
TEST(Crc32, MatchesZlibOnRandomInputs) {
  using uroce::wire::Crc32Impl;
  std::mt19937_64 rng(11);
  std::vector<uint8_t> buf(9000);
  for (auto& b : buf) b = uint8_t(rng());
  for (Crc32Impl impl : {Crc32Impl::clmul, Crc32Impl::vpclmul}) {
    if (impl > uroce::wire::crc32_best()) continue;  // the table CRC is zlib's own
    for (int i = 0; i < 3000; ++i) {
      size_t off = rng() % 64, len = rng() % (buf.size() - off);
      if (i < 600) len = size_t(i);  // every small length, across each implementation's thresholds
      uint32_t seed = i % 3 == 0 ? 0 : uint32_t(rng());
      uint32_t want = uint32_t(crc32(seed, buf.data() + off, uInt(len)));
      ASSERT_EQ(uroce::wire::crc32_update_using(impl, seed, buf.data() + off, len), want)
          << "impl " << int(impl) << " len " << len << " off " << off;
    }
  }
  EXPECT_EQ(uroce::wire::crc32_update(0, buf.data(), 4096), uint32_t(crc32(0, buf.data(), 4096)));
  EXPECT_EQ(uroce::wire::crc32_update(0x1234, nullptr, 0), 0x1234u);  // an empty piece of a packet
}

// Behind an ordinary UDP socket the sender's IPv4 ID and DF flag are hidden: every rxe packet
// (rxe numbers its IDs) must still pass, with exactly the ID and flags it was sent with.
TEST(Icrc, SolvesTheHiddenIpv4IdOfRxePackets) {
  std::string dir = UROCE_TEST_DATA "/captures";
  DIR* d = opendir(dir.c_str());
  ASSERT_NE(d, nullptr) << dir;
  int solved = 0, assumed = 0;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() < 5 || name.substr(name.size() - 5) != ".pcap") continue;
    for (const auto& fr : uroce::test::read_pcap(dir + "/" + name)) {
      const uint8_t* ip = fr.bytes.data() + 14;
      auto f = FlowAddr::ipv4(read_be32(ip + 12), read_be32(ip + 16), read_be16(ip + 20), read_be16(ip + 22));
      std::span<const uint8_t> ib(ip + 28, read_be16(ip + 24) - 8u);
      Ipv4Fields hidden;
      hidden.seen = false;
      IcrcMatch m = icrc_check(f, ib, hidden);
      ASSERT_TRUE(m == IcrcMatch::Solved || m == IcrcMatch::Assumed) << name;
      EXPECT_EQ(hidden.id, read_be16(ip + 4)) << name;
      EXPECT_EQ(hidden.flags_frag, read_be16(ip + 6)) << name;
      (m == IcrcMatch::Solved ? solved : assumed)++;
      // Seen fields are checked exactly: a wrong ID fails.
      Ipv4Fields seen{uint16_t(read_be16(ip + 4) ^ 1), read_be16(ip + 6), ip[1], ip[8]};
      EXPECT_EQ(icrc_check(f, ib, seen), IcrcMatch::Bad);
      // The ID expected of a GRO segment: the right one matches exactly, a wrong one is solved.
      Ipv4Fields expected;
      expected.seen = false;
      expected.id = read_be16(ip + 4);
      EXPECT_EQ(icrc_check(f, ib, expected), IcrcMatch::Assumed) << name;
      expected.seen = false;
      expected.id = uint16_t(read_be16(ip + 4) + 1);
      EXPECT_EQ(icrc_check(f, ib, expected), IcrcMatch::Solved) << name;
      EXPECT_EQ(expected.id, read_be16(ip + 4)) << name;
    }
  }
  closedir(d);
  EXPECT_GT(solved, 400);
  std::printf("solved %d IDs, %d packets had ID 0\n", solved, assumed);
}

// A corrupted packet passes the solved check with probability about 2^-16.
TEST(Icrc, SolvedCheckCatchesCorruption) {
  std::mt19937_64 rng(2026);
  auto f = FlowAddr::ipv4(0x0a000002, 0x0a000001, 0xc0de);
  const int kTrials = 200000;
  int passed = 0;
  std::vector<uint8_t> pkt(12 + 256 + 4);
  for (int t = 0; t < kTrials; ++t) {
    size_t len = 12 + 4 * (rng() % 64);
    for (size_t i = 0; i < len; ++i) pkt[i] = uint8_t(rng());
    Ipv4Fields sent{uint16_t(rng()), 0x4000};
    auto body = std::span<const uint8_t>(pkt.data(), len);
    icrc_store(pkt.data() + len, icrc_for_flow(f, body, sent));
    for (int k = 0; k < 8; ++k) {  // 8 bytes damaged, the ICRC may be among them
      size_t at = rng() % (len + 4);
      if (at == 4) at = 5;  // the BTH's reserved byte is masked out of the ICRC
      pkt[at] ^= uint8_t(1 + rng() % 255);
    }
    Ipv4Fields hidden;
    hidden.seen = false;
    passed += icrc_check(f, std::span<const uint8_t>(pkt.data(), len + 4), hidden) != IcrcMatch::Bad;
  }
  std::printf("%d of %d corrupted packets passed\n", passed, kTrials);
  EXPECT_LE(passed, 15);  // expectation 200000 * 2^-16 = 3.1
}

// Segmentation offload numbers the IP IDs of a run's segments: the ICRC carried to another ID
// by one multiplication equals the ICRC computed over the whole packet with that ID.
TEST(Icrc, CarriedToAnotherIpv4IdEqualsComputedWithIt) {
  std::mt19937_64 rng(77);
  std::vector<uint8_t> pkt(12 + 4096 + 4);
  for (int t = 0; t < 2000; ++t) {
    auto f = FlowAddr::ipv4(uint32_t(rng()), uint32_t(rng()), uint16_t(rng()));
    size_t len = 12 + 4 * (rng() % 1025);
    for (size_t i = 0; i < len; ++i) pkt[i] = uint8_t(rng());
    auto body = std::span<const uint8_t>(pkt.data(), len);
    Ipv4Fields was{uint16_t(t % 3 ? 0 : rng()), 0x4000, uint8_t(rng()), uint8_t(rng())}, now = was;
    now.id = uint16_t(t < 64 ? t : rng());
    ASSERT_EQ(Ipv4IdShift(len)(icrc_for_flow(f, body, was), was.id, now.id), icrc_for_flow(f, body, now))
        << "trial " << t << ", " << len << " bytes, ID " << was.id << " -> " << now.id;
  }
}

// The ID a GRO buffer's segment is expected to carry (the one after the previous segment's) is
// tried first and checked exactly; where it is wrong (another sender's numbering), the ID is
// still solved.
TEST(Icrc, TheExpectedIdOfASegmentIsCheckedFirst) {
  std::mt19937_64 rng(78);
  auto f = FlowAddr::ipv4(0x0a000002, 0x0a000001, 0xc0de);
  std::vector<uint8_t> pkt(12 + 1024 + 4);
  for (size_t i = 0; i < pkt.size(); ++i) pkt[i] = uint8_t(rng());
  const size_t len = 12 + 1024;
  icrc_store(pkt.data() + len, icrc_for_flow(f, std::span<const uint8_t>(pkt.data(), len), Ipv4Fields{7, 0x4000}));
  Ipv4Fields expect;
  expect.seen = false;
  expect.id = 7;
  EXPECT_EQ(icrc_check(f, pkt, expect), IcrcMatch::Assumed);
  EXPECT_EQ(expect.id, 7);
  Ipv4Fields other;
  other.seen = false;
  other.id = 8;
  EXPECT_EQ(icrc_check(f, pkt, other), IcrcMatch::Solved);
  EXPECT_EQ(other.id, 7);
}

// A payload by reference: the bytes around the hole are the buffer's, the hole's are the
// referenced memory's; copying or materializing gives the same whole packet.
TEST(PacketBuf, PayloadByReferenceCopiesAndMaterializesWhole) {
  std::mt19937 rng(5);
  std::vector<uint8_t> payload(3000), whole(3100);
  for (auto& x : payload) x = uint8_t(rng());
  PacketBuf p;
  p.len = 3100;
  for (uint32_t i = 0; i < p.len; ++i) p.data[i] = uint8_t(i * 7);
  std::memcpy(whole.data(), p.data, p.len);
  std::memcpy(whole.data() + 40, payload.data(), payload.size());
  p.ref = payload.data();
  p.ref_at = 40;
  p.ref_len = 3000;
  std::vector<uint8_t> out(kMaxPacket);
  p.copy_to(out.data());
  EXPECT_EQ(std::memcmp(out.data(), whole.data(), whole.size()), 0);
  p.materialize();
  EXPECT_EQ(p.ref, nullptr);
  EXPECT_EQ(std::memcmp(p.data, whole.data(), whole.size()), 0);
  std::fill(out.begin(), out.end(), 0);
  p.copy_to(out.data());
  EXPECT_EQ(std::memcmp(out.data(), whole.data(), whole.size()), 0);
  // A pooled buffer comes back without a reference.
  BufferPool pool(256);
  PacketBuf* b = pool.alloc();
  b->ref = payload.data();
  pool.release(b);
  EXPECT_EQ(pool.alloc()->ref, nullptr);
}

// Any range of a packet by reference copies to the same offsets as the whole would: ranges
// before, across and after the referenced hole, and empty ones; nothing outside [lo, hi) is
// written.
TEST(PacketBuf, ARangeCopiesWhatTheWholeWouldThere) {
  std::mt19937 rng(6);
  std::vector<uint8_t> payload(1000);
  for (auto& x : payload) x = uint8_t(rng());
  PacketBuf p;
  p.len = 1100;
  for (uint32_t i = 0; i < p.len; ++i) p.data[i] = uint8_t(i * 13 + 1);
  p.ref = payload.data();
  p.ref_at = 60;
  p.ref_len = 1000;
  std::vector<uint8_t> whole(kMaxPacket, 0xee);
  p.copy_to(whole.data());
  for (int trial = 0; trial < 2000; ++trial) {
    uint32_t lo = rng() % (p.len + 1), hi = rng() % (p.len + 1);
    if (lo > hi) std::swap(lo, hi);
    std::vector<uint8_t> out(kMaxPacket, 0xee);
    p.copy_range(out.data(), lo, hi);
    for (uint32_t i = 0; i < p.len; ++i)
      ASSERT_EQ(out[i], i >= lo && i < hi ? whole[i] : 0xee) << "byte " << i << " of [" << lo << ", " << hi << ")";
  }
  PacketBuf q;  // no reference
  q.len = 100;
  for (uint32_t i = 0; i < q.len; ++i) q.data[i] = uint8_t(i);
  std::vector<uint8_t> out(kMaxPacket, 0xee);
  q.copy_range(out.data(), 10, 20);
  for (uint32_t i = 0; i < q.len; ++i) ASSERT_EQ(out[i], i >= 10 && i < 20 ? uint8_t(i) : 0xee) << i;
}

// The IPv6 UDP checksum (sent by AF_XDP, where no kernel makes it) against a byte-by-byte sum
// of the pseudo-header and datagram, for odd and even lengths; a datagram carrying it sums to
// 0xffff, as a receiver checks it.
TEST(Udp6Checksum, MatchesAByteWiseSumAndVerifies) {
  const unsigned seed = 27;
  std::mt19937 rng(seed);
  for (int round = 0; round < 200; ++round) {
    const size_t n = 8 + rng() % 1500;
    std::vector<uint8_t> pkt(kIpv6Len + n);
    for (auto& b : pkt) b = uint8_t(rng());
    uint8_t* udp = pkt.data() + kIpv6Len;
    udp[6] = udp[7] = 0;
    auto naive = [&](const uint8_t* u) {
      uint32_t sum = 0;
      for (int i = 8; i < 40; i += 2) sum += uint32_t(pkt[i]) << 8 | pkt[i + 1];
      sum += uint32_t(n >> 16) + uint32_t(n & 0xffff) + 17;
      for (size_t i = 0; i < n; ++i) sum += (i % 2 ? uint32_t(u[i]) : uint32_t(u[i]) << 8);
      while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
      return uint16_t(sum);
    };
    uint16_t want = uint16_t(~naive(udp));
    if (want == 0) want = 0xffff;
    const uint16_t got = udp6_checksum(pkt.data(), udp, n);
    ASSERT_EQ(got, want) << "seed " << seed << " round " << round << " length " << n;
    write_be16(udp + 6, got);
    ASSERT_EQ(naive(udp), 0xffff) << "seed " << seed << " round " << round;
  }
}
