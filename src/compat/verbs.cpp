// libibverbs.so.1 on uroce: rdma-core's verbs ABI (as Debian 12's rdma-core 44 defines it) for
// unmodified programs. Errors follow libibverbs: NULL with errno set, or a positive errno.
// This file is the library part (device list, contexts and their provider-ops table, PDs,
// queries, rates and strings); memory regions and device memory are in memory.cpp, the
// provider's operations in cq.cpp, qp.cpp, qp_ex.cpp and unsupported.cpp, the build-time ABI checks in abi_checks.cpp.
#include <arpa/inet.h>
#include <fcntl.h>
#include <sched.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>

#include "compat/internal.hpp"

using namespace uroce;
using namespace uroce::compat;

// The header routes these through inline wrappers; the library defines the functions.
#undef ibv_query_port

extern "C" int ibv_query_gid_type(ibv_context* context, uint8_t port_num, unsigned int index, int* type);

namespace uroce::compat {
namespace {

// The provider's data-path operations, as libibverbs' inline verbs call them.
constexpr ibv_context_ops kOps = {
    .alloc_mw = alloc_mw,
    .bind_mw = bind_mw,
    .dealloc_mw = dealloc_mw,
    .poll_cq = poll_cq,
    .req_notify_cq = req_notify_cq,
    .post_srq_recv = post_srq_recv,
    .post_send = post_send,
    .post_recv = post_recv,
};

// The ibv_device of each device name the host has shown: made once, never freed, because
// programs keep the pointers of a list they freed (as libibverbs keeps its devices).
ibv_device* device_named(const std::string& name) {
  static std::mutex mu;
  static std::deque<ibv_device> made;
  std::lock_guard g(mu);
  for (auto& d : made)
    if (name == d.name) return &d;
  ibv_device d{};
  d.node_type = IBV_NODE_CA;
  d.transport_type = IBV_TRANSPORT_IB;
  std::snprintf(d.name, sizeof d.name, "%s", name.c_str());
  std::snprintf(d.dev_name, sizeof d.dev_name, "uverbs%zu", made.size());
  made.push_back(d);
  return &made.back();
}

// The extended query: the basic attributes, and the port count a program with more than 255
// ports would read from phys_port_cnt_ex.
int query_device_ex(ibv_context* ctx, const ibv_query_device_ex_input* input, ibv_device_attr_ex* attr,
                    size_t attr_size) {
  if (input && input->comp_mask) return EINVAL;
  if (attr_size < sizeof attr->orig_attr) return EINVAL;
  std::memset(attr, 0, attr_size);
  if (int rc = ibv_query_device(ctx, &attr->orig_attr)) return rc;
  if (attr_size >= offsetof(ibv_device_attr_ex, phys_port_cnt_ex) + sizeof attr->phys_port_cnt_ex)
    attr->phys_port_cnt_ex = attr->orig_attr.phys_port_cnt;
  // IBA 1.5's FLUSH (global visibility; no memory here is persistent) and ATOMIC WRITE.
  if (attr_size >= offsetof(ibv_device_attr_ex, device_cap_flags_ex) + sizeof attr->device_cap_flags_ex)
    attr->device_cap_flags_ex = attr->orig_attr.device_cap_flags | kIbvDeviceFlushGlobal | kIbvDeviceAtomicWrite;
  // On-demand paging: every operation of RC, UC, UD and XRC, implicit regions too.
  const bool odp = uctx(ctx)->dev->query_device().odp;
  if (attr_size >= offsetof(ibv_device_attr_ex, odp_caps) + sizeof attr->odp_caps && odp) {
    attr->odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
    constexpr uint32_t kAll = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
                              IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
    attr->odp_caps.per_transport_caps.rc_odp_caps = kAll;
    attr->odp_caps.per_transport_caps.uc_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
                                                    IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_SRQ_RECV;
    attr->odp_caps.per_transport_caps.ud_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
                                                    IBV_ODP_SUPPORT_SRQ_RECV;
    if (attr_size >= offsetof(ibv_device_attr_ex, xrc_odp_caps) + sizeof attr->xrc_odp_caps)
      attr->xrc_odp_caps = kAll;  // XRC is RC's transport
  }
  // Completion timestamps: 64 bits of the device clock, which counts nanoseconds (1 GHz).
  if (attr_size >= offsetof(ibv_device_attr_ex, hca_core_clock) + sizeof attr->hca_core_clock) {
    attr->completion_timestamp_mask = UINT64_MAX;
    attr->hca_core_clock = 1'000'000;  // kHz
  }
  if (attr_size >= offsetof(ibv_device_attr_ex, max_wq_type_rq) + sizeof attr->max_wq_type_rq) {
    // Receive-side scaling over work queues (compat/raw.cpp): Toeplitz over addresses and ports.
    attr->rss_caps.supported_qpts = 1u << IBV_QPT_RAW_PACKET;
    attr->rss_caps.max_rwq_indirection_tables = 1 << 16;
    attr->rss_caps.max_rwq_indirection_table_size = 1 << 10;
    attr->rss_caps.rx_hash_fields_mask = 0xff;  // IPv4, IPv6, TCP and UDP ports
    attr->rss_caps.rx_hash_function = IBV_RX_HASH_FUNC_TOEPLITZ;
    attr->max_wq_type_rq = 1 << 16;
  }
  if (attr_size >= offsetof(ibv_device_attr_ex, packet_pacing_caps) + sizeof attr->packet_pacing_caps) {
    // Packet pacing on every QP that sends (ibv_modify_qp_rate_limit, IBV_QP_RATE_LIMIT).
    const DeviceAttr d = uctx(ctx)->dev->query_device();
    attr->packet_pacing_caps.qp_rate_limit_min = d.min_rate_kbps;
    attr->packet_pacing_caps.qp_rate_limit_max = d.max_rate_kbps;
    attr->packet_pacing_caps.supported_qpts = 1u << IBV_QPT_RC | 1u << IBV_QPT_UC | 1u << IBV_QPT_UD |
                                              1u << IBV_QPT_RAW_PACKET | 1u << IBV_QPT_XRC_SEND;
  }
  if (attr_size >= offsetof(ibv_device_attr_ex, tm_caps) + sizeof attr->tm_caps) {
    // Tag matching SRQs for RC QPs (compat/tag_matching.cpp), one SGE per tagged buffer as mlx5.
    const DeviceAttr d = uctx(ctx)->dev->query_device();
    attr->tm_caps.flags = IBV_TM_CAP_RC;
    attr->tm_caps.max_num_tags = d.max_tm_tags;
    attr->tm_caps.max_ops = d.max_tm_ops;
    attr->tm_caps.max_rndv_hdr_size = d.max_rndv_hdr;
    attr->tm_caps.max_sge = 1;
  }
  if (attr_size >= offsetof(ibv_device_attr_ex, max_dm_size) + sizeof attr->max_dm_size)
    attr->max_dm_size = uctx(ctx)->dev->query_device().max_dm_size;
  return 0;
}

// The device clock now (the one completions are stamped with); only the raw clock is offered.
int query_rt_values(ibv_context* ctx, ibv_values_ex* values) {
  if (values->comp_mask & ~uint32_t(IBV_VALUES_MASK_RAW_CLOCK)) return EINVAL;
  if (values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) {
    const uint64_t ns = uctx(ctx)->dev->clock_ns();
    values->raw_clock.tv_sec = time_t(ns / 1'000'000'000);
    values->raw_clock.tv_nsec = long(ns % 1'000'000'000);
  }
  return 0;
}

// The process's NIC for a device name, opened by the first context and closed with the last.
// A device not yet open is opened at `addr` (empty: the default address); one already open is
// returned wherever it is bound.
Result<std::shared_ptr<UDevice>> open_shared(const std::string& name, const std::string& addr = {}) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<UDevice>> open;
  static pid_t owner = getpid();
  std::lock_guard g(mu);
  if (owner != getpid()) {  // a forked child: the parent's engine thread did not come along
    open.clear();
    owner = getpid();
  }
  if (auto d = open[name].lock()) return d;
  // At exit, what the program posted last (a DREQ from rdma_destroy_id, a final ACK) still
  // leaves, as it would from a hardware NIC, before the engine threads are gone.
  static bool at_exit = [] {
    return std::atexit([] {
      std::lock_guard g(mu);
      for (auto& [n, weak] : open)
        if (auto d = weak.lock(); d && owner == getpid()) d->dev->flush(20);
    }) == 0;
  }();
  (void)at_exit;
  DeviceOptions opts;
  opts.addr = addr;
  auto dev = Device::open(name, opts);
  if (!dev) return dev.error();
  auto d = std::make_shared<UDevice>();
  d->dev = std::move(*dev);
  open[name] = d;
  return d;
}

// say: print why it failed (ibv_open_device's callers print only "Failed to open device");
// librdmacm's tries, which may try another address next, print nothing.
ibv_context* open_context(ibv_device* device, const std::string& addr, bool say) {
  auto shared = open_shared(device->name, addr);
  if (!shared) {
    if (say) std::fprintf(stderr, "uroce: cannot open %s: %s\n", device->name, shared.error().message.c_str());
    return fail<ibv_context>(shared.error());
  }
  // No kernel command channel: a memfd of its own, which programs may dup, poll or pass to
  // ibv_import_device (its inode names this context's device).
  int fd = memfd_create("uroce-context", MFD_CLOEXEC);
  if (fd < 0) return fail<ibv_context>(Error{errno, ""});
  return context_on(std::move(*shared), device, fd);
}

}  // namespace

ibv_context* context_on(std::shared_ptr<UDevice> shared, ibv_device* device, int cmd_fd) {
  auto* c = new UContext{};
  c->shared = std::move(shared);
  c->dev = c->shared->dev.get();
  ibv_context& ctx = c->vctx.context;
  ctx.device = device;
  ctx.cmd_fd = cmd_fd;
  remember_context(cmd_fd, c->shared, device);
  ctx.async_fd = c->dev->async_fd();
  ctx.num_comp_vectors = 1;
  ctx.abi_compat = __VERBS_ABI_IS_EXTENDED;
  c->vctx.sz = sizeof(verbs_context);
  c->vctx.create_qp_ex = create_qp_ex;
  c->vctx.create_cq_ex = create_cq_ex;
  c->vctx.query_device_ex = query_device_ex;
  c->vctx.advise_mr = advise_mr;
  c->vctx.alloc_td = alloc_td;
  c->vctx.dealloc_td = dealloc_td;
  c->vctx.alloc_parent_domain = alloc_parent_domain;
  c->vctx.query_rt_values = query_rt_values;
  c->vctx.alloc_dm = alloc_dm;
  c->vctx.free_dm = free_dm;
  c->vctx.reg_dm_mr = reg_dm_mr;
  c->vctx.open_xrcd = open_xrcd;
  c->vctx.close_xrcd = close_xrcd;
  c->vctx.create_srq_ex = create_srq_ex;
  c->vctx.get_srq_num = get_srq_num;
  c->vctx.post_srq_ops = post_srq_ops;
  c->vctx.modify_qp_rate_limit = modify_qp_rate_limit;
  c->vctx.ibv_create_flow = create_flow;
  c->vctx.ibv_destroy_flow = destroy_flow;
  c->vctx.create_wq = create_wq;
  c->vctx.modify_wq = modify_wq;
  c->vctx.destroy_wq = destroy_wq;
  c->vctx.create_rwq_ind_table = create_rwq_ind_table;
  c->vctx.destroy_rwq_ind_table = destroy_rwq_ind_table;
  pthread_mutex_init(&ctx.mutex, nullptr);
  ctx.ops = kOps;
  return &ctx;
}

}  // namespace uroce::compat

extern "C" {

ibv_device** ibv_get_device_list(int* num) {
  const auto devices = Device::list();
  auto** list = static_cast<ibv_device**>(calloc(devices.size() + 1, sizeof(ibv_device*)));
  if (!list) {
    errno = ENOMEM;
    return nullptr;
  }
  for (size_t i = 0; i < devices.size(); ++i) list[i] = device_named(devices[i].name);
  if (num) *num = int(devices.size());
  return list;
}

void ibv_free_device_list(ibv_device** list) { free(list); }
const char* ibv_get_device_name(ibv_device* d) { return d->name; }
__be64 ibv_get_device_guid(ibv_device* d) {
  for (const auto& info : Device::list())
    if (info.name == d->name) return htobe64(info.node_guid);
  return 0;
}
int ibv_fork_init(void) { return 0; }

ibv_context* ibv_open_device(ibv_device* device) { return open_context(device, {}, true); }

// For uroce's librdmacm: a context of the device `name` (NULL or "": the first listed), opened
// at `addr` if the process has not opened it yet (NULL or "": where the device opens by default).
ibv_context* uroce_open_context(const char* name, const char* addr) {
  std::string n = name ? name : "";
  if (n.empty()) {
    const auto all = Device::list();
    if (all.empty()) return fail<ibv_context>(Error{ENODEV, "no device"});
    n = all.front().name;
  }
  return open_context(device_named(n), addr ? addr : "", false);
}

int ibv_close_device(ibv_context* ctx) {
  if (ctx->cmd_fd >= 0) close(ctx->cmd_fd);
  delete uctx(ctx);
  return 0;
}

int ibv_query_device(ibv_context* ctx, ibv_device_attr* a) {
  DeviceAttr d = uctx(ctx)->dev->query_device();
  *a = ibv_device_attr{};
  std::snprintf(a->fw_ver, sizeof a->fw_ver, "uroce 0.1");
  a->node_guid = htobe64(d.node_guid);
  a->sys_image_guid = a->node_guid;
  a->max_mr_size = d.max_mr_size;
  a->page_size_cap = 4096;
  a->vendor_id = kVendorId;
  a->max_qp = int(d.max_qp);
  a->max_qp_wr = int(d.max_qp_wr);
  a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SRQ_RESIZE | IBV_DEVICE_CHANGE_PHY_PORT |
                        IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B | IBV_DEVICE_XRC;
  a->max_sge = int(d.max_sge);
  a->max_sge_rd = int(d.max_sge);
  a->max_cq = int(d.max_cq);
  a->max_cqe = int(d.max_cqe);
  a->max_mr = int(d.max_mr);
  a->max_mw = int(d.max_mr);  // windows count against the same table
  a->max_pd = int(d.max_pd);
  a->max_qp_rd_atom = int(d.max_qp_rd_atom);
  a->max_res_rd_atom = int(d.max_qp_rd_atom) * int(d.max_qp);
  a->max_qp_init_rd_atom = int(d.max_qp_init_rd_atom);
  a->atomic_cap = IBV_ATOMIC_HCA;
  a->max_srq = int(d.max_qp);
  a->max_ah = int(d.max_ah);
  a->max_srq_wr = int(d.max_qp_wr);
  a->max_srq_sge = int(d.max_sge);
  a->max_pkeys = 1;
  a->max_mcast_grp = int(d.max_mcast_grp);
  a->max_mcast_qp_attach = int(d.max_mcast_qp_attach);
  a->max_total_mcast_qp_attach = int(d.max_total_mcast_qp_attach);
  a->local_ca_ack_delay = 15;
  a->phys_port_cnt = 1;
  return 0;
}

// The GID table as RoCE NICs and rxe have it: longer than the addresses it holds, the entries
// past them empty (a zero GID from ibv_query_gid, ENODATA from ibv_query_gid_ex, left out of
// ibv_query_gid_table), so a program finds a free index where it looks for one.
constexpr uint32_t kGidTableLen = 16;
static uint32_t gids_held(ibv_context* ctx) { return uctx(ctx)->dev->query_port().gid_tbl_len; }

int ibv_query_port(ibv_context* ctx, uint8_t port, struct _compat_ibv_port_attr* out) {
  if (port != 1) return EINVAL;
  PortAttr p = uctx(ctx)->dev->query_port();
  auto* a = reinterpret_cast<ibv_port_attr*>(out);
  // The fields of the old, shorter layout only: callers may pass it.
  a->state = p.active ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
  a->max_mtu = ibv_mtu(p.max_mtu);
  a->active_mtu = ibv_mtu(p.active_mtu);
  a->gid_tbl_len = int(std::max(kGidTableLen, p.gid_tbl_len));
  a->port_cap_flags = 0;
  a->max_msg_sz = 1u << 31;
  a->bad_pkey_cntr = a->qkey_viol_cntr = 0;
  a->pkey_tbl_len = 1;
  a->lid = a->sm_lid = 0;
  a->lmc = a->max_vl_num = a->sm_sl = a->subnet_timeout = a->init_type_reply = 0;
  a->max_vl_num = 1;
  a->active_width = 2;   // 4x
  a->active_speed = 32;  // 25 Gb/s per lane, as RoCE NICs report
  a->phys_state = 5;     // LinkUp
  a->link_layer = IBV_LINK_LAYER_ETHERNET;
  a->flags = 0;
  return 0;
}

int ibv_query_gid(ibv_context* ctx, uint8_t port, int index, ibv_gid* gid) {
  if (port != 1 || index < 0) return EINVAL;
  if (uint32_t(index) >= gids_held(ctx) && uint32_t(index) < kGidTableLen) {  // an empty entry
    std::memset(gid->raw, 0, sizeof gid->raw);
    return 0;
  }
  auto g = uctx(ctx)->dev->query_gid(index);
  if (!g) return g.error().code;
  std::memcpy(gid->raw, g->raw.data(), 16);
  return 0;
}

int ibv_query_gid_type(ibv_context* ctx, uint8_t port, unsigned int index, int* type) {
  const uint32_t held = gids_held(ctx);
  if (port != 1 || index >= std::max(kGidTableLen, held)) return EINVAL;
  *type = index < held ? 1 : 0;  // RoCE v2; an empty entry reads as v1, as libibverbs answers for one
  return 0;
}

int ibv_query_pkey(ibv_context*, uint8_t port, int index, __be16* pkey) {
  if (port != 1 || index != 0) return EINVAL;
  *pkey = htons(0xffff);
  return 0;
}

int ibv_read_sysfs_file(const char*, const char*, char*, size_t) {
  errno = ENOENT;  // no sysfs: uroce devices live in the process
  return -1;
}

ibv_pd* ibv_alloc_pd(ibv_context* ctx) {
  auto pd = uctx(ctx)->dev->alloc_pd();
  if (!pd) return fail<ibv_pd>(pd.error());
  auto* p = new UPd{};
  p->pd = std::move(*pd);
  p->ibv.context = ctx;
  UDevice& d = *uctx(ctx)->shared;
  std::lock_guard g(d.mu);
  p->ibv.handle = d.next_handle++;
  d.pds[p->ibv.handle] = p;
  return &p->ibv;
}

int ibv_dealloc_pd(ibv_pd* pd) {
  UPd* p = from<UPd>(pd);
  // As libibverbs: nothing changes while objects use it: a parent domain made from it, what
  // was made in it (a parent domain: what was made in it by its own pointer).
  if (p->parents.load() || p->objects.load() || (!p->base && p->pd->busy())) return EBUSY;
  if (p->base) --p->base->parents;
  if (p->td) --p->td->users;
  if (!p->imported) {
    UDevice& d = *uctx(pd->context)->shared;
    std::lock_guard g(d.mu);
    d.pds.erase(pd->handle);
  }
  delete p;
  return 0;
}

int _ibv_query_gid_ex(ibv_context* ctx, uint32_t port, uint32_t index, ibv_gid_entry* entry, uint32_t flags,
                      size_t size) {
  if (flags || size < sizeof(ibv_gid_entry)) return EINVAL;
  if (port == 1 && index >= gids_held(ctx) && index < kGidTableLen) return ENODATA;  // empty
  ibv_gid gid;
  if (int rc = ibv_query_gid(ctx, uint8_t(port), int(index), &gid)) return rc;
  *entry = ibv_gid_entry{};
  entry->gid = gid;
  entry->gid_index = index;
  entry->port_num = port;
  entry->gid_type = IBV_GID_TYPE_ROCE_V2;
  return 0;
}

int ibv_get_pkey_index(ibv_context*, uint8_t port, __be16 pkey) {
  return port == 1 && ntohs(pkey) == 0xffff ? 0 : -1;
}

int ibv_get_device_index(ibv_device*) { return 0; }

// ---- the rest of rdma-core 44's public ABI: real where uroce can, a clean error where not.

namespace {
struct RateRow {
  ibv_rate rate;
  int mult;
  int mbps;
};
constexpr RateRow kRates[] = {
    {IBV_RATE_2_5_GBPS, 1, 2500},      {IBV_RATE_5_GBPS, 2, 5000},        {IBV_RATE_10_GBPS, 4, 10000},
    {IBV_RATE_20_GBPS, 8, 20000},      {IBV_RATE_30_GBPS, 12, 30000},     {IBV_RATE_40_GBPS, 16, 40000},
    {IBV_RATE_60_GBPS, 24, 60000},     {IBV_RATE_80_GBPS, 32, 80000},     {IBV_RATE_120_GBPS, 48, 120000},
    {IBV_RATE_14_GBPS, -1, 14062},     {IBV_RATE_56_GBPS, -1, 56250},     {IBV_RATE_112_GBPS, -1, 112500},
    {IBV_RATE_168_GBPS, -1, 168750},   {IBV_RATE_25_GBPS, -1, 25781},     {IBV_RATE_100_GBPS, -1, 103125},
    {IBV_RATE_200_GBPS, -1, 206250},   {IBV_RATE_300_GBPS, -1, 309375},   {IBV_RATE_28_GBPS, -1, 28125},
    {IBV_RATE_50_GBPS, -1, 53125},     {IBV_RATE_400_GBPS, -1, 425000},   {IBV_RATE_600_GBPS, -1, 637500},
};
}  // namespace

extern "C++" {
namespace {
template <class K, class V>
V rate_lookup(K RateRow::*key, K k, V RateRow::*val, V none) {
  for (const RateRow& r : kRates)
    if (r.*key == k && r.*key != K(-1) && r.*val != V(-1)) return r.*val;  // -1: no such value
  return none;
}
}  // namespace
}

int ibv_rate_to_mult(ibv_rate rate) { return rate_lookup(&RateRow::rate, rate, &RateRow::mult, -1); }
ibv_rate mult_to_ibv_rate(int mult) { return rate_lookup(&RateRow::mult, mult, &RateRow::rate, IBV_RATE_MAX); }
int ibv_rate_to_mbps(ibv_rate rate) { return rate_lookup(&RateRow::rate, rate, &RateRow::mbps, -1); }
ibv_rate mbps_to_ibv_rate(int mbps) { return rate_lookup(&RateRow::mbps, mbps, &RateRow::rate, IBV_RATE_MAX); }

ssize_t _ibv_query_gid_table(ibv_context* ctx, ibv_gid_entry* entries, size_t max, uint32_t flags, size_t size) {
  uint32_t n = gids_held(ctx);  // the entries that hold a GID
  if (max < n) return -EINVAL;
  for (uint32_t i = 0; i < n; ++i)
    if (int rc = _ibv_query_gid_ex(ctx, 1, i, reinterpret_cast<ibv_gid_entry*>(reinterpret_cast<char*>(entries) + i * size),
                                   flags, size))
      return -rc;
  return ssize_t(n);
}

int ibv_dofork_range(void*, size_t) { return 0; }    // nothing is pinned by a kernel driver
int ibv_dontfork_range(void*, size_t) { return 0; }
ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }
int ibv_query_qp_data_in_order(ibv_qp*, ibv_wr_opcode, uint32_t) { return 0; }  // no promise made

const char* ibv_wc_status_str(ibv_wc_status status) { return to_string(WcStatus(status)); }

const char* ibv_node_type_str(ibv_node_type t) {
  if (t == IBV_NODE_CA) return "InfiniBand channel adapter";
  if (t == IBV_NODE_RNIC) return "iWARP NIC";
  return "unknown";
}

const char* ibv_port_state_str(ibv_port_state s) {
  static const char* names[] = {"PORT_NOP", "PORT_DOWN", "PORT_INIT", "PORT_ARMED", "PORT_ACTIVE", "PORT_ACTIVE_DEFER"};
  return unsigned(s) < 6 ? names[s] : "unknown";
}

const char* ibv_event_type_str(ibv_event_type e) { return to_string(AsyncEventType(e)); }

}  // extern "C"
