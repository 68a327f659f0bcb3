#include "runtime/cuda/cublas_loader.h"

#include <dlfcn.h>

#include <mutex>
#include <string>
#include <type_traits>

#include <fmt/format.h>

#include "core/error.h"

namespace strata::rt {
namespace {

// The pointer types must match cublas_v2.h exactly; checked without referencing
// the symbols (decltype is unevaluated, so nothing is linked).
static_assert(std::is_same_v<decltype(CublasApi::gemm_strided_batched),
                             decltype(static_cast<decltype(CublasApi::gemm_strided_batched)>(
                                 &cublasGemmStridedBatchedEx))>);
static_assert(std::is_same_v<decltype(CublasApi::create), decltype(&cublasCreate)>);
static_assert(std::is_same_v<decltype(CublasApi::destroy), decltype(&cublasDestroy)>);
static_assert(std::is_same_v<decltype(CublasApi::set_stream), decltype(&cublasSetStream)>);
static_assert(std::is_same_v<decltype(CublasApi::set_workspace), decltype(&cublasSetWorkspace)>);
static_assert(std::is_same_v<decltype(CublasApi::get_version), decltype(&cublasGetVersion)>);
static_assert(std::is_same_v<decltype(CublasApi::status_string), decltype(&cublasGetStatusString)>);

// The exported names: cublas_v2.h maps cublasCreate to cublasCreate_v2 and so on.
#define STRATA_STR2(x) #x
#define STRATA_STR(x) STRATA_STR2(x)

template <class Fn>
void resolve(void* lib, const char* name, Fn& out) {
  out = reinterpret_cast<Fn>(dlsym(lib, name));
  if (out == nullptr) {
    throw InputError("", "", fmt::format("cuBLAS has no function {}: {}", name, dlerror()));
  }
}

CublasApi load() {
  // The library found at configure time, then the soname of the major version
  // this build's headers describe.
  const std::string candidates[] = {STRATA_RT_CUBLAS_PATH,
                                    "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR)};
  void* lib = nullptr;
  std::string errors;
  for (const auto& name : candidates) {
    lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) break;
    errors += fmt::format("\n  {}: {}", name, dlerror());
  }
  if (lib == nullptr) {
    throw InputError("", "", fmt::format("backend 'cuda' cannot load cuBLAS:{}", errors));
  }
  CublasApi api{};
  resolve(lib, STRATA_STR(cublasCreate), api.create);
  resolve(lib, STRATA_STR(cublasDestroy), api.destroy);
  resolve(lib, STRATA_STR(cublasSetStream), api.set_stream);
  resolve(lib, STRATA_STR(cublasSetWorkspace), api.set_workspace);
  resolve(lib, STRATA_STR(cublasGetVersion), api.get_version);
  resolve(lib, "cublasGetStatusString", api.status_string);
  resolve(lib, "cublasGemmStridedBatchedEx", api.gemm_strided_batched);
  return api;  // the library stays loaded for the life of the process
}

}  // namespace

const CublasApi& cublas_api() {
  static std::once_flag once;
  static CublasApi api{};
  std::call_once(once, [] { api = load(); });
  return api;
}

}  // namespace strata::rt
