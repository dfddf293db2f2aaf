// libFuzzer target: zerodp::data::Regex::find, the pre-tokenizer's regex search that runs PCRE2 a
// window at a time and draws the work beyond a constant a byte from a per-text budget (bpe_regex.h).
// The input is a pattern, a NUL byte, then the text. Every match find() gives, up to the end of the
// text or a UsageError (over the budget), must equal what one PCRE2 search of the whole text from
// the same position finds, with the same stepping as the pre-tokenizer (after an empty match, on
// to the next character). Patterns with \s, \S or \Q are left to the tokenizer target (find() runs
// them rewritten to Oniguruma's spaces, the reference here would not); so are those with \C, one
// code unit, which PCRE2 says is unpredictable in UTF mode (without the JIT, which does not take it
// with MATCH_INVALID_UTF, find() and a whole-text search disagreed on invalid UTF-8).
// Seeds (corpus/regex/): GPT-2's, Llama 3's and Qwen 2's patterns on runs longer than the window,
// lookaheads and lookbehinds across a window's edge, a rescanning lookahead, empty matches, \b and $.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "data/bpe.h"
#include "data/bpe_regex.h"
#include "data/byte_level.h"
#include "fuzz/fuzz_common.h"

namespace {

// The reference: one PCRE2 search of all of the text, PCRE2's default limits, with the JIT as Regex
// has it (PCRE2 10.42's interpreter and JIT can disagree between invalid UTF-8 bytes: `\b|a*` from
// inside a run of stray continuation bytes matches there in the JIT, after the run in the interpreter).
class Whole {
 public:
  explicit Whole(const std::string& pattern) {
    int err = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                          PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &offset, nullptr);
    if (code_ != nullptr) pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);
    data_ = pcre2_match_data_create(4, nullptr);
  }
  ~Whole() {
    pcre2_code_free(code_);
    pcre2_match_data_free(data_);
  }
  // 1: a match [ms, me); 0: none; -1: PCRE2 gave up (a limit), nothing to compare.
  int find(std::string_view text, size_t from, size_t& ms, size_t& me) const {
    const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), from, 0, data_, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) return 0;
    if (rc < 0) return -1;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data_);
    ms = ov[0];
    me = ov[1];
    return 1;
  }
  bool ok() const { return code_ != nullptr; }

 private:
  pcre2_code* code_ = nullptr;
  pcre2_match_data* data_ = nullptr;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  if (nul == std::string_view::npos || nul > zerodp::data::BpeLimits::kMaxPatternBytes) return 0;
  const std::string pattern(input.substr(0, nul));
  const std::string_view text = input.substr(nul + 1);
  for (size_t i = 0; i + 1 < pattern.size(); ++i)
    if (pattern[i] == '\\' && (pattern[i + 1] == 's' || pattern[i + 1] == 'S' || pattern[i + 1] == 'Q' || pattern[i + 1] == 'C'))
      return 0;
  zerodp::fuzz::only_zerodp_errors("regex", [&] {
    const zerodp::data::Regex re(pattern, "fuzz");
    const Whole whole(pattern);
    if (!whole.ok()) zerodp::fuzz::property_failed("regex", "a pattern Regex compiles, PCRE2 does not");
    zerodp::data::RegexBudget budget(text.size());
    size_t pos = 0;
    while (pos <= text.size()) {
      size_t ms = 0, me = 0, rs = 0, re_end = 0;
      const bool found = re.find(text.data(), text.size(), pos, ms, me, budget);
      const int ref = whole.find(text, pos, rs, re_end);
      if (ref < 0) return;
      if (found != (ref == 1)) zerodp::fuzz::property_failed("regex", "find() and a whole-text search disagree on a match");
      if (!found) return;
      if (ms != rs || me != re_end) zerodp::fuzz::property_failed("regex", "find() and a whole-text search find different matches");
      if (ms == text.size()) return;
      pos = me > ms ? me : ms + zerodp::data::utf8_len(static_cast<uint8_t>(text[ms]));
    }
  });
  return 0;
}
