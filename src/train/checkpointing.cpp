#include "train/checkpointing.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"
#include "core/json.h"
#include "optim/optimizer.h"
#include "train/trainer.h"
#include "zero/sharding.h"
#include "zerodp_build_info.h"

namespace zerodp::train {

namespace {

std::vector<std::string> state_names(const optim::OptimizerSpec& spec) {
  return ckpt::optimizer_state_names(optim::optimizer_name(spec.kind),
                                     spec.kind == optim::OptimizerKind::kSGD && spec.momentum > 0);
}

// ZERODP_TEST_CRASH_IN_SAVE=<rank>[:<step>]: whether this rank dies in this save. Without a step,
// the first save of the process.
bool crash_requested(int rank, int64_t step) {
  static bool first_save = true;
  const bool first = std::exchange(first_save, false);
  const char* env = std::getenv("ZERODP_TEST_CRASH_IN_SAVE");
  if (env == nullptr || *env == '\0') return false;
  int r = -1;
  long long s = -1;
  const int n = std::sscanf(env, "%d:%lld", &r, &s);
  if (n < 1 || r != rank) return false;
  return n == 2 ? s == step : first;
}

// Moves `text` from rank `root` to every rank.
std::string broadcast_text(comm::Communicator& comm, std::string text, int root) {
  uint64_t size = text.size();
  comm.broadcast_bytes(&size, sizeof size, root);
  text.resize(size);
  comm.broadcast_bytes(text.data(), size, root);
  return text;
}

// A JSON value for a message: as written when short, else described (values from a manifest).
std::string short_json(const nlohmann::json& v) {
  if (v.is_object() || v.is_array() || v.is_string()) {
    const std::string text = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (text.size() <= 160) return text;
    return describe_json(v);
  }
  return v.dump();
}

std::string global_batch_text(int64_t W, int64_t G, int64_t B) {
  return fmt::format("W·G·B = {}·{}·{} = {} sequences", W, G, B, W * G * B);
}

}  // namespace

SaveContext save_context(const TrainConfig& cfg, int world_size) {
  SaveContext ctx;
  ctx.save_dir = cfg.save_dir;
  ctx.keep = static_cast<int>(cfg.keep);
  ctx.data.path = cfg.data_path;
  ctx.data.micro_batch = cfg.micro_batch;
  ctx.data.seq = cfg.seq;
  ctx.data.accum = cfg.accum;
  ctx.data.tokens_per_step = cfg.tokens_per_step(world_size);
  ctx.training = cfg.to_json();
  return ctx;
}

bool writes_checkpoint_file(zero::Engine& engine) {
  return engine.comm().rank() < engine.shard_group_size();
}

SaveInProgress begin_save(zero::Engine& engine, int64_t step, const SaveContext& ctx) {
  comm::Communicator& comm = engine.comm();
  const comm::UntrackedTraffic untracked(comm);
  const int rank = comm.rank();
  SaveInProgress save;
  save.step = step;
  save.started = std::chrono::steady_clock::now();
  const int N = engine.shard_group_size();
  save.writes = writes_checkpoint_file(engine);
  save.states = state_names(engine.config().optimizer);
  ZDP_CHECK(static_cast<int>(save.states.size()) == engine.num_optimizer_states(), "{} optimizer states, {} names",
            engine.num_optimizer_states(), save.states.size());
  save.kill_midway = crash_requested(rank, step);
  for (int u = 0; u < engine.layout().num_units(); ++u) {
    const zero::UnitShard& s = engine.shards().unit(u);
    if (s.own_begin < s.own_end) save.ranges.push_back({u, s.own_begin, s.own_end});
  }

  if (rank == 0) {
    // What the manifest says of the engine is taken now: training may go on before the commit.
    const model::ParamLayout& layout = engine.layout();
    ckpt::Manifest& m = save.manifest;
    m.created_by = ZERODP_VERSION_STRING;
    m.step = step;
    m.optimizer_steps = engine.optimizer_steps();
    m.model = layout.config();
    m.world_size = N;
    m.zero_stage = engine.config().zero.stage;
    m.dtype = engine.config().precision.dtype;
    m.optimizer = optim::optimizer_name(engine.config().optimizer.kind);
    m.states = save.states;
    const zero::LossScaler::State ls = engine.loss_scaler().state();
    m.loss_scale = {ls.scale, ls.good_steps, ls.hysteresis_left, ls.overflows};
    m.data = ctx.data;
    m.data.ranks = comm.size();
    m.data.next_token = step * ctx.data.tokens_per_step;
    m.training = ctx.training;
    for (int u = 0; u < layout.num_units(); ++u) {
      const zero::UnitShard& s = engine.shards().unit(u);
      m.units.push_back({s.numel, s.padded, s.shard});
    }
    for (int r = 0; r < N; ++r) {
      ckpt::RankFile f;
      f.rank = r;
      f.file = ckpt::rank_file_name(r);
      const zero::ShardLayout theirs(layout, N, r);  // what visit_owned() gives rank r
      for (int u = 0; u < layout.num_units(); ++u) {
        const zero::UnitShard& s = theirs.unit(u);
        if (s.own_begin < s.own_end) f.ranges.push_back({u, s.own_begin, s.own_end});
      }
      m.ranks.push_back(std::move(f));
    }
    ZDP_CHECK(m.ranks[0].ranges == save.ranges, "rank 0's ranges differ from its shard layout");
    ckpt::prepare_save(ctx.save_dir, step);
  }
  comm.barrier();
  return save;
}

ckpt::RankFile write_own_file(const SaveInProgress& save, const SaveContext& ctx, int rank, int world_size,
                              const OwnedVisitor& visit, ckpt::ChunkSource chunks) {
  if (!save.writes) return {};
  ckpt::RankFileOptions options;
  options.kill_midway = save.kill_midway;
  options.chunks = std::move(chunks);
  options.finite = true;  // nothing non-finite reaches a checkpoint (its resume would refuse it)
  options.after_step = save.step - 1;
  return ckpt::write_rank_file(
      ckpt::partial_dir(ctx.save_dir, save.step), rank, world_size, save.step, save.states, save.ranges,
      [&visit](const auto& write) {
        visit([&](const zero::Engine::OwnedRange& r) {
          if (r.begin < r.end) write(ckpt::RankPiece{{r.unit, r.begin, r.end}, r.weights, r.states});
        });
      },
      options);
}

std::string commit_save(comm::Communicator& comm, SaveInProgress& save, const ckpt::RankFile& mine,
                        const SaveContext& ctx, std::vector<std::string>* remove_later) {
  const comm::UntrackedTraffic untracked(comm);
  const int W = comm.size();
  // Every file's size and checksum to rank 0.
  const uint64_t words[2] = {mine.bytes, mine.crc32c};
  std::vector<uint64_t> all(2 * static_cast<size_t>(W));
  comm.all_gather_bytes(words, all.data(), sizeof words);

  uint64_t total_bytes = 0;
  const size_t N = save.manifest.ranks.size();
  if (comm.rank() == 0) {
    for (size_t r = 0; r < N; ++r) {
      save.manifest.ranks[r].bytes = all[2 * r];
      save.manifest.ranks[r].crc32c = static_cast<uint32_t>(all[2 * r + 1]);
      total_bytes += all[2 * r];
    }
    ckpt::commit_checkpoint(ctx.save_dir, save.manifest, ctx.keep, remove_later);
  }
  comm.barrier();
  const std::string dir =
      ctx.save_dir + (ctx.save_dir.ends_with('/') ? "" : "/") + ckpt::checkpoint_dir_name(save.step);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - save.started).count();
  log::info("saved checkpoint {} ({} in {} file{}, {:.0f} ms)", dir, format_bytes(total_bytes), N, N == 1 ? "" : "s", ms);
  return dir;
}

