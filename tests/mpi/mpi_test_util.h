// Helpers of the multi-rank tests: deterministic per-rank random data (every rank can rebuild every
// other rank's inputs, so references need no communication), dtype encoding, and the tolerance
// of a floating-point reduction.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "comm/mpi_communicator.h"
#include "comm/runtime.h"
#include "core/dtype.h"

namespace zerodp::comm {
// How gtest prints the parameter of the tests run in both progress modes.
inline void PrintTo(ProgressMode m, std::ostream* os) { *os << progress_mode_name(m); }
}  // namespace zerodp::comm

namespace zerodp::comm::testing {

inline MpiCommunicator& world_mpi() {
  static std::shared_ptr<Communicator> w = world();
  return dynamic_cast<MpiCommunicator&>(*w);
}

// A fresh communicator over all ranks (collective), driven by `mode`, with its own ledger if given.
inline std::unique_ptr<MpiCommunicator> fresh_comm(ProgressMode mode, TrafficLedger* ledger = nullptr) {
  MpiCommunicator& w = world_mpi();
  MpiOptions o = w.options();
  o.progress = mode;
  auto c = w.split_mpi(0, w.rank(), o);
  if (ledger != nullptr) c->set_traffic_ledger(ledger);
  return c;
}

inline std::string mode_name(const ::testing::TestParamInfo<ProgressMode>& info) {
  return progress_mode_name(info.param);
}

constexpr DType kAllDtypes[] = {DType::kF32, DType::kBF16, DType::kF16};
constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax};

// n values in [-1, 1) exactly representable in `t`, a function of (seed, rank) only.
inline std::vector<float> random_values(uint64_t seed, int rank, size_t n, DType t) {
  std::mt19937_64 rng(seed * 1000003u + static_cast<uint64_t>(rank) * 7919u + 1);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  if (t != DType::kF32) {
    std::vector<uint16_t> h(n);
    convert(v.data(), DType::kF32, h.data(), t, n);
    convert(h.data(), t, v.data(), DType::kF32, n);
  }
  return v;
}

inline std::vector<uint8_t> encode(const std::vector<float>& v, DType t) {
  std::vector<uint8_t> out(v.size() * dtype_size(t));
  convert(v.data(), DType::kF32, out.data(), t, v.size());
  return out;
}

inline std::vector<float> decode(const void* p, size_t n, DType t) {
  std::vector<float> v(n);
  convert(p, t, v.data(), DType::kF32, n);
  return v;
}

// The unit roundoff: half the spacing of the values near 1 (fp32 2^-24, bf16 2^-8, fp16 2^-11).
inline double unit_roundoff(DType t) {
  return t == DType::kF32 ? std::ldexp(1.0, -24) : t == DType::kBF16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
}

// Checks got[i] against the reduction of inputs[r][offset + i] over the ranks r.
// Max is exact. A sum over W ranks is W-1 additions, each rounded once to the dtype with a relative
// error of at most u, whatever order MPI picks, so |got - exact| <= (W-1)·u·Σ|x| (the first-order
// bound; 1.01 covers the higher-order terms). kAvg divides the rounded sum by W and rounds once more:
// + u·|exact/W|, the sum's error shrinking by W. fp16 adds an absolute W·2^-24 for its subnormal
// range, where the spacing, not the relative error, bounds a rounding.
inline ::testing::AssertionResult check_reduction(const std::vector<float>& got,
                                                  const std::vector<std::vector<float>>& inputs,
                                                  size_t offset, ReduceOp op, DType t) {
  const int w = static_cast<int>(inputs.size());
  const double u = unit_roundoff(t);
  const double abs_floor = t == DType::kF16 ? w * std::ldexp(1.0, -24) : 0.0;
  size_t bad = 0;
  std::string first;
  for (size_t i = 0; i < got.size(); ++i) {
    double exact = op == ReduceOp::kMax ? -INFINITY : 0.0, sum_abs = 0.0;
    for (const auto& in : inputs) {
      const double x = in[offset + i];
      if (op == ReduceOp::kMax) {
        exact = std::max(exact, x);
      } else {
        exact += x;
        sum_abs += std::fabs(x);
      }
    }
    double tol = 0.0;
    if (op != ReduceOp::kMax) {
      tol = 1.01 * (w - 1) * u * sum_abs + abs_floor;
      if (op == ReduceOp::kAvg) {
        exact /= w;
        tol = tol / w + u * (std::fabs(exact) + tol / w) + abs_floor;
      }
    }
    if (!(std::fabs(got[i] - exact) <= tol)) {
      if (bad++ == 0)
        first = "element " + std::to_string(i) + ": got " + std::to_string(got[i]) + ", expected " +
                std::to_string(exact) + " ± " + std::to_string(tol);
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " elements off (" << dtype_name(t)
                                       << ", " << reduce_op_name(op) << ", W=" << w << "); first: " << first;
}

// FNV-1a of the bytes: compared across ranks to show that they all hold the same bits.
inline uint32_t checksum(const void* p, size_t bytes) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ static_cast<const uint8_t*>(p)[i]) * 16777619u;
  return h;
}

// True on every rank iff every rank of `c` passed the same value (all-gathered as raw 16-bit words).
inline bool same_on_all_ranks(Communicator& c, uint32_t value) {
  std::vector<uint32_t> all(static_cast<size_t>(c.size()));
  c.all_gather(&value, all.data(), 2, DType::kBF16);
  for (uint32_t v : all)
    if (v != value) return false;
  return true;
}

}  // namespace zerodp::comm::testing
