#include "kernels/blas_info.h"

#include <cstdlib>

#include <cblas.h>
#include <fmt/format.h>

#include "core/cpu.h"
#include "core/strings.h"

namespace zerodp::kernels {

namespace {

// OpenBLAS's kernel sets whose GEMMs are written with AVX-512 (driver/others/dynamic.c's core names).
bool core_uses_avx512(const std::string& name) {
  const std::string n = to_lower(name);
  return n == "skylakex" || n == "cooperlake" || n == "sapphirerapids";
}

BlasCore read_blas_core() {
  BlasCore core;
  if (const char* name = openblas_get_corename(); name) core.name = name;
  if (core.name.empty()) core.name = "unknown";
  if (const char* env = std::getenv("OPENBLAS_CORETYPE"); env && *env) {
    core.forced_by = env;
    if (core.forced_by.size() > 32) core.forced_by = core.forced_by.substr(0, 29) + "...";
  }
  core.narrower = !core_uses_avx512(core.name) && cpu_features().avx512f;
  return core;
}

}  // namespace

const BlasCore& blas_core() {
  static const BlasCore core = read_blas_core();
  return core;
}

std::string blas_core_summary() {
  const BlasCore& c = blas_core();
  return fmt::format("{} kernels ({}{})", c.name,
                     c.forced_by.empty() ? "chosen by CPUID" : fmt::format("chosen by OPENBLAS_CORETYPE={}", c.forced_by),
                     c.narrower ? "; no AVX-512 on a CPU that has it" : "");
}

std::string blas_core_warning() {
  const BlasCore& c = blas_core();
  if (!c.narrower) return {};
  if (!c.forced_by.empty())
    return fmt::format(
        "OpenBLAS runs its {} kernels, without AVX-512, because OPENBLAS_CORETYPE={} is set, on a CPU with AVX-512: "
        "fp32 GEMMs may run at half the speed OpenBLAS's own choice gives (unset OPENBLAS_CORETYPE)",
        c.name, c.forced_by);
  return fmt::format(
      "OpenBLAS chose its {} kernels, without AVX-512, on a CPU with AVX-512 (a version that does not know this CPU): "
      "fp32 GEMMs may run at half their speed (OPENBLAS_CORETYPE=SkylakeX selects its AVX-512 kernels)",
      c.name);
}

}  // namespace zerodp::kernels
