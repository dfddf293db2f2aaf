// Checks that oneMKL's bf16 GEMM can be loaded at run time beside OpenBLAS (both export cblas_sgemm):
// the binary links OpenBLAS, dlopens libmkl_rt.so.3 with RTLD_LOCAL | RTLD_DEEPBIND, selects MKL's GNU
// OpenMP threading layer, and runs one bf16 GEMM from MKL and one fp32 GEMM from OpenBLAS.
//   g++ -O2 -fopenmp dlopen_check.cpp -I/usr/include/x86_64-linux-gnu/openblas-openmp \
//     -L/usr/lib/x86_64-linux-gnu/openblas-openmp -lopenblas -ldl && ./a.out /tmp/mklvenv/lib/libmkl_rt.so.3
#include <cblas.h>
#include <dlfcn.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

using gemm_bf16_fn = void (*)(int, int, int, int, int, int, float, const uint16_t*, int, const uint16_t*, int,
                              float, float*, int);
using set_layer_fn = int (*)(int);
using version_fn = void (*)(char*, int);

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : "libmkl_rt.so.3";
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (!h) { std::printf("dlopen failed: %s\n", dlerror()); return 1; }
  auto set_layer = reinterpret_cast<set_layer_fn>(dlsym(h, "MKL_Set_Threading_Layer"));
  auto gemm = reinterpret_cast<gemm_bf16_fn>(dlsym(h, "cblas_gemm_bf16bf16f32"));
  auto version = reinterpret_cast<version_fn>(dlsym(h, "mkl_get_version_string"));
  if (!set_layer || !gemm || !version) { std::printf("dlsym failed\n"); return 1; }
  set_layer(3);  // MKL_THREADING_GNU (1 would be MKL_THREADING_SEQUENTIAL)
  char v[256];
  version(v, sizeof v);
  std::printf("MKL: %s\nOpenBLAS: %s\n", v, openblas_get_config());
  const int n = 2048;
  std::vector<uint16_t> a(size_t(n) * n, 0x3f80), b(size_t(n) * n, 0x3f80);  // 1.0 in bf16
  std::vector<float> af(size_t(n) * n, 1.f), bf(size_t(n) * n, 1.f), c(size_t(n) * n);
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    gemm(101, 111, 111, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);  // row-major NN
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("MKL bf16 2048^3: %.1f GFLOP/s, c[0] = %g (expect 2048)\n", 2.0 * n * n * n / s * 1e-9, c[0]);
  }
  for (int rep = 0; rep < 2; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.f, af.data(), n, bf.data(), n, 0.f,
                c.data(), n);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("cblas_sgemm (OpenBLAS) 2048^3: %.1f GFLOP/s, c[0] = %g\n", 2.0 * n * n * n / s * 1e-9, c[0]);
  }
  return 0;
}