std::string save_checkpoint(zero::Engine& engine, int64_t step, const SaveContext& ctx,
                            std::vector<std::string>* remove_later) {
  SaveInProgress save = begin_save(engine, step, ctx);
  // This rank's file: its owned range of every unit, streamed from the engine's buffers unit by unit
  // (with the optimizer on NVMe, each unit's states are in host memory only while it is written).
  // A rank that fails (a disk error, a NaN in its state) tells the others, so that every rank stops
  // with its message rather than waiting for its file at the commit. The failing rank ends with its own
  // error, whose exit code (3 for the memory budget) stays.
  ckpt::RankFile mine;
  std::string error;
  std::exception_ptr failure;
  try {
    mine = write_own_file(save, ctx, engine.comm().rank(), engine.shard_group_size(),
                          [&engine](const auto& each) { engine.visit_owned(each); });
  } catch (const std::exception& e) {
    error =
        fmt::format("rank {}, writing its file of the checkpoint of step {}: {}", engine.comm().rank(), step, e.what());
    failure = std::current_exception();
  }
  if (const std::optional<std::string> e = first_error(engine.comm(), error)) {
    if (failure) std::rethrow_exception(failure);
    throw RuntimeFailure(*e);
  }
  return commit_save(engine.comm(), save, mine, ctx, remove_later);
}

