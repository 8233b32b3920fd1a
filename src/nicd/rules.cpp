// The host NIC's flow table: rule words, exact matching and policing in the daemon, the
// rules file, and the steering program that sends what a rule may match to the daemon.
#include "nicd/rules.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "link/steering.hpp"
#include "wire/bytes.hpp"
#include "wire/ip_udp.hpp"
#include "wire/opcode.hpp"

namespace uroce::nicd {

namespace {

constexpr const char* kClassNames[] = {"send", "write", "read", "atomic", "ack", "cnp"};

Error bad(const std::string& why) { return make_error(EINVAL, "rule: " + why); }

bool num(std::string_view s, uint64_t hi, uint64_t& v) {
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2), base = 16;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  return !s.empty() && ec == std::errc() && end == s.data() + s.size() && v <= hi;
}

// "N" or "N-M", N <= M <= hi.
template <class T>
bool range(std::string_view s, uint64_t hi, std::optional<std::pair<T, T>>& out) {
  const size_t dash = s.find('-');
  uint64_t lo = 0, up = 0;
  if (!num(s.substr(0, dash), hi, lo)) return false;
  if (dash == std::string_view::npos) up = lo;
  else if (!num(s.substr(dash + 1), hi, up) || up < lo) return false;
  out = std::pair<T, T>{T(lo), T(up)};
  return true;
}

// A number with a unit: tc's kbit/mbit/gbit for rates (none: bit/s), k/m for sizes (x 1024).
bool scaled(std::string_view s, std::initializer_list<std::pair<std::string_view, uint64_t>> units, uint64_t& v) {
  uint64_t k = 1;
  for (auto [u, f] : units)
    if (s.size() > u.size() && s.substr(s.size() - u.size()) == u) {
      s.remove_suffix(u.size());
      k = f;
      break;
    }
  return num(s, (1ull << 40) / k, v) && (v *= k, v > 0);  // at most 2^40 whatever the unit
}

std::optional<OpClass> class_of(uint8_t op) {
  if (op == 0x81) return OpClass::Cnp;
  if (op == 0x64 || op == 0x65) return OpClass::Send;
  const uint8_t t = op >> 5;
  if (t != 0 && t != 1 && t != 5) return std::nullopt;  // RC, UC, XRC
  const uint8_t l = op & 0x1f;
  if (l <= 0x05 || l == 0x16 || l == 0x17) return OpClass::Send;
  if (l <= 0x0b || l == 0x1d) return OpClass::Write;
  if (l <= 0x10 || l == 0x1c) return OpClass::Read;
  if (l == 0x11) return OpClass::Ack;
  if (l <= 0x14) return OpClass::Atomic;
  return std::nullopt;
}


}  // namespace

