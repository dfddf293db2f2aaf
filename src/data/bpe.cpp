// The Tokenizer interface of a byte-level BPE tokenizer (bpe.h) over its model (bpe_model.h), and
// the cuts that let several threads encode one text.
#include "data/bpe.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "data/bpe_model.h"
#include "data/byte_level.h"

namespace zerodp::data {

uint32_t byte_level_char(uint8_t b) { return byte_table().to_char[b]; }

BpeTokenizer::BpeTokenizer(std::unique_ptr<BpeModel> m) : m_(std::move(m)) {}
BpeTokenizer::~BpeTokenizer() = default;

int64_t BpeTokenizer::vocab_size() const { return static_cast<int64_t>(m_->token_bytes.size()); }
std::optional<uint32_t> BpeTokenizer::eos_id() const { return m_->eos; }

std::string BpeTokenizer::describe() const {
  return fmt::format("BPE {} (V = {}, {} merges{}{})", m_->name.substr(m_->name.find(' ') + 1), vocab_size(),
                     m_->merges_count, m_->pattern_label.empty() ? "" : ", ", m_->pattern_label);
}

void BpeTokenizer::chunk(std::string_view text, size_t target_bytes, std::vector<TextChunk>& chunks) const {
  thread_local std::vector<std::pair<int32_t, Piece>> parts;
  m_->split_added(text, parts);
  for (const auto& [idx, p] : parts) {
    if (idx >= 0) {
      chunks.push_back({m_->added[idx].id, p.b, p.e, p.b, p.e});
      continue;
    }
    size_t b = p.b;
    while (m_->cuttable && p.e - b > target_bytes + target_bytes / 2) {
      // The first '\n' followed by a letter at or after b + target_bytes.
      size_t cut = std::string_view::npos;
      for (size_t at = b + target_bytes; at + 1 < p.e;) {
        const size_t nl = text.find('\n', at);
        if (nl == std::string_view::npos || nl + 1 >= p.e) break;
        const auto c = static_cast<uint8_t>(text[nl + 1]);
        // A letter (\p{L}): ASCII at once, other characters through PCRE2.
        size_t ms, me;
        RegexBudget budget(4);  // one character class on one character
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
            (c >= 0x80 && m_->letter->find(text.data(), std::min(p.e, nl + 5), nl + 1, ms, me, budget) &&
             ms == nl + 1)) {
          cut = nl + 1;
          break;
        }
        at = nl + 1;
      }
      if (cut == std::string_view::npos) break;
      chunks.push_back({TextChunk::kText, b, cut, p.b, p.e});
      b = cut;
    }
    chunks.push_back({TextChunk::kText, b, p.e, p.b, p.e});
  }
}

void BpeTokenizer::encode_chunk(std::string_view text, const TextChunk& c, std::vector<uint32_t>& out) const {
  if (c.added != TextChunk::kText) {
    out.push_back(c.added);
    return;
  }
  m_->encode_text(text, c.seg_begin, c.seg_end, c.begin, c.end, out);
}

void BpeTokenizer::encode(std::string_view text, std::vector<uint32_t>& out) const {
  std::vector<std::pair<int32_t, Piece>> parts;
  m_->split_added(text, parts);
  for (const auto& [idx, p] : parts) {
    if (idx >= 0) out.push_back(m_->added[idx].id);
    else m_->encode_text(text, p.b, p.e, p.b, p.e, out);
  }
}

std::string BpeTokenizer::decode(std::span<const uint32_t> ids) const {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    const uint32_t id = ids[i];
    if (id >= m_->token_bytes.size() || !m_->has_token[id])
      throw UsageError(fmt::format("{}: id {} at position {} is not a token of the vocabulary (V = {})", m_->name, id,
                                   i, vocab_size()));
    s += m_->token_bytes[id];
  }
  return s;
}

}  // namespace zerodp::data
