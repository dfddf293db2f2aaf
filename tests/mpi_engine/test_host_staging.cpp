// The engine on a device whose memory the host does not address (Device::host_addressable false),
// which is how it runs on a GPU: the batch's tokens, loading, the checkpoint visit and restore, and
// consolidation go through host buffers and copies (device/host_access.h) instead of touching the
// states in place. Here that device is the CPU device saying so (every byte is still RAM), so the
// GPU's paths run on the W ranks of this binary and must give the direct paths' results bit for bit:
// losses, gradient norms, consolidated weights, every owned weight and optimizer state, and a
// restore from them. Its host tier is memory it will not compute on, as a GPU's kernels should not
// (they would reach page-locked memory across PCIe): ZeRO-Offload's update and the conversions
// between host buffers must go to Device::host(), here a plain CPU device, or the test fails.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "comm/runtime.h"
#include "device/cpu_device.h"
#include "model/init.h"
#include "model/layout.h"
#include "tests/mpi_engine/small_engine.h"
#include "zero/engine.h"
#include "zero/model_states.h"

using namespace zerodp;
using namespace zerodp::zero;

namespace {

// Memory whose live blocks are known, so that a device can tell its tiers apart (and refuse to compute
// on its host tier).
class TrackedMemory final : public BufferSource {
 public:
  void* allocate(size_t bytes) override {
    // Page-aligned as every host tier is (NVMe offload reads and writes it with O_DIRECT).
    constexpr size_t kAlign = Buffer::kHostAlignment;
    void* p = std::aligned_alloc(kAlign, (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign);
    if (p == nullptr) throw std::bad_alloc();
    std::lock_guard<std::mutex> lock(mu_);
    live_[static_cast<const char*>(p)] = bytes;
    return p;
  }
  void deallocate(void* p, size_t) noexcept override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      live_.erase(static_cast<const char*>(p));
    }
    std::free(p);
  }
  // Whether p lies in a live block.
  bool contains(const void* p) const {
    const char* c = static_cast<const char*>(p);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.upper_bound(c);
    if (it == live_.begin()) return false;
    --it;
    return c < it->first + std::max<size_t>(it->second, 1);
  }

 private:
  mutable std::mutex mu_;
  std::map<const char*, size_t> live_;
};

