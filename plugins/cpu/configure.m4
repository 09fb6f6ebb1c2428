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
AM_CONDITIONAL([TDM_BUILD_CPU], [test "x$have_onednn" = xyes])
TDM_SUMMARY_ADD([  cpu            $have_onednn ($onednn_why)])