std::optional<std::string> first_error(comm::Communicator& comm, const std::string& error) {
  const comm::UntrackedTraffic untracked(comm);
  const int W = comm.size(), rank = comm.rank();
  // The lowest rank that found a problem tells every rank, so that all fail with its message.
  float reporter = error.empty() ? 0.0f : static_cast<float>(W - rank);
  comm.all_reduce(&reporter, 1, DType::kF32, comm::ReduceOp::kMax);
  if (reporter == 0.0f) return std::nullopt;
  return broadcast_text(comm, error, W - static_cast<int>(reporter));
}

ckpt::Checkpoint open_checkpoint(comm::Communicator& comm, const std::string& path,
                                 const std::optional<ShardToRead>& shard) {
  const comm::UntrackedTraffic untracked(comm);
  const int W = comm.size(), rank = comm.rank();
  ckpt::Checkpoint::VerifyFilter verify = [W, rank](int file_rank) { return file_rank % W == rank; };
  ckpt::Checkpoint::FileFilter files;
  if (shard && shard->stage >= 1) {
    // The files holding part of this rank's own range of some unit; every file holds part of some
    // rank's, so each is opened and checksummed somewhere.
    verify = nullptr;
    files = [s = *shard, mine = std::shared_ptr<zero::ShardLayout>(), layout = std::shared_ptr<model::ParamLayout>()](
                const ckpt::Manifest& m, int f) mutable {
      if (!mine) {
        layout = std::make_shared<model::ParamLayout>(m.model);
        mine = std::make_shared<zero::ShardLayout>(*layout, s.group_size, s.shard_rank);
      }
      for (const ckpt::UnitRange& r : m.ranks[static_cast<size_t>(f)].ranges) {
        const zero::UnitShard& u = mine->unit(r.unit);
        if (r.begin < u.own_end && u.own_begin < r.end) return true;
      }
      return false;
    };
  }
  std::optional<ckpt::Checkpoint> ckpt;
  std::string error;
  try {
    ckpt.emplace(ckpt::Checkpoint::open(path, verify, files));
  } catch (const UsageError& e) {
    error = e.what();
  }
  if (const std::optional<std::string> e = first_error(comm, error)) throw UsageError(*e);
  return std::move(*ckpt);
}

std::vector<std::string> check_resume(const ckpt::Checkpoint& ckpt, const TrainConfig& cfg, int W,
                                      const model::ModelConfig* init_model) {
  const ckpt::Manifest& m = ckpt.manifest();
  const std::string where = ckpt.dir() + "/" + ckpt::kManifestFile;
  ZDP_REQUIRE(init_model == nullptr || *init_model == m.model, "'{}': the checkpoint holds {}, but --init '{}' is {}",
              where, model::model_name(m.model), cfg.init_path, init_model ? model::model_name(*init_model) : "");
  const std::string optimizer = optim::optimizer_name(cfg.optimizer.kind);
  ZDP_REQUIRE(m.optimizer == optimizer, "'{}': the checkpoint was trained with {}, this run asks for --optimizer {}",
              where, m.optimizer, optimizer);
  const std::vector<std::string> states = state_names(cfg.optimizer_spec());
  ZDP_REQUIRE(m.states.size() == states.size(),
              "'{}': the checkpoint's {} keeps {} state{} per element, this run's {} (--momentum {})", where,
              m.optimizer, m.states.size(), m.states.size() == 1 ? "" : "s", states.size(), cfg.optimizer.momentum);
  ZDP_REQUIRE(m.data.seq == cfg.seq,
              "'{}': the checkpoint was trained with --seq {}, this run asks for --seq {}: the data order of "
              "docs/reference/data-order.md#ranks continues only with the same sequence length",
              where, m.data.seq, cfg.seq);
  ZDP_REQUIRE(m.data.tokens_per_step == cfg.tokens_per_step(W),
              "'{}': the checkpoint's global batch is {}, this run's is {}: the data order of docs/reference/data-order.md#ranks "
              "continues only with the same global batch (choose --micro-batch and --accum so that W·G·B "
              "matches)",
              where, global_batch_text(m.data.ranks, m.data.accum, m.data.micro_batch),
              global_batch_text(W, cfg.accum, cfg.micro_batch));
  ZDP_REQUIRE(cfg.steps >= m.step, "'{}': the checkpoint is at step {}, past --steps {}", where, m.step, cfg.steps);

  std::vector<std::string> warnings;
  if (m.dtype != cfg.precision.dtype)
    warnings.push_back(fmt::format("resuming a {} checkpoint in {}: its fp32 weights are converted{}", dtype_name(m.dtype),
                                   dtype_name(cfg.precision.dtype),
                                   cfg.precision.dtype == DType::kF16 ? ", and fp16 loss scaling starts afresh" : ""));
  if (m.data.path != cfg.data_path)
    warnings.push_back(fmt::format("the checkpoint was trained on '{}', this run reads '{}'",
                                   describe_text(m.data.path, 200), cfg.data_path));
  const nlohmann::json now = cfg.to_json();
  for (const char* key : {"optimizer", "clip", "lr_schedule", "fp16", "skip_nonfinite", "reduce_dtype"}) {
    if (!m.training.is_object() || !m.training.contains(key) || !now.contains(key) || m.training[key] == now[key])
      continue;
    warnings.push_back(fmt::format("the setting '{}' was {} in the checkpoint, now {}", key,
                                   short_json(m.training[key]), short_json(now[key])));
  }
  return warnings;
}

