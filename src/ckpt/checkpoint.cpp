#include "ckpt/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ckpt/crc32c.h"
#include "ckpt/safetensors.h"
#include "core/error.h"
#include "core/finite.h"
#include "core/json.h"

namespace zerodp::ckpt {

static_assert(std::endian::native == std::endian::little, "checkpoint files are little-endian");

namespace fs = std::filesystem;

namespace {

constexpr const char* kPartialPrefix = ".partial-";
constexpr const char* kDeletingPrefix = ".deleting-";
constexpr const char* kRankFileFormat = "zerodp-checkpoint-rank";

// `latest` and manifest.crc32c are one line each (docs/limits.md; the manifest's own limits are in
// manifest.h).
constexpr size_t kMaxPointerFileBytes = 4096;

std::string join(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::string strip_trailing_slashes(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

// Makes the directory's entries (a rename, a new file) durable.
void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    throw RuntimeFailure(fmt::format("opening directory '{}' to sync it: {}", dir, std::strerror(errno)));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && err != EINVAL)  // some file systems cannot sync a directory
    throw RuntimeFailure(fmt::format("syncing directory '{}': {}", dir, std::strerror(err)));
}

void remove_tree(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) throw RuntimeFailure(fmt::format("removing '{}': {}", path, ec.message()));
}

// The step of a "step-<n>" name (digits only), or -1.
int64_t parse_step_name(const std::string& name) {
  constexpr std::string_view prefix = "step-";
  if (name.size() <= prefix.size() || name.size() > prefix.size() + 18 || name.compare(0, prefix.size(), prefix) != 0)
    return -1;
  int64_t n = 0;
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    n = n * 10 + (name[i] - '0');
  }
  return checkpoint_dir_name(n) == name ? n : -1;  // no leading zeros: one name per step
}

// Renames `from` over the directory `to`: an atomic exchange when `to` exists (then `from` holds
// the old one, which is removed), a plain rename otherwise.
void publish_dir(const std::string& from, const std::string& to, const std::string& save_dir) {
  if (!fs::exists(to)) {
    if (::rename(from.c_str(), to.c_str()) != 0)
      throw RuntimeFailure(fmt::format("renaming '{}' to '{}': {}", from, to, std::strerror(errno)));
    return;
  }
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE) != 0) {
    // No exchange on this file system: move the old one aside first (a short window with neither).
    const std::string aside = join(save_dir, kDeletingPrefix + fs::path(to).filename().string());
    remove_tree(aside);
    if (::rename(to.c_str(), aside.c_str()) != 0 || ::rename(from.c_str(), to.c_str()) != 0)
      throw RuntimeFailure(fmt::format("replacing '{}' with '{}': {}", to, from, std::strerror(errno)));
    remove_tree(aside);
    return;
  }
  remove_tree(from);  // the old checkpoint, swapped out
}

}  // namespace

// ---- writing ----------------------------------------------------------------------------------

std::string partial_dir(const std::string& save_dir, int64_t step) {
  return join(save_dir, kPartialPrefix + checkpoint_dir_name(step));
}

void make_save_dir(const std::string& save_dir) {
  ZDP_REQUIRE(!save_dir.empty(), "the checkpoint directory (--save-dir) must not be empty");
  std::error_code ec;
  fs::create_directories(save_dir, ec);
  ZDP_REQUIRE(!ec, "cannot create the checkpoint directory '{}': {}", save_dir, ec.message());
  ZDP_REQUIRE(fs::is_directory(save_dir), "'{}' (--save-dir) is not a directory", save_dir);
}

void prepare_save(const std::string& save_dir, int64_t step) {
  make_save_dir(save_dir);
  std::error_code ec;
  const std::string partial = partial_dir(save_dir, step);
  remove_tree(partial);
  fs::create_directory(partial, ec);
  ZDP_REQUIRE(!ec, "cannot create '{}' in the checkpoint directory: {}", partial, ec.message());
}

