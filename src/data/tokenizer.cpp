#include "data/tokenizer.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/fs.h"
#include "data/bpe.h"

namespace zerodp::data {

namespace {

class ByteTokenizer final : public Tokenizer {
 public:
  void encode(std::string_view text, std::vector<uint32_t>& out) const override {
    const size_t at = out.size();
    out.resize(at + text.size());
    for (size_t i = 0; i < text.size(); ++i) out[at + i] = static_cast<uint8_t>(text[i]);
  }
  void encode_with_spans(std::string_view text, std::vector<uint32_t>& ids,
                         std::vector<TokenSpan>& spans) const override {
    encode(text, ids);
    for (size_t i = 0; i < text.size(); ++i) spans.push_back({i, i + 1});
  }
  std::string decode(std::span<const uint32_t> ids) const override {
    std::string s(ids.size(), '\0');
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] >= 256)
        throw UsageError(fmt::format("byte tokenizer: id {} at position {} is not below the vocabulary size 256", ids[i], i));
      s[i] = static_cast<char>(ids[i]);
    }
    return s;
  }
  int64_t vocab_size() const override { return 256; }
  std::optional<uint32_t> eos_id() const override { return std::nullopt; }
  std::string describe() const override { return "bytes (V = 256)"; }
};

}  // namespace

std::optional<size_t> token_at(std::span<const TokenSpan> spans, size_t at) {
  for (size_t i = 0; i < spans.size(); ++i)
    if (spans[i].begin <= at && at < spans[i].end) return i;
  return std::nullopt;
}

std::unique_ptr<Tokenizer> byte_tokenizer() { return std::make_unique<ByteTokenizer>(); }

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  const std::string text = read_small_file(path, BpeLimits::kMaxFileBytes);
  return BpeTokenizer::from_json(text, fmt::format("tokenizer '{}'", path));
}

}  // namespace zerodp::data
