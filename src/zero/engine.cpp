#include "zero/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <exception>
#include <limits>

#include "core/error.h"
#include "core/log.h"
#include "core/memory.h"
#include "optim/optimizer.h"
#include "zero/precision.h"

namespace zerodp::zero {

using model::UnitPhase;

namespace {

using Clock = std::chrono::steady_clock;

char* at(Buffer& b, size_t elem, DType t) { return b.as<char>() + elem * dtype_size(t); }

// A gradient reduction in flight, with the buffers it uses and what to do when it lands.
struct PendingReduction {
  comm::WorkPtr work;
  Buffer send, recv;  // owned temporaries (may be empty)
  std::function<void()> on_done;
};

enum class GatherState : uint8_t { kSharded, kInFlight, kReady };

}  // namespace

struct Engine::Impl final : model::UnitAccess<float> {
  Engine& e;
  const model::ParamLayout& layout;
  const ShardLayout& sh;
  comm::Communicator& comm;
  const EngineConfig cfg;
  const int W, r, stage;
  const DType pdt;  // parameters (compute dtype)
  const DType gdt;  // persistent gradients
  const DType rdt;  // gradient reduction
  const bool mixed;
  const bool grad_direct;  // backward accumulates straight into the persistent gradient

  // Persistent model states (contract §9: param, grad, master, optim).
  Buffer param_store, master, grad_store, opt_m, opt_v;
  std::vector<size_t> shard_off;  // unit u's first element in the shard-sized buffers
  std::vector<size_t> param_off;  // unit u's first element in param_store
  std::vector<bool> param_whole;  // param_store holds all of unit u (stages 0-2; persistent stage-3 units)

  model::GPT2<float> model;
  Buffer tokens;  // this micro-step's inputs and targets

  // Per unit, transient.
  std::vector<Buffer> gathered;    // stage 3: the unit's full parameters, compute dtype
  std::vector<GatherState> gstate;
  std::vector<comm::WorkPtr> gwork;
  size_t live_gathered = 0;        // elements gathered or in flight
  std::vector<Buffer> work_param;  // 16-bit runs: the unit's parameters widened to fp32
  std::vector<Buffer> work_grad;   // the unit's fp32 gradient while its backward runs
  std::vector<const float*> param_ptr;
  std::vector<float*> grad_ptr;

  // Stage 3 schedule of parameter uses in one micro-step, for prefetching.
  std::vector<int> schedule;
  size_t cursor = 0;

  // Reductions in flight.
  std::deque<PendingReduction> pending;
  // Stage 0 buckets: contiguous unit ranges [lo, hi] in backward order.
  std::vector<std::pair<int, int>> buckets;
  std::vector<int> unit_bucket, bucket_left;

  bool last_micro = false;
  double wait_ms = 0;
  int64_t steps_taken = 0;
  int64_t calls = 0;