RankFile write_rank_file(const std::string& dir, int rank, int world_size, int64_t step,
                         const std::vector<std::string>& states, const std::vector<RankPiece>& pieces,
                         const RankFileOptions& options) {
  std::vector<UnitRange> ranges;
  for (const RankPiece& p : pieces) ranges.push_back(p.range);
  return write_rank_file(dir, rank, world_size, step, states, ranges, [&pieces](const auto& write) {
    for (const RankPiece& p : pieces) write(p);
  }, options);
}

std::string rank_file_header(int rank, int world_size, int64_t step, const std::vector<std::string>& states,
                             const std::vector<UnitRange>& ranges) {
  std::vector<TensorSpec> specs;
  for (const UnitRange& r : ranges) {
    ZDP_CHECK(r.end > r.begin, "empty range of unit {} for rank {}", r.unit, rank);
    const size_t n = r.end - r.begin;
    specs.push_back({rank_tensor_name(r.unit, "weights"), DType::kF32, {static_cast<int64_t>(n)}});
    for (const std::string& name : states)
      specs.push_back({rank_tensor_name(r.unit, name), DType::kF32, {static_cast<int64_t>(n)}});
  }
  const Metadata meta{{"format", kRankFileFormat},
                      {"format_version", std::to_string(kCheckpointFormatVersion)},
                      {"rank", std::to_string(rank)},
                      {"world_size", std::to_string(world_size)},
                      {"step", std::to_string(step)}};
  return safetensors_header(specs, meta);
}

RankFile write_rank_file(const std::string& dir, int rank, int world_size, int64_t step,
                         const std::vector<std::string>& states, const std::vector<UnitRange>& ranges,
                         const RankPieceVisitor& visit, const RankFileOptions& options) {
  RankFile out;
  out.rank = rank;
  out.file = rank_file_name(rank);
  uint64_t data_bytes = 0;
  for (const UnitRange& r : ranges) {
    ZDP_CHECK(out.ranges.empty() || out.ranges.back().unit < r.unit, "pieces out of unit order");
    data_bytes += (r.end - r.begin) * sizeof(float) * (1 + states.size());
    out.ranges.push_back(r);
  }
  const std::string header = rank_file_header(rank, world_size, step, states, ranges);
  const uint64_t total = header.size() + data_bytes;

  // Around the page cache: a rank file is large, written once and read back only on a resume.
  AtomicFile file(join(dir, out.file), AtomicFile::Caching::kDirect);
  uint32_t crc = crc32c(header.data(), header.size());
  file.write(header);
  // Checksummed and written a MiB at a time (the checksum's reads leave it in cache for a staging copy),
  // the pieces ending where the file's MiB do: a source laid out as the file's blocks (zero/state_copy.h)
  // then goes to the disk straight from its memory in whole blocks.
  constexpr uint64_t kChunkBytes = uint64_t{1} << 20;
  auto write_array = [&](const float* ptr, size_t n, const UnitRange& range, const std::string& array) {
    for (size_t at = 0; at < n;) {
      if (options.kill_midway && file.bytes_written() >= total / 2) {
        file.flush();  // half the file on disk, as far as whole blocks go
        ::raise(SIGKILL);
      }
      const size_t to_mib = static_cast<size_t>((kChunkBytes - file.bytes_written() % kChunkBytes) / sizeof(float));
      const size_t count = std::min(to_mib, n - at);
      const float* from = options.chunks.acquire ? options.chunks.acquire(ptr + at, count) : ptr + at;
      const struct Release {
        const ChunkSource& chunks;
        ~Release() {
          if (chunks.release) chunks.release();  // also when the write fails
        }
      } release{options.chunks};
      // Checked a slice at a time right after its checksum, while the slice is in the L1 cache (a whole
      // chunk's second pass ran at a third of the checksum's speed, on a core the writer shares).
      constexpr size_t kSlice = 6144;  // floats: 24 KiB, two of the checksum's 3-stripe blocks
      for (size_t s = 0; s < count; s += kSlice) {
        const size_t len = std::min(kSlice, count - s);
        crc = crc32c_extend(crc, from + s, len * sizeof(float));
        if (!options.finite) continue;
        if (const size_t bad = s + first_nonfinite(from + s, len); bad < s + len)
          throw RuntimeFailure(fmt::format(
              "after step {}: {} at element {} of unit {} in {} (rank {}'s range {}..{}); "
              "a checkpoint must hold finite weights and states, not writing it",
              options.after_step, from[bad], range.begin + at + bad, range.unit, array, rank, range.begin, range.end));
      }
      file.write(from, count * sizeof(float));
      at += count;
    }
  };
  size_t next = 0;
  visit([&](const RankPiece& p) {
    ZDP_CHECK(next < ranges.size() && p.range.unit == ranges[next].unit && p.range.begin == ranges[next].begin &&
                  p.range.end == ranges[next].end && p.weights != nullptr && p.states.size() == states.size(),
              "bad piece of unit {} for rank {}", p.range.unit, rank);
    const size_t n = p.range.end - p.range.begin;
    write_array(p.weights, n, p.range, "the weights");
    for (size_t k = 0; k < p.states.size(); ++k)
      write_array(p.states[k], n, p.range, fmt::format("optimizer state '{}'", states[k]));
    ++next;
  });
  ZDP_CHECK(next == ranges.size(), "{} of the {} pieces of rank {}'s file were written", next, ranges.size(), rank);
  if (options.kill_midway) ::raise(SIGKILL);  // a file too small to stop half-way: stop before commit
  file.commit();
  out.bytes = total;
  out.crc32c = crc;
  return out;
}

