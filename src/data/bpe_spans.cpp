// Each token's span in the text (Tokenizer::encode_with_spans) for a BPE tokenizer (bpe.h). The ids
// come from the encoder itself, piece by piece as encode() cuts the text at added tokens; the spans
// from walking those ids over each piece as the pre-tokenizer sees it (normalized, with Metaspace's
// "▁" or ByteLevel's prefix space), each byte of which knows the characters of the text it stands
// for. A piece the walk cannot follow (an unknown token whose stretch is unclear, a pre-tokenizer
// that removes bytes) gives each of its tokens the whole piece's span: never wrong ids, only wider
// spans, and none of zerodp's tokenizer shapes does that.
#include <algorithm>

#include "data/bpe.h"
#include "data/bpe_model.h"
#include "data/byte_level.h"

namespace zerodp::data {

namespace {

// One span for each byte of text[b, e): the character the byte belongs to (a byte of an invalid
// sequence is a character of its own).
void character_spans(std::string_view text, size_t b, size_t e, std::vector<TokenSpan>& align) {
  align.clear();
  for (size_t i = b; i < e;) {
    uint32_t cp = 0;
    const size_t n = std::min(std::max<size_t>(1, valid_utf8_at(text, i, cp)), e - i);
    align.insert(align.end(), n, TokenSpan{i, i + n});
    i += n;
  }
}

// `n` characters forward from byte `at` of `text` (at most to its end), or back (at least to 0).
size_t chars_forward(std::string_view text, size_t at, size_t n) {
  for (; n > 0 && at < text.size(); --n) at += std::min(utf8_len(static_cast<uint8_t>(text[at])), text.size() - at);
  return at;
}
size_t chars_back(std::string_view text, size_t at, size_t n, bool& reached) {
  for (; n > 0 && at > 0; --n) prev_code_point(text, at, at);
  reached = n == 0;
  return at;
}

}  // namespace

void BpeModel::encode_spans(std::string_view text, std::vector<uint32_t>& ids, std::vector<TokenSpan>& spans) const {
  const size_t first_id = ids.size(), first_span = spans.size();
  std::vector<std::pair<int32_t, Piece>> parts;
  split_added(text, parts);
  for (const auto& [idx, p] : parts) {
    if (idx < 0) {
      piece_spans(text, p.b, p.e, ids, spans);
      continue;
    }
    ids.push_back(added[idx].id);
    spans.push_back({p.b, p.e});  // the match, with the spaces lstrip and rstrip take
  }
  if (document.trim_offsets)
    trim_spans(text, std::span<const uint32_t>(ids).subspan(first_id), std::span<TokenSpan>(spans).subspan(first_span));
}

// The piece text[b, e) between added tokens: its ids as encode() gives them, then their spans.
void BpeModel::piece_spans(std::string_view text, size_t b, size_t e, std::vector<uint32_t>& ids,
                           std::vector<TokenSpan>& spans) const {
  const size_t first = ids.size(), first_span = spans.size();
  encode_text(text, b, e, b, e, ids);
  std::vector<TokenSpan> align;
  character_spans(text, b, e, align);
  std::string normalized, check;
  std::string_view subject = text.substr(b, e - b);
  bool ok = true;
  if (normalizer) {
    const std::string_view plain = normalizer->apply(subject, true, check);
    subject = normalizer->apply_aligned(subject, true, normalized, align);
    ok = subject == plain && align.size() == subject.size();
  }
  // Places ids[next...] over sub[sb, se) as the pre-tokenizer sees it, until it is used up.
  size_t next = first;
  std::string s;
  std::vector<TokenSpan> s_align;
  auto place = [&](size_t sb, size_t se, bool at_text_start) {
    if (!ok || sb >= se) return;
    pre_tokenized(subject.substr(sb, se - sb), align.data() + sb, true, at_text_start, s, s_align);
    for (size_t k = 0; ok && k < s.size();) {
      size_t len = 1;
      if (!has_own_token(s, k, len) && !unk_id) {  // dropped, as the encoder drops it
        k += len;
        continue;
      }
      const size_t n = next < ids.size() ? symbol_length(ids[next], s, k) : 0;
      ok = n > 0;
      if (!ok) break;
      spans.push_back({s_align[k].begin, s_align[k + n - 1].end});
      k += n;
      ++next;
    }
  };
  if (two_passes && normalizer) {  // added tokens found in the normalized piece (encode_normalized)
    std::vector<std::pair<int32_t, Piece>> sub;
    if (ok) find_added(subject, 0, subject.size(), 1, sub);
    for (const auto& [idx, p] : sub) {
      if (idx < 0) {
        place(p.b, p.e, b == 0 && p.b == 0);
        continue;
      }
      ok = ok && next < ids.size() && ids[next] == added[idx].id;
      if (!ok) break;
      spans.push_back({align[p.b].begin, align[p.e - 1].end});
      ++next;
    }
  } else {
    place(0, subject.size(), b == 0);
  }
  if (!ok || next != ids.size()) {
    spans.resize(first_span);
    spans.insert(spans.end(), ids.size() - first, TokenSpan{b, e});
  }
}

// What the pre-tokenizer's steps see of a normalized piece (encode_piece): Metaspace's " " -> "▁" and
// its prepended "▁", or ByteLevel's prefix space, both standing for the piece's first character.
void BpeModel::pre_tokenized(std::string_view sub, const TokenSpan* align, bool at_start, bool at_text_start,
                             std::string& s, std::vector<TokenSpan>& s_align) const {
  s.clear();
  s_align.clear();
  if (metaspace) {
    const std::string& rep = metaspace->replacement;
    const bool starts_with_rep = sub[0] == ' ' || sub.substr(0, rep.size()) == rep;
    const bool prepend = at_start && !starts_with_rep &&
                         (metaspace->prepend == Metaspace::Prepend::kAlways ||
                          (metaspace->prepend == Metaspace::Prepend::kFirst && at_text_start));
    if (prepend) {
      s.append(rep);
      s_align.assign(rep.size(), align[0]);
    }
    for (size_t i = 0; i < sub.size(); ++i) {
      if (sub[i] == ' ') {
        s += rep;
        s_align.insert(s_align.end(), rep.size(), align[i]);
      } else {
        s += sub[i];
        s_align.push_back(align[i]);
      }
    }
    return;
  }
  if (prefix_space && at_start && sub[0] != ' ') {
    s.push_back(' ');
    s_align.push_back(align[0]);
  }
  s.append(sub);
  s_align.insert(s_align.end(), align, align + sub.size());
}

// Whether the character (a byte, in a byte-level vocabulary) at s[at] becomes tokens of its own
// (its token, or its bytes' <0xAB> tokens); its length in `len`.
bool BpeModel::has_own_token(std::string_view s, size_t at, size_t& len) const {
  if (byte_level) {
    len = 1;
    return byte_id[static_cast<uint8_t>(s[at])] >= 0;
  }
  uint32_t cp = 0;
  len = valid_utf8_at(s, at, cp);
  if (len > 0 && char_id.count(cp)) return true;
  len = std::max<size_t>(len, 1);
  bool fell_back = byte_fallback;
  for (size_t k = 0; fell_back && k < len; ++k) fell_back = fallback_id[static_cast<uint8_t>(s[at + k])] >= 0;
  return fell_back;
}

// The bytes of s at `at` that token `id` stands for, or 0 when it does not stand there.
size_t BpeModel::symbol_length(uint32_t id, std::string_view s, size_t at) const {
  if (unk_id && id == *unk_id) {  // a character without a token; with fuse_unk, a run of them
    size_t n = 0, len = 1;
    while (at + n < s.size() && !has_own_token(s, at + n, len)) {
      n += len;
      if (!fuse_unk) break;
    }
    return n;
  }
  const std::string& t = token_bytes[id];
  if (!byte_level && byte_fallback) {
    const int b = fallback_byte(t);
    if (b >= 0 && fallback_id[b] == static_cast<int32_t>(id)) return static_cast<uint8_t>(s[at]) == b ? 1 : 0;
  }
  return !t.empty() && s.compare(at, t.size(), t) == 0 ? t.size() : 0;
}

// A ByteLevel post-processor's trim_offsets, as the library's process_offsets: the spaces at each end
// of a token's string ("Ġ" in a byte-level vocabulary, White_Space in the text an added token matched) are
// taken off its span, one character each, except one at the start of the text's first token with
// add_prefix_space.
void BpeModel::trim_spans(std::string_view text, std::span<const uint32_t> ids, std::span<TokenSpan> spans) const {
  for (size_t i = 0; i < ids.size(); ++i) {
    TokenSpan& sp = spans[i];
    // (an added token's string is what it matched)
    const std::string_view t = is_added[ids[i]] ? text.substr(sp.begin, sp.end - sp.begin) : token_bytes[ids[i]];
    size_t lead = 0, trail = 0;
    if (!is_added[ids[i]]) {
      while (lead < t.size() && t[lead] == ' ') ++lead;
      while (trail < t.size() && t[t.size() - 1 - trail] == ' ') ++trail;
    } else {
      for (size_t at = 0; at < t.size(); ++lead) {
        if (!is_white_space(next_code_point(t, at))) break;
      }
      for (size_t end = t.size(); end > 0; ++trail) {
        if (!is_white_space(prev_code_point(t, end, end))) break;
      }
    }
    if (lead > 0) {
      if ((i == 0 || sp.begin == 0) && document.trim_keeps_prefix_space && lead == 1) lead = 0;
      sp.begin = std::min(chars_forward(text, sp.begin, lead), sp.end);
    }
    bool reached = false;
    const size_t end = trail > 0 ? chars_back(text, sp.end, trail, reached) : sp.end;
    if (reached) sp.end = std::max(end, sp.begin);
  }
}

}  // namespace zerodp::data