void inherit_data_order(const ckpt::Checkpoint& ckpt, TrainConfig& cfg) {
  const std::string where = ckpt.dir() + "/" + ckpt::kManifestFile;
  const nlohmann::json& t = ckpt.manifest().training;
  bool shuffle = false;
  uint64_t seed = cfg.seed;
  if (t.is_object()) {
    if (const auto it = t.find("shuffle"); it != t.end() && it->is_boolean()) shuffle = it->get<bool>();
    if (const auto it = t.find("seed"); it != t.end() && it->is_number_unsigned()) seed = it->get<uint64_t>();
  }
  if (cfg.shuffle_set)
    ZDP_REQUIRE(cfg.shuffle == shuffle,
                "'{}': the checkpoint was trained with --shuffle {}, this run asks for --shuffle {}: the data order "
                "would not continue (leave --shuffle out to continue it)",
                where, shuffle ? "on" : "off", cfg.shuffle ? "on" : "off");
  cfg.shuffle = shuffle;
  if (t.is_object()) {
    const auto it = t.find("packing");
    const bool packing = it != t.end() && it->is_boolean() && it->get<bool>();
    ZDP_REQUIRE(cfg.packing == packing,
                "'{}': the checkpoint was trained {} --packing, this run {} it: the data order would not continue",
                where, packing ? "with" : "without", cfg.packing ? "asks for" : "goes without");
  }
  if (!shuffle) return;  // in order, the seed plays no part
  if (cfg.seed_set)
    ZDP_REQUIRE(cfg.seed == seed,
                "'{}': the checkpoint's data order was drawn from --seed {}, this run asks for --seed {}: the order "
                "would not continue (leave --seed out to continue it)",
                where, seed, cfg.seed);
  cfg.seed = seed;
}

int64_t restore_checkpoint(zero::Engine& engine, const ckpt::Checkpoint& ckpt) {
  const ckpt::Manifest& m = ckpt.manifest();
  ZDP_CHECK(engine.layout().config() == m.model, "engine for {} restoring {}", engine.layout().config().summary(),
            m.model.summary());
  ZDP_CHECK(engine.num_optimizer_states() == static_cast<int>(m.states.size()), "{} optimizer states, checkpoint {}",
            engine.num_optimizer_states(), m.states.size());
  const model::ParamLayout& layout = engine.layout();
  engine.load_state([&](int state, int unit, size_t begin, size_t count, float* dst) {
    ckpt.read(state, unit, begin, count, dst);
    // Checksums prove the bytes are the ones written, not that a tool (or a person) wrote sane ones.
    // AdamW's v (state 1) is a mean of squares: negative would make its square root NaN.
    const bool second_moment = state == 1 && (m.optimizer == "AdamW" || m.optimizer == "Muon");
    for (size_t i = 0; i < count; ++i) {
      if (std::isfinite(dst[i]) && !(second_moment && dst[i] < 0)) continue;
      throw UsageError(fmt::format("'{}': {} of {} is {}: a checkpoint must hold finite weights and states",
                                   ckpt.dir(), state < 0 ? "weight" : fmt::format("optimizer state '{}'", m.states[state]),
                                   element_label(layout, unit, begin + i), dst[i]));
    }
  });
  engine.set_optimizer_steps(m.optimizer_steps);
  if (engine.config().precision.dtype == DType::kF16 && m.dtype == DType::kF16) {
    const ckpt::LossScaleState& s = m.loss_scale;
    engine.loss_scaler().set_state(
        {s.scale, static_cast<int>(s.good_steps), static_cast<int>(s.hysteresis_left), s.overflows});
  }
  return m.step;
}

}  // namespace zerodp::train