std::string commit_checkpoint(const std::string& save_dir, const Manifest& m, int keep,
                              std::vector<std::string>* remove_later) {
  const std::string partial = partial_dir(save_dir, m.step);
  const std::string text = manifest_to_json(m).dump(2) + "\n";
  write_file_atomic(join(partial, kManifestFile), text);
  write_file_atomic(join(partial, kManifestChecksumFile),
                    fmt::format("{}  {}\n", crc_hex(crc32c(text.data(), text.size())), kManifestFile));
  fsync_dir(partial);

  const std::string name = checkpoint_dir_name(m.step);
  const std::string final_dir = join(save_dir, name);
  publish_dir(partial, final_dir, save_dir);
  fsync_dir(save_dir);
  write_file_atomic(join(save_dir, kLatestFile), name + "\n");

  // The newest `keep` up to this step stay; older ones go (renamed first, so that no half-removed
  // step-<n> is ever visible), and so do leftovers of crashed saves and removals.
  std::vector<int64_t> steps;
  std::vector<std::string> leftovers;
  for (const fs::directory_entry& e : fs::directory_iterator(save_dir)) {
    const std::string n = e.path().filename().string();
    if (!e.is_directory()) continue;
    const int64_t s = parse_step_name(n);
    if (s >= 0 && s <= m.step) steps.push_back(s);
    if (n.starts_with(kPartialPrefix) || n.starts_with(kDeletingPrefix)) leftovers.push_back(n);
  }
  std::sort(steps.rbegin(), steps.rend());
  for (size_t i = keep > 0 ? static_cast<size_t>(keep) : steps.size(); i < steps.size(); ++i) {
    const std::string old = join(save_dir, checkpoint_dir_name(steps[i]));
    const std::string aside = join(save_dir, kDeletingPrefix + checkpoint_dir_name(steps[i]));
    remove_tree(aside);
    if (::rename(old.c_str(), aside.c_str()) != 0)
      throw RuntimeFailure(fmt::format("renaming '{}' to '{}': {}", old, aside, std::strerror(errno)));
    leftovers.push_back(fs::path(aside).filename().string());
  }
  if (!leftovers.empty()) fsync_dir(save_dir);
  for (const std::string& n : leftovers) {
    if (remove_later) {
      remove_later->push_back(join(save_dir, n));
    } else {
      remove_tree(join(save_dir, n));
    }
  }
  return final_dir;
}

