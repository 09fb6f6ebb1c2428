#!/bin/sh
# SPDX-License-Identifier: MIT
# docs/reference/check-coverage.sh - the last step of `make doc`: fails
# unless every public symbol is documented whole.
#
#   check-coverage.sh DOC_DIR      (docs/api of a build directory)
#
# gtk-doc's DOC_DIR/tandem-undocumented.txt opens with four lines of
# counts ("100% symbol docs coverage.", "N symbols documented.", "N
# symbols incomplete.", "N not documented.") and then lists each symbol
# without a comment, or whose comment misses a parameter, field or value
# ("TdmTensor (<items>)"), and each section without its description
# ("ops:long_description"). Any such line, or anything gtkdoc-mkdb wrote
# to DOC_DIR/mkdb.log (a parameter documented that does not exist, a
# field left out, a declaration it cannot parse) or gtkdoc-mkhtml to
# DOC_DIR/mkhtml.log (a link with two targets, an annotation without its
# glossary), fails the check and prints them.
set -e
dir=$1
undoc=$dir/tandem-undocumented.txt
[ -f "$undoc" ] || { echo "make doc: $undoc is missing" >&2; exit 1; }
status=0
missing=$(sed '1,4d; /^[[:space:]]*$/d' "$undoc")
if ! head -n 1 "$undoc" | grep -q '^100% ' || [ -n "$missing" ]; then
    echo "make doc: FAIL: $(head -n 1 "$undoc") Without a comment, or incomplete:" >&2
    printf '%s\n' "$missing" | sed 's/^/make doc:   /' >&2
    status=1
fi
# Both logs are empty when gtk-doc has nothing to say.
for log in "$dir/mkdb.log" "$dir/mkhtml.log"; do
    if [ -f "$log" ] && grep -q '[^[:space:]]' "$log"; then
        echo "make doc: FAIL: gtk-doc warned ($log):" >&2
        grep '[^[:space:]]' "$log" | sort | uniq -c | sed 's/^/make doc: /' >&2
        status=1
    fi
done
exit $status
