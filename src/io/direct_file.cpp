#include "io/direct_file.h"

#include <fcntl.h>
#include <liburing.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/log.h"

namespace zerodp::io {

namespace {

// A request is cut into pieces of this many bytes so that several are in flight at once (a deep
// queue is what an NVMe drive needs to reach its bandwidth).
constexpr size_t kPieceBytes = size_t{1} << 20;
constexpr unsigned kQueueDepth = 64;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Block = std::unique_ptr<char, FreeDeleter>;

Block aligned_block() {
  void* p = std::aligned_alloc(kIoBlock, kIoBlock);
  if (p == nullptr) throw RuntimeFailure("out of host memory for a direct-I/O bounce block");
  std::memset(p, 0, kIoBlock);
  return Block(static_cast<char*>(p));
}

bool uring_wanted() {
  const char* v = std::getenv("ZERODP_IO_URING");
  return v == nullptr || std::string(v) != "0";
}

}  // namespace

struct DirectFile::Impl {
  struct Piece {
    Ticket ticket;
    bool write;
    char* buf;
    size_t len;
    uint64_t off;
  };
  struct Request {
    size_t pending = 0;
    int error = 0;  // errno of the first failed piece
    std::vector<std::unique_ptr<Piece>> pieces;
    Block bounce;  // the partial last block
    char* tail_dst = nullptr;  // reads: where the bounce block's first tail_n bytes go
    size_t tail_n = 0;
  };

  std::string path;
  int fd = -1;
  uint64_t size = 0;
  bool direct = false;
  bool has_ring = false;
  io_uring ring{};
  IoStats stats;
  Ticket next = 1;
  std::unordered_map<Ticket, Request> requests;
  std::deque<Piece*> unsubmitted;  // pieces waiting for room in the submission queue
  unsigned in_ring = 0;  // pieces submitted and not yet completed