void remove_dirs(const std::vector<std::string>& dirs) {
  for (const std::string& d : dirs) remove_tree(d);
}

// ---- reading ----------------------------------------------------------------------------------

std::string resolve_checkpoint(const std::string& path_in) {
  ZDP_REQUIRE(!path_in.empty(), "the checkpoint path is empty");
  const std::string path = strip_trailing_slashes(path_in);
  if (file_exists(join(path, kManifestFile))) return path;
  // The `latest` pointer file itself stands for the checkpoint it names.
  std::error_code pec;
  if (fs::path(path).filename() == kLatestFile && fs::is_regular_file(path, pec))
    return resolve_checkpoint(fs::path(path).parent_path().empty() ? std::string(".")
                                                                   : fs::path(path).parent_path().string());
  const std::string latest = join(path, kLatestFile);
  if (file_exists(latest)) {
    std::string name = read_small_file(latest, kMaxPointerFileBytes);
    while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' ')) name.pop_back();
    ZDP_REQUIRE(parse_step_name(name) >= 0, "'{}': must name a checkpoint directory such as 'step-6', got '{}'",
                latest, describe_text(name));
    const std::string dir = join(path, name);
    ZDP_REQUIRE(file_exists(join(dir, kManifestFile)), "'{}' names '{}', but '{}' is missing", latest, name,
                join(dir, kManifestFile));
    return dir;
  }
  std::error_code ec;
  ZDP_REQUIRE(fs::exists(path, ec), "'{}': no such checkpoint or save directory", path);
  ZDP_REQUIRE(!fs::is_directory(path, ec), "'{}' is not a checkpoint: it holds neither {} nor a '{}' pointer", path,
              kManifestFile, kLatestFile);
  throw UsageError(fmt::format("'{}' is not a checkpoint directory (a checkpoint is a directory holding {})", path,
                               kManifestFile));
}

// Files are read with pread() rather than through a mapping: a process that verifies or
// consolidates a checkpoint then holds no more of it in memory than its own buffers.
struct Checkpoint::Impl {
  std::string dir;
  Manifest manifest;
  std::unique_ptr<model::ParamLayout> layout;
  std::vector<int> fds;  // by rank
  // One rank's range of a unit: where its arrays lie in the rank's file.
  struct Piece {
    size_t begin, end;
    int rank;
    std::vector<uint64_t> arrays;  // file offsets: [0] weights, [1 + k] state k
  };
  std::vector<std::vector<Piece>> units;  // per unit, sorted by begin, tiling the unit

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() {
    for (int fd : fds)
      if (fd >= 0) ::close(fd);
  }

  std::string file_path(int r) const { return join(dir, manifest.ranks.at(static_cast<size_t>(r)).file); }

  // Reads n bytes at `offset` of rank r's file; its size was checked, so a short read is an error.
  void read_at(int r, uint64_t offset, void* dst, size_t n) const {
    char* p = static_cast<char*>(dst);
    while (n > 0) {
      const ssize_t got = ::pread(fds[static_cast<size_t>(r)], p, n, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0)
        throw RuntimeFailure(fmt::format("reading '{}' at byte {}: {}", file_path(r), offset,
                                         got == 0 ? "unexpected end of file" : std::strerror(errno)));
      p += got;
      n -= static_cast<size_t>(got);
      offset += static_cast<uint64_t>(got);
    }
  }

