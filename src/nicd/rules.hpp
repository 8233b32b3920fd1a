// The host NIC's flow table: ordered rules that match packets arriving for any process of the
// host and act on them before a process sees them, as a NIC's match-action tables do.
//
// A rule matches the source address (an IPv4 or IPv6 prefix), the UDP source port (a range),
// the destination QP (a range of QPNs), the opcode's class and the DSCP; its action drops the
// packet, counts it, polices its source to a rate (a token bucket) or mirrors it into a
// capture. Words, as `uroce rule add` takes them and the rules file keeps them:
//   src 10.0.0.3/32 sport 49152-65535 qpn 0x100-0x1ff opcode write dscp 46 action drop
//   action police 10mbit burst 64k | action count | action mirror /tmp/x.pcap | action prio 5
// "action prio P" classifies instead of acting on what arrives: the QPs of the host's
// processes (on its shared port) whose peer is in the rule's source prefix, and whose own QPN
// is in its range, send in priority P whatever their DSCP maps to. It leaves received packets
// alone, so it sends none of them to the daemon.
// The first rule that matches decides. In the kernel, the steering group's program (classic
// BPF, link/steering.hpp) sends every packet a rule may match (by its source) to the daemon's
// own socket instead of the process's; the daemon matches it exactly, counts, acts, and
// passes what the rule lets through to the process, as it passes MADs. Police is one token
// bucket per rule, shared by everything the rule matches.
#pragma once
#include <linux/filter.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "transport/shared_port.hpp"
#include "uroce/result.hpp"
#include "uroce/types.hpp"

namespace uroce::nicd {

enum class OpClass : uint8_t { Send, Write, Read, Atomic, Ack, Cnp };

struct Rule {
  uint32_t id = 0;
  // Match; unset fields match anything.
  std::optional<std::pair<Gid, int>> src;  // prefix; an IPv4 one counts its bits within the mapped GID
  std::optional<std::pair<uint16_t, uint16_t>> sport;
  std::optional<std::pair<uint32_t, uint32_t>> qpn;
  std::optional<OpClass> opclass;
  std::optional<uint8_t> dscp;
  enum class Action : uint8_t { Drop, Count, Police, Mirror, Prio } action = Action::Drop;
  uint64_t rate_bps = 0, burst_bytes = 0;  // police
  std::string mirror;                      // a pcap file
  uint8_t prio = 0;                        // prio: the priority QPs of this host send in to these peers
  // What it has seen: packets and bytes it matched, and of those the ones it dropped.
  uint64_t packets = 0, bytes = 0, dropped = 0;
  double tokens = -1;  // police: bytes the bucket holds (-1: full, not yet used)
  uint64_t last_ns = 0;

  std::string words() const;  // what parse_rule takes back
  bool matches(std::span<const uint8_t> udp_payload, const Gid& from, uint16_t sport, uint8_t tos) const;
  // Police: whether `bytes` fit the bucket at now_ns (taking them if so).
  bool conforms(size_t bytes, uint64_t now_ns);
};

Result<Rule> parse_rule(std::string_view words);

class RuleTable {
 public:
  static constexpr size_t kMaxRules = 64;  // the steering program stays far below BPF's 4096 instructions
  const std::vector<Rule>& rules() const { return rules_; }
  Rule* first_match(std::span<const uint8_t> udp_payload, const Gid& from, uint16_t sport, uint8_t tos);
  Result<uint32_t> add(Rule r);  // its id
  Status del(uint32_t id);
  // The file keeps one rule per line in parse_rule's words ('#' comments); a bad line fails
  // the whole load and says which.
  Status load(const std::string& path);
  Status save(const std::string& path) const;
  std::string list_text() const;  // records as the status: "rule id=N ... packets= bytes= dropped="
  // The steering program for a group of one address family: packets a rule may match (by
  // source) go to slot 0, the daemon's; the rest by their QPN's slot.
  std::vector<sock_filter> steering_program(bool v4) const;
  // The "action prio" rules as the shared port's classes (the first kClasses of them).
  void publish_classes(transport::SharedPort& port) const;

 private:
  std::vector<Rule> rules_;
  uint32_t next_id_ = 1;
};

// The rules file: $UROCE_RULES, else /etc/uroce/rules for root, else ~/.config/uroce/rules.
std::string rules_path();

}  // namespace uroce::nicd
