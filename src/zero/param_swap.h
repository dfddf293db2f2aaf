// ZeRO-Infinity's parameter offload to NVMe (stage 3, with the optimizer offloaded too): the
// parameter shards of the sharded units live in one file per rank (io/direct_file.h), unit u's
// shard (S_u elements of the compute dtype, its padding zero) at its own 4 KiB-aligned offset.
//
//   reading  each gather reads the rank's shard into a host read buffer, from which it is copied up
//            into the device staging buffer the all-gather sends from; a prefetched gather starts its
//            read when it is prefetched and launches the collective at the next use of any unit
//            (ParamGatherer), so the read overlaps a unit's compute; a read needs a free read buffer,
//            so read_buffers reads at most are in flight (the unit in use and those prefetched;
//            offload_param.buffer_count, DeepSpeed's default 5);
//   writing  whoever rewrites a unit's shard (the offloaded update's "up" step, loading) fills a host
//            buffer of the unit (stage), and commit() writes it out asynchronously; there are two
//            such buffers, so that one unit's write overlaps the filling of the next; flush() waits
//            for every write (the update ends with it, before any gather reads).
//
// The ledger: the nvme tier counts the shards (category param, the bytes asked for); the host tier
// the read buffers and the two write buffers (param), each the largest offloaded shard.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/memory.h"
#include "device/device.h"
#include "io/direct_file.h"

namespace zerodp::zero {

// The host buffers a ParamSwap holds, each of its largest shard: the read buffers and its write ones.
inline constexpr int kParamSwapWriteBuffers = 2;
constexpr uint64_t param_swap_host_bytes(int read_buffers, uint64_t largest_shard_bytes) {
  return static_cast<uint64_t>(read_buffers + kParamSwapWriteBuffers) * largest_shard_bytes;
}

class ParamSwap {
 public:
  // shard_bytes[u]: unit u's shard in bytes, 0 for units not in the file (kept whole on the device,
  // or in host memory); read_buffers >= 1.
  ParamSwap(const std::string& dir, int rank, const std::vector<size_t>& shard_bytes, int read_buffers,
            device::Device& dev);
  ~ParamSwap();
  ParamSwap(const ParamSwap&) = delete;
  ParamSwap& operator=(const ParamSwap&) = delete;

  // Starts reading unit u's shard into a free read buffer (there must be one) and returns the
  // buffer's index; wait_read() returns the shard once it is there, valid until release_read().
  int read_async(int u);
  // Whether read_async() can start now without waiting: a buffer neither being read nor still being
  // copied out of (a prefetch waits for neither).
  bool read_buffer_free() const;
  const char* wait_read(int slot);
  // The caller is done with the buffer once `copied_out` is: the device's copy out of it (on a GPU a
  // copy from page-locked memory runs later, in the stream's order) must have run before another read
  // may fill it. read_async() waits for that event when it takes the buffer; null: nothing to wait for.
  void release_read(int slot, std::unique_ptr<device::Event> copied_out);
  // A host buffer for unit u's whole shard, its padding zero; fill it, then commit(u).
  char* stage(int u);
  void commit(int u);
  void flush();
  // Whether unit u's shard is being staged (stage() called, commit() not yet), and where.
  bool staging(int u) const { return staged_unit_ == u; }
  char* stage_pointer() { return write_[staged_buf_].as<char>(); }

  const io::DirectFile& file() const { return *file_; }

 private:
  std::vector<size_t> bytes_;
  std::vector<uint64_t> offset_;
  uint64_t total_ = 0;
  device::Device& dev_;
  std::unique_ptr<io::DirectFile> file_;
  std::vector<Buffer> read_;
  std::vector<io::DirectFile::Ticket> reading_;
  std::vector<bool> read_busy_;
  std::vector<std::unique_ptr<device::Event>> read_drain_;  // per buffer: the copy out of it, until run
  bool drained(size_t k) const;
  Buffer write_[kParamSwapWriteBuffers];
  io::DirectFile::Ticket pending_[2] = {0, 0};
  int next_ = 0;          // the write buffer stage() hands out next
  int staged_unit_ = -1;  // the unit in write_[staged_buf_], if any
  int staged_buf_ = 0;
};

}  // namespace zerodp::zero