  std::string checksum_error(int r) const {
    const uint64_t size = manifest.ranks[static_cast<size_t>(r)].bytes;
    std::vector<uint8_t> chunk(std::min<uint64_t>(size, uint64_t{1} << 20));  // I/O scratch
    uint32_t got = 0;
    for (uint64_t at = 0; at < size; at += chunk.size()) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk.size(), size - at));
      read_at(r, at, chunk.data(), n);
      got = crc32c_extend(got, chunk.data(), n);
    }
    const uint32_t want = manifest.ranks[static_cast<size_t>(r)].crc32c;
    if (got == want) return {};
    return fmt::format("'{}': checksum mismatch: its CRC-32C is {}, the manifest says {}: the file is corrupt",
                       file_path(r), crc_hex(got), crc_hex(want));
  }

  void load_manifest() {
    const std::string mpath = join(dir, kManifestFile);
    const std::string cpath = join(dir, kManifestChecksumFile);
    const std::string text = read_small_file(mpath, kMaxManifestBytes);
    ZDP_REQUIRE(file_exists(cpath), "'{}' is missing (every checkpoint holds its manifest's CRC-32C)", cpath);
    const std::string sum = read_small_file(cpath, kMaxPointerFileBytes);
    const std::string expected_tail = fmt::format("  {}", kManifestFile);
    std::string line = sum;
    if (!line.empty() && line.back() == '\n') line.pop_back();
    ZDP_REQUIRE(line.size() == 8 + expected_tail.size() && line.compare(8, std::string::npos, expected_tail) == 0,
                "'{}': malformed: expected '<8 hex digits>{}', got '{}'", cpath, expected_tail, describe_text(line));
    const uint32_t want = parse_crc_hex(line.substr(0, 8), cpath);
    const uint32_t got = crc32c(text.data(), text.size());
    ZDP_REQUIRE(got == want, "'{}': checksum mismatch: its CRC-32C is {}, {} says {}: the manifest is corrupt", mpath,
                crc_hex(got), kManifestChecksumFile, crc_hex(want));
    manifest = parse_manifest(text, mpath);
    layout = std::make_unique<model::ParamLayout>(manifest.model);
  }

  // Everything about rank r's file but (unless asked) its checksum; records its pieces.
  void load_file(int r, bool verify) {
    const RankFile& rf = manifest.ranks[static_cast<size_t>(r)];
    const std::string path = file_path(r);
    ZDP_REQUIRE(file_exists(path), "'{}' is missing: the manifest lists it as rank {}'s file", path, r);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ZDP_REQUIRE(fd >= 0, "cannot open '{}': {}", path, std::strerror(errno));
    fds.push_back(fd);
    // Mapped only to parse its header (the data pages are never touched through the mapping).
    const MappedFile f(path);
    ZDP_REQUIRE(f.size() == rf.bytes, "'{}': {} bytes, the manifest says {}: the file is {}", path, f.size(), rf.bytes,
                f.size() < rf.bytes ? "truncated" : "too long");
    if (verify) {
      const std::string err = checksum_error(r);
      if (!err.empty()) throw UsageError(err);
    }
    const SafetensorsReader st = SafetensorsReader::parse(f.data(), f.size(), path);
    auto meta = [&](const char* key) {
      const auto it = st.metadata().find(key);
      return it == st.metadata().end() ? std::string("(none)") : it->second;
    };
    const std::pair<const char*, std::string> expect[] = {
        {"format", kRankFileFormat},
        {"format_version", std::to_string(kCheckpointFormatVersion)},
        {"rank", std::to_string(r)},
        {"world_size", std::to_string(manifest.world_size)},
        {"step", std::to_string(manifest.step)}};
    for (const auto& [key, want] : expect)
      ZDP_REQUIRE(meta(key) == want, "'{}': __metadata__ '{}' is '{}', expected '{}' (a file of another checkpoint?)",
                  path, key, describe_text(meta(key)), want);
    const size_t per_range = 1 + manifest.states.size();
    ZDP_REQUIRE(st.tensors().size() == rf.ranges.size() * per_range,
                "'{}': holds {} arrays, the manifest's ranges need {}", path, st.tensors().size(),
                rf.ranges.size() * per_range);
    for (const UnitRange& range : rf.ranges) {
      Piece piece{range.begin, range.end, r, {}};
      const size_t n = range.end - range.begin;
      for (size_t k = 0; k < per_range; ++k) {
        const std::string name = rank_tensor_name(range.unit, k == 0 ? "weights" : manifest.states[k - 1]);
        const TensorEntry* t = st.find(name);
        ZDP_REQUIRE(t != nullptr, "'{}': array '{}' is missing", path, name);
        ZDP_REQUIRE(t->dtype == DType::kF32 && t->shape == Shape{static_cast<int64_t>(n)},
                    "'{}': array '{}' is {} {}, expected F32 [{}] (unit {} elements [{}, {}))", path, name,
                    dtype_safetensors_name(t->dtype), shape_str(t->shape), n, range.unit, range.begin, range.end);
        piece.arrays.push_back(static_cast<uint64_t>(t->data - f.data()));
      }
      units[static_cast<size_t>(range.unit)].push_back(std::move(piece));
    }
  }
};

