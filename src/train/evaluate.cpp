#include "train/evaluate.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ckpt/model_source.h"
#include "core/checked.h"
#include "core/error.h"
#include "core/json.h"
#include "core/fs.h"
#include "core/memory.h"
#include "data/tokenizer.h"
#include "model/model.h"
#include "train/train_config.h"

namespace zerodp::train {

uint64_t validation_windows(const data::TokenStream& val, int64_t eval_tokens, int64_t seq, const std::string& flag) {
  ZDP_REQUIRE(seq > 0, "--seq must be positive, got {}", seq);
  ZDP_REQUIRE(eval_tokens >= 0, "{} must be >= 0 (0: the default), got {}", flag, eval_tokens);
  const uint64_t N = val.size(), T = static_cast<uint64_t>(seq);
  if (eval_tokens == 0) {
    const uint64_t K = std::min<uint64_t>(static_cast<uint64_t>(kDefaultEvalTokens), N - 1) / T;
    ZDP_REQUIRE(K >= 1, "{}: {} tokens hold no validation window of --seq {} tokens (it needs {} tokens: T + 1)",
                val.describe(), N, seq, T + 1);
    return K;
  }
  const uint64_t E = static_cast<uint64_t>(eval_tokens);
  ZDP_REQUIRE(E >= T, "{} {} is less than one window of --seq {} tokens", flag, eval_tokens, seq);
  const uint64_t K = E / T;
  ZDP_REQUIRE(N >= K * T + 1,
              "{} {} asks for {} windows of {} tokens, which need {} tokens of validation data (K*T + 1), but {} "
              "holds {} (at most {} {} at --seq {})",
              flag, eval_tokens, K, T, K * T + 1, val.describe(), N, flag, (N - 1) / T * T, seq);
  return K;
}

double counted_loss_sum(const data::EvalWindows& split, const std::vector<double>& sums) {
  const int B = static_cast<int>(sums.size() / std::max<uint64_t>(split.passes(), 1));
  ZDP_CHECK(sums.size() == split.passes() * static_cast<uint64_t>(B), "{} sums for {} passes", sums.size(),
            split.passes());
  double total = 0;
  for (uint64_t p = 0; p < split.passes(); ++p)
    for (int b = 0; b < B; ++b)
      if (split.window(p, b) >= 0) total += sums[p * static_cast<uint64_t>(B) + static_cast<uint64_t>(b)];
  return total;
}

namespace {

// Every rank's sum, added in rank order (the same bits on every rank): all-gathered as bytes, outside
// the traffic ledger.
double sum_in_rank_order(comm::Communicator& world, double mine) {
  const int W = world.size();
  std::vector<double> all(static_cast<size_t>(W));
  {
    const comm::UntrackedTraffic untracked(world);
    world.all_gather_bytes(&mine, all.data(), sizeof(double));
  }
  double total = 0;
  for (double x : all) total += x;
  return total;
}

// The summed token losses of the sequences `split` shares out (windows or examples), `load` filling
// each pass: every rank's counted slots, added in rank order.
double loss_sum(zero::Engine& engine, comm::Communicator& world, const data::EvalWindows& split,
                const zero::EvalSource& load) {
  return sum_in_rank_order(world, counted_loss_sum(split, engine.evaluate(split.passes(), load)));
}

}  // namespace

double validation_loss(zero::Engine& engine, comm::Communicator& world, const data::TokenStream& val,
                       uint64_t windows) {
  const int B = engine.config().micro_batch, T = engine.config().seq;
  const data::EvalWindows split(windows, world.size(), world.rank(), B, T);
  const double total = loss_sum(engine, world, split, [&](uint64_t pass, int32_t* inputs, int32_t* targets) {
    split.load(val, pass, inputs, targets);
  });
  return total / (static_cast<double>(windows) * static_cast<double>(T));
}

uint64_t validation_examples(const data::InstructionData& val, int64_t eval_tokens, int64_t seq,
                             const std::string& flag) {
  const uint64_t E = val.examples();
  const uint64_t K = eval_tokens > 0 ? std::min<uint64_t>(E, static_cast<uint64_t>(eval_tokens / seq)) : E;
  ZDP_REQUIRE(K > 0, "{} {} with --seq {}: not one sequence of validation examples (each example takes a sequence)",
              flag, eval_tokens, seq);
  ZDP_REQUIRE(validation_targets(val, K, static_cast<int>(seq)) > 0,
              "validation data '{}': its first {} examples hold no target within --seq {} + 1 tokens",
              val.token_file().path(), K, seq);
  return K;
}

uint64_t validation_targets(const data::InstructionData& val, uint64_t examples, int seq) {
  uint64_t targets = 0;
  for (uint64_t e = 0; e < examples; ++e) targets += val.targets_within(static_cast<size_t>(e), seq);
  return targets;
}

double validation_loss(zero::Engine& engine, comm::Communicator& world, const data::InstructionData& val,
                       uint64_t examples) {
  const int B = engine.config().micro_batch, T = engine.config().seq;
  const data::EvalWindows split(examples, world.size(), world.rank(), B, T);
  const double total = loss_sum(engine, world, split, [&](uint64_t pass, int32_t* inputs, int32_t* targets) {
    for (int b = 0; b < B; ++b) {
      const int64_t q = split.window(pass, b);
      const size_t e = static_cast<size_t>(q < 0 ? 0 : q);  // padding: example 0 again, not counted
      val.fill_row(e, e + 1, T, false, inputs + static_cast<size_t>(b) * T, targets + static_cast<size_t>(b) * T,
                   nullptr);
    }
  });
  return total / static_cast<double>(validation_targets(val, examples, T));
}

ValidationSet::ValidationSet(const std::string& spec, int vocab_size, int64_t eval_tokens, int64_t seq,
                             const std::string& flag)
    : seq_(seq) {
  if (data::InstructionData::present(spec)) {
    examples_ = std::make_unique<data::InstructionData>(data::InstructionData::open(spec, vocab_size));
    count_ = validation_examples(*examples_, eval_tokens, seq, flag);
    tokens_ = validation_targets(*examples_, count_, static_cast<int>(seq));
  } else {
    stream_ = std::make_unique<data::TokenStream>(data::TokenStream::open(spec, vocab_size));
    count_ = validation_windows(*stream_, eval_tokens, seq, flag);
    tokens_ = count_ * static_cast<uint64_t>(seq);
  }
}

double ValidationSet::loss(zero::Engine& engine, comm::Communicator& world) const {
  return examples_ ? validation_loss(engine, world, *examples_, count_)
                   : validation_loss(engine, world, *stream_, count_);
}

std::string ValidationSet::describe() const {
  if (examples_)
    return fmt::format("{} examples ({} targets) of '{}'", count_, tokens_, examples_->token_file().path());
  return fmt::format("{} windows of {} tokens ({} tokens) of {}", count_, seq_, tokens_, stream_->describe());
}

void check_inference_memory(const model::ModelConfig& mc, int64_t B, int64_t T, const std::string& path,
                            std::string_view job, std::string_view remedy) {
  const uint64_t have = physical_memory_bytes();
  if (have == 0) return;  // unknown: nothing to compare with
  // The attention's probabilities alone ([B, heads, T, T] a layer): refused before they are sized in full.
  const CheckedSize probs = CheckedSize(mc.n_layer()) * mc.n_head() * B * T * T * 4;
  ZDP_REQUIRE(probs.within(static_cast<int64_t>(std::min<uint64_t>(have, uint64_t{1} << 62))),
              "'{}': {} {} with {} x {} tokens needs more than this machine's {} of memory for the attention's "
              "activations alone: give {}",
              path, job, model::model_name(mc), B, T, format_bytes(have), remedy);
  const uint64_t params = static_cast<uint64_t>(mc.param_count()) * sizeof(float);
  const uint64_t acts = model::model_activation_bytes(mc, static_cast<int>(B), static_cast<int>(T));
  ZDP_REQUIRE(params + acts <= have,
              "'{}': {} {} needs {} ({} of fp32 weights and {} of activations for {} x {} tokens), more than this "
              "machine's {} of memory: give {}",
              path, job, model::model_name(mc), format_bytes(params + acts), format_bytes(params), format_bytes(acts),
              B, T, format_bytes(have), remedy);
}

EvalResult evaluate_model_file(const std::string& model_path, const std::string& data, int64_t eval_tokens,
                               int64_t seq, int64_t micro_batch) {
  // train's bounds on the same flags (TrainConfig::validate_files_and_batch), then the machine's memory,
  // all before a weight is read or an activation allocated.
  ZDP_REQUIRE(micro_batch > 0 && micro_batch <= TrainConfig::kMaxMicroBatch,
              "--micro-batch must be in [1, {}], got {}", TrainConfig::kMaxMicroBatch, micro_batch);
  ZDP_REQUIRE(seq > 0 && seq <= TrainConfig::kMaxSeq, "--seq must be in [1, {}], got {}", TrainConfig::kMaxSeq, seq);
  ZDP_REQUIRE(micro_batch * seq <= TrainConfig::kMaxTokensPerMicroBatch,
              "--micro-batch {} x --seq {} = {} tokens per forward pass, over the {} allowed", micro_batch, seq,
              micro_batch * seq, TrainConfig::kMaxTokensPerMicroBatch);
  {
    const ckpt::ModelSource source = ckpt::ModelSource::open(model_path);  // validated in full; reads no weight
    const model::ModelConfig& mc = source.config();
    ZDP_REQUIRE(seq <= mc.n_ctx(), "--seq {} exceeds the model's context n_ctx = {} ('{}')", seq, mc.n_ctx(),
                model_path);
    check_inference_memory(mc, micro_batch, seq, model_path, "evaluating", "a smaller --micro-batch or --seq");
  }
  const ckpt::ResidentWeights m(model_path);
  const model::ModelConfig& mc = m.config();
  const data::TokenStream val = data::TokenStream::open(data, mc.vocab_size());
  EvalResult r;
  r.windows = validation_windows(val, eval_tokens, seq, "--tokens");
  r.tokens = r.windows * static_cast<uint64_t>(seq);
  const int B = static_cast<int>(micro_batch), T = static_cast<int>(seq);
  const data::EvalWindows split(r.windows, 1, 0, B, T);
  const auto net = model::make_model<float>(m.layout(), B, T);
  model::ResidentUnits<float> access = m.access();
  std::vector<int32_t> inputs(static_cast<size_t>(B) * T), targets(inputs.size());
  std::vector<double> sums;
  for (uint64_t p = 0; p < split.passes(); ++p) {
    split.load(val, p, inputs.data(), targets.data());
    net->forward(inputs.data(), targets.data(), nullptr, access);
    const auto& losses = net->host_losses();
    for (int b = 0; b < B; ++b) {
      double sum = 0;
      for (int t = 0; t < T; ++t) sum += static_cast<double>(losses[static_cast<size_t>(b) * T + t]);
      sums.push_back(sum);
    }
  }
  r.val_loss = counted_loss_sum(split, sums) / static_cast<double>(r.tokens);
  return r;
}

// ---- multiple choice -----------------------------------------------------------------------------------

namespace {

struct ChoiceItem {
  size_t line = 0;  // 1-based, for messages
  std::vector<uint32_t> context;
  std::vector<std::vector<uint32_t>> endings;
  size_t label = 0;
};

std::vector<ChoiceItem> read_choices(const std::string& path, const data::Tokenizer& tok) {
  const std::string text = read_small_file(path, kMaxChoiceFileBytes);
  std::vector<ChoiceItem> items;
  size_t line_no = 0;
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    ++line_no;
    const std::string_view line(text.data() + begin, end - begin);
    begin = end + 1;
    const auto where = [&] { return fmt::format("'{}' line {}", path, line_no); };
    ZDP_REQUIRE(line.size() <= kMaxChoiceLineBytes, "{}: {} bytes, over the {} allowed a line", where(), line.size(),
                kMaxChoiceLineBytes);
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    JsonLimits limits;
    limits.max_depth = 4;  // {"endings": [...]}: nothing deeper
    const nlohmann::json j = parse_json(line, where(), limits);
    ZDP_REQUIRE(j.is_object(), "{}: expected an object {{\"context\", \"endings\", \"label\"}}", where());
    const auto ctx = j.find("context");
    const auto ends = j.find("endings");
    const auto label = j.find("label");
    ZDP_REQUIRE(ctx != j.end() && ctx->is_string(), "{}: \"context\" must be a string", where());
    ZDP_REQUIRE(ends != j.end() && ends->is_array() && !ends->empty(), "{}: \"endings\" must be a non-empty array",
                where());
    ZDP_REQUIRE(ends->size() <= kMaxEndings, "{}: {} endings, over the {} allowed", where(), ends->size(), kMaxEndings);
    ZDP_REQUIRE(label != j.end() && label->is_number_integer() && label->get<int64_t>() >= 0 &&
                    label->get<int64_t>() < static_cast<int64_t>(ends->size()),
                "{}: \"label\" must be an integer in [0, {})", where(), ends->size());
    ChoiceItem item;
    item.line = line_no;
    item.label = static_cast<size_t>(label->get<int64_t>());
    item.context = tok.encode(ctx->get_ref<const std::string&>());
    ZDP_REQUIRE(!item.context.empty(), "{}: the context encodes to no token (an ending's first token needs one before it)",
                where());
    for (size_t e = 0; e < ends->size(); ++e) {
      const nlohmann::json& x = (*ends)[e];
      ZDP_REQUIRE(x.is_string(), "{}: ending {} must be a string", where(), e);
      item.endings.push_back(tok.encode(x.get_ref<const std::string&>()));
      ZDP_REQUIRE(!item.endings.back().empty(), "{}: ending {} encodes to no token", where(), e);
    }
    items.push_back(std::move(item));
  }
  ZDP_REQUIRE(!items.empty(), "'{}' holds no item", path);
  return items;
}

}  // namespace

