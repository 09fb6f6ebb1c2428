dnl SPDX-License-Identifier: MIT
dnl cuda backend: the CUDA toolkit (nvcc, the runtime), cuBLAS/cuBLASLt and
dnl cuDNN >= 9. Default: built when a toolkit is found in /usr/local/cuda or
dnl through nvcc on PATH; --with-cuda=DIR names the toolkit; --with-cuda
dnl given and nothing usable found is an error. No GPU is needed to build:
dnl the checks compile and link, they never run CUDA code.
AC_ARG_WITH([cuda],
  [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@],
    [build the cuda backend with the CUDA toolkit in DIR (default: /usr/local/cuda or nvcc on PATH, if found)])],
  [], [with_cuda=check])
AC_ARG_WITH([cuda-arch],
  [AS_HELP_STRING([--with-cuda-arch=LIST],
    [compute capabilities of the cuda kernels: SASS for each, plus PTX of the highest (default "80 90")])],
  [], [with_cuda_arch="80 90"])
AC_ARG_VAR([NVCC], [the CUDA compiler (default: DIR/bin/nvcc, else nvcc on PATH)])

have_cuda=no
cuda_why="disabled by --without-cuda"
CUDA_DIR=
CUDA_GENCODE=
AS_IF([test "x$with_cuda" != xno], [
  dnl Where the toolkit is: DIR, else $NVCC's, else /usr/local/cuda, else nvcc on PATH.
  cuda_why=
  AS_CASE([$with_cuda],
    [yes|check], [
      AS_IF([test -n "$NVCC"], [CUDA_DIR=`dirname "$NVCC"`; CUDA_DIR=`dirname "$CUDA_DIR"`],
            [test -x /usr/local/cuda/bin/nvcc], [CUDA_DIR=/usr/local/cuda],
            [AC_PATH_PROG([cuda_nvcc_on_path], [nvcc])
             AS_IF([test -n "$cuda_nvcc_on_path"],
                   [CUDA_DIR=`dirname "$cuda_nvcc_on_path"`; CUDA_DIR=`dirname "$CUDA_DIR"`])])],
    [CUDA_DIR=$with_cuda])
  AS_IF([test -z "$CUDA_DIR"],
        [cuda_why="no CUDA toolkit (nothing in /usr/local/cuda, no nvcc on PATH; --with-cuda=DIR)"])
  AS_IF([test -z "$cuda_why" && test -z "$NVCC"], [NVCC="$CUDA_DIR/bin/nvcc"])
  AS_IF([test -z "$cuda_why"], [
    AC_MSG_CHECKING([for nvcc])
    AS_IF([test -x "$NVCC" || command -v "$NVCC" >/dev/null 2>&1],
          [AC_MSG_RESULT([$NVCC])],
          [AC_MSG_RESULT([no]); cuda_why="$NVCC not found"])
  ])

  dnl The architecture list: numbers such as 80, 90 or 90a; SASS for each,
  dnl PTX of the highest as the fallback for newer GPUs.
  AS_IF([test -z "$cuda_why"], [
    cuda_archs=
    for cuda_a in $with_cuda_arch; do
      AS_CASE([$cuda_a],
        [[[1-9][0-9]]|[[1-9][0-9]][[0-9a]]|[[1-9][0-9]][[0-9]][[a-z]]], [],
        [AC_MSG_ERROR([--with-cuda-arch: '$cuda_a' is not a compute capability such as 80 or 90])])
      cuda_archs="$cuda_archs $cuda_a"
    done
    AS_IF([test -z "$cuda_archs"], [AC_MSG_ERROR([--with-cuda-arch: empty list])])
    cuda_top=`for cuda_a in $cuda_archs; do echo $cuda_a; done | sort -n | tail -n 1`
    cuda_arch_summary=
    for cuda_a in $cuda_archs; do
      CUDA_GENCODE="$CUDA_GENCODE -gencode arch=compute_$cuda_a,code=sm_$cuda_a"
      AS_IF([test "x$cuda_a" = "x$cuda_top"],
            [cuda_arch_summary="$cuda_arch_summary sm_$cuda_a+PTX"],
            [cuda_arch_summary="$cuda_arch_summary sm_$cuda_a"])
    done
    CUDA_GENCODE="$CUDA_GENCODE -gencode arch=compute_$cuda_top,code=compute_$cuda_top"
    cuda_arch_summary=`echo $cuda_arch_summary`
  ])

  dnl nvcc compiles (only: nothing runs without a GPU) a kernel for every
  dnl architecture, with the host compiler the C++ files use.
  AS_IF([test -z "$cuda_why"], [
    AC_MSG_CHECKING([whether $NVCC compiles a kernel for $cuda_arch_summary])
    cat >conftest.cu <<_TDM_EOF
__global__ void tdm_probe(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        x[[i]] = 2.0f * x[[i]];
    }
}
extern "C" cudaError_t tdm_probe_launch(cudaStream_t s, float *x, int n)
{
    tdm_probe<<<(n + 255) / 256, 256, 0, s>>>(x, n);
    return cudaGetLastError();
}
_TDM_EOF
    AS_IF([$NVCC -std=c++17 -ccbin "$CXX" -Xcompiler -fPIC $CUDA_GENCODE -c conftest.cu \
             -o conftest.$ac_objext >&AS_MESSAGE_LOG_FD 2>&1],
          [AC_MSG_RESULT([yes])],
          [AC_MSG_RESULT([no])
           cuda_why="$NVCC cannot compile a kernel for $cuda_arch_summary with $CXX (see config.log)"])
    rm -f conftest.cu conftest.$ac_objext
  ])

  dnl Headers and libraries, with the toolkit's include and lib64 (or lib).
  cuda_save_CPPFLAGS=$CPPFLAGS
  cuda_save_LDFLAGS=$LDFLAGS
  cuda_save_LIBS=$LIBS
  CUDA_CPPFLAGS="-I$CUDA_DIR/include"
  AS_IF([test -d "$CUDA_DIR/lib64"], [CUDA_LDFLAGS="-L$CUDA_DIR/lib64"],
        [CUDA_LDFLAGS="-L$CUDA_DIR/lib"])
  CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS"
  LDFLAGS="$LDFLAGS $CUDA_LDFLAGS"
  AS_IF([test -z "$cuda_why"], [
    for cuda_h in cuda_runtime_api.h cublas_v2.h cublasLt.h cudnn.h; do
      AC_CHECK_HEADER([$cuda_h], [], [cuda_why="$cuda_h not found in $CUDA_DIR/include"])
      test -z "$cuda_why" || break
    done
  ])
  AS_IF([test -z "$cuda_why"], [
    AC_CHECK_LIB([cudart], [cudaGetDeviceCount], [],
                 [cuda_why="libcudart not found in $CUDA_DIR"])
  ])
  AS_IF([test -z "$cuda_why"], [
    AC_CHECK_LIB([cublasLt], [cublasLtCreate], [],
                 [cuda_why="libcublasLt not found in $CUDA_DIR"])
  ])
  AS_IF([test -z "$cuda_why"], [
    AC_CHECK_LIB([cublas], [cublasCreate_v2], [],
                 [cuda_why="libcublas not found in $CUDA_DIR"])
  ])
  AS_IF([test -z "$cuda_why"], [
    AC_CHECK_LIB([cudnn], [cudnnCreate], [],
                 [cuda_why="libcudnn not found in $CUDA_DIR"])
  ])
  AS_IF([test -z "$cuda_why"], [
    AC_MSG_CHECKING([for cuDNN 9 or newer])
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <cudnn.h>
#if CUDNN_MAJOR < 9
#error cuDNN older than 9
#endif
]], [])], [AC_MSG_RESULT([yes])],
      [AC_MSG_RESULT([no]); cuda_why="cuDNN older than 9 in $CUDA_DIR (the backend needs cuDNN 9)"])
  ])
  dnl The versions for the summary, from the headers the plugin compiles with.
  AS_IF([test -z "$cuda_why"], [
    AC_COMPUTE_INT([cuda_rt_version], [CUDART_VERSION], [#include <cuda_runtime_api.h>],
                   [cuda_rt_version=0])
    AC_COMPUTE_INT([cuda_blas_major], [CUBLAS_VER_MAJOR], [#include <cublas_api.h>],
                   [cuda_blas_major=0])
    AC_COMPUTE_INT([cuda_blas_minor], [CUBLAS_VER_MINOR], [#include <cublas_api.h>],
                   [cuda_blas_minor=0])
    AC_COMPUTE_INT([cuda_dnn_version], [CUDNN_VERSION], [#include <cudnn.h>],
                   [cuda_dnn_version=0])
    cuda_version_text="CUDA `expr $cuda_rt_version / 1000`.`expr $cuda_rt_version % 1000 / 10`"
    cuda_version_text="$cuda_version_text, cuBLAS $cuda_blas_major.$cuda_blas_minor"
    cuda_version_text="$cuda_version_text, cuDNN `expr $cuda_dnn_version / 10000`.`expr $cuda_dnn_version % 10000 / 100`.`expr $cuda_dnn_version % 100`"
    have_cuda=yes
    cuda_why="$cuda_version_text, $cuda_arch_summary"
    dnl The plugin refuses a GPU older than the oldest architecture built.
    cuda_low=`for cuda_a in $cuda_archs; do echo $cuda_a; done | sort -n | head -n 1`
    AC_DEFINE_UNQUOTED([TDM_CUDA_ARCHS], ["$cuda_arch_summary"],
      [The architectures the cuda kernels are built for (--with-cuda-arch).])
    AC_DEFINE_UNQUOTED([TDM_CUDA_MIN_ARCH], [`echo $cuda_low | tr -d a-z`],
      [The oldest compute capability (major * 10 + minor) the cuda kernels run on.])
  ])
  CPPFLAGS=$cuda_save_CPPFLAGS
  LDFLAGS=$cuda_save_LDFLAGS
  LIBS=$cuda_save_LIBS
  AS_IF([test "x$with_cuda$have_cuda" != xcheckno && test "x$have_cuda" = xno],
        [AC_MSG_ERROR([--with-cuda given but $cuda_why])])
])
dnl nvcc's own warnings are errors where the C files' are (--disable-werror).
AS_IF([test "x$enable_werror" = xyes], [CUDA_NVCC_WERROR="-Werror all-warnings"],
      [CUDA_NVCC_WERROR=])
AC_SUBST([CUDA_DIR])
AC_SUBST([CUDA_CPPFLAGS])
AC_SUBST([CUDA_LDFLAGS])
AC_SUBST([CUDA_GENCODE])
AC_SUBST([CUDA_NVCC_WERROR])
dnl For tests/cuda-unavailable.sh: whether the plugin is built, and why not.
AC_SUBST([TDM_CUDA_BUILT], [$have_cuda])
AC_SUBST([TDM_CUDA_WHY], [$cuda_why])
AM_CONDITIONAL([TDM_BUILD_CUDA], [test "x$have_cuda" = xyes])
TDM_SUMMARY_ADD([  cuda           $have_cuda ($cuda_why)])
