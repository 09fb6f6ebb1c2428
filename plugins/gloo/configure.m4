dnl SPDX-License-Identifier: MIT
dnl gloo collectives: Debian's libgloo-dev (headers, libgloo.so, no pkg-config).
AC_ARG_WITH([gloo],
  [AS_HELP_STRING([--with-gloo], [build the Gloo collectives plugin (default: if found)])],
  [], [with_gloo=check])
have_gloo=no
gloo_why="disabled by --without-gloo"
GLOO_LIBS=
AS_IF([test "x$with_gloo" != xno], [
  AC_LANG_PUSH([C++])
  gloo_save_CXXFLAGS=$CXXFLAGS
  gloo_save_LIBS=$LIBS
  CXXFLAGS="$CXXFLAGS -std=c++17"
  AC_CHECK_HEADER([gloo/config.h], [
    LIBS="-lgloo -pthread $LIBS"
    AC_MSG_CHECKING([for gloo::transport::tcp::CreateDevice in -lgloo])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <gloo/transport/tcp/device.h>]],
        [[gloo::transport::tcp::attr attr("127.0.0.1");
          auto dev = gloo::transport::tcp::CreateDevice(attr);
          (void)dev;]])],
      [have_gloo=yes],
      [gloo_why="libgloo cannot be linked with $CXX (apt-get install libgloo-dev)"])
    AC_MSG_RESULT([$have_gloo])
  ], [gloo_why="gloo/config.h not found with $CXX (apt-get install libgloo-dev g++)"])
  CXXFLAGS=$gloo_save_CXXFLAGS
  LIBS=$gloo_save_LIBS
  AC_LANG_POP([C++])
  AS_IF([test "x$with_gloo$have_gloo" = xyesno],
        [AC_MSG_ERROR([--with-gloo given but $gloo_why])])
])
AS_IF([test "x$have_gloo" = xyes], [
  gloo_why="Gloo TCP transport (libgloo, BSD-3-Clause)"
  GLOO_LIBS="-lgloo"
])
AC_SUBST([GLOO_LIBS])
AM_CONDITIONAL([TDM_BUILD_GLOO], [test "x$have_gloo" = xyes])
TDM_SUMMARY_ADD([  gloo           $have_gloo ($gloo_why)])
