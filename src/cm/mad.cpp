#include "cm/mad.hpp"

#include "wire/bytes.hpp"

namespace uroce::cm {

using wire::read_be16;
using wire::read_be32;
using wire::read_be64;

const char* to_string(CmAttr a) {
  switch (a) {
    case CmAttr::ClassPortInfo: return "ClassPortInfo";
    case CmAttr::Req: return "REQ";
    case CmAttr::Mra: return "MRA";
    case CmAttr::Rej: return "REJ";
    case CmAttr::Rep: return "REP";
    case CmAttr::Rtu: return "RTU";
    case CmAttr::Dreq: return "DREQ";
    case CmAttr::Drep: return "DREP";
    case CmAttr::SidrReq: return "SIDR_REQ";
    case CmAttr::SidrRep: return "SIDR_REP";
    case CmAttr::Lap: return "LAP";
    case CmAttr::Apr: return "APR";
  }
  return "?";
}

void write_header(const MadHeader& h, Mad& out) {
  uint8_t* p = out.data();
  p[0] = h.base_version;
  p[1] = h.mgmt_class;
  p[2] = h.class_version;
  p[3] = h.method;
  wire::write_be16(p + 4, h.status);
  wire::write_be16(p + 6, h.class_specific);
  wire::write_be64(p + 8, h.tid);
  wire::write_be16(p + 16, h.attr_id);
  wire::write_be16(p + 18, 0);
  wire::write_be32(p + 20, h.attr_mod);
}

std::optional<MadHeader> read_header(std::span<const uint8_t> mad) {
  if (mad.size() < kMadBytes) return std::nullopt;
  const uint8_t* p = mad.data();
  MadHeader h;
  h.base_version = p[0];
  h.mgmt_class = p[1];
  h.class_version = p[2];
  h.method = p[3];
  h.status = read_be16(p + 4);
  h.class_specific = read_be16(p + 6);
  h.tid = read_be64(p + 8);
  h.attr_id = read_be16(p + 16);
  h.attr_mod = read_be32(p + 20);
  return h;
}

}  // namespace uroce::cm
