// cuBLAS, loaded on first use instead of at program start.
//
// Why: loading libcublas (which pulls in the 500 MB libcublasLt) costs about
// 1.5 s at process start on the development machine, measured with an empty
// program linked against it (docs/performance.md). Every `strata` command would
// pay that even when it never touches a GPU, so the cuda backend resolves the
// few cuBLAS entry points it calls with dlopen/dlsym when the first cuda Device
// is created.
#pragma once

#include <cublas_v2.h>

namespace strata::rt {

// The cuBLAS functions the cuda backend calls, with the signatures of cublas_v2.h.
struct CublasApi {
  cublasStatus_t (*create)(cublasHandle_t*);
  cublasStatus_t (*destroy)(cublasHandle_t);
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
  cublasStatus_t (*set_workspace)(cublasHandle_t, void*, size_t);
  cublasStatus_t (*get_version)(cublasHandle_t, int*);
  const char* (*status_string)(cublasStatus_t);
  cublasStatus_t (*gemm_strided_batched)(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                         int, int, int, const void*, const void*, cudaDataType,
                                         int, long long int, const void*, cudaDataType, int,
                                         long long int, const void*, void*, cudaDataType, int,
                                         long long int, int, cublasComputeType_t,
                                         cublasGemmAlgo_t);
};

// Loads cuBLAS once (thread-safe) and returns its entry points. Throws
// InputError naming the library and dlerror() when it cannot be loaded.
const CublasApi& cublas_api();

}  // namespace strata::rt
