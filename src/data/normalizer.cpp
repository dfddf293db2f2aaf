// Reading a tokenizer.json's normalizer and applying it (normalizer.h).
#include "data/normalizer.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include <fmt/format.h>

#include "data/bpe_regex.h"
#include "data/byte_level.h"
#include "data/tokenizer_json.h"
#include "data/unicode_forms.h"

namespace zerodp::data {

namespace {

constexpr size_t kMaxSteps = 16;  // steps of a Sequence

void read_step(const Reader& r, const json& v, const std::string& key, const std::string& type,
               std::vector<Normalizer::Step>& steps) {
  Normalizer::Step s;
  static constexpr std::pair<const char*, Normalizer::Kind> kWithoutKeys[] = {
      {"NFC", Normalizer::Kind::kNfc},
      {"NFKC", Normalizer::Kind::kNfkc},
      {"NFD", Normalizer::Kind::kNfd},
      {"NFKD", Normalizer::Kind::kNfkd},
      {"Lowercase", Normalizer::Kind::kLowercase}};
  const auto* plain = std::find_if(std::begin(kWithoutKeys), std::end(kWithoutKeys),
                                   [&](const auto& e) { return type == e.first; });
  if (plain != std::end(kWithoutKeys)) {
    s.kind = plain->second;
  } else if (type == "Strip") {
    s.kind = Normalizer::Kind::kStrip;
    s.left = r.boolean(v, key, "strip_left", false);
    s.right = r.boolean(v, key, "strip_right", false);
  } else if (type == "Prepend") {
    s.kind = Normalizer::Kind::kPrepend;
    s.content = r.string(r.get(v, key, "prepend"), key + ".prepend");
  } else if (type == "Replace") {
    s.kind = Normalizer::Kind::kReplace;
    r.pattern(r.get(v, key, "pattern"), key + ".pattern", s.regex, s.pattern);
    s.content = r.string(r.get(v, key, "content"), key + ".content");
  } else {
    r.fail(key + ".type", fmt::format("normalizer \"{}\" is not supported (NFC, NFKC, NFD, NFKD, Replace, Prepend, "
                                      "Lowercase, Strip, Sequence are)",
                                      describe_text(type)));
  }
  steps.push_back(std::move(s));
}

UnicodeForm form_of(Normalizer::Kind k) {
  switch (k) {
    case Normalizer::Kind::kNfkc: return UnicodeForm::kNfkc;
    case Normalizer::Kind::kNfd: return UnicodeForm::kNfd;
    case Normalizer::Kind::kNfkd: return UnicodeForm::kNfkd;
    default: return UnicodeForm::kNfc;
  }
}

bool is_unicode_form(Normalizer::Kind k) {
  return k == Normalizer::Kind::kNfc || k == Normalizer::Kind::kNfkc || k == Normalizer::Kind::kNfd ||
         k == Normalizer::Kind::kNfkd;
}

// Every non-overlapping match of the step's pattern in `in`, left to right, replaced: false when there
// is none. With `matches`, each match's [begin, end) in `in` is appended to it.
bool replace_all(const Normalizer::Step& s, std::string_view in, std::string& out,
                 std::vector<std::pair<size_t, size_t>>* matches = nullptr) {
  RegexBudget budget(in.size());
  size_t pos = 0, copied = 0;
  bool any = false;
  while (pos < in.size()) {
    size_t ms, me;
    if (s.regex) {
      if (!s.regex->find(in.data(), in.size(), pos, ms, me, budget)) break;
    } else {
      ms = in.find(s.pattern, pos);
      if (ms == std::string_view::npos) break;
      me = ms + s.pattern.size();
    }
    if (me == ms) {  // an empty match replaces nothing here (the regex crate's find_iter moves on)
      pos = ms + utf8_len(static_cast<uint8_t>(in[ms]));
      continue;
    }
    if (!any) out.clear();
    any = true;
    if (matches) matches->push_back({ms, me});
    out.append(in.substr(copied, ms - copied));
    out += s.content;
    copied = pos = me;
  }
  if (any) out.append(in.substr(copied));
  return any;
}

// `in` without the White_Space characters at its start and/or end: false when there are none. The
// rest is in[b, e).
bool strip(std::string_view in, bool left, bool right, std::string& out, size_t& b, size_t& e) {
  b = 0, e = in.size();
  while (left && b < e) {
    size_t next = b;
    if (!is_white_space(next_code_point(in, next))) break;
    b = next;
  }
  while (right && e > b) {
    size_t start;
    if (!is_white_space(prev_code_point(in, e, start))) break;
    e = start;
  }
  if (b == 0 && e == in.size()) return false;
  out.assign(in.substr(b, e - b));
  return true;
}

// The span that bytes [b, e) of a text aligned by `align` stand for: the first one's start to the last
// one's end, as the library's offsets take them.
TokenSpan cover(const std::vector<TokenSpan>& align, size_t b, size_t e) { return {align[b].begin, align[e - 1].end}; }

}  // namespace

std::unique_ptr<Normalizer> Normalizer::from_json(const Reader& r, const json& v, const std::string& key) {
  auto n = std::make_unique<Normalizer>();
  read_steps(r, v, key, "normalizers", kMaxSteps, [&](const json& s, const std::string& k, const std::string& t, bool) {
    read_step(r, s, k, t, n->steps_);
  });
  if (n->steps_.empty()) return nullptr;
  return n;
}

Normalizer::~Normalizer() = default;

std::string_view Normalizer::apply(std::string_view piece, bool at_start, std::string& buf) const {
  // Two buffers taking turns: a step reads one (or `piece`) and writes the other.
  thread_local std::string spare;
  std::string_view cur = piece;
  for (const Step& s : steps_) {
    std::string& out = cur.data() == buf.data() ? spare : buf;
    bool changed = false;
    switch (s.kind) {
      case Kind::kNfc:
      case Kind::kNfkc:
      case Kind::kNfd:
      case Kind::kNfkd: changed = to_unicode_form(form_of(s.kind), cur, out); break;
      case Kind::kLowercase: changed = to_lowercase(cur, out); break;
      case Kind::kReplace: changed = replace_all(s, cur, out); break;
      case Kind::kStrip: {
        size_t b, e;
        changed = strip(cur, s.left && at_start, s.right, out, b, e);
        break;
      }
      case Kind::kPrepend:
        if (at_start && !cur.empty()) {
          std::string joined = s.content;
          joined += cur;
          out = std::move(joined);
          changed = true;
        }
        break;
    }
    if (changed) cur = out;
  }
  if (cur.data() == spare.data()) {  // the result is always in `buf` or `piece`
    buf.swap(spare);
    cur = buf;
  }
  return cur;
}

std::string_view Normalizer::apply_aligned(std::string_view piece, bool at_start, std::string& buf,
                                           std::vector<TokenSpan>& align) const {
  std::string cur(piece), out;
  std::vector<TokenSpan> next;
  auto copy = [&](size_t b, size_t e) { next.insert(next.end(), align.begin() + b, align.begin() + e); };
  for (const Step& s : steps_) {
    out.clear();
    next.clear();
    switch (s.kind) {
      case Kind::kNfc:
      case Kind::kNfkc:
      case Kind::kNfd:
      case Kind::kNfkd: {
        std::vector<FormChange> changes;
        if (!to_unicode_form(form_of(s.kind), cur, out, &changes)) continue;
        size_t in = 0;
        for (const FormChange& c : changes) {
          copy(in, c.in_begin);
          next.insert(next.end(), c.out_end - c.out_begin, cover(align, c.in_begin, c.in_end));
          in = c.in_end;
        }
        copy(in, cur.size());
        break;
      }
      case Kind::kLowercase:
        for (size_t i = 0; i < cur.size();) {
          uint32_t cp = 0;
          const size_t n = std::max<size_t>(1, valid_utf8_at(cur, i, cp));
          std::string lower;
          if (to_lowercase(std::string_view(cur).substr(i, n), lower)) {
            out += lower;
            next.insert(next.end(), lower.size(), cover(align, i, i + n));
          } else {
            out.append(cur, i, n);
            copy(i, i + n);
          }
          i += n;
        }
        break;
      case Kind::kReplace: {
        std::vector<std::pair<size_t, size_t>> matches;
        if (!replace_all(s, cur, out, &matches)) continue;
        size_t in = 0;
        for (const auto& [mb, me] : matches) {
          copy(in, mb);
          next.insert(next.end(), s.content.size(), cover(align, mb, me));
          in = me;
        }
        copy(in, cur.size());
        break;
      }
      case Kind::kStrip: {
        size_t b, e;
        if (!strip(cur, s.left && at_start, s.right, out, b, e)) continue;
        copy(b, e);
        break;
      }
      case Kind::kPrepend:
        if (!at_start || cur.empty()) continue;
        out = s.content + cur;
        next.assign(s.content.size(), align[0]);  // the library's: the first character's
        copy(0, cur.size());
        break;
    }
    cur.swap(out);
    align.swap(next);
  }
  buf.swap(cur);
  return buf;
}

bool Normalizer::unicode_only() const {
  for (const Step& s : steps_)
    if (!is_unicode_form(s.kind)) return false;
  return true;
}

bool Normalizer::space_local() const {
  for (const Step& s : steps_) {
    const bool ok = is_unicode_form(s.kind) || s.kind == Kind::kPrepend ||
                    (s.kind == Kind::kReplace && !s.regex && s.pattern == " ");
    if (!ok) return false;
  }
  return true;
}

std::string Normalizer::space_replacement() const {
  for (const Step& s : steps_)
    if (s.kind == Kind::kReplace && !s.regex && s.pattern == " ") return s.content;
  return {};
}

}  // namespace zerodp::data
