#include "cuda/gemm.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/cublaslt_api.h"
#include "cuda/lru_cache.h"

namespace zerodp::cuda {

namespace {

[[noreturn]] void lt_fail(cublasStatus_t status, const char* call, const std::string& what) {
  throw RuntimeFailure(fmt::format("{} failed: {} ({}) for {}", call, cublaslt().GetStatusName(status),
                                   cublaslt().GetStatusString(status), what));
}

// ZDP_LT(call, what): a cuBLASLt call, its status turned into a RuntimeFailure naming the call,
// the status and `what` (the GEMM it was for).
#define ZDP_LT(expr, what)                                              \
  do {                                                                  \
    const cublasStatus_t zdp_lt_status = (expr);                        \
    if (zdp_lt_status != CUBLAS_STATUS_SUCCESS) [[unlikely]]            \
      lt_fail(zdp_lt_status, #expr, (what));                            \
  } while (0)

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kF32: return CUDA_R_32F;
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kF16: return CUDA_R_16F;
  }
  return CUDA_R_32F;
}

cublasLtEpilogue_t cublaslt_epilogue(LtEpilogue e) {
  switch (e) {
    case LtEpilogue::kDefault: return CUBLASLT_EPILOGUE_DEFAULT;
    case LtEpilogue::kBias: return CUBLASLT_EPILOGUE_BIAS;
    case LtEpilogue::kGeluAuxBias: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case LtEpilogue::kDGelu: return CUBLASLT_EPILOGUE_DGELU;
    case LtEpilogue::kDGeluBGrad: return CUBLASLT_EPILOGUE_DGELU_BGRAD;
    case LtEpilogue::kBGradA: return CUBLASLT_EPILOGUE_BGRADA;
    case LtEpilogue::kBGradB: return CUBLASLT_EPILOGUE_BGRADB;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

uintptr_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

DType bias_type_of(const GemmArgs& a) { return a.bias_type.value_or(a.c_type); }

// What gemm_key() refuses, before anything is planned: UsageError naming the argument.
void validate(const GemmArgs& a, const GemmShape& s) {
  const std::string shape_error = gemm_shape_error(s);
  if (!shape_error.empty()) throw UsageError("GEMM: " + shape_error);
  if (a.c_type != DType::kF32 && a.c_type != a.ab_type)
    throw UsageError(fmt::format("GEMM: C in {} with A and B in {}: C must be fp32 or the operands' dtype",
                                 dtype_name(a.c_type), dtype_name(a.ab_type)));
  if (a.allow_tf32 && a.ab_type != DType::kF32)
    throw UsageError(fmt::format("GEMM: TF32 asked for {} operands (it applies to fp32 ones only)",
                                 dtype_name(a.ab_type)));
  if (a.A == nullptr || a.B == nullptr || a.C == nullptr)
    throw UsageError(fmt::format("GEMM: operand {} is null", a.A == nullptr ? "A" : a.B == nullptr ? "B" : "C"));
  if (epilogue_uses_bias(a.epilogue)) {
    if (a.bias == nullptr)
      throw UsageError(fmt::format("GEMM: epilogue {} needs a bias{} vector", gemm_epilogue_name(a.epilogue),
                                   epilogue_writes_bias_grad(a.epilogue) ? " gradient" : ""));
    const DType bt = bias_type_of(a);
    if (bt != DType::kF32 && bt != a.ab_type)
      throw UsageError(fmt::format("GEMM: bias in {} with operands in {}: it must be fp32 or the operands' dtype",
                                   dtype_name(bt), dtype_name(a.ab_type)));
  }
  if (epilogue_uses_aux(a.epilogue) && a.aux == nullptr)
    throw UsageError(fmt::format("GEMM: epilogue {} needs the pre-activation (aux)", gemm_epilogue_name(a.epilogue)));
}

// One planned GEMM: its descriptors and the algorithm the heuristic chose, pinned for its key.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // cuBLASLt's A (our B), B (our A), C = D
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
  bool supported = false;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    // Destroy calls only free host memory; their status has nothing to report at this point.
    if (a != nullptr) cublaslt().MatrixLayoutDestroy(a);
    if (b != nullptr) cublaslt().MatrixLayoutDestroy(b);
    if (c != nullptr) cublaslt().MatrixLayoutDestroy(c);
    if (desc != nullptr) cublaslt().MatmulDescDestroy(desc);
  }
};

template <class T>
void set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& value, const std::string& what) {
  ZDP_LT(cublaslt().MatmulDescSetAttribute(d, attr, &value, sizeof(value)), what);
}

