#include "zero/engine.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <limits>
#include <optional>

#include "core/error.h"
#include "core/log.h"
#include "core/memory.h"
#include "device/host_access.h"
#include "io/run_dir.h"
#include "model/model.h"
#include "zero/comm_clock.h"
#include "zero/grad_reducer.h"
#include "zero/model_states.h"
#include "zero/param_gatherer.h"
#include "zero/shard_optimizer.h"
#include "zero/state_io.h"
#include "zero/step_numerics.h"

namespace zerodp::zero {

// The model, computing in the run's dtype (fp32, or bf16/fp16 16-bit compute: model/model.h), seen by
// the engine through this small interface; its units come from the engine (Engine::Impl::begin, end).
struct ModelRunner {
  virtual ~ModelRunner() = default;
  virtual double forward(const int32_t* inputs, const int32_t* targets, const int32_t* positions) = 0;
  virtual void backward(float dloss) = 0;
  // Adds each of the last forward's B sequences' summed token losses (in double) to `out`.
  virtual void append_sequence_losses(int B, int T, std::vector<double>& out) const = 0;
};

// Hybrid sharding: the rank's shard group and the ranks holding its shard in the other groups; both
// null without it.
struct ShardGroups {
  std::unique_ptr<comm::Communicator> group, replicas;
};

namespace {

// N: the ranks a state is sharded over (hybrid sharding: the shard group; otherwise all W), once the
// modes are known to go together.
int checked_shard_group_ranks(const EngineConfig& c, int W) {
  check_zero_modes(c.zero, W);
  return shard_group_ranks(c.zero, W);
}

// With NVMe offload, the run's directory under cfg.zero.nvme_path, its path written into
// cfg.nvme_run_dir; null otherwise. Every rank uses the directory named after rank 0's process and
// its run number (broadcast: the ranks of one run agree on it, and no other run, in this process or
// another, has it); first, each rank removes what killed runs of its host left.
std::unique_ptr<io::RunDir> make_nvme_run_dir(comm::Communicator& world, EngineConfig& cfg) {
  if (cfg.zero.offload_optimizer != Offload::kNvme && cfg.zero.offload_param != Offload::kNvme) return nullptr;
  io::remove_stale_run_dirs(cfg.zero.nvme_path);
  char name[257] = {};  // 256 bytes travel; the last stays the terminator
  if (world.rank() == 0) {
    const std::string mine = io::run_dir_name(io::this_process(), io::next_run_number());
    ZDP_CHECK(mine.size() < sizeof name - 1, "offload directory name of {} bytes", mine.size());
    std::memcpy(name, mine.data(), mine.size());
  }
  {
    comm::UntrackedTraffic untracked(world);
    world.broadcast_bytes(name, sizeof name - 1, 0);
  }
  auto dir = std::make_unique<io::RunDir>(cfg.zero.nvme_path, name);
  cfg.nvme_run_dir = dir->path();
  return dir;
}

ShardGroups split_shard_groups(comm::Communicator& world, int N) {
  // Inter-group traffic: in the ring over all W ranks the last rank of each group sends to the next
  // group; within a group no one does; across the groups everyone does.
  const int W = world.size(), me = world.rank();
  world.set_successor_in_other_group(N < W && (me + 1) % N == 0);
  ShardGroups g;
  if (N == W) return g;
  // Both splits are collective over all W ranks, in this order on every rank.
  g.group = world.split(me / N, me);
  g.replicas = world.split(me % N, me);
  g.group->set_traffic_ledger(&world.traffic());  // the engine's traffic is counted in one ledger
  g.replicas->set_traffic_ledger(&world.traffic());
  g.group->set_successor_in_other_group(false);
  g.replicas->set_successor_in_other_group(g.replicas->size() > 1);
  return g;
}

}  // namespace

// The engine: what it runs on (communicators, shard layout, loss scaler, offload directory), the
// model's view of the units (parameters in the compute dtype when a unit's phase begins, its fp32
// gradient buffer, what to do when the phase ends) and the step, over the parts that own each
// concern (model_states.h, grad_reducer.h, param_gatherer.h, shard_optimizer.h, state_io.h,
// step_numerics.h).
struct Engine::Impl {
  // Declared in construction order: the run directory and the communicator splits are collective,
  // in this order on every rank.
  const model::ParamLayout& layout;
  const model::UnitSchedule& schedule;  // the model's uses of its units in a micro-step
  const std::shared_ptr<comm::Communicator> world_comm;
  EngineConfig cfg;
  const int N;  // the shard group's ranks (W without hybrid sharding)
  const ShardLayout shards;
  LossScaler scaler;
  std::unique_ptr<io::RunDir> run_dir;  // NVMe offload: this run's directory (outlives the files in it)
  ShardGroups groups;
  comm::Communicator& comm;   // all W ranks
  comm::Communicator& group;  // the rank's shard group (comm without hybrid sharding)
  const int world;            // W
  const bool replica0;        // the rank is in the first shard group (it alone counts the gradient norm)

