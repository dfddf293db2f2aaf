#include "core/fs.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"

namespace zerodp {

namespace {

std::string errno_text(int err) { return std::strerror(err); }

// A name no other writer (thread or process) uses at the same moment.
std::string temp_name_for(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return fmt::format("{}.tmp.{}.{}", path, static_cast<long>(::getpid()), counter.fetch_add(1));
}

}  // namespace

std::string parent_dir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string without_trailing_slashes(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  return std::string(path);
}

// ---- AtomicFile -------------------------------------------------------------------------------

namespace {
constexpr size_t kStagingBytes = size_t{8} << 20;  // a direct write's size: long enough to keep DMA busy

// One staging buffer is kept for the next direct file. A checkpoint's writer writes one large file a
// save, from a new thread each time: a fresh buffer's first touch cost the 2-vCPU VM 2k page faults and
// about 36 ms a rank at each save (perf, 2026-11-30), a kept one nothing.
std::mutex g_spare_staging_mu;
uint8_t* g_spare_staging = nullptr;  // a kStagingBytes block, or null

uint8_t* take_staging() {
  {
    const std::lock_guard<std::mutex> lock(g_spare_staging_mu);
    if (uint8_t* p = std::exchange(g_spare_staging, nullptr)) return p;
  }
  return static_cast<uint8_t*>(std::aligned_alloc(kDirectBlock, kStagingBytes));
}
}  // namespace

void AtomicFile::FreeStaging::operator()(uint8_t* p) const noexcept {
  {
    const std::lock_guard<std::mutex> lock(g_spare_staging_mu);
    if (g_spare_staging == nullptr) {
      g_spare_staging = p;
      return;
    }
  }
  std::free(p);
}

AtomicFile::AtomicFile(std::string path, Caching caching) : path_(std::move(path)) {
  ZDP_REQUIRE(!path_.empty(), "cannot write a file with an empty path");
  for (int attempt = 0; attempt < 100; ++attempt) {
    temp_path_ = temp_name_for(path_);
    // 0666 under the umask: the published file gets the permissions a plain create would give.
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ >= 0) break;
    if (errno != EEXIST) break;
  }
  if (fd_ < 0) {
    const int err = errno;
    throw UsageError(
        fmt::format("cannot create '{}' (temporary '{}'): {}", path_, temp_path_, errno_text(err)));
  }
  // O_DIRECT set after the create: an open() with it on a file system that refuses it (tmpfs on old
  // kernels) fails only after creating the file. Refused here, the file stays buffered.
  if (caching == Caching::kDirect) {
    const int flags = ::fcntl(fd_, F_GETFL);
    if (flags >= 0 && ::fcntl(fd_, F_SETFL, flags | O_DIRECT) == 0) {
      staging_.reset(take_staging());
      if (!staging_) fail("allocating the staging buffer of", ENOMEM);
    }
  }
}

AtomicFile::~AtomicFile() {
  if (!committed_) abandon();
}

void AtomicFile::abandon() noexcept {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
    ::unlink(temp_path_.c_str());
  }
  staging_.reset();
}

void AtomicFile::fail(const char* what, int err) {
  abandon();
  throw RuntimeFailure(fmt::format("{} '{}' (temporary '{}'): {}", what, path_, temp_path_, errno_text(err)));
}

void AtomicFile::write_fd(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    // Linux writes at most ~2 GiB per call; ask for less and loop over partial writes.
    const size_t chunk = n < (size_t{1} << 30) ? n : (size_t{1} << 30);
    const ssize_t w = ::write(fd_, p, chunk);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("writing", errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void AtomicFile::flush_staging(size_t bytes) {
  write_fd(staging_.get(), bytes);
  staged_ -= bytes;
  if (staged_ > 0) std::memmove(staging_.get(), staging_.get() + bytes, staged_);  // the partial block
}

void AtomicFile::flush() {
  ZDP_CHECK(fd_ >= 0 && !committed_, "flush of '{}' after commit or failure", path_);
  if (staging_) flush_staging(staged_ / kDirectBlock * kDirectBlock);
}

void AtomicFile::write(const void* data, size_t n) {
  ZDP_CHECK(fd_ >= 0 && !committed_, "write to '{}' after commit or failure", path_);
  if (!staging_) {
    write_fd(data, n);
    bytes_written_ += n;
    return;
  }
  const uint8_t* p = static_cast<const uint8_t*>(data);
  bytes_written_ += n;
  // Source bytes that line up with the file's blocks (once the staged partial block is completed from
  // them) go to the disk straight from the caller's memory: no staging copy for a caller that lays its
  // data out so (a checkpoint's host copy, zero/state_copy.h).
  const size_t fill = (kDirectBlock - staged_ % kDirectBlock) % kDirectBlock;
  if (n >= fill + kDirectBlock && (reinterpret_cast<uintptr_t>(p) + fill) % kDirectBlock == 0) {
    std::memcpy(staging_.get() + staged_, p, fill);
    staged_ += fill;
    p += fill;
    n -= fill;
    if (staged_ > 0) flush_staging(staged_);
    const size_t whole = n / kDirectBlock * kDirectBlock;
    write_fd(p, whole);
    p += whole;
    n -= whole;
  }
  while (n > 0) {
    const size_t take = std::min(n, kStagingBytes - staged_);
    std::memcpy(staging_.get() + staged_, p, take);
    staged_ += take;
    p += take;
    n -= take;
    if (staged_ == kStagingBytes) flush_staging(kStagingBytes);
  }
}

void AtomicFile::commit() {
  ZDP_CHECK(fd_ >= 0 && !committed_, "commit of '{}' twice or after a failure", path_);
  if (staging_) {
    // The last partial block goes out padded with zeros; the file is then cut to its length.
    const size_t whole = (staged_ + kDirectBlock - 1) / kDirectBlock * kDirectBlock;
    std::memset(staging_.get() + staged_, 0, whole - staged_);
    staged_ = whole;
    flush_staging(whole);
    if (::ftruncate(fd_, static_cast<off_t>(bytes_written_)) != 0) fail("cutting to its length", errno);
    staging_.reset();
  }
  if (::fsync(fd_) != 0) fail("syncing", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(temp_path_.c_str());
    throw RuntimeFailure(
        fmt::format("closing '{}' (temporary '{}'): {}", path_, temp_path_, errno_text(err)));
  }
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp_path_.c_str());
    throw RuntimeFailure(fmt::format("renaming '{}' to '{}': {}", temp_path_, path_, errno_text(err)));
  }
  committed_ = true;
  // The rename is in the directory: sync it too, or a crash could forget the new name.
  sync_path(parent_dir(path_));
}

