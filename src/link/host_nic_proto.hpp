// The host NIC daemon's control protocol (uroced, src/nicd/): fixed-size messages on a
// SOCK_SEQPACKET connection to the abstract UNIX name kName. Abstract names belong to the
// network namespace, so each namespace (each host, as the tests build them) has its own daemon.
// Both ends check the other's credentials (SO_PEERCRED) before trusting anything it says.
#pragma once
#include <cstdint>

namespace uroce::link::nicproto {

inline constexpr char kName[] = "uroce-nic";
inline constexpr int kMaxGids = 8;

enum class Op : uint32_t {
  Attach = 1,  // addr: the device's address; answered with a slot and, as SCM_RIGHTS, the
               // forwarding channel, the device's port page (Reply::port_page), then one
               // receive socket per GID (in GID order), or, for a process of another user
               // than the daemon's, the channel alone: the daemon passes it every packet of
               // its slot
  Listen,      // arg: a CM service ID the process takes on the device (REQs and SIDR_REQs)
  Unlisten,    // arg: a service ID it let go
  Reply,
  Status,      // from the uroce command: answered with a Reply, then one message of text,
               // the host NIC's status as records (kStatusFormat)
  Rules,       // from the uroce command: Request::text is "add WORDS", "del ID" or "list";
               // answered with a Reply (err and why), then, on success, one message of text:
               // the table's records ("rule id=N rule=WORDS,... packets= bytes= dropped=")
};

struct Request {
  Op op{};
  uint32_t reserved = 0;
  uint64_t arg = 0;
  uint8_t addr[16] = {};
  char text[480] = {};  // Rules: the command, NUL-terminated
};

struct Reply {
  Op op = Op::Reply;
  int32_t err = 0;       // 0, or an errno with text saying why
  uint32_t slot = 0;
  uint32_t ngids = 0;
  uint32_t forwarded = 0;  // 1: no receive sockets, every packet comes on the channel
  uint32_t port_page = 0;  // bytes of the port page (transport/shared_port.hpp) whose memfd follows the channel; 0: none
  uint8_t gids[kMaxGids][16] = {};
  char text[200] = {};
};

// A datagram the daemon passes on (a MAD on QP1), as one message of the forwarding channel:
// this header, then the UDP payload (BTH .. ICRC).
struct Forwarded {
  uint8_t src[16];
  uint8_t dst[16];
  uint16_t src_port;
  uint8_t tos;
  uint8_t kind;  // kPacket; or kStatusRequest: no payload, the process answers on the channel
  uint8_t reserved[4];
};
inline constexpr uint8_t kPacket = 0, kStatusRequest = 1;
// A process's answer to kStatusRequest: this tag, then its records.
inline constexpr char kStatusTag[4] = {'S', 'T', 'A', 'T'};
// The status is one record per line: a kind ("device", "process", "qp", "counter"), then
// key=value fields, values without spaces. Every record after a process's is that process's.
inline constexpr const char* kStatusFormat = "kind key=value ...";

}  // namespace uroce::link::nicproto
