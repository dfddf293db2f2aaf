// The memory ledger: every byte zerodp allocates is counted here under one category of docs/reference/metrics.md
// and one tier (the device's memory, the host's, NVMe files), live and peak, per category and in
// total, exactly (the bytes asked for, not the allocator's rounding), each tier apart. An optional
// per-rank budget on the device tier makes an allocation that would exceed it throw BudgetError.
//
// Buffer is the only way the library allocates tensor memory: a move-only owner of 64-byte-aligned
// bytes (4096 in the host tier) that registers with the ledger on allocation and deregisters when freed.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace zerodp {

enum class MemCategory : uint8_t {
  kParam = 0,  // parameters kept between steps, compute dtype (all in stages 0-2, the shard in 3)
  kGrad,       // persistent gradient storage (all in stages 0-1, the shard in 2-3)
  kMaster,     // fp32 master weights when the compute dtype is not fp32
  kOptim,      // optimizer state (AdamW m and v)
  kGathered,   // parameters and gradients materialised for a while only (stage 3 around a unit)
  kComm,       // communication buffers and buckets
  kAct,        // activations and working memory of forward and backward
};
constexpr size_t kNumMemCategories = 7;
constexpr std::array<MemCategory, kNumMemCategories> kAllMemCategories = {
    MemCategory::kParam,    MemCategory::kGrad, MemCategory::kMaster, MemCategory::kOptim,
    MemCategory::kGathered, MemCategory::kComm, MemCategory::kAct};

// "param", "grad", "master", "optim", "gathered", "comm", "act": the keys of the metrics.
const char* mem_category_name(MemCategory c);
MemCategory parse_mem_category(std::string_view name);

// Where bytes live (docs/reference/metrics.md#tiers). The device tier is the memory the model computes in, what
// --memory-budget caps and what the metrics' peak_bytes and live_bytes report; offloading moves
// tensors to the host tier (RAM beside the device) or the nvme tier (files under --nvme-path). On the
// CPU device, device and host memory are both RAM, but they are counted apart all the same, as they
// will be on a GPU.
enum class MemTier : uint8_t { kDevice = 0, kHost, kNvme };
constexpr size_t kNumMemTiers = 3;
constexpr std::array<MemTier, kNumMemTiers> kAllMemTiers = {MemTier::kDevice, MemTier::kHost, MemTier::kNvme};

// "device", "host", "nvme".
const char* mem_tier_name(MemTier t);

// One tier's bytes: live and peak per category and in total.
struct MemoryUsage {
  std::array<uint64_t, kNumMemCategories> live{};
  std::array<uint64_t, kNumMemCategories> peak{};
  uint64_t live_total = 0;
  uint64_t peak_total = 0;  // the peak of the sum, not the sum of the peaks

  uint64_t live_of(MemCategory c) const { return live[static_cast<size_t>(c)]; }
  uint64_t peak_of(MemCategory c) const { return peak[static_cast<size_t>(c)]; }
  bool any() const { return peak_total > 0; }  // this tier ever held a byte (since reset_peaks)
};

// Every tier's bytes. The device tier is the snapshot itself (its inherited fields, as before tiers
// existed, so that code about the device, and the budget, reads s.live, s.peak_total, ...); the
// others are members. tier() reaches any of them by name.
struct MemorySnapshot : MemoryUsage {
  MemoryUsage host;
  MemoryUsage nvme;

  const MemoryUsage& tier(MemTier t) const;
  MemoryUsage& tier(MemTier t);
};

class MemoryLedger {
 public:
  MemoryLedger() = default;
  MemoryLedger(const MemoryLedger&) = delete;
  MemoryLedger& operator=(const MemoryLedger&) = delete;

  // The process's ledger (one process is one rank).
  static MemoryLedger& global();

  // Counts `bytes` as allocated under `c` in `tier`. Throws BudgetError, counting nothing, when the
  // device tier's live total would exceed the budget; the host and nvme tiers have none.
  void on_alloc(MemTier tier, MemCategory c, uint64_t bytes);
  void on_free(MemTier tier, MemCategory c, uint64_t bytes);
  // The device tier.
  void on_alloc(MemCategory c, uint64_t bytes) { on_alloc(MemTier::kDevice, c, bytes); }
  void on_free(MemCategory c, uint64_t bytes) { on_free(MemTier::kDevice, c, bytes); }

  // The device tier's budget; nullopt: no budget.
  void set_budget(std::optional<uint64_t> bytes);
  std::optional<uint64_t> budget() const;

