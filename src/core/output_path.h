// Outputs proven writable before a run does any work: a run that trains for hours and only then finds
// that its --out directory does not exist, or sits on a read-only mount, has lost those hours. Each
// command resolves every path it will write and calls check_output_path() for it before it reads a
// token or runs a step.
//
// The check does what the write will do, in the directory the bytes will land in: it creates and
// removes a probe file there (permission bits alone do not tell: root ignores them, a read-only mount
// or a full inode table refuses anyway). It also refuses a path whose kind is wrong (a directory where
// a file goes, a file where a directory goes, a FIFO or a device) and a missing parent directory.
#pragma once

#include <string>
#include <string_view>

namespace zerodp {

enum class OutputKind {
  // A file written whole beside itself and renamed over (AtomicFile, or <path>.partial then renamed):
  // its parent must exist and take a new file; an existing path must be a regular file.
  kFile,
  // A directory that files are written into, created when missing: an existing path must be a
  // directory that takes a new file; a missing one needs its parent to exist and take a new entry.
  kDirectory,
  // The same, with any missing levels created (mkdir -p): the nearest existing ancestor is probed.
  kDirectoryTree,
  // A directory that must exist already and take new files (--nvme-path).
  kExistingDirectory,
  // Files named "<path>..." (tokenize's --out-prefix): the directory part must exist and take files.
  kPrefix,
};

// UsageError, naming `flag` and the path, when `path` cannot be written as `kind`. An empty path is
// no output: nothing to check.
void check_output_path(const std::string& path, OutputKind kind, std::string_view flag);

// Creates and removes an empty file in `dir`: UsageError "<flag> '<path>': cannot write in <dir>: <reason>"
// when the system refuses. `path` is what the user gave, for the message.
void probe_directory(const std::string& dir, std::string_view flag, const std::string& path);

}  // namespace zerodp
