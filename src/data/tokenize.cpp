#include "data/tokenize.h"

#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "core/error.h"
#include "core/fs.h"
#include "core/json.h"
#include "data/bpe.h"
#include "data/token_writer.h"
#include "data/tokens.h"

namespace zerodp::data {

size_t tokenize_bytes(const std::string& text_path, const std::string& out_path) {
  const MappedFile text(text_path);
  ZDP_REQUIRE(text.size() > 0, "text file '{}' is empty: nothing to tokenize", text_path);
  AtomicFile out(out_path);
  out.write(llmc_header(text.size()));
  constexpr size_t kChunk = 1 << 15;
  uint16_t tokens[kChunk];
  for (size_t done = 0; done < text.size();) {
    const size_t n = std::min(kChunk, text.size() - done);
    for (size_t i = 0; i < n; ++i) tokens[i] = text.data()[done + i];  // little-endian in memory
    out.write(tokens, n * sizeof(uint16_t));
    done += n;
  }
  out.commit();
  return text.size();
}

namespace {

using Clock = std::chrono::steady_clock;

bool is_jsonl(const std::string& path) { return path.size() > 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0; }

// A unit of work: a range of chunks of a text document, or a range of lines of a JSON Lines file.
struct Item {
  size_t input = 0;
  bool jsonl = false;
  size_t begin = 0, end = 0;  // text: chunk indices into the input's chunks; jsonl: byte range of whole lines
  size_t first_line = 0;      // jsonl: the line number (1-based) at `begin`
  bool eos_first = false;     // text: the document starts here
  bool doc_last = false;      // text: the document ends here
};

struct Input {
  std::string path;
  MappedFile file;
  std::string_view text() const {
    return {reinterpret_cast<const char*>(file.data()), file.size()};
  }
  std::vector<TextChunk> chunks;  // text files
};

// Splits each input into items of about chunk_bytes.
void plan(const Tokenizer& tok, std::vector<Input>& inputs, size_t chunk_bytes, std::vector<Item>& items) {
  const auto* bpe = dynamic_cast<const BpeTokenizer*>(&tok);
  for (size_t k = 0; k < inputs.size(); ++k) {
    Input& in = inputs[k];
    const std::string_view text = in.text();
    if (is_jsonl(in.path)) {
      size_t line = 1, b = 0;
      while (b < text.size()) {
        size_t e = std::min(text.size(), b + chunk_bytes);
        const size_t nl = text.find('\n', e == 0 ? 0 : e - 1);
        e = nl == std::string_view::npos ? text.size() : nl + 1;
        items.push_back({k, true, b, e, line, false});
        line += static_cast<size_t>(std::count(text.begin() + b, text.begin() + e, '\n'));
        b = e;
      }
      continue;
    }
    if (bpe) {
      bpe->chunk(text, chunk_bytes, in.chunks);
    } else {  // bytes: any cut will do
      for (size_t b = 0; b < text.size(); b += chunk_bytes)
        in.chunks.push_back({TextChunk::kText, b, std::min(text.size(), b + chunk_bytes), 0, text.size()});
    }
    if (in.chunks.empty()) {  // an empty document: its end-of-text token only
      items.push_back({k, false, 0, 0, 0, true, true});
      continue;
    }
    // Consecutive chunks grouped to about chunk_bytes (added tokens are chunks of their own).
    size_t c = 0;
    bool first = true;
    while (c < in.chunks.size()) {
      size_t bytes = 0, e = c;
      while (e < in.chunks.size() && (e == c || bytes + (in.chunks[e].end - in.chunks[e].begin) <= chunk_bytes)) {
        bytes += in.chunks[e].end - in.chunks[e].begin;
        ++e;
      }
      items.push_back({k, false, c, e, 0, first, e == in.chunks.size()});
      first = false;
      c = e;
    }
  }
}

struct ItemResult {
  std::vector<uint32_t> ids;
  size_t bytes = 0, documents = 0;
  std::exception_ptr error;
};

void encode_item(const Tokenizer& tok, const std::vector<Input>& inputs, const Item& it, bool eos, ItemResult& r) {
  const Input& in = inputs[it.input];
  const std::string_view text = in.text();
  const auto* bpe = dynamic_cast<const BpeTokenizer*>(&tok);
  std::vector<uint32_t> before, after;  // around each document (tokenizer.h: document_tokens)
  if (eos) tok.document_tokens(before, after);
  if (!it.jsonl) {
    r.ids.reserve((in.chunks.empty() || it.end == it.begin ? 0 : in.chunks[it.end - 1].end - in.chunks[it.begin].begin) / 2 + 16);
    if (it.eos_first) {
      r.documents = 1;
      r.ids.insert(r.ids.end(), before.begin(), before.end());
    }
    for (size_t c = it.begin; c < it.end; ++c) {
      const TextChunk& ch = in.chunks[c];
      if (bpe) bpe->encode_chunk(text, ch, r.ids);
      else tok.encode(text.substr(ch.begin, ch.end - ch.begin), r.ids);
      r.bytes += ch.end - ch.begin;
    }
    if (it.doc_last) r.ids.insert(r.ids.end(), after.begin(), after.end());
    return;
  }
  size_t line = it.first_line;
  for (size_t b = it.begin; b < it.end; ++line) {
    size_t e = text.find('\n', b);
    e = e == std::string_view::npos || e >= it.end ? it.end : e;
    const std::string_view s = text.substr(b, e - b);
    const size_t next = e < it.end ? e + 1 : e;
    r.bytes += next - b;
    b = next;
    if (s.find_first_not_of(" \t\r") == std::string_view::npos) continue;  // a blank line
    const std::string where = fmt::format("'{}' line {}", in.path, line);
    const nlohmann::json doc = parse_json(s, where);
    ZDP_REQUIRE(doc.is_object(), "{}: must be a JSON object with a \"text\" string, got {}", where, describe_json(doc));
    auto t = doc.find("text");
    ZDP_REQUIRE(t != doc.end(), "{}: no \"text\" key", where);
    ZDP_REQUIRE(t->is_string(), "{}: \"text\" must be a string, got {}", where, describe_json(*t));
    r.ids.insert(r.ids.end(), before.begin(), before.end());
    tok.encode(t->get_ref<const std::string&>(), r.ids);
    r.ids.insert(r.ids.end(), after.begin(), after.end());
    ++r.documents;
  }
}

// The stream of ids, cut into the output files.
class Sink {
 public:
  Sink(const TokenizeOptions& o, int64_t vocab) : o_(o), vocab_(vocab) { val_left_ = o.out_prefix.empty() ? 0 : o.val_tokens; }