// The pointers an epilogue reads or writes live on the descriptor; set them for this call.
void set_epilogue_pointers(const Plan& p, const GemmArgs& a, const std::string& what) {
  if (epilogue_uses_bias(a.epilogue)) set_desc(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, a.bias, what);
  if (epilogue_uses_aux(a.epilogue)) set_desc(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, a.aux, what);
}

}  // namespace

GemmKey gemm_key(const GemmArgs& a) {
  GemmKey k;
  k.shape.trans_a = a.trans_a;
  k.shape.trans_b = a.trans_b;
  k.shape.M = a.M;
  k.shape.N = a.N;
  k.shape.K = a.K;
  k.shape.lda = a.lda;
  k.shape.ldb = a.ldb;
  k.shape.ldc = a.ldc;
  k.shape.epilogue = a.epilogue;
  k.shape.aux_ld = epilogue_uses_aux(a.epilogue) ? a.aux_ld : 0;
  validate(a, k.shape);
  k.ab_type = a.ab_type;
  k.c_type = a.c_type;
  k.bias_type = epilogue_uses_bias(a.epilogue) ? bias_type_of(a) : DType::kF32;
  k.tf32 = a.allow_tf32;
  k.align_a = pointer_alignment(address(a.A));
  k.align_b = pointer_alignment(address(a.B));
  k.align_c = pointer_alignment(address(a.C));
  k.align_bias = epilogue_uses_bias(a.epilogue) ? pointer_alignment(address(a.bias)) : kMaxAlignment;
  k.align_aux = epilogue_uses_aux(a.epilogue) ? pointer_alignment(address(a.aux)) : kMaxAlignment;
  return k;
}

struct GemmContext::Impl {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  bool owns_workspace = false;  // cudaMalloc'ed here (else the caller's)
  cudaStream_t stream = nullptr;
  std::mutex mutex;
  // Bounded (kPlanCacheCapacity): sampling meets a new shape with every token (cuda/lru_cache.h).
  LruCache<GemmKey, std::unique_ptr<Plan>, GemmKeyHash> plans{kPlanCacheCapacity};

  ~Impl() {
    plans.clear();
    // Nothing may still run on the workspace when it is freed; errors here cannot be reported from
    // a destructor and would already have surfaced on the stream.
    if (workspace != nullptr) cudaStreamSynchronize(stream);
    if (owns_workspace) cudaFree(workspace);
    if (handle != nullptr) cublaslt().Destroy(handle);
  }

  // The cached plan for `key`, made on first use (supported == false: cuBLASLt has no algorithm).
  const Plan& plan(const GemmKey& key, const GemmArgs& a) {
    if (std::unique_ptr<Plan>* cached = plans.find(key)) return **cached;
    const std::string what = describe(key);
    const LtGemm lt = to_lt(key.shape);
    auto p = std::make_unique<Plan>();

    const cublasComputeType_t compute = key.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    ZDP_LT(cublaslt().MatmulDescCreate(&p->desc, compute, CUDA_R_32F), what);
    const int32_t op_a = lt.a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int32_t op_b = lt.b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    set_desc(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, op_a, what);
    set_desc(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, op_b, what);
    const uint32_t epilogue = cublaslt_epilogue(lt.epilogue);
    set_desc(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue, what);
    if (epilogue_uses_bias(key.shape.epilogue)) {
      const int32_t bias_type = cuda_type(key.bias_type);
      set_desc(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type, what);
    }
    if (epilogue_uses_aux(key.shape.epilogue)) {
      const int64_t aux_ld = lt.aux_ld;
      set_desc(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, aux_ld, what);
    }
    // The heuristic reads the bias and aux pointers' values (for their alignment): this call's.
    set_epilogue_pointers(*p, a, what);

    const cudaDataType_t ab = cuda_type(key.ab_type), c = cuda_type(key.c_type);
    ZDP_LT(cublaslt().MatrixLayoutCreate(&p->a, ab, lt.a.rows, lt.a.cols, lt.a.ld), what);
    ZDP_LT(cublaslt().MatrixLayoutCreate(&p->b, ab, lt.b.rows, lt.b.cols, lt.b.ld), what);
    ZDP_LT(cublaslt().MatrixLayoutCreate(&p->c, c, lt.c.rows, lt.c.cols, lt.c.ld), what);

    cublasLtMatmulPreference_t pref = nullptr;
    ZDP_LT(cublaslt().MatmulPreferenceCreate(&pref), what);
    struct PrefGuard {
      cublasLtMatmulPreference_t p;
      ~PrefGuard() { cublaslt().MatmulPreferenceDestroy(p); }
    } guard{pref};
    const uint64_t max_workspace = kWorkspaceBytes;
    ZDP_LT(cublaslt().MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace,
                                                sizeof(max_workspace)),
           what);
    // cuBLASLt's A is our B and its B our A (the swap).
    const uint32_t align[4] = {key.align_b, key.align_a, key.align_c, key.align_c};
    const cublasLtMatmulPreferenceAttributes_t align_attr[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; ++i)
      ZDP_LT(cublaslt().MatmulPreferenceSetAttribute(pref, align_attr[i], &align[i], sizeof(align[i])), what);

