// The pre-tokenizer's regexes (bpe.h), run in PCRE2 with UTF, UCP, MATCH_INVALID_UTF and its JIT.
// `tokenizers` runs the same patterns in Oniguruma; the one difference that matters, \s, is
// rewritten when compiling (bpe_regex.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

struct pcre2_real_code_8;

namespace zerodp::data {

// The pre-tokenizer regexes of GPT-2 (also ByteLevel's own when use_regex), Llama 3 and Qwen 2.
// After each of them a text may be cut after '\n' and before a letter with no change in ids
// (bpe.h: TextChunk): no alternative matches '\n' followed by a letter, and each alternative's
// lookahead is satisfied the same way by the text beyond the cut.
inline constexpr char kGpt2Pattern[] = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
inline constexpr char kLlama3Pattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr char kQwen2Pattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// True for the three patterns above.
bool cut_safe_pattern(const std::string& p);

// The work the regexes may do on one text, in steps (about a character inspected or a PCRE2
// backtracking step each): kBase plus kPerByte a byte, for each regex step of the pre-tokenizer.
// PCRE2's own limits hold per attempt, and an attempt is made at nearly every position, so a pattern
// whose lookahead scans to the end of the text ran for minutes a megabyte without one. Only the work
// beyond what Regex::find gives every attempt for free (a window of kWindow bytes and kAttemptUnits
// of PCRE2's match limit, a constant a byte) is drawn from the budget. GPT-2's, Llama 3's and Qwen 2's
// patterns draw from it only on runs of whitespace (or digits, or letters) longer than kWindow, about
// 10 steps a byte of such a run (docs/limits.md).
class RegexBudget {
 public:
  static constexpr uint64_t kBase = uint64_t{1} << 24;  // above PCRE2's default match limit (10^7)
  static constexpr uint64_t kPerByte = 256;

  // The budget of a text of `bytes` bytes that `steps` regexes run over.
  explicit RegexBudget(size_t bytes, size_t steps = 1)
      : bytes_(bytes), limit_(kBase + kPerByte * static_cast<uint64_t>(bytes) * (steps == 0 ? 1 : steps)) {}

  // Draws `steps`; false (and nothing drawn) when fewer are left.
  bool draw(uint64_t steps) {
    if (steps > limit_ - used_) return false;
    used_ += steps;
    return true;
  }
  size_t bytes() const { return bytes_; }
  uint64_t limit() const { return limit_; }
  uint64_t used() const { return used_; }

 private:
  size_t bytes_;
  uint64_t limit_;
  uint64_t used_ = 0;
};

// A compiled pattern. Matching is thread-safe: each thread has its own match data and JIT stack.
class Regex {
 public:
  // Compiles `pattern`; a UsageError naming `where` when it does not compile.
  Regex(const std::string& pattern, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  const std::string& pattern() const { return pattern_; }

  // What an unanchored search may look at beyond its start, and the PCRE2 match-limit units each of
  // its attempts may use, without drawing on the budget.
  static constexpr size_t kWindow = 256;
  static constexpr uint32_t kAttemptUnits = 1024;

  // The first match in subject[0, n) starting at or after `from`: true and [ms, me), or false; the
  // same as one PCRE2 search of the whole subject. Searches a window of the subject at a time (an
  // attempt that reaches a window's end is run again over a window twice as long); the work beyond
  // the free allowance comes from `budget`, and a UsageError naming the pattern ends a search that
  // would take more than is left, or that overflows PCRE2's JIT stack.
  bool find(const char* subject, size_t n, size_t from, size_t& ms, size_t& me, RegexBudget& budget) const;

 private:
  // One PCRE2 call on subject[0, end) from `start`; its return code, and ovector[0..1] in ms, me.
  int match(const char* subject, size_t end, size_t start, bool partial, bool anchored, uint32_t units,
            size_t& ms, size_t& me) const;
  [[noreturn]] void over_budget(const RegexBudget& budget) const;

  std::string pattern_;
  std::string where_;
  pcre2_real_code_8* code_ = nullptr;      // unanchored: a search
  pcre2_real_code_8* anchored_ = nullptr;  // compiled with PCRE2_ANCHORED (PCRE2's JIT takes no
                                           // PCRE2_ANCHORED at match time): one attempt
  bool jit_ = false;
};

}  // namespace zerodp::data