Result<Rule> parse_rule(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::vector<std::string> w;
  for (std::string s; in >> s;) w.push_back(s);
  Rule r;
  bool acted = false;
  for (size_t i = 0; i < w.size(); ++i) {
    const std::string& k = w[i];
    if (i + 1 >= w.size()) return bad("'" + k + "' needs a value");
    const std::string& v = w[++i];
    if (k == "src") {
      const size_t slash = v.find('/');
      auto g = Gid::parse(v.substr(0, slash));
      if (!g) return bad("src takes an IPv4 or IPv6 address, not '" + v + "'");
      const bool v4 = wire::is_v4(*g);
      uint64_t bits = v4 ? 32 : 128;
      if (slash != std::string::npos && !num(std::string_view(v).substr(slash + 1), v4 ? 32 : 128, bits))
        return bad("src's prefix length is 0.." + std::string(v4 ? "32" : "128") + ", not '" + v + "'");
      r.src = {*g, int(bits) + (v4 ? 96 : 0)};
    } else if (k == "sport") {
      if (!range(v, 0xffff, r.sport)) return bad("sport takes PORT or LOW-HIGH, 0..65535, not '" + v + "'");
    } else if (k == "qpn") {
      if (!range(v, 0xffffff, r.qpn)) return bad("qpn takes QPN or LOW-HIGH, 0..0xffffff, not '" + v + "'");
    } else if (k == "opcode") {
      for (int c = 0; c < 6; ++c)
        if (v == kClassNames[c]) r.opclass = OpClass(c);
      if (!r.opclass) return bad("opcode is send, write, read, atomic, ack or cnp, not '" + v + "'");
    } else if (k == "dscp") {
      uint64_t d = 0;
      if (!num(v, 63, d)) return bad("dscp is 0..63, not '" + v + "'");
      r.dscp = uint8_t(d);
    } else if (k == "action") {
      if (acted) return bad("one action per rule");
      acted = true;
      if (v == "drop") r.action = Rule::Action::Drop;
      else if (v == "count") r.action = Rule::Action::Count;
      else if (v == "police") {
        r.action = Rule::Action::Police;
        if (i + 1 >= w.size() || !scaled(w[++i], {{"kbit", 1000}, {"mbit", 1000'000}, {"gbit", 1000'000'000}}, r.rate_bps) ||
            r.rate_bps < 8000)
          return bad("police takes a rate, 8kbit or more (kbit, mbit, gbit)");
        r.burst_bytes = std::max<uint64_t>(16 << 10, r.rate_bps / 8 / 100);  // 10 ms of the rate
        if (i + 2 < w.size() && w[i + 1] == "burst") {
          i += 2;
          if (!scaled(w[i], {{"k", 1024}, {"m", 1 << 20}}, r.burst_bytes) || r.burst_bytes < 1500)
            return bad("burst is a size of 1500 bytes or more (k, m), not '" + w[i] + "'");
        }
      } else if (v == "prio") {
        r.action = Rule::Action::Prio;
        uint64_t p = 0;
        if (i + 1 >= w.size() || !num(w[++i], 7, p)) return bad("prio takes a priority, 0..7");
        r.prio = uint8_t(p);
      } else if (v == "mirror") {
        r.action = Rule::Action::Mirror;
        if (i + 1 >= w.size() || w[i + 1].empty() || w[i + 1][0] != '/') return bad("mirror takes an absolute path");
        r.mirror = w[++i];
      } else {
        return bad("action is drop, count, police RATE [burst SIZE], mirror PATH or prio P, not '" + v + "'");
      }
    } else {
      return bad("'" + k + "' is not src, sport, qpn, opcode, dscp or action");
    }
  }
  if (!acted) return bad("no action (drop, count, police, mirror or prio)");
  return r;
}

std::string Rule::words() const {
  std::ostringstream o;
  if (src) {
    const bool v4 = wire::is_v4(src->first);
    const uint32_t a = wire::v4_of(src->first);
    if (v4) o << "src " << (a >> 24) << "." << (a >> 16 & 255) << "." << (a >> 8 & 255) << "." << (a & 255);
    else o << "src " << src->first.to_string();
    o << "/" << (src->second - (v4 ? 96 : 0)) << " ";
  }
  if (sport) o << "sport " << sport->first << "-" << sport->second << " ";
  if (qpn) o << "qpn 0x" << std::hex << qpn->first << "-0x" << qpn->second << std::dec << " ";
  if (opclass) o << "opcode " << kClassNames[int(*opclass)] << " ";
  if (dscp) o << "dscp " << int(*dscp) << " ";
  switch (action) {
    case Action::Drop: o << "action drop"; break;
    case Action::Count: o << "action count"; break;
    case Action::Police:  // bit/s exactly where kbit would round
      o << "action police " << (rate_bps % 1000 ? rate_bps : rate_bps / 1000) << (rate_bps % 1000 ? "" : "kbit")
        << " burst " << burst_bytes;
      break;
    case Action::Mirror: o << "action mirror " << mirror; break;
    case Action::Prio: o << "action prio " << int(prio); break;
  }
  return o.str();
}

bool Rule::matches(std::span<const uint8_t> p, const Gid& from, uint16_t port, uint8_t tos) const {
  if (p.size() < wire::kBthLen) return false;
  if (src && (wire::is_v4(from) != wire::is_v4(src->first) || !wire::in_prefix(from.raw.data(), src->first.raw.data(), src->second))) return false;
  if (sport && (port < sport->first || port > sport->second)) return false;
  const uint32_t q = wire::read_be32(p.data() + 4) & 0xffffff;
  if (qpn && (q < qpn->first || q > qpn->second)) return false;
  if (opclass && class_of(p[0]) != opclass) return false;
  return !dscp || tos >> 2 == *dscp;
}

bool Rule::conforms(size_t n, uint64_t now_ns) {
  if (tokens < 0) tokens = double(burst_bytes);
  else tokens = std::min(double(burst_bytes), tokens + double(now_ns - last_ns) * double(rate_bps) / 8e9);
  last_ns = now_ns;
  if (tokens < double(n)) return false;
  tokens -= double(n);
  return true;
}

Rule* RuleTable::first_match(std::span<const uint8_t> p, const Gid& from, uint16_t port, uint8_t tos) {
  for (Rule& r : rules_)
    if (r.action != Rule::Action::Prio && r.matches(p, from, port, tos)) return &r;
  return nullptr;
}

Result<uint32_t> RuleTable::add(Rule r) {
  if (rules_.size() >= kMaxRules) return make_error(ENOSPC, "rule: the table holds " + std::to_string(kMaxRules) + " rules");
  r.id = next_id_++;
  rules_.push_back(std::move(r));
  return rules_.back().id;
}

Status RuleTable::del(uint32_t id) {
  for (auto it = rules_.begin(); it != rules_.end(); ++it)
    if (it->id == id) {
      rules_.erase(it);
      return {};
    }
  return make_error(ENOENT, "rule: no rule " + std::to_string(id));
}

Status RuleTable::load(const std::string& path) {
  std::ifstream f(path);
  if (!f) return {};  // no file: no rules
  RuleTable t;
  int n = 0;
  for (std::string line; std::getline(f, line);) {
    ++n;
    if (line.find_first_not_of(" \t") == std::string::npos || line[line.find_first_not_of(" \t")] == '#') continue;
    // "id N" first keeps a rule's number across the daemon's restarts (uroce rule del N).
    std::istringstream words(line);
    std::string first, id_text;
    words >> first >> id_text;
    uint64_t id = 0;
    const bool numbered = first == "id";
    if (numbered && (!num(id_text, UINT32_MAX - 1, id) || id == 0))
      return make_error(EINVAL, path + ":" + std::to_string(n) + ": rule: id takes a number, not '" + id_text + "'");
    if (numbered) line = line.substr(line.find(id_text) + id_text.size());
    auto r = parse_rule(line);
    if (!r) return make_error(EINVAL, path + ":" + std::to_string(n) + ": " + r.error().message);
    if (!numbered) id = t.next_id_;
    for (const Rule& o : t.rules_)
      if (o.id == id) return make_error(EINVAL, path + ":" + std::to_string(n) + ": rule: id " + std::to_string(id) + " twice");
    const uint32_t next = std::max(t.next_id_, uint32_t(id) + 1);  // past every id seen
    t.next_id_ = uint32_t(id);
    if (auto added = t.add(std::move(*r)); !added) return added.error();
    t.next_id_ = next;
  }
  *this = std::move(t);
  return {};
}

Status RuleTable::save(const std::string& path) const {
  const std::string dir = path.substr(0, path.rfind('/'));
  if (!dir.empty()) {  // its directory (one level, as /etc/uroce or ~/.config/uroce)
    (void)!::mkdir(dir.c_str(), 0755);
  }
  const std::string tmp = path + ".new";
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) return make_error(errno ? errno : EIO, "rule: cannot write " + tmp);
    f << "# uroce host NIC rules, first match decides (uroce rule add|del|list)\n";
    for (const Rule& r : rules_) f << "id " << r.id << " " << r.words() << "\n";
    if (!f) return make_error(EIO, "rule: cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return make_error(errno, "rule: cannot replace " + path);
  return {};
}

std::string RuleTable::list_text() const {
  std::ostringstream o;
  for (const Rule& r : rules_) {
    std::string w = r.words();
    for (char& c : w)
      if (c == ' ') c = ',';
    o << "rule id=" << r.id << " rule=" << w << " packets=" << r.packets << " bytes=" << r.bytes
      << " dropped=" << r.dropped << "\n";
  }
  return o.str();
}

std::vector<sock_filter> RuleTable::steering_program(bool v4) const {
  std::vector<sock_filter> prog;
  const uint32_t net = uint32_t(SKF_NET_OFF);
  for (const Rule& r : rules_) {
    if (r.action == Rule::Action::Prio || (r.src && wire::is_v4(r.src->first) != v4)) continue;  // not in this group
    std::vector<sock_filter> b;  // each check jumps to the block's end (the next rule) if unmet
    std::vector<size_t> exits;  // equality tests, whose false branch is the miss
    auto check = [&](uint32_t offset, uint32_t mask, uint32_t k) {
      b.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offset));
      b.push_back(BPF_STMT(BPF_ALU | BPF_AND | BPF_K, mask));
      exits.push_back(b.size());
      b.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, k, 0, 0));
    };
    if (r.src) {
      const int bits = r.src->second - (v4 ? 96 : 0);
      const int words = v4 ? 1 : 4;
      for (int i = 0; i < words; ++i) {
        const int have = std::min(32, std::max(0, bits - 32 * i));
        if (have == 0) break;
        const uint32_t mask = have == 32 ? 0xffffffffu : ~(0xffffffffu >> have);
        const uint32_t val = wire::read_be32(r.src->first.raw.data() + (v4 ? 12 : 4 * i)) & mask;
        check(net + (v4 ? 12 : 8 + 4 * i), mask, val);
      }
    }
    // Not the QPN: UDP GRO hands a process's socket a run of one flow's datagrams, which the
    // program steers by the first's BTH alone. The source is the flow's, the same for all.
    b.push_back(BPF_STMT(BPF_RET | BPF_K, 0));  // the daemon's socket decides
    for (size_t e : exits) b[e].jf = uint8_t(b.size() - e - 1);  // a miss jumps past the block
    prog.insert(prog.end(), b.begin(), b.end());
  }
  const auto steer = link::steering::reuseport_program();
  prog.insert(prog.end(), steer.begin(), steer.end());
  return prog;
}