  template <class P>
  struct Runner;
  static std::unique_ptr<ModelRunner> make_runner(Impl& impl);
  std::unique_ptr<ModelRunner> model;  // before the states: its activations are allocated first
  ModelStates st;
  const int stage;
  const bool grad_direct;  // backward accumulates straight into the persistent gradient
  CommClock clock;
  GradReducer reducer;
  ParamGatherer gatherer;
  ShardOptimizer optimizer;
  Buffer tokens;  // this micro-step's inputs, targets and positions

  // Per unit, while its phase runs.
  std::vector<Buffer> work_grad;       // the unit's fp32 gradient while its backward runs
  std::vector<const void*> param_ptr;  // in the compute dtype
  std::vector<float*> grad_ptr;
  // Per unit: its fp32 gradient buffer holds no values yet this micro-step, and its first backward use
  // writes all of it (UnitAccess::grads_fresh) instead of adding into a buffer zeroed first: a pass over
  // the whole gradient saved (5-10% of a GPT-2 124M step at W = 2 on 2 cores; docs/benchmarks/training.md).
  std::vector<char> grad_unset;

  int64_t calls = 0;
  GradientFault fault;  // tests only (zero/fault.h)
  std::function<void()> before_state_change;  // Engine::set_before_state_change
  void state_will_change() {
    if (before_state_change) before_state_change();
  }

  Impl(const model::ParamLayout& l, std::shared_ptr<comm::Communicator> c, EngineConfig config)
      : layout(l),
        schedule(l.schedule()),
        world_comm(std::move(c)),
        cfg(std::move(config)),
        N(checked_shard_group_ranks(cfg, world_comm->size())),
        shards(layout, N, world_comm->rank() % N),
        scaler(cfg.precision.loss_scale, cfg.precision.scales_loss()),
        run_dir(make_nvme_run_dir(*world_comm, cfg)),
        groups(split_shard_groups(*world_comm, N)),
        comm(*world_comm),
        group(groups.group ? *groups.group : *world_comm),
        world(comm.size()),
        replica0(comm.rank() < N),
        model(make_runner(*this)),
        st(layout, shards, cfg),
        stage(cfg.zero.stage),
        grad_direct(cfg.zero.stage <= 1 && (cfg.precision.dtype == DType::kF32 || cfg.precision.fp32_grad_accum)),
        reducer(st, group, groups.replicas.get(), cfg, clock),
        gatherer(st, group, cfg, clock),
        optimizer(st, group, cfg) {
    const int U = layout.num_units();
    // Filled by the host (the batch source); the model copies it to the device.
    tokens = device::allocate_host_visible(cfg.dev(), batch_token_bytes(cfg.micro_batch, cfg.seq), MemCategory::kAct);
    work_grad.resize(U);
    param_ptr.assign(U, nullptr);
    grad_ptr.assign(U, nullptr);
    grad_unset.assign(U, 0);
    if (run_dir) {
      // Every rank has created (and unlinked) its offload files: from here a rank that finishes first
      // may remove the empty directory (io/run_dir.h) without taking it from under a rank still
      // setting up. Training's collectives would order that too, but an engine only loaded and read
      // has none.
      comm::UntrackedTraffic untracked(comm);
      comm.barrier();
    }
  }

