// The port's traffic classes from text ($UROCE_QOS): the words `dcb ets`, `dcb app` and `tc`
// use, so that what an administrator types for a NIC reads the same here.
#include <cerrno>
#include <charconv>
#include <string>
#include <vector>

#include "uroce/uroce.hpp"

namespace uroce {

namespace {

Error bad(const std::string& why) { return make_error(EINVAL, "QoS: " + why); }

std::vector<std::string_view> words(std::string_view t) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < t.size()) {
    while (i < t.size() && (t[i] == ' ' || t[i] == ',' || t[i] == '\t')) ++i;
    size_t j = i;
    while (j < t.size() && t[j] != ' ' && t[j] != ',' && t[j] != '\t') ++j;
    if (j > i) out.push_back(t.substr(i, j - i));
    i = j;
  }
  return out;
}

// A whole decimal number in [lo, hi].
bool number(std::string_view s, uint64_t lo, uint64_t hi, uint64_t& v) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && end == s.data() + s.size() && v >= lo && v <= hi;
}

// "A:B" with A in [0, a_hi] and B in [b_lo, b_hi].
bool pair_of(std::string_view s, uint64_t a_hi, uint64_t b_lo, uint64_t b_hi, uint64_t& a, uint64_t& b) {
  const size_t c = s.find(':');
  return c != std::string_view::npos && number(s.substr(0, c), 0, a_hi, a) && number(s.substr(c + 1), b_lo, b_hi, b);
}

// tc's units: kbit (the default), mbit, gbit; 1 Mb/s to 1000 Gb/s.
bool rate_kbps(std::string_view s, uint64_t& kbps) {
  uint64_t scale = 1;
  for (auto [unit, k] : {std::pair<std::string_view, uint64_t>{"kbit", 1}, {"mbit", 1000}, {"gbit", 1000'000}})
    if (s.size() > unit.size() && s.substr(s.size() - unit.size()) == unit) {
      s.remove_suffix(unit.size());
      scale = k;
      break;
    }
  uint64_t n = 0;
  if (!number(s, 1, 1'000'000'000, n)) return false;
  kbps = n * scale;
  return kbps >= 1000 && kbps <= 1000'000'000;
}

}  // namespace

Result<PortQos> parse_qos(std::string_view text) {
  PortQos q;
  enum class Key { None, Strict, Ets, Dscp, Rate, Share } key = Key::None;
  bool rate_given = false, share_given = false;
  std::string_view empty;  // a word that still waits for its first value
  for (std::string_view w : words(text)) {
    if (w == "strict" || w == "ets" || w == "dscp" || w == "rate" || w == "share") {
      if (!empty.empty()) return bad(std::string(empty) + " needs a value");
      empty = w;
      key = w == "strict" ? Key::Strict
            : w == "ets"  ? Key::Ets
            : w == "dscp" ? Key::Dscp
            : w == "rate" ? Key::Rate
                          : Key::Share;
    } else {
      empty = {};
      uint64_t a = 0, b = 0;
      const std::string ws(w);
      switch (key) {
        case Key::None:
          return bad("'" + ws + "' is not strict, ets, dscp, rate or share");
        case Key::Strict:
          if (!number(w, 0, 7, a)) return bad("strict takes priorities 0..7, not '" + ws + "'");
          q.strict[a] = true;
          break;
        case Key::Ets:
          if (!pair_of(w, 7, 1, 100, a, b)) return bad("ets takes PRIORITY:WEIGHT, 0..7:1..100, not '" + ws + "'");
          q.strict[a] = false;
          q.weight[a] = uint8_t(b);
          break;
        case Key::Dscp:
          if (!pair_of(w, 63, 0, 7, a, b)) return bad("dscp takes DSCP:PRIORITY, 0..63:0..7, not '" + ws + "'");
          q.dscp_prio[a] = uint8_t(b);
          break;
        case Key::Rate:
          if (rate_given) return bad("rate takes one value");
          if (!rate_kbps(w, q.port_kbps))
            return bad("rate is 1mbit..1000gbit (kbit, mbit or gbit; no unit: kbit), not '" + ws + "'");
          rate_given = true;
          break;
        case Key::Share:
          if (share_given) return bad("share takes one value");
          if (!number(w, 1, 100, a)) return bad("share is a weight 1..100, not '" + ws + "'");
          q.share = uint8_t(a);
          share_given = true;
          break;
      }
    }
  }
  if (!empty.empty()) return bad(std::string(empty) + " needs a value");
  return q;
}

Status check_qos(const PortQos& q) {
  for (uint8_t p : q.dscp_prio)
    if (p > 7) return bad("a DSCP's priority is 0..7, not " + std::to_string(p));
  for (uint8_t w : q.weight)
    if (w < 1 || w > 100) return bad("an ETS weight is 1..100, not " + std::to_string(w));
  if (q.share < 1 || q.share > 100) return bad("share is 1..100, not " + std::to_string(q.share));
  if (q.port_kbps > 1000'000'000) return bad("the port's rate is at most 1000 Gb/s");
  return {};
}

}  // namespace uroce
