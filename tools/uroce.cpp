// uroce: the host NIC as its users see it, like `rdma link`, `rdma resource show qp` and
// `rdma statistic` for kernel devices. `uroce [status] [--json]` lists the host's devices
// (each with its interface and address), then asks the host NIC daemon of this network
// namespace (uroced) for every shared device, the processes using it (pid, uid, slot, how
// their packets reach them, the CM services they listen on), each process's QPs (number,
// type, state, peer, next PSNs) and its counters that are not zero. Root sees every process;
// anyone else, the processes of its own user. `uroce rule add|del|list [--json]` manages the
// host NIC's flow table (nicd/rules.hpp).
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "link/host_nic_proto.hpp"
#include "nicd/rules.hpp"
#include "uroce/uroce.hpp"

using namespace uroce::link::nicproto;

namespace {

struct Record {
  std::string kind;
  std::vector<std::pair<std::string, std::string>> fields;
  std::string get(const std::string& k) const {
    for (const auto& [key, v] : fields)
      if (key == k) return v;
    return "";
  }
};

std::vector<Record> parse(const std::string& text) {
  std::vector<Record> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    Record r;
    words >> r.kind;
    for (std::string w; words >> w;) {
      size_t eq = w.find('=');
      if (eq != std::string::npos) r.fields.emplace_back(w.substr(0, eq), w.substr(eq + 1));
    }
    if (!r.kind.empty()) out.push_back(std::move(r));
  }
  return out;
}

// A JSON value: a number where the text is one (hex included), else a string.
std::string json_value(const std::string& v) {
  char* end = nullptr;
  errno = 0;
  unsigned long long n = std::strtoull(v.c_str(), &end, 0);
  if (!v.empty() && *end == 0 && errno == 0 && v[0] != '-') return std::to_string(n);
  std::string s = "\"";
  for (char c : v) s += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
  return s + "\"";
}

std::string json_object(const Record& r, const std::vector<std::string>& skip = {}) {
  std::string s = "{";
  for (const auto& [k, v] : r.fields) {
    bool skipped = false;
    for (const auto& x : skip) skipped |= x == k;
    if (skipped) continue;
    if (s.size() > 1) s += ",";
    s += "\"" + k + "\":" + (k == "answered" ? (v == "yes" ? "true" : "false") : json_value(v));
  }
  return s;
}

// The host's devices, as `rdma link` shows them: what a program may open.
std::string links_json() {
  std::string out = "\"links\":[";
  for (const auto& d : uroce::Device::list()) {
    out += (out.back() == '[' ? "" : ",") + std::string("{\"name\":\"") + d.name + "\",\"netdev\":\"" + d.interface +
           "\",\"addr\":\"" + (d.loopback ? "127.0.0.x" : d.addr) + "\"}";
  }
  return out + "]";
}

void print_links() {
  const char* sh = std::getenv("UROCE_SHARED");
  const bool shared = !sh || std::strcmp(sh, "0") != 0;
  for (const auto& d : uroce::Device::list())
    std::printf("link %s netdev %s addr %s%s\n", d.name.c_str(), d.interface.c_str(),
                d.loopback ? "127.0.0.x" : d.addr.c_str(),
                d.loopback || !shared ? " (each process its own)" : " (shared by the host's processes)");
}

void print_json(const std::vector<Record>& recs) {
  std::string out = "{" + links_json() + ",\"devices\":[";
  bool dev_open = false, proc_open = false, first_dev = true, first_proc = true, first_qp = true;
  std::string counters;
  auto close_proc = [&] {
    if (!proc_open) return;
    out += "],\"counters\":{" + counters + "}}";
    proc_open = false;
  };
  auto close_dev = [&] {
    close_proc();
    if (dev_open) out += "]}";
    dev_open = false;
  };
  for (const Record& r : recs) {
    if (r.kind == "device") {
      close_dev();
      // The process count is the list's length: a key appears once in an object.
      out += (first_dev ? "" : ",") + json_object(r, {"processes"}) + ",\"processes\":[";
      first_dev = false;
      first_proc = true;
      dev_open = true;
    } else if (r.kind == "process") {
      close_proc();
      std::string services = "[";
      std::string list = r.get("services");
      for (size_t p = 0; list != "-" && p < list.size();) {
        size_t q = list.find(',', p);
        services += (services.size() > 1 ? "," : "") + json_value(list.substr(p, q - p));
        p = q == std::string::npos ? list.size() : q + 1;
      }
      out += (first_proc ? "" : ",") + json_object(r, {"services", "addr"}) + ",\"services\":" + services +
             "],\"qps\":[";
      first_proc = false;
      first_qp = true;
      counters.clear();
      proc_open = true;
    } else if (r.kind == "qp" && proc_open) {
      out += (first_qp ? "" : ",") + json_object(r) + "}";
      first_qp = false;
    } else if (r.kind == "counter" && proc_open) {
      counters += (counters.empty() ? "" : ",") + std::string("\"") + r.get("name") + "\":" + json_value(r.get("value"));
    }
  }
  close_dev();
  std::printf("%s]}\n", out.c_str());
}

