// The host NIC's status for the uroce command: the daemon asks every process on its channel
// (link/host_nic_proto.hpp, kStatusRequest), waits at most 500 ms for the answers, and sends
// the asker one text of records: each device, then each process (pid, uid, slot, how its
// packets reach it, the services it listens on) followed by what it said of its QPs and
// counters. Root is told of every process, anyone else of its own user's.
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "link/host_nic_proto.hpp"
#include "nicd/daemon.hpp"

namespace uroce::nicd {

using namespace link::nicproto;

namespace {

// What a process may see: root everything, anyone else the processes of its own user (a QP's
// next PSNs are what a forger needs).
bool visible(const ucred& asker, const ucred& of) { return asker.uid == 0 || asker.uid == of.uid; }

// A process's answer, only its own kinds of record: it cannot speak for another process.
std::string own_records(const char* p, size_t n) {
  std::string out;
  for (size_t i = 0; i < n;) {
    const char* end = static_cast<const char*>(std::memchr(p + i, '\n', n - i));
    size_t len = end ? size_t(end - (p + i)) : n - i;
    std::string line(p + i, len);
    if (line.rfind("qp ", 0) == 0 || line.rfind("counter ", 0) == 0) out += line + "\n";
    i += len + 1;
  }
  return out;
}

}  // namespace

void Daemon::start_status(Client& asker) {
  query_ = std::make_unique<StatusQuery>();
  query_->asker = &asker;
  query_->deadline_ms = now_ms() + 500;
  for (auto& [fd, c] : clients_) {
    if (!c->dev || !visible(asker.cred, c->cred)) continue;
    Forwarded ask{};
    ask.kind = kStatusRequest;
    if (send(c->fwd, &ask, sizeof ask, MSG_DONTWAIT | MSG_NOSIGNAL) == ssize_t(sizeof ask)) query_->waiting.insert(c.get());
  }
  if (query_->waiting.empty()) finish_status();
}

void Daemon::on_status_answer(Client& c) {
  ssize_t size = recv(c.fwd, nullptr, 0, MSG_DONTWAIT | MSG_PEEK | MSG_TRUNC);  // the message's length
  std::vector<char> buf(size_t(size > 0 ? size : 1));
  ssize_t n = recv(c.fwd, buf.data(), buf.size(), MSG_DONTWAIT);
  if (n < ssize_t(sizeof kStatusTag) || std::memcmp(buf.data(), kStatusTag, sizeof kStatusTag) != 0) return;
  if (!query_ || !query_->waiting.erase(&c)) return;  // late, or not asked: dropped
  query_->answers[&c] = own_records(buf.data() + sizeof kStatusTag, size_t(n) - sizeof kStatusTag);
  if (query_->waiting.empty()) finish_status();
}

int Daemon::status_timeout_ms() const {
  if (!query_) return -1;
  uint64_t t = now_ms();
  return t >= query_->deadline_ms ? 0 : int(query_->deadline_ms - t);
}

void Daemon::finish_status() {
  std::unique_ptr<StatusQuery> q = std::move(query_);
  std::string text;
  char line[512];
  Client& asker = *q->asker;
  for (const auto& d : devices_) {
    size_t procs = 0;
    for (const Client* o : d->owner) procs += o && visible(asker.cred, o->cred);
    std::snprintf(line, sizeof line, "device addr=%s gids=%zu processes=%zu\n", d->addr.to_string().c_str(),
                  d->gids.size(), procs);
    text += line;
    for (uint32_t s = 1; s < link::steering::kSlots; ++s) {
      Client* c = d->owner[s];
      if (!c || !visible(asker.cred, c->cred)) continue;
      std::string services;
      for (const auto& [sid, who] : d->listeners)
        if (who == c) {
          std::snprintf(line, sizeof line, "%s0x%016llx", services.empty() ? "" : ",", static_cast<unsigned long long>(sid));
          services += line;
        }
      auto answer = q->answers.find(c);
      std::snprintf(line, sizeof line, "process pid=%d uid=%u addr=%s slot=%u receive=%s services=%s answered=%s\n",
                    int(c->cred.pid), unsigned(c->cred.uid), d->addr.to_string().c_str(), s,
                    c->forwarded ? "through-daemon" : "steered", services.empty() ? "-" : services.c_str(),
                    answer != q->answers.end() ? "yes" : "no");
      text += line;
      if (answer != q->answers.end()) text += answer->second;
    }
  }
  int buf = int(text.size()) + (1 << 16);
  setsockopt(asker.ctl, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  reply(asker, 0, "");
  (void)send(asker.ctl, text.data(), text.size(), MSG_NOSIGNAL);
}

}  // namespace uroce::nicd
