// The host-side arithmetic of the GPU communicators (comm/nccl_communicator.h,
// comm/staged_communicator.h), kept free of CUDA so that the CPU test suite covers it
// (tests/comm/test_gpu_comm_plan.cpp): which backend a group gets, how an ordered reduction's
// all-to-all cuts a buffer into chunks, and how much device scratch it needs.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string_view>
#include <utility>
#include <vector>


namespace zerodp::comm {

// ---- which backend ------------------------------------------------------------------------------

// Where a rank computes: its host and its GPU (hashes of the hostname and of the device's UUID; the
// UUID rather than the ordinal, since CUDA_VISIBLE_DEVICES may give two ranks the same ordinal for
// different GPUs, or different ordinals for the same one). Gathered over MPI as plain bytes.
struct DeviceIdentity {
  uint64_t host = 0;
  uint64_t device = 0;
};

enum class GpuCommBackend : uint8_t { kNccl, kStaged };
inline const char* gpu_comm_backend_name(GpuCommBackend b) { return b == GpuCommBackend::kNccl ? "nccl" : "staged"; }

// ZERODP_GPU_COMM: "auto" (or unset/empty) chooses; "nccl" and "staged" force one (a forced "nccl"
// with two ranks on one GPU still gets staging, since NCCL cannot run it). False for anything else.
enum class GpuCommChoice : uint8_t { kAuto, kNccl, kStaged };
inline bool parse_gpu_comm_choice(std::string_view s, GpuCommChoice* out) {
  if (s.empty() || s == "auto") *out = GpuCommChoice::kAuto;
  else if (s == "nccl") *out = GpuCommChoice::kNccl;
  else if (s == "staged") *out = GpuCommChoice::kStaged;
  else return false;
  return true;
}

// NCCL when every rank of the group has a GPU of its own (NCCL refuses two ranks of one
// communicator on one device), host staging through MPI otherwise, or when asked for.
inline GpuCommBackend choose_gpu_backend(const std::vector<DeviceIdentity>& ranks,
                                         GpuCommChoice choice = GpuCommChoice::kAuto) {
  if (choice == GpuCommChoice::kStaged) return GpuCommBackend::kStaged;
  std::set<std::pair<uint64_t, uint64_t>> seen;
  for (const DeviceIdentity& r : ranks)
    if (!seen.emplace(r.host, r.device).second) return GpuCommBackend::kStaged;
  return GpuCommBackend::kNccl;
}

// 64-bit FNV-1a: the identity hashes (the same on every rank for the same bytes).
inline uint64_t fnv1a64(const void* data, size_t n) {
  uint64_t h = 0xCBF29CE484222325ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001B3ull;
  return h;
}

// ---- the ordered reduction's all-to-all ----------------------------------------------------------

// A sum in rank order needs every rank's values of an element in one place: rank p owns chunk p,
// receives everyone's values of it (slot q of its receive buffer holds rank q's), and adds the slots
// in order 0..W-1. reduce_scatter's chunks are its `count`; an all-reduce cuts its buffer into W
// chunks of ceil(count/W) (the last ones shorter or empty) so that the reduced chunks can be
// all-gathered in equal pieces.
struct AllToAllPlan {
  int world = 1;
  size_t chunk = 0;  // elements between the starts of consecutive chunks (and receive slots)
  size_t count = 0;  // elements of the buffer being reduced (W·chunk for reduce_scatter)

  size_t offset(int p) const { return static_cast<size_t>(p) * chunk; }
  // Elements of chunk p (what every rank sends to p, and each of p's receive slots holds).
  size_t length(int p) const {
    const size_t begin = std::min(count, offset(p));
    return std::min(chunk, count - begin);
  }
  // Elements of the receive buffer: W slots of one chunk.
  size_t receive_elements() const { return static_cast<size_t>(world) * chunk; }
  // An all-reduce whose chunks are all full gathers straight into the caller's buffer; otherwise
  // into W·chunk elements of scratch after the receive slots, then copies `count` back.
  bool gathers_in_place() const { return count == receive_elements(); }
  size_t scratch_elements() const { return receive_elements() * (gathers_in_place() ? 1 : 2); }
};

inline AllToAllPlan reduce_scatter_plan(size_t count, int world) {
  return AllToAllPlan{world, count, count * static_cast<size_t>(world)};
}
inline AllToAllPlan all_reduce_plan(size_t count, int world) {
  const auto W = static_cast<size_t>(std::max(1, world));
  return AllToAllPlan{world, (count + W - 1) / W, count};
}

}  // namespace zerodp::comm
