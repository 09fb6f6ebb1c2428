#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/example-transfer.sh - examples/transfer-learning/run.sh works as its
# README says, at a small size (2 epochs of 32 px images): pretraining and
# its .pth, the head, the interrupted and resumed fine-tuning, the plot,
# and a model.pth that PyTorch loads strictly into torchvision's resnet18.
. "$TDM_TOP_SRCDIR/tests/tap.sh"
[ -x "$TANDEM" ] || skip_all "tandem is not built"
command -v python3 >/dev/null || skip_all "no python3"
"$TANDEM" inspect 2>/dev/null | grep -Eq '^ +dataset +imagefolder .* available' ||
    skip_all "no imagefolder dataset reader"
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
if TANDEM=$TANDEM EPOCHS=2 SIZE=32 sh "$TDM_TOP_SRCDIR/examples/transfer-learning/run.sh" \
    "$w/run" >"$w/out" 2>&1; then
    ok "run.sh exits 0"
else
    fail "run.sh exits 0" "$(tail -20 "$w/out")"
fi
grep -q "resuming from .*ckpt-000000010.safetensors" "$w/out" &&
    ok "the fine-tuning resumes from its step-10 checkpoint" ||
    fail "the fine-tuning resumes from its step-10 checkpoint" "$(grep -i resum "$w/out")"
for f in pretrained.pth head.safetensors curves.png model.pth ckpt/latest ckpt/best; do
    [ -s "$w/run/$f" ] && ok "$f written" || fail "$f written" "$(ls "$w/run" "$w/run/ckpt")"
done
PY=${TORCH_PYTHON:-/usr/bin/python3}
if "$PY" -c 'import torch, torchvision' 2>/dev/null; then
    if out=$("$PY" -c '
import sys, torch, torchvision
m = torchvision.models.resnet18(num_classes=5)
m.load_state_dict(torch.load(sys.argv[1], weights_only=True), strict=True)
print("loaded", sum(p.numel() for p in m.parameters()), "parameters")' "$w/run/model.pth" 2>&1); then
        ok "torchvision's resnet18(num_classes=5) loads model.pth strictly: $out"
    else
        fail "torchvision's resnet18(num_classes=5) loads model.pth strictly" "$out"
    fi
else
    skip "torchvision's resnet18(num_classes=5) loads model.pth strictly" "no torchvision"
fi
done_testing