// The CPU device with the GPU's answer to host_addressable(), a host tier of its own that its
// kernels refuse (a computation there counts in host_computations() and fails the test), and a
// plain CPU device as its host(); everything else is the CPU's, with one more check:
//
// A GPU runs a copy out of page-locked memory later, in its compute stream's order (copy() returns at
// once), so the host source must stay as it was until the caller knows the copy has run: an event
// recorded after it is done, the device synchronized, a copy into host memory (which waits for the
// stream), a sum of squares (whose answer the host reads), or a transfer's event (the copy queue waits
// for the compute stream). Here every copy out of the host tier keeps a snapshot of its source and is
// "in flight" until one of those; then the source must still equal the snapshot, or the GPU would have
// copied bytes written after the copy was issued (rewritten_sources() counts them; each fails the test).
// Transfers likewise, whatever their source: until their queue's event (or a synchronize) says so.
class StagedCpuDevice final : public device::Device {
 public:
  std::string name() const override { return "cpu (staged like a GPU)"; }
  bool host_addressable() const override { return false; }
  Device& host() override { return host_cpu_; }
  Buffer allocate(size_t bytes, MemCategory c) override { return Buffer(bytes, c, MemTier::kDevice, device_memory_); }
  Buffer allocate_host(size_t bytes, MemCategory c) override { return Buffer(bytes, c, MemTier::kHost, host_memory_); }
  void copy(void* dst, const void* src, size_t bytes) override {
    // Into host memory the GPU's copy() waits for the stream, this copy included: nothing stays in flight.
    const bool to_host = !device_memory_.contains(dst);
    if (to_host) settle(copies_.issued, 0);
    cpu_.copy(dst, src, bytes);
    if (!to_host && bytes > 0 && on_host(src)) copies_.issue(src, bytes, mu_);
  }
  void fill_zero(void* dst, size_t bytes) override {
    not_on_host("fill_zero", dst);
    cpu_.fill_zero(dst, bytes);
  }
  void convert(const void* src, DType st, void* dst, DType dt, size_t n) override {
    if (n > 0 && on_host(src) && on_host(dst)) refused("convert between host buffers");
    cpu_.convert(src, st, dst, dt, n);
  }
  void add_into(void* dst, DType dt, const void* src, DType st, size_t n) override {
    not_on_host("add_into", dst);
    cpu_.add_into(dst, dt, src, st, n);
  }
  double sum_squares(const void* x, DType t, size_t n) override {
    not_on_host("sum_squares", x);
    settle(copies_.issued, 0);  // the host reads the answer: the stream has run up to here
    return cpu_.sum_squares(x, t, n);
  }
  void quantize_int8(const void* x, DType t, size_t n, void* out) override {
    not_on_host("quantize_int8", x);
    cpu_.quantize_int8(x, t, n, out);
  }
  void dequantize_int8(const void* q, size_t n, void* x, DType t) override {
    not_on_host("dequantize_int8", x);
    cpu_.dequantize_int8(q, n, x, t);
  }
  void gemm(DType dtype, bool ta, bool tb, int M, int N, int K, float alpha, const void* A, int lda, const void* B,
            int ldb, float beta, float* C, int ldc) override {
    cpu_.gemm(dtype, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
  void adamw_update(float* p, const float* g, float* m, float* v, size_t n, const optim::AdamWParams& hp, int64_t t,
                    bool decay, float grad_scale) override {
    not_on_host("adamw_update", p);
    cpu_.adamw_update(p, g, m, v, n, hp, t, decay, grad_scale);
  }
  void sgd_update(float* p, const float* g, float* mom, size_t n, const optim::SGDParams& hp, int64_t t, bool decay,
                  float grad_scale) override {
    not_on_host("sgd_update", p);
    cpu_.sgd_update(p, g, mom, n, hp, t, decay, grad_scale);
  }
  void round_bf16_stochastic(const float* x, void* out, size_t n, uint64_t stream, uint64_t first) override {
    not_on_host("round_bf16_stochastic", out);
    cpu_.round_bf16_stochastic(x, out, n, stream, first);
  }
  void muon_momentum(const float* g, float* m, float* u, size_t n, const optim::MuonScalars& s) override {
    not_on_host("muon_momentum", m);
    cpu_.muon_momentum(g, m, u, n, s);
  }
  void muon_apply(float* w, const float* o, size_t n, const optim::MuonScalars& s) override {
    not_on_host("muon_apply", w);
    cpu_.muon_apply(w, o, n, s);
  }
  int host_computations() const { return host_computations_; }
  int rewritten_sources() const { return rewritten_sources_; }
  void transfer(const void* src, DType st, void* dst, DType dt, size_t n) override {
    transfer_after_ = copies_.issued;  // the copy queue waits for the compute stream's work so far
    if (n > 0) transfers_.issue(src, n * dtype_size(st), mu_);
    cpu_.transfer(src, st, dst, dt, n);
  }
  std::unique_ptr<device::Event> record_transfer() override {
    return std::make_unique<SettlingEvent>(*this, transfer_after_, transfers_.issued, cpu_.record_transfer());
  }
  std::unique_ptr<device::Event> record() override {
    return std::make_unique<SettlingEvent>(*this, copies_.issued, 0, cpu_.record());
  }
  void synchronize() override {
    cpu_.synchronize();
    settle(copies_.issued, transfers_.issued);
  }

 protected:
  const device::ModelKernels<float>* kernels_f32() const override { return &cpu_.kernels<float>(); }
  const device::ModelKernels<double>* kernels_f64() const override { return &cpu_.kernels<double>(); }
  const device::ModelKernels<bf16>* kernels_bf16() const override { return &cpu_.kernels<bf16>(); }
  const device::ModelKernels<fp16>* kernels_fp16() const override { return &cpu_.kernels<fp16>(); }

 private:
  bool on_host(const void* p) const { return host_memory_.contains(p); }
  void not_on_host(const char* what, const void* p) {
    if (on_host(p)) refused(what);
  }
  void refused(const std::string& what) {
    ++host_computations_;
    ADD_FAILURE() << "the device computed on host memory: " << what << " (it belongs to Device::host())";
  }

  // An event of this device: done once the one it wraps is, and then the copies up to number `copies`
  // and the transfers up to number `transfers` have run.
  class SettlingEvent final : public device::Event {
   public:
    SettlingEvent(StagedCpuDevice& dev, uint64_t copies, uint64_t transfers, std::unique_ptr<device::Event> inner)
        : dev_(dev), copies_(copies), transfers_(transfers), inner_(std::move(inner)) {}
    bool done() const override {
      if (!inner_->done()) return false;
      dev_.settle(copies_, transfers_);
      return true;
    }
    void wait() override {
      inner_->wait();
      dev_.settle(copies_, transfers_);
    }

   private:
    StagedCpuDevice& dev_;
    uint64_t copies_, transfers_;
    std::unique_ptr<device::Event> inner_;
  };

  // Copies (or transfers) in issue order, each with a snapshot of its source.
  struct InFlight {
    struct Entry {
      uint64_t seq;
      const char* src;
      std::string snapshot;
    };
    explicit InFlight(const char* w) : what(w) {}
    const char* what;
    std::deque<Entry> entries;
    uint64_t issued = 0;
    void issue(const void* src, size_t bytes, std::mutex& mu) {
      std::lock_guard<std::mutex> lock(mu);
      entries.push_back({++issued, static_cast<const char*>(src), std::string(static_cast<const char*>(src), bytes)});
    }
  };

  // The copies up to number `copies` and the transfers up to number `transfers` are known to have run:
  // their sources must be unchanged.
  void settle(uint64_t copies, uint64_t transfers) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto [q, upto] : {std::pair{&copies_, copies}, std::pair{&transfers_, transfers}}) {
      while (!q->entries.empty() && q->entries.front().seq <= upto) {
        const InFlight::Entry& c = q->entries.front();
        if (std::memcmp(c.src, c.snapshot.data(), c.snapshot.size()) != 0) {
          ++rewritten_sources_;
          ADD_FAILURE() << "the source of " << q->what << " " << c.seq << " (" << c.snapshot.size()
                        << " bytes) was rewritten before the " << q->what << " was known to have run";
        }
        q->entries.pop_front();
      }
    }
  }

