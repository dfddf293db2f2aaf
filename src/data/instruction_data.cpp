#include "data/instruction_data.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "core/targets.h"

namespace zerodp::data {

namespace {

int32_t header_word(const uint8_t* header, int i) {
  int32_t v;
  std::memcpy(&v, header + 4 * i, 4);  // little-endian hosts only (x86-64, the build's target)
  return v;
}

}  // namespace

std::string labels_path_for(const std::string& tokens_path) {
  const std::filesystem::path p(tokens_path);
  if (p.extension() == ".bin") return std::filesystem::path(p).replace_extension(".labels").string();
  return tokens_path + ".labels";
}

void write_labels_file(const std::string& path, std::span<const uint8_t> labels) {
  std::string bytes(InstructionData::kLabelsHeaderBytes, '\0');
  const uint64_t n = labels.size();
  const int32_t words[4] = {kLabelsMagic, kLabelsVersion, static_cast<int32_t>(n & 0xffffffffu),
                            static_cast<int32_t>(n >> 32)};
  std::memcpy(bytes.data(), words, sizeof(words));
  bytes.append(reinterpret_cast<const char*>(labels.data()), labels.size());
  write_file_atomic(path, bytes);
}

bool InstructionData::present(const std::string& spec) {
  std::error_code ec;
  return std::filesystem::is_regular_file(spec, ec) && std::filesystem::is_regular_file(labels_path_for(spec), ec);
}

InstructionData InstructionData::open(const std::string& tokens_path, int vocab_size) {
  InstructionData d;
  d.tokens_ = TokenFile::open(tokens_path, vocab_size);
  const std::string path = labels_path_for(tokens_path);
  d.labels_ = MappedFile(path);
  const uint8_t* bytes = d.labels_.data();
  const size_t size = d.labels_.size();
  ZDP_REQUIRE(size >= kLabelsHeaderBytes && header_word(bytes, 0) == kLabelsMagic,
              "labels file '{}': not a zerodp labels file (no {}-byte header with magic {})", path,
              kLabelsHeaderBytes, kLabelsMagic);
  ZDP_REQUIRE(header_word(bytes, 1) == kLabelsVersion, "labels file '{}': version {} (zerodp reads {})", path,
              header_word(bytes, 1), kLabelsVersion);
  const uint64_t count = static_cast<uint32_t>(header_word(bytes, 2)) |
                         (static_cast<uint64_t>(static_cast<uint32_t>(header_word(bytes, 3))) << 32);
  ZDP_REQUIRE(count == size - kLabelsHeaderBytes, "labels file '{}': its header says {} labels, it holds {}", path,
              count, size - kLabelsHeaderBytes);
  ZDP_REQUIRE(count == d.tokens_.size(), "labels file '{}' labels {} tokens, its token file '{}' holds {}", path, count,
              tokens_path, d.tokens_.size());
  const uint8_t* labels = bytes + kLabelsHeaderBytes;
  ZDP_REQUIRE(labels[0] & kExampleStartLabel, "labels file '{}': the first token starts no example", path);
  for (uint64_t i = 0; i < count; ++i) {
    const uint8_t l = labels[i];
    ZDP_REQUIRE((l & ~(kTargetLabel | kExampleStartLabel)) == 0, "labels file '{}': label {} of token {} has unknown bits",
                path, l, i);
    if (l & kExampleStartLabel) d.starts_.push_back(i);
    // The first token of an example has nothing before it to be predicted from.
    ZDP_REQUIRE(!(l & kExampleStartLabel) || !(l & kTargetLabel),
                "labels file '{}': token {} starts an example and is a target", path, i);
    d.total_targets_ += l & kTargetLabel;
  }
  d.starts_.push_back(count);
  return d;
}

InstructionBatches::InstructionBatches(const InstructionData& data, int world_size, int rank, int micro_batch,
                                       int seq_len, int accum, ShuffleSpec shuffle, bool packed)
    : data_(&data),
      W_(world_size),
      r_(rank),
      B_(micro_batch),
      T_(seq_len),
      G_(accum),
      shuffle_(shuffle),
      packed_(packed) {
  ZDP_REQUIRE(world_size > 0 && rank >= 0 && rank < world_size && micro_batch > 0 && seq_len > 0 && accum > 0,
              "instruction batches: bad sizes W={} rank={} B={} T={} G={}", world_size, rank, micro_batch, seq_len,
              accum);
  ZDP_REQUIRE(data.total_targets() > 0, "instruction data '{}' has no target token",
              data.token_file().path());
  const size_t E = data.examples(), T = static_cast<size_t>(T_);
  size_t used = 0;  // inputs of the pack being filled
  for (size_t e = 0; e < E; ++e) {
    const size_t n = std::min(data.length(e), T + 1);
    truncated_ += data.length(e) > n;
    const uint32_t t = data.targets_within(e, T_);
    // Packed: an example's n − 1 inputs join the pack while they fit, else start the next one.
    if (e == 0 || !packed_ || used + (n - 1) > T) {
      pack_starts_.push_back(e);
      targets_of_.push_back(0);
      used = 0;
    }
    used += n - 1;
    targets_of_.back() += t;
  }
  pack_starts_.push_back(E);
}

size_t InstructionBatches::pack_of(uint64_t q) const {
  const uint64_t P = packs();
  if (!shuffle_.enabled) return static_cast<size_t>(q % P);
  const WindowPermutation perm(P, shuffle_.seed, q / P);
  return static_cast<size_t>(perm(q % P));
}

uint32_t InstructionData::targets_within(size_t e, int T) const {
  const size_t n = std::min(length(e), static_cast<size_t>(T) + 1);
  uint32_t t = 0;
  for (size_t i = 1; i < n; ++i) t += is_target(start(e) + i);
  return t;
}

void InstructionData::fill_row(size_t first, size_t end, int seq_len, bool packed, int32_t* inputs, int32_t* targets,
                               int32_t* positions) const {
  const size_t T = static_cast<size_t>(seq_len);
  std::vector<int32_t> tokens(T + 1);
  size_t t = 0;  // the row's next position
  for (size_t e = first; e < end; ++e) {
    const size_t n = std::min(length(e), T + 1);
    if (inputs || targets) tokens_.copy(start(e), n, tokens.data());  // (positions alone read no token)
    // Padded, the example's last token is an input too when it fits (nothing sees it: it is last);
    // packed, the next example starts there.
    const size_t m = packed ? n - 1 : std::min(n, T);
    for (size_t i = 0; i < m; ++i, ++t) {
      if (inputs) inputs[t] = tokens[i];
      if (targets) targets[t] = i + 1 < n && is_target(start(e) + i + 1) ? tokens[i + 1] : kIgnoreTarget;
      if (positions) positions[t] = static_cast<int32_t>(i);
    }
  }
  // Padding: any id (nothing before it sees it), no target, positions of a segment of its own.
  for (size_t pad = 0; t < T; ++t, ++pad) {
    if (inputs) inputs[t] = 0;
    if (targets) targets[t] = kIgnoreTarget;
    if (positions) positions[t] = static_cast<int32_t>(pad);
  }
}

void InstructionBatches::fill_pack(size_t pack, int32_t* inputs, int32_t* targets, int32_t* positions) const {
  data_->fill_row(pack_starts_[pack], pack_starts_[pack + 1], T_, packed_, inputs, targets, positions);
}

void InstructionBatches::load(uint64_t step, int micro_step, int32_t* inputs, int32_t* targets) const {
  const uint64_t q0 = first_sequence_of(step, micro_step, W_, r_, B_, G_);
  const size_t T = static_cast<size_t>(T_);
  for (size_t b = 0; b < static_cast<size_t>(B_); ++b)
    fill_pack(pack_of(q0 + b), inputs + b * T, targets + b * T, nullptr);
}

void InstructionBatches::positions(uint64_t step, int micro_step, int32_t* positions) const {
  const uint64_t q0 = first_sequence_of(step, micro_step, W_, r_, B_, G_);
  const size_t T = static_cast<size_t>(T_);
  for (size_t b = 0; b < static_cast<size_t>(B_); ++b) fill_pack(pack_of(q0 + b), nullptr, nullptr, positions + b * T);
}

uint64_t InstructionBatches::targets(uint64_t step) const {
  uint64_t sum = 0;
  for (int g = 0; g < G_; ++g) {
    const uint64_t q0 = first_sequence_of(step, g, W_, 0, B_, G_);
    for (uint64_t q = q0; q < q0 + static_cast<uint64_t>(W_) * static_cast<uint64_t>(B_); ++q)
      sum += targets_of_[pack_of(q)];
  }
  return sum;
}

std::string InstructionBatches::describe() const {
  const std::string layout = packed_ ? fmt::format("packed into {} sequences of T = {}", packs(), T_)
                                     : fmt::format("padded to T + 1 = {}", T_ + 1);
  return fmt::format("'{}' (instruction data: {} examples, {} targets, {}{})", data_->token_file().path(),
                     data_->examples(), data_->total_targets(), layout,
                     truncated_ > 0 ? fmt::format("; {} examples longer than T + 1 are truncated", truncated_) : "");
}

TrainData open_train_data(const std::string& spec, int vocab_size, int world_size, int rank, int micro_batch,
                          int seq_len, int accum, ShuffleSpec shuffle, bool packed) {
  TrainData d;
  if (InstructionData::present(spec)) {
    d.instructions = std::make_unique<InstructionData>(InstructionData::open(spec, vocab_size));
    d.batches = std::make_unique<InstructionBatches>(*d.instructions, world_size, rank, micro_batch, seq_len, accum,
                                                     shuffle, packed);
  } else {
    ZDP_REQUIRE(!packed,
                "--packing packs instruction data, and '{}' has no labels file beside it ('{}'): it is a token "
                "stream, whose windows are full already",
                spec, labels_path_for(spec));
    d.stream = std::make_unique<TokenStream>(TokenStream::open(spec, vocab_size));
    d.batches = std::make_unique<BatchLoader>(*d.stream, world_size, rank, micro_batch, seq_len, accum, shuffle);
  }
  return d;
}

}  // namespace zerodp::data
