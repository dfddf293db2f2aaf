#include "data/dataset.h"

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"

namespace zerodp::data {

namespace {

bool is_regular(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool has_glob_chars(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

void require_few_enough(const std::string& spec, size_t n) {
  ZDP_REQUIRE(n <= kMaxShards, "'{}': {} token files match, over the {} allowed in one stream", spec, n, kMaxShards);
}

}  // namespace

std::vector<std::string> match_token_files(const std::string& spec) {
  ZDP_REQUIRE(!spec.empty(), "an empty path names no token file");
  if (is_regular(spec)) return {spec};
  std::vector<std::string> files;
  if (is_directory(spec)) {
    std::error_code ec;
    for (std::filesystem::directory_iterator it(spec, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.size() > 4 && name.compare(name.size() - 4, 4, ".bin") == 0 && is_regular(it->path().string()))
        files.push_back(it->path().string());
      require_few_enough(spec, files.size());
    }
    ZDP_REQUIRE(!ec, "'{}': cannot list the directory: {}", spec, ec.message());
    ZDP_REQUIRE(!files.empty(), "'{}': the directory holds no *.bin token file", spec);
  } else if (has_glob_chars(spec)) {
    glob_t g{};
    const int rc = ::glob(spec.c_str(), 0, nullptr, &g);
    if (rc == 0)
      for (size_t i = 0; i < g.gl_pathc; ++i)
        if (is_regular(g.gl_pathv[i])) files.emplace_back(g.gl_pathv[i]);
    ::globfree(&g);
    ZDP_REQUIRE(rc == 0 || rc == GLOB_NOMATCH, "'{}': the pattern could not be expanded (glob error {})", spec, rc);
    ZDP_REQUIRE(!files.empty(), "'{}': no token file matches the pattern", spec);
    require_few_enough(spec, files.size());
  } else {
    return {spec};  // missing, or not a regular file: TokenFile::open says which
  }
  std::sort(files.begin(), files.end());  // byte-wise, whatever the locale
  return files;
}

TokenStream TokenStream::open(const std::string& spec, int vocab_size) {
  std::vector<TokenFile> shards;
  for (const std::string& f : match_token_files(spec)) shards.push_back(TokenFile::open(f, vocab_size));
  return TokenStream(std::move(shards), spec);
}

TokenStream::TokenStream(std::vector<TokenFile> shards, std::string spec)
    : shards_(std::move(shards)), spec_(std::move(spec)) {
  ZDP_CHECK(!shards_.empty(), "a token stream of no file");
  if (spec_.empty()) spec_ = shards_.front().path();
  starts_.reserve(shards_.size() + 1);
  uint64_t at = 0;
  for (const TokenFile& f : shards_) {
    ZDP_CHECK(f.size() > 0, "token file '{}' is empty", f.path());
    starts_.push_back(at);
    at += f.size();
  }
  starts_.push_back(at);
}

std::string TokenStream::describe() const {
  if (shards_.size() == 1 && shards_.front().path() == spec_) return fmt::format("'{}'", spec_);
  return fmt::format("'{}' ({} file{})", spec_, shards_.size(), shards_.size() == 1 ? "" : "s");
}

size_t TokenStream::shard_of(uint64_t pos) const {
  // The last shard starting at or before pos.
  return static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end() - 1, pos) - starts_.begin()) - 1;
}

uint32_t TokenStream::at(uint64_t pos) const {
  ZDP_CHECK(pos < size(), "position {} of a stream of {} tokens", pos, size());
  const size_t i = shard_of(pos);
  return shards_[i][static_cast<size_t>(pos - starts_[i])];
}

void TokenStream::read(uint64_t pos, size_t n, int32_t* dst) const {
  ZDP_CHECK(!shards_.empty(), "reading an empty token stream");
  pos %= size();
  size_t i = shard_of(pos);
  size_t in_shard = static_cast<size_t>(pos - starts_[i]);
  while (n > 0) {
    const size_t run = std::min(n, shards_[i].size() - in_shard);
    shards_[i].copy(in_shard, run, dst);
    dst += run;
    n -= run;
    // Either done, or at the end of shard i: the next run starts the next shard (the first one
    // after the last: positions wrap around the stream).
    in_shard = 0;
    if (++i == shards_.size()) i = 0;
  }
}

}  // namespace zerodp::data