  MemorySnapshot snapshot() const;
  uint64_t live(MemTier tier, MemCategory c) const;
  uint64_t peak(MemTier tier, MemCategory c) const;
  uint64_t live_total(MemTier tier) const;
  uint64_t peak_total(MemTier tier) const;
  // The device tier.
  uint64_t live(MemCategory c) const { return live(MemTier::kDevice, c); }
  uint64_t peak(MemCategory c) const { return peak(MemTier::kDevice, c); }
  uint64_t live_total() const { return live_total(MemTier::kDevice); }
  uint64_t peak_total() const { return peak_total(MemTier::kDevice); }
  // Every tier's peaks restart from its current live bytes (e.g. to measure one phase).
  void reset_peaks();

 private:
  mutable std::mutex mu_;
  MemorySnapshot s_;
  std::optional<uint64_t> budget_;
};

// Formats a byte count as "123.4 MiB" (binary units) for people.
std::string format_bytes(uint64_t bytes);

// Asks the C library to keep freed host memory for reuse instead of giving it back to the system
// at once: a training step frees and re-allocates the same transient buffers (unit gradients,
// communication buffers) every step, and when each comes back from the kernel as fresh pages every
// step, faulting and zeroing those pages costs more than some of the kernels that use them (a
// 2-rank stage-2 step of the L4 model spent 4% of its time there). Blocks up to `largest` bytes come
// from the heap (glibc caps this at 32 MiB; larger ones are still mapped and unmapped each time) and
// the heap is not trimmed below `keep` bytes. A process-wide setting: the CLI calls it, a library
// user may choose otherwise. Returns false where the allocator has no such knobs (not glibc's, or
// AddressSanitizer's in its place).
bool retain_freed_host_memory(size_t largest = size_t{32} << 20, size_t keep = size_t{1} << 30);

// This machine's physical memory in bytes (0 when it cannot be told): what a run that needs more
// is refused against, before it allocates.
uint64_t physical_memory_bytes();

// Sets `bytes` bytes at p to zero, by chunks on the OpenMP pool when there are many (a gradient
// store of 124M parameters is 0.5 GB: one core's memset leaves the others idle).
void fill_zero(void* p, size_t bytes);

// Where a Buffer's bytes come from when they are not the C library's (a GPU's memory, page-locked
// host memory): allocate throws when it has none left (a BudgetError when the memory is full).
class BufferSource {
 public:
  virtual ~BufferSource() = default;
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* p, size_t bytes) noexcept = 0;
};

class Buffer {
 public:
  static constexpr size_t kAlignment = 64;
  // Host-tier buffers start on a page: NVMe offload reads and writes them with direct I/O, which
  // wants the file system's block alignment (io/direct_file.h).
  static constexpr size_t kHostAlignment = 4096;

  Buffer() = default;
  // Allocates `bytes` (uninitialised) under category `c` in `tier` (device or host), and frees them
  // under the same tier. This process's memory either way: the tier says what the bytes stand for
  // (device memory, or host memory that offloading moved out of it), not where the C library puts
  // them. NVMe bytes are files, not buffers: whoever writes them counts them with on_alloc/on_free,
  // and a Buffer asked for in that tier is a bug (RuntimeFailure). Throws BudgetError when a
  // device-tier allocation is over budget.
  Buffer(size_t bytes, MemCategory c, MemTier tier, MemoryLedger& ledger = MemoryLedger::global());
  // In the device tier.
  Buffer(size_t bytes, MemCategory c, MemoryLedger& ledger = MemoryLedger::global())
      : Buffer(bytes, c, MemTier::kDevice, ledger) {}
  // The same, with the bytes from `source` (which must outlive the buffer) instead of the C library.
  Buffer(size_t bytes, MemCategory c, MemTier tier, BufferSource& source, MemoryLedger& ledger = MemoryLedger::global());
  ~Buffer() { release(); }
  Buffer(Buffer&& o) noexcept;
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // Returns the memory and its bytes to the ledger now; the buffer becomes empty.
  void release();
  void zero();  // fill_zero over the whole buffer

  void* data() { return data_; }
  const void* data() const { return data_; }
  template <typename T>
  T* as() {
    return static_cast<T*>(data_);
  }
  template <typename T>
  const T* as() const {
    return static_cast<const T*>(data_);
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  MemCategory category() const { return category_; }
  MemTier tier() const { return tier_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
  MemCategory category_ = MemCategory::kAct;
  MemTier tier_ = MemTier::kDevice;
  MemoryLedger* ledger_ = nullptr;
  BufferSource* source_ = nullptr;  // null: the C library's
};

}  // namespace zerodp