  // An exception leaving the engine (this rank failed: over budget, a bad batch...) may leave
  // collectives in flight that still read or write its buffers; the job is about to be aborted, so
  // the buffers are parked until the process ends rather than freed under the communication
  // library's feet. A single rank has no peer to be in flight with: it frees them as usual.
  ~Impl() {
    const bool inflight =
        reducer.in_flight() || gatherer.in_flight() || (world > 1 && std::uncaught_exceptions() > 0);
    if (!inflight) return;
    // Reachable from a static for the rest of the process (so not a leak to LeakSanitizer).
    static std::vector<std::vector<Buffer>>* const parked = new std::vector<std::vector<Buffer>>();
    std::vector<Buffer>& keep = parked->emplace_back();
    reducer.park(keep);
    st.park(keep);
    gatherer.park(keep);
    for (auto& b : work_grad) keep.push_back(std::move(b));
  }

  // ---- the model's units ------------------------------------------------------------------------
  // Use k of the model's schedule (model/units.h) begins: its unit's parameters in the compute dtype
  // when it reads them, its fp32 gradient buffer when it is a backward.
  void begin(int k) {
    const model::UnitUse& use = schedule[k];
    const int u = use.unit;
    if (use.reads_params) {
      gatherer.use(k);
      param_ptr[u] = gatherer.params(u);  // the compute dtype is the parameters' dtype
    }
    if (use.pass == model::Pass::kBackward) {
      if (grad_direct) {
        grad_ptr[u] = reinterpret_cast<float*>(st.grad_at(u, 0));  // fp32, the whole unit
      } else if (work_grad[u].empty()) {
        work_grad[u] = cfg.dev().allocate(st.unit(u).padded * sizeof(float), MemCategory::kGathered);
        grad_ptr[u] = work_grad[u].as<float>();
        leave_unset(u, grad_ptr[u]);
      }
    }
  }

  // Unit u's fp32 gradient buffer g will be written whole by its first backward use: only the padding
  // past the unit's elements, which no model writes and the reductions read, is zeroed. Builds with
  // assertions fill the rest with NaN, so that an element a model fails to write shows in every test's
  // losses and norms.
  void leave_unset(int u, float* g) {
    const UnitShard& s = st.unit(u);
    cfg.dev().fill_zero(g + s.numel, (s.padded - s.numel) * sizeof(float));
#ifndef NDEBUG
    if (cfg.dev().host_addressable()) std::fill(g, g + s.numel, std::numeric_limits<float>::quiet_NaN());
#endif
    grad_unset[static_cast<size_t>(u)] = 1;
  }
  bool grads_fresh(int u) const { return grad_unset.at(static_cast<size_t>(u)) != 0; }

  // Where the store's gradient is written from the units' buffers, builds with assertions fill what the
  // first micro-step will write (each unit's elements at stages 0-1, its shard at 2-3: the reduction
  // writes the shard's padding too) with NaN, so that a unit left out shows in every test.
  void poison_grad_store() {
#ifndef NDEBUG
    if (!cfg.dev().host_addressable()) return;
    for (int u = 0; u < st.num_units(); ++u) {
      const UnitShard& s = st.unit(u);
      char* first = stage <= 1 ? st.grad_at(u, 0) : st.grad_shard(u);
      std::memset(first, 0xff, (stage <= 1 ? s.numel : s.shard) * dtype_size(st.grad_dtype()));  // NaN
    }
#endif
  }

  void release_gathered(int u) {
    if (stage == 3 && gatherer.release(u)) param_ptr[u] = nullptr;
  }