ChoiceResult score_choices(const std::string& model_path, const std::string& choices_path,
                           const std::string& tokenizer_path) {
  const std::unique_ptr<data::Tokenizer> tok =
      tokenizer_path.empty() ? data::byte_tokenizer() : data::load_tokenizer(tokenizer_path);
  const ckpt::ResidentWeights m(model_path);
  const model::ModelConfig& mc = m.config();
  ZDP_REQUIRE(tok->vocab_size() <= mc.vocab_size(),
              "the tokenizer's vocabulary of {} is larger than the model's {} ('{}'): not this model's tokenizer",
              tok->vocab_size(), mc.vocab_size(), model_path);
  const std::vector<ChoiceItem> items = read_choices(choices_path, *tok);
  // One forward a (context, ending), padded to the longest: attention is causal, so what follows a
  // position never changes its loss.
  size_t longest = 0;
  for (const ChoiceItem& it : items) {
    for (size_t e = 0; e < it.endings.size(); ++e) {
      const size_t inputs = it.context.size() + it.endings[e].size() - 1;
      ZDP_REQUIRE(inputs <= static_cast<size_t>(mc.n_ctx()),
                  "'{}' line {}: the context and ending {} hold {} tokens, more than the model's context n_ctx = {} and one more (the last token is only a target)",
                  choices_path, it.line, e, inputs + 1, mc.n_ctx());
      longest = std::max(longest, inputs);
    }
  }
  const int T = static_cast<int>(longest);
  const auto net = model::make_model<float>(m.layout(), 1, T);
  model::ResidentUnits<float> access = m.access();
  std::vector<int32_t> inputs(static_cast<size_t>(T)), targets(static_cast<size_t>(T));
  ChoiceResult r;
  for (const ChoiceItem& it : items) {
    size_t best = 0;
    double best_loss = std::numeric_limits<double>::infinity();
    for (size_t e = 0; e < it.endings.size(); ++e) {
      std::vector<uint32_t> ids = it.context;
      ids.insert(ids.end(), it.endings[e].begin(), it.endings[e].end());
      std::fill(inputs.begin(), inputs.end(), 0);
      std::fill(targets.begin(), targets.end(), 0);
      for (size_t i = 0; i + 1 < ids.size(); ++i) {
        inputs[i] = static_cast<int32_t>(ids[i]);
        targets[i] = static_cast<int32_t>(ids[i + 1]);
      }
      net->forward(inputs.data(), targets.data(), nullptr, access);
      const auto& losses = net->host_losses();
      // The ending's tokens are the targets at positions |context| − 1 .. |ids| − 2.
      double sum = 0;
      for (size_t i = it.context.size() - 1; i + 1 < ids.size(); ++i) sum += static_cast<double>(losses[i]);
      const double mean = sum / static_cast<double>(it.endings[e].size());
      if (mean < best_loss) {
        best_loss = mean;
        best = e;
      }
    }
    r.correct += best == it.label ? 1 : 0;
    ++r.total;
  }
  return r;
}

}  // namespace zerodp::train
