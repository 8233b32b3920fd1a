// File descriptors over a UNIX socket (SCM_RIGHTS): how same-host channels hand over their
// memfd and eventfds.
#pragma once
#include <sys/types.h>

#include <cstddef>

namespace uroce::link {

// One message of len bytes with n descriptors. True if all of it was sent.
bool send_with_fds(int sock, const void* data, size_t len, const int* fds, int n);
// One message into data (up to len bytes) and up to max descriptors into fds (*got of them,
// any beyond max closed). Returns the byte count, or -1.
ssize_t recv_with_fds(int sock, void* data, size_t len, int* fds, int max, int* got);

}  // namespace uroce::link
