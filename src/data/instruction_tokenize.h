// `zerodp tokenize --sft`: instruction data in JSON Lines to a token file and its labels
// (data/instruction_data.h; docs/reference/files.md#instruction-data). A line is an example in one of
// TRL's formats:
//   {"prompt": P, "completion": C}: the tokenizer's document tokens (Llama 2's <s>), P's tokens, C's
//     tokens and the end-of-text token; the targets are C's tokens and the end-of-text token.
//   {"messages": [...]}: rendered with the model's chat template (not yet: refused by name).
// P and C are encoded apart, so the prompt's tokens never depend on the completion's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace zerodp::data {

struct InstructionTokens {
  std::vector<uint32_t> ids;
  std::vector<uint8_t> labels;  // kTargetLabel, kExampleStartLabel (data/instruction_data.h)
  size_t examples = 0;
  size_t targets = 0;
};

// The end-of-text token a completion ends with: tokenizer_config.json's eos_token beside the
// tokenizer.json at `tokenizer_path` when there is one (a string or {"content": ...}, which must be
// one token of the tokenizer), else the tokenizer's own end-of-text token. UsageError when there is
// neither.
uint32_t completion_end_token(const Tokenizer& tok, const std::string& tokenizer_path);

// The examples of the JSON Lines files `paths`, in order (blank lines skipped). UsageError naming the
// file and line of a line that is not one of the formats.
InstructionTokens tokenize_instructions(const Tokenizer& tok, const std::vector<std::string>& paths,
                                        uint32_t end_token);

// Writes `out` (a token file) and its labels file beside it, atomically each; UsageError when there
// is no example.
void write_instruction_files(const std::string& out, const InstructionTokens& t, int64_t vocab_size);

}  // namespace zerodp::data
