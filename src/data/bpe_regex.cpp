#include "data/bpe_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

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

Regex::Regex(const std::string& pattern, const std::string& where) : pattern_(pattern) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  const std::string compiled = oniguruma_spaces(pattern);
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(compiled.data()), compiled.size(),
                        PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &offset, nullptr);
  if (code_ == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    // (the offset is in the pattern as written only when no \s was rewritten)
    const std::string at = compiled == pattern ? fmt::format(" at offset {}", offset) : std::string();
    throw UsageError(fmt::format("{}: regex \"{}\" does not compile{}: {}", where, describe_text(pattern), at,
                                 reinterpret_cast<const char*>(msg)));
  }
  jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() { pcre2_code_free(code_); }

bool Regex::find(const char* subject, size_t n, size_t from, size_t& ms, size_t& me) const {
  Scratch& s = scratch();
  const auto* p = reinterpret_cast<PCRE2_SPTR>(subject);
  const int rc = jit_ ? pcre2_jit_match(code_, p, n, from, 0, s.data, s.context)
                      : pcre2_match(code_, p, n, from, 0, s.data, s.context);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_JIT_STACKLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
      rc == PCRE2_ERROR_HEAPLIMIT)
    throw UsageError(fmt::format("pre-tokenizer regex \"{}\" backtracks past PCRE2's limits on a text",
                                 describe_text(pattern_)));
  if (rc < 0) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, sizeof msg);
    throw RuntimeFailure(fmt::format("pre-tokenizer regex {} failed on a text: {}", describe_text(pattern_),
                                     reinterpret_cast<const char*>(msg)));
  }
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.data);
  ms = ov[0];
  me = ov[1];
  return true;
}

}  // namespace zerodp::data
