dnl SPDX-License-Identifier: MIT
dnl cpu backend: oneDNN (libdnnl) + OpenMP.
AC_ARG_WITH([onednn],
  [AS_HELP_STRING([--with-onednn], [build the oneDNN cpu backend (default: if found)])],
  [], [with_onednn=check])
have_onednn=no
onednn_why="disabled by --without-onednn"
AS_IF([test "x$with_onednn" != xno], [
  AC_CHECK_HEADER([dnnl.h], [
    AC_CHECK_LIB([dnnl], [dnnl_engine_create], [have_onednn=yes],
                 [onednn_why="libdnnl not found (apt-get install libdnnl-dev)"])
  ], [onednn_why="dnnl.h not found (apt-get install libdnnl-dev)"])
  AS_IF([test "x$with_onednn$have_onednn" = xyesno],
        [AC_MSG_ERROR([--with-onednn given but $onednn_why])])
])
AS_IF([test "x$have_onednn" = xyes], [onednn_why="oneDNN (libdnnl) with OpenMP"])
dnl Debian's oneDNN runs on GNU OpenMP (libgomp). clang's -fopenmp brings
dnl LLVM's libomp instead: the plugin's own loops and oneDNN's primitives
dnl then run on two thread pools that wait for each other (measured here:
dnl 20-25% slower training). It works; the summary says so.
AS_IF([test "x$have_onednn" = xyes], [
  AC_MSG_CHECKING([whether $CC's OpenMP is GNU OpenMP, as oneDNN's])
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[
#if defined(__clang__) || defined(__INTEL_COMPILER) || defined(__INTEL_LLVM_COMPILER)
#error another OpenMP runtime
#endif
]], [])], [AC_MSG_RESULT([yes])], [
    AC_MSG_RESULT([no])
    onednn_why="$onednn_why; $CC's OpenMP runtime is not oneDNN's libgomp: two thread pools, about 20% slower than a gcc build"
  ])
])
AM_CONDITIONAL([TDM_BUILD_CPU], [test "x$have_onednn" = xyes])
TDM_SUMMARY_ADD([  cpu            $have_onednn ($onednn_why)])