  Impl(Engine& engine, const model::ParamLayout& l, const ShardLayout& s, comm::Communicator& c,
       const EngineConfig& config)
      : e(engine),
        layout(l),
        sh(s),
        comm(c),
        cfg(config),
        W(c.size()),
        r(c.rank()),
        stage(config.stage),
        pdt(config.dtype),
        gdt(config.fp32_grad_accum || config.dtype == DType::kF32 ? DType::kF32 : config.dtype),
        rdt(config.reduce_dtype.value_or(config.dtype)),
        mixed(config.dtype != DType::kF32),
        grad_direct(config.stage <= 1 && (config.dtype == DType::kF32 || config.fp32_grad_accum)),
        model(l, config.micro_batch, config.seq, config.activation_checkpointing) {
    const int U = l.num_units();
    size_t acc = 0;
    for (int u = 0; u < U; ++u) {
      shard_off.push_back(acc);
      acc += sh.unit(u).shard;
    }
    const size_t full = sh.total_padded(), shard = sh.total_shard();
    size_t param_elems = 0;
    for (int u = 0; u < U; ++u) {
      const bool whole = stage <= 2 || sh.unit(u).numel < cfg.stage3_param_persistence_threshold;
      param_whole.push_back(whole);
      param_off.push_back(param_elems);
      param_elems += whole ? sh.unit(u).padded : sh.unit(u).shard;
    }
    param_store = Buffer(param_elems * dtype_size(pdt), MemCategory::kParam);
    param_store.zero();
    if (mixed) {
      master = Buffer((stage == 0 ? full : shard) * sizeof(float), MemCategory::kMaster);
      master.zero();
    }
    grad_store = Buffer((stage <= 1 ? full : shard) * dtype_size(gdt), MemCategory::kGrad);
    grad_store.zero();
    const size_t state_elems = stage == 0 ? full : shard;
    // Optimizer state: AdamW's m and v, or SGD's momentum buffer (none without momentum).
    const size_t nstates = optim::state_floats_per_param(cfg.optimizer);
    if (nstates >= 1) {
      opt_m = Buffer(state_elems * sizeof(float), MemCategory::kOptim);
      opt_m.zero();
    }
    if (nstates >= 2) {
      opt_v = Buffer(state_elems * sizeof(float), MemCategory::kOptim);
      opt_v.zero();
    }
    tokens = Buffer(2 * sizeof(int32_t) * cfg.micro_batch * cfg.seq, MemCategory::kAct);
    gathered.resize(U);
    gstate.resize(U);
    for (int u = 0; u < U; ++u) gstate[u] = param_whole[u] ? GatherState::kReady : GatherState::kSharded;
    gwork.resize(U);
    work_param.resize(U);
    work_grad.resize(U);
    param_ptr.assign(U, nullptr);
    grad_ptr.assign(U, nullptr);
    // Parameter uses in order: embed, blocks, head (forward); head, blocks reversed (backward).
    schedule.push_back(0);
    for (int u = 1; u < U; ++u) schedule.push_back(u);
    schedule.push_back(0);
    schedule.push_back(0);
    for (int u = U - 1; u >= 1; --u) schedule.push_back(u);
    if (stage == 0) plan_buckets();
  }

  // An exception leaving the engine (this rank failed: over budget, a bad batch...) may leave
  // collectives in flight that still read or write its buffers; the job is about to be aborted, so
  // the buffers are parked until the process ends rather than freed under the communication
  // library's feet. A single rank has no peer to be in flight with: it frees them as usual.
  ~Impl() {
    bool inflight = !pending.empty() || (W > 1 && std::uncaught_exceptions() > 0);
    for (const auto& w : gwork) inflight = inflight || (w && !w->is_completed());
    if (!inflight) return;
    // Reachable from a static for the rest of the process (so not a leak to LeakSanitizer).
    static std::vector<std::vector<Buffer>>* const parked = new std::vector<std::vector<Buffer>>();
    std::vector<Buffer>* keep = &parked->emplace_back();
    for (auto& p : pending) {
      keep->push_back(std::move(p.send));
      keep->push_back(std::move(p.recv));
    }
    for (Buffer* b : {&param_store, &master, &grad_store, &opt_m, &opt_v}) keep->push_back(std::move(*b));
    for (auto& b : gathered) keep->push_back(std::move(b));
    for (auto& b : work_grad) keep->push_back(std::move(b));
  }

  // ---- helpers --------------------------------------------------------------------------------
  size_t full_index(int u, size_t i) const { return sh.unit(u).offset + i; }
  size_t shard_index(int u, size_t i) const { return shard_off[u] + i - static_cast<size_t>(r) * sh.unit(u).shard; }
  size_t grad_index(int u, size_t i) const { return stage <= 1 ? full_index(u, i) : shard_index(u, i); }
  size_t state_index(int u, size_t i) const { return stage == 0 ? full_index(u, i) : shard_index(u, i); }
  // fp32 weights the optimizer updates: the masters (16-bit runs) or the parameters themselves.
  size_t param_index(int u, size_t i) const {
    return param_off[u] + (param_whole[u] ? i : i - static_cast<size_t>(r) * sh.unit(u).shard);
  }
  float* weights_at(int u, size_t i) {
    if (mixed) return master.as<float>() + (stage == 0 ? full_index(u, i) : shard_index(u, i));
    return param_store.as<float>() + param_index(u, i);
  }
  char* param_at(int u, size_t i) { return at(param_store, param_index(u, i), pdt); }
  // The range of unit u's elements this rank updates: all of them at stage 0, its shard otherwise.
  std::pair<size_t, size_t> update_range(int u) const {
    if (stage == 0) return {0, sh.unit(u).numel};
    return {sh.unit(u).own_begin, sh.unit(u).own_end};
  }