void print_text(const std::vector<Record>& recs) {
  if (recs.empty()) std::printf("no shared device is open on this host\n");
  std::string counters;
  auto flush_counters = [&] {
    if (!counters.empty()) std::printf("    counters:%s\n", counters.c_str());
    counters.clear();
  };
  for (const Record& r : recs) {
    if (r.kind == "device") {
      flush_counters();
      std::printf("device %s: %s GIDs, %s processes\n", r.get("addr").c_str(), r.get("gids").c_str(),
                  r.get("processes").c_str());
    } else if (r.kind == "process") {
      flush_counters();
      std::printf("  pid %s uid %s slot %s, packets %s, services %s%s\n", r.get("pid").c_str(), r.get("uid").c_str(),
                  r.get("slot").c_str(), r.get("receive").c_str(), r.get("services").c_str(),
                  r.get("answered") == "yes" ? "" : " (did not answer)");
    } else if (r.kind == "qp") {
      std::printf("    qp %s %s %s -> %s qp %s, sq_psn %s epsn %s\n", r.get("qpn").c_str(), r.get("type").c_str(),
                  r.get("state").c_str(), r.get("dgid").c_str(), r.get("dest_qpn").c_str(), r.get("sq_psn").c_str(),
                  r.get("epsn").c_str());
      std::printf("      packets tx %s rx %s, bytes tx %s rx %s, retransmitted %s (timeouts %s), NAKs tx %s rx %s, "
                  "RNR NAKs tx %s rx %s, CNPs tx %s rx %s\n",
                  r.get("tx_packets").c_str(), r.get("rx_packets").c_str(), r.get("tx_bytes").c_str(),
                  r.get("rx_bytes").c_str(), r.get("retransmitted_packets").c_str(), r.get("retransmit_timeouts").c_str(),
                  r.get("tx_naks").c_str(), r.get("rx_naks").c_str(), r.get("tx_rnr_naks").c_str(),
                  r.get("rx_rnr_naks").c_str(), r.get("tx_cnps").c_str(), r.get("rx_cnps").c_str());
    } else if (r.kind == "counter") {
      counters += " " + r.get("name") + "=" + r.get("value");
    }
  }
  flush_counters();
}

// One request to the daemon of this network namespace: its text answer, or nullopt with
// `err` set (ECONNREFUSED/ENOENT: no daemon runs; else its error, said on stderr).
std::optional<std::string> ask(Op op, const std::string& command, int& err) {
  err = 0;
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path + 1, kName, sizeof kName - 1);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), socklen_t(offsetof(sockaddr_un, sun_path) + sizeof kName)) != 0) {
    err = errno;
    if (fd >= 0) close(fd);
    return std::nullopt;
  }
  Request q;
  q.op = op;
  if (command.size() >= sizeof q.text) {
    std::fprintf(stderr, "uroce: a request of at most %zu characters\n", sizeof q.text - 1);
    close(fd);
    return err = EINVAL, std::nullopt;
  }
  std::snprintf(q.text, sizeof q.text, "%s", command.c_str());
  Reply r;
  pollfd p{fd, POLLIN, 0};
  if (send(fd, &q, sizeof q, MSG_NOSIGNAL) != ssize_t(sizeof q) || poll(&p, 1, 5000) != 1 ||
      recv(fd, &r, sizeof r, 0) != ssize_t(sizeof r)) {
    std::fprintf(stderr, "uroce: the host NIC daemon did not answer\n");
    close(fd);
    return err = EIO, std::nullopt;
  }
  if (r.err) {
    r.text[sizeof r.text - 1] = 0;
    std::fprintf(stderr, "uroce: %s\n", r.text);
    close(fd);
    return err = r.err, std::nullopt;
  }
  p.revents = 0;
  ssize_t n = poll(&p, 1, 5000) == 1 ? recv(fd, nullptr, 0, MSG_PEEK | MSG_TRUNC) : -1;
  std::string text(size_t(n > 0 ? n : 0), '\0');
  if (n < 0 || (n > 0 && recv(fd, text.data(), text.size(), 0) != n)) {
    std::fprintf(stderr, "uroce: the host NIC daemon's answer did not arrive\n");
    close(fd);
    return err = EIO, std::nullopt;
  }
  close(fd);
  return text;
}

