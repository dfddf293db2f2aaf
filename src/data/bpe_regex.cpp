#include "data/bpe_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"
#include "core/json.h"

namespace zerodp::data {

namespace {

// `tokenizers` runs its regexes in Oniguruma, whose \s is Unicode's White_Space; PCRE2's (with UCP)
// also takes U+180E MONGOLIAN VOWEL SEPARATOR. \s and \S become \p{White_Space} and \P{White_Space}
// (inside character classes too); escaped backslashes and \Q...\E stay as written.
std::string oniguruma_spaces(const std::string& p) {
  std::string out;
  out.reserve(p.size() + 32);
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] != '\\' || i + 1 == p.size()) {
      out += p[i];
      continue;
    }
    const char c = p[i + 1];
    if (c == 's' || c == 'S') {
      out += c == 's' ? "\\p{White_Space}" : "\\P{White_Space}";
    } else if (c == 'Q') {
      const size_t e = p.find("\\E", i + 2);
      const size_t stop = e == std::string::npos ? p.size() : e + 2;
      out.append(p, i, stop - i);
      i = stop - 1;
      continue;
    } else {
      out += '\\';
      out += c;
    }
    ++i;
  }
  return out;
}

// Match data and a JIT stack per thread (a match never re-enters another one).
struct Scratch {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  Scratch() {
    data = pcre2_match_data_create(4, nullptr);
    context = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(32 << 10, 8 << 20, nullptr);
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~Scratch() {
    pcre2_match_data_free(data);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
  }
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

}  // namespace

bool cut_safe_pattern(const std::string& p) { return p == kGpt2Pattern || p == kLlama3Pattern || p == kQwen2Pattern; }

Regex::Regex(const std::string& pattern, const std::string& where) : pattern_(pattern), where_(where) {
  const std::string compiled = oniguruma_spaces(pattern);
  for (pcre2_code** code : {&code_, &anchored_}) {
    int err = 0;
    PCRE2_SIZE offset = 0;
    const uint32_t anchored = code == &anchored_ ? PCRE2_ANCHORED : 0;
    *code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(compiled.data()), compiled.size(),
                          PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | anchored, &err, &offset, nullptr);
    if (*code == nullptr) {
      pcre2_code_free(code_);
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      // (the offset is in the pattern as written only when no \s was rewritten)
      const std::string at = compiled == pattern ? fmt::format(" at offset {}", offset) : std::string();
      throw UsageError(fmt::format("{}: regex \"{}\" does not compile{}: {}", where, describe_text(pattern), at,
                                   reinterpret_cast<const char*>(msg)));
    }
  }
  jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE | PCRE2_JIT_PARTIAL_HARD) == 0 &&
         pcre2_jit_compile(anchored_, PCRE2_JIT_COMPLETE | PCRE2_JIT_PARTIAL_HARD) == 0;
}

Regex::~Regex() {
  pcre2_code_free(code_);
  pcre2_code_free(anchored_);
}

int Regex::match(const char* subject, size_t end, size_t start, bool partial, bool anchored, uint32_t units,
                 size_t& ms, size_t& me) const {
  Scratch& s = scratch();
  pcre2_set_match_limit(s.context, units);
  pcre2_code* code = anchored ? anchored_ : code_;
  const uint32_t options = partial ? PCRE2_PARTIAL_HARD : 0;
  const auto* p = reinterpret_cast<PCRE2_SPTR>(subject);
  const int rc = jit_ ? pcre2_jit_match(code, p, end, start, options, s.data, s.context)
                      : pcre2_match(code, p, end, start, options, s.data, s.context);
  if (rc >= 0 || rc == PCRE2_ERROR_PARTIAL) {
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.data);
    ms = ov[0];
    me = ov[1];
  }
  return rc;
}