  device::CpuDevice cpu_;
  device::CpuDevice host_cpu_;
  TrackedMemory host_memory_;
  TrackedMemory device_memory_;  // only to tell the device's own memory apart
  int host_computations_ = 0;
  std::mutex mu_;
  InFlight copies_{"copy"};  // the compute queue's copies out of the host tier
  InFlight transfers_{"transfer"};
  uint64_t transfer_after_ = 0;  // the copies the latest transfer was queued after
  int rewritten_sources_ = 0;
};

model::GPT2Config small_model() { return engine_tests::padded_model(); }  // units that need padding
// Unit 0 (wte 2100×128 + wpe + ln_f) is over kWorkChunk = 2^18 elements: loading and restoring
// it at stage 0 (whole units) takes several chunks.
model::GPT2Config chunked_model() { return {1, 4, 128, 2100, 16}; }

// Everything a run leaves that the host reads: per step loss and norm, rank 0's consolidated
// weights, and this rank's owned weights and optimizer states (the checkpoint's view).
struct Seen {
  std::vector<double> losses, norms;
  std::vector<std::vector<float>> consolidated;
  std::vector<std::vector<float>> owned;  // per unit: weights, then each state, concatenated
};

Seen visit(Engine& engine) {
  Seen s;
  engine.visit_owned([&](const Engine::OwnedRange& r) {
    std::vector<float>& v = s.owned.emplace_back();
    if (r.begin >= r.end) return;
    v.assign(r.weights, r.weights + (r.end - r.begin));
    for (const float* st : r.states) v.insert(v.end(), st, st + (r.end - r.begin));
  });
  return s;
}

