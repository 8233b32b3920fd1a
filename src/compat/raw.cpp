// The drop-in's raw packet QPs beyond create_qp (api/raw.cpp has them in C++):
// - flow steering (ibv_create_flow, ibv_destroy_flow): a rule's specs, as they lie after its
//   ibv_flow_attr, become a FlowRule. Ethernet, IPv4 (basic and extended), IPv6, TCP and UDP
//   specs, on the outer headers; anything else (tunnels, actions, sniffer and default rules,
//   egress) is EOPNOTSUPP, as a device without it answers;
// - receive-side scaling: work queues (ibv_create_wq, modify to RDY, ibv_post_wq_recv),
//   indirection tables of them, and RSS QPs over a table (Toeplitz over IPv4/IPv6 addresses
//   and TCP/UDP ports). A work queue in a table, or a table an RSS QP uses, is busy.
#include <arpa/inet.h>

#include <cerrno>
#include <atomic>
#include <cstring>

#include "compat/internal.hpp"

namespace uroce::compat {
namespace {

struct UFlow {
  ibv_flow ibv;
  ibv_qp* qp;
};

struct UWq {
  ibv_wq ibv;
  std::unique_ptr<SharedReceiveQueue> q;
  std::atomic<int> tables{0};  // indirection tables that hold it
};

struct UTable {
  ibv_rwq_ind_table ibv;
  std::vector<UWq*> wqs;
  std::atomic<int> qps{0};  // RSS QPs over it
};

std::atomic<uint32_t> next_table{1};

int post_wq_recv(ibv_wq* wq, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  return post_queue_recv(reinterpret_cast<UWq*>(wq)->q.get(), wr, bad);
}

// A spec's bytes (an address) and their mask into the rule's.
template <size_t N>
void masked(std::array<uint8_t, N>& val, std::array<uint8_t, N>& mask, const uint8_t* v, const uint8_t* m) {
  std::memcpy(val.data(), v, N);
  std::memcpy(mask.data(), m, N);
}

// One spec into the rule; its errno if it cannot be.
int add_spec(FlowRule& r, const ibv_flow_spec& s) {
  switch (uint32_t(s.hdr.type)) {  // the types this rule takes; the rest below
    case IBV_FLOW_SPEC_ETH: {
      if (s.hdr.size < sizeof s.eth) return EINVAL;
      const ibv_flow_eth_filter &v = s.eth.val, &m = s.eth.mask;
      FlowRule::Eth e;
      masked(e.dst, e.dst_mask, v.dst_mac, m.dst_mac);
      masked(e.src, e.src_mask, v.src_mac, m.src_mac);
      e.ether_type = ntohs(v.ether_type), e.ether_type_mask = ntohs(m.ether_type);
      e.vlan_tag = ntohs(v.vlan_tag), e.vlan_tag_mask = ntohs(m.vlan_tag);
      r.eth = e;
      return 0;
    }
    case IBV_FLOW_SPEC_IPV4:
    case IBV_FLOW_SPEC_IPV4_EXT: {
      const bool ext = s.hdr.type == IBV_FLOW_SPEC_IPV4_EXT;
      if (s.hdr.size < (ext ? sizeof s.ipv4_ext : sizeof s.ipv4)) return EINVAL;
      FlowRule::Ipv4 a;
      const ibv_flow_ipv4_ext_filter &v = s.ipv4_ext.val, &m = s.ipv4_ext.mask;  // basic: its first fields
      a.src = ntohl(ext ? v.src_ip : s.ipv4.val.src_ip), a.src_mask = ntohl(ext ? m.src_ip : s.ipv4.mask.src_ip);
      a.dst = ntohl(ext ? v.dst_ip : s.ipv4.val.dst_ip), a.dst_mask = ntohl(ext ? m.dst_ip : s.ipv4.mask.dst_ip);
      if (ext) {
        if (m.flags) return EOPNOTSUPP;  // fragment flags are not matched
        a.proto = v.proto, a.proto_mask = m.proto, a.tos = v.tos, a.tos_mask = m.tos, a.ttl = v.ttl, a.ttl_mask = m.ttl;
      }
      r.ipv4 = a;
      return 0;
    }
    case IBV_FLOW_SPEC_IPV6: {
      if (s.hdr.size < sizeof s.ipv6) return EINVAL;
      const ibv_flow_ipv6_filter &v = s.ipv6.val, &m = s.ipv6.mask;
      FlowRule::Ipv6 a;
      masked(a.src, a.src_mask, v.src_ip, m.src_ip);
      masked(a.dst, a.dst_mask, v.dst_ip, m.dst_ip);
      a.flow_label = ntohl(v.flow_label), a.flow_label_mask = ntohl(m.flow_label);
      a.next_hdr = v.next_hdr, a.next_hdr_mask = m.next_hdr;
      a.traffic_class = v.traffic_class, a.traffic_class_mask = m.traffic_class;
      a.hop_limit = v.hop_limit, a.hop_limit_mask = m.hop_limit;
      r.ipv6 = a;
      return 0;
    }
    case IBV_FLOW_SPEC_TCP:
    case IBV_FLOW_SPEC_UDP:
      if (s.hdr.size < sizeof s.tcp_udp) return EINVAL;
      if (r.l4 != FlowRule::L4::None) return EINVAL;
      r.l4 = s.hdr.type == IBV_FLOW_SPEC_TCP ? FlowRule::L4::Tcp : FlowRule::L4::Udp;
      r.src_port = ntohs(s.tcp_udp.val.src_port), r.src_port_mask = ntohs(s.tcp_udp.mask.src_port);
      r.dst_port = ntohs(s.tcp_udp.val.dst_port), r.dst_port_mask = ntohs(s.tcp_udp.mask.dst_port);
      return 0;
    default:
      return EOPNOTSUPP;  // inner headers, tunnels, MPLS, actions
  }
}

}  // namespace

ibv_flow* create_flow(ibv_qp* qp, ibv_flow_attr* attr) {
  if (!qp || !attr || attr->comp_mask || attr->port != 1) {
    errno = EINVAL;
    return nullptr;
  }
  if (attr->type != IBV_FLOW_ATTR_NORMAL || attr->flags) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  FlowRule rule;
  rule.priority = attr->priority;
  // The specs follow the attribute, each as long as its header says (attr->size, as libibverbs
  // and pyverbs fill it, covers the attribute alone).
  const auto* at = reinterpret_cast<const uint8_t*>(attr + 1);
  for (uint8_t i = 0; i < attr->num_of_specs; ++i) {
    ibv_flow_spec s{};
    struct {
      uint32_t type;  // enum ibv_flow_spec_type
      uint16_t size;
    } h;
    std::memcpy(&h, at, sizeof h);
    if (h.size < sizeof h) {
      errno = EINVAL;
      return nullptr;
    }
    std::memcpy(&s, at, std::min<size_t>(h.size, sizeof s));
    if (int e = add_spec(rule, s)) {
      errno = e;
      return nullptr;
    }
    at += h.size;
  }
  auto handle = from<UQp>(qp)->qp->create_flow(rule);
  if (!handle) return fail<ibv_flow>(handle.error());
  auto* f = new UFlow{};
  f->ibv.context = qp->context;
  f->ibv.handle = *handle;
  f->qp = qp;
  return &f->ibv;
}

int destroy_flow(ibv_flow* flow) {
  if (!flow) return EINVAL;
  auto* f = reinterpret_cast<UFlow*>(flow);
  Status s = from<UQp>(f->qp)->qp->destroy_flow(f->ibv.handle);
  if (!s) return s.error().code;
  delete f;
  return 0;
}

ibv_wq* create_wq(ibv_context* ctx, ibv_wq_init_attr* a) {
  const bool flags = a && (a->comp_mask & IBV_WQ_INIT_ATTR_FLAGS) && a->create_flags;
  if (!a || a->wq_type != IBV_WQT_RQ || !a->pd || !a->cq || (a->comp_mask & ~uint32_t(IBV_WQ_INIT_ATTR_FLAGS)) || flags) {
    errno = a && ((a->comp_mask & ~uint32_t(IBV_WQ_INIT_ATTR_FLAGS)) || flags) ? EOPNOTSUPP : EINVAL;  // VLAN stripping, ...
    return nullptr;
  }
  auto q = from<UPd>(a->pd)->pd->create_wq(*from<UCq>(a->cq)->cq, a->max_wr, a->max_sge ? a->max_sge : 1);
  if (!q) return fail<ibv_wq>(q.error());
  auto* w = new UWq{};
  w->q = std::move(*q);
  w->ibv.context = ctx;
  w->ibv.wq_context = a->wq_context;
  w->ibv.pd = a->pd;
  w->ibv.cq = a->cq;
  w->ibv.wq_num = w->ibv.handle = w->q->handle();
  w->ibv.state = IBV_WQS_RESET;
  w->ibv.wq_type = IBV_WQT_RQ;
  w->ibv.post_recv = post_wq_recv;
  pthread_mutex_init(&w->ibv.mutex, nullptr);
  pthread_cond_init(&w->ibv.cond, nullptr);
  a->max_wr = w->q->capacity();
  a->max_sge = w->q->max_sge();
  ++from<UPd>(a->pd)->objects;
  return &w->ibv;
}

int modify_wq(ibv_wq* wq, ibv_wq_attr* a) {
  if (!wq || !a || (a->attr_mask & ~uint32_t(IBV_WQ_ATTR_STATE | IBV_WQ_ATTR_CURR_STATE))) return EINVAL;
  if ((a->attr_mask & IBV_WQ_ATTR_CURR_STATE) && a->curr_wq_state != wq->state) return EINVAL;
  if (!(a->attr_mask & IBV_WQ_ATTR_STATE)) return 0;
  if (a->wq_state != IBV_WQS_RESET && a->wq_state != IBV_WQS_RDY && a->wq_state != IBV_WQS_ERR) return EINVAL;
  Status s = reinterpret_cast<UWq*>(wq)->q->set_state(WqState(a->wq_state));
  if (!s) return s.error().code;
  wq->state = a->wq_state;
  return 0;
}

int destroy_wq(ibv_wq* wq) {
  auto* w = reinterpret_cast<UWq*>(wq);
  if (w->tables || w->q->busy()) return EBUSY;
  --from<UPd>(wq->pd)->objects;
  delete w;
  return 0;
}

ibv_rwq_ind_table* create_rwq_ind_table(ibv_context* ctx, ibv_rwq_ind_table_init_attr* a) {
  if (!a || !a->ind_tbl || a->comp_mask || a->log_ind_tbl_size > 10) {
    errno = EINVAL;
    return nullptr;
  }
  auto* t = new UTable{};
  for (uint32_t i = 0; i < 1u << a->log_ind_tbl_size; ++i) {
    if (!a->ind_tbl[i] || a->ind_tbl[i]->context != ctx) {
      delete t;
      errno = EINVAL;
      return nullptr;
    }
    t->wqs.push_back(reinterpret_cast<UWq*>(a->ind_tbl[i]));
  }
  for (UWq* w : t->wqs) ++w->tables;
  t->ibv.context = ctx;
  t->ibv.ind_tbl_handle = t->ibv.ind_tbl_num = next_table++;
  return &t->ibv;
}

int destroy_rwq_ind_table(ibv_rwq_ind_table* table) {
  auto* t = reinterpret_cast<UTable*>(table);
  if (t->qps) return EBUSY;
  for (UWq* w : t->wqs) --w->tables;
  delete t;
  return 0;
}

void release_table(ibv_rwq_ind_table* table) { --reinterpret_cast<UTable*>(table)->qps; }

ibv_qp* create_rss_qp(ibv_context* ctx, ibv_qp_init_attr_ex* a) {
  constexpr uint32_t kNeeded = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_RX_HASH | IBV_QP_INIT_ATTR_IND_TABLE;
  if ((a->comp_mask & kNeeded) != kNeeded || a->qp_type != IBV_QPT_RAW_PACKET || !a->rwq_ind_tbl || !a->pd) {
    errno = EINVAL;
    return nullptr;
  }
  if ((a->comp_mask & ~(kNeeded | IBV_QP_INIT_ATTR_CREATE_FLAGS)) || a->create_flags ||
      a->rx_hash_conf.rx_hash_function != IBV_RX_HASH_FUNC_TOEPLITZ) {
    errno = EOPNOTSUPP;  // send queues on an RSS QP, other hash functions, inner headers
    return nullptr;
  }
  auto* t = reinterpret_cast<UTable*>(a->rwq_ind_tbl);
  std::vector<SharedReceiveQueue*> table;
  for (UWq* w : t->wqs) table.push_back(w->q.get());
  RxHash h;
  if (a->rx_hash_conf.rx_hash_key)
    h.key.assign(a->rx_hash_conf.rx_hash_key, a->rx_hash_conf.rx_hash_key + a->rx_hash_conf.rx_hash_key_len);
  h.fields = a->rx_hash_conf.rx_hash_fields_mask;
  auto qp = from<UPd>(a->pd)->pd->create_rss_qp(table, h);
  if (!qp) return fail<ibv_qp>(qp.error());
  UQp* q = made_qp(ctx, a->pd, std::move(*qp), IBV_QPT_RAW_PACKET, a->qp_context);
  q->table = a->rwq_ind_tbl;
  ++t->qps;
  ++from<UPd>(a->pd)->objects;
  a->cap = {};
  return &q->qpx.base.qp_base;
}

}  // namespace uroce::compat
