#!/bin/sh
# SPDX-License-Identifier: MIT
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
# has_line NAME START END FILE: one line holds both fixed strings (for
# reasons whose middle holds sizes or versions that may change)
has_line() {
    if grep -F -- "$2" "$4" | grep -qF -- "$3"; then ok "$1"; else
        fail "$1" "no line with '$2' and '$3' in: $(cat "$4")"; fi
}
status() {
    if [ "$rc" -eq "$2" ]; then ok "$1"; else fail "$1" "exit $rc, expected $2; stderr: $(cat "$err")"; fi
}

run "$TANDEM" inspect
status "inspect exits 0" 0
has "lists the built-in plugin" "Plugin: core" "$out"
has "built-in modules are listed" "module     conv2d" "$out"
has "built-in optimizers are listed" "optimizer  adamw" "$out"
# the zoo, one model a line after its header (torchvision's ImageNet models too)
for m in mlp resnet18 resnet50 vgg11 vgg16 vgg16_bn alexnet; do
    if sed -n '/^Models (--model):$/,/^$/p' "$out" | grep -qx "  $m"; then
        ok "the zoo's $m is listed under Models"
    else
        fail "the zoo's $m is listed under Models" "$(sed -n '/^Models/,$p' "$out")"
    fi
done
has "lists the good fixture" "Plugin: fixture-good" "$out"
has "shows the plugin file" "file:        $fixtures/libtdm-fixture-good.so" "$out"
has "shows the plugin version" "version:     1.2.3" "$out"
has "shows the licence" "licence:     MIT" "$out"
has "a feature with its priority" "dataset    fixture-data           priority  50  available" "$out"
has "an unavailable feature with its reason" \
    "fixture-broken         priority  60  unavailable: fixture hardware is absent" "$out"
has "wrong ABI is reported" "libtdm-fixture-abi.so: ABI version 99, expected 2" "$out"
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

# Classes the registry refuses: each plugin is a load failure with the reason.
has_line "a class of the wrong size is refused" \
    "libtdm-fixture-size.so: dataset 'fixture-size-data': struct_size " \
    "(sizeof(TdmDatasetClass) in this core's headers)" "$out"
has_line "a class of a newer minor interface is refused" \
    "libtdm-fixture-newer.so: strategy 'fixture-newer-strategy': interface version " \
    "is newer than this core's" "$out"
has_line "a class of another major interface is refused" \
    "libtdm-fixture-major.so: transform 'fixture-major-tf': interface version " \
    "(another major version: rebuild the plugin against this core's headers)" "$out"
has "a backend with a NULL required slot is refused" \
    "libtdm-fixture-nullgemm.so: backend 'fixture-nullgemm': required slot 'gemm' is NULL" "$out"
has "a backend with half of a slot pair is refused" \
    "libtdm-fixture-pinned.so: backend 'fixture-pinned': slot 'host_free' is NULL while 'host_alloc' is set" \
    "$out"
has "a backend with an incomplete stream table is refused" \
    "libtdm-fixture-streams.so: backend 'fixture-streams' stream_ops: required slot 'event_query' is NULL" \
    "$out"
has "a contradictory parameter spec is reported" \
    "libtdm-fixture-badspec.so: feature 'fixture-badspec-strategy': parameter spec 'bucket-mb': default '0': expected a number in [0.001, 1024]" \
    "$out"
hasnt "a plugin refused for its spec is not listed" "fixture-badspec-strategy " "$out"
hasnt "a refused backend is not listed as a feature" "backend    fixture-nullgemm" "$out"
hasnt "a refused plugin is not listed as a plugin" "Plugin: fixture-nullgemm " "$out"
hasnt "the valid feature beside a refused class is rolled back" "fixture-major-data" "$out"

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
has "a reader without parameters takes the common path" \
    "path (string, required, positional): the dataset's directory" "$out"

run "$TANDEM" inspect strategy/fixture-strategy
has "feature without parameters" "parameters:  none" "$out"

# Each parameter with its type, accepted range, default, positional and aliases.
run "$TANDEM" inspect sgd
has "built-in optimizer parameters" "lr (float in [0, 1e+06], default 0.01): learning rate" "$out"
run "$TANDEM" inspect adamw
has "an exclusive bound" "eps (float in (0, 1], default 1e-8)" "$out"
if [ -f "$TDM_PLUGIN_SYSTEM_PATH/libtdm-ddp.so" ]; then
    run "$TANDEM" inspect ddp
    has "strategy parameter with range and alias" \
        "bucket-mb (float in [0.001, 1024], default 25; alias bucket_cap_mb)" "$out"
else
    skip "strategy parameter with range and alias" "no ddp plugin"
