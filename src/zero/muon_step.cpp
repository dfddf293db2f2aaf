#include "zero/muon_step.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "zero/sharding.h"

namespace zerodp::zero {

namespace {

int64_t rows_of(const model::ParamInfo& p) { return p.shape.at(0); }
int64_t cols_of(const model::ParamInfo& p) { return p.shape.at(1); }

}  // namespace

bool unit_has_matrix(const model::ParamLayout& layout, int u) {
  for (const model::ParamInfo* p : layout.unit_params(u))
    if (p->matrix) return true;
  return false;
}

uint64_t muon_exchanged_elements(const model::ParamLayout& layout, int ranks) {
  uint64_t n = 0;
  for (int u = 0; u < layout.num_units(); ++u)
    if (unit_has_matrix(layout, u)) n += uint64_t{static_cast<size_t>(ranks)} * shard_elements(layout.unit_numel(u), ranks);
  return n;
}

MuonWork muon_work(const model::ParamLayout& layout, int ranks) {
  MuonWork w;
  for (int u = 0; u < layout.num_units(); ++u) {
    bool has_matrix = false;
    for (const model::ParamInfo* p : layout.unit_params(u)) {
      if (!p->matrix) continue;
      has_matrix = true;
      const size_t m = static_cast<size_t>(std::min(rows_of(*p), cols_of(*p)));
      w.matrix = std::max(w.matrix, p->numel);
      w.product = std::max(w.product, m * m);
    }
    if (has_matrix) w.unit = std::max(w.unit, ranks * shard_elements(layout.unit_numel(u), ranks));
  }
  return w;
}

std::vector<int> matrices_owner(const model::ParamLayout& layout, int u, int ranks) {
  const std::vector<const model::ParamInfo*> tensors = layout.unit_params(u);
  std::vector<int> owner(tensors.size(), -1);
  std::vector<size_t> order;
  for (size_t k = 0; k < tensors.size(); ++k)
    if (tensors[k]->matrix) order.push_back(k);
  const auto flops = [&](size_t k) { return optim::newton_schulz_flops(rows_of(*tensors[k]), cols_of(*tensors[k])); };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return flops(a) > flops(b); });
  std::vector<double> load(static_cast<size_t>(ranks), 0.0);
  for (size_t k : order) {
    const auto least = std::min_element(load.begin(), load.end());  // the first of equals: the lowest rank
    *least += flops(k);
    owner[k] = static_cast<int>(least - load.begin());
  }
  return owner;
}

void MuonStep::begin() {
  const MuonWork w = muon_work(states_.layout(), states_.ranks());
  device::Device& dev = states_.dev();
  dir_ = dev.allocate(w.unit * sizeof(float), MemCategory::kAct);
  x_ = dev.allocate(w.matrix * sizeof(float), MemCategory::kAct);
  a_ = dev.allocate(w.product * sizeof(float), MemCategory::kAct);
  b_ = dev.allocate(w.product * sizeof(float), MemCategory::kAct);
  // orthogonalise() zeroes what it does not own before each sum; this only keeps the bytes the first
  // all-gather sends (the padding, the tensors that are not matrices) defined.
  dev.fill_zero(dir_.data(), dir_.size());
}

void MuonStep::end() {
  dir_.release();
  x_.release();
  a_.release();
  b_.release();
}

void MuonStep::orthogonalise(int u) {
  device::Device& dev = states_.dev();
  const UnitShard& s = states_.unit(u);
  const int ranks = states_.ranks(), rank = states_.rank();
  float* dir = dir_.as<float>();
  const bool whole = states_.stage() == 0;  // every rank has every matrix's direction already
  if (!whole && ranks > 1) group_.all_gather(dir + static_cast<size_t>(rank) * s.shard, dir, s.shard, DType::kF32);

  const std::vector<const model::ParamInfo*> tensors = states_.layout().unit_params(u);
  const std::vector<int> owner = matrices_owner(states_.layout(), u, ranks);
  size_t done = 0;  // elements [0, done) of the buffer are final
  const auto zero_until = [&](size_t i) {
    if (i > done) dev.fill_zero(dir + done, (i - done) * sizeof(float));
    done = std::max(done, i);
  };
  for (size_t k = 0; k < tensors.size(); ++k) {
    const model::ParamInfo& p = *tensors[k];
    if (owner[k] != rank) continue;
    zero_until(p.offset);
    newton_schulz(dir + p.offset, rows_of(p), cols_of(p));
    done = p.offset + p.numel;
  }
  zero_until(s.padded);
  if (ranks == 1) return;
  if (whole)
    group_.all_reduce(dir, s.padded, DType::kF32);
  else
    group_.reduce_scatter(dir, dir + static_cast<size_t>(rank) * s.shard, s.shard, DType::kF32);
}

void MuonStep::newton_schulz(float* u, int64_t rows, int64_t cols) {
  device::Device& dev = states_.dev();
  const size_t numel = static_cast<size_t>(rows * cols);
  const bool tall = rows > cols;  // iterate on uᵀ: A = XᵀX, and X·Bᵀ for B·Xᵀ
  const int R = static_cast<int>(rows), C = static_cast<int>(cols), m = static_cast<int>(std::min(rows, cols));
  // X0 = s·u with s = 1/(‖u‖_F + eps): folded into the first step's GEMM factors instead of a pass.
  const double norm = std::sqrt(dev.sum_squares(u, DType::kF32, numel));
  const double scale = 1.0 / (norm + optim::kNewtonSchulzEps);
  const float a = static_cast<float>(optim::kNewtonSchulzA), b = static_cast<float>(optim::kNewtonSchulzB),
              c = static_cast<float>(optim::kNewtonSchulzC);
  float* A = a_.as<float>();
  float* B = b_.as<float>();
  float* x = u;          // X of this step
  float* xn = x_.as<float>();  // the next
  for (int step = 0; step < optim::kNewtonSchulzSteps; ++step) {
    const float gram_alpha = step == 0 ? static_cast<float>(scale * scale) : 1.0f;
    const float x_alpha = step == 0 ? static_cast<float>(scale) : 1.0f;
    const float x_beta = step == 0 ? static_cast<float>(optim::kNewtonSchulzA * scale) : a;
    if (tall)
      dev.gemm(DType::kF32, true, false, m, m, R, gram_alpha, x, C, x, C, 0.0f, A, m);
    else
      dev.gemm(DType::kF32, false, true, m, m, C, gram_alpha, x, C, x, C, 0.0f, A, m);
    dev.copy(B, A, static_cast<size_t>(m) * m * sizeof(float));
    dev.gemm(DType::kF32, false, false, m, m, m, c, A, m, A, m, b, B, m);  // B = c·A·A + b·A
    dev.copy(xn, x, numel * sizeof(float));
    if (tall)
      dev.gemm(DType::kF32, false, true, R, C, C, x_alpha, x, C, B, m, x_beta, xn, C);  // a·X + X·Bᵀ
    else
      dev.gemm(DType::kF32, false, false, R, C, R, x_alpha, B, m, x, C, x_beta, xn, C);  // a·X + B·X
    std::swap(x, xn);
  }
  if (x != u) dev.copy(u, x, numel * sizeof(float));
}

}  // namespace zerodp::zero
