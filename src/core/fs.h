// Files: atomic replacement of a file (readers see the old content or the new, never a half-written
// one, even after a crash) and read-only memory maps.
//
// Errors name the path and the system's reason (errno text). Failing to open or map an input, or to
// create an output where asked, is the user's to fix: UsageError (exit 2). Failing while writing,
// syncing or renaming is a RuntimeFailure (exit 1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace zerodp {

// Streams bytes into a temporary file beside `path` (same directory, so the final rename is atomic)
// and makes them visible under `path` only on commit(): fsync the file, rename it over the target,
// fsync the directory. Destroyed (or failing) before commit, it removes the temporary and leaves an
// existing target untouched.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Appends n bytes. On error the temporary is removed and the writer becomes unusable.
  void write(const void* data, size_t n);
  void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
  // Publishes the file under path(). Calling it twice, or after a failed write, is an error.
  void commit();
  // Drops the temporary now (what the destructor does when commit() was not called).
  void abandon() noexcept;

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }
  uint64_t bytes_written() const { return bytes_written_; }
  bool committed() const { return committed_; }

 private:
  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  uint64_t bytes_written_ = 0;
  bool committed_ = false;
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
