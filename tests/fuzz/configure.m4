dnl SPDX-License-Identifier: MIT
dnl tests/fuzz: `make fuzz` builds the libFuzzer targets with clang (Debian:
dnl clang and libclang-rt-dev, which holds libFuzzer), when it can link one.
AC_ARG_VAR([FUZZ_CC], [C compiler with libFuzzer for `make fuzz` (default clang)])
AS_IF([test -z "$FUZZ_CC"], [FUZZ_CC=clang])
have_fuzz=no
fuzz_why="$FUZZ_CC not found; apt-get install clang libclang-rt-dev"
AS_IF([command -v "$FUZZ_CC" >/dev/null 2>&1], [
  AC_MSG_CHECKING([whether $FUZZ_CC links a libFuzzer target])
  cat >conftest-fuzz.c <<'_TDM_EOF'
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return size > 0 && *data == 1; }
_TDM_EOF
  AS_IF([$FUZZ_CC -fsanitize=fuzzer,address conftest-fuzz.c -o conftest-fuzz >&AS_MESSAGE_LOG_FD 2>&1],
    [have_fuzz=yes; fuzz_why="make fuzz, make fuzz-run: tests/fuzz/ with $FUZZ_CC"],
    [fuzz_why="$FUZZ_CC cannot link -fsanitize=fuzzer; apt-get install libclang-rt-dev"])
  rm -f conftest-fuzz.c conftest-fuzz
  AC_MSG_RESULT([$have_fuzz])
])
AC_SUBST([TDM_HAVE_FUZZ], [$have_fuzz])
AC_SUBST([TDM_FUZZ_WHY], [$fuzz_why])
