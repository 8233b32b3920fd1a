// The drop-in's completion queues: polling (classic and extended), arming, channels.
#include <arpa/inet.h>
#include <sched.h>
#include <poll.h>
#include <fcntl.h>
#include <csignal>
#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>

#include "compat/internal.hpp"

using namespace uroce;
using namespace uroce::compat;

namespace uroce::compat {

// Programs busy-poll: after a run of empty polls, give the core away once so that the NIC
// engine threads run even where there are fewer cores than spinning threads.
thread_local unsigned t_empty_polls = 0;

unsigned wc_flags(const Wc& w) {
  return (w.with_imm ? IBV_WC_WITH_IMM : 0) | (w.with_grh ? IBV_WC_GRH : 0) | (w.with_inv ? IBV_WC_WITH_INV : 0) |
         w.tm_flags;  // IBV_WC_TM_* bits as they are
}
// ibv_wc's imm_data and invalidated_rkey share their place: big-endian immediate data, or the
// rkey in host order.
uint32_t imm_or_rkey(const Wc& w) { return w.with_inv ? w.invalidated_rkey : htonl(w.imm_data); }

void count_poll(int got) {
  if (got) {
    t_empty_polls = 0;
  } else if (++t_empty_polls % 64 == 0) {
    sched_yield();
  }
}

int poll_cq(ibv_cq* cq, int n, ibv_wc* out) {
  Wc wc[32];
  int total = 0;
  while (total < n) {
    int k = from<UCq>(cq)->cq->poll({wc, size_t(std::min(n - total, 32))});
    for (int i = 0; i < k; ++i) {
      ibv_wc& o = out[total + i];
      const Wc& w = wc[i];
      o = ibv_wc{};
      o.wr_id = w.wr_id;
      o.status = ibv_wc_status(w.status);
      o.opcode = ibv_wc_opcode(w.opcode);
      o.vendor_err = w.vendor_err;
      o.byte_len = w.byte_len;
      o.imm_data = imm_or_rkey(w);
      o.qp_num = w.qp_num;
      o.src_qp = w.src_qp;
      o.wc_flags = wc_flags(w);
      o.sl = uint8_t(w.network_hdr);  // RoCE: the L3 header type, as RoCE providers report it
    }
    total += k;
    if (k < 32) break;
  }
  count_poll(total);
  return total;
}

int req_notify_cq(ibv_cq* cq, int solicited_only) {
  return from<UCq>(cq)->cq->req_notify(solicited_only != 0) ? 0 : EINVAL;
}

// The extended CQ's polling: one completion at a time, taken from the ring by start/next_poll
// (so nothing is held back between end_poll and the next start_poll) and read field by field.
UCq* ucq(ibv_cq_ex* c) { return from<UCq>(c); }

int x_next_poll(ibv_cq_ex* cq) {
  UCq* c = ucq(cq);
  int got = c->cq->poll({&c->cur, 1});
  count_poll(got);
  if (!got) return ENOENT;
  cq->wr_id = c->cur.wr_id;
  cq->status = ibv_wc_status(c->cur.status);
  return 0;
}
int x_start_poll(ibv_cq_ex* cq, ibv_poll_cq_attr* attr) {
  if (attr && attr->comp_mask) return EINVAL;
  return x_next_poll(cq);
}
void x_end_poll(ibv_cq_ex*) {}
ibv_wc_opcode x_read_opcode(ibv_cq_ex* cq) { return ibv_wc_opcode(ucq(cq)->cur.opcode); }
uint32_t x_read_vendor_err(ibv_cq_ex* cq) { return ucq(cq)->cur.vendor_err; }
uint32_t x_read_byte_len(ibv_cq_ex* cq) { return ucq(cq)->cur.byte_len; }
__be32 x_read_imm_data(ibv_cq_ex* cq) { return imm_or_rkey(ucq(cq)->cur); }  // ibv_wc_read_invalidated_rkey too
uint32_t x_read_qp_num(ibv_cq_ex* cq) { return ucq(cq)->cur.qp_num; }
uint32_t x_read_src_qp(ibv_cq_ex* cq) { return ucq(cq)->cur.src_qp; }
unsigned x_read_wc_flags(ibv_cq_ex* cq) { return wc_flags(ucq(cq)->cur); }
uint32_t x_read_slid(ibv_cq_ex*) { return 0; }  // RoCE has no LIDs
uint8_t x_read_sl(ibv_cq_ex* cq) { return uint8_t(ucq(cq)->cur.network_hdr); }
uint8_t x_read_dlid_path_bits(ibv_cq_ex*) { return 0; }

UCq* new_cq(ibv_context* ctx, uint32_t cqe, void* cq_context, ibv_comp_channel* channel) {
  auto cq = uctx(ctx)->dev->create_cq(cqe);
  if (!cq) return fail<UCq>(cq.error());
  auto* c = new UCq{};
  c->cq = std::move(*cq);
  c->ibv.context = ctx;
  c->ibv.channel = channel;
  c->ibv.cq_context = cq_context;
  c->ibv.cqe = int(c->cq->capacity());
  pthread_mutex_init(&c->ibv.mutex, nullptr);
  pthread_cond_init(&c->ibv.cond, nullptr);
  if (channel) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = c;
    epoll_ctl(channel->fd, EPOLL_CTL_ADD, c->cq->fd(), &ev);
    ++channel->refcnt;
  }
  return c;
}

