// liburoce_devview.so: preloaded by uroce-run, it shows the program the device nodes a kernel
// driver would have made, /dev/infiniband/uverbsN, as the character devices they would be (some
// clients, UCX among them, use a verbs device only if its node exists and is read-write), and
// the loopback device's sysfs directory, /sys/class/infiniband/uroce_lo, as far as clients read
// it to find the network interface of the device (rdma-core's pyverbs tests, for rdma_cm): the
// tree that ships next to this library, sysfs/uroce_lo, whose device/net/ holds "lo". It
// answers stat, access and opendir for those paths and passes everything else through; nothing
// is created on the machine, and no other process sees it.
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace {

constexpr const char* kNode = "/dev/infiniband/uverbs";  // followed by the device's number
constexpr const char* kStandIn = "/dev/null";  // a character device every process may read and write

constexpr const char* kSysfs = "/sys/class/infiniband/uroce_lo";

// <directory of this library>/sysfs/uroce_lo, or "" where the tree is not there.
const std::string& sysfs_root() {
  static const std::string root = [] {
    Dl_info info{};
    if (!dladdr(reinterpret_cast<void*>(&sysfs_root), &info) || !info.dli_fname) return std::string();
    std::string lib = info.dli_fname;
    std::string dir = lib.substr(0, lib.rfind('/') + 1) + "sysfs/uroce_lo";
    return access(dir.c_str(), F_OK) == 0 ? dir : std::string();
  }();
  return root;
}

bool is_node(const char* path) {
  size_t n = std::strlen(kNode);
  if (std::strncmp(path, kNode, n) != 0 || !path[n]) return false;
  for (const char* p = path + n; *p; ++p)
    if (*p < '0' || *p > '9') return false;
  return true;
}

const char* view(const char* path) {
  if (!path) return path;
  if (is_node(path)) return kStandIn;
  size_t n = std::strlen(kSysfs);
  if (std::strncmp(path, kSysfs, n) != 0 || (path[n] != 0 && path[n] != '/')) return path;
  if (sysfs_root().empty()) return path;
  thread_local std::string mapped;
  mapped = sysfs_root() + (path + n);
  return mapped.c_str();
}

template <class F>
F next(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" {

int stat(const char* path, struct stat* st) {
  static auto real = next<int (*)(const char*, struct stat*)>("stat");
  return real(view(path), st);
}
int stat64(const char* path, struct stat64* st) {
  static auto real = next<int (*)(const char*, struct stat64*)>("stat64");
  return real(view(path), st);
}
int lstat(const char* path, struct stat* st) {
  static auto real = next<int (*)(const char*, struct stat*)>("lstat");
  return real(view(path), st);
}
int lstat64(const char* path, struct stat64* st) {
  static auto real = next<int (*)(const char*, struct stat64*)>("lstat64");
  return real(view(path), st);
}
int fstatat(int dirfd, const char* path, struct stat* st, int flags) {
  static auto real = next<int (*)(int, const char*, struct stat*, int)>("fstatat");
  return real(dirfd, view(path), st, flags);
}
int fstatat64(int dirfd, const char* path, struct stat64* st, int flags) {
  static auto real = next<int (*)(int, const char*, struct stat64*, int)>("fstatat64");
  return real(dirfd, view(path), st, flags);
}
// Programs built against glibc before 2.33 call these.
int __xstat(int ver, const char* path, struct stat* st) {
  static auto real = next<int (*)(int, const char*, struct stat*)>("__xstat");
  return real(ver, view(path), st);
}
int __xstat64(int ver, const char* path, struct stat64* st) {
  static auto real = next<int (*)(int, const char*, struct stat64*)>("__xstat64");
  return real(ver, view(path), st);
}
int statx(int dirfd, const char* path, int flags, unsigned mask, struct statx* st) {
  static auto real = next<int (*)(int, const char*, int, unsigned, struct statx*)>("statx");
  return real(dirfd, view(path), flags, mask, st);
}
DIR* opendir(const char* path) {
  static auto real = next<DIR* (*)(const char*)>("opendir");
  return real(view(path));
}
int access(const char* path, int mode) {
  static auto real = next<int (*)(const char*, int)>("access");
  return real(view(path), mode);
}
int faccessat(int dirfd, const char* path, int mode, int flags) {
  static auto real = next<int (*)(int, const char*, int, int)>("faccessat");
  return real(dirfd, view(path), mode, flags);
}

}  // extern "C"
