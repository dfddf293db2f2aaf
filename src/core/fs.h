// Files: atomic replacement of a file (readers see the old content or the new, never a half-written
// one, even after a crash) and read-only memory maps.
//
// Errors name the path and the system's reason (errno text). Failing to open or map an input, or to
// create an output where asked, is the user's to fix: UsageError (exit 2). Failing while writing,
// syncing or renaming is a RuntimeFailure (exit 1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace zerodp {

// O_DIRECT's unit: offsets, lengths and buffer addresses in multiples of it (the logical block size of
// every common disk is 512 or 4096). Memory laid out for AtomicFile's direct writes keeps to it too.
constexpr size_t kDirectBlock = 4096;

// Streams bytes into a temporary file beside `path` (same directory, so the final rename is atomic)
// and makes them visible under `path` only on commit(): fsync the file, rename it over the target,
// fsync the directory. Destroyed (or failing) before commit, it removes the temporary and leaves an
// existing target untouched.
//
// Caching::kDirect writes around the page cache (O_DIRECT, through an aligned staging buffer: the last
// partial block is written padded, then the file is cut to its length). Bytes whose address lines up
// with their offset in the file (equal modulo the 4 KiB block) go to the disk straight from the
// caller's memory, in whole blocks, without the staging copy. For large files written once
// and not read back soon (checkpoints): copying them into the page cache and writing them back costs
// the kernel about as much CPU again as the disk's DMA does not (2.2 s against 0.13 s for 800 MB on a
// 2-vCPU VM), time taken from training. Where the file system refuses O_DIRECT the file is written
// through the page cache; the bytes are the same either way.
class AtomicFile {
 public:
  enum class Caching { kPageCache, kDirect };
  explicit AtomicFile(std::string path, Caching caching = Caching::kPageCache);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Appends n bytes. On error the temporary is removed and the writer becomes unusable.
  void write(const void* data, size_t n);
  void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
  // Hands what is staged to the file system, but for a partial last block under Caching::kDirect
  // (which waits for more bytes or the commit). Written bytes are otherwise staged until 8 MiB gather.
  void flush();
  // Publishes the file under path(). Calling it twice, or after a failed write, is an error.
  void commit();
  // Drops the temporary now (what the destructor does when commit() was not called).
  void abandon() noexcept;

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }
  uint64_t bytes_written() const { return bytes_written_; }
  bool committed() const { return committed_; }
  // Whether the bytes go around the page cache (Caching::kDirect, and the file system took it).
  bool direct() const { return staging_ != nullptr; }

 private:
  void write_fd(const void* data, size_t n);  // to the descriptor, as it is opened
  void flush_staging(size_t bytes);           // the first `bytes` (whole blocks) staged; the rest moves up
  [[noreturn]] void fail(const char* what, int err);

  struct FreeStaging {
    void operator()(uint8_t* p) const noexcept;
  };
  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  uint64_t bytes_written_ = 0;
  bool committed_ = false;
  std::unique_ptr<uint8_t, FreeStaging> staging_;  // direct only: kStagingBytes, block-aligned
  size_t staged_ = 0;                              // bytes in staging_ not yet written
};

// Writes `bytes` to `path` atomically (through AtomicFile).
void write_file_atomic(const std::string& path, const void* data, size_t n);
inline void write_file_atomic(const std::string& path, std::string_view bytes) {
  write_file_atomic(path, bytes.data(), bytes.size());
}

// The directory holding the entry `path` names: "." for a bare name, "/" for one in the root.
std::string parent_dir(const std::string& path);
// "runs/out/" names the directory "runs/out" (a lone "/" stays).
std::string without_trailing_slashes(std::string_view path);

// fsyncs the file or directory at `path` (for a directory: the names created or renamed in it).
// RuntimeFailure on failure; a file system that cannot sync a directory (EINVAL) is not one.
void sync_path(const std::string& path);

// Reads a whole (small) file, e.g. a JSON configuration. UsageError naming the path on failure.
std::string read_file(const std::string& path);
// Reads a whole regular file of at most `max_bytes` bytes (a manifest, a config.json beside a
// model, a pointer file): UsageError naming the path when it is larger, not a regular file (a
// FIFO or a device is refused without waiting on it) or unreadable. Memory stays near max_bytes
// whatever is at the path.
std::string read_small_file(const std::string& path, size_t max_bytes);
bool file_exists(const std::string& path);

// A whole file mapped read-only. An empty file maps to data() == nullptr, size() == 0.
class MappedFile {
 public:
  MappedFile() = default;
  // UsageError naming the path and the reason when the file cannot be opened, examined or mapped.
  explicit MappedFile(std::string path);
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  bool is_open() const { return !path_.empty(); }

 private:
  void unmap() noexcept;

  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace zerodp