// Completion timestamps: the device clock counts nanoseconds (hca_core_clock is 1 GHz), and the
// wall-clock form is that time moved by how far CLOCK_REALTIME is from it now.
uint64_t x_read_completion_ts(ibv_cq_ex* cq) { return ucq(cq)->cur.timestamp_ns; }
uint64_t x_read_completion_wallclock_ns(ibv_cq_ex* cq) {
  timespec mono, real;
  clock_gettime(CLOCK_MONOTONIC, &mono);
  clock_gettime(CLOCK_REALTIME, &real);
  const int64_t offset = (int64_t(real.tv_sec) - int64_t(mono.tv_sec)) * 1'000'000'000 + (real.tv_nsec - mono.tv_nsec);
  return uint64_t(int64_t(ucq(cq)->cur.timestamp_ns) + offset);
}

// A tag matching SRQ's completion: its TMH's tag and application context.
void x_read_tm_info(ibv_cq_ex* cq, ibv_wc_tm_info* info) {
  info->tag = ucq(cq)->cur.tm_tag;
  info->priv = ucq(cq)->cur.tm_priv;
}

// The standard fields, completion timestamps and tag matching: no VLAN or flow tag.
ibv_cq_ex* create_cq_ex(ibv_context* ctx, ibv_cq_init_attr_ex* a) {
  if (a->cqe == 0 || a->cqe > uint32_t(INT32_MAX) || a->comp_vector >= uint32_t(ctx->num_comp_vectors) ||
      (a->comp_mask & ~uint32_t(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD))) {
    errno = EINVAL;
    return nullptr;
  }
  uint32_t flags = a->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS ? a->flags : 0;
  constexpr uint64_t kOffered = uint64_t(IBV_WC_STANDARD_FLAGS) | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
                                IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK | IBV_WC_EX_WITH_TM_INFO;
  // A CQ in a parent domain (IBV_CQ_INIT_ATTR_MASK_PD) is an ordinary CQ: only the domain is checked.
  if ((a->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) && (!a->parent_domain || !from<UPd>(a->parent_domain)->base)) {
    errno = EINVAL;
    return nullptr;
  }
  if ((a->wc_flags & ~kOffered) ||
      (flags & ~uint32_t(IBV_CREATE_CQ_ATTR_SINGLE_THREADED))) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  UCq* c = new_cq(ctx, a->cqe, a->cq_context, a->channel);
  if (!c) return nullptr;
  ibv_cq_ex& x = c->ibv;
  x.start_poll = x_start_poll;
  x.next_poll = x_next_poll;
  x.end_poll = x_end_poll;
  x.read_opcode = x_read_opcode;
  x.read_vendor_err = x_read_vendor_err;
  x.read_byte_len = x_read_byte_len;
  x.read_imm_data = x_read_imm_data;
  x.read_qp_num = x_read_qp_num;
  x.read_src_qp = x_read_src_qp;
  x.read_wc_flags = x_read_wc_flags;
  x.read_slid = x_read_slid;
  x.read_sl = x_read_sl;
  x.read_dlid_path_bits = x_read_dlid_path_bits;
  x.read_completion_ts = x_read_completion_ts;
  x.read_completion_wallclock_ns = x_read_completion_wallclock_ns;
  x.read_tm_info = x_read_tm_info;
  return &x;
}

}  // namespace uroce::compat

