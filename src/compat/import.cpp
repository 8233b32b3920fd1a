// Importing objects into another context (ibv_import_device and friends): a context's cmd_fd
// is a memfd of its own, so a dup of it (what programs pass) names the context's device by its
// inode. The imported context shares that NIC; an imported PD, MR or device memory is the same
// object under a pointer of its own, which ibv_unimport_* lets go without destroying it. Only
// within this process: another process's objects need a kernel to be shared (EOPNOTSUPP).
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <mutex>
#include <utility>

#include "compat/internal.hpp"

using namespace uroce;
using namespace uroce::compat;

namespace uroce::compat {
namespace {

struct Known {
  std::weak_ptr<UDevice> dev;
  ibv_device* device = nullptr;
};
std::mutex g_known_mu;
std::map<std::pair<uint64_t, uint64_t>, Known> g_known;  // (st_dev, st_ino) of a context's cmd_fd

std::pair<uint64_t, uint64_t> inode_of(int fd, bool* ok) {
  struct stat st;
  *ok = fstat(fd, &st) == 0;
  return {uint64_t(st.st_dev), uint64_t(st.st_ino)};
}

}  // namespace

void remember_context(int cmd_fd, const std::shared_ptr<UDevice>& shared, ibv_device* device) {
  bool ok = false;
  auto key = inode_of(cmd_fd, &ok);
  if (!ok) return;
  std::lock_guard g(g_known_mu);
  std::erase_if(g_known, [](const auto& k) { return k.second.dev.expired(); });  // closed since
  g_known[key] = {shared, device};
}

}  // namespace uroce::compat

extern "C" {

ibv_context* ibv_import_device(int cmd_fd) {
  bool ok = false;
  auto key = inode_of(cmd_fd, &ok);
  if (!ok) return fail<ibv_context>(Error{EBADF, ""});
  Known k;
  {
    std::lock_guard g(g_known_mu);
    auto it = g_known.find(key);
    if (it != g_known.end()) k = it->second;
  }
  std::shared_ptr<UDevice> dev = k.dev.lock();
  if (!dev) return fail<ibv_context>(Error{EOPNOTSUPP, ""});  // another process's, or no context's
  return context_on(std::move(dev), k.device, cmd_fd);
}

ibv_pd* ibv_import_pd(ibv_context* ctx, uint32_t pd_handle) {
  UDevice& d = *uctx(ctx)->shared;
  std::lock_guard g(d.mu);
  auto it = d.pds.find(pd_handle);
  if (it == d.pds.end()) return fail<ibv_pd>(Error{EINVAL, ""});
  auto* p = new UPd{};
  p->pd = it->second->pd;
  p->imported = true;
  p->ibv.context = ctx;
  p->ibv.handle = pd_handle;
  return &p->ibv;
}

void ibv_unimport_pd(ibv_pd* pd) {
  if (pd && from<UPd>(pd)->imported) delete from<UPd>(pd);
}

ibv_mr* ibv_import_mr(ibv_pd* pd, uint32_t mr_handle) {
  UDevice& d = *uctx(pd->context)->shared;
  std::lock_guard g(d.mu);
  auto it = d.mrs.find(mr_handle);
  // The region must be of the PD it is imported into.
  if (it == d.mrs.end() || from<UPd>(it->second->ibv.pd)->pd != from<UPd>(pd)->pd)
    return fail<ibv_mr>(Error{EINVAL, ""});
  auto* m = new UMr{};
  m->ibv = it->second->ibv;
  m->ibv.context = pd->context;
  m->ibv.pd = pd;
  return &m->ibv;
}

void ibv_unimport_mr(ibv_mr* mr) {
  if (mr && !from<UMr>(mr)->mr) delete from<UMr>(mr);
}

ibv_dm* ibv_import_dm(ibv_context* ctx, uint32_t dm_handle) {
  UDevice& d = *uctx(ctx)->shared;
  std::lock_guard g(d.mu);
  auto it = d.dms.find(dm_handle);
  if (it == d.dms.end()) return fail<ibv_dm>(Error{EINVAL, ""});
  auto* m = new UDm{};
  m->ibv = it->second->ibv;
  m->ibv.context = ctx;
  m->dm = it->second->dm;
  m->imported = true;
  return &m->ibv;
}

void ibv_unimport_dm(ibv_dm* dm) {
  if (dm && from<UDm>(dm)->imported) delete from<UDm>(dm);
}

}  // extern "C"