    // One result, the heuristic's first choice: the same for the same key on the same GPU and library.
    cublasLtMatmulHeuristicResult_t result{};
    int count = 0;
    const cublasStatus_t st =
        cublaslt().MatmulAlgoGetHeuristic(handle, p->desc, p->a, p->b, p->c, p->c, pref, 1, &result, &count);
    if (st == CUBLAS_STATUS_SUCCESS && count > 0 && result.state == CUBLAS_STATUS_SUCCESS) {
      p->algo = result.algo;
      p->workspace = result.workspaceSize;
      p->supported = true;
    } else if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED && st != CUBLAS_STATUS_INVALID_VALUE) {
      // INVALID_VALUE is how cuBLASLt 13's heuristic declines a combination of types it has no kernel
      // for (seen on an H200: an fp32 D with a bf16 bias; a bf16 D with an fp32 bias gradient), once
      // validate() has refused every argument of ours: unsupported, like NOT_SUPPORTED.
      lt_fail(st, "cublasLtMatmulAlgoGetHeuristic", what);
    }
    return *plans.insert(key, std::move(p));
  }
};

GemmContext::GemmContext(cudaStream_t stream, void* workspace) : impl_(std::make_unique<Impl>()) {
  impl_->stream = stream;
  ZDP_LT(cublaslt().Create(&impl_->handle), "the GEMM context");
  impl_->workspace = workspace;
  if (workspace == nullptr) {
    ZDP_CUDA_CHECK(cudaMalloc(&impl_->workspace, kWorkspaceBytes));
    impl_->owns_workspace = true;
  }
}

GemmContext::~GemmContext() = default;

cudaStream_t GemmContext::stream() const { return impl_->stream; }

void GemmContext::set_stream(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->stream = stream;
}

size_t GemmContext::cached_plans() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->plans.size();
}

bool GemmContext::supported(const GemmArgs& args) {
  const GemmKey key = gemm_key(args);
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->plan(key, args).supported;
}

void GemmContext::gemm(const GemmArgs& args) {
  const GemmKey key = gemm_key(args);
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const Plan& p = impl_->plan(key, args);
  if (!p.supported)
    throw RuntimeFailure(fmt::format("cuBLASLt has no algorithm (CUBLAS_STATUS_NOT_SUPPORTED) for {} with {}",
                                     describe(key), lt_epilogue_name(lt_epilogue(args.epilogue))));
  // A cached plan's descriptor carries the pointers of the call that made it: this call's instead
  // (the same alignments: they are part of the key).
  const bool epilogue_pointers = epilogue_uses_bias(args.epilogue) || epilogue_uses_aux(args.epilogue);
  if (epilogue_pointers) set_epilogue_pointers(p, args, describe(key));
  const float alpha = args.alpha, beta = args.beta;
  // The swap (gemm_layout.h): cuBLASLt's A is our B, its B our A; C is read and written in place (D = C).
  const cublasStatus_t st = cublaslt().Matmul(impl_->handle, p.desc, &alpha, args.B, p.a, args.A, p.b, &beta, args.C,
                                           p.c, args.C, p.c, &p.algo, impl_->workspace, p.workspace, impl_->stream);
  if (st != CUBLAS_STATUS_SUCCESS) lt_fail(st, "cublasLtMatmul", describe(key));
}

void GemmContext::gemm(DType dtype, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const void* A,
                       int lda, const void* B, int ldb, float beta, float* C, int ldc) {
  gemm(gemm_args(dtype, DType::kF32, trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, alpha, beta));
}

}  // namespace zerodp::cuda