  void wait(const comm::WorkPtr& w) {
    if (!w) return;
    if (w->is_completed()) {
      w->wait();
      return;
    }
    const auto t0 = Clock::now();
    w->wait();
    wait_ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  }

  void complete_oldest() {
    PendingReduction p = std::move(pending.front());
    pending.pop_front();
    wait(p.work);
    if (p.on_done) p.on_done();
  }
  void complete_all() {
    while (!pending.empty()) complete_oldest();
  }
  void push_pending(PendingReduction p) {
    pending.push_back(std::move(p));
    // Without overlap every reduction is waited for at once; with it, a few stay in flight while
    // the backward goes on (bounded, since each holds a unit-sized buffer).
    const size_t limit = cfg.overlap_comm ? 3 : 0;
    while (pending.size() > limit) complete_oldest();
  }

  // ---- stage 0 buckets ------------------------------------------------------------------------
  void plan_buckets() {
    const int U = layout.num_units();
    unit_bucket.assign(U, -1);
    int hi = U - 1;
    size_t size = 0;
    for (int u = U - 1; u >= 0; --u) {
      size += sh.unit(u).padded;
      if (size >= cfg.reduce_bucket_size || u == 0) {
        buckets.push_back({u, hi});
        for (int v = u; v <= hi; ++v) unit_bucket[v] = static_cast<int>(buckets.size()) - 1;
        hi = u - 1;
        size = 0;
      }
    }
  }

  void launch_bucket(int b) {
    const auto [lo, hi] = buckets[b];
    const size_t begin = sh.unit(lo).offset;
    const size_t count = sh.unit(hi).offset + sh.unit(hi).padded - begin;
    char* data = at(grad_store, begin, gdt);
    PendingReduction p;
    if (rdt == gdt) {
      p.work = comm.all_reduce_async(data, count, gdt, comm::ReduceOp::kSum);
    } else {
      p.send = Buffer(count * dtype_size(rdt), MemCategory::kComm);
      convert(data, gdt, p.send.data(), rdt, count);
      p.work = comm.all_reduce_async(p.send.data(), count, rdt, comm::ReduceOp::kSum);
      void* tmp = p.send.data();
      DType rt = rdt, gt = gdt;
      p.on_done = [tmp, data, count, rt, gt] { convert(tmp, rt, data, gt, count); };
    }
    push_pending(std::move(p));
  }

  // Stage 1: the unit's gradient is reduce-scattered in place: the rank's shard of the sum lands in
  // its own range of the full gradient buffer.
  void launch_unit_reduce_scatter_inplace(int u) {
    const UnitShard& s = sh.unit(u);
    char* data = at(grad_store, s.offset, gdt);
    char* own = at(grad_store, s.offset + static_cast<size_t>(r) * s.shard, gdt);
    PendingReduction p;
    if (rdt == gdt) {
      p.work = comm.reduce_scatter_async(data, own, s.shard, gdt, comm::ReduceOp::kSum);
    } else {
      p.send = Buffer(s.padded * dtype_size(rdt), MemCategory::kComm);
      p.recv = Buffer(s.shard * dtype_size(rdt), MemCategory::kComm);
      convert(data, gdt, p.send.data(), rdt, s.padded);
      p.work = comm.reduce_scatter_async(p.send.data(), p.recv.data(), s.shard, rdt, comm::ReduceOp::kSum);
      void* recv = p.recv.data();
      DType rt = rdt, gt = gdt;
      const size_t n = s.shard;
      p.on_done = [recv, own, n, rt, gt] { convert(recv, rt, own, gt, n); };
    }
    push_pending(std::move(p));
  }

