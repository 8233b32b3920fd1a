// What uroce does not offer, failing as libibverbs callers test for: kernel-ABI helpers, dma-buf.
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
void ibv_copy_path_rec_to_kern(void*, const void*) {}

}  // extern "C"
