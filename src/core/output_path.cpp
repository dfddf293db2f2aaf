#include "core/output_path.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include <fmt/format.h>

#include "core/error.h"
#include "core/fs.h"

namespace zerodp {

namespace {

enum class Node { kMissing, kFile, kDirectory, kOther };

Node node_at(const std::string& path, std::string_view flag, const std::string& given) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Node::kDirectory;
    return S_ISREG(st.st_mode) ? Node::kFile : Node::kOther;
  }
  if (errno == ENOENT) return Node::kMissing;
  if (errno == ENOTDIR) {
    throw UsageError(fmt::format("{} '{}': a part of the path before '{}' is a file, not a directory", flag, given,
                                 path));
  }
  throw UsageError(fmt::format("{} '{}': cannot examine '{}': {}", flag, given, path, std::strerror(errno)));
}

// The parent of an output that must exist: a directory, or a clear error.
std::string existing_parent(const std::string& path, std::string_view flag, const std::string& given) {
  const std::string parent = parent_dir(path);
  switch (node_at(parent, flag, given)) {
    case Node::kDirectory: return parent;
    case Node::kMissing:
      throw UsageError(fmt::format("{} '{}': the directory '{}' does not exist", flag, given, parent));
    default: throw UsageError(fmt::format("{} '{}': '{}' is not a directory", flag, given, parent));
  }
}

}  // namespace

void probe_directory(const std::string& dir, std::string_view flag, const std::string& path) {
  // A name no other process probing the same directory (another rank, another host on a shared
  // file system) picks at the same moment.
  std::random_device entropy;
  const std::string probe =
      fmt::format("{}/.zerodp-probe-{}-{:08x}{:08x}", dir, static_cast<long>(::getpid()), entropy(), entropy());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    throw UsageError(fmt::format("{} '{}': cannot write in '{}': {}", flag, path, dir, std::strerror(errno)));
  ::close(fd);
  ::unlink(probe.c_str());
}

void check_output_path(const std::string& given, OutputKind kind, std::string_view flag) {
  if (given.empty()) return;
  switch (kind) {
    case OutputKind::kFile: {
      if (given.back() == '/')
        throw UsageError(fmt::format("{} '{}': names a directory (it ends in '/'); a file is written there", flag,
                                     given));
      const Node node = node_at(given, flag, given);
      if (node == Node::kDirectory)
        throw UsageError(fmt::format("{} '{}': is a directory; a file is written there", flag, given));
      if (node == Node::kOther)
        throw UsageError(fmt::format("{} '{}': exists and is not a regular file (a FIFO, socket or device)", flag,
                                     given));
      probe_directory(existing_parent(given, flag, given), flag, given);
      return;
    }
    case OutputKind::kDirectory:
    case OutputKind::kDirectoryTree:
    case OutputKind::kExistingDirectory: {
      const std::string dir = without_trailing_slashes(given);
      const Node node = node_at(dir, flag, given);
      if (node == Node::kDirectory) return probe_directory(dir, flag, given);
      if (node != Node::kMissing)
        throw UsageError(fmt::format("{} '{}': exists and is not a directory", flag, given));
      if (kind == OutputKind::kExistingDirectory)
        throw UsageError(fmt::format("{} '{}': not a directory (it does not exist)", flag, given));
      if (kind == OutputKind::kDirectory) return probe_directory(existing_parent(dir, flag, given), flag, given);
      // mkdir -p: the nearest level that exists must be a directory that takes a new entry.
      std::string up = parent_dir(dir);
      for (;;) {
        const Node n = node_at(up, flag, given);
        if (n == Node::kDirectory) return probe_directory(up, flag, given);
        if (n != Node::kMissing) throw UsageError(fmt::format("{} '{}': '{}' is not a directory", flag, given, up));
        up = parent_dir(up);
      }
    }
    case OutputKind::kPrefix: {
      probe_directory(existing_parent(given, flag, given), flag, given);
      return;
    }
  }
}

}  // namespace zerodp