  // Stages 2-3: the unit's fp32 gradient of this micro-step is reduce-scattered and added into the
  // rank's persistent gradient shard; the full-size buffer is freed as soon as the reduction lands.
  void launch_unit_reduce_scatter_to_shard(int u) {
    const UnitShard& s = sh.unit(u);
    if (W == 1) {
      // Nothing to reduce: add the micro-step's gradient into the store as stages 0-1 do, without a
      // detour through the reduction dtype, so that one rank trains alike at every stage.
      add_into(at(grad_store, shard_off[u], gdt), gdt, work_grad[u].data(), DType::kF32, s.shard);
      work_grad[u].release();
      grad_ptr[u] = nullptr;
      return;
    }
    PendingReduction p;
    if (rdt == DType::kF32) {
      p.send = std::move(work_grad[u]);
    } else {
      p.send = Buffer(s.padded * dtype_size(rdt), MemCategory::kComm);
      convert(work_grad[u].data(), DType::kF32, p.send.data(), rdt, s.padded);
      work_grad[u].release();
    }
    grad_ptr[u] = nullptr;
    p.recv = Buffer(s.shard * dtype_size(rdt), MemCategory::kComm);
    p.work = comm.reduce_scatter_async(p.send.data(), p.recv.data(), s.shard, rdt, comm::ReduceOp::kSum);
    void* recv = p.recv.data();
    char* dst = at(grad_store, shard_off[u], gdt);
    DType rt = rdt, gt = gdt;
    const size_t n = s.shard;
    p.on_done = [recv, dst, n, rt, gt] { add_into(dst, gt, recv, rt, n); };
    push_pending(std::move(p));
  }

  // ---- stage 3 gathering ----------------------------------------------------------------------
  void start_gather(int u) {
    const UnitShard& s = sh.unit(u);
    gathered[u] = Buffer(s.padded * dtype_size(pdt), MemCategory::kGathered);
    gwork[u] = comm.all_gather_async(at(param_store, param_off[u], pdt), gathered[u].data(), s.shard, pdt);
    gstate[u] = GatherState::kInFlight;
    live_gathered += s.padded;
  }
  void ensure_gathered(int u) {
    if (gstate[u] == GatherState::kSharded) start_gather(u);
    if (gstate[u] == GatherState::kInFlight) {
      wait(gwork[u]);
      gwork[u].reset();
      gstate[u] = GatherState::kReady;
    }
  }
  void release_gathered(int u) {
    if (gstate[u] == GatherState::kSharded || param_whole[u]) return;
    if (gstate[u] == GatherState::kInFlight) wait(gwork[u]);
    gwork[u].reset();
    gathered[u].release();
    gstate[u] = GatherState::kSharded;
    live_gathered -= sh.unit(u).padded;
    if (!mixed) param_ptr[u] = nullptr;
  }
  // Starts the gathers of the next units in the schedule, within the limits on what may be live
  // (stage3_max_live_parameters) and what may be fetched ahead (stage3_prefetch_bucket_size).
  void prefetch() {
    if (!cfg.overlap_comm) return;
    size_t ahead = 0;
    for (size_t k = cursor + 1; k < schedule.size() && k <= cursor + 4; ++k) {
      const int v = schedule[k];
      if (gstate[v] != GatherState::kSharded) continue;
      const size_t n = sh.unit(v).padded;
      if (live_gathered + n > cfg.stage3_max_live_parameters || ahead + n > cfg.stage3_prefetch_bucket_size) break;
      start_gather(v);
      ahead += n;
    }
  }

