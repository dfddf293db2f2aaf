// Standalone GEMM benchmark for choosing zerodp's 16-bit GEMM library (issue 12).
// Not part of the project's build: bench/gemm/run.sh compiles this file three times, once per
// library (OpenBLAS, oneMKL, oneDNN 2.x from Debian, and oneDNN 3.x from PyPI when present),
// because OpenBLAS and MKL both export cblas_sgemm.
//
// Every case computes C(fp32, row-major) = alpha·op(A)·op(B) + beta·C with alpha = 1 and beta = 0
// (forward) or 1 (backward: zerodp accumulates gradients), exactly as src/kernels/matmul.cpp
// calls cblas_sgemm. Inputs are fp32, bf16 or fp16; accumulation and output are fp32.
//
// Output: one CSV line per case (header printed first), see print_header().
//
// Correctness: for 16 sampled rows of C, a double-precision reference computed here (independent
// of every library) on (a) the same 16-bit-rounded inputs the library saw: err_same, which measures
// the library's accumulation alone, and (b) the original fp32 inputs: err_fp32, which adds the
// rounding of the inputs to 16 bits. Both are max|C - ref| / max|op(A)·op(B)| over the sampled rows.

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#if defined(LIB_OPENBLAS)
#include <cblas.h>
static const char* kLib = "openblas";
#elif defined(LIB_MKL)
#include <mkl.h>
static const char* kLib = "mkl";
#elif defined(LIB_DNNL)
#include <oneapi/dnnl/dnnl.hpp>
static const char* kLib = DNNL_VERSION_MAJOR >= 3 ? "onednn3" : "onednn";
#else
#error "define LIB_OPENBLAS, LIB_MKL or LIB_DNNL"
#endif

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// ---- 16-bit conversions (round to nearest even), written here so every library sees the same bits.
uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
float from_bf16(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t to_f16(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }
float from_f16(uint16_t h) { return _cvtsh_ss(h); }

enum class DType { f32, bf16, f16 };
const char* dtype_name(DType d) { return d == DType::f32 ? "f32" : d == DType::bf16 ? "bf16" : "f16"; }

struct Case {
  std::string name;  // e.g. "L4.qkv.fwd"
  int M, N, K;
  bool ta, tb;
  float beta;
};

// The GEMMs of zerodp's GPT-2 (src/kernels/matmul.cpp): a linear layer with weight W[C, OC]
//   forward  out[BT,OC]  = inp[BT,C] · W[C,OC]            NN  M=BT N=OC K=C   beta 0
//   dinp     dinp[BT,C] += dout[BT,OC] · W[C,OC]^T        NT  M=BT N=C  K=OC  beta 1
//   dweight  dW[C,OC]   += inp[BT,C]^T · dout[BT,OC]      TN  M=C  N=OC K=BT  beta 1
// and the tied LM head with wte[V,C]:
//   forward  logits[BT,V] = inp[BT,C] · wte[V,C]^T        NT  M=BT N=V  K=C   beta 0
//   dinp     dinp[BT,C]  += dlogits[BT,V] · wte[V,C]      NN  M=BT N=C  K=V   beta 1
//   dwte     dwte[V,C]   += dlogits[BT,V]^T · inp[BT,C]   TN  M=V  N=C  K=BT  beta 1
void add_linear(std::vector<Case>& cs, const std::string& name, int BT, int OC, int C) {
  cs.push_back({name + ".fwd", BT, OC, C, false, false, 0.f});
  cs.push_back({name + ".dinp", BT, C, OC, false, true, 1.f});
  cs.push_back({name + ".dw", C, OC, BT, true, false, 1.f});
}
void add_head(std::vector<Case>& cs, const std::string& name, int BT, int V, int C) {
  cs.push_back({name + ".fwd", BT, V, C, false, true, 0.f});
  cs.push_back({name + ".dinp", BT, C, V, false, false, 1.f});
  cs.push_back({name + ".dw", V, C, BT, true, false, 1.f});
}

std::vector<Case> all_cases(const std::string& set) {
  std::vector<Case> cs;
  if (set == "all" || set == "square") {
    cs.push_back({"sq2048", 2048, 2048, 2048, false, false, 0.f});
    cs.push_back({"sq2048", 2048, 2048, 2048, false, true, 0.f});
    cs.push_back({"sq2048", 2048, 2048, 2048, true, false, 0.f});
  }
  if (set == "all" || set == "l4") {  // L4 C256 model, B·T = 1024
    add_linear(cs, "L4.qkv", 1024, 768, 256);
    add_linear(cs, "L4.proj", 1024, 256, 256);
    add_linear(cs, "L4.fc", 1024, 1024, 256);
    add_linear(cs, "L4.fcproj", 1024, 256, 1024);
  }
  if (set == "l4step") {  // one fp32 step's GEMMs of the L4 model as zerodp runs them: the forward
    // starts from the bias (beta = 1), and the tied LM head (V = 256) is once in the step, each block
    // four times (avx2_step.sh multiplies)
    using Linear = std::tuple<const char*, int, int>;  // name, OC, C
    for (const auto& [name, OC, C] : {Linear{"qkv", 768, 256}, Linear{"proj", 256, 256}, Linear{"fc", 1024, 256},
                                      Linear{"fcproj", 256, 1024}}) {
      add_linear(cs, std::string("step.") + name, 1024, OC, C);
      cs[cs.size() - 3].beta = 1.f;
    }
    add_head(cs, "step.head", 1024, 256, 256);
  }
  if (set == "all" || set == "124m") {  // GPT-2 124M, B·T = 256
    add_linear(cs, "124M.qkv", 256, 2304, 768);
    add_linear(cs, "124M.proj", 256, 768, 768);
    add_linear(cs, "124M.fc", 256, 3072, 768);
    add_linear(cs, "124M.fcproj", 256, 768, 3072);
    add_head(cs, "124M.head", 256, 50257, 768);
  }
  if (set == "all" || set == "pad") {  // not in zerodp today: the LM head with V padded to 50304
    add_head(cs, "pad.head50304", 256, 50304, 768);
  }
  return cs;
}

// ---- matrices
struct Mats {
  // op(A) is M×K; A is stored M×K (lda = K) or, transposed, K×M (lda = M). Same for B (K×N).
  int lda, ldb, ldc;
  std::vector<float> a32, b32, c0;      // original fp32 inputs, initial C
  std::vector<float> a_r, b_r;          // inputs rounded to the 16-bit type (== a32 for f32)
  std::vector<uint16_t> a16, b16;       // 16-bit bits
};

uint64_t rng_state = 0x9E3779B97F4A7C15ull;
float uniform() {  // splitmix64 → [-1, 1)
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>((z >> 40) * (1.0 / 16777216.0)) * 2.f - 1.f;
}

Mats make_mats(const Case& c, DType dt) {
  Mats m;
  rng_state = 0x9E3779B97F4A7C15ull ^ (uint64_t(c.M) * 131 + c.N * 7 + c.K);
  m.lda = c.ta ? c.M : c.K;
  m.ldb = c.tb ? c.K : c.N;
  m.ldc = c.N;
  size_t na = size_t(c.M) * c.K, nb = size_t(c.K) * c.N, nc = size_t(c.M) * c.N;
  m.a32.resize(na);
  m.b32.resize(nb);
  m.c0.resize(nc);
  for (auto& x : m.a32) x = uniform();
  for (auto& x : m.b32) x = uniform();
  for (auto& x : m.c0) x = c.beta != 0.f ? uniform() : 0.f;
  if (dt == DType::f32) {
    m.a_r = m.a32;
    m.b_r = m.b32;
  } else {
    m.a16.resize(na);
    m.b16.resize(nb);
    m.a_r.resize(na);
    m.b_r.resize(nb);
    for (size_t i = 0; i < na; ++i) {
      m.a16[i] = dt == DType::bf16 ? to_bf16(m.a32[i]) : to_f16(m.a32[i]);
      m.a_r[i] = dt == DType::bf16 ? from_bf16(m.a16[i]) : from_f16(m.a16[i]);
    }
    for (size_t i = 0; i < nb; ++i) {
      m.b16[i] = dt == DType::bf16 ? to_bf16(m.b32[i]) : to_f16(m.b32[i]);
      m.b_r[i] = dt == DType::bf16 ? from_bf16(m.b16[i]) : from_f16(m.b16[i]);
    }
  }
  return m;
}

// Double-precision op(A)·op(B) for the given rows of C.
std::vector<double> reference_rows(const Case& c, const Mats& m, const std::vector<float>& A,
                                   const std::vector<float>& B, const std::vector<int>& rows) {
  std::vector<double> out(rows.size() * size_t(c.N), 0.0);
#pragma omp parallel for schedule(dynamic)
  for (size_t r = 0; r < rows.size(); ++r) {
    int i = rows[r];
    double* o = &out[r * c.N];
    for (int k = 0; k < c.K; ++k) {
      double a = c.ta ? A[size_t(k) * m.lda + i] : A[size_t(i) * m.lda + k];
      if (!c.tb) {
        const float* brow = &B[size_t(k) * m.ldb];
        for (int j = 0; j < c.N; ++j) o[j] += a * brow[j];
      } else {
        for (int j = 0; j < c.N; ++j) o[j] += a * B[size_t(j) * m.ldb + k];
      }
    }
  }
  return out;
}

struct Errors {
  double same = NAN, fp32 = NAN;
};

Errors check(const Case& c, const Mats& m, const std::vector<float>& C) {
  std::vector<int> rows;
  const int nrows = std::min(c.M, 16);
  for (int r = 0; r < nrows; ++r) rows.push_back(int((int64_t(c.M - 1) * r) / std::max(nrows - 1, 1)));
  auto err = [&](const std::vector<float>& A, const std::vector<float>& B) {
    std::vector<double> ref = reference_rows(c, m, A, B, rows);
    double maxdiff = 0, maxref = 0;
    for (size_t r = 0; r < rows.size(); ++r)
      for (int j = 0; j < c.N; ++j) {
        size_t ci = size_t(rows[r]) * m.ldc + j;
        double expect = double(c.beta) * m.c0[ci] + ref[r * c.N + j];
        maxdiff = std::max(maxdiff, std::fabs(double(C[ci]) - expect));
        maxref = std::max(maxref, std::fabs(ref[r * c.N + j]));
      }
    return maxdiff / maxref;
  };
  Errors e;
  e.same = err(m.a_r, m.b_r);
  e.fp32 = err(m.a32, m.b32);
  return e;
}

// ---- the libraries. make_runner returns a callable doing one GEMM into C, or an empty function
// with a reason when the library cannot do this dtype.
struct Runner {
  std::function<void()> run;
  std::string impl = "-";          // implementation the library reports (oneDNN) or "-"
  double create_cold_ms = NAN;     // oneDNN: first primitive_desc + primitive creation
  double create_cached_ms = NAN;   // oneDNN: the same again (primitive cache hit)
  std::string unsupported;
};

#if defined(LIB_OPENBLAS) || defined(LIB_MKL)
CBLAS_TRANSPOSE tr(bool t) { return t ? CblasTrans : CblasNoTrans; }
#endif

Runner make_runner(const Case& c, DType dt, Mats& m, std::vector<float>& C) {
  Runner r;
#if defined(LIB_OPENBLAS)
  if (dt != DType::f32) {
    r.unsupported = "Debian OpenBLAS 0.3.21 is built without cblas_sbgemm";
    return r;
  }
  r.run = [&c, &m, &C] {
    cblas_sgemm(CblasRowMajor, tr(c.ta), tr(c.tb), c.M, c.N, c.K, 1.f, m.a_r.data(), m.lda,
                m.b_r.data(), m.ldb, c.beta, C.data(), m.ldc);
  };
#elif defined(LIB_MKL)
  if (dt == DType::f32) {
    r.run = [&c, &m, &C] {
      cblas_sgemm(CblasRowMajor, tr(c.ta), tr(c.tb), c.M, c.N, c.K, 1.f, m.a_r.data(), m.lda,
                  m.b_r.data(), m.ldb, c.beta, C.data(), m.ldc);
    };
  } else if (dt == DType::bf16) {
    r.run = [&c, &m, &C] {
      cblas_gemm_bf16bf16f32(CblasRowMajor, tr(c.ta), tr(c.tb), c.M, c.N, c.K, 1.f,
                             reinterpret_cast<const MKL_BF16*>(m.a16.data()), m.lda,
                             reinterpret_cast<const MKL_BF16*>(m.b16.data()), m.ldb, c.beta,
                             C.data(), m.ldc);
    };
  } else {
    r.run = [&c, &m, &C] {
      cblas_gemm_f16f16f32(CblasRowMajor, tr(c.ta), tr(c.tb), c.M, c.N, c.K, 1.f,
                           reinterpret_cast<const MKL_F16*>(m.a16.data()), m.lda,
                           reinterpret_cast<const MKL_F16*>(m.b16.data()), m.ldb, c.beta,
                           C.data(), m.ldc);
    };
  }
#elif defined(LIB_DNNL)
  using namespace dnnl;
  static engine eng(engine::kind::cpu, 0);
  static stream strm(eng);
  memory::data_type mdt = dt == DType::f32    ? memory::data_type::f32
                          : dt == DType::bf16 ? memory::data_type::bf16
                                              : memory::data_type::f16;
  // Plain strided layouts express the transposes directly, as the model's buffers are laid out.
  memory::desc a_md({c.M, c.K}, mdt, c.ta ? memory::dims{1, c.M} : memory::dims{c.K, 1});
  memory::desc b_md({c.K, c.N}, mdt, c.tb ? memory::dims{1, c.K} : memory::dims{c.N, 1});
  memory::desc c_md({c.M, c.N}, memory::data_type::f32, memory::dims{c.N, 1});
  primitive_attr attr;
  if (c.beta != 0.f) {  // beta = 1 is a sum post-op in oneDNN
    post_ops po;
    po.append_sum(c.beta);
    attr.set_post_ops(po);
  }
  auto create = [&]() {
#if DNNL_VERSION_MAJOR >= 3
    matmul::primitive_desc pd(eng, a_md, b_md, c_md, attr);
#else
    matmul::desc d(a_md, b_md, c_md);
    matmul::primitive_desc pd(d, attr, eng);
#endif
    return std::make_pair(pd, matmul(pd));
  };
  std::pair<matmul::primitive_desc, matmul> made;
  try {
    auto t0 = Clock::now();
    made = create();
    r.create_cold_ms = seconds_since(t0) * 1e3;
    t0 = Clock::now();
    made = create();
    r.create_cached_ms = seconds_since(t0) * 1e3;
  } catch (const dnnl::error& e) {
    r.unsupported = std::string("no matmul implementation (") + e.what() + ")";
    return r;
  }
  r.impl = made.first.impl_info_str();
  void* ap = dt == DType::f32 ? static_cast<void*>(m.a_r.data()) : static_cast<void*>(m.a16.data());
  void* bp = dt == DType::f32 ? static_cast<void*>(m.b_r.data()) : static_cast<void*>(m.b16.data());
  auto am = std::make_shared<memory>(a_md, eng, ap);
  auto bm = std::make_shared<memory>(b_md, eng, bp);
  auto cm = std::make_shared<memory>(c_md, eng, C.data());
  matmul prim = made.second;
  r.run = [prim, am, bm, cm] {
    prim.execute(strm, {{DNNL_ARG_SRC, *am}, {DNNL_ARG_WEIGHTS, *bm}, {DNNL_ARG_DST, *cm}});
    strm.wait();
  };
#endif
  return r;
}

void print_header() {
  std::printf(
      "lib,dtype,case,trans,M,N,K,beta,threads,gflops,ms_median,ms_min,reps,err_same,err_fp32,"
      "create_cold_ms,create_cached_ms,impl\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string set = "all", dtypes = "f32,bf16,f16", only;
  int threads = 1;
  double min_time = 1.0;
  bool header = true;
  std::string cbwr = "off";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--threads") threads = std::atoi(next().c_str());
    else if (a == "--set") set = next();
    else if (a == "--dtypes") dtypes = next();
    else if (a == "--only") only = next();  // substring of the case name
    else if (a == "--min-time") min_time = std::atof(next().c_str());
    else if (a == "--no-header") header = false;
    else if (a == "--cbwr") cbwr = next();  // oneMKL's reproducibility mode: off, auto or strict
    else {
      std::fprintf(stderr, "usage: %s [--threads N] [--set all|square|l4|124m|pad] [--dtypes f32,bf16,f16]"
                   " [--only SUBSTR] [--min-time S] [--no-header] [--cbwr off|auto|strict]\n", argv[0]);
      return 2;
    }
  }
  omp_set_num_threads(threads);
#if defined(LIB_OPENBLAS)
  openblas_set_num_threads(threads);
#elif defined(LIB_MKL)
  mkl_set_num_threads(threads);
  // zerodp asks for AUTO | STRICT (src/kernels/gemm16.cpp): the CPU's own code path, the same bits
  // whatever the operands' alignment. "off" is MKL's default: no reproducibility asked for.
  if (cbwr != "off") {
    if (cbwr != "strict" && cbwr != "auto") { std::fprintf(stderr, "--cbwr must be off, auto or strict\n"); return 2; }
    const int mode = cbwr == "strict" ? (MKL_CBWR_AUTO | MKL_CBWR_STRICT) : MKL_CBWR_AUTO;
    if (mkl_cbwr_set(mode) != MKL_CBWR_SUCCESS) {
      std::fprintf(stderr, "mkl_cbwr_set(%s) failed\n", cbwr.c_str());
      return 1;
    }
  }
#endif
#if !defined(LIB_MKL)
  if (cbwr != "off") { std::fprintf(stderr, "--cbwr is oneMKL's (this is %s)\n", kLib); return 2; }
#endif
  std::vector<DType> dts;
  for (size_t pos = 0; pos <= dtypes.size();) {
    size_t end = dtypes.find(',', pos);
    if (end == std::string::npos) end = dtypes.size();
    std::string d = dtypes.substr(pos, end - pos);
    if (d == "f32") dts.push_back(DType::f32);
    else if (d == "bf16") dts.push_back(DType::bf16);
    else if (d == "f16") dts.push_back(DType::f16);
    else if (!d.empty()) { std::fprintf(stderr, "unknown dtype %s\n", d.c_str()); return 2; }
    pos = end + 1;
  }

  if (header) print_header();
  for (const Case& c : all_cases(set)) {
    if (!only.empty() && c.name.find(only) == std::string::npos) continue;
    for (DType dt : dts) {
      Mats m = make_mats(c, dt);
      std::vector<float> C = m.c0;
      Runner r = make_runner(c, dt, m, C);
      char trans[3] = {c.ta ? 'T' : 'N', c.tb ? 'T' : 'N', 0};
      if (!r.run) {
        std::printf("%s,%s,%s,%s,%d,%d,%d,%g,%d,,,,0,,,,,\"unsupported: %s\"\n", kLib, dtype_name(dt),
                    c.name.c_str(), trans, c.M, c.N, c.K, c.beta, threads, r.unsupported.c_str());
        std::fflush(stdout);
        continue;
      }
      // One call from C = c0, checked; then warm-up and timed repetitions (beta = 1 keeps
      // accumulating into C, as gradient accumulation does).
      auto t0 = Clock::now();
      r.run();
      double first = seconds_since(t0);
      Errors e = check(c, m, C);
      if (first < 0.5) r.run();  // second warm-up call unless calls are slow
      std::vector<double> ts;
      double total = 0;
      while ((total < min_time || ts.size() < 5) && ts.size() < 50) {
        if (ts.size() >= 3 && total > 4 * min_time) break;  // very slow (reference) paths
        auto t = Clock::now();
        r.run();
        double s = seconds_since(t);
        ts.push_back(s);
        total += s;
      }
      std::sort(ts.begin(), ts.end());
      double med = ts[ts.size() / 2];
      if (ts.size() % 2 == 0) med = 0.5 * (ts[ts.size() / 2 - 1] + ts[ts.size() / 2]);
      double gflops = 2.0 * c.M * c.N * c.K / med * 1e-9;
      std::printf("%s,%s,%s,%s,%d,%d,%d,%g,%d,%.1f,%.3f,%.3f,%zu,%.2e,%.2e,%.3f,%.3f,\"%s\"\n", kLib,
                  dtype_name(dt), c.name.c_str(), trans, c.M, c.N, c.K, c.beta, threads, gflops,
                  med * 1e3, ts[0] * 1e3, ts.size(), e.same, e.fp32, r.create_cold_ms,
                  r.create_cached_ms, r.impl.c_str());
      std::fflush(stdout);
    }
  }
  return 0;
}
