// The oneDNN implementation of gemm16 (kernels/gemm16.h): oneDNN's matmul primitive on plain strided
// memory, which dispatches on the CPU's features whatever its vendor (AMX, AVX512_CORE_BF16 on Intel
// and on AMD Zen 4/5 alike), where oneMKL runs its 16-bit kernels on Intel CPUs only.
//
//   C = alpha · op(A) · op(B) + beta · C  is a matmul with A as "src", B as "weights", C as "dst",
//   the transposes as strides, alpha as an output scale and beta as a sum post-op.
//
// A primitive is made once per call shape (dtype, transposes, M, N, K, leading dimensions, alpha,
// beta) and kept: GPT-2's GEMMs come in a few dozen shapes, and making a primitive costs far more
// than running a small one (its memory objects too). Only the operands' addresses change between calls. The attention kernels
// call GEMMs from inside OpenMP parallel regions, so each thread keeps its own primitives and stream
// (oneDNN's own primitive cache makes a second thread's copy cheap) and nothing is locked.
#include "kernels/gemm16.h"

#ifdef ZERODP_HAVE_ONEDNN

#include <map>
#include <tuple>

#include <oneapi/dnnl/dnnl.hpp>

#include "core/error.h"

namespace zerodp::kernels {

namespace {

using Key = std::tuple<int, bool, bool, int, int, int, int, int, int, float, float>;

const dnnl::engine& engine() {
  static const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

struct OneDnn {  // one per thread
  dnnl::stream strm{engine()};
  struct Made {  // the primitive and its operands' memory objects, which get each call's addresses
    dnnl::matmul prim;
    dnnl::memory a, b, c;
  };
  std::map<Key, Made> made;
};

OneDnn& onednn() {
  thread_local OneDnn d;
  return d;
}

dnnl::memory::data_type dnnl_type(DType t) {
  return t == DType::kBF16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f16;
}

}  // namespace

bool gemm16_onednn_built() { return true; }

std::string gemm16_onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return fmt::format("oneDNN {}.{}.{}", v->major, v->minor, v->patch);
}

std::string gemm16_onednn_probe(DType dtype) {
  try {
    // A small shape: oneDNN says which kernel it would run (e.g. "brg:avx512_core_bf16").
    using dims = dnnl::memory::dims;
    const dnnl::memory::desc a({64, 64}, dnnl_type(dtype), dims{64, 1});
    const dnnl::memory::desc c({64, 64}, dnnl::memory::data_type::f32, dims{64, 1});
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, a, c), dnnl::primitive_attr(), engine());
    return pd.impl_info_str();
  } catch (const dnnl::error&) {
    return std::string();
  }
}

void gemm16_onednn(DType dtype, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const uint16_t* A,
                   int lda, const uint16_t* B, int ldb, float beta, float* C, int ldc) {
  ZDP_CHECK(dtype == DType::kBF16 || dtype == DType::kF16, "gemm16_onednn: dtype {} is not 16-bit",
            dtype_name(dtype));
  if (M <= 0 || N <= 0) return;
  // oneDNN refuses empty reductions; the fallback's C = beta·C serves (it multiplies nothing).
  if (K <= 0) return gemm16_blas(dtype, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  OneDnn& d = onednn();
  using dims = dnnl::memory::dims;
  const Key key{static_cast<int>(dtype), trans_a, trans_b, M, N, K, lda, ldb, ldc, alpha, beta};
  auto it = d.made.find(key);
  if (it == d.made.end()) {
    const auto t = dnnl_type(dtype);
    // op(A)[m, k] = A[m·lda + k], or A[k·lda + m] transposed; likewise op(B)[k, n].
    dnnl::memory::desc a({M, K}, t, trans_a ? dims{1, lda} : dims{lda, 1});
    dnnl::memory::desc b({K, N}, t, trans_b ? dims{1, ldb} : dims{ldb, 1});
    dnnl::memory::desc c({M, N}, dnnl::memory::data_type::f32, dims{ldc, 1});
    dnnl::primitive_attr attr;
    if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
    if (beta != 0.0f) {
      dnnl::post_ops po;
      po.append_sum(beta);
      attr.set_post_ops(po);
    }
    try {
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, engine());
      it = d.made
               .emplace(key, OneDnn::Made{dnnl::matmul(pd), dnnl::memory(a, engine(), DNNL_MEMORY_NONE),
                                          dnnl::memory(b, engine(), DNNL_MEMORY_NONE),
                                          dnnl::memory(c, engine(), DNNL_MEMORY_NONE)})
               .first;
    } catch (const dnnl::error& e) {
      ZDP_CHECK(false, "oneDNN has no {} matmul for {}x{}x{} (ta {}, tb {}): {}", dtype_name(dtype), M, N, K,
                trans_a, trans_b, e.what());
    }
  }
  OneDnn::Made& m = it->second;
  m.a.set_data_handle(const_cast<uint16_t*>(A));
  m.b.set_data_handle(const_cast<uint16_t*>(B));
  m.c.set_data_handle(C);
  m.prim.execute(d.strm, {{DNNL_ARG_SRC, m.a}, {DNNL_ARG_WEIGHTS, m.b}, {DNNL_ARG_DST, m.c}});
  d.strm.wait();
}

}  // namespace zerodp::kernels

#else  // built without oneDNN

#include "core/error.h"

namespace zerodp::kernels {

bool gemm16_onednn_built() { return false; }
std::string gemm16_onednn_version() { return std::string(); }
std::string gemm16_onednn_probe(DType) { return std::string(); }
void gemm16_onednn(DType, bool, bool, int, int, int, float, const uint16_t*, int, const uint16_t*, int, float, float*,
                   int) {
  ZDP_CHECK(false, "gemm16_onednn: this build has no oneDNN (libdnnl-dev)");
}

}  // namespace zerodp::kernels

#endif