  // ---- UnitAccess -----------------------------------------------------------------------------
  void begin(int u, UnitPhase phase) override {
    if (model::phase_needs_params(phase)) {
      if (stage == 3) {
        if (phase == UnitPhase::kEmbedForward) cursor = 0;
        else ++cursor;
        ensure_gathered(u);
        prefetch();
      }
      const void* src = param_whole[u] ? param_at(u, 0) : gathered[u].data();
      if (!mixed) {
        param_ptr[u] = static_cast<const float*>(src);
      } else if (work_param[u].empty()) {
        const size_t n = sh.unit(u).numel;
        work_param[u] = Buffer(n * sizeof(float), MemCategory::kGathered);
        convert(src, pdt, work_param[u].data(), DType::kF32, n);
        param_ptr[u] = work_param[u].as<float>();
      }
    }
    if (model::phase_is_backward(phase)) {
      if (grad_direct) {
        grad_ptr[u] = grad_store.as<float>() + sh.unit(u).offset;
      } else if (work_grad[u].empty()) {
        work_grad[u] = Buffer(sh.unit(u).padded * sizeof(float), MemCategory::kGathered);
        work_grad[u].zero();
        grad_ptr[u] = work_grad[u].as<float>();
      }
    }
  }

  void drop_param_work(int u) {
    if (mixed) {
      work_param[u].release();
      param_ptr[u] = nullptr;
    }
  }

  void end(int u, UnitPhase phase) override {
    switch (phase) {
      case UnitPhase::kEmbedForward:
      case UnitPhase::kBlockForward:
        drop_param_work(u);
        if (stage == 3 && cfg.reshard_after_forward) release_gathered(u);
        break;
      case UnitPhase::kHeadForward:
        break;  // the head's backward comes next and uses the same parameters
      case UnitPhase::kHeadBackward:
        drop_param_work(0);
        if (stage == 3) release_gathered(0);
        break;  // unit 0's gradient stays open until the embedding's backward
      case UnitPhase::kBlockBackward:
        drop_param_work(u);
        if (stage == 3) release_gathered(u);
        finish_grad(u);
        break;
      case UnitPhase::kEmbedBackward:
        finish_grad(0);
        break;
    }
  }

  const float* params(int u) override { return param_ptr[u]; }
  float* grads(int u) override { return grad_ptr[u]; }

  void finish_grad(int u) {
    if (stage <= 1) {
      if (!grad_direct) {
        add_into(at(grad_store, sh.unit(u).offset, gdt), gdt, work_grad[u].data(), DType::kF32, sh.unit(u).numel);
        work_grad[u].release();
        grad_ptr[u] = nullptr;
      }
      if (!last_micro || W == 1) return;
      if (stage == 0) {
        const int b = unit_bucket[u];
        if (--bucket_left[b] == 0) launch_bucket(b);
      } else {
        launch_unit_reduce_scatter_inplace(u);
      }
      return;
    }
    launch_unit_reduce_scatter_to_shard(u);
  }

  // ---- the optimizer step ---------------------------------------------------------------------
  void gather_params_after_update() {
    // Stages 1-2: each rank updated its shard of the full parameters; all-gather them in place,
    // with at most allgather_bucket_size elements in flight.
    std::deque<std::pair<comm::WorkPtr, size_t>> inflight;
    size_t live = 0;
    for (int u = 0; u < layout.num_units(); ++u) {
      if (!param_whole[u]) continue;  // stage 3 gathers sharded units when it uses them
      const UnitShard& s = sh.unit(u);
      char* unit = at(param_store, param_off[u], pdt);
      char* own = at(param_store, param_off[u] + static_cast<size_t>(r) * s.shard, pdt);
      inflight.emplace_back(comm.all_gather_async(own, unit, s.shard, pdt), s.padded);
      live += s.padded;
      while (live > cfg.allgather_bucket_size && inflight.size() > 1) {
        wait(inflight.front().first);
        live -= inflight.front().second;
        inflight.pop_front();
      }
      if (!cfg.overlap_comm) {
        wait(inflight.back().first);
        live -= inflight.back().second;
        inflight.pop_back();
      }
    }
    for (auto& [w, n] : inflight) wait(w);
  }

