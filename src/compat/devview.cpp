// liburoce_devview.so: preloaded by uroce-run, it shows the program the device node a kernel
// driver would have made, /dev/infiniband/uverbs0, as the character device it would be (some
// clients, UCX among them, use a verbs device only if that node exists and is read-write). It
// answers stat and access for that one path from /dev/null and passes everything else through;
// nothing is created on the machine, and no other process sees it.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace {

constexpr const char* kNode = "/dev/infiniband/uverbs0";
constexpr const char* kStandIn = "/dev/null";  // a character device every process may read and write

const char* view(const char* path) { return path && std::strcmp(path, kNode) == 0 ? kStandIn : path; }

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
int access(const char* path, int mode) {
  static auto real = next<int (*)(const char*, int)>("access");
  return real(view(path), mode);
}
int faccessat(int dirfd, const char* path, int mode, int flags) {
  static auto real = next<int (*)(int, const char*, int, int)>("faccessat");
  return real(dirfd, view(path), mode, flags);
}

}  // extern "C"