fi
if [ -f "$TDM_PLUGIN_SYSTEM_PATH/libtdm-transforms.so" ]; then
    run "$TANDEM" inspect random-crop
    has "positional list parameter" "size (list of 1 or 2 ints >= 1, required, positional)" "$out"
    has "choice with an alias" \
        "padding_mode (one of constant|edge|reflect|symmetric, default constant; alias mode)" "$out"
    has "optional parameter without a default" "at (list of 2 ints >= 0, optional)" "$out"
else
    for t in "positional list parameter" "choice with an alias" "optional parameter without a default"; do
        skip "$t" "no transforms plugin"
    done
fi
if [ -f "$TDM_PLUGIN_SYSTEM_PATH/libtdm-imagefolder.so" ]; then
    run "$TANDEM" inspect dataset/imagefolder
    has "a reader's common path" "path (string, required, positional)" "$out"
    has "a reader's own choice" "size (one of first|varying, default varying)" "$out"
else
    skip "a reader's common path" "no imagefolder plugin"
    skip "a reader's own choice" "no imagefolder plugin"
fi

run "$TANDEM" inspect fixture-good
status "inspect PLUGIN exits 0" 0
has "plugin details" "Plugin: fixture-good" "$out"
has "plugin features" "strategy   fixture-strategy       priority  -1  available" "$out"

run "$TANDEM" inspect fixture-abi
status "inspect a failed plugin exits 0" 0
has "failed plugin shows its reason" "ABI version 99, expected 2" "$out"

run "$TANDEM" inspect fixture-nullgemm
status "inspect a refused plugin exits 0" 0
has "refused plugin is shown as failed" "Plugin: fixture-nullgemm (failed to load)" "$out"
has "refused plugin shows its reason" "backend 'fixture-nullgemm': required slot 'gemm' is NULL" "$out"

# A refused backend is never selected: not by name, and not automatically
# even with the highest priority.
run "$TANDEM" train --device fixture-nullgemm --limit 64 -b 32 --no-eval --quiet
status "train --device with a refused backend exits 1" 1
has "the refused backend is unknown to train" "no backend named 'fixture-nullgemm'" "$err"
run env TDM_PLUGIN_PRIORITY=fixture-nullgemm:100,fixture-pinned:100 \
    "$TANDEM" train --limit 64 -b 32 --no-eval
status "train with refused backends of priority 100 on the path exits 0" 0
cat "$err" >>"$out"
hasnt "train never picks the refused backend" "fixture-nullgemm" "$out"
hasnt "train never picks the half-pinned backend" "fixture-pinned" "$out"

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

# `inspect devices`: every device of every available backend. The fixture
# backend (on the plugin path) has no device_info: its figures are unknown.
run "$TANDEM" inspect devices
status "inspect devices exits 0" 0
has "devices are listed" "Devices:" "$out"
has "the ref device is listed" "  ref:0" "$out"
has "a virtual device says so" "kind:        virtual (host memory)" "$out"
has "the fixture devices are listed" "  fixture-backend:1" "$out"
hasnt "a refused backend has no devices" "fixture-streams" "$out"
has "a device without device_info shows unknowns" "memory:      unknown total, unknown free" "$out"
has "allocator figures are shown" "allocator:   0 B allocated, 0 B reserved, 0 B peak" "$out"
has "an unknown utilisation is a dash" "utilization: -" "$out"
# The lines of one device: from its name to the next device's name.
device_block() { awk -v d="  $1" '$0 == d {on = 1; next} /^  [^ ]/ {on = 0} on' "$out"; }
skip() { tap_n=$((tap_n + 1)); echo "ok $tap_n - $1 # SKIP $2"; }
if "$TANDEM" inspect backend/cpu 2>/dev/null | grep -q "status:      available"; then
    device_block cpu:0 >"$err"
    has "the cpu device is a cpu" "kind:        cpu (host memory)" "$err"
    if grep -Eq '^    memory: +[0-9.]+ (MiB|GiB|TiB) total, [0-9.]+ (B|KiB|MiB|GiB|TiB) free$' "$err"; then
        ok "the cpu device is listed with its memory"
    else
        fail "the cpu device is listed with its memory" "$(cat "$out")"
    fi
    hasnt "the cpu device names its instruction set" "capability:  unknown" "$err"
else
    skip "the cpu device is listed with its memory" "the cpu backend is not available"
fi

# An explicit plugin that fails to load is an error, with its reason.
unset TDM_PLUGIN_PATH
run "$TANDEM" --plugin "$fixtures/libtdm-fixture-abi.so" inspect
status "--plugin with a bad file exits 1" 1
has "--plugin error names the file and reason" \
    "libtdm-fixture-abi.so: ABI version 99, expected 2" "$err"
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
