// A UDP link's multicast groups (RoCE v2 carries IBA multicast as IP multicast): each group
// joined has a socket of its own, bound to group:4791 and a member on the device's interface.
// The engine's epoll set holds it, so a group's packet wakes the engine as any other does.
// Sending needs nothing: the transmit sockets reach a group address, and the kernel loops a
// copy back to this host's members (IP_MULTICAST_LOOP), the sender's own device included.
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "link/udp_link.hpp"
#include "link/udp_sockets.hpp"

namespace uroce::link {

Status UdpLink::join_group(const Gid& group) {
  auto it = std::find_if(groups_.begin(), groups_.end(), [&](const GroupSocket& g) { return g.gid == group; });
  if (it != groups_.end()) return {};
  const bool v4 = wire::is_v4(group);
  if (v4 ? !ip_ : v6_.empty())
    return make_error(EADDRNOTAVAIL, "multicast: the device has no IPv" + std::string(v4 ? "4" : "6") +
                                         " address to join " + group.to_string() + " with");
  int err = 0;
  int fd = v4 ? make_group_socket(wire::v4_of(group), ip_, ifindex_, &err) : make_group_socket6(group, ifindex_, &err);
  if (fd < 0) return make_error(err, "multicast: joining " + group.to_string() + ": " + std::strerror(err));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {  // a group the engine would sleep through
    err = errno;
    close(fd);
    return make_error(err, "multicast: watching " + group.to_string() + ": " + std::strerror(err));
  }
  groups_.push_back({group, fd});
  groups_due_ = true;
  return {};
}

void UdpLink::leave_group(const Gid& group) {
  auto it = std::find_if(groups_.begin(), groups_.end(), [&](const GroupSocket& g) { return g.gid == group; });
  if (it == groups_.end()) return;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->fd, nullptr);
  close(it->fd);  // and with it the membership
  groups_.erase(it);
}

// After every sleep and every 16th busy poll, at most kGroupBudget packets: a group's traffic
// (which anyone on the network may send) neither costs a system call per group on every turn
// of a spinning engine nor crowds out the device's own packets.
int UdpLink::poll_groups(PacketSink& sink, uint64_t now, int max) {
  if (!std::exchange(groups_due_, false) && (++group_polls_ & 15) != 0) return 0;
  max = std::min(max, kGroupBudget);
  int n = 0;
  for (size_t i = 0; i < groups_.size() && n < max; ++i)
    n += wire::is_v4(groups_[i].gid) ? poll_v4_fd(groups_[i].fd, wire::v4_of(groups_[i].gid), sink, now, max - n)
                                     : poll_v6_fd(groups_[i].fd, groups_[i].gid, sink, now, max - n);
  if (n == max) groups_due_ = true;  // more may wait: the next poll reads on
  return n;
}

}  // namespace uroce::link