void Regex::over_budget(const RegexBudget& budget) const {
  throw UsageError(fmt::format(
      "{}: regex \"{}\" needs more work than a text of {} bytes is allowed ({} steps): it rescans or backtracks "
      "over the text at nearly every position (a lookahead that reaches far ahead?); docs/limits.md",
      where_, describe_text(pattern_), budget.bytes(), budget.limit()));
}

namespace {

// Where a search restarted at p makes its first attempt: p, or past the continuation bytes there. One
// PCRE2 search steps from a character to the next lead byte, past every continuation byte, stray ones
// too, so it never tries a match at one; a search started at one sees the character before it and may
// match an empty item (\b) there. (Invalid lead bytes, 0xF8-0xFF, it does try.)
size_t restart_at(const char* subject, size_t n, size_t p) {
  while (p < n && (static_cast<uint8_t>(subject[p]) & 0xC0) == 0x80) ++p;
  return p;
}

}  // namespace

bool Regex::find(const char* subject, size_t n, size_t from, size_t& ms, size_t& me, RegexBudget& budget) const {
  // An unanchored search over [start, start + kWindow) with kAttemptUnits an attempt costs at most a
  // constant for each position it passes, so it is free. An attempt that reaches the window's end
  // (PCRE2_PARTIAL_HARD: it might match otherwise with more text) is run again alone, anchored, over a
  // window twice as long; one that runs out of match-limit units is run again with 8 times as many.
  // Those runs are drawn from the budget: the window's length plus the units, for each attempt they
  // may make.
  size_t start = from, span = kWindow;
  uint32_t units = kAttemptUnits;
  bool anchored = false;
  for (;;) {
    size_t end = span >= n - std::min(n, start) ? n : start + span;
    // A window ends at a lead byte (or the text's end), past every continuation byte there: PCRE2 (with
    // MATCH_INVALID_UTF) takes a character cut by the end for an invalid one, which no item matches,
    // rather than for the end of the subject; and one search of the whole text never tries a match at
    // a continuation byte, stray ones too, where a window's end (a partial match) would.
    end = restart_at(subject, n, end);
    const int rc = match(subject, end, start, end < n, anchored, units, ms, me);
    if (anchored || units > kAttemptUnits || span > kWindow) {
      // positions an unanchored run may try: [start, end]
      const uint64_t attempts = anchored ? 1 : end - start + 1;
      if (!budget.draw(attempts * (end - start + uint64_t{units}))) over_budget(budget);
    }
    if (rc >= 0) return true;
    switch (rc) {
      case PCRE2_ERROR_NOMATCH:
        if (anchored) {
          // No match at `start` whatever follows: search on from the next byte (PCRE2 moves from inside
          // a character to the next one, as its own search would).
          start = restart_at(subject, n, start + 1);
          anchored = false;
          span = kWindow;
          units = kAttemptUnits;
          if (start > n) return false;
        } else if (end == n) {
          return false;
        } else {
          start = end;  // no attempt in [start, end) can match; one at `end` has not been made
        }
        continue;
      case PCRE2_ERROR_PARTIAL:
        // The attempt at ms (at or after start) needs what lies beyond the window.
        start = std::max(start, ms);
        span = 2 * std::max(span, end - start);
        anchored = true;
        continue;
      case PCRE2_ERROR_MATCHLIMIT:
        if (units > std::numeric_limits<uint32_t>::max() / 8) over_budget(budget);
        units *= 8;
        continue;
      case PCRE2_ERROR_JIT_STACKLIMIT:
      case PCRE2_ERROR_DEPTHLIMIT:
      case PCRE2_ERROR_HEAPLIMIT:
        throw UsageError(fmt::format("{}: regex \"{}\" backtracks past PCRE2's limits on a text", where_,
                                     describe_text(pattern_)));
      default: {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof msg);
        throw RuntimeFailure(fmt::format("{}: regex \"{}\" failed on a text: {}", where_, describe_text(pattern_),
                                         reinterpret_cast<const char*>(msg)));
      }
    }
  }
}

}  // namespace zerodp::data
