#!/bin/sh
# SPDX-License-Identifier: MIT
# man/make-pages.sh - writes the man pages of `tandem` and of each of its
# commands from their --help texts, so that the pages cannot drift from the
# program: tandem.1 from `tandem --help`, and tandem-CMD.1 for every command
# that `tandem --help` lists (a new command gets its page with no change
# here); a command with "Subcommands:" gets theirs appended to its page.
#
#   make-pages.sh AWK TANDEM OUTDIR VERSION BUILD_PLUGINS_DIR PLUGINS_DIR
#
# TANDEM is the just-built program; BUILD_PLUGINS_DIR, which an uninstalled
# tandem names in its help, is written as PLUGINS_DIR, where the installed
# one looks. The date is SOURCE_DATE_EPOCH's when set (reproducible builds).
set -e
[ $# -eq 6 ] || {
    echo "usage: make-pages.sh AWK TANDEM OUTDIR VERSION BUILD_PLUGINS_DIR PLUGINS_DIR" >&2
    exit 2
}
awk=$1 tandem=$2 out=$3 version=$4 from=$5 to=$6
here=$(dirname "$0")
conv="$here/help-to-roff.awk"
# The help texts are ASCII in the C locale.
LC_ALL=C
export LC_ALL

if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
    date=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%d)
else
    date=$(date -u +%Y-%m-%d)
fi

# help CMD...: the help text of `tandem CMD... --help`, which must succeed.
help() {
    if ! "$tandem" "$@" --help >"$out/help.txt" 2>&1; then
        echo "make-pages.sh: '$tandem $* --help' failed:" >&2
        cat "$out/help.txt" >&2
        exit 1
    fi
}

# roff [awk -v ...]: the help text as roff.
roff() {
    "$awk" -v from="$from" -v to="$to" "$@" -f "$conv" "$out/help.txt"
}

roff_escape() {
    printf '%s\n' "$1" | sed -e 's/\\/\\e/g' -e 's/-/\\-/g'
}

# header PAGE SUMMARY: .TH and NAME.
header() {
    upper=$(echo "$1" | tr '[:lower:]' '[:upper:]')
    printf '.TH %s 1 "%s" "tandem %s" "User Commands"\n' "$upper" "$date" "$version"
    printf '.nh\n.ad l\n.SH NAME\n%s \\- %s\n' "$(roff_escape "$1")" "$(roff_escape "$2")"
}

# section_items TITLE: the first words of the indented lines under TITLE:
# in the help text (the names of "Commands:" or "Subcommands:").
section_items() {
    sed -n "/^$1:\$/,/^\$/{/^  [a-z]/p}" "$out/help.txt" | awk '{ print $1 }'
}
# summary NAME: the text beside NAME under Commands: in `tandem --help`.
summary() {
    sed -n "/^Commands:\$/,/^\$/{s/^  $1  *//p}" "$out/top.txt"
}

mkdir -p "$out"
rm -f "$out"/*.1
help
cp "$out/help.txt" "$out/top.txt"
commands=$(section_items Commands)
[ -n "$commands" ] || { echo "make-pages.sh: no commands in '$tandem --help'" >&2; exit 1; }

{
    header tandem "train neural networks: a small core with plugins"
    roff
    printf '.SH "SEE ALSO"\n'
    sep=""
    for c in $commands; do
        printf '%s.BR tandem\\-%s (1)' "$sep" "$c"
        sep=",
"
    done
    printf '\n'
} >"$out/tandem.1"

for c in $commands; do
    s=$(summary "$c")
    [ -n "$s" ] || { echo "make-pages.sh: no summary for '$c' in '$tandem --help'" >&2; exit 1; }
    help "$c"
    subs=$(section_items Subcommands)
    {
        header "tandem-$c" "$s"
        roff
        for sc in $subs; do
            help "$c" "$sc"
            roff -v part=1 -v title="TANDEM $(echo "$c $sc" | tr '[:lower:]' '[:upper:]')"
        done
        printf '.SH "SEE ALSO"\n.BR tandem (1)\n'
    } >"$out/tandem-$c.1"
done
rm -f "$out/help.txt" "$out/top.txt"
