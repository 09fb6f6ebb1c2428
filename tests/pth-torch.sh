#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/pth-torch.sh - PyTorch .pth files in and out of Tandem, checked
# against torch itself.
# tests/pth-make.py makes files with torch.save (a random torchvision
# resnet18, wrapped state dicts, F16/BF16, strided views, and hostile or
# broken files); Tandem reads them (`tandem export X.pth X.safetensors`,
# `tandem train --init`) and writes .pth back (`tandem export`);
# tests/pth-check.py then compares in PyTorch, bit for bit. The hostile
# files must be refused with a message naming the global, opcode or
# tensor, and must never run anything. Skipped without torch, torchvision
# or PIL.
. "$TDM_TOP_SRCDIR/tests/tap.sh"

py=${TORCH_PYTHON:-/usr/bin/python3}
"$py" -c 'import torch, torchvision' 2>/dev/null || skip_all "no torch and torchvision in $py"
[ -f "$TDM_PLUGIN_SYSTEM_PATH/libtdm-imagefolder.so" ] || skip_all "no imagefolder plugin"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-pth-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
d=$tmp/files
"$py" "$TDM_TOP_SRCDIR/tests/pth-make.py" "$d" 2>"$tmp/err"
case $? in
0) ;;
77) skip_all "PIL missing in $py" ;;
*) echo "1..0 # could not make the .pth files: $(cat "$tmp/err")"; exit 1 ;;
esac

# export NAME SRC DST: `tandem export` succeeds.
export_ok() {
    if "$TANDEM" export "$2" "$3" >"$tmp/out" 2>"$tmp/err"; then
        ok "$1"
    else
        fail "$1" "$(cat "$tmp/err")"
    fi
}

export_ok "read a torchvision resnet18 .pth" "$d/r18.pth" "$d/r18.safetensors"
export_ok "write it back as .pth" "$d/r18.safetensors" "$d/back.pth"
export_ok ".pth to .pth" "$d/r18.pth" "$d/direct.pth"
for f in wrapped model f16 view; do
    export_ok "read $f.pth" "$d/$f.pth" "$d/$f.safetensors"
done
export_ok "export a checkpoint through its latest link" "$d/ckpt/latest" "$d/ckpt.pth"
grep -q "2 tensors.*(2 tandem\.\* tensors left out)" "$tmp/out" && ok "export says what it left out" \
    || fail "export says what it left out" "$(cat "$tmp/out")"

e='^tandem export: '
expect_error "legacy format: re-save with a newer torch" "$e" "$d/legacy.pth" "legacy" \
    "re-save it with a newer torch" -- "$TANDEM" export "$d/legacy.pth" "$tmp/x.safetensors"
expect_error "GLOBAL os.system is refused, naming it and its byte" "$e" "data.pkl): byte 2:" \
    "GLOBAL: global 'posix.system' is not allowed" -- \
    "$TANDEM" export "$d/evil-system.pth" "$tmp/x.safetensors"
expect_error "REDUCE of builtins.eval is refused at its global" "$e" "STACK_GLOBAL" \
    "global 'builtins.eval' is not allowed" -- \
    "$TANDEM" export "$d/evil-eval.pth" "$tmp/x.safetensors"
[ ! -e "$d/pwned" ] && ok "nothing in the hostile pickles ran" \
    || fail "nothing in the hostile pickles ran" "$d/pwned exists"
expect_error "truncated archive" "$e" "$d/truncated.pth" "not a readable zip archive" -- \
    "$TANDEM" export "$d/truncated.pth" "$tmp/x.safetensors"
expect_error "storage entry of the wrong size" "$e" "small/data/0 is 44 bytes" \
    "storage '0'" "12 elements of torch.FloatStorage" -- \
    "$TANDEM" export "$d/short-storage.pth" "$tmp/x.safetensors"
expect_error "tensor view past its storage" "$e" "tensor 'fc.weight'" "shape [3, 5], strides [4, 1]" \
    "reach past storage '0' of 12 elements" -- \
    "$TANDEM" export "$d/wide-view.pth" "$tmp/x.safetensors"
expect_error "export to an unknown extension" "$e" "x.bin" ".pth (or .pt) or .safetensors" -- \
    "$TANDEM" export "$d/r18.pth" "$tmp/x.bin"

train="$TANDEM train --model resnet18 --dataset imagefolder:$d/images,size=first --batch-size 5
    --no-eval --quiet"
if $train --init "$d/r18.pth" --init-skip fc --set model.num_classes=5 \
        --freeze conv1,bn1,layer1,layer2 --save "$d/ft.safetensors" >"$tmp/out" 2>"$tmp/err" &&
        "$TANDEM" export "$d/ft.safetensors" "$d/ft.pth" >"$tmp/out" 2>>"$tmp/err"; then
    ok "fine-tune: --init r18.pth --init-skip fc, 5 classes, frozen conv1,bn1,layer1,layer2"
else
    fail "fine-tune: --init r18.pth --init-skip fc, 5 classes, frozen conv1,bn1,layer1,layer2" \
        "$(cat "$tmp/err")"
fi
expect_error "--init r18.pth into 5 classes without --init-skip" '^tandem train: ' \
    "$d/r18.pth: parameter 'fc.weight' has shape [5, 512] in the model but [1000, 512]" -- \
    $train --init "$d/r18.pth" --set model.num_classes=5
expect_error "--init-skip with a prefix of nothing" '^tandem train: ' "'fcx'" \
    "names no parameter or buffer" -- $train --init "$d/r18.pth" --init-skip fcx

"$py" "$TDM_TOP_SRCDIR/tests/pth-check.py" "$d" >"$tmp/check" 2>&1
while IFS= read -r line; do
    case $line in
    "PASS "*) ok "${line#PASS }" ;;
    "FAIL "*) fail "${line#FAIL }" ;;
    *) echo "# $line" ;;
    esac
done <"$tmp/check"
grep -q '^PASS ' "$tmp/check" || fail "tests/pth-check.py ran" "$(cat "$tmp/check")"
done_testing