Seen train(EngineConfig cfg, device::Device* dev, int steps, const model::GPT2Config& model = small_model()) {
  cfg.device = dev;
  const model::ParamLayout layout(model);
  std::shared_ptr<comm::Communicator> comm = comm::world()->split(0, comm::world()->rank());
  const int W = comm->size(), r = comm->rank();
  Engine engine(layout, comm, cfg);
  engine.load([&](int u, size_t b, size_t n, float* dst) {
    model::init_unit_range(layout.config(), layout, u, b, n, 91, dst);
  });
  std::vector<double> losses, norms;
  for (int s = 0; s < steps; ++s) {
    const StepResult res = engine.step(
        2,
        [&](int g, int32_t* in, int32_t* tg) {
          for (int i = 0; i < cfg.micro_batch * cfg.seq; ++i) {
            const int x = ((s * W + r) * 7 + g * 3 + i * 5) % 64;
            in[i] = x;
            tg[i] = (x * 3 + 1) % 64;  // within every model's vocabulary
          }
        },
        3e-3, 1.0);
    losses.push_back(res.loss);
    norms.push_back(res.grad_norm);
  }
  EXPECT_TRUE(engine.weights_finite());
  Seen seen = visit(engine);
  seen.losses = losses;
  seen.norms = norms;
  seen.consolidated.resize(layout.num_units());
  engine.consolidate([&](int u, const float* d) { seen.consolidated[u].assign(d, d + layout.unit_numel(u)); });
  return seen;
}

EngineConfig config(int stage, DType dtype) {
  EngineConfig c = engine_tests::small_engine_config(stage, dtype);
  c.zero.reduce_bucket_size = 3000;  // several buckets at stage 0
  return c;
}

void expect_same(const Seen& got, const Seen& want, const std::string& what) {
  EXPECT_EQ(got.losses, want.losses) << what;
  EXPECT_EQ(got.norms, want.norms) << what;
  ASSERT_EQ(got.owned.size(), want.owned.size()) << what;
  for (size_t u = 0; u < want.owned.size(); ++u)
    EXPECT_TRUE(got.owned[u] == want.owned[u]) << what << ": owned weights or states of unit " << u << " differ";
  if (comm::world()->rank() != 0) return;
  for (size_t u = 0; u < want.consolidated.size(); ++u)
    EXPECT_TRUE(got.consolidated[u] == want.consolidated[u]) << what << ": consolidated unit " << u << " differs";
}

}  // namespace

TEST(HostStaging, GpuPathsGiveTheDirectPathsBits) {
  StagedCpuDevice staged;
  for (DType dt : {DType::kBF16, DType::kF32, DType::kF16}) {
    for (int stage = 0; stage <= 3; ++stage) {
      if (dt != DType::kBF16 && stage != 2) continue;  // the fp32 and fp16 paths once
      const EngineConfig cfg = config(stage, dt);
      const std::string what = std::string(dtype_name(dt)) + " stage " + std::to_string(stage);
      expect_same(train(cfg, &staged, 2), train(cfg, nullptr, 2), what);
    }
  }
  const EngineConfig cfg = config(0, DType::kBF16);
  ASSERT_GT(model::ParamLayout(chunked_model()).unit_numel(0), kWorkChunk);
  expect_same(train(cfg, &staged, 1, chunked_model()), train(cfg, nullptr, 1, chunked_model()),
              "bf16 stage 0, a unit loaded in several chunks");
}

// ZeRO-Offload on a device that is not the host's: the gradient comes down on the transfer queue,
// the update runs on Device::host() over the host tier, the weights go up; the same bits as the
// direct run without offload, with sub-groups cutting through units, and with the optimizer on NVMe.
TEST(HostStaging, OptimizerOffloadUpdatesOnTheHost) {
  const std::string dir = "/tmp/zerodp-staged-nvme-" + std::to_string(::getppid());  // the ranks' launcher
  std::filesystem::create_directories(dir);
  for (DType dt : {DType::kBF16, DType::kF32}) {
    for (int stage = 1; stage <= 3; ++stage) {
      for (bool nvme : {false, true}) {
        if (nvme && (dt == DType::kF32 || stage == 2)) continue;
        StagedCpuDevice staged;
        const EngineConfig plain = config(stage, dt);
        EngineConfig off = plain;
        off.zero.offload_optimizer = zero::Offload::kCpu;
        off.zero.sub_group_size = 700;  // several sub-groups, cutting through units
        if (nvme) {
          off.zero.offload_optimizer = zero::Offload::kNvme;
          off.zero.nvme_path = dir;
        }
        const std::string what = std::string(dtype_name(dt)) + " stage " + std::to_string(stage) +
                                 (nvme ? ", optimizer on nvme" : ", optimizer on cpu");
        expect_same(train(off, &staged, 2), train(plain, nullptr, 2), what);
        EXPECT_EQ(staged.host_computations(), 0) << what;
      }
    }
  }
  comm::world()->barrier();
  if (comm::world()->rank() == 0) std::filesystem::remove_all(dir);
}