  // Use k ended. Stage 3 frees the unit's gathered parameters where zero/gather_plan.h says (after a
  // forward unless its next use follows at once, after the last read); a backward finishes the unit's
  // gradient after its last backward use.
  void end(int k) {
    const model::UnitUse& use = schedule[k];
    if (use.pass == model::Pass::kBackward) grad_unset[static_cast<size_t>(use.unit)] = 0;  // written now
    if (gatherer.frees_after(k)) release_gathered(use.unit);
    if (use.pass == model::Pass::kBackward && schedule.completes_gradient(k)) finish_grad(use.unit);
  }

  const void* params(int u) const { return param_ptr[u]; }
  float* grads(int u) const { return grad_ptr[u]; }

  void finish_grad(int u) {
    if (stage <= 1) {
      if (!grad_direct) {
        // The first micro-step's sum is written (converted to the store's dtype): 0 + x is x, so the
        // same values as adding it into zeros, without zeroing the store first.
        if (reducer.first_micro_step()) {
          cfg.dev().convert(work_grad[u].data(), DType::kF32, st.grad_at(u, 0), st.grad_dtype(), st.unit(u).numel);
        } else {
          cfg.dev().add_into(st.grad_at(u, 0), st.grad_dtype(), work_grad[u].data(), DType::kF32, st.unit(u).numel);
        }
        work_grad[u].release();
        grad_ptr[u] = nullptr;
      }
      reducer.unit_stored(u);
      return;
    }
    grad_ptr[u] = nullptr;
    reducer.reduce_to_shard(u, std::move(work_grad[u]));
  }

  // ---- evaluation: forward passes only ----------------------------------------------------------
  std::vector<double> evaluate(uint64_t passes, const EvalSource& batches) {
    // Not training traffic; the group's collectives count in the world's ledger (hybrid sharding).
    const comm::UntrackedTraffic untracked(comm);
    std::optional<comm::UntrackedTraffic> untracked_group;
    if (&group != &comm) untracked_group.emplace(group);
    const int B = cfg.micro_batch, T = cfg.seq;
    int32_t* inputs = tokens.as<int32_t>();
    int32_t* targets = inputs + static_cast<size_t>(B) * T;
    std::vector<double> sums;
    sums.reserve(static_cast<size_t>(passes) * static_cast<size_t>(B));
    gatherer.set_forward_only(true);
    for (uint64_t p = 0; p < passes; ++p) {
      batches(p, inputs, targets);
      model->forward(inputs, targets, nullptr);
      model->append_sequence_losses(B, T, sums);
      // The head keeps unit 0 for a backward that does not come, and without reshard_after_forward
      // every block stays too: stage 3 frees them all (waiting for any gather still in flight).
      for (int u = 0; u < st.num_units(); ++u) release_gathered(u);
    }
    gatherer.set_forward_only(false);
    cfg.dev().synchronize();
    return sums;
  }

  // ---- the step -------------------------------------------------------------------------------
  // Forward and backward of `accum` micro-steps, the gradient reduced; returns this rank's summed
  // token losses.
  double accumulate(int accum, const BatchSource& batches, const PositionSource& positions_of, float dloss) {
    const int B = cfg.micro_batch, T = cfg.seq;
    int32_t* inputs = tokens.as<int32_t>();
    int32_t* targets = inputs + static_cast<size_t>(B) * T;
    int32_t* positions = positions_of ? targets + static_cast<size_t>(B) * T : nullptr;
    double loss_sum = 0;
    for (int g = 0; g < accum; ++g) {
      reducer.begin_micro_step(g == 0, g == accum - 1);
      batches(g, inputs, targets);
      if (positions) positions_of(g, positions);
      loss_sum += model->forward(inputs, targets, positions) * B * T;
      model->backward(dloss);
    }
    reducer.complete_all();
    return loss_sum;
  }

