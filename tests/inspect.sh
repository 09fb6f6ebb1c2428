#!/bin/sh
# tests/inspect.sh - `tandem inspect` and the global --plugin option, with
# the fixture plugins (tests/fixtures/) added to the plugin path.
. "$TDM_TOP_SRCDIR/tests/tap.sh"

fixtures="$TDM_TOP_BUILDDIR/tests/fixtures/.libs"
[ -x "$TANDEM" ] || skip_all "tandem is not built"
[ -f "$fixtures/libtdm-fixture-good.so" ] || skip_all "fixture plugins are not built"
export TDM_PLUGIN_PATH="$fixtures"
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

# run CMD...: stdout to $out, stderr to $err, exit status in $rc
run() { "$@" >"$out" 2>"$err"; rc=$?; }
# has NAME PATTERN FILE: a TAP result for a fixed-string match
has() {
    if grep -qF -- "$2" "$3"; then ok "$1"; else fail "$1" "'$2' not in: $(cat "$3")"; fi
}
hasnt() {
    if grep -qF -- "$2" "$3"; then fail "$1" "'$2' unexpectedly in: $(cat "$3")"; else ok "$1"; fi
}
status() {
    if [ "$rc" -eq "$2" ]; then ok "$1"; else fail "$1" "exit $rc, expected $2; stderr: $(cat "$err")"; fi
}

run "$TANDEM" inspect
status "inspect exits 0" 0
has "lists the built-in plugin" "Plugin: core" "$out"
has "built-in modules are listed" "module     conv2d" "$out"
has "built-in optimizers are listed" "optimizer  adamw" "$out"
has "lists the good fixture" "Plugin: fixture-good" "$out"
has "shows the plugin file" "file:        $fixtures/libtdm-fixture-good.so" "$out"
has "shows the plugin version" "version:     1.2.3" "$out"
has "shows the licence" "licence:     MIT" "$out"
has "a feature with its priority" "dataset    fixture-data           priority  50  available" "$out"
has "an unavailable feature with its reason" \
    "fixture-broken         priority  60  unavailable: fixture hardware is absent" "$out"
has "wrong ABI is reported" "libtdm-fixture-abi.so: ABI version 99, expected 1" "$out"
has "name mismatch is reported" \
    "libtdm-fixture-mismatch.so: name 'fixture-other' does not match file name 'libtdm-fixture-mismatch.so'" "$out"
has "missing symbol is reported" \
    "libtdm-fixture-nosym.so: missing symbol tdm_plugin_fixture_nosym_get_desc" "$out"
has "failing init is reported" \
    "libtdm-fixture-initfail.so: init failed: fixture init fails on purpose" "$out"
has "duplicate feature is reported" \
    "libtdm-fixture-twin.so: init failed: feature 'fixture-data' (dataset) already registered by plugin 'fixture-good'" "$out"
hasnt "rolled-back feature is not listed" "fixture-rollback" "$out"
hasnt "failed plugins are not listed as plugins" "Plugin: fixture-twin" "$out"

run "$TANDEM" inspect fixture-data
status "inspect FEATURE exits 0" 0
has "feature header" "Feature: dataset/fixture-data" "$out"
has "feature plugin" "plugin:      fixture-good ($fixtures/libtdm-fixture-good.so)" "$out"
has "feature status" "status:      available" "$out"
has "feature description" "description: in-memory fixture samples" "$out"
has "required parameter" "path (string, required): where the samples live" "$out"
has "parameter with a default" "repeat (int, default 1): how many times each sample is repeated" "$out"

run "$TANDEM" inspect dataset/fixture-broken
status "inspect kind/name exits 0" 0
has "unavailable feature details" "status:      unavailable: fixture hardware is absent" "$out"
has "feature without parameters" "parameters:  none" "$out"

run "$TANDEM" inspect sgd
has "built-in optimizer parameters" "lr (float, default 0.01): learning rate" "$out"

run "$TANDEM" inspect fixture-good
status "inspect PLUGIN exits 0" 0
has "plugin details" "Plugin: fixture-good" "$out"
has "plugin features" "strategy   fixture-strategy       priority  -1  available" "$out"

run "$TANDEM" inspect fixture-abi
status "inspect a failed plugin exits 0" 0
has "failed plugin shows its reason" "ABI version 99, expected 1" "$out"

run "$TANDEM" inspect no-such-thing
status "unknown name exits 1" 1
has "unknown name is named" "no plugin or feature named 'no-such-thing'" "$err"

run "$TANDEM" inspect backend/no-such-backend
status "unknown kind/name exits 1" 1
has "unknown backend lists the known ones" "no backend named 'no-such-backend' (known:" "$err"

run "$TANDEM" inspect bogus/thing
status "unknown kind exits 1" 1
has "unknown kind is named" "unknown kind 'bogus'" "$err"

run "$TANDEM" inspect a b
status "two names is a usage error" 2

run "$TANDEM" no-such-command
status "unknown command exits 2" 2
has "unknown command is named" "unknown command 'no-such-command'" "$err"
has "usage on stderr" "Usage: tandem" "$err"

run "$TANDEM"
status "no command exits 2" 2

run "$TANDEM" --version
status "--version exits 0" 0
has "--version prints the version" "tandem " "$out"

run "$TANDEM" --help
status "--help exits 0" 0
has "--help lists inspect" "inspect" "$out"

run "$TANDEM" --bogus inspect
status "unknown global option exits 2" 2

# An explicit plugin that fails to load is an error, with its reason.
unset TDM_PLUGIN_PATH
run "$TANDEM" --plugin "$fixtures/libtdm-fixture-abi.so" inspect
status "--plugin with a bad file exits 1" 1
has "--plugin error names the file and reason" \
    "libtdm-fixture-abi.so: ABI version 99, expected 1" "$err"
run "$TANDEM" --plugin "$fixtures/libtdm-fixture-mismatch.so" inspect
status "--plugin with a misnamed plugin exits 1" 1
has "--plugin mismatch reason" "does not match file name" "$err"
run "$TANDEM" --plugin /nonexistent/libtdm-nothing.so inspect
status "--plugin with a missing file exits 1" 1
has "--plugin missing file reason" "/nonexistent/libtdm-nothing.so: cannot open" "$err"
run "$TANDEM" --plugin "$fixtures/libtdm-fixture-good.so" inspect fixture-data
status "--plugin with a good file exits 0" 0
has "--plugin loads the file" "plugin:      fixture-good ($fixtures/libtdm-fixture-good.so)" "$out"

done_testing