// ZeRO-Infinity's parameter offload (stage 3) on a device that is not the host's: each gather copies
// its shard up from host memory (or from NVMe through a host buffer), the offloaded update writes the
// shards on the host; the same bits as the direct run without offload, with and without prefetching,
// with a unit kept whole on the device.
TEST(HostStaging, ParameterOffloadGathersFromTheHost) {
  const std::string dir = "/tmp/zerodp-staged-param-" + std::to_string(::getppid());
  std::filesystem::create_directories(dir);
  struct Case {
    bool nvme, prefetch;
    size_t threshold;
  };
  for (DType dt : {DType::kBF16, DType::kF32}) {
    for (const Case& k : {Case{false, true, 0}, Case{false, false, 5000}, Case{true, true, 0}}) {
      if (dt == DType::kF32 && k.nvme) continue;
      StagedCpuDevice staged;
      EngineConfig plain = config(3, dt);
      plain.zero.stage3_param_persistence_threshold = k.threshold;
      plain.zero.overlap_comm = k.prefetch;
      EngineConfig off = plain;
      off.zero.offload_optimizer = zero::Offload::kCpu;
      off.zero.offload_param = zero::Offload::kCpu;
      off.zero.sub_group_size = 700;
      if (k.nvme) {
        off.zero.offload_param = zero::Offload::kNvme;
        off.zero.nvme_path = dir;
      }
      const std::string what = std::string(dtype_name(dt)) + (k.nvme ? " parameters on nvme" : " parameters on cpu") +
                               (k.prefetch ? "" : ", no prefetch") + ", threshold " + std::to_string(k.threshold);
      expect_same(train(off, &staged, 2), train(plain, nullptr, 2), what);
      EXPECT_EQ(staged.host_computations(), 0) << what;
    }
  }
  comm::world()->barrier();
  if (comm::world()->rank() == 0) std::filesystem::remove_all(dir);
}

// The tracker itself: a device computing on its host tier is caught.
TEST(HostStaging, ComputingOnTheHostTierIsCaught) {
  StagedCpuDevice staged;
  Buffer host = staged.allocate_host(256, MemCategory::kOptim);
  Buffer dev = staged.allocate(256, MemCategory::kOptim);
  staged.fill_zero(dev.data(), dev.size());
  EXPECT_EQ(staged.host_computations(), 0);
  staged.host().fill_zero(host.data(), host.size());  // the host's own device: allowed
  EXPECT_EQ(staged.host_computations(), 0);
  EXPECT_NONFATAL_FAILURE(staged.fill_zero(host.as<char>() + 100, 8), "computed on host memory");
  EXPECT_EQ(staged.host_computations(), 1);
}

// A copy out of the host tier is in flight until the caller knows it has run; a source rewritten before
// that is caught when it is known, and one rewritten after it is not.
TEST(HostStaging, ARewrittenSourceOfACopyInFlightIsCaught) {
  StagedCpuDevice staged;
  Buffer host = staged.allocate_host(256, MemCategory::kParam);
  Buffer dev = staged.allocate(256, MemCategory::kParam);
  Buffer back = staged.allocate_host(256, MemCategory::kParam);
  std::memset(host.data(), 1, host.size());
  staged.copy(dev.data(), host.data(), host.size());
  std::unique_ptr<device::Event> copied = staged.record();
  copied->wait();
  std::memset(host.data(), 2, host.size());  // after the event: allowed
  staged.copy(dev.data(), host.data(), host.size());
  staged.copy(back.data(), dev.data(), dev.size());  // into host memory: waits for the stream
  std::memset(host.data(), 3, host.size());          // allowed
  EXPECT_EQ(staged.rewritten_sources(), 0);

  staged.copy(dev.data(), host.data(), host.size());
  std::unique_ptr<device::Event> later = staged.record();
  host.as<char>()[255] = 4;  // before anything says the copy has run
  EXPECT_NONFATAL_FAILURE(staged.synchronize(), "was rewritten before the copy was known to have run");
  EXPECT_EQ(staged.rewritten_sources(), 1);
  EXPECT_TRUE(later->done());  // settled already: nothing more to report
  EXPECT_EQ(staged.rewritten_sources(), 1);
}

