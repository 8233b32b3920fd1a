// Memory the NIC reaches: memory regions (registration, reregistration, IOVAs), memory windows
// and device memory.
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "api/holds.hpp"
#include "link/shared_regions.hpp"
#include "uroce/uroce.hpp"

namespace uroce {

// ---------------------------------------------------------------- MemoryRegion

Result<std::unique_ptr<MemoryRegion>> ProtectionDomain::reg_mr(void* addr, size_t len, uint32_t access) {
  return reg_mr(addr, len, reinterpret_cast<uint64_t>(addr), access);
}

Result<std::unique_ptr<MemoryRegion>> ProtectionDomain::reg_mr(void* addr, size_t len, uint64_t iova, uint32_t access) {
  auto g = h_->stack->lock();
  auto mr = h_->stack->pc->reg_mr(h_->pd, addr, len, access, iova);
  if (!mr) return mr.error();
  g.unlock();
  std::unique_ptr<MemoryRegion> m(new MemoryRegion);
  m->pd_ = h_;
  m->addr_ = addr;
  m->len_ = len;
  m->iova_ = iova;
  m->access_ = access;
  m->lkey_ = mr->lkey.value();
  m->rkey_ = mr->rkey.value();
  // A same-host peer may read it where it lies; not an on-demand region, whose pages the
  // program may unmap or remap while it is registered.
  if (!(access & kAccessOnDemand)) link::shared_regions().add(m.get(), addr, len);
  return m;
}

Result<std::unique_ptr<MemoryRegion>> ProtectionDomain::reg_dm_mr(DeviceMemory& dm, uint64_t offset, size_t len,
                                                                  uint32_t access) {
  const auto& d = dm.h_;
  if (d->stack != h_->stack) return make_error(EINVAL, "reg_dm_mr: the device memory belongs to another device");
  if (offset > d->len || len > d->len - offset)
    return make_error(EINVAL, "reg_dm_mr: the region reaches past the device memory (" + std::to_string(d->len) +
                                  " bytes)");
  auto m = reg_mr(d->bytes() + offset, len, 0, access);
  if (!m) return m.error();
  (*m)->dm_ = d;
  ++d->mrs;
  return m;
}

Status MemoryRegion::rereg(const MrChange& c) {
  if (!c.pd && !c.addr && !c.length && !c.access) return make_error(EINVAL, "rereg_mr: nothing to change");
  if (dm_) return make_error(EINVAL, "rereg_mr: a region of device memory cannot be reregistered");
  if ((c.addr || c.length) && !(c.addr && c.length))
    return make_error(EINVAL, "rereg_mr: a new range needs both its address and its length");
  if (c.pd && c.pd->h_->stack != pd_->stack) return make_error(EINVAL, "rereg_mr: the PD belongs to another device");
  std::shared_ptr<detail::PdHold> old;  // let go after the lock: the last hold deallocates its PD
  auto g = pd_->stack->lock();
  std::shared_ptr<detail::PdHold> pd = c.pd ? c.pd->h_ : pd_;
  void* addr = c.addr ? c.addr : addr_;
  const size_t len = c.addr ? c.length : len_;
  const uint64_t iova = c.addr ? reinterpret_cast<uint64_t>(c.addr) : iova_;
  const uint32_t access = c.access.value_or(access_);
  auto r = pd_->stack->pc->rereg_mr(verbs::Lkey(lkey_), pd->pd, addr, len, access, iova);
  if (!r) return r.error();
  old = std::exchange(pd_, std::move(pd));
  addr_ = addr;
  len_ = len;
  iova_ = iova;
  access_ = access;
  g.unlock();
  if (c.addr || c.access) {  // looked up again, outside the device's lock (it reads /proc)
    link::shared_regions().remove(this);
    if (!(access & kAccessOnDemand)) link::shared_regions().add(this, addr, len);
  }
  return {};
}

MemoryRegion::~MemoryRegion() {
  link::shared_regions().remove(this);
  {
    auto g = pd_->stack->lock();
    (void)pd_->stack->pc->dereg_mr(verbs::Lkey(lkey_));
  }
  if (dm_) --dm_->mrs;
}

uint32_t MemoryRegion::windows() const {
  auto g = pd_->stack->lock();
  return pd_->stack->pc->mr_windows(verbs::Lkey(lkey_));
}

Status ProtectionDomain::prefetch(std::span<const Sge> sges, bool populate) {
  auto g = h_->stack->lock();
  return h_->stack->pc->prefetch(h_->pd, sges, populate);
}

// ---------------------------------------------------------------- MemoryWindow

Result<std::unique_ptr<MemoryWindow>> ProtectionDomain::alloc_mw(uint8_t type) {
  auto g = h_->stack->lock();
  auto w = h_->stack->pc->alloc_mw(h_->pd, type);
  if (!w) return w.error();
  std::unique_ptr<MemoryWindow> m(new MemoryWindow);
  m->pd_ = h_;
  m->index_ = w->index();
  m->type_ = type;
  return m;
}

MemoryWindow::~MemoryWindow() {
  auto g = pd_->stack->lock();
  (void)pd_->stack->pc->dealloc_mw(index_);
}

uint32_t MemoryWindow::rkey() const {
  auto g = pd_->stack->lock();
  return pd_->stack->pc->mw(index_)->rkey.value();
}

bool MemoryWindow::bound() const {
  auto g = pd_->stack->lock();
  return pd_->stack->pc->mw(index_)->bound;
}

// ---------------------------------------------------------------- DeviceMemory

Result<std::unique_ptr<DeviceMemory>> Device::alloc_dm(size_t len) {
  if (len == 0) return make_error(EINVAL, "alloc_dm: length 0");
  uint64_t used = stack_->dm_used.load();
  do {
    if (len > detail::kMaxDmBytes - used)
      return make_error(ENOMEM, "alloc_dm: " + std::to_string(len) + " bytes, " +
                                    std::to_string(detail::kMaxDmBytes - used) + " of " +
                                    std::to_string(detail::kMaxDmBytes) + " left");
  } while (!stack_->dm_used.compare_exchange_weak(used, used + len));
  std::unique_ptr<DeviceMemory> d(new DeviceMemory);
  d->h_ = std::make_shared<detail::DmHold>(stack_, len);
  return d;
}

DeviceMemory::~DeviceMemory() = default;
size_t DeviceMemory::length() const { return h_->len; }
bool DeviceMemory::busy() const { return h_->mrs.load() != 0; }

static Status dm_range(const detail::DmHold& d, uint64_t offset, size_t len, const char* verb) {
  if ((offset | len) % 4) return make_error(EINVAL, std::string(verb) + ": offset and length must be multiples of 4");
  if (offset > d.len || len > d.len - offset) return make_error(EINVAL, std::string(verb) + ": past the device memory");
  return {};
}

Status DeviceMemory::copy_to(uint64_t offset, const void* src, size_t len) {
  if (Status s = dm_range(*h_, offset, len, "memcpy_to_dm"); !s) return s;
  if (len) std::memcpy(h_->bytes() + offset, src, len);
  return {};
}

Status DeviceMemory::copy_from(void* dst, uint64_t offset, size_t len) const {
  if (Status s = dm_range(*h_, offset, len, "memcpy_from_dm"); !s) return s;
  if (len) std::memcpy(dst, h_->bytes() + offset, len);
  return {};
}

}  // namespace uroce
