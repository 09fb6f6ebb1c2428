#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/man-pages.sh - the man pages that the build writes from --help
# (man/make-pages.sh): one for `tandem` and one for each command that
# `tandem --help` lists, each rendering without a warning, each naming every
# option of its command's --help (and its subcommands'), the installed plugin
# directory rather than the build tree's, and `make install` putting them in
# $mandir/man1.
. "$TDM_TOP_SRCDIR/tests/tap.sh"

pages=$TDM_TOP_BUILDDIR/man/pages
[ -x "$TANDEM" ] || skip_all "tandem is not built"
[ -f "$TDM_TOP_BUILDDIR/man/pages.stamp" ] || skip_all "the man pages are not built (make all)"

# render PAGE: plain text on stdout, warnings on stderr, with the first
# renderer found (man-db's man, else groff, else mandoc).
if command -v man >/dev/null 2>&1; then
    render() { MANWIDTH=80 LC_ALL=C man --warnings -l "$1" | col -b; }
elif command -v groff >/dev/null 2>&1; then
    render() { LC_ALL=C groff -man -ww -Tascii -P-cbou "$1"; }
elif command -v mandoc >/dev/null 2>&1; then
    render() { mandoc -Tlint -W warning "$1" >&2; mandoc -Tascii "$1" | col -b; }
else
    skip_all "no man, groff or mandoc to render the pages"
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-man.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# check_page PAGE HELP...: PAGE exists, renders without warnings and holds
# every long option of the help texts (files) HELP...
check_page() {
    page=$pages/$1; shift
    if [ ! -f "$page" ]; then
        fail "$(basename "$page") exists" "not in $pages"
        return
    fi
    ok "$(basename "$page") exists"
    render "$page" >"$tmp/text" 2>"$tmp/warn"
    if [ -s "$tmp/warn" ]; then
        fail "$(basename "$page") renders without warnings" "$(cat "$tmp/warn")"
    elif [ "$(wc -l <"$tmp/text")" -lt 8 ]; then
        fail "$(basename "$page") renders without warnings" "only: $(cat "$tmp/text")"
    else
        ok "$(basename "$page") renders without warnings"
    fi
    missing=
    for opt in $(cat "$@" | grep -o -- '--[a-z][a-z-]*' | sort -u); do
        grep -qF -- "$opt" "$tmp/text" || missing="$missing $opt"
    done
    if [ -z "$missing" ]; then
        ok "$(basename "$page") names every option of its --help"
    else
        fail "$(basename "$page") names every option of its --help" "missing:$missing"
    fi
}

"$TANDEM" --help >"$tmp/top.txt" || fail "tandem --help exits 0"
commands=$(sed -n '/^Commands:$/,/^$/{/^  [a-z]/p}' "$tmp/top.txt" | awk '{ print $1 }')
[ -n "$commands" ] || { echo "Bail out! no Commands: in tandem --help"; exit 1; }

check_page tandem.1 "$tmp/top.txt"
render "$pages/tandem.1" >"$tmp/text" 2>/dev/null
if grep -qF -- "$TDM_TOP_BUILDDIR" "$tmp/text"; then
    fail "tandem.1 names the installed plugin directory" "it names the build tree"
elif grep -qF "/tandem-1/plugins" "$tmp/text"; then
    ok "tandem.1 names the installed plugin directory"
else
    fail "tandem.1 names the installed plugin directory" "no .../tandem-1/plugins in it"
fi
for c in $commands; do
    "$TANDEM" "$c" --help >"$tmp/$c.txt" 2>&1
    helps="$tmp/$c.txt"
    for sc in $(sed -n '/^Subcommands:$/,/^$/{/^  [a-z]/p}' "$tmp/$c.txt" | awk '{ print $1 }'); do
        "$TANDEM" "$c" "$sc" --help >"$tmp/$c-$sc.txt" 2>&1
        helps="$helps $tmp/$c-$sc.txt"
    done
    check_page "tandem-$c.1" $helps
    if grep -q "^\.SH NAME" "$pages/tandem-$c.1" 2>/dev/null &&
        grep -A1 "^\.SH NAME" "$pages/tandem-$c.1" |
            grep -qF "tandem\\-$(printf '%s' "$c" | sed 's/-/\\-/g') \\- "; then
        ok "tandem-$c.1 has a NAME line with its summary"
    else
        fail "tandem-$c.1 has a NAME line with its summary"
    fi
done

# `make install` puts them in $mandir/man1 (only the pages' part of it).
if make -C "$TDM_TOP_BUILDDIR" install-man-pages DESTDIR="$tmp/stage" >"$tmp/install.log" 2>&1; then
    n=$(find "$tmp/stage" -path '*/man1/tandem*.1' | wc -l)
    want=$(($(echo $commands | wc -w) + 1))
    if [ "$n" -eq "$want" ]; then
        ok "make install puts the $want pages in man1"
    else
        fail "make install puts the $want pages in man1" "$(find "$tmp/stage" -type f)"
    fi
else
    fail "make install puts the pages in man1" "$(tail -n 20 "$tmp/install.log")"
fi
done_testing