  void optimizer_update(double lr, float grad_scale) {
    const int64_t t = steps_taken + 1;
    const bool adamw = cfg.optimizer.kind == optim::OptimizerKind::kAdamW;
    const optim::AdamWParams adam = optim::adamw_params(cfg.optimizer, lr);
    const optim::SGDParams sgd = optim::sgd_params(cfg.optimizer, lr);
    // Gradients stored in 16 bits are widened chunk by chunk (working memory: act).
    size_t largest = 0;
    for (int u = 0; u < layout.num_units(); ++u) largest = std::max(largest, update_range(u).second - update_range(u).first);
    Buffer g32(gdt == DType::kF32 ? 0 : std::min(kChunk, largest) * sizeof(float), MemCategory::kAct);
    for (int u = 0; u < layout.num_units(); ++u) {
      const auto [b, e] = update_range(u);
      for (const Segment& seg : unit_segments(layout, u, b, e)) {
        for (size_t c = seg.begin; c < seg.begin + seg.count; c += kChunk) {
          const size_t n = std::min(kChunk, seg.begin + seg.count - c);
          const float* g;
          if (gdt == DType::kF32) {
            g = grad_store.as<float>() + grad_index(u, c);
          } else {
            to_f32(at(grad_store, grad_index(u, c), gdt), gdt, g32.as<float>(), n);
            g = g32.as<float>();
          }
          float* w = weights_at(u, c);
          float* m = opt_m.empty() ? nullptr : opt_m.as<float>() + state_index(u, c);
          if (adamw)
            optim::adamw_update(w, g, m, opt_v.as<float>() + state_index(u, c), n, adam, t, seg.decay, grad_scale);
          else
            optim::sgd_update(w, g, m, n, sgd, t, seg.decay, grad_scale);
        }
      }
      if (mixed && b < e) convert(weights_at(u, b), DType::kF32, param_at(u, b), pdt, e - b);
    }
    ++steps_taken;
    if (stage >= 1 && W > 1) gather_params_after_update();
  }

  StepResult step(int accum, const BatchSource& batches, double lr, double clip) {
    ZDP_REQUIRE(accum >= 1, "gradient accumulation steps must be at least 1, got {}", accum);
    StepResult res;
    wait_ms = 0;
    grad_store.zero();
    const double scale = e.scaler_.scale();
    res.loss_scale = scale;
    const int B = cfg.micro_batch, T = cfg.seq;
    const double global_tokens = static_cast<double>(W) * accum * B * T;
    const float dloss = static_cast<float>(scale / global_tokens);
    int32_t* inputs = tokens.as<int32_t>();
    int32_t* targets = inputs + static_cast<size_t>(B) * T;
    double loss_sum = 0;
    for (int g = 0; g < accum; ++g) {
      last_micro = g == accum - 1;
      if (stage == 0) {
        bucket_left.assign(buckets.size(), 0);
        for (const auto& [lo, hi] : buckets) bucket_left[unit_bucket[lo]] = hi - lo + 1;
      }
      batches(g, inputs, targets);
      loss_sum += model.forward(inputs, targets, *this) * B * T;
      model.backward(dloss, *this);
    }
    complete_all();

    const int inject_unit = cfg.inject_overflow_unit;
    if (calls++ == cfg.inject_overflow_step && r == cfg.inject_overflow_rank && inject_unit >= 0 &&
        inject_unit < layout.num_units()) {
      // Testing aid: a gradient that overflowed on this rank only, inside the range whose norm it
      // computes (at stage 0 every rank holds the whole gradient but measures its own part).
      const UnitShard& s = sh.unit(inject_unit);
      if (s.own_begin < s.own_end) {
        const float inf = std::numeric_limits<float>::infinity();
        convert(&inf, DType::kF32, at(grad_store, grad_index(inject_unit, s.own_begin), gdt), gdt, 1);
      }
    }

    // The global loss and gradient norm, from each rank's shard: one all-reduce of two numbers.
    const int U = layout.num_units();
    std::vector<float> unit_nonfinite(static_cast<size_t>(U), 0.0f);
    double sumsq = 0;
    for (int u = 0; u < U; ++u) {
      const UnitShard& s = sh.unit(u);
      if (s.own_begin >= s.own_end) continue;
      const double q = sum_squares(at(grad_store, grad_index(u, s.own_begin), gdt), gdt, s.own_end - s.own_begin);
      if (!std::isfinite(q)) unit_nonfinite[u] = 1.0f;
      sumsq += q;
    }
    float pair[2] = {static_cast<float>(loss_sum), static_cast<float>(sumsq)};
    comm.all_reduce(pair, 2, DType::kF32, comm::ReduceOp::kSum);
    res.loss = pair[0] / global_tokens;
    const double scaled_norm = std::sqrt(static_cast<double>(pair[1]));
    res.grad_norm = scaled_norm / scale;
    // Every rank holds the same two sums, so every rank takes the same branch.
    if (!std::isfinite(pair[0]) || !std::isfinite(scaled_norm)) {
      res.nonfinite = res.skipped = true;
      if (cfg.loss_scale.enabled) {
        e.scaler_.update(true);
      } else {
        // Which units: one more (small) all-reduce, on this path only.
        comm.all_reduce(unit_nonfinite.data(), unit_nonfinite.size(), DType::kF32, comm::ReduceOp::kMax);
        for (int u = 0; u < U; ++u)
          if (unit_nonfinite[u] != 0.0f) res.nonfinite_units.push_back(u);
      }
      res.comm_wait_ms = wait_ms;
      return res;
    }
    e.scaler_.update(false);
    double coef = 1.0;
    if (clip > 0) coef = std::min(1.0, clip / (res.grad_norm + 1e-6));
    optimizer_update(lr, static_cast<float>(coef / scale));
    res.comm_wait_ms = wait_ms;
    return res;
  }

