dnl SPDX-License-Identifier: MIT
dnl tools: `tandem plot` draws its curves with cairo (Debian: libcairo2-dev).
dnl Optional: without it the command is still there and says it was built
dnl without cairo, so a script that calls it gets a clear message.
AC_ARG_WITH([cairo],
  [AS_HELP_STRING([--with-cairo], [draw `tandem plot` curves with cairo (default: if found)])],
  [], [with_cairo=check])
have_cairo=no
plot_why="disabled by --without-cairo"
AS_IF([test "x$with_cairo" != xno], [
  PKG_CHECK_MODULES([CAIRO], [cairo >= 1.14], [have_cairo=yes],
    [plot_why="cairo not found; apt-get install libcairo2-dev"])
  AS_IF([test "x$with_cairo$have_cairo" = xyesno],
        [AC_MSG_ERROR([--with-cairo given but $plot_why])])
])
AS_IF([test "x$have_cairo" = xyes],
      [AC_DEFINE([HAVE_CAIRO], [1], [Define if cairo is available (tandem plot)])
       plot_why="tandem plot: PNG curves drawn with cairo"])
AM_CONDITIONAL([TDM_BUILD_PLOT], [test "x$have_cairo" = xyes])
