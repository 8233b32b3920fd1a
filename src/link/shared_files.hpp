// Shared files of this host's processes (memfd, /dev/shm, hugetlbfs): which devices hold them,
// and mappings of a peer's file guarded against its shrinking (link/shm_place.cpp).
//
// Reading a page past the new end of a mapped file is SIGBUS, wherever the read happens (the
// transport's copy into a region, a held packet's copy). A handler, installed with the first
// guarded mapping, puts zero pages in place of that whole mapping and lets the read go on;
// zeroed() moves, and the link maps the file anew before its next payload. What a peer sends
// from memory it pulled away arrives as zeros (its own data); it kills nobody. Every other
// SIGBUS (a fault elsewhere, a signal someone sent) goes where it went before.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace uroce::link::shared_files {

// Whether `dev` holds tmpfs or hugetlbfs files: memfds of either kind, or a mount of either
// (/proc/self/mountinfo, read again at most once a second when a device is not known).
bool shared_file_device(uint64_t dev);

// What a descriptor names.
struct FileId {
  uint64_t dev = 0, ino = 0, size = 0, blksize = 0;
};

// The identity of what fd (a path-only descriptor will do) names, without asking its file
// system anything it does not have at hand (AT_STATX_DONT_SYNC: a FUSE server that never
// answers stalls nobody). False if it is not a regular file.
bool identify(int fd, FileId& id);

// A read-only descriptor of the file at `path` if it is the file (dev, ino) on a tmpfs or
// hugetlbfs device, at least min_size bytes long; else -1. Nothing but that file is opened
// (path-only first: a device or FIFO named there is never opened, an open may do things), and
// no other file system is asked anything. `follow`: path may be a link (/proc/<pid>/fd/<n>).
int open_shared(const char* path, bool follow, uint64_t dev, uint64_t ino, uint64_t min_size, FileId& id);

// Guards [p, p + n), a mapping of a peer's file; false if too many are guarded already.
bool guard(const uint8_t* p, size_t n);
// Unmaps it, guarded or not.
void unmap(const uint8_t* p, size_t n);
// Guarded mappings replaced with zeros so far.
uint64_t zeroed();

}  // namespace uroce::link::shared_files
