// `zerodp tokenize` (docs/reference/files.md#text-inputs): text files and JSON Lines to token files,
// and back.
//
// Documents: a text file is one document; a JSON Lines file (name ending in .jsonl) holds one
// document per line, an object with a "text" string (blank lines are skipped; anything else is a
// UsageError naming the file and the line). The tokenizer's document tokens (document_tokens(): the
// post-processor template's, else the end-of-text token before) surround each document unless
// no_eos; the byte tokenizer has none. Inputs are read in the order given.
//
// Threads: documents, and pieces of big documents cut where the ids provably do not change
// (BpeTokenizer::chunk), are encoded in parallel; the output is the same for any thread count.
//
// Outputs: one file (out), or shards (out_prefix): P_val_000000.bin with the first val_tokens tokens
// of the stream when val_tokens > 0, then P_train_000000.bin, P_train_000001.bin, ... of
// shard_tokens tokens each, the last one shorter. uint16 tokens when the vocabulary has at most
// 65,536 ids, uint32 otherwise (data/token_writer.h). Every file is written to a temporary and all
// are published together at the end: a run that fails (a bad input line, a full disk) leaves any
// earlier output as it was. Shards of an earlier run under the same prefix beyond the new ones
// (P_train_%06d past the last, P_val_000000 when no val shard is written) are removed after the
// new ones are published, so that the prefix names one stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace zerodp::data {

constexpr int kByteVocabSize = 256;

// Reads `text_path` and writes its bytes as uint16 tokens in llm.c's layout to `out_path`,
// atomically, streaming (memory stays small whatever the text's size). Returns the token count.
// An empty text is a UsageError (a token file may not be empty).
size_t tokenize_bytes(const std::string& text_path, const std::string& out_path);

struct TokenizeOptions {
  std::vector<std::string> texts;  // inputs, in order
  std::string out;                 // one output file, or
  std::string out_prefix;          // shards P_val_000000.bin, P_train_%06d.bin
  int64_t shard_tokens = 100'000'000;
  int64_t val_tokens = 0;          // 0: no val shard
  bool no_eos = false;
  int threads = 0;                 // 0: omp_get_max_threads()
  size_t chunk_bytes = size_t{1} << 20;  // work item size (tests make it small)
  bool progress = true;            // a bar on stderr when it is a terminal
};

struct TokenizeResult {
  size_t tokens = 0;
  size_t bytes = 0;       // of input read
  size_t documents = 0;
  double seconds = 0;
  std::vector<std::string> files;  // written, in stream order
};

// Checks the options (UsageError naming the flag), opens every input, then tokenizes.
TokenizeResult tokenize_files(const Tokenizer& tok, const TokenizeOptions& opts);

// The ids of the documents of `opts.texts` (with the end-of-text tokens), as tokenize_files would
// write them: for tests.
std::vector<uint32_t> tokenize_to_ids(const Tokenizer& tok, const TokenizeOptions& opts);

// Decodes a token file (either header version, or a raw uint16 stream) to text, written atomically.
// Returns the bytes written.
size_t detokenize_file(const Tokenizer& tok, const std::string& tokens_path, const std::string& out_path);

}  // namespace zerodp::data
