#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tests/abi/list-fields.py - every field of every public struct (a Tdm
name with a body in the headers), one "Type field" line each (and "Type -"
for the struct itself), for `make abi-update`, which turns the list into
tests/abi/layout.txt by compiling offsetof() and sizeof() of each.

It reads <tandem/tandem.h> as the preprocessor left it (on standard
input), so that fields written by a macro (TdmTrainConfig's) are seen as
the compiler sees them. Line markers are dropped, then each `struct _TdmX { ... };` and `typedef struct { ... } TdmX;` is
split into declarations at its top-level semicolons. A declaration gives
its name from a function pointer `(*name)`, else the identifiers before
each comma or array bound. Nested struct or union bodies and bit-fields
are refused: offsetof cannot name them the same way, and the public
headers have none.

Usage: cc -E $(GLIB_CFLAGS) -Iinclude - <<<'#include <tandem/tandem.h>' |
       list-fields.py
"""
import re
import sys


def strip(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("#"))


def body_end(text, start):
    """Index of the brace closing the one at text[start]."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    raise SystemExit("unbalanced braces")


def field_names(decl, where):
    decl = " ".join(decl.split())
    if "{" in decl:
        raise SystemExit(f"{where}: nested struct or union: {decl}")
    m = re.search(r"\(\s*\*\s*(\w+)\s*\)", decl)
    if m:
        return [m.group(1)]
    if re.search(r":\s*\d+\s*$", decl):
        raise SystemExit(f"{where}: bit-field: {decl}")
    decl = re.sub(r"\[[^\]]*\]", "", decl)
    names = []
    for i, part in enumerate(decl.split(",")):
        ids = re.findall(r"[A-Za-z_]\w*", part)
        if not ids:
            raise SystemExit(f"{where}: cannot read a field name in: {decl}")
        names.append(ids[-1])
    return names


def structs(text):
    pattern = re.compile(r"\b(typedef\s+)?struct\s*(\w+)?\s*\{")
    pos = 0
    while True:
        m = pattern.search(text, pos)
        if m is None:
            return
        end = body_end(text, m.end() - 1)
        body = text[m.end():end]
        if m.group(1):
            tail = re.match(r"\s*(\w+)\s*;", text[end + 1:])
            name = tail.group(1) if tail else None
        else:
            name = m.group(2).lstrip("_") if m.group(2) else None
        pos = end + 1
        if name is None or not name.startswith("Tdm"):
            continue
        decls = [d for d in body.split(";") if d.strip()]
        yield name, [f for d in decls for f in field_names(d, name)]


def main():
    for name, fields in structs(strip(sys.stdin.read())):
        print(f"{name} -")
        for field in fields:
            print(f"{name} {field}")


main()