void RuleTable::publish_classes(transport::SharedPort& port) const {
  using transport::SharedPort;
  port.class_version.fetch_add(1, std::memory_order_acq_rel);  // odd: being written
  std::atomic_thread_fence(std::memory_order_release);
  uint32_t n = 0;
  for (const Rule& r : rules_) {
    if (r.action != Rule::Action::Prio || n == SharedPort::kClasses) continue;
    SharedPort::Class& c = port.classes[n++];
    std::memset(&c, 0, sizeof c);
    if (r.src) {
      std::memcpy(c.gid, r.src->first.raw.data(), 16);
      c.bits = uint8_t(r.src->second);
    }
    c.prio = r.prio;
    c.qpn_lo = r.qpn ? r.qpn->first : 0;
    c.qpn_hi = r.qpn ? r.qpn->second : 0xffffff;
  }
  port.nclasses = n;
  port.class_version.fetch_add(1, std::memory_order_release);
}

std::string rules_path() {
  if (const char* e = std::getenv("UROCE_RULES"); e && *e) return e;
  if (geteuid() == 0) return "/etc/uroce/rules";
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  const char* home = std::getenv("HOME");
  return (xdg && *xdg ? std::string(xdg) : std::string(home ? home : "/tmp") + "/.config") + "/uroce/rules";
}

}  // namespace uroce::nicd