  bool weights_finite() {
    float bad = 0.0f;
    for (int u = 0; u < layout.num_units() && bad == 0.0f; ++u) {
      const auto [b, e2] = update_range(u);
      const float* w = b < e2 ? weights_at(u, b) : nullptr;
      for (size_t i = 0; i < e2 - b; ++i)
        if (!std::isfinite(w[i])) {
          bad = 1.0f;
          break;
        }
    }
    comm::TrafficLedger scratch;  // a check, not training traffic
    comm::TrafficLedger* training = &comm.traffic();
    comm.set_traffic_ledger(&scratch);
    comm.all_reduce(&bad, 1, DType::kF32, comm::ReduceOp::kMax);
    comm.set_traffic_ledger(training);
    return bad == 0.0f;
  }

  // ---- loading and consolidation --------------------------------------------------------------
  float* state_buffer(int k) { return k == 0 ? opt_m.as<float>() : opt_v.as<float>(); }

  // Working memory for loading and for widening 16-bit gradients is bounded by this many elements,
  // so that it stays small beside the activations whatever the unit sizes.
  static constexpr size_t kChunk = size_t{1} << 18;

  void load_state(const Engine::StateSource& source, bool with_states) {
    size_t largest = 0;
    for (int u = 0; u < layout.num_units(); ++u)
      largest = std::max(largest, param_whole[u] ? sh.unit(u).numel : sh.unit(u).own_end - sh.unit(u).own_begin);
    Buffer tmp(std::min(kChunk, largest) * sizeof(float), MemCategory::kAct);
    float* vals = tmp.as<float>();
    for (int u = 0; u < layout.num_units(); ++u) {
      const UnitShard& s = sh.unit(u);
      // The weights this rank keeps: all of the unit (stages 0-2 parameters) or its shard (stage 3),
      // read as fp32 chunk by chunk, stored in the compute dtype and, where it updates them, as masters.
      const size_t keep_b = param_whole[u] ? 0 : s.own_begin, keep_e = param_whole[u] ? s.numel : s.own_end;
      const auto [b, e2] = update_range(u);
      for (size_t c = keep_b; c < keep_e; c += kChunk) {
        const size_t n = std::min(kChunk, keep_e - c);
        source(-1, u, c, n, vals);
        convert(vals, DType::kF32, param_at(u, c), pdt, n);
        const size_t mb = std::max(b, c), me = std::min(e2, c + n);
        if (mixed && mb < me) std::memcpy(weights_at(u, mb), vals + (mb - c), (me - mb) * sizeof(float));
      }
      if (!with_states || b >= e2) continue;
      for (int k = 0; k < e.num_optimizer_states(); ++k)
        source(k, u, b, e2 - b, state_buffer(k) + state_index(u, b));
    }
  }

