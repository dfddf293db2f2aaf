#include "core/memory.h"

#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "core/names.h"

namespace zerodp {

namespace {

constexpr Spelling<MemCategory> kCategoryNames[] = {
    {MemCategory::kParam, "param"},       {MemCategory::kGrad, "grad"}, {MemCategory::kMaster, "master"},
    {MemCategory::kOptim, "optim"},       {MemCategory::kGathered, "gathered"}, {MemCategory::kComm, "comm"},
    {MemCategory::kAct, "act"},
};
constexpr Spelling<MemTier> kTierNames[] = {
    {MemTier::kDevice, "device"}, {MemTier::kHost, "host"}, {MemTier::kNvme, "nvme"}};

}  // namespace

const char* mem_category_name(MemCategory c) { return name_of(kCategoryNames, c); }

const char* mem_tier_name(MemTier t) { return name_of(kTierNames, t); }

const MemoryUsage& MemorySnapshot::tier(MemTier t) const {
  switch (t) {
    case MemTier::kDevice: return *this;
    case MemTier::kHost: return host;
    case MemTier::kNvme: return nvme;
  }
  throw RuntimeFailure(fmt::format("unknown memory tier {}", static_cast<int>(t)));
}

MemoryUsage& MemorySnapshot::tier(MemTier t) {
  return const_cast<MemoryUsage&>(static_cast<const MemorySnapshot&>(*this).tier(t));
}

MemCategory parse_mem_category(std::string_view name) {
  for (MemCategory c : kAllMemCategories)
    if (name == mem_category_name(c)) return c;
  throw UsageError(fmt::format("unknown memory category '{}'", name));
}

std::string format_bytes(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, units[u]);
}

MemoryLedger& MemoryLedger::global() {
  static MemoryLedger ledger;
  return ledger;
}

void MemoryLedger::on_alloc(MemTier tier, MemCategory c, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  MemoryUsage& u = s_.tier(tier);
  const size_t i = static_cast<size_t>(c);
  if (tier == MemTier::kDevice && budget_ && u.live_total + bytes > *budget_) {
    throw BudgetError(fmt::format(
        "memory budget exceeded: allocating {} bytes of '{}' with {} bytes live would exceed the "
        "budget of {} bytes per rank ({} asked, {} live, {} budget)",
        bytes, mem_category_name(c), u.live_total, *budget_, format_bytes(bytes),
        format_bytes(u.live_total), format_bytes(*budget_)));
  }
  u.live[i] += bytes;
  u.live_total += bytes;
  if (u.live[i] > u.peak[i]) u.peak[i] = u.live[i];
  if (u.live_total > u.peak_total) u.peak_total = u.live_total;
}

void MemoryLedger::on_free(MemTier tier, MemCategory c, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  MemoryUsage& u = s_.tier(tier);
  const size_t i = static_cast<size_t>(c);
  ZDP_CHECK(u.live[i] >= bytes, "freeing {} bytes of '{}' in the {} tier with only {} live", bytes,
            mem_category_name(c), mem_tier_name(tier), u.live[i]);
  u.live[i] -= bytes;
  u.live_total -= bytes;
}

void MemoryLedger::set_budget(std::optional<uint64_t> bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  budget_ = bytes;
}

std::optional<uint64_t> MemoryLedger::budget() const {
  std::lock_guard<std::mutex> lock(mu_);
  return budget_;
}

MemorySnapshot MemoryLedger::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return s_;
}

uint64_t MemoryLedger::live(MemTier tier, MemCategory c) const { return snapshot().tier(tier).live_of(c); }
uint64_t MemoryLedger::peak(MemTier tier, MemCategory c) const { return snapshot().tier(tier).peak_of(c); }
uint64_t MemoryLedger::live_total(MemTier tier) const { return snapshot().tier(tier).live_total; }
uint64_t MemoryLedger::peak_total(MemTier tier) const { return snapshot().tier(tier).peak_total; }

void MemoryLedger::reset_peaks() {
  std::lock_guard<std::mutex> lock(mu_);
  for (MemTier t : kAllMemTiers) {
    MemoryUsage& u = s_.tier(t);
    u.peak = u.live;
    u.peak_total = u.live_total;
  }
}