  void push(std::span<const uint32_t> ids) {
    while (!ids.empty()) {
      if (!o_.out.empty()) {
        if (writers_.empty()) open(o_.out);
        writers_.back()->append(ids);
        return;
      }
      size_t room;
      if (val_left_ > 0) {
        if (writers_.empty()) open(fmt::format("{}_val_000000.bin", o_.out_prefix));
        room = static_cast<size_t>(val_left_);
      } else {
        if (shard_left_ == 0) {
          open(fmt::format("{}_train_{:06d}.bin", o_.out_prefix, train_shards_++));
          shard_left_ = static_cast<size_t>(o_.shard_tokens);
        }
        room = shard_left_;
      }
      const size_t n = std::min(room, ids.size());
      writers_.back()->append(ids.first(n));
      if (val_left_ > 0) val_left_ -= static_cast<int64_t>(n);
      else shard_left_ -= n;
      ids = ids.subspan(n);
    }
  }

  // Publishes every file (after checking the stream filled what was asked), then removes stale shards.
  std::vector<std::string> commit() {
    if (!o_.out_prefix.empty() && o_.val_tokens > 0)
      ZDP_REQUIRE(val_left_ == 0 && train_shards_ > 0,
                  "--val-tokens {}: the inputs give only {} tokens, not more than the val shard (nothing would be left "
                  "for training); nothing was written",
                  o_.val_tokens, total());
    ZDP_REQUIRE(!writers_.empty() && total() > 0, "the inputs give no tokens: nothing to write");
    std::vector<std::string> names;
    for (auto& w : writers_) {
      w->commit();
      names.push_back(w->path());
    }
    if (!o_.out_prefix.empty()) {
      std::error_code ec;
      if (o_.val_tokens == 0) std::filesystem::remove(fmt::format("{}_val_000000.bin", o_.out_prefix), ec);
      for (int i = train_shards_;; ++i) {
        const std::string stale = fmt::format("{}_train_{:06d}.bin", o_.out_prefix, i);
        if (!file_exists(stale) || !std::filesystem::remove(stale, ec)) break;
      }
    }
    return names;
  }

