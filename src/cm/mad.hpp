// Management datagrams (IBA 13.4): the 256-byte UD messages that the communication manager
// exchanges on QP1 (the GSI), Q_Key 0x80010000. Only the common MAD header is decoded here; the
// CM's attributes are in messages.hpp.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <span>

#include "wire/headers.hpp"

namespace uroce::cm {

using wire::kGsiQkey;
using wire::kGsiQpn;
inline constexpr size_t kMadBytes = 256;
inline constexpr size_t kMadHeaderBytes = 24;
inline constexpr size_t kMadDataBytes = kMadBytes - kMadHeaderBytes;  // 232: a CM message

inline constexpr uint8_t kMgmtClassCm = 0x07;
inline constexpr uint8_t kCmClassVersion = 2;
inline constexpr uint8_t kMethodSend = 0x03;

// CM attribute IDs (IBA 12.11, Table 104).
enum class CmAttr : uint16_t {
  ClassPortInfo = 0x0001, Req = 0x0010, Mra = 0x0011, Rej = 0x0012, Rep = 0x0013, Rtu = 0x0014,
  Dreq = 0x0015, Drep = 0x0016, SidrReq = 0x0017, SidrRep = 0x0018, Lap = 0x0019, Apr = 0x001a,
};
const char* to_string(CmAttr a);

struct MadHeader {
  uint8_t base_version = 1;
  uint8_t mgmt_class = kMgmtClassCm;
  uint8_t class_version = kCmClassVersion;
  uint8_t method = kMethodSend;
  uint16_t status = 0;
  uint16_t class_specific = 0;
  uint64_t tid = 0;
  uint16_t attr_id = 0;
  uint32_t attr_mod = 0;
};

using Mad = std::array<uint8_t, kMadBytes>;

void write_header(const MadHeader& h, Mad& out);
// The header of a received MAD, or nullopt if it is shorter than a MAD.
std::optional<MadHeader> read_header(std::span<const uint8_t> mad);

}  // namespace uroce::cm