namespace {

// libibverbs blocks in read(), which a signal handler interrupts (EINTR) unless it was installed
// with SA_RESTART; epoll_wait always returns EINTR. Which signal came is not known here: EINTR
// goes to the program if any handler it installed would interrupt a read (qperf ends its tests
// with SIGALRM and expects that), else the wait goes on.
bool interrupts_reads() {
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction sa{};
    if (sigaction(sig, nullptr, &sa) != 0) continue;
    bool handled = (sa.sa_flags & SA_SIGINFO) ? sa.sa_sigaction != nullptr
                                              : sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN;
    if (handled && !(sa.sa_flags & SA_RESTART)) return true;
  }
  return false;
}

}  // namespace

extern "C" {

ibv_comp_channel* ibv_create_comp_channel(ibv_context* ctx) {
  int fd = epoll_create1(EPOLL_CLOEXEC);
  if (fd < 0) return nullptr;
  auto* c = new UChannel{};
  c->ibv.context = ctx;
  c->ibv.fd = fd;
  return &c->ibv;
}

int ibv_destroy_comp_channel(ibv_comp_channel* ch) {
  if (ch->refcnt) return EBUSY;
  close(ch->fd);
  delete from<UChannel>(ch);
  return 0;
}

ibv_cq* ibv_create_cq(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* channel, int comp_vector) {
  if (cqe <= 0 || comp_vector < 0 || comp_vector >= ctx->num_comp_vectors) {
    errno = EINVAL;
    return nullptr;
  }
  UCq* c = new_cq(ctx, uint32_t(cqe), cq_context, channel);
  return c ? ibv_cq_ex_to_cq(&c->ibv) : nullptr;
}

int ibv_resize_cq(ibv_cq* cq, int cqe) {
  UCq* c = from<UCq>(cq);
  if (cqe <= 0) return EINVAL;
  if (Status s = c->cq->resize(uint32_t(cqe)); !s) return s.error().code;
  cq->cqe = int(c->cq->capacity());
  return 0;
}

int ibv_destroy_cq(ibv_cq* cq) {
  UCq* c = from<UCq>(cq);
  if (c->cq->busy()) return EBUSY;
  if (cq->channel) {
    epoll_ctl(cq->channel->fd, EPOLL_CTL_DEL, c->cq->fd(), nullptr);
    --cq->channel->refcnt;
  }
  delete c;
  return 0;
}

int ibv_get_cq_event(ibv_comp_channel* ch, ibv_cq** cq, void** cq_context) {
  // As libibverbs: a channel fd the program made non-blocking fails with EAGAIN when empty.
  int timeout = fcntl(ch->fd, F_GETFL) & O_NONBLOCK ? 0 : -1;
  epoll_event ev;
  int n;
  do n = epoll_wait(ch->fd, &ev, 1, timeout);
  while (n < 0 && errno == EINTR && !interrupts_reads());
  if (n == 0) errno = EAGAIN;
  if (n != 1) return -1;
  UCq* c = static_cast<UCq*>(ev.data.ptr);
  uint64_t v;
  (void)!read(c->cq->fd(), &v, sizeof v);
  *cq = ibv_cq_ex_to_cq(&c->ibv);
  *cq_context = c->ibv.cq_context;
  return 0;
}

void ibv_ack_cq_events(ibv_cq* cq, unsigned int n) {
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += n;
  pthread_cond_signal(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}

}  // extern "C"