void sync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw RuntimeFailure(fmt::format("opening '{}' to sync it: {}", path, errno_text(err)));
  }
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some file systems cannot sync a directory (EINVAL); the renames in it have happened.
  if (rc != 0 && err != EINVAL) throw RuntimeFailure(fmt::format("syncing '{}': {}", path, errno_text(err)));
}

void write_file_atomic(const std::string& path, const void* data, size_t n) {
  AtomicFile f(path);
  f.write(data, n);
  f.commit();
}

namespace {

// Reads `fd` to its end into `out` and closes it. More than `max_bytes` (the file grew after its size
// was checked) is a UsageError naming `path`.
void read_to_end(int fd, const std::string& path, size_t max_bytes, std::string& out) {
  char buf[1 << 16];
  for (;;) {
    const ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw UsageError(fmt::format("cannot read '{}': {}", path, errno_text(err)));
    }
    if (r == 0) break;
    if (out.size() + static_cast<size_t>(r) > max_bytes) {
      ::close(fd);
      throw UsageError(fmt::format("'{}' is over the {} bytes allowed for this file (docs/limits.md)", path, max_bytes));
    }
    out.append(buf, static_cast<size_t>(r));
  }
  ::close(fd);
}

// Opens `path` for reading if it is a regular file; UsageError naming it otherwise. O_NONBLOCK:
// opening a FIFO for reading would otherwise wait for a writer, forever, before the regular-file
// check could refuse it; it changes nothing for a regular file.
int open_regular_file(const std::string& path, struct stat* st) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    throw UsageError(fmt::format("cannot open '{}': {}", path, errno_text(err)));
  }
  if (::fstat(fd, st) != 0) {
    const int err = errno;
    ::close(fd);
    throw UsageError(fmt::format("cannot examine '{}': {}", path, errno_text(err)));
  }
  if (!S_ISREG(st->st_mode)) {
    ::close(fd);
    throw UsageError(fmt::format("'{}' is not a regular file", path));
  }
  return fd;
}

}  // namespace

std::string read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw UsageError(fmt::format("cannot open '{}': {}", path, errno_text(err)));
  }
  std::string out;
  read_to_end(fd, path, std::numeric_limits<size_t>::max(), out);
  return out;
}

std::string read_small_file(const std::string& path, size_t max_bytes) {
  struct stat st;
  const int fd = open_regular_file(path, &st);
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    throw UsageError(fmt::format("'{}' is {} bytes, over the {} allowed for this file (docs/limits.md)", path,
                                 static_cast<uint64_t>(st.st_size), max_bytes));
  }
  std::string out;
  out.reserve(static_cast<size_t>(st.st_size));
  read_to_end(fd, path, max_bytes, out);
  return out;
}

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// ---- MappedFile -------------------------------------------------------------------------------

MappedFile::MappedFile(std::string path) : path_(std::move(path)) {
  struct stat st;
  const int fd = open_regular_file(path_, &st);
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      size_ = 0;
      throw UsageError(fmt::format("cannot map '{}' ({} bytes): {}", path_, st.st_size, errno_text(err)));
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping keeps the file alive
}

MappedFile::~MappedFile() { unmap(); }

MappedFile::MappedFile(MappedFile&& o) noexcept
    : path_(std::move(o.path_)), data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {
  o.path_.clear();
}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    unmap();
    path_ = std::move(o.path_);
    o.path_.clear();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

void MappedFile::unmap() noexcept {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace zerodp
