// `zerodp tokenize`: text files and JSON Lines to token files, bytes or the BPE (byte-level or
// SentencePiece-style) of a Hugging Face tokenizer.json, and back with --decode (docs/reference/files.md: token files, text inputs, tokenizers).
#include <string>
#include <vector>

#include <fmt/format.h>

#include "apps/commands.h"
#include "core/error.h"
#include "core/output_path.h"
#include "data/instruction_data.h"
#include "data/instruction_tokenize.h"
#include "data/tokenize.h"
#include "data/tokenizer.h"

namespace zerodp::cli {

namespace {

struct TokenizeFlags {
  std::string tokenizer;
  std::vector<std::string> texts;
  std::string out;
  std::string out_prefix;
  int64_t shard_tokens = 100'000'000;
  int64_t val_tokens = 0;
  bool no_eos = false;
  int threads = 0;
  bool decode = false;
  std::string tokens;
  std::vector<std::string> sft;
};

void register_tokenize(CLI::App& app, Action& action) {
  static TokenizeFlags f;
  auto* cmd = app.add_subcommand(
      "tokenize",
      "Turn text into a token file (llm.c layout): bytes (V = 256) by default, or the BPE of a Hugging Face "
      "tokenizer.json; --decode turns a token file back into text");
  cmd->footer(
      "\nInputs: a text file is one document; a .jsonl file holds one document per line, an object with a \"text\" "
      "string.\nThe tokenizer's end-of-text token (<|endoftext|>, Llama 3's <|begin_of_text|>, ...) precedes each "
      "document\nunless --no-eos; the byte tokenizer has none. Tokens are uint16 when the vocabulary has at most "
      "65,536 ids\n(header [1] = 1), uint32 otherwise ([1] = 2). Files appear only when the whole run succeeded.\n"
      "--sft: a {\"messages\"} line is the chat template's text encoded as transformers' apply_chat_template "
      "encodes it\n(no end-of-text token before it: the template writes its own).\n"
      "Examples:\n"
      "  zerodp tokenize --text data/tinyshakespeare.txt --out shakespeare.bin\n"
      "  zerodp tokenize --tokenizer data/tokenizers/shakespeare-bpe-1024/tokenizer.json --text a.txt b.jsonl \\\n"
      "      --out-prefix data/shakespeare --val-tokens 30000\n"
      "  zerodp tokenize --decode --tokenizer tokenizer.json --tokens shakespeare.bin --out back.txt\n"
      "  zerodp tokenize --tokenizer model/tokenizer.json --sft chats.jsonl --out sft.bin");
  cmd->add_option("--tokenizer", f.tokenizer,
                  "Hugging Face tokenizer.json of a byte-level BPE (GPT-2, Llama 3, Qwen 2.5, ...) or a SentencePiece-style "
                  "one (Llama 2, Mistral); without it, one token per byte (V = 256)");
  cmd->add_option("--text", f.texts, "Input text files and .jsonl files, read in the order given");
  cmd->add_option("--out", f.out, "Output: one token file (with --decode: the text file)");
  cmd->add_option("--out-prefix", f.out_prefix,
                  "Output shards PREFIX_val_000000.bin (the first --val-tokens tokens) and PREFIX_train_000000.bin, "
                  "... (shards of an earlier run past the new ones are removed)");
  cmd->add_option("--shard-tokens", f.shard_tokens, "Tokens per train shard (the last is shorter)")
      ->capture_default_str();
  cmd->add_option("--val-tokens", f.val_tokens, "Tokens of the val shard, taken from the start of the stream; 0: none")
      ->capture_default_str();
  cmd->add_flag("--no-eos", f.no_eos, "Put no end-of-text token before each document");
  cmd->add_option("--threads", f.threads, "Encoding threads (default: all cores, or OMP_NUM_THREADS); the output does "
                                          "not depend on it");
  cmd->add_option("--sft", f.sft,
                  "Instruction data: JSON Lines of {\"prompt\", \"completion\"} (targets: the completion and the "
                  "end-of-text token) or {\"messages\": [{\"role\", \"content\"}, ...]} (rendered with the chat "
                  "template of the tokenizer_config.json beside --tokenizer; targets: the assistant's tokens), written "
                  "to --out with the labels file beside it");
  cmd->add_flag("--decode", f.decode, "Decode --tokens into the text file --out");
  cmd->add_option("--tokens", f.tokens, "With --decode: the token file to decode");
  cmd->callback([&action] {
    action = [] {
      // The outputs before the tokenizer and the text: a bad --out fails at once, not after the encoding.
      check_output_path(f.out, OutputKind::kFile, "--out");
      check_output_path(f.out_prefix, OutputKind::kPrefix, "--out-prefix");
      const auto tok = f.tokenizer.empty() ? data::byte_tokenizer() : data::load_tokenizer(f.tokenizer);
      if (f.decode) {
        ZDP_REQUIRE(!f.tokens.empty(), "tokenize --decode: give the token file with --tokens");
        ZDP_REQUIRE(!f.out.empty(), "tokenize --decode: give the text file to write with --out");
        ZDP_REQUIRE(f.texts.empty() && f.out_prefix.empty(),
                    "tokenize --decode: --text and --out-prefix are for encoding, not with --decode");
        const size_t n = data::detokenize_file(*tok, f.tokens, f.out);
        fmt::print("wrote {}: {} bytes decoded from {} ({})\n", f.out, n, f.tokens, tok->describe());
        return 0;
      }
      if (!f.sft.empty()) {
        ZDP_REQUIRE(f.texts.empty() && f.out_prefix.empty() && !f.out.empty(),
                    "tokenize --sft: give one --out FILE (its labels go beside it), without --text or --out-prefix");
        const data::InstructionFormat format = data::instruction_format(*tok, f.tokenizer);
        const data::InstructionTokens t = data::tokenize_instructions(*tok, f.sft, format);
        data::write_instruction_files(f.out, t, tok->vocab_size());
        fmt::print("wrote {} and {}: {} examples ({} conversations), {} tokens, {} targets ({})\n", f.out,
                   data::labels_path_for(f.out), t.examples, t.conversations, t.ids.size(), t.targets, tok->describe());
        return 0;
      }
      ZDP_REQUIRE(f.tokens.empty(), "tokenize: --tokens is for --decode; the inputs to encode are --text");
      ZDP_REQUIRE(!f.texts.empty(), "tokenize: give the input files with --text");
      ZDP_REQUIRE(!(f.out.empty() && f.out_prefix.empty()), "tokenize: give --out FILE or --out-prefix PREFIX");
      ZDP_REQUIRE(f.out.empty() || f.out_prefix.empty(), "tokenize: --out and --out-prefix do not go together");
      ZDP_REQUIRE(f.shard_tokens > 0, "tokenize: --shard-tokens must be positive, got {}", f.shard_tokens);
      ZDP_REQUIRE(f.val_tokens >= 0, "tokenize: --val-tokens must not be negative, got {}", f.val_tokens);
      ZDP_REQUIRE(f.threads >= 0, "tokenize: --threads must be positive, got {}", f.threads);
      data::TokenizeOptions o;
      o.texts = f.texts;
      o.out = f.out;
      o.out_prefix = f.out_prefix;
      o.shard_tokens = f.shard_tokens;
      o.val_tokens = f.val_tokens;
      o.no_eos = f.no_eos;
      o.threads = f.threads;
      const data::TokenizeResult r = data::tokenize_files(*tok, o);
      const std::string where = r.files.size() == 1 ? r.files[0] : fmt::format("{} files {}_*.bin", r.files.size(), f.out_prefix);
      fmt::print("wrote {}: {} tokens (vocabulary {}) from {} document{}, {:.1f} MB in {:.2f} s, {:.1f} MB/s ({})\n",
                 where, r.tokens, tok->vocab_size(), r.documents, r.documents == 1 ? "" : "s", r.bytes / 1e6, r.seconds,
                 r.seconds > 0 ? r.bytes / 1e6 / r.seconds : 0.0, tok->describe());
      return 0;
    };
  });
}

const CommandRegistration tokenize_registration(30, register_tokenize);

}  // namespace

}  // namespace zerodp::cli
