// The disk's bandwidth with O_DIRECT, measured raw and through zerodp's offload file, in one run on
// one file system:
//
//   raw pwrite/pread   one thread, 8 MiB blocks, one at a time (what `dd oflag=direct` measures)
//   raw io_uring       64 requests of 1 MiB in flight (the disk's queue kept full; liburing directly)
//   zerodp pattern     io::DirectFile driven as the NVMe optimizer offload drives it: the states of
//                      `groups` sub-groups read and written back through `slots` host slots (read of
//                      sub-group g+B-1 queued once g-1's write is done), with no update in between
//
// usage: direct_io_bench DIR [MiB per pass, default 1024] [sub-group MiB, default 64] [slots, default 4]
// Prints one JSON object: MB/s (10^6 bytes a second) of each, best of 3 passes.
#include <fcntl.h>
#include <liburing.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "io/direct_file.h"

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

char* aligned(size_t bytes) {
  char* p = static_cast<char*>(std::aligned_alloc(4096, bytes));
  if (p == nullptr) std::exit(1);
  for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<char>(i * 131 + 7);  // not zeros: no shortcuts
  return p;
}

int open_direct(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0600);
  if (fd < 0) {
    std::perror(path.c_str());
    std::exit(1);
  }
  ::unlink(path.c_str());
  return fd;
}

// One thread, one 8 MiB request at a time.
std::pair<double, double> raw_sync(const std::string& dir, size_t total) {
  const size_t block = size_t{8} << 20;
  char* buf = aligned(block);
  const int fd = open_direct(dir + "/raw-sync.bin");
  if (::posix_fallocate(fd, 0, static_cast<off_t>(total)) != 0) std::exit(1);
  auto t = Clock::now();
  for (size_t at = 0; at < total; at += block)
    if (::pwrite(fd, buf, block, static_cast<off_t>(at)) != static_cast<ssize_t>(block)) std::exit(1);
  ::fdatasync(fd);
  const double w = total / seconds_since(t) / 1e6;
  t = Clock::now();
  for (size_t at = 0; at < total; at += block)
    if (::pread(fd, buf, block, static_cast<off_t>(at)) != static_cast<ssize_t>(block)) std::exit(1);
  const double r = total / seconds_since(t) / 1e6;
  ::close(fd);
  std::free(buf);
  return {w, r};
}

// 64 requests of 1 MiB in flight, straight through liburing.
std::pair<double, double> raw_uring(const std::string& dir, size_t total) {
  const size_t piece = size_t{1} << 20;
  const unsigned depth = 64;
  char* buf = aligned(piece * depth);
  const int fd = open_direct(dir + "/raw-uring.bin");
  if (::posix_fallocate(fd, 0, static_cast<off_t>(total)) != 0) std::exit(1);
  io_uring ring;
  if (io_uring_queue_init(depth, &ring, 0) != 0) return {0, 0};
  auto pass = [&](bool write) {
    const auto t = Clock::now();
    size_t next = 0, done = 0;
    unsigned inflight = 0;
    while (done < total) {
      while (inflight < depth && next < total) {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring);
        char* b = buf + (next / piece % depth) * piece;
        if (write)
          io_uring_prep_write(sqe, fd, b, piece, next);
        else
          io_uring_prep_read(sqe, fd, b, piece, next);
        next += piece;
        ++inflight;
      }
      io_uring_submit(&ring);
      io_uring_cqe* cqe;
      io_uring_wait_cqe(&ring, &cqe);
      if (cqe->res != static_cast<int>(piece)) std::exit(2);  // short I/O does not happen on a plain file
      io_uring_cqe_seen(&ring, cqe);
      --inflight;
      done += piece;
    }
    if (write) ::fdatasync(fd);
    return total / seconds_since(t) / 1e6;
  };
  const double w = pass(true), r = pass(false);
  io_uring_queue_exit(&ring);
  ::close(fd);
  std::free(buf);
  return {w, r};
}

// The offload's access pattern through io::DirectFile: read and write back every sub-group once.
double zerodp_pattern(const std::string& dir, size_t total, size_t sub, int slots) {
  const size_t groups = total / sub;
  zerodp::io::DirectFile file(dir, "rank0-bench", total);
  std::vector<char*> slot(slots);
  for (auto& s : slot) s = aligned(sub);
  for (size_t g = 0; g < groups; ++g) file.write(slot[0], sub, g * sub);  // the file's first contents
  std::vector<std::vector<zerodp::io::DirectFile::Ticket>> pending(slots);
  auto wait = [&](int s) {
    for (auto t : pending[s]) file.wait(t);
    pending[s].clear();
  };
  auto read = [&](size_t g) {
    const int s = static_cast<int>(g % slots);
    wait(s);
    pending[s].push_back(file.read_async(slot[s], sub, g * sub));
  };
  const auto t = Clock::now();
  for (size_t g = 0; g + 1 < static_cast<size_t>(slots) && g < groups; ++g) read(g);
  for (size_t g = 0; g < groups; ++g) {
    const int s = static_cast<int>(g % slots);
    if (slots == 1) read(g);
    wait(s);
    pending[s].push_back(file.write_async(slot[s], sub, g * sub));
    if (slots >= 2 && g + slots - 1 < groups) read(g + slots - 1);
  }
  for (int s = 0; s < slots; ++s) wait(s);
  const double secs = seconds_since(t);
  for (auto s : slot) std::free(s);
  return 2.0 * groups * sub / secs / 1e6;  // every byte read once and written once
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR [MiB per pass] [sub-group MiB] [slots]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const size_t total = (argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1024) << 20;
  const size_t sub = (argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 64) << 20;
  const int slots = argc > 4 ? std::atoi(argv[4]) : 4;
  double sw = 0, sr = 0, uw = 0, ur = 0, zp = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const auto [a, b] = raw_sync(dir, total);
    const auto [c, d] = raw_uring(dir, total);
    sw = std::max(sw, a), sr = std::max(sr, b), uw = std::max(uw, c), ur = std::max(ur, d);
    zp = std::max(zp, zerodp_pattern(dir, total, sub, slots));
  }
  // The pattern moves as many bytes each way: the raw figure to hold it against is the best raw
  // path's time for one write and one read of the same bytes.
  const double best_w = std::max(sw, uw), best_r = std::max(sr, ur);
  const double raw_mixed = 2.0 / (1.0 / best_w + 1.0 / best_r);
  std::printf("{\"bytes_per_pass\":%zu,\"sub_group_bytes\":%zu,\"slots\":%d,"
              "\"raw_sync_write_MBps\":%.1f,\"raw_sync_read_MBps\":%.1f,"
              "\"raw_uring_write_MBps\":%.1f,\"raw_uring_read_MBps\":%.1f,"
              "\"raw_read_write_MBps\":%.1f,\"zerodp_pattern_MBps\":%.1f,\"fraction\":%.3f}\n",
              total, sub, slots, sw, sr, uw, ur, raw_mixed, zp, zp / raw_mixed);
  return 0;
}
