// Event channels: a queue of events per channel and an eventfd that is readable exactly while
// the queue holds any, so programs can poll it, or make it non-blocking and get EAGAIN.
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "compat/cma/cma.hpp"

namespace uroce::compat::cma {

namespace {
void raise(Channel* c) {
  uint64_t one = 1;
  if (c->queue.size() == 1) (void)!write(c->ch.fd, &one, sizeof one);
}
void lower(Channel* c) {
  uint64_t v;
  if (c->queue.empty()) (void)!read(c->ch.fd, &v, sizeof v);  // the count is 1: never blocks
}
}  // namespace

Channel* new_channel(bool mu_held) {
  int fd = eventfd(0, EFD_CLOEXEC);
  if (fd < 0) return nullptr;
  auto* c = new Channel;
  c->ch.fd = fd;
  std::unique_lock g(registry().mu, std::defer_lock);
  if (!mu_held) g.lock();
  registry().channels.insert(c);
  return c;
}

EventBox* post(Id* id, rdma_cm_event_type type, int status, Id* listen) {
  auto* e = new EventBox;
  e->ev.id = &id->id;
  e->ev.listen_id = listen ? &listen->id : nullptr;
  e->ev.event = type;
  e->ev.status = status;
  Channel* c = from(listen ? listen->id.channel : id->id.channel);
  c->queue.push_back(e);
  raise(c);
  return e;
}

void set_conn_data(EventBox* e, const std::vector<uint8_t>& data, size_t skip) {
  e->pdata.assign(data.begin() + std::min(skip, data.size()), data.end());
  // conn and ud both begin with the private data pointer and length.
  e->ev.param.conn.private_data = e->pdata.empty() ? nullptr : e->pdata.data();
  e->ev.param.conn.private_data_len = uint8_t(std::min<size_t>(e->pdata.size(), 255));
}

void drop_events(Id* id) {
  Channel* c = from(id->id.channel);
  if (!c) return;
  size_t before = c->queue.size();
  std::erase_if(c->queue, [&](EventBox* e) {
    bool mine = e->ev.id == &id->id || e->ev.listen_id == &id->id;
    if (mine) delete e;
    return mine;
  });
  if (before && c->queue.empty()) lower(c);
}

std::pair<size_t, size_t> queued_requests(const Id* listen, const Gid& peer) {
  size_t all = 0, mine = 0;
  for (EventBox* e : from(listen->id.channel)->queue)
    if (e->ev.listen_id == &listen->id) {
      ++all;
      if (from(e->ev.id)->offer.peer == peer) ++mine;
    }
  return {all, mine};
}

int complete(Id* id, rdma_cm_event_type expect) {
  if (id->id.event) rdma_ack_cm_event(std::exchange(id->id.event, nullptr));
  rdma_cm_event* ev = nullptr;
  if (rdma_get_cm_event(id->id.channel, &ev)) return -1;
  id->id.event = ev;
  if (ev->event == expect && ev->status == 0) return 0;
  errno = ev->event == RDMA_CM_EVENT_REJECTED ? ECONNREFUSED
          : ev->status < 0                   ? -ev->status
          : ev->status > 0                   ? ECONNREFUSED
                                             : EINVAL;
  return -1;
}

}  // namespace uroce::compat::cma

using namespace uroce::compat::cma;

extern "C" {

rdma_event_channel* rdma_create_event_channel(void) {
  Channel* c = new_channel();
  return c ? &c->ch : nullptr;
}

void rdma_destroy_event_channel(rdma_event_channel* channel) {
  if (!channel) return;
  Channel* c = from(channel);
  std::lock_guard g(registry().mu);
  if (!registry().channels.erase(c)) return;
  for (EventBox* e : c->queue) delete e;
  c->queue.clear();
  // A thread still waiting in it stays blocked (as a read() of the closed fd would), so the
  // channel outlives the call; the program is usually on its way out.
  if (c->waiters) {
    c->closed = true;
    (void)!write(c->ch.fd, "\1\0\0\0\0\0\0\0", 8);  // wake them to see it
    return;
  }
  close(c->ch.fd);
  delete c;
}

int rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
  if (!channel || !event) {
    errno = EINVAL;
    return -1;
  }
  Channel* c = from(channel);
  auto& r = registry();
  std::unique_lock g(r.mu);
  if (!r.channels.count(c)) {
    // Destroyed. With the kernel, a read() of the closed fd fails or reads whatever file took
    // its number; the thread that gets here is a program's event thread racing its own
    // teardown (rping's, after its last event), so it blocks as one already waiting would.
    g.unlock();
    for (;;) pause();
  }
  bool nonblock = fcntl(c->ch.fd, F_GETFL) & O_NONBLOCK;
  for (;;) {
    if (!c->queue.empty()) {
      EventBox* e = c->queue.front();
      c->queue.pop_front();
      lower(c);
      Id* id = from(e->ev.listen_id ? e->ev.listen_id : e->ev.id);
      if (r.ids.count(id)) {
        e->owner = id;
        ++id->events_out;
      }
      *event = &e->ev;
      if (e->attach) {
        g.unlock();
        deliver_join(e);
      }
      return 0;
    }
    if (nonblock) {
      errno = EAGAIN;
      return -1;
    }
    ++c->waiters;
    g.unlock();
    pollfd p{c->ch.fd, POLLIN, 0};
    int n = poll(&p, 1, -1);
    int err = errno;
    g.lock();
    if (c->closed) {  // destroyed meanwhile; the channel stays, this thread keeps waiting
      g.unlock();
      for (;;) pause();  // as a read() of an fd closed under it: blocked for good
    }
    --c->waiters;
    if (n < 0 && err != EINTR) {
      errno = err;
      return -1;
    }
  }
}

int rdma_ack_cm_event(rdma_cm_event* event) {
  if (!event) {
    errno = EINVAL;
    return -1;
  }
  auto* e = reinterpret_cast<EventBox*>(event);
  {
    std::lock_guard g(registry().mu);
    if (e->owner && registry().ids.count(e->owner) && e->owner->events_out > 0) --e->owner->events_out;
  }
  registry().acked.notify_all();
  delete e;
  return 0;
}

const char* rdma_event_str(rdma_cm_event_type event) {
  static const char* const names[] = {
      "RDMA_CM_EVENT_ADDR_RESOLVED",   "RDMA_CM_EVENT_ADDR_ERROR",       "RDMA_CM_EVENT_ROUTE_RESOLVED",
      "RDMA_CM_EVENT_ROUTE_ERROR",     "RDMA_CM_EVENT_CONNECT_REQUEST",  "RDMA_CM_EVENT_CONNECT_RESPONSE",
      "RDMA_CM_EVENT_CONNECT_ERROR",   "RDMA_CM_EVENT_UNREACHABLE",      "RDMA_CM_EVENT_REJECTED",
      "RDMA_CM_EVENT_ESTABLISHED",     "RDMA_CM_EVENT_DISCONNECTED",     "RDMA_CM_EVENT_DEVICE_REMOVAL",
      "RDMA_CM_EVENT_MULTICAST_JOIN",  "RDMA_CM_EVENT_MULTICAST_ERROR",  "RDMA_CM_EVENT_ADDR_CHANGE",
      "RDMA_CM_EVENT_TIMEWAIT_EXIT"};
  unsigned i = unsigned(event);
  return i < sizeof names / sizeof *names ? names[i] : "UNKNOWN EVENT";
}

}  // extern "C"
