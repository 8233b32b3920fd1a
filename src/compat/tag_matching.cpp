// The drop-in's tag matching: SRQs of type IBV_SRQT_TM (ibv_create_srq_ex) and their list
// operations (ibv_post_srq_ops). Their completions' tags are read by compat/cq.cpp.
#include <vector>

#include "compat/internal.hpp"

namespace uroce::compat {

ibv_srq* create_tm_srq(ibv_context* ctx, ibv_srq_init_attr_ex* a) {
  if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !(a->comp_mask & IBV_SRQ_INIT_ATTR_TM) || !a->cq ||
      a->cq->context != ctx)
    return fail<ibv_srq>(Error{EINVAL, ""});  // its completions need a CQ, its list a size
  auto srq = from<UPd>(a->pd)->pd->create_tm_srq(*from<UCq>(a->cq)->cq, a->attr.max_wr, a->attr.max_sge,
                                                 a->tm_cap.max_num_tags, a->tm_cap.max_ops);
  if (!srq) return fail<ibv_srq>(srq.error());
  if (a->attr.srq_limit)
    if (Status s = (*srq)->arm_limit(a->attr.srq_limit); !s) return fail<ibv_srq>(s.error());
  ibv_srq* s = made_srq(a->pd, std::move(*srq), a->srq_context);
  a->attr.max_wr = from<USrq>(s)->srq->capacity();
  return s;
}

int post_srq_ops(ibv_srq* srq, ibv_ops_wr* wr, ibv_ops_wr** bad) {
  if (!srq || !bad) return EINVAL;
  std::vector<ibv_ops_wr*> given;
  for (ibv_ops_wr* w = wr; w; w = w->next) given.push_back(w);
  std::vector<TmOp> ops(given.size());
  std::vector<Sge> sges(given.size());
  size_t n = 0;  // the operations before the first that cannot even be read
  for (; n < given.size(); ++n) {
    const ibv_ops_wr& w = *given[n];
    TmOp& o = ops[n];
    o.wr_id = w.wr_id;
    o.opcode = TmOpcode(w.opcode);
    o.flags = uint32_t(w.flags);
    o.unexpected_cnt = w.tm.unexpected_cnt;
    o.handle = w.tm.handle;
    if (w.opcode != IBV_WR_TAG_ADD) continue;
    // At most one SGE, as mlx5 takes (tm_caps.max_sge).
    if (w.tm.add.num_sge < 0 || w.tm.add.num_sge > 1 || (w.tm.add.num_sge && !w.tm.add.sg_list)) break;
    if (w.tm.add.num_sge) {
      sges[n] = {w.tm.add.sg_list->addr, w.tm.add.sg_list->length, w.tm.add.sg_list->lkey};
      o.sg_list = {&sges[n], 1};
    }
    o.recv_wr_id = w.tm.add.recv_wr_id;
    o.tag = w.tm.add.tag;
    o.mask = w.tm.add.mask;
  }
  size_t first_bad = n;
  Status s = from<USrq>(srq)->srq->post_ops(std::span<TmOp>(ops.data(), n), &first_bad);
  const size_t done = s ? n : first_bad;
  for (size_t i = 0; i < done; ++i)
    if (ops[i].opcode == TmOpcode::Add) given[i]->tm.handle = ops[i].handle;
  if (done == given.size()) return 0;
  *bad = given[done];
  return s ? EINVAL : s.error().code;
}

}  // namespace uroce::compat