Checkpoint::Checkpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Checkpoint::Checkpoint(Checkpoint&&) noexcept = default;
Checkpoint& Checkpoint::operator=(Checkpoint&&) noexcept = default;
Checkpoint::~Checkpoint() = default;

Checkpoint Checkpoint::open(const std::string& path, const VerifyFilter& verify, const FileFilter& files) {
  auto impl = std::make_unique<Impl>();
  impl->dir = resolve_checkpoint(path);
  impl->load_manifest();
  impl->units.resize(static_cast<size_t>(impl->layout->num_units()));
  for (int r = 0; r < impl->manifest.world_size; ++r) {
    if (files && !files(impl->manifest, r)) {
      impl->fds.push_back(-1);  // not opened
      continue;
    }
    impl->load_file(r, !verify || verify(r));
  }
  for (auto& pieces : impl->units)
    std::sort(pieces.begin(), pieces.end(), [](const Impl::Piece& a, const Impl::Piece& b) { return a.begin < b.begin; });
  return Checkpoint(std::move(impl));
}

const std::string& Checkpoint::dir() const { return impl_->dir; }
const Manifest& Checkpoint::manifest() const { return impl_->manifest; }
const model::ParamLayout& Checkpoint::layout() const { return *impl_->layout; }
std::string Checkpoint::file_path(int rank) const { return impl_->file_path(rank); }
std::string Checkpoint::verify_file(int rank) const { return impl_->checksum_error(rank); }

void Checkpoint::read(int state, int unit, size_t begin, size_t count, float* dst) const {
  const Impl& m = *impl_;
  ZDP_CHECK(state >= -1 && state < static_cast<int>(m.manifest.states.size()), "no state {} in the checkpoint", state);
  ZDP_CHECK(unit >= 0 && unit < m.layout->num_units(), "no unit {} in the checkpoint", unit);
  ZDP_CHECK(begin + count <= m.layout->unit_numel(unit), "elements [{}, {}) outside unit {} ({} elements)", begin,
            begin + count, unit, m.layout->unit_numel(unit));
  if (count == 0) return;
  const auto& pieces = m.units[static_cast<size_t>(unit)];
  // The piece holding `begin`: the last one starting at or before it (the pieces of the files opened
  // tile the unit; a gap is a file Checkpoint::open's filter left closed).
  auto it = std::upper_bound(pieces.begin(), pieces.end(), begin,
                             [](size_t b, const Impl::Piece& p) { return b < p.begin; });
  if (it != pieces.begin()) --it;
  const size_t a = static_cast<size_t>(state + 1);
  while (count > 0) {
    ZDP_CHECK(it != pieces.end() && it->begin <= begin && begin < it->end,
              "unit {} element {} is in a rank file of '{}' this process did not open", unit, begin, m.dir);
    const size_t n = std::min(count, it->end - begin);
    m.read_at(it->rank, it->arrays[a] + (begin - it->begin) * sizeof(float), dst, n * sizeof(float));
    dst += n;
    begin += n;
    count -= n;
    ++it;
  }
}

}  // namespace zerodp::ckpt