  StepResult step(int accum, const BatchSource& batches, double lr, double clip, uint64_t targets,
                  const PositionSource& positions) {
    ZDP_REQUIRE(accum >= 1, "gradient accumulation steps must be at least 1, got {}", accum);
    StepResult res;
    clock.wait_ms = 0;
    // The first micro-step writes the gradient store whole and the later ones add into it: the backward
    // itself where it goes straight into the store, else the unit buffers' sums (finish_grad) or their
    // reduced shards (GradReducer). Nothing zeroes it first.
    if (grad_direct) {
      for (int u = 0; u < st.num_units(); ++u) leave_unset(u, reinterpret_cast<float*>(st.grad_at(u, 0)));
    } else {
      poison_grad_store();
    }
    const double scale = scaler.scale();
    res.loss_scale = scale;
    const double global_tokens = targets > 0 ? static_cast<double>(targets)
                                             : static_cast<double>(world) * accum * cfg.micro_batch * cfg.seq;
    const double loss_sum = accumulate(accum, batches, positions, static_cast<float>(scale / global_tokens));
    // Every gathered copy was freed by its last read (zero/gather_plan.h): one that outlived the
    // micro-steps would be read by the next step with the weights before this update.
    ZDP_CHECK(stage != 3 || gatherer.live_elements() == 0,
              "{} gathered parameter elements outlive the step's micro-steps", gatherer.live_elements());

    const int unit = fault.unit;
    if (calls++ == fault.step && comm.rank() == fault.rank && unit >= 0 && unit < st.num_units()) {
      // A gradient that overflowed on this rank only, inside the range whose norm it computes (at
      // stage 0 every rank holds the whole gradient but measures its own part).
      const UnitShard& s = st.unit(unit);
      if (s.own_begin < s.own_end) {
        const float inf = std::numeric_limits<float>::infinity();
        unsigned char bits[sizeof(float)];
        convert(&inf, DType::kF32, bits, st.grad_dtype(), 1);
        cfg.dev().copy(st.grad_at(unit, s.own_begin), bits, dtype_size(st.grad_dtype()));
      }
    }

    GlobalNumbers numbers =
        global_numbers(st, comm, replica0, loss_sum, global_tokens, scale, !cfg.precision.scales_loss());
    res.loss = numbers.loss;
    res.grad_norm = numbers.grad_norm;
    if (numbers.nonfinite) {
      res.nonfinite = res.skipped = true;
      res.nonfinite_units = std::move(numbers.nonfinite_units);
      if (cfg.precision.scales_loss()) scaler.update(true);
      res.comm_wait_ms = clock.wait_ms;
      return res;
    }
    scaler.update(false);
    state_will_change();
    optimizer.update(lr, gradient_factor(res.grad_norm, clip, scale));
    if (stage >= 1 && N > 1) gatherer.gather_after_update();
    // A step ends when its work has (on a GPU the update and the gathers are still queued here), so
    // that its time is its own and what it wrote may be read.
    cfg.dev().synchronize();
    res.comm_wait_ms = clock.wait_ms;
    return res;
  }

  // ---- states in and out ------------------------------------------------------------------------
  // Each rank reads its own range (stages 1-3), and the units kept whole are assembled by the
  // all-gather that follows every update (not training traffic).
  void load(const StateSource& source, bool with_states) {
    state_will_change();
    load_states(st, source, with_states);
    if (stage >= 1 && N > 1) {
      comm::UntrackedTraffic untracked(group);
      gatherer.gather_after_update();
    }
  }

  // Where one unit's owned range lives (device memory, or an NVMe-offloaded unit's states brought into
  // host memory for the call): its weights in st.weights_dtype() and its states in st.state_dtype(); null
  // when empty.
  struct OwnedBytes {
    int unit;
    size_t begin, end;
    const char* weights;
    std::vector<const char*> states;
  };
  void each_owned(const std::function<void(const OwnedBytes&)>& each) {
    for (int u = 0; u < layout.num_units(); ++u) {
      const UnitShard& s = shards.unit(u);
      StatesInHost in_host(st, u);  // NVMe offload: the unit's states, read from the file
      OwnedBytes r{u, s.own_begin, s.own_end, nullptr, {}};
      if (s.own_begin < s.own_end) {
        r.weights = st.weights_bytes(u, s.own_begin);
        for (int k = 0; k < st.num_states(); ++k) r.states.push_back(st.state_bytes(k, u, s.own_begin));
      }
      each(r);
    }
  }