  size_t total() const {
    size_t n = 0;
    for (const auto& w : writers_) n += w->count();
    return n;
  }

 private:
  // Each file stays open (a temporary) until all are published: as many descriptors as shards. The
  // soft limit is raised to the hard one when needed; past that, a usage error before anything is
  // published.
  void open(const std::string& path) {
    rlimit lim{};
    if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY && writers_.size() + 64 >= lim.rlim_cur) {
      if (lim.rlim_cur < lim.rlim_max) {
        lim.rlim_cur = lim.rlim_max;
        setrlimit(RLIMIT_NOFILE, &lim);
        getrlimit(RLIMIT_NOFILE, &lim);
      }
      ZDP_REQUIRE(lim.rlim_cur == RLIM_INFINITY || writers_.size() + 64 < lim.rlim_cur,
                  "tokenize: more than {} output files at once (the open-file limit): give a larger --shard-tokens "
                  "than {}",
                  writers_.size(), o_.shard_tokens);
    }
    writers_.push_back(std::make_unique<TokenWriter>(path, vocab_));
  }

  const TokenizeOptions& o_;
  int64_t vocab_;
  int64_t val_left_ = 0;
  size_t shard_left_ = 0;
  int train_shards_ = 0;
  std::vector<std::unique_ptr<TokenWriter>> writers_;
};

class Progress {
 public:
  Progress(size_t total, bool enabled) : total_(total), tty_(enabled && isatty(2)), start_(Clock::now()), last_(start_) {}
  void update(size_t done) {
    const auto now = Clock::now();
    const double since = std::chrono::duration<double>(now - last_).count();
    // A terminal: a bar at most 4 times a second; a log: a line every 30 s.
    if (since < (tty_ ? 0.25 : 30.0)) return;
    last_ = now;
    const double s = std::chrono::duration<double>(now - start_).count();
    const double mb = done / 1e6, rate = s > 0 ? mb / s : 0;
    const double frac = total_ ? static_cast<double>(done) / static_cast<double>(total_) : 1.0;
    if (tty_) {
      const int width = 30, fill = static_cast<int>(frac * width);
      std::fprintf(stderr, "\r[%s%s] %.1f/%.1f MB, %.1f MB/s ", std::string(fill, '#').c_str(),
                   std::string(width - fill, ' ').c_str(), mb, total_ / 1e6, rate);
      drew_ = true;
    } else {
      std::fprintf(stderr, "tokenize: %.1f/%.1f MB (%.0f%%), %.1f MB/s\n", mb, total_ / 1e6, 100 * frac, rate);
    }
    std::fflush(stderr);
  }
  void finish() {
    if (drew_) std::fprintf(stderr, "\r%*s\r", 70, "");
  }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  size_t total_;
  bool tty_;
  Clock::time_point start_, last_;
  bool drew_ = false;
};

void check_options(const TokenizeOptions& o) {
  ZDP_REQUIRE(!o.texts.empty(), "tokenize: --text names no input");
  ZDP_REQUIRE(o.out.empty() != o.out_prefix.empty(), "tokenize: give exactly one of --out and --out-prefix");
  ZDP_REQUIRE(o.shard_tokens > 0, "tokenize: --shard-tokens must be positive, got {}", o.shard_tokens);
  ZDP_REQUIRE(o.shard_tokens <= static_cast<int64_t>(kMaxTokensPerFile),
              "tokenize: --shard-tokens {} is over {}, the most a token file's header can count", o.shard_tokens,
              kMaxTokensPerFile);
  ZDP_REQUIRE(o.val_tokens >= 0 && o.val_tokens <= static_cast<int64_t>(kMaxTokensPerFile),
              "tokenize: --val-tokens must be in 0..{}, got {}", kMaxTokensPerFile, o.val_tokens);
  ZDP_REQUIRE(o.out_prefix.empty() || o.out_prefix.back() != '/',
              "tokenize: --out-prefix '{}' ends in '/': it is the start of the shards' names (e.g. dir/shakespeare)",
              o.out_prefix);
  ZDP_REQUIRE(o.threads >= 0 && o.threads <= 4096, "tokenize: --threads must be in 1..4096, got {}", o.threads);
}

// Runs every item through the tokenizer in parallel, handing the ids to `emit` in item order. Each
// thread emits its item as soon as every earlier one is out (an ordered loop), so the writing overlaps
// the other threads' encoding instead of leaving them idle at a barrier; a thread holds at most one
// finished item, so memory stays bounded whatever the input's size.
template <class Emit>
void run_items(const Tokenizer& tok, const TokenizeOptions& o, std::vector<Input>& inputs, const std::vector<Item>& items,
               Progress* progress, TokenizeResult& res, Emit&& emit) {
  const int threads = o.threads > 0 ? o.threads : std::max(1, omp_get_max_threads());
  std::exception_ptr error;      // the first failure, in item order (written in the ordered block)
  std::atomic<bool> failed{false};  // read outside it, to skip the work after a failure
  size_t done_bytes = 0;
#pragma omp parallel num_threads(threads)
  {
    // Kept from item to item with its capacity: a fresh id vector would cost page faults each time.
    ItemResult r;
#pragma omp for ordered schedule(dynamic, 1)
    for (size_t i = 0; i < items.size(); ++i) {
      r.ids.clear();
      r.bytes = r.documents = 0;
      r.error = nullptr;
      if (!failed.load(std::memory_order_relaxed)) {
        try {
          encode_item(tok, inputs, items[i], !o.no_eos, r);
        } catch (...) {
          r.error = std::current_exception();
        }
      }
#pragma omp ordered
      {
        if (!error) {
          try {
            if (r.error) std::rethrow_exception(r.error);
            emit(std::span<const uint32_t>(r.ids));
            res.tokens += r.ids.size();
            res.bytes += r.bytes;
            res.documents += r.documents;
            done_bytes += r.bytes;
            if (progress) progress->update(done_bytes);
          } catch (...) {
            error = std::current_exception();
            failed.store(true, std::memory_order_relaxed);
          }
        }
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

std::vector<Input> open_inputs(const TokenizeOptions& o, size_t& total) {
  std::vector<Input> inputs;
  inputs.reserve(o.texts.size());
  total = 0;
  for (const std::string& p : o.texts) {
    inputs.push_back({p, MappedFile(p), {}});
    total += inputs.back().file.size();
  }
  return inputs;
}

}  // namespace

TokenizeResult tokenize_files(const Tokenizer& tok, const TokenizeOptions& o) {
  check_options(o);
  size_t total = 0;
  std::vector<Input> inputs = open_inputs(o, total);  // every input readable before anything is written
  Progress progress(total, o.progress);
  std::vector<Item> items;
  plan(tok, inputs, std::max<size_t>(o.chunk_bytes, 1), items);
  TokenizeResult res;
  Sink sink(o, tok.vocab_size());
  run_items(tok, o, inputs, items, &progress, res, [&](std::span<const uint32_t> ids) { sink.push(ids); });
  progress.finish();
  res.files = sink.commit();
  res.seconds = progress.seconds();
  return res;
}

std::vector<uint32_t> tokenize_to_ids(const Tokenizer& tok, const TokenizeOptions& o) {
  size_t total = 0;
  std::vector<Input> inputs = open_inputs(o, total);
  std::vector<Item> items;
  plan(tok, inputs, std::max<size_t>(o.chunk_bytes, 1), items);
  TokenizeResult res;
  std::vector<uint32_t> all;
  run_items(tok, o, inputs, items, nullptr, res,
            [&](std::span<const uint32_t> ids) { all.insert(all.end(), ids.begin(), ids.end()); });
  return all;
}

size_t detokenize_file(const Tokenizer& tok, const std::string& tokens_path, const std::string& out_path) {
  const std::vector<uint32_t> ids = read_tokens(tokens_path, tok.vocab_size());
  const std::string text = tok.decode(ids);
  write_file_atomic(out_path, text);
  return text.size();
}

}  // namespace zerodp::data
