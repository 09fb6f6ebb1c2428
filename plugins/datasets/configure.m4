dnl SPDX-License-Identifier: MIT
dnl datasets: the imagefolder reader needs libpng and libjpeg(-turbo); the
dnl idx and cifar readers need nothing beyond zlib and GLib. With libdeflate
dnl the idx reader inflates a whole gzipped file about twice as fast as
dnl zlib (the time to the first step of a run over all of Fashion-MNIST).
AC_ARG_WITH([libdeflate],
  [AS_HELP_STRING([--with-libdeflate], [inflate whole IDX files with libdeflate (default: if found)])],
  [], [with_libdeflate=check])
have_libdeflate=no
AS_IF([test "x$with_libdeflate" != xno], [
  PKG_CHECK_MODULES([DEFLATE], [libdeflate], [have_libdeflate=yes], [have_libdeflate=no])
  AS_IF([test "x$with_libdeflate$have_libdeflate" = xyesno],
        [AC_MSG_ERROR([--with-libdeflate given but libdeflate not found (apt-get install libdeflate-dev)])])
])
AS_IF([test "x$have_libdeflate" = xyes],
      [AC_DEFINE([HAVE_LIBDEFLATE], [1], [Define if libdeflate is available])
       idx_why="IDX dataset reader, whole files inflated by libdeflate"],
      [idx_why="IDX dataset reader; without libdeflate (apt-get install libdeflate-dev) zlib alone inflates"])
AC_ARG_WITH([images],
  [AS_HELP_STRING([--with-images], [build the imagefolder dataset reader (PNG and JPEG through libpng and libjpeg-turbo; default: if found)])],
  [], [with_images=check])
have_images=no
images_why="disabled by --without-images"
AS_IF([test "x$with_images" != xno], [
  PKG_CHECK_MODULES([PNG], [libpng], [have_png=yes], [have_png=no])
  have_jpeg=no
  AC_CHECK_HEADER([jpeglib.h], [
    AC_CHECK_LIB([jpeg], [jpeg_read_header], [have_jpeg=yes])
  ])
  AS_IF([test "x$have_png$have_jpeg" = xyesyes], [have_images=yes],
        [test "x$have_png" = xno],
        [images_why="libpng not found (apt-get install libpng-dev)"],
        [images_why="libjpeg not found (apt-get install libjpeg62-turbo-dev)"])
  AS_IF([test "x$with_images$have_images" = xyesno],
        [AC_MSG_ERROR([--with-images given but $images_why])])
])
AS_IF([test "x$have_images" = xyes], [
  images_why="PNG (libpng) and JPEG (libjpeg)"
  AC_SUBST([JPEG_LIBS], [-ljpeg])
])
AM_CONDITIONAL([TDM_BUILD_IMAGEFOLDER], [test "x$have_images" = xyes])
TDM_SUMMARY_ADD([  cifar          yes (CIFAR-10/100 binary dataset reader)])
TDM_SUMMARY_ADD([  imagefolder    $have_images ($images_why)])