  void consolidate(const std::function<void(int, const float*)>& sink) {
    // Full fp32 weights are already on every rank for fp32 stages 0-2 and for 16-bit stage 0;
    // otherwise the fp32 shards are all-gathered unit by unit (not counted as training traffic).
    comm::TrafficLedger scratch;
    comm::TrafficLedger* training = &comm.traffic();
    comm.set_traffic_ledger(&scratch);
    for (int u = 0; u < layout.num_units(); ++u) {
      const UnitShard& s = sh.unit(u);
      if ((!mixed && param_whole[u]) || (mixed && stage == 0)) {
        if (r == 0) sink(u, weights_at(u, 0));
        continue;
      }
      Buffer full(s.padded * sizeof(float), MemCategory::kGathered);
      Buffer mine(s.shard * sizeof(float), MemCategory::kComm);
      mine.zero();
      if (s.own_begin < s.own_end)
        std::memcpy(mine.data(), weights_at(u, s.own_begin), (s.own_end - s.own_begin) * sizeof(float));
      comm.all_gather(mine.data(), full.data(), s.shard, DType::kF32);
      if (r == 0) sink(u, full.as<float>());
    }
    comm.set_traffic_ledger(training);
  }
};

Engine::Engine(const model::ParamLayout& layout, std::shared_ptr<comm::Communicator> comm, EngineConfig config)
    : layout_(layout), comm_(std::move(comm)), config_(config), shards_(layout, comm_->size(), comm_->rank()),
      scaler_(config.loss_scale) {
  ZDP_REQUIRE(config.stage >= 0 && config.stage <= 3, "ZeRO stage must be 0, 1, 2 or 3, got {}", config.stage);
  impl_ = std::make_unique<Impl>(*this, layout_, shards_, *comm_, config_);
}

Engine::~Engine() = default;

void Engine::load(const UnitSource& source) {
  impl_->load_state([&source](int state, int unit, size_t begin, size_t count, float* dst) {
    if (state < 0) source(unit, begin, count, dst);
  }, false);
}

void Engine::load_state(const StateSource& source) { impl_->load_state(source, true); }

int Engine::num_optimizer_states() const {
  return static_cast<int>(optim::state_floats_per_param(config_.optimizer));
}

void Engine::visit_owned(const std::function<void(const OwnedRange&)>& visit) const {
  Impl& m = *impl_;
  for (int u = 0; u < layout_.num_units(); ++u) {
    const UnitShard& s = shards_.unit(u);
    OwnedRange r{u, s.own_begin, s.own_end, nullptr, {}};
    if (s.own_begin < s.own_end) {
      r.weights = m.weights_at(u, s.own_begin);
      for (int k = 0; k < num_optimizer_states(); ++k) r.states.push_back(m.state_buffer(k) + m.state_index(u, s.own_begin));
    }
    visit(r);
  }
}

void Engine::set_optimizer_steps(int64_t steps) { impl_->steps_taken = steps; }

StepResult Engine::step(int accum, const BatchSource& batches, double lr, double clip) {
  return impl_->step(accum, batches, lr, clip);
}

int64_t Engine::optimizer_steps() const { return impl_->steps_taken; }

bool Engine::weights_finite() { return impl_->weights_finite(); }

void Engine::consolidate(const std::function<void(int unit, const float* data)>& sink) { impl_->consolidate(sink); }

}  // namespace zerodp::zero
