dnl SPDX-License-Identifier: MIT
dnl nccl collectives: NCCL >= 2.18 over the CUDA runtime of the cuda plugin.
dnl Default: built when the cuda plugin is and nccl.h + libnccl are found in
dnl the CUDA toolkit's directory (or --with-nccl=DIR); --with-nccl given and
dnl nothing usable found is an error. Nothing runs: the checks compile and
dnl link only, so no GPU is needed.
AC_ARG_WITH([nccl],
  [AS_HELP_STRING([--with-nccl@<:@=DIR@:>@],
    [build the nccl collectives with NCCL in DIR (default: the CUDA toolkit's, if found)])],
  [], [with_nccl=check])

have_nccl=no
nccl_why="disabled by --without-nccl"
NCCL_CPPFLAGS=
NCCL_LDFLAGS=
AS_IF([test "x$with_nccl" != xno], [
  nccl_why=
  AS_IF([test "x$have_cuda" != xyes], [nccl_why="the cuda plugin is not built ($cuda_why)"])
  AS_CASE([$with_nccl],
    [yes|check], [nccl_dir=$CUDA_DIR],
    [nccl_dir=$with_nccl])
  AS_IF([test -z "$nccl_why"], [
    NCCL_CPPFLAGS="-I$nccl_dir/include"
    AS_IF([test "x$nccl_dir" != "x$CUDA_DIR"], [NCCL_CPPFLAGS="$NCCL_CPPFLAGS $CUDA_CPPFLAGS"])
    AS_IF([test -d "$nccl_dir/lib64"], [NCCL_LDFLAGS="-L$nccl_dir/lib64"],
          [NCCL_LDFLAGS="-L$nccl_dir/lib"])
    AS_IF([test "x$nccl_dir" != "x$CUDA_DIR"], [NCCL_LDFLAGS="$NCCL_LDFLAGS $CUDA_LDFLAGS"])
    nccl_save_CPPFLAGS=$CPPFLAGS
    nccl_save_LDFLAGS=$LDFLAGS
    nccl_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $NCCL_CPPFLAGS"
    LDFLAGS="$LDFLAGS $NCCL_LDFLAGS"
    dnl nccl.h includes cuda_runtime.h: AC_CHECK_HEADER with the defaults is enough.
    AC_CHECK_HEADER([nccl.h], [], [nccl_why="nccl.h not found in $nccl_dir/include"])
    AS_IF([test -z "$nccl_why"], [
      AC_MSG_CHECKING([for NCCL 2.18 or newer])
      AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <nccl.h>
#if !defined(NCCL_VERSION_CODE) || NCCL_VERSION_CODE < NCCL_VERSION(2, 18, 0)
#error NCCL older than 2.18
#endif
]], [])], [AC_MSG_RESULT([yes])],
        [AC_MSG_RESULT([no]); nccl_why="NCCL older than 2.18 in $nccl_dir (the plugin needs non-blocking communicators, ncclCommInitRankConfig)"])
    ])
    AS_IF([test -z "$nccl_why"], [
      AC_CHECK_LIB([nccl], [ncclCommInitRankConfig], [],
                   [nccl_why="libnccl not found in $nccl_dir"], [-lcudart])
    ])
    AS_IF([test -z "$nccl_why"], [
      AC_COMPUTE_INT([nccl_major], [NCCL_MAJOR], [#include <nccl.h>], [nccl_major=0])
      AC_COMPUTE_INT([nccl_minor], [NCCL_MINOR], [#include <nccl.h>], [nccl_minor=0])
      AC_COMPUTE_INT([nccl_patch], [NCCL_PATCH], [#include <nccl.h>], [nccl_patch=0])
      have_nccl=yes
      nccl_why="NCCL $nccl_major.$nccl_minor.$nccl_patch"
    ])
    CPPFLAGS=$nccl_save_CPPFLAGS
    LDFLAGS=$nccl_save_LDFLAGS
    LIBS=$nccl_save_LIBS
  ])
  AS_IF([test "x$with_nccl$have_nccl" != xcheckno && test "x$have_nccl" = xno],
        [AC_MSG_ERROR([--with-nccl given but $nccl_why])])
])
AC_SUBST([NCCL_CPPFLAGS])
AC_SUBST([NCCL_LDFLAGS])
dnl For tests/nccl-unavailable.sh: whether the plugin is built, and why not.
AC_SUBST([TDM_NCCL_BUILT], [$have_nccl])
AC_SUBST([TDM_NCCL_WHY], [$nccl_why])
AM_CONDITIONAL([TDM_BUILD_NCCL], [test "x$have_nccl" = xyes])
TDM_SUMMARY_ADD([  nccl           $have_nccl ($nccl_why)])