  void visit_owned(const std::function<void(const OwnedRange&)>& visit) {
    each_owned([&](const OwnedBytes& at) {
      // On a GPU the range is copied into host memory for the visit (on the CPU: read in place), and
      // bf16 weights and states are widened to fp32 (the files' dtype).
      OwnedRange r{at.unit, at.begin, at.end, nullptr, {}};
      std::vector<device::HostRead> reads;
      if (at.begin < at.end) {
        const size_t n = at.end - at.begin;
        reads.reserve(1 + at.states.size());
        r.weights = reads.emplace_back(device::HostRead::widened(st.dev(), at.weights, st.weights_dtype(), n,
                                                                 MemCategory::kGathered))
                        .as<float>();
        for (const char* s : at.states)
          r.states.push_back(
              reads.emplace_back(device::HostRead::widened(st.dev(), s, st.state_dtype(), n, MemCategory::kGathered))
                  .as<float>());
      }
      visit(r);
    });
  }

  std::vector<OwnedRange> owned_in_place() {
    std::vector<OwnedRange> out;
    // Where visit_owned reads the engine's own memory as it is: host memory in fp32, nothing swapped.
    const bool in_place = st.dev().host_addressable() && !st.optimizer_swap() && !st.param_swap() &&
                          st.weights_dtype() == DType::kF32 && st.state_dtype() == DType::kF32;
    if (!in_place) return out;
    each_owned([&](const OwnedBytes& r) {
      if (r.begin == r.end) return;
      OwnedRange o{r.unit, r.begin, r.end, reinterpret_cast<const float*>(r.weights), {}};
      for (const char* k : r.states) o.states.push_back(reinterpret_cast<const float*>(k));
      out.push_back(std::move(o));
    });
    return out;
  }

  void copy_owned(const std::vector<OwnedCopy>& into) {
    size_t i = 0;
    each_owned([&](const OwnedBytes& r) {
      const size_t n = r.end - r.begin;
      if (n == 0) return;
      ZDP_CHECK(i < into.size() && into[i].states.size() == r.states.size(),
                "copy of unit {}: {} destinations, {} of them given", r.unit, i + 1, into.size());
      // Into host memory: copy() returns once the bytes are there.
      device::copy_widened_to_host(st.dev(), into[i].weights, r.weights, st.weights_dtype(), n);
      for (size_t k = 0; k < r.states.size(); ++k)
        device::copy_widened_to_host(st.dev(), into[i].states[k], r.states[k], st.state_dtype(), n);
      ++i;
    });
    ZDP_CHECK(i == into.size(), "{} owned ranges copied into {} destinations", i, into.size());
  }

