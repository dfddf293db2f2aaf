// The pre-tokenizer's regexes (bpe.h), run in PCRE2 with UTF, UCP, MATCH_INVALID_UTF and its JIT.
// `tokenizers` runs the same patterns in Oniguruma; the one difference that matters, \s, is
// rewritten when compiling (bpe_regex.cpp).
#pragma once

#include <cstddef>
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

// A compiled pattern. Matching is thread-safe: each thread has its own match data and JIT stack.
class Regex {
 public:
  // Compiles `pattern`; a UsageError naming `where` when it does not compile.
  Regex(const std::string& pattern, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  const std::string& pattern() const { return pattern_; }

  // The first match in subject[0, n) starting at or after `from`: true and [ms, me), or false.
  // Throws a UsageError when the pattern backtracks past PCRE2's limits.
  bool find(const char* subject, size_t n, size_t from, size_t& ms, size_t& me) const;

 private:
  std::string pattern_;
  pcre2_real_code_8* code_ = nullptr;
  bool jit_ = false;
};

}  // namespace zerodp::data
