// The uroce command's rule requests: add, del and list on the host NIC's flow table. A change
// is saved to the rules file first (a table that could not be kept is not taken), then steers
// at once: the steering groups' programs are replaced, QPs and sockets are left as they are.
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

#include "nicd/daemon.hpp"
#include "wire/ip_udp.hpp"

namespace uroce::nicd {

void Daemon::on_rules(Client& c, const std::string& command) {
  std::istringstream in(command);
  std::string verb, rest;
  in >> verb;
  std::getline(in, rest);
  if (verb != "list") {
    if (c.cred.uid != 0 && c.cred.uid != geteuid())
      return reply(c, EPERM, "uroced: only root or the daemon's user changes the rules");
    RuleTable next = rules_;
    if (verb == "add") {
      auto r = parse_rule(rest);
      if (!r) return reply(c, r.error().code, r.error().message);
      if (auto id = next.add(std::move(*r)); !id) return reply(c, id.error().code, id.error().message);
    } else if (verb == "del") {
      char* end = nullptr;
      const unsigned long id = std::strtoul(rest.c_str(), &end, 10);
      if (rest.find_first_not_of(' ') == std::string::npos || (*end && *end != ' ' && *end != '\n'))
        return reply(c, EINVAL, "rule: del takes a rule's id");
      if (Status s = next.del(uint32_t(id)); !s) return reply(c, s.error().code, s.error().message);
    } else {
      return reply(c, EINVAL, "rule: add WORDS, del ID or list, not '" + verb + "'");
    }
    if (Status s = next.save(rules_path_); !s) return reply(c, s.error().code, s.error().message + " (not changed)");
    rules_ = std::move(next);
    if (Status s = apply_rules(); !s) return reply(c, s.error().code, s.error().message);
  }
  const std::string text = rules_.list_text();
  reply(c, 0, "");
  (void)send(c.ctl, text.data(), text.size(), MSG_NOSIGNAL);
}

Status Daemon::apply_rules() {
  Status s;
  for (auto& d : devices_)
    for (size_t g = 0; g < d->socks.size(); ++g) {
      const auto prog = rules_.steering_program(wire::is_v4(d->gids[g]));
      sock_fprog fp{uint16_t(prog.size()), const_cast<sock_filter*>(prog.data())};
      if (setsockopt(d->socks[g][0], SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &fp, sizeof fp) != 0 && s)
        s = make_error(errno, std::string("uroced: the rules are saved but do not steer ") + d->gids[g].to_string() +
                                  "'s packets yet: " + std::strerror(errno));
    }
  for (auto& d : devices_)
    if (d->port) rules_.publish_classes(*d->port);
  std::set<std::string> used;  // captures no rule names any more are closed
  for (const Rule& r : rules_.rules())
    if (r.action == Rule::Action::Mirror) used.insert(r.mirror);
  std::erase_if(mirrors_, [&](const auto& m) { return !used.count(m.first); });
  return s;
}

}  // namespace uroce::nicd