  // Synchronous fallback: the whole piece now.
  int run_sync(const Piece& p) {
    size_t done = 0;
    while (done < p.len) {
      const ssize_t n = p.write ? ::pwrite(fd, p.buf + done, p.len - done, static_cast<off_t>(p.off + done))
                                : ::pread(fd, p.buf + done, p.len - done, static_cast<off_t>(p.off + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno;
      if (n == 0) return EIO;  // a read past the end: the file is sized to hold every request
      done += static_cast<size_t>(n);
    }
    return 0;
  }

  void prep(Piece* p) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    if (p->write)
      io_uring_prep_write(sqe, fd, p->buf, static_cast<unsigned>(p->len), p->off);
    else
      io_uring_prep_read(sqe, fd, p->buf, static_cast<unsigned>(p->len), p->off);
    io_uring_sqe_set_data(sqe, p);
  }

  // Moves waiting pieces into the ring as far as it has room, and submits them.
  void submit() {
    unsigned added = 0;
    while (!unsubmitted.empty() && in_ring < kQueueDepth && io_uring_sq_space_left(&ring) > 0) {
      prep(unsubmitted.front());
      unsubmitted.pop_front();
      ++in_ring;
      ++added;
    }
    if (added == 0) return;
    int rc;
    do rc = io_uring_submit(&ring);
    while (rc == -EINTR);
    if (rc < 0) throw RuntimeFailure(fmt::format("io_uring submit on {}: {}", path, std::strerror(-rc)));
  }

  // Waits for one completion and accounts it; a short transfer is re-queued for its rest.
  void reap_one() {
    io_uring_cqe* cqe = nullptr;
    int rc;
    do rc = io_uring_wait_cqe(&ring, &cqe);
    while (rc == -EINTR);
    if (rc < 0) throw RuntimeFailure(fmt::format("io_uring wait on {}: {}", path, std::strerror(-rc)));
    Piece* p = static_cast<Piece*>(io_uring_cqe_get_data(cqe));
    const int res = cqe->res;
    io_uring_cqe_seen(&ring, cqe);
    --in_ring;
    Request& r = requests.at(p->ticket);
    if (res == -EAGAIN || res == -EINTR) {
      unsubmitted.push_back(p);
    } else if (res < 0 || (res == 0 && p->len > 0)) {
      if (r.error == 0) r.error = res < 0 ? -res : EIO;
      --r.pending;
    } else if (static_cast<size_t>(res) < p->len) {
      p->buf += res;
      p->off += static_cast<uint64_t>(res);
      p->len -= static_cast<size_t>(res);
      unsubmitted.push_back(p);
    } else {
      --r.pending;
    }
  }

  Ticket start(bool write, char* buf, size_t bytes, uint64_t offset) {
    ZDP_CHECK(offset % kIoBlock == 0 && reinterpret_cast<uintptr_t>(buf) % kIoBlock == 0,
              "direct I/O on {} at offset {} from a buffer {} aligned: both must be multiples of {}", path, offset,
              reinterpret_cast<uintptr_t>(buf) % kIoBlock == 0 ? "" : "not", kIoBlock);
    ZDP_CHECK(offset + align_up_block(bytes) <= size, "direct I/O of {} bytes at {} on {}, which holds {}", bytes,
              offset, path, size);
    const Ticket t = next++;
    Request& r = requests[t];
    const size_t body = bytes / kIoBlock * kIoBlock, tail = bytes - body;
    for (size_t at = 0; at < body; at += kPieceBytes)
      r.pieces.push_back(std::make_unique<Piece>(Piece{t, write, buf + at, std::min(kPieceBytes, body - at), offset + at}));
    if (tail > 0) {
      r.bounce = aligned_block();
      if (write) std::memcpy(r.bounce.get(), buf + body, tail);  // the rest of the block stays zero
      r.tail_dst = write ? nullptr : buf + body;
      r.tail_n = tail;
      r.pieces.push_back(std::make_unique<Piece>(Piece{t, write, r.bounce.get(), kIoBlock, offset + body}));
    }
    r.pending = r.pieces.size();
    (write ? stats.bytes_written : stats.bytes_read) += bytes;
    ++stats.requests;
    if (!has_ring) {
      for (auto& p : r.pieces) {
        const int e = run_sync(*p);
        if (e != 0 && r.error == 0) r.error = e;
        --r.pending;
      }
    } else {
      for (auto& p : r.pieces) unsubmitted.push_back(p.get());
      submit();
    }
    return t;
  }

  void finish(Ticket t) {
    auto it = requests.find(t);
    if (it == requests.end()) return;
    while (it->second.pending > 0) {
      submit();
      reap_one();
    }
    Request r = std::move(it->second);
    requests.erase(it);
    if (r.error != 0)
      throw RuntimeFailure(fmt::format("NVMe offload I/O on {} failed: {}", path, std::strerror(r.error)));
    if (r.tail_dst != nullptr) std::memcpy(r.tail_dst, r.bounce.get(), r.tail_n);
  }
};

DirectFile::DirectFile(const std::string& dir, const std::string& name, uint64_t bytes)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.path = dir + "/" + name;
  m.size = align_up_block(bytes);
  m.fd = ::open(m.path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_DIRECT | O_CLOEXEC, 0600);
  m.direct = m.fd >= 0;
  if (m.fd < 0 && errno == EINVAL) {
    // The file system has no direct I/O; the file may exist already (created before the refusal),
    // and it is ours: the exclusive create did not fail with EEXIST.
    m.fd = ::open(m.path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (m.fd >= 0)
      log::warn("{}: the file system refuses O_DIRECT; offload I/O goes through the page cache (a second copy "
                "in host memory that the ledger does not count)", dir);
  }
  if (m.fd < 0)
    throw RuntimeFailure(fmt::format("cannot create the offload file {}: {}", m.path, std::strerror(errno)));
  // Reserve the blocks now, so that a full disk is an error before training rather than in it.
  int rc = m.size > 0 ? ::posix_fallocate(m.fd, 0, static_cast<off_t>(m.size)) : 0;
  if (rc == EOPNOTSUPP || rc == EINVAL) rc = ::ftruncate(m.fd, static_cast<off_t>(m.size)) == 0 ? 0 : errno;
  const int unlinked = ::unlink(m.path.c_str()) == 0 ? 0 : errno;
  if (rc != 0 || unlinked != 0) {
    ::close(m.fd);
    throw RuntimeFailure(fmt::format("cannot {} the offload file {} ({} bytes): {}",
                                     rc != 0 ? "size" : "unlink", m.path, m.size, std::strerror(rc != 0 ? rc : unlinked)));
  }
  if (uring_wanted()) {
    const int e = io_uring_queue_init(kQueueDepth, &m.ring, 0);
    m.has_ring = e == 0;
    static bool said = false;  // once a process
    if (!m.has_ring && !std::exchange(said, true))
      log::warn("io_uring is not available ({}): offload I/O runs synchronously", std::strerror(-e));
  }
}

DirectFile::~DirectFile() {
  Impl& m = *impl_;
  // Every request is waited for, failed or not, before the buffers it names can be freed; then the
  // descriptor closes, and with it the nameless file's blocks.
  std::vector<Ticket> all;
  for (const auto& [t, r] : m.requests) all.push_back(t);
  for (Ticket t : all) {
    try {
      m.finish(t);
    } catch (const std::exception&) {
    }
  }
  if (m.has_ring) io_uring_queue_exit(&m.ring);
  ::close(m.fd);
}

DirectFile::Ticket DirectFile::read_async(void* buf, size_t bytes, uint64_t offset) {
  return impl_->start(false, static_cast<char*>(buf), bytes, offset);
}

DirectFile::Ticket DirectFile::write_async(const void* buf, size_t bytes, uint64_t offset) {
  // The bytes are only read; io_uring's write takes a non-const pointer.
  return impl_->start(true, const_cast<char*>(static_cast<const char*>(buf)), bytes, offset);
}

void DirectFile::wait(Ticket t) { impl_->finish(t); }

void DirectFile::wait_all() {
  std::vector<Ticket> all;
  for (const auto& [t, r] : impl_->requests) all.push_back(t);
  for (Ticket t : all) wait(t);
}

uint64_t DirectFile::size() const { return impl_->size; }
bool DirectFile::direct() const { return impl_->direct; }
bool DirectFile::uring() const { return impl_->has_ring; }
const IoStats& DirectFile::stats() const { return impl_->stats; }
const std::string& DirectFile::path() const { return impl_->path; }

}  // namespace zerodp::io
