// What uroce does not offer, failing as libibverbs callers test for: XRC helpers, dma-buf,
// importing objects from another process.
#include <arpa/inet.h>
#include <sched.h>
#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "compat/internal.hpp"

using namespace uroce;
using namespace uroce::compat;

extern "C" {


// Kernel-ABI helpers that librdmacm imports; uroce has no kernel side to copy from.
void ibv_copy_ah_attr_from_kern(void*, const void*) {}
void ibv_copy_qp_attr_from_kern(void*, const void*) {}
void ibv_copy_path_rec_from_kern(void*, const void*) {}
// Where sysfs is mounted, as libibverbs reports it; uroce devices have no entries there.
const char* ibv_get_sysfs_path(void) { return "/sys"; }

int ibv_resolve_eth_l2_from_gid(ibv_context*, ibv_ah_attr*, uint8_t[6], uint16_t*) { return EOPNOTSUPP; }
ibv_mr* ibv_reg_dmabuf_mr(ibv_pd*, uint64_t, size_t, uint64_t, int, int) {
  errno = EOPNOTSUPP;
  return nullptr;
}
// Sharing objects with another process's context needs a kernel; uroce has none.
ibv_context* ibv_import_device(int) {
  errno = EOPNOTSUPP;
  return nullptr;
}
ibv_pd* ibv_import_pd(ibv_context*, uint32_t) {
  errno = EOPNOTSUPP;
  return nullptr;
}
ibv_mr* ibv_import_mr(ibv_pd*, uint32_t) {
  errno = EOPNOTSUPP;
  return nullptr;
}
ibv_dm* ibv_import_dm(ibv_context*, uint32_t) {
  errno = EOPNOTSUPP;
  return nullptr;
}
void ibv_unimport_pd(ibv_pd*) {}
void ibv_unimport_mr(ibv_mr*) {}
void ibv_unimport_dm(ibv_dm*) {}
void ibv_copy_path_rec_to_kern(void*, const void*) {}

}  // extern "C"