// A checkpoint's states restored through the staged paths (load_state reads into host memory, then
// copies up chunk by chunk) are the states visited, and training on from them gives the direct run's
// next steps.
TEST(HostStaging, StatesRestoredThroughHostBuffersAreTheVisitedOnes) {
  StagedCpuDevice staged;
  enum class Offload { kNone, kOptimizerCpu, kOptimizerNvme, kParamNvme };
  struct Case {
    int stage;
    model::GPT2Config model;
    Offload offload;
  };
  // Stage 0 restores whole units, which are a rank's own range only when it is alone: there, with a
  // unit restored in several chunks. Into offloaded states too (a checkpoint resumes with or without
  // offload): the masters and states in host memory or on NVMe, stage 3's shards on NVMe.
  std::vector<Case> cases = {{1, small_model(), Offload::kNone},
                             {3, small_model(), Offload::kNone},
                             {2, small_model(), Offload::kOptimizerCpu},
                             {3, small_model(), Offload::kOptimizerNvme},
                             {3, small_model(), Offload::kParamNvme}};
  if (comm::world()->size() == 1) cases.push_back({0, chunked_model(), Offload::kNone});
  const std::string dir = "/tmp/zerodp-staged-restore-" + std::to_string(::getppid());
  std::filesystem::create_directories(dir);
  for (const auto& [stage, model_config, offload] : cases) {
    const model::ParamLayout layout(model_config);
    const EngineConfig cfg = config(stage, DType::kBF16);
    const Seen trained = train(cfg, nullptr, 1, model_config);
    EngineConfig scfg = cfg;
    scfg.device = &staged;
    scfg.zero.offload_optimizer = offload == Offload::kNone          ? zero::Offload::kNone
                             : offload == Offload::kOptimizerNvme ? zero::Offload::kNvme
                                                                  : zero::Offload::kCpu;
    scfg.zero.offload_param = offload == Offload::kParamNvme ? zero::Offload::kNvme : zero::Offload::kNone;
    scfg.zero.nvme_path = dir;
    std::shared_ptr<comm::Communicator> comm = comm::world()->split(0, comm::world()->rank());
    Engine engine(layout, comm, scfg);
    // The rank's own ranges, as a checkpoint reader hands them out (weights -1, states 0..).
    const int states = engine.num_optimizer_states();
    engine.load_state([&](int state, int u, size_t begin, size_t count, float* dst) {
      const UnitShard& s = engine.shards().unit(u);
      ASSERT_GE(begin, s.own_begin);
      ASSERT_LE(begin + count, s.own_end);
      const size_t len = s.own_end - s.own_begin;
      const float* src = trained.owned[static_cast<size_t>(u)].data() + static_cast<size_t>(state + 1) * len;
      std::memcpy(dst, src + (begin - s.own_begin), count * sizeof(float));
    });
    EXPECT_EQ(states, 2);
    const Seen restored = visit(engine);
    ASSERT_EQ(restored.owned.size(), trained.owned.size());
    for (size_t u = 0; u < trained.owned.size(); ++u)
      EXPECT_TRUE(restored.owned[u] == trained.owned[u])
          << "stage " << stage << ", offload " << static_cast<int>(offload) << ": unit " << u << " restored wrong";
  }
  EXPECT_EQ(staged.host_computations(), 0);
  comm::world()->barrier();
  if (comm::world()->rank() == 0) std::filesystem::remove_all(dir);
}
