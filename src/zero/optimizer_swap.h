// ZeRO-Infinity's optimizer offload to NVMe: the rank's fp32 masters and optimizer states (AdamW m
// and v, SGD momentum) live in one file (io/direct_file.h), and the offloaded update
// (shard_optimizer_offload.cpp) brings them into host memory one sub-group at a time, through
// buffer_count slots: while one slot's sub-group is updated, the previous sub-group is written back
// from another and the next ones are read into the others.
//
// The file, state k (0: masters; 1, 2: the optimizer's states) is a region of the whole shard, each
// starting on an I/O block:
//
//   [ masters: S fp32 | pad ][ state 0: S fp32 | pad ][ state 1: S fp32 | pad ]
//
// and sub-group g of it is elements [g·sub, min(S, (g+1)·sub)), sub a multiple of 1024 elements
// (4 KiB of fp32) so that every sub-group starts on a block. The ledger's nvme tier counts the
// states' bytes (S·4 as master, S·4 per state as optim: the bytes asked for, not the padding); its
// host tier counts the slots (master and optim, sub elements each) beside the gradient staging.
//
// Checkpoints, consolidation and the finiteness check read (and loading writes) the states unit by
// unit: for them bring_in() reads a range of whole blocks of every state into host buffers that stand
// where the cpu offload keeps them (ModelStates::master, opt_m, opt_v), and put_back() writes them
// out (if asked) and frees them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/memory.h"
#include "device/device.h"
#include "io/direct_file.h"
#include "zero/offload_rules.h"

namespace zerodp::zero {


// A unit's window of each state's region: its shard's fp32 elements [shard_off, shard_off + shard)
// widened to whole I/O blocks, what bring_in() reads for the unit (ModelStates' StatesInHost) and so
// the host memory one state takes while the unit is in: its first byte and its bytes.
struct StatesWindow {
  uint64_t first = 0, bytes = 0;
};
constexpr StatesWindow states_window(uint64_t shard_off, uint64_t shard) {
  const uint64_t begin = shard_off * sizeof(float), end = begin + shard * sizeof(float);
  const uint64_t first = begin / io::kIoBlock * io::kIoBlock;
  return {first, io::align_up_block(end) - first};
}

class OptimizerSwap {
 public:
  // shard: the rank's shard elements S; num_states: the optimizer's fp32 states per element;
  // sub_group: elements per sub-group (a multiple of 1024); buffer_count: slots (at least 1).
  OptimizerSwap(const std::string& dir, int rank, size_t shard, int num_states, size_t sub_group, int buffer_count,
                device::Device& dev);
  ~OptimizerSwap();
  OptimizerSwap(const OptimizerSwap&) = delete;
  OptimizerSwap& operator=(const OptimizerSwap&) = delete;

  size_t sub_groups() const { return offload_sub_groups(shard_, sub_); }
  int slots() const { return static_cast<int>(slot_master_.size()); }

  // Starts reading sub-group g's states into slot s / writing them from it; wait(s) until what slot
  // s has in flight is done.
  void read_async(size_t g, int s);
  void write_async(size_t g, int s);
  void wait(int s);
  // The fp32 masters / state k of the sub-group slot s holds.
  float* master(int s) { return slot_master_[s].as<float>(); }
  float* state(int s, int k) { return slot_state_[s][k].as<float>(); }

  // The bytes [offset, offset + bytes) of every state's region (both multiples of the I/O block)
  // into new host buffers (master, and opt_m / opt_v as many as there are states), and back (write:
  // their contents go to the file first).
  void bring_in(uint64_t offset, uint64_t bytes, Buffer& master, Buffer& m, Buffer& v);
  void put_back(uint64_t offset, Buffer& master, Buffer& m, Buffer& v, bool write);

  const io::DirectFile& file() const { return *file_; }

 private:
  uint64_t region(int k) const { return static_cast<uint64_t>(k) * io::align_up_block(shard_ * sizeof(float)); }
  size_t count(size_t g) const { return std::min(sub_, shard_ - g * sub_); }

  const size_t shard_;
  const int num_states_;
  const size_t sub_;
  device::Device& dev_;
  std::unique_ptr<io::DirectFile> file_;
  std::vector<Buffer> slot_master_;
  std::vector<std::vector<Buffer>> slot_state_;
  std::vector<std::vector<io::DirectFile::Ticket>> pending_;
};

}  // namespace zerodp::zero