  NvmeTraffic nvme_traffic() const {
    NvmeTraffic t;
    if (const OptimizerSwap* swap = st.optimizer_swap()) {
      t.bytes_read = swap->file().stats().bytes_read;
      t.bytes_written = swap->file().stats().bytes_written;
      t.update_bytes = optimizer.offload_io_bytes();
      t.update_seconds = optimizer.offload_seconds();
    }
    return t;
  }
};

// The layout's model over the engine's units: P = float for fp32 runs, bf16 / fp16 for 16-bit ones.
template <class P>
struct Engine::Impl::Runner final : ModelRunner, model::UnitAccess<P> {
  Impl& impl;
  std::unique_ptr<model::Model<P>> net;
  Runner(Impl& i, const model::ParamLayout& l, const EngineConfig& c)
      : impl(i), net(model::make_model<P>(l, c.micro_batch, c.seq, activation_settings(c.zero), c.dev())) {}
  double forward(const int32_t* inputs, const int32_t* targets, const int32_t* positions) override {
    return net->forward(inputs, targets, positions, *this);
  }
  void backward(float dloss) override { net->backward(dloss, *this); }
  void append_sequence_losses(int B, int T, std::vector<double>& out) const override {
    const auto& losses = net->host_losses();
    ZDP_CHECK(losses.size() == static_cast<size_t>(B) * T, "{} losses for {} sequences of {}", losses.size(), B, T);
    for (int b = 0; b < B; ++b) {
      double sum = 0;
      for (int t = 0; t < T; ++t) sum += static_cast<double>(losses[static_cast<size_t>(b) * T + t]);
      out.push_back(sum);
    }
  }
  void begin(int use) override { impl.begin(use); }
  void end(int use) override { impl.end(use); }
  const P* params(int u) override { return static_cast<const P*>(impl.params(u)); }
  float* grads(int u) override { return impl.grads(u); }
  bool grads_fresh(int u) override { return impl.grads_fresh(u); }
};

std::unique_ptr<ModelRunner> Engine::Impl::make_runner(Impl& impl) {
  switch (impl.cfg.precision.dtype) {
    case DType::kF32: return std::make_unique<Runner<float>>(impl, impl.layout, impl.cfg);
    case DType::kBF16: return std::make_unique<Runner<bf16>>(impl, impl.layout, impl.cfg);
    case DType::kF16: return std::make_unique<Runner<fp16>>(impl, impl.layout, impl.cfg);
  }
  ZDP_CHECK(false, "unknown dtype");
  return nullptr;
}

// ---- Engine: each method forwards to Impl ---------------------------------------------------------

Engine::Engine(const model::ParamLayout& layout, std::shared_ptr<comm::Communicator> comm, EngineConfig config)
    : impl_(std::make_unique<Impl>(layout, std::move(comm), std::move(config))) {}

Engine::~Engine() = default;

void Engine::load(const UnitSource& source) {
  impl_->load([&source](int state, int unit, size_t begin, size_t count, float* dst) {
    if (state < 0) source(unit, begin, count, dst);
  }, false);
}

void Engine::load_state(const StateSource& source) { impl_->load(source, true); }

StepResult Engine::step(int accum, const BatchSource& batches, double lr, double clip, uint64_t targets,
                        const PositionSource& positions) {
  return impl_->step(accum, batches, lr, clip, targets, positions);
}

std::vector<double> Engine::evaluate(uint64_t passes, const EvalSource& batches) {
  return impl_->evaluate(passes, batches);
}

bool Engine::weights_finite() { return all_weights_finite(impl_->st, impl_->comm); }

int64_t Engine::optimizer_steps() const { return impl_->optimizer.steps(); }

void Engine::set_optimizer_steps(int64_t steps) { impl_->optimizer.set_steps(steps); }

void Engine::set_gradient_fault(const GradientFault& fault) { impl_->fault = fault; }

Engine::NvmeTraffic Engine::nvme_traffic() const { return impl_->nvme_traffic(); }

void Engine::consolidate(const std::function<void(int unit, const float* data)>& sink) {
  consolidate_weights(impl_->st, impl_->group, impl_->comm.rank() == 0, sink);
}

int Engine::num_optimizer_states() const { return impl_->st.num_states(); }

void Engine::visit_owned(const std::function<void(const OwnedRange&)>& visit) const { impl_->visit_owned(visit); }
void Engine::copy_owned(const std::vector<OwnedCopy>& into) const { impl_->copy_owned(into); }
std::vector<Engine::OwnedRange> Engine::owned_in_place() const { return impl_->owned_in_place(); }
void Engine::set_before_state_change(std::function<void()> hook) { impl_->before_state_change = std::move(hook); }

const EngineConfig& Engine::config() const { return impl_->cfg; }
const ShardLayout& Engine::shards() const { return impl_->shards; }
int Engine::shard_group_size() const { return impl_->N; }
int Engine::replica() const { return impl_->comm.rank() / impl_->N; }
const model::ParamLayout& Engine::layout() const { return impl_->layout; }
comm::Communicator& Engine::comm() { return impl_->comm; }
LossScaler& Engine::loss_scaler() { return impl_->scaler; }

}  // namespace zerodp::zero
