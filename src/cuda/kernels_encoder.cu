// GPT-2's input embedding, and the Llama family's token embedding alone (kernels/encoder.h):
//   forward:  out[b,t,:] = wte[inp[b,t],:] + wpe[t,:]          (embedding: out[n,:] = wte[inp[n],:])
//   backward: dwte[v,:] += Σ_{b,t: inp[b,t]=v} dout[b,t,:] ;  dwpe[t,:] += Σ_b dout[b,t,:]
// (the embedding's backward is the dwte part over its N rows: the same kernel, the same bits).
// Backward without atomics, each output element summed by one thread in (b, t) order, the CPU's
// order: the GPU's dwte and dwpe are bitwise the CPU's. dwte: a block owns a slice of channels and
// the token ids of one residue class mod kEncoderClasses, and walks all tokens in order, skipping the
// other classes' (reading B·T ids per block is cheap next to the rows it adds). Chosen over sorting
// the tokens by id (a radix sort and its working memory) for having no scratch and keeping the
// CPU's summation order; the repeated-token rows of one class are serial in that block, which at
// GPT-2's B·T/128 tokens per block is some hundred dependent row updates.
#include "cuda/kernels.h"
#include "cuda/kernels_common.cuh"

namespace zerodp::cuda {

namespace {

using detail::load;
namespace tl = tiling;

template <class W>
__global__ void encoder_forward_kernel(float* __restrict__ out, const int32_t* __restrict__ inp,
                                       const W* __restrict__ wte, const W* __restrict__ wpe, int T, int C,
                                       size_t total) {
  const size_t stride = tl::elementwise_stride(gridDim.x, blockDim.x);
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const size_t bt = i / C, c = i % C;
    const size_t t = bt % T;
    out[i] = load(wte[static_cast<size_t>(inp[bt]) * C + c]) + load(wpe[t * C + c]);
  }
}

template <class W>
__global__ void embedding_forward_kernel(float* __restrict__ out, const int32_t* __restrict__ inp,
                                         const W* __restrict__ wte, int C, size_t total) {
  const size_t stride = tl::elementwise_stride(gridDim.x, blockDim.x);
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const size_t n = i / C, c = i % C;
    out[i] = load(wte[static_cast<size_t>(inp[n]) * C + c]);
  }
}

// dwpe: thread per (t, c), b in order, accumulating straight into dwpe (the CPU's sequence of adds).
__global__ void encoder_backward_wpe_kernel(float* __restrict__ dwpe, const float* __restrict__ dout, int B, int T,
                                            int C) {
  const size_t total = static_cast<size_t>(T) * C;
  const size_t stride = tl::elementwise_stride(gridDim.x, blockDim.x);
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    float acc = dwpe[i];
    for (int b = 0; b < B; ++b) acc += dout[static_cast<size_t>(b) * total + i];
    dwpe[i] = acc;
  }
}

// dwte: block (x, y) = channels [x·kEncoderCols, ...) of the rows v ≡ y (mod kEncoderClasses).
__global__ void encoder_backward_wte_kernel(float* __restrict__ dwte, const float* __restrict__ dout,
                                            const int32_t* __restrict__ inp, int64_t rows, int C) {
  __shared__ int32_t ids[tl::kEncoderStage];
  const int c = blockIdx.x * tl::kEncoderCols + threadIdx.x;
  const int cls = blockIdx.y;
  for (int64_t base = 0; base < rows; base += tl::kEncoderStage) {
    const int64_t len = rows - base < tl::kEncoderStage ? rows - base : tl::kEncoderStage;
    __syncthreads();  // the previous stage is consumed
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) ids[j] = inp[base + j];
    __syncthreads();
    if (c >= C) continue;  // still takes part in the barriers above
    for (int64_t j = 0; j < len; ++j) {
      const int32_t v = ids[j];
      if (tl::encoder_class_of(v) != cls) continue;
      float* dw = dwte + static_cast<size_t>(v) * C + c;
      *dw += dout[static_cast<size_t>(base + j) * C + c];
    }
  }
}

template <class W>
void encoder_forward_impl(float* out, const int32_t* inp, const W* wte, const W* wpe, int B, int T, int C,
                          cudaStream_t stream) {
  const size_t total = static_cast<size_t>(B) * T * C;
  if (total == 0) return;
  const auto blocks = tl::elementwise_blocks(total);
  encoder_forward_kernel<W><<<static_cast<unsigned>(blocks), tl::kElementwiseBlock, 0, stream>>>(out, inp, wte, wpe,
                                                                                                T, C, total);
  ZDP_CUDA_CHECK(cudaGetLastError());
}

template <class W>
void embedding_forward_impl(float* out, const int32_t* inp, const W* wte, int N, int C, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  const size_t total = static_cast<size_t>(N) * C;
  embedding_forward_kernel<W><<<static_cast<unsigned>(tl::elementwise_blocks(total)), tl::kElementwiseBlock, 0,
                                stream>>>(out, inp, wte, C, total);
  ZDP_CUDA_CHECK(cudaGetLastError());
}

// dwte over `rows` tokens (the encoder's B·T, the embedding's N).
void launch_wte_backward(float* dwte, const float* dout, const int32_t* inp, int64_t rows, int C,
                         cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(tl::encoder_col_blocks(C)), tl::kEncoderClasses);
  encoder_backward_wte_kernel<<<grid, tl::kEncoderCols, 0, stream>>>(dwte, dout, inp, rows, C);
  ZDP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

template <class P>
void encoder_forward(float* out, const int32_t* inp, const P* wte, const P* wpe, int B, int T, int C,
                     cudaStream_t stream) {
  encoder_forward_impl(out, inp, wte, wpe, B, T, C, stream);
}

template <class P>
void embedding_forward(float* out, const int32_t* inp, const P* wte, int N, int C, cudaStream_t stream) {
  embedding_forward_impl(out, inp, wte, N, C, stream);
}

void embedding_backward(float* dwte, const float* dout, const int32_t* inp, int N, int C, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  launch_wte_backward(dwte, dout, inp, N, C, stream);
}

void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B, int T, int C,
                      cudaStream_t stream) {
  if (B <= 0 || T <= 0 || C <= 0) return;
  launch_wte_backward(dwte, dout, inp, static_cast<int64_t>(B) * T, C, stream);
  const auto blocks = tl::elementwise_blocks(static_cast<size_t>(T) * C);
  encoder_backward_wpe_kernel<<<static_cast<unsigned>(blocks), tl::kElementwiseBlock, 0, stream>>>(dwpe, dout, B, T,
                                                                                                  C);
  ZDP_CUDA_CHECK(cudaGetLastError());
}

#define ZDP_ENCODER(P)                                                                                    \
  template void encoder_forward(float*, const int32_t*, const P*, const P*, int, int, int, cudaStream_t); \
  template void embedding_forward(float*, const int32_t*, const P*, int, int, cudaStream_t);
ZDP_ENCODER(float) ZDP_ENCODER(bf16) ZDP_ENCODER(fp16)

}  // namespace zerodp::cuda
