#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/train-torch.sh - weights saved by `tandem train` load into PyTorch.
# Trains resnet8 for a few steps (so BN running statistics are not at their
# initial values), saves it, loads the file into the PyTorch definition of
# the same model with load_state_dict(strict=True) (this needs the
# num_batches_tracked entries), and checks that PyTorch and `tandem eval`
# agree on the test accuracy of the embedded subset. Skipped without torch.
. "$TDM_TOP_SRCDIR/tests/tap.sh"

py=${TORCH_PYTHON:-/usr/bin/python3}
"$py" -c 'import torch' 2>/dev/null || skip_all "no torch in $py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tdm-train-torch-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export TDM_DATA_DIR="$TDM_TOP_SRCDIR/data"

if "$TANDEM" train --model resnet8 --limit 256 --quiet --no-eval --save "$tmp/r8.safetensors" \
        >/dev/null 2>"$tmp/err"; then
    ok "train and save resnet8"
else
    fail "train and save resnet8" "$(cat "$tmp/err")"
fi
if "$TANDEM" eval --model resnet8 --init "$tmp/r8.safetensors" --batch-size 250 \
        >"$tmp/eval" 2>"$tmp/err"; then
    ok "tandem eval"
else
    fail "tandem eval" "$(cat "$tmp/err")"
fi
tandem_acc=$(sed -n 's/.*test accuracy \([0-9.]*\).*/\1/p' "$tmp/eval")

"$py" - "$tmp/r8.safetensors" "$TDM_TOP_SRCDIR" >"$tmp/torch" 2>"$tmp/err" <<'PY'
import gzip, json, struct, sys
import torch
sys.path.insert(0, sys.argv[2] + "/tests/oracle")
import make_reference as ref

path = sys.argv[1]
raw = open(path, "rb").read()
(hlen,) = struct.unpack("<Q", raw[:8])
header = json.loads(raw[8:8 + hlen])
dtypes = {"F32": torch.float32, "I64": torch.int64}
state = {}
for name, e in header.items():
    if name == "__metadata__":
        continue
    b, end = e["data_offsets"]
    buf = bytearray(raw[8 + hlen + b:8 + hlen + end])
    state[name] = torch.frombuffer(buf, dtype=dtypes[e["dtype"]]).reshape(e["shape"]).clone()
model = ref.build("resnet8")
model.load_state_dict(state, strict=True)
model.eval()

data = sys.argv[2] + "/data/fashion-mnist/"
imgs = gzip.open(data + "t10k-images-idx3-ubyte.gz").read()
lbls = gzip.open(data + "t10k-labels-idx1-ubyte.gz").read()
n = struct.unpack(">I", imgs[4:8])[0]
x = torch.frombuffer(bytearray(imgs[16:]), dtype=torch.uint8).reshape(n, 1, 28, 28).float()
x = (x / 255.0 - 0.2860) / 0.3530
y = torch.frombuffer(bytearray(lbls[8:]), dtype=torch.uint8).long()
with torch.no_grad():
    pred = model(x).argmax(1)
print("%.4f" % (pred == y).float().mean().item())
PY
if [ $? -eq 0 ]; then
    ok "load_state_dict(strict=True) in PyTorch"
else
    fail "load_state_dict(strict=True) in PyTorch" "$(cat "$tmp/err")"
fi
torch_acc=$(cat "$tmp/torch")
if [ -n "$tandem_acc" ] && [ -n "$torch_acc" ] &&
   awk -v a="$tandem_acc" -v b="$torch_acc" 'BEGIN { d = a - b; exit !(d < 0.002 && d > -0.002) }'; then
    ok "PyTorch and tandem agree on the test accuracy ($torch_acc, $tandem_acc)"
else
    fail "PyTorch and tandem agree on the test accuracy" "torch '$torch_acc', tandem '$tandem_acc'"
fi
done_testing
