// Parent domains and thread domains (rdma-core's ibv_alloc_parent_domain, ibv_alloc_td): a
// parent domain is a PD to the program, made from one of its PDs, and everything made in it
// belongs to that PD underneath. Its allocators are hints for where a provider puts its queue
// memory; uroce's queues are its own, so they are accepted and not called.
#include <cerrno>

#include "compat/internal.hpp"

using namespace uroce;
using namespace uroce::compat;

namespace uroce::compat {

ibv_td* alloc_td(ibv_context* ctx, ibv_td_init_attr* attr) {
  if (!attr || attr->comp_mask) return fail<ibv_td>(Error{EINVAL, ""});
  auto* t = new UTd{};
  t->ibv.context = ctx;
  return &t->ibv;
}

int dealloc_td(ibv_td* td) {
  UTd* t = from<UTd>(td);
  if (t->users.load()) return EBUSY;  // a parent domain names it
  delete t;
  return 0;
}

ibv_pd* alloc_parent_domain(ibv_context* ctx, ibv_parent_domain_init_attr* attr) {
  constexpr uint32_t kKnown = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  if (!attr || !attr->pd || attr->pd->context != ctx || (attr->comp_mask & ~kKnown) ||
      ((attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) && (!attr->alloc || !attr->free)) ||
      (attr->td && attr->td->context != ctx))
    return fail<ibv_pd>(Error{EINVAL, ""});
  UPd* base = from<UPd>(attr->pd);
  if (base->base) return fail<ibv_pd>(Error{EINVAL, ""});  // made from a PD, not from another parent domain
  auto* p = new UPd{};
  p->pd = base->pd;
  p->base = base;
  p->td = attr->td ? from<UTd>(attr->td) : nullptr;
  p->ibv.context = ctx;
  ++base->parents;
  if (p->td) ++p->td->users;
  return &p->ibv;
}

}  // namespace uroce::compat
