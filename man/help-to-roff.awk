# man/help-to-roff.awk - turns one `tandem ... --help` text into man(7) roff.
#
# The help texts follow a few layouts, and this reads them rather than a
# second copy of the options kept by hand (which would drift):
#   "Usage: X" or "Usage:" + indented lines   the synopsis
#   "Heading:" alone on a line                 a section (.SH, or .SS with part=1)
#   "  TERM  text" (two spaces or more)        a tagged paragraph (.TP), with
#                                              deeper-indented lines continuing it
#   other indented lines                       an example, kept as typed (.nf)
#   anything else                              running text
# Variables (awk -v): part=1 when the text is a subcommand's, appended to its
# command's page (its "Usage:" starts a section, its headings are .SS);
# title: that section's title; from/to: a string replaced everywhere (the
# build tree's plugin directory, which the installed page names by its
# installed path).

# Escape for roff: backslashes first, then minus signs (options must stay
# ASCII hyphens when copied from the rendered page).
function esc(s) {
    gsub(/\\/, "\\e", s)
    gsub(/-/, "\\-", s)
    return s
}

# A text line: a line starting with . or ' would be read as a request.
function text(s) {
    s = esc(s)
    if (s ~ /^[.']/) {
        s = "\\&" s
    }
    return s
}

# The term of a tagged paragraph: options bold, their arguments italic.
function term(s,    n, words, i, w, out, eq, name, arg, tail) {
    n = split(s, words, / /)
    out = ""
    for (i = 1; i <= n; i++) {
        w = words[i]
        tail = ""
        if (w ~ /,$/) {
            tail = ","
            w = substr(w, 1, length(w) - 1)
        }
        if (w ~ /^-/) {
            eq = index(w, "=")
            if (eq > 0) {
                name = substr(w, 1, eq - 1)
                arg = substr(w, eq + 1)
                w = "\\fB" esc(name) "\\fR=\\fI" esc(arg) "\\fR"
            } else {
                w = "\\fB" esc(w) "\\fR"
            }
        } else if (w ~ /^[A-Z][A-Z0-9_.]*$/) {
            w = "\\fI" esc(w) "\\fR"
        } else {
            w = "\\fB" esc(w) "\\fR"
        }
        out = out (i > 1 ? " " : "") w tail
    }
    return out
}

function indent_of(s) {
    match(s, /^ */)
    return RLENGTH
}

function end_pre() {
    if (in_pre) {
        print ".fi"
        print ".RE"
        in_pre = 0
    }
}

# A section heading; running text after the synopsis goes under DESCRIPTION.
function heading(name) {
    end_pre()
    print (part ? ".SS " : ".SH ") "\"" name "\""
    in_item = 0
    need_para = 0
    opened = 1
}

function ensure_section() {
    if (!opened) {
        heading(part ? "Description" : "DESCRIPTION")
    }
}

BEGIN {
    in_synopsis = 0   # reading the indented lines after a bare "Usage:"
    in_item = 0       # the last output was a .TP paragraph
    item_indent = 0   # where a .TP paragraph's continuation lines start
    in_pre = 0        # inside .nf
    need_para = 0     # a blank line was read: a new paragraph
    opened = 0        # a section is open for running text
    in_commands = 0   # under "Commands:" or "Subcommands:"
}

{
    line = $0
    if (from != "") {
        while ((at = index(line, from)) > 0) {
            line = substr(line, 1, at - 1) to substr(line, at + length(from))
        }
    }
    # GLib writes "[OPTION…]" as "[OPTION?]" in an ASCII locale.
    gsub(/\[OPTION(\?|…)\]/, "[OPTION...]", line)
    sub(/ +$/, "", line)
}

# The synopsis: "Usage: tandem run ..." or "Usage:" and indented lines,
# GLib's "PROG [OPTION...] ARGS - summary" losing its summary (NAME says it).
line ~ /^Usage:/ {
    end_pre()
    if (part) {
        print ".SH \"" title "\""
    } else {
        print ".SH SYNOPSIS"
    }
    rest = line
    sub(/^Usage: */, "", rest)
    in_synopsis = 1
    opened = 0
    if (rest != "") {
        synopsis_line(rest)
    }
    next
}

in_synopsis && line ~ /^ +[^ ]/ {
    s = line
    sub(/^ +/, "", s)
    synopsis_line(s)
    next
}

{
    in_synopsis = 0
}

line == "" {
    need_para = 1
    next
}

line ~ /^[A-Z][A-Za-z ]*:$/ {
    name = substr(line, 1, length(line) - 1)
    in_commands = (name ~ /[Cc]ommands$/)
    if (name == "Application Options") {
        name = "Options"
    }
    heading(part ? name : toupper(name))
    next
}

# A continuation of the tagged paragraph above: indented to its text, one
# space between words.
in_item && !need_para && indent_of(line) >= item_indent && line !~ /[^ ]  +[^ ]/ {
    s = line
    sub(/^ +/, "", s)
    print text(s)
    next
}

# "  TERM  text": a tagged paragraph; under "Commands:" a name longer than
# its column is followed by one space only.
line ~ /^ +[^ ].*[^ ]  +[^ ]/ || (in_commands && line ~ /^ +[a-z][a-z-]* +[^ ]/) {
    ensure_section()
    end_pre()
    s = line
    sub(/^ +/, "", s)
    match(s, in_commands ? " +" : "  +")
    item_term = substr(s, 1, RSTART - 1)
    item_text = substr(s, RSTART + RLENGTH)
    item_indent = indent_of(line) + RSTART - 1 + RLENGTH
    print ".TP"
    print term(item_term)
    print text(item_text)
    in_item = 1
    need_para = 0
    next
}

# Other indented lines: an example, kept as typed.
line ~ /^ / {
    ensure_section()
    if (!in_pre) {
        if (need_para || in_item) {
            print ".PP"
        }
        print ".RS 4"
        print ".nf"
        in_pre = 1
        pre_indent = indent_of(line)
    }
    s = line
    n = indent_of(s) - pre_indent
    sub(/^ +/, "", s)
    pad = ""
    while (length(pad) < n) {
        pad = pad " "
    }
    print pad text(s)
    in_item = 0
    need_para = 0
    next
}

# Running text.
{
    ensure_section()
    end_pre()
    if (need_para || in_item) {
        print ".PP"
    }
    print text(line)
    in_item = 0
    need_para = 0
}

END {
    end_pre()
}

function synopsis_line(s) {
    sub(/ - [a-z].*$/, "", s)
    print text(s)
    print ".br"
}
