// What the drop-in's files share: conversions, the provider operations the context table
// names, and small helpers. Internal to the drop-in.
#pragma once
#include <infiniband/verbs.h>

#include <cerrno>
#include <map>
#include <mutex>

#include "compat/objects.hpp"

namespace uroce::compat {

// IEEE OUI-sized vendor id: "uro" (a software device has no assigned one; rxe and siw do likewise).
inline constexpr uint32_t kVendorId = 0x75726f;
// ECE options of uroce's QPs (ibv_query_ece / ibv_set_ece, under kVendorId): selective repeat.
inline constexpr uint32_t kEceSelectiveRepeat = 1;

// Async events name their QP or SRQ: keep handle -> program pointer per device.
template <class T>
void track(ibv_context* ctx, std::map<uint32_t, T*> UDevice::*m, uint32_t key, T* obj) {
  UDevice& d = *uctx(ctx)->shared;
  std::lock_guard g(d.mu);
  if (obj)
    (d.*m)[key] = obj;
  else
    (d.*m).erase(key);
}

// Waits until the program has acked the async events it got about obj (called once obj is no
// longer tracked, so no new ones name it).
inline void wait_acks(ibv_context* ctx, const void* obj) {
  UDevice& d = *uctx(ctx)->shared;
  std::unique_lock g(d.mu);
  d.acked.wait(g, [&] { return d.unacked[obj] == 0; });
  d.unacked.erase(obj);
}

// libibverbs' way of failing a call that returns a pointer: NULL with errno set.
template <class T>
T* fail(const Error& e) {
  errno = e.code;
  return nullptr;
}

// The provider operations (ibv_context_ops and verbs_context), one file each: CQs (cq.cpp),
// QPs and their work requests (qp.cpp), the extended send API (qp_ex.cpp), device memory
// (memory.cpp), parent and thread domains (domains.cpp), XRC (xrc.cpp), what uroce does not offer
// (unsupported.cpp).
int poll_cq(ibv_cq* cq, int n, ibv_wc* out);
int req_notify_cq(ibv_cq* cq, int solicited_only);
ibv_cq_ex* create_cq_ex(ibv_context* ctx, ibv_cq_init_attr_ex* a);
UCq* new_cq(ibv_context* ctx, uint32_t cqe, void* cq_context, ibv_comp_channel* channel);
int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad);
ibv_qp* create_qp_common(ibv_pd* pd, ibv_qp_init_attr* attr, uint64_t send_ops);
ibv_qp* create_qp_ex(ibv_context* ctx, ibv_qp_init_attr_ex* a);
void set_send_ops(QpExFlush& x);
// An ibv_mw_bind_info as a bind of window mw to new_rkey; EINVAL for what a window cannot take.
Status to_mw_bind(const ibv_mw* mw, uint32_t new_rkey, const ibv_mw_bind_info& b, MwBind& out);
ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type);
int bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* bind);
int dealloc_mw(ibv_mw* mw);
ibv_td* alloc_td(ibv_context* ctx, ibv_td_init_attr* attr);
int dealloc_td(ibv_td* td);
ibv_pd* alloc_parent_domain(ibv_context* ctx, ibv_parent_domain_init_attr* attr);
int advise_mr(ibv_pd* pd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge* sg_list, uint32_t num_sge);
ibv_dm* alloc_dm(ibv_context* ctx, ibv_alloc_dm_attr* attr);
int free_dm(ibv_dm* dm);
ibv_mr* reg_dm_mr(ibv_pd* pd, ibv_dm* dm, uint64_t offset, size_t length, unsigned int access);
// A context on this device (its UDevice), cmd_fd its own from now on; remember_context lets
// ibv_import_device (import.cpp) find the device again by that fd's inode.
ibv_context* context_on(std::shared_ptr<UDevice> shared, ibv_device* device, int cmd_fd);
void remember_context(int cmd_fd, const std::shared_ptr<UDevice>& shared, ibv_device* device);
// XRC (xrc.cpp): domains, XRC SRQs (and the basic ones of ibv_create_srq_ex), target QPs.
ibv_xrcd* open_xrcd(ibv_context* ctx, ibv_xrcd_init_attr* attr);
int close_xrcd(ibv_xrcd* xrcd);
ibv_srq* create_srq_ex(ibv_context* ctx, ibv_srq_init_attr_ex* attr);
int get_srq_num(ibv_srq* srq, uint32_t* srq_num);
// Tag matching (tag_matching.cpp): a TM SRQ (create_srq_ex's, once PD and type are checked).
ibv_srq* create_tm_srq(ibv_context* ctx, ibv_srq_init_attr_ex* attr);
int post_srq_ops(ibv_srq* srq, ibv_ops_wr* wr, ibv_ops_wr** bad);
int modify_qp_rate_limit(ibv_qp* qp, ibv_qp_rate_limit_attr* attr);  // qp.cpp
ibv_qp* create_xrc_target(ibv_context* ctx, ibv_qp_init_attr_ex* attr);
int post_queue_recv(SharedReceiveQueue* q, ibv_recv_wr* wr, ibv_recv_wr** bad);  // an SRQ's or a WQ's
// Raw packet QPs (raw.cpp): flow steering, work queues, indirection tables and RSS QPs.
ibv_flow* create_flow(ibv_qp* qp, ibv_flow_attr* attr);
int destroy_flow(ibv_flow* flow);
ibv_wq* create_wq(ibv_context* ctx, ibv_wq_init_attr* attr);
int modify_wq(ibv_wq* wq, ibv_wq_attr* attr);
int destroy_wq(ibv_wq* wq);
ibv_rwq_ind_table* create_rwq_ind_table(ibv_context* ctx, ibv_rwq_ind_table_init_attr* attr);
int destroy_rwq_ind_table(ibv_rwq_ind_table* table);
ibv_qp* create_rss_qp(ibv_context* ctx, ibv_qp_init_attr_ex* attr);
void release_table(ibv_rwq_ind_table* table);  // an RSS QP over it went
// A new USrq of pd for srq, tracked for events: what ibv_create_srq and create_srq_ex share.
ibv_srq* made_srq(ibv_pd* pd, std::unique_ptr<SharedReceiveQueue> srq, void* srq_context);
// A new UQp for qp, tracked for events (pd: null for an XRC target).
UQp* made_qp(ibv_context* ctx, ibv_pd* pd, std::unique_ptr<QueuePair> qp, ibv_qp_type type, void* qp_context);

}  // namespace uroce::compat
