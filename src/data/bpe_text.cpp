// Encoding a text with a loaded BPE model (bpe_model.h), in the order bpe.h describes: added tokens
// split out, the normalizer, the normalized added tokens, the pre-tokenizer's steps, then each
// pre-token through bpe_encode.cpp.
#include <algorithm>
#include <cstring>

#include "data/bpe.h"
#include "data/bpe_model.h"
#include "data/byte_level.h"

namespace zerodp::data {

// Splits text[b, e) on the added tokens of pass `pass` (0: not normalized, 1: normalized; with
// one pass, all), as tokenizers' AddedVocabulary::find_matches. Appends (token index or -1, range).
void BpeModel::find_added(std::string_view text, size_t b, size_t e, int pass, std::vector<std::pair<int32_t, Piece>>& out) const {
  const std::string_view s = text.substr(b, e - b);
  size_t start_offset = 0;
  size_t i = 0;
  const AddedTrie& trie = added_tries[pass];
  while (i < s.size()) {
    if (single_first[pass] >= 0) {
      const void* hit_at = std::memchr(s.data() + i, single_first[pass], s.size() - i);
      if (!hit_at) break;
      i = static_cast<size_t>(static_cast<const char*>(hit_at) - s.data());
    } else if (!trie.starts_with(static_cast<uint8_t>(s[i]))) {
      ++i;
      continue;
    }
    // Leftmost-longest, as tokenizers' Aho-Corasick (MatchKind::LeftmostLongest): the first position
    // where a token starts, the longest token there.
    size_t len = 0;
    const int32_t hit = trie.longest(s, i, len);
    if (hit == AddedTrie::kNone) {
      ++i;
      continue;
    }
    const AddedToken& t = added[hit];
    size_t start = i, stop = i + len;
    i = stop;
    if (t.single_word) {
      const bool start_space = start == 0 || !ends_with_word(s, start);
      const bool stop_space = stop == s.size() || !starts_with_word(s, stop);
      if (!start_space || !stop_space) continue;
    }
    if (t.lstrip) {
      size_t ns = start;
      while (ns > 0) {
        size_t cs;
        const uint32_t c = prev_code_point(s, ns, cs);
        if (!is_white_space(c)) break;
        ns = cs;
      }
      start = std::max(ns, start_offset);
    }
    if (t.rstrip) {
      size_t j = stop;
      while (j < s.size()) {
        size_t k = j;
        const uint32_t c = next_code_point(s, k);
        if (!is_white_space(c)) break;
        j = k;
      }
      stop = j;
      i = std::max(i, stop);
    }
    if (start_offset < start) out.push_back({-1, Piece{b + start_offset, b + start, false}});
    out.push_back({hit, Piece{b + start, b + stop, true}});
    start_offset = stop;
  }
  if (start_offset < s.size()) out.push_back({-1, Piece{b + start_offset, e, false}});
}

bool BpeModel::starts_with_word(std::string_view s, size_t at) const {
  size_t ms, me;
  RegexBudget budget(4);  // one character class on one character
  return word_char->find(s.data(), std::min(s.size(), at + 4), at, ms, me, budget) && ms == at;
}

bool BpeModel::ends_with_word(std::string_view s, size_t end) const {
  size_t cs;
  prev_code_point(s, end, cs);
  size_t ms, me;
  RegexBudget budget(4);
  return word_char->find(s.data(), end, cs, ms, me, budget) && ms == cs;
}

// Runs steps[k..] over subject[from, to) (the regexes see all of subject) and BPE-encodes the
// pre-tokens.
void BpeModel::pretokenize(size_t k, std::string_view subject, size_t from, size_t to, RegexBudget& budget,
                           std::vector<uint32_t>& out) const {
  if (k == steps.size()) {
    encode_word(subject.substr(from, to - from), out);
    return;
  }
  const PreStep& st = steps[k];
  auto next = [&](size_t b, size_t e) {
    if (k + 1 == steps.size()) encode_word(subject.substr(b, e - b), out);
    else pretokenize(k + 1, subject.substr(b, e - b), 0, e - b, budget, out);
  };
  // One buffer pair per depth, sized once (a reference into them must survive the recursion).
  thread_local std::vector<std::vector<Piece>> levels(BpeLimits::kMaxPreTokenizers + 1);
  std::vector<Piece>& pieces = levels[k];
  pieces.clear();
  // Isolated (every pre-tokenizer of GPT-2, Llama 3, Qwen 2): each match and each gap is a piece,
  // passed on as soon as found.
  const bool stream = st.behavior == Behavior::kIsolated;
  // Matches and the gaps between them, covering [from, to).
  size_t gap = from, pos = from;
  while (pos < to) {
    size_t ms, me;
    if (st.regex) {
      if (!st.regex->find(subject.data(), subject.size(), pos, ms, me, budget) || ms >= to) break;
    } else {
      const size_t f = subject.substr(0, to).find(st.literal, pos);
      if (f == std::string_view::npos) break;
      ms = f, me = f + st.literal.size();
    }
    if (me == ms) {  // an empty match splits nothing
      pos = ms + utf8_len(static_cast<uint8_t>(subject[ms]));
      continue;
    }
    if (stream) {
      if (gap < ms) next(gap, ms);
      next(ms, me);
    } else {
      if (gap < ms) pieces.push_back({gap, ms, st.invert});
      pieces.push_back({ms, me, !st.invert});
    }
    gap = pos = me;
  }
  if (stream) {
    if (gap < to) next(gap, to);
    return;
  }
  if (gap < to) pieces.push_back({gap, to, st.invert});
  // Group by behaviour (tokenizers' NormalizedString::split).
  thread_local std::vector<std::vector<Piece>> grouped_levels(BpeLimits::kMaxPreTokenizers + 1);
  std::vector<Piece>& g = grouped_levels[k];
  g.clear();
  switch (st.behavior) {
    case Behavior::kIsolated: break;  // streamed above
    case Behavior::kRemoved:
      for (const Piece& p : pieces)
        if (!p.match) g.push_back(p);
      break;
    case Behavior::kContiguous: {
      bool prev_match = false;
      for (const Piece& p : pieces) {
        if (!g.empty() && p.match == prev_match) g.back().e = p.e;
        else g.push_back(p);
        prev_match = p.match;
      }
      break;
    }
    case Behavior::kMergedWithPrevious: {
      bool prev_match = false;
      for (const Piece& p : pieces) {
        if (p.match && !prev_match && !g.empty()) g.back().e = p.e;
        else g.push_back(p);
        prev_match = p.match;
      }
      break;
    }
    case Behavior::kMergedWithNext: {
      bool prev_match = false;
      for (size_t i = pieces.size(); i-- > 0;) {
        const Piece& p = pieces[i];
        if (p.match && !prev_match && !g.empty()) g.back().b = p.b;
        else g.push_back(p);
        prev_match = p.match;
      }
      std::reverse(g.begin(), g.end());
      break;
    }
  }
  for (const Piece& p : g)
    if (p.e > p.b) next(p.b, p.e);
}

// A piece of text between added tokens, or a chunk [from, to) of one ([sb, se)).
void BpeModel::encode_text(std::string_view text, size_t sb, size_t se, size_t from, size_t to, std::vector<uint32_t>& out) const {
  if (to <= from) return;
  if (normalizer || metaspace) {
    encode_normalized(text, sb, se, from, to, out);
    return;
  }
  std::string_view subject = text.substr(sb, se - sb);
  from -= sb, to -= sb;
  if (prefix_space && subject[0] != ' ') {
    thread_local std::string buf;
    buf.assign(1, ' ');
    buf.append(subject);
    subject = buf;
    to = subject.size();  // never cut (cuttable is false with a prefix space)
  }
  if (steps.empty()) {
    encode_whole(subject.substr(from, to - from), out);
  } else {
    // One budget for all the steps' regexes over this text (bpe_regex.h); a Sequence's later steps
    // see the pieces of the earlier ones, the same bytes again.
    RegexBudget budget(to - from, regex_steps);
    pretokenize(0, subject, from, to, budget, out);
  }
}

// The pieces of `text` between and around added tokens.
void BpeModel::split_added(std::string_view text, std::vector<std::pair<int32_t, Piece>>& parts) const {
  parts.clear();
  if (added.empty()) {
    if (!text.empty()) parts.push_back({-1, Piece{0, text.size(), false}});
    return;
  }
  find_added(text, 0, text.size(), 0, parts);
  if (!two_passes || normalizer) return;  // (normalized tokens: in encode_normalized)
  std::vector<std::pair<int32_t, Piece>> first;
  first.swap(parts);
  for (const auto& [idx, p] : first) {
    if (idx >= 0) parts.push_back({idx, p});
    else find_added(text, p.b, p.e, 1, parts);
  }
}

// With a normalizer or Metaspace: text[from, to) of the piece [sb, se) normalized, split on the
// normalized added tokens, and each piece pre-tokenized.
void BpeModel::encode_normalized(std::string_view text, size_t sb, size_t se, size_t from, size_t to,
                                 std::vector<uint32_t>& out) const {
  thread_local std::string normalized, with_tail, tail;
  const bool piece_start = from == sb;
  std::string_view subject = text.substr(from, to - from);
  if (normalizer) subject = normalizer->apply(subject, piece_start, normalized);
  const size_t end = subject.size();
  if (to < se && regex_steps > 0 && normalizer) {
    // A chunk of a longer piece (CutRule::kNewlineAsciiLetter): the regexes' lookaheads see the
    // next characters, normalized alone (the cut is a boundary of every Unicode form).
    size_t tail_end = std::min(se, to + 16);
    while (tail_end < se && (static_cast<uint8_t>(text[tail_end]) & 0xC0) == 0x80) ++tail_end;
    with_tail.assign(subject);
    with_tail += normalizer->apply(text.substr(to, tail_end - to), false, tail);
    subject = with_tail;
  }
  if (!two_passes || !normalizer) {
    encode_piece(subject, 0, end, piece_start, from == 0, out);
    return;
  }
  thread_local std::vector<std::pair<int32_t, Piece>> parts;
  parts.clear();
  find_added(subject, 0, end, 1, parts);
  for (const auto& [idx, p] : parts) {
    if (idx >= 0) out.push_back(added[idx].id);
    else encode_piece(subject.substr(p.b, p.e - p.b), 0, p.e - p.b, piece_start || p.b > 0, from == 0 && p.b == 0, out);
  }
}

// A normalized piece subject[b, e) (the regexes see all of subject): Metaspace, then the pre-tokenizer's
// steps. `at_start`: the piece is not a later chunk of a longer one; `at_text_start`: it starts the text.
void BpeModel::encode_piece(std::string_view subject, size_t b, size_t e, bool at_start, bool at_text_start,
                            std::vector<uint32_t>& out) const {
  if (e <= b) return;
  if (metaspace) {
    thread_local std::string spaced;
    spaced.clear();
    const std::string_view piece = subject.substr(b, e - b);
    const std::string& rep = metaspace->replacement;
    const bool starts_with_rep = piece[0] == ' ' || piece.substr(0, rep.size()) == rep;  // after the replacing
    const bool prepend = at_start && !starts_with_rep &&
                         (metaspace->prepend == Metaspace::Prepend::kAlways ||
                          (metaspace->prepend == Metaspace::Prepend::kFirst && at_text_start));
    if (prepend) spaced = rep;
    for (char ch : piece) {
      if (ch == ' ') spaced += rep;
      else spaced += ch;
    }
    if (steps.empty()) {
      encode_whole(spaced, out);
    } else {
      RegexBudget budget(spaced.size(), regex_steps);
      pretokenize(0, spaced, 0, spaced.size(), budget, out);
    }
    return;
  }
  if (prefix_space && at_start && subject[b] != ' ') {  // ByteLevel's add_prefix_space (never cut)
    thread_local std::string spaced;
    spaced.assign(1, ' ');
    spaced.append(subject.substr(b, e - b));
    subject = spaced;
    b = 0, e = spaced.size();
  }
  if (steps.empty()) {
    encode_whole(subject.substr(b, e - b), out);
    return;
  }
  RegexBudget budget(e - b, regex_steps);
  pretokenize(0, subject, b, e, budget, out);
}


}  // namespace zerodp::data
