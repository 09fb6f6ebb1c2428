dnl SPDX-License-Identifier: MIT
dnl docs/reference: `make doc` builds the API reference from the gtk-doc
dnl comments of include/tandem/ (Debian: gtk-doc-tools). Optional: without
dnl it `make doc` says what to install.
AC_PATH_PROG([GTKDOC_SCAN], [gtkdoc-scan])
AC_PATH_PROG([GTKDOC_MKDB], [gtkdoc-mkdb])
AC_PATH_PROG([GTKDOC_MKHTML], [gtkdoc-mkhtml])
AS_IF([test -n "$GTKDOC_SCAN" && test -n "$GTKDOC_MKDB" && test -n "$GTKDOC_MKHTML"],
  [have_gtkdoc=yes; gtkdoc_why="make doc: build/docs/api/html/index.html"],
  [have_gtkdoc=no; gtkdoc_why="gtk-doc not found; apt-get install gtk-doc-tools, then configure again"])
AC_SUBST([TDM_HAVE_GTKDOC], [$have_gtkdoc])
AC_SUBST([TDM_GTKDOC_WHY], [$gtkdoc_why])
