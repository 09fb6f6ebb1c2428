#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/abi-lists.sh - libtandem-1.so exports exactly the symbols of
# tests/abi/symbols.txt, each declared in a public header, and
# tests/abi/layout.txt records every field of every public struct (the
# offsets themselves are checked by tests/test-abi-layout), and
# debian/libtandem-1-0.symbols names the same symbols. An addition or
# removal is shown as a diff; if it is intended, `make abi-update` rewrites
# the three lists (docs/abi.md says what else a change of the API asks for).
. "$TDM_TOP_SRCDIR/tests/tap.sh"

lib=$TDM_TOP_BUILDDIR/core/.libs/libtandem-1.so
list=$TDM_TOP_SRCDIR/tests/abi/symbols.txt
layout=$TDM_TOP_SRCDIR/tests/abi/layout.txt
command -v nm >/dev/null 2>&1 || skip_all "no nm"
[ -f "$lib" ] || skip_all "no $lib"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-abi.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
update="if intended: make abi-update, then review git diff tests/abi/ (docs/abi.md)"

nm -D --defined-only "$lib" | awk 'NF == 3 { print $3 }' | LC_ALL=C sort >"$tmp/exported"
grep -v '^#' "$list" | LC_ALL=C sort >"$tmp/listed"
added=$(LC_ALL=C comm -23 "$tmp/exported" "$tmp/listed")
removed=$(LC_ALL=C comm -13 "$tmp/exported" "$tmp/listed")
if [ -z "$added$removed" ]; then
    ok "libtandem-1.so exports exactly tests/abi/symbols.txt ($(wc -l <"$tmp/exported") symbols)"
else
    fail "libtandem-1.so exports exactly tests/abi/symbols.txt" \
        "$(printf '%s\n' "$added" | sed -n '/./s/.*/+ & (exported, not in the list)/p'
           printf '%s\n' "$removed" | sed -n '/./s/.*/- & (listed, no longer exported)/p'
           echo "$update")"
fi

# The Debian package's symbols file names the same symbols, so that
# dpkg-gensymbols (which fails the package build on a difference) and this
# test cannot disagree. A tarball has no debian/.
debsym=$TDM_TOP_SRCDIR/debian/libtandem-1-0.symbols
if [ ! -f "$debsym" ]; then
    skip "debian/libtandem-1-0.symbols names exactly tests/abi/symbols.txt" "no debian/ (a tarball)"
else
    grep '^ ' "$debsym" >"$tmp/debian-lines"
    sed -n 's/^ \([A-Za-z_][A-Za-z0-9_]*\)@Base [0-9][0-9A-Za-z.+~]*$/\1/p' "$tmp/debian-lines" |
        LC_ALL=C sort >"$tmp/debian"
    malformed=$(grep -v '^ [A-Za-z_][A-Za-z0-9_]*@Base [0-9][0-9A-Za-z.+~]*$' "$tmp/debian-lines")
    if [ -z "$malformed" ] && LC_ALL=C comm -3 "$tmp/listed" "$tmp/debian" >"$tmp/debian.diff" &&
        [ ! -s "$tmp/debian.diff" ]; then
        ok "debian/libtandem-1-0.symbols names exactly tests/abi/symbols.txt"
    else
        fail "debian/libtandem-1-0.symbols names exactly tests/abi/symbols.txt" \
            "$(printf '%s\n' "$malformed" | sed -n '/./s/.*/not \" SYMBOL@Base VERSION\": &/p'
               LC_ALL=C comm -23 "$tmp/listed" "$tmp/debian" | sed 's/.*/- & (in symbols.txt only)/'
               LC_ALL=C comm -13 "$tmp/listed" "$tmp/debian" | sed 's/.*/+ & (in the symbols file only)/'
               echo "make abi-update rewrites both (docs/abi.md)")"
    fi
fi

# Every exported symbol is public API: named in an installed header.
grep -ohw 'tdm_[A-Za-z0-9_]*' "$TDM_TOP_SRCDIR"/include/tandem/*.h | LC_ALL=C sort -u >"$tmp/declared"
undeclared=$(LC_ALL=C comm -23 "$tmp/exported" "$tmp/declared")
if [ -z "$undeclared" ]; then
    ok "every exported symbol is declared in include/tandem/"
else
    fail "every exported symbol is declared in include/tandem/" \
        "exported but in no public header (make it static or hidden, or declare it): $undeclared"
fi

# The layout record names every struct and field the headers have, as the
# preprocessor sees them (tests/abi/list-fields.py).
PYTHON=${TORCH_PYTHON:-python3}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
if ! command -v "$PYTHON" >/dev/null 2>&1 || ! command -v pkg-config >/dev/null 2>&1; then
    skip "tests/abi/layout.txt names every public struct and field" "no python3 or pkg-config"
elif ! echo '#include <tandem/tandem.h>' |
    ${CC:-cc} -E -I"$TDM_TOP_SRCDIR/include" -I"$TDM_TOP_BUILDDIR" \
        $(pkg-config --cflags glib-2.0 gmodule-2.0) - 2>"$tmp/cpp.err" |
    "$PYTHON" "$TDM_TOP_SRCDIR/tests/abi/list-fields.py" >"$tmp/fields" 2>>"$tmp/cpp.err"; then
    fail "tests/abi/layout.txt names every public struct and field" "$(cat "$tmp/cpp.err")"
else
    grep -v '^#' "$layout" | awk 'NF == 3 { print $1, $2 }' >"$tmp/recorded"
    if diff "$tmp/recorded" "$tmp/fields" >"$tmp/fields.diff"; then
        ok "tests/abi/layout.txt names every public struct and field ($(grep -c ' -$' "$tmp/fields") structs)"
    else
        fail "tests/abi/layout.txt names every public struct and field" \
            "$(sed -n 's/^> /+ /p; s/^< /- /p' "$tmp/fields.diff"; echo "$update")"
    fi
fi

done_testing