Buffer::Buffer(size_t bytes, MemCategory c, MemTier tier, MemoryLedger& ledger) : category_(c), tier_(tier) {
  ZDP_CHECK(tier != MemTier::kNvme, "a Buffer of {} bytes of '{}' asked for in the nvme tier: NVMe bytes are "
            "files, counted by their writer", bytes, mem_category_name(c));
  ledger.on_alloc(tier, c, bytes);  // throws before anything is allocated
  if (bytes > 0) {
    // aligned_alloc wants a multiple of the alignment; the ledger counts the bytes asked for.
    const size_t align = tier == MemTier::kHost ? kHostAlignment : kAlignment;
    const size_t rounded = (bytes + align - 1) / align * align;
    data_ = std::aligned_alloc(align, rounded);
    if (data_ == nullptr) {
      ledger.on_free(tier, c, bytes);
      throw RuntimeFailure(fmt::format("out of host memory allocating {} bytes of '{}' ({} tier)", bytes,
                                       mem_category_name(c), mem_tier_name(tier)));
    }
  }
  size_ = bytes;
  ledger_ = &ledger;
}

Buffer::Buffer(size_t bytes, MemCategory c, MemTier tier, BufferSource& source, MemoryLedger& ledger)
    : category_(c), tier_(tier) {
  ZDP_CHECK(tier != MemTier::kNvme, "a Buffer of {} bytes of '{}' asked for in the nvme tier: NVMe bytes are "
            "files, counted by their writer", bytes, mem_category_name(c));
  ledger.on_alloc(tier, c, bytes);  // throws before anything is allocated
  if (bytes > 0) {
    try {
      data_ = source.allocate(bytes);
    } catch (...) {
      ledger.on_free(tier, c, bytes);
      throw;
    }
  }
  size_ = bytes;
  ledger_ = &ledger;
  source_ = &source;
}

Buffer::Buffer(Buffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      category_(o.category_),
      tier_(o.tier_),
      ledger_(std::exchange(o.ledger_, nullptr)),
      source_(std::exchange(o.source_, nullptr)) {}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    category_ = o.category_;
    tier_ = o.tier_;
    ledger_ = std::exchange(o.ledger_, nullptr);
    source_ = std::exchange(o.source_, nullptr);
  }
  return *this;
}

void Buffer::release() {
  if (ledger_ != nullptr) ledger_->on_free(tier_, category_, size_);
  if (source_ != nullptr) {
    if (data_ != nullptr) source_->deallocate(data_, size_);
  } else {
    std::free(data_);
  }
  data_ = nullptr;
  size_ = 0;
  ledger_ = nullptr;
  source_ = nullptr;
}

void fill_zero(void* p, size_t bytes) {
  constexpr size_t kChunk = size_t{1} << 18;  // 256 KiB a task
  if (bytes < 4 * kChunk) {
    if (bytes > 0) std::memset(p, 0, bytes);
    return;
  }
  char* base = static_cast<char*>(p);
  const ptrdiff_t chunks = static_cast<ptrdiff_t>((bytes + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(static)
  for (ptrdiff_t c = 0; c < chunks; ++c) {
    const size_t begin = static_cast<size_t>(c) * kChunk;
    std::memset(base + begin, 0, std::min(kChunk, bytes - begin));
  }
}

void Buffer::zero() {
  // Bytes from a source (a GPU's) may not be addressable here: the device that gave them zeroes them.
  ZDP_CHECK(source_ == nullptr, "Buffer::zero on {} bytes of '{}' from a buffer source: use its device's fill_zero",
            size_, mem_category_name(category_));
  fill_zero(data_, size_);
}

bool retain_freed_host_memory(size_t largest, size_t keep) {
#if defined(__GLIBC__)
  // Fixing the thresholds turns off glibc's own adjustment of them (which would only raise the
  // mapping threshold after a mapped block is freed, and lowers the trim one again).
  constexpr size_t kMappingCap = size_t{32} << 20;  // glibc refuses a larger mapping threshold
  const bool mapped = mallopt(M_MMAP_THRESHOLD, static_cast<int>(std::min(largest, kMappingCap))) == 1;
  const bool trim = mallopt(M_TRIM_THRESHOLD, static_cast<int>(std::min<size_t>(keep, INT_MAX))) == 1;
  return mapped && trim;
#else
  (void)largest;
  (void)keep;
  return false;
#endif
}

uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

}  // namespace zerodp
