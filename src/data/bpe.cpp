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
    while (m_->cut != CutRule::kNone && p.e - b > target_bytes + target_bytes / 2) {
      size_t cut = m_->cut == CutRule::kSpaceAfterLetter ? space_cut(text, b + target_bytes, p.e) : std::string_view::npos;
      // The first '\n' followed by a letter at or after b + target_bytes.
      for (size_t at = b + target_bytes; m_->cut != CutRule::kSpaceAfterLetter && at + 1 < p.e;) {
        const size_t nl = text.find('\n', at);
        if (nl == std::string_view::npos || nl + 1 >= p.e) break;
        const auto c = static_cast<uint8_t>(text[nl + 1]);
        // A letter (\p{L}): ASCII at once, other characters through PCRE2.
        size_t ms, me;
        RegexBudget budget(4);  // one character class on one character
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
            (c >= 0x80 && m_->cut == CutRule::kNewlineLetter && m_->letter->find(text.data(), std::min(p.e, nl + 5), nl + 1, ms, me, budget) &&
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

// CutRule::kSpaceAfterLetter: the first ' ' in [from, end) after an ASCII letter that has a token of
// its own and that no token has before the word cut's "▁" (or any letter, with Metaspace's split).
size_t BpeTokenizer::space_cut(std::string_view text, size_t from, size_t end) const {
  for (size_t at = text.find(' ', from); at != std::string_view::npos && at < end; at = text.find(' ', at + 1)) {
    const auto c = static_cast<uint8_t>(text[at - 1]);
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) || !m_->char_id.count(c)) continue;
    if (!m_->word_cut.empty() && m_->joins_word_cut.count(c)) continue;
    return at;
  }
  return std::string_view::npos;
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

void BpeTokenizer::encode_with_spans(std::string_view text, std::vector<uint32_t>& ids,
                                     std::vector<TokenSpan>& spans) const {
  m_->encode_spans(text, ids, spans);
}

bool BpeTokenizer::is_added_token(uint32_t id) const { return id < m_->is_added.size() && m_->is_added[id]; }

std::string BpeTokenizer::decode(std::span<const uint32_t> ids) const {
  if (m_->decoder) {
    std::vector<std::string> tokens;
    m_->token_strings(ids, tokens);
    return m_->decoder->decode(tokens);
  }
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += m_->token(ids, i);
  return s;
}

void BpeTokenizer::document_tokens(std::vector<uint32_t>& before, std::vector<uint32_t>& after) const {
  before = m_->document.before;
  after = m_->document.after;
  if (before.empty() && after.empty() && m_->eos) before.push_back(*m_->eos);
}

const std::string& BpeModel::token(std::span<const uint32_t> ids, size_t i) const {
  const uint32_t id = ids[i];
  if (id >= token_bytes.size() || !has_token[id])
    throw UsageError(fmt::format("{}: id {} at position {} is not a token of the vocabulary (V = {})", name, id, i,
                                 token_bytes.size()));
  return token_bytes[id];
}

void BpeModel::token_strings(std::span<const uint32_t> ids, std::vector<std::string>& tokens) const {
  for (size_t i = 0; i < ids.size(); ++i) tokens.push_back(token(ids, i));
}

}  // namespace zerodp::data
