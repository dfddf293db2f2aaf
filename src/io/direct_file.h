// One offload file on NVMe (ZeRO-Infinity): read and written asynchronously with io_uring, with
// O_DIRECT so that the bytes go between the caller's buffer and the disk without a copy in the page
// cache (which would hold a second copy of what offloading moved out of memory, uncounted).
//
// The file is created with O_EXCL (it is never another run's or another rank's) and unlinked at
// once: it has no name while the run uses it, and the kernel frees its blocks when the descriptor
// closes, however the process ends (an exception, MPI_Abort, SIGKILL). Nothing is left to clean.
//
// Rules of direct I/O, kept by the callers: offsets are multiples of kIoBlock and buffers start on a
// kIoBlock boundary (host-tier Buffers do). Lengths are free: a partial last block is read through a
// bounce block, and written padded with zeros (so the file is sized in whole blocks).
//
// Where the kernel refuses io_uring (seccomp, an old kernel) or ZERODP_IO_URING=0, requests run
// synchronously with pread/pwrite when they are started; where the file system refuses O_DIRECT
// (tmpfs on old kernels), the file is opened buffered. Both say so once on stderr and in
// direct()/uring(); the results are the same bytes either way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace zerodp::io {

constexpr size_t kIoBlock = 4096;
constexpr uint64_t align_up_block(uint64_t n) { return (n + kIoBlock - 1) / kIoBlock * kIoBlock; }

// Bytes moved since the file was opened.
struct IoStats {
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
  uint64_t requests = 0;  // read_async + write_async calls
};

class DirectFile {
 public:
  using Ticket = uint64_t;

  // Creates dir/name sized `bytes` (rounded up to whole blocks), opens it and unlinks it. Throws
  // RuntimeFailure naming the path and the system's reason when it cannot.
  DirectFile(const std::string& dir, const std::string& name, uint64_t bytes);
  ~DirectFile();  // waits for what is in flight, then closes (the blocks are freed)
  DirectFile(const DirectFile&) = delete;
  DirectFile& operator=(const DirectFile&) = delete;

  // Starts moving `bytes` between buf and the file at `offset`; the buffer must stay untouched
  // (a write) or unread (a read) until wait(ticket) returns.
  Ticket read_async(void* buf, size_t bytes, uint64_t offset);
  Ticket write_async(const void* buf, size_t bytes, uint64_t offset);
  // Until the request is complete; throws RuntimeFailure if it failed. A ticket already waited for
  // (or 0) returns at once.
  void wait(Ticket t);
  void wait_all();

  void read(void* buf, size_t bytes, uint64_t offset) { wait(read_async(buf, bytes, offset)); }
  void write(const void* buf, size_t bytes, uint64_t offset) { wait(write_async(buf, bytes, offset)); }

  uint64_t size() const;     // bytes the file holds (whole blocks)
  bool direct() const;       // opened with O_DIRECT
  bool uring() const;        // requests go through io_uring (else synchronous pread/pwrite)
  const IoStats& stats() const;
  const std::string& path() const;  // the name it had (for messages)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zerodp::io
