#include "kernels/blas_info.h"

#include <cstdio>
#include <cstdlib>

#include <unistd.h>

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

// Set (to OpenBLAS's own core name) in the environment of the program select_wide_blas_kernels runs
// again: says that OPENBLAS_CORETYPE was zerodp's choice, and over which set.
constexpr const char* kReplacedCoreVar = "ZERODP_OPENBLAS_CORE_REPLACED";

std::string bounded(const char* value) {
  std::string s = value;
  return s.size() > 32 ? s.substr(0, 29) + "..." : s;
}

BlasCore read_blas_core() {
  BlasCore core;
  if (const char* name = openblas_get_corename(); name) core.name = name;
  if (core.name.empty()) core.name = "unknown";
  if (const char* env = std::getenv("OPENBLAS_CORETYPE"); env && *env) {
    core.forced_by = bounded(env);
    if (const char* was = std::getenv(kReplacedCoreVar); was && *was) core.replaced = bounded(was);
  }
  core.narrower = !core_uses_avx512(core.name) && cpu_features().avx512f;
  return core;
}

}  // namespace

const BlasCore& blas_core() {
  static const BlasCore core = read_blas_core();
  return core;
}

void select_wide_blas_kernels(char** argv) {
  if (const char* env = std::getenv("OPENBLAS_CORETYPE"); env && *env) return;  // the user's choice, or done
  const BlasCore& c = blas_core();
  if (!c.narrower || !cpu_features().x86_64_v4) return;
  const char* wide = cpu_features().avx512_bf16 ? "Cooperlake" : "SkylakeX";
  if (setenv("OPENBLAS_CORETYPE", wide, 1) != 0 || setenv(kReplacedCoreVar, c.name.c_str(), 1) != 0) return;
  std::fflush(nullptr);
  execv("/proc/self/exe", argv);
  // Still here: run on as OpenBLAS is; the variables would misdescribe it.
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv(kReplacedCoreVar);
}

std::string blas_core_summary() {
  const BlasCore& c = blas_core();
  std::string why = "chosen by CPUID";
  if (!c.replaced.empty())
    why = fmt::format("chosen by zerodp over OpenBLAS's own {}, which lacks AVX-512, with OPENBLAS_CORETYPE={}",
                      c.replaced, c.forced_by);
  else if (!c.forced_by.empty())
    why = fmt::format("chosen by OPENBLAS_CORETYPE={}", c.forced_by);
  return fmt::format("{} kernels ({}{})", c.name, why, c.narrower ? "; no AVX-512 on a CPU that has it" : "");
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
      "fp32 GEMMs may run at a fraction of their speed (OPENBLAS_CORETYPE=SkylakeX selects its AVX-512 kernels)",
      c.name);
}

}  // namespace zerodp::kernels
