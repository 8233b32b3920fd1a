#include "cm/demux.hpp"

#include "cm/mad.hpp"
#include "wire/bytes.hpp"

namespace uroce::cm {

std::optional<MadRecipient> recipient(std::span<const uint8_t> mad) {
  auto h = read_header(mad);
  if (!h || h->mgmt_class != kMgmtClassCm) return std::nullopt;
  const uint8_t* d = mad.data() + kMadHeaderBytes;
  switch (CmAttr(h->attr_id)) {
    case CmAttr::Req:      // local comm ID, reserved, service ID
    case CmAttr::SidrReq:  // request ID, P_Key, reserved, service ID
      return MadRecipient{true, wire::read_be64(d + 8), 0};
    case CmAttr::SidrRep:  // the request ID is the requester's
      return MadRecipient{false, 0, wire::read_be32(d)};
    case CmAttr::Mra: case CmAttr::Rej: case CmAttr::Rep: case CmAttr::Rtu:
    case CmAttr::Dreq: case CmAttr::Drep: case CmAttr::Lap: case CmAttr::Apr:
      return MadRecipient{false, 0, wire::read_be32(d + 4)};  // the sender's ID, then ours
    case CmAttr::ClassPortInfo:
      break;
  }
  return std::nullopt;  // ClassPortInfo, or an attribute the CM does not define
}

}  // namespace uroce::cm