bool no_daemon(int err) { return err == ECONNREFUSED || err == ENOENT; }

void print_rules(const std::vector<Record>& recs, bool json, bool live) {
  if (json) {
    std::string out = "{\"daemon\":" + std::string(live ? "true" : "false") + ",\"rules\":[";
    for (const Record& r : recs) {
      std::string words = r.get("rule");
      for (char& c : words) c = c == ',' ? ' ' : c;
      out += (out.back() == '[' ? "" : ",") + std::string("{\"id\":") + json_value(r.get("id")) + ",\"rule\":" +
             json_value(words) + ",\"packets\":" + json_value(r.get("packets")) + ",\"bytes\":" +
             json_value(r.get("bytes")) + ",\"dropped\":" + json_value(r.get("dropped")) + "}";
    }
    std::printf("%s]}\n", out.c_str());
    return;
  }
  if (!live) std::printf("no host NIC daemon runs: the rules file's rules, which it takes when it starts\n");
  if (recs.empty()) std::printf("no rules\n");
  for (const Record& r : recs) {
    std::string words = r.get("rule");
    for (char& c : words) c = c == ',' ? ' ' : c;
    std::printf("rule %s: %s  (packets %s, bytes %s, dropped %s)\n", r.get("id").c_str(), words.c_str(),
                r.get("packets").c_str(), r.get("bytes").c_str(), r.get("dropped").c_str());
  }
}

// uroce rule add WORDS... | del ID | list: through the daemon, or, when none runs, in the
// rules file it reads when it starts.
int rule_command(const std::vector<std::string>& args, bool json) {
  if (args.empty() || (args[0] != "add" && args[0] != "del" && args[0] != "list") ||
      (args[0] == "list") != (args.size() == 1)) {
    std::fprintf(stderr, "usage: uroce rule add WORDS... | rule del ID | rule list [--json]\n"
                         "  WORDS: [src ADDR[/BITS]] [sport P[-Q]] [qpn N[-M]] [opcode send|write|read|atomic|ack|cnp]\n"
                         "         [dscp D] action drop|count|police RATE [burst SIZE]|mirror PATH|prio P\n");
    return 2;
  }
  std::string command;
  for (const auto& a : args) command += (command.empty() ? "" : " ") + a;
  int err = 0;
  if (auto text = ask(Op::Rules, command, err)) {
    print_rules(parse(*text), json, true);
    return 0;
  }
  if (!no_daemon(err)) return 1;
  uroce::nicd::RuleTable t;
  const std::string path = uroce::nicd::rules_path();
  uroce::Status s = t.load(path);
  if (s && args[0] == "add") {
    auto r = uroce::nicd::parse_rule(command.substr(4));
    s = r ? uroce::Status(t.add(std::move(*r)) ? uroce::Status{} : uroce::make_error(ENOSPC, "rule: the table is full"))
          : uroce::Status(r.error());
  } else if (s && args[0] == "del") {
    s = t.del(uint32_t(std::strtoul(args[1].c_str(), nullptr, 10)));
  }
  if (s && args[0] != "list") s = t.save(path);
  if (!s) {
    std::fprintf(stderr, "uroce: %s\n", s.error().message.c_str());
    return 1;
  }
  print_rules(parse(t.list_text()), json, false);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool json = false;
  std::vector<std::string> rule_args;
  bool rule = argc > 1 && std::string(argv[1]) == "rule";
  for (int i = rule ? 2 : 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--json") json = true;
    else if (rule) rule_args.push_back(a);
    else if (a != "status") {
      std::fprintf(stderr, "usage: uroce [status] [--json] | uroce rule add|del|list ...\n");
      return 2;
    }
  }
  if (rule) return rule_command(rule_args, json);
  int err = 0;
  auto text = ask(Op::Status, "", err);
  if (!text) {
    if (!no_daemon(err)) return 1;
    // No daemon: no process of this host (network namespace) has a shared device open.
    if (json) {
      std::printf("{%s,\"devices\":[]}\n", links_json().c_str());
    } else {
      print_links();
      std::printf("no shared device is open on this host (no host NIC daemon runs)\n");
    }
    return 0;
  }
  auto recs = parse(*text);
  if (json) {
    print_json(recs);
  } else {
    print_links();
    print_text(recs);
  }
  return 0;
}
