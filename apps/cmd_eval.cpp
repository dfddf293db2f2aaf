// `zerodp eval`: a trained model's validation loss (docs/reference/data-order.md#validation), or its accuracy on multiple-choice
// items (train/evaluate.h), on one process in fp32.
//   zerodp eval --model M --data PATH --tokens E --seq T [--micro-batch B] [--metrics out.jsonl]
//       prints "val_loss X" and "tokens N": the mean token cross-entropy over the first ⌊E/T⌋
//       windows of T tokens of PATH (a file, directory or glob), training's --val-data number;
//   zerodp eval --model M --choices FILE.jsonl [--tokenizer tokenizer.json] [--metrics out.jsonl]
//       prints "accuracy X (c/n)".
// --metrics writes one JSON line: {"event":"eval","val_loss":x,"tokens":n} or
// {"event":"choices","accuracy":x,"correct":c,"total":n}.
#include <cstdint>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/output_path.h"
#include "train/evaluate.h"

namespace zerodp::cli {
namespace {

std::string g_model, g_data, g_choices, g_tokenizer, g_metrics;
int64_t g_tokens = 0, g_seq = 0, g_micro_batch = 1;

void write_metrics(const nlohmann::json& j) {
  if (!g_metrics.empty()) write_file_atomic(g_metrics, j.dump() + "\n");
}

int run_eval() {
  check_output_path(g_metrics, OutputKind::kFile, "--metrics");
  ZDP_REQUIRE(g_data.empty() != g_choices.empty(),
              "zerodp eval needs exactly one of --data (validation loss) and --choices (multiple choice)");
  if (!g_data.empty()) {
    ZDP_REQUIRE(g_tokens > 0, "--tokens E is required with --data: the validation tokens to evaluate");
    ZDP_REQUIRE(g_seq > 0, "--seq T is required with --data: the tokens of one window");
    ZDP_REQUIRE(g_tokenizer.empty(), "--tokenizer is for --choices (--data holds tokens already)");
    const train::EvalResult r = train::evaluate_model_file(g_model, g_data, g_tokens, g_seq, g_micro_batch);
    fmt::print("val_loss {:.9g}\ntokens {}\n", r.val_loss, r.tokens);
    write_metrics({{"event", "eval"}, {"val_loss", r.val_loss}, {"tokens", r.tokens}});
    return 0;
  }
  ZDP_REQUIRE(g_tokens == 0 && g_seq == 0, "--tokens and --seq are for --data (--choices scores whole items)");
  const train::ChoiceResult r = train::score_choices(g_model, g_choices, g_tokenizer);
  fmt::print("accuracy {:.6f} ({}/{})\n", r.accuracy(), r.correct, r.total);
  write_metrics({{"event", "choices"}, {"accuracy", r.accuracy()}, {"correct", r.correct}, {"total", r.total}});
  return 0;
}

void register_eval(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "eval", "A trained model's validation loss on token data, or its accuracy on multiple-choice items (fp32)");
  cmd->add_option("--model", g_model, "Model weights: a GPT-2 safetensors file or a Hugging Face model directory")
      ->required();
  cmd->add_option("--data", g_data,
                  "Validation tokens: a token file, a directory of *.bin or a glob (as train's --val-data)");
  cmd->add_option("--tokens", g_tokens, "With --data: evaluate floor(E/T) windows of T tokens from its start");
  cmd->add_option("--seq", g_seq, "With --data: T, the tokens of one window (at most the model's context)");
  cmd->add_option("--micro-batch", g_micro_batch, "With --data: windows a forward pass")->capture_default_str();
  cmd->add_option("--choices", g_choices,
                  "JSON Lines of {\"context\", \"endings\": [...], \"label\"}: each ending scored by the mean loss of "
                  "its tokens after the context's (each text encoded on its own); the lowest wins");
  cmd->add_option("--tokenizer", g_tokenizer,
                  "With --choices: Hugging Face tokenizer.json (byte-level BPE); without it, bytes (V = 256)");
  cmd->add_option("--metrics", g_metrics, "Also write the result as one JSON line to this file");
  cmd->callback([&action] { action = run_eval; });
}
const CommandRegistration eval_registration(55, register_eval);

}  // namespace
}  // namespace zerodp::cli
