#!/bin/sh
# SPDX-License-Identifier: MIT
# docs/reference/scan-extra.sh - what gtkdoc-scan does not see in the public
# headers, added before gtkdoc-mkdb runs (docs/reference/reference.mk).
#
#   scan-extra.sh HEADER_DIR "CC"    (run in the output directory of
#                                     gtkdoc-scan, after it)
#
# Writes tandem-sections.txt from gtkdoc-scan's tandem-decl-list.txt and
# fills tandem-overrides.txt, which gtkdoc-mkdb reads over tandem-decl.txt:
#  - the function types of backend.h (`typedef gboolean TdmGemmFn(...)`,
#    not pointers, which gtkdoc-scan skips) become user functions of their
#    header's section, so that their parameters are documented and checked;
#  - TdmTrainConfig's fields come from an X-macro, which gtkdoc-scan cannot
#    read: the struct is expanded by the C preprocessor (from the header's
#    own macro lines, without its includes);
#  - a type declared ahead in types.h (`typedef struct _TdmTensor
#    TdmTensor;`) and defined in another header is listed in that header's
#    section only, not in both (gtk-doc would document it twice), and the
#    title gtkdoc-scan guesses for types.h from those declarations
#    (TdmStrategy, strategy.h's too) is dropped: two pages had one id.
set -e
hdir=$1
cc=${2:-cc}
module=tandem

# The function types: "NAME\tRETURNS\tARGS\tHEADER", one a line.
for h in "$hdir"/*.h; do
    awk -v header="$(basename "$h" .h)" '
        /^typedef [A-Za-z_][A-Za-z0-9_ ]*[ *][A-Za-z_][A-Za-z0-9_]*\(/ { decl = ""; on = 1 }
        on { decl = decl " " $0 }
        on && /\);/ {
            on = 0
            gsub(/[ \t]+/, " ", decl)
            sub(/^ typedef /, "", decl)
            open = index(decl, "(")
            head = substr(decl, 1, open - 1)
            args = substr(decl, open + 1)
            sub(/\); *$/, "", args)
            match(head, /[A-Za-z_][A-Za-z0-9_]*$/)
            name = substr(head, RSTART)
            ret = substr(head, 1, RSTART - 1)
            sub(/ +$/, "", ret)
            gsub(/ \*/, "*", ret)
            sub(/\*$/, " *", ret)
            printf "%s\t%s\t%s\t%s\n", name, ret, args, header
        }' "$h"
done >fn-types.tmp

{
    awk -F '\t' '{
        printf "<USER_FUNCTION>\n<NAME>%s</NAME>\n<RETURNS>%s</RETURNS>\n%s\n</USER_FUNCTION>\n",
            $1, $2, $3
    }' fn-types.tmp
    printf '<STRUCT>\n<NAME>TdmTrainConfig</NAME>\n'
    sed -n '/^#define TDM_TRAIN_CONFIG_KEYS/,/^} TdmTrainConfig;/p' "$hdir/trainer.h" |
        $cc -E -P -x c - | tr '\n' ' ' | tr -s ' ' |
        sed 's/{ */{\n    /; s/; */;\n    /g; s/ \* / */g; s/    } TdmTrainConfig;/} TdmTrainConfig;/' | awk NF
    printf '</STRUCT>\n'
} >$module-overrides.txt
grep -q '^    char \*model;' $module-overrides.txt || {
    echo "scan-extra.sh: TdmTrainConfig did not expand (trainer.h's macros changed?)" >&2
    exit 1
}

# Pass 1 records which symbols a header other than types.h lists; pass 2
# copies the list without those in types and with the function types added.
awk -F '\t' '
    FILENAME == "fn-types.tmp" { extra[$4] = extra[$4] $1 "\n"; next }
    pass == 1 {
        if (/^<FILE>/) { file = $0; gsub(/<\/?FILE>/, "", file) }
        else if (!/^</ && !/^$/ && file != "types") { elsewhere[$0] = 1 }
        next
    }
    /^<FILE>/ { file = $0; gsub(/<\/?FILE>/, "", file) }
    /^<\/SECTION>/ && file in extra { printf "%s", extra[file] }
    file == "types" && (/^<TITLE>/ || (!/^</ && $0 in elsewhere)) { next }
    { print }
' fn-types.tmp pass=1 $module-decl-list.txt pass=2 $module-decl-list.txt >$module-sections.txt
rm -f fn-types.tmp
