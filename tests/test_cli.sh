#!/bin/sh
# The CLI: dumps are reproducible, --load-dir reproduces a dump's out.bin,
# the timing line is printed, the layer flags (padding, activation, pool
# stride and padding, ceil mode; conv stride, dilation, groups and a
# residual) reach the library, the dump's meta.json and
# --show-tiling, and their dumps match an independent Python reference (the
# standard library only; skipped without /usr/bin/python3), and every bad
# input gives one line on stderr and exit code 2 without leaving an out.bin
# (or anything in the dump directory) behind. With CONVPOOL_VERBOSE=1 the
# library prints its create and run lines on stderr, and nothing without it.
set -u
cli=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
small="--batch 2 --in-channels 5 --out-channels 7 --height 19 --width 23 --filter 3 --pool 2 --iters 1 --warmup 0"

"$cli" $small --dump-dir "$tmp/a" >/dev/null || { echo "dump a failed"; fail=1; }
"$cli" $small --dump-dir "$tmp/b" --threads 1 >/dev/null || { echo "dump b failed"; fail=1; }
for f in x.bin w.bin bias.bin out.bin meta.json; do
  cmp -s "$tmp/a/$f" "$tmp/b/$f" || { echo "dump not reproducible: $f"; fail=1; }
done
mkdir "$tmp/c"
cp "$tmp/a/meta.json" "$tmp/a/x.bin" "$tmp/a/w.bin" "$tmp/a/bias.bin" "$tmp/c/"
"$cli" --load-dir "$tmp/c" >/dev/null || { echo "load-dir failed"; fail=1; }
cmp -s "$tmp/a/out.bin" "$tmp/c/out.bin" || { echo "load-dir out.bin differs from the dump"; fail=1; }
"$cli" --dtype float16 $small --no-bias --dump-dir "$tmp/h" >/dev/null || { echo "fp16 dump failed"; fail=1; }
[ ! -e "$tmp/h/bias.bin" ] || { echo "--no-bias dump wrote bias.bin"; fail=1; }
[ "$(stat -c %s "$tmp/h/out.bin")" -eq $((2 * 7 * 8 * 10 * 2)) ] || { echo "fp16 out.bin has the wrong size"; fail=1; }

# ---- the layer flags ----
# reference DIR: out.bin of the dump in DIR against a float64 recomputation
# from its meta.json (padding, activation, pool_stride, pool_padding,
# ceil_mode, stride, dilation, groups, residual read here independently of
# cli/meta.c) and its tensors.
reference() {
  /usr/bin/python3 - "$1" <<'PY'
import json, struct, sys
d = sys.argv[1]
m = json.load(open(d + "/meta.json"))
fmt = {"float32": "f", "float16": "e"}[m["dtype"]]
es = struct.calcsize(fmt)
def load(name):
    raw = open(d + "/" + name, "rb").read()
    return list(struct.unpack("<%d%s" % (len(raw) // es, fmt), raw))
B, C, O = m["batch"], m["in_channels"], m["out_channels"]
H, W, K, P = m["height"], m["width"], m["filter"], m["pool"]
pt, pl, pb, pr = m.get("padding", [0, 0, 0, 0])
qt, ql, qb, qr = m.get("pool_padding", [0, 0, 0, 0])
S = m.get("pool_stride", P)
ceil = m.get("ceil_mode", False)
CS, D, G = m.get("stride", 1), m.get("dilation", 1), m.get("groups", 1)
CG, OG = C // G, O // G  # input and output channels per group
act = m.get("activation", "none")
lo, hi = float("-inf"), float("inf")
if act == "relu":
    lo = 0.0
elif act == "relu6":
    lo, hi = 0.0, 6.0
elif isinstance(act, dict):
    lo, hi = act["clamp"]
x, w = load("x.bin"), load("w.bin")
b = load("bias.bin") if m["bias"] else [0.0] * O
out = load("out.bin")
OH, OW = (H + pt + pb - D * (K - 1) - 1) // CS + 1, (W + pl + pr - D * (K - 1) - 1) // CS + 1
res = load("residual.bin") if m.get("residual", False) else None
def pooled(n, q0, q1):  # torch's rule (aten's pooling_output_shape)
    k = (n + q0 + q1 - P + (S - 1 if ceil else 0)) // S + 1
    if ceil and (k - 1) * S >= n + q0:
        k -= 1
    return k
PH, PW = pooled(OH, qt, qb), pooled(OW, ql, qr)
if len(out) != B * O * PH * PW:
    sys.exit("out.bin has %d values, the reference %dx%dx%dx%d" % (len(out), B, O, PH, PW))
bad = 0
for n in range(B):
    for o in range(O):
        conv, mag = {}, {}
        for i in range(OH):
            for j in range(OW):
                s = a = 0.0
                for cg in range(CG):
                    c = o // OG * CG + cg  # the group's input channel
                    for u in range(K):
                        yy = i * CS + u * D - pt
                        if yy < 0 or yy >= H:
                            continue
                        xrow, wrow = ((n * C + c) * H + yy) * W, ((o * CG + cg) * K + u) * K
                        for v in range(K):
                            xx = j * CS + v * D - pl
                            if 0 <= xx < W:
                                p = x[xrow + xx] * w[wrow + v]
                                s += p
                                a += abs(p)
                r = res[((n * O + o) * OH + i) * OW + j] if res else 0.0
                conv[i, j] = min(max(s + b[o] + r, lo), hi)
                mag[i, j] = a + abs(b[o]) + abs(r)
        for r in range(PH):
            for q in range(PW):
                cells = [(i, j) for i in range(r * S - qt, r * S - qt + P)
                         for j in range(q * S - ql, q * S - ql + P) if 0 <= i < OH and 0 <= j < OW]
                ref = max(conv[c] for c in cells)
                tol = 1e-5 * max(mag[c] for c in cells) + (2e-3 * abs(ref) if es == 2 else 0.0)
                got = out[((n * O + o) * PH + r) * PW + q]
                if not abs(got - ref) <= tol:
                    bad += 1
                    if bad <= 5:
                        print("out[%d,%d,%d,%d] = %r, reference %r" % (n, o, r, q, got, ref))
print("reference: %s conv %dx%d -> pooled %dx%d, %d values, %d bad, %d at the clamp min, "
      "%d at the max" % (m["dtype"], OH, OW, PH, PW, len(out), bad,
                         sum(v == lo for v in out), sum(v == hi for v in out)))
sys.exit(1 if bad else 0)
PY
}

# float32: asymmetric padding, an active clamp, overlapping 3x3 windows with
# asymmetric pool padding and ceil sizing; float16: relu6, stride 1; ONNX's
# pool padding up to P - 1; torch's partial window (3x3 windows, stride 2,
# ceil, on a 2x3 conv output: one window, larger than the conv output).
layer32="--padding 2,0,1,3 --activation clamp:4,12.5 --pool 3 --pool-stride 2 --pool-padding 1,0,1,1 --ceil-mode"
layer16="--dtype float16 --in-channels 2 --no-bias --padding 1 --activation relu6 --pool 2 --pool-stride 1 --pool-padding 0,1,1,0 --ceil-mode"
layeronnx="--pool 3 --pool-stride 2 --pool-padding 2,2,2,1 --ceil-mode"
layerpart="--height 4 --width 5 --pool 3 --pool-stride 2 --ceil-mode"
# shellcheck disable=SC2086
"$cli" $small $layer32 --show-tiling --dump-dir "$tmp/l32" >"$tmp/l32.out" || { echo "layer dump (float32) failed"; fail=1; }
# shellcheck disable=SC2086
"$cli" $small $layer16 --dump-dir "$tmp/l16" >/dev/null || { echo "layer dump (float16) failed"; fail=1; }
# shellcheck disable=SC2086
"$cli" $small $layeronnx --dump-dir "$tmp/lonnx" >/dev/null || { echo "layer dump (pool padding P - 1) failed"; fail=1; }
# shellcheck disable=SC2086
"$cli" $small $layerpart --dump-dir "$tmp/lpart" >/dev/null || { echo "layer dump (partial window) failed"; fail=1; }
# conv stride 2 with two groups and a residual (float32); a dilated
# depthwise conv with channel multiplier 2 and a residual (float16)
conv32="--in-channels 6 --out-channels 8 --stride 2 --groups 2 --residual --padding 1 --activation relu --pool 3 --pool-stride 2 --pool-padding 1"
conv16="--dtype float16 --in-channels 4 --out-channels 8 --groups 4 --dilation 2 --padding 2,1,2,1 --residual --pool 2"
# shellcheck disable=SC2086
"$cli" $small $conv32 --show-tiling --dump-dir "$tmp/c32" >"$tmp/c32.out" || { echo "conv dump (float32) failed"; fail=1; }
# shellcheck disable=SC2086
"$cli" $small $conv16 --dump-dir "$tmp/c16" >/dev/null || { echo "conv dump (float16) failed"; fail=1; }
for want in 'conv           stride 2, dilation 1, groups 2; a residual added before the activation' \
  'shape          src \[2, 6, 19, 23\] float32 -> conv 10x12 -> pool 3 -> dst \[2, 8, 5, 6\]'; do
  grep -q "^$want\$" "$tmp/c32.out" || { echo "--show-tiling lacks '$want'"; fail=1; }
done
for want in '"stride": 2,' '"dilation": 1,' '"groups": 2,' '"residual": true'; do
  grep -q "^  $want\$" "$tmp/c32/meta.json" || { echo "meta.json lacks $want"; fail=1; }
done
[ "$(stat -c %s "$tmp/c32/residual.bin")" -eq $((2 * 8 * 10 * 12 * 4)) ] || { echo "residual.bin (float32) has the wrong size"; fail=1; }
[ "$(stat -c %s "$tmp/c32/w.bin")" -eq $((8 * 3 * 3 * 3 * 4)) ] || { echo "grouped w.bin (float32) has the wrong size"; fail=1; }
[ "$(stat -c %s "$tmp/c16/residual.bin")" -eq $((2 * 8 * 19 * 21 * 2)) ] || { echo "residual.bin (float16) has the wrong size"; fail=1; }
[ ! -e "$tmp/l32/residual.bin" ] || { echo "a dump without --residual wrote residual.bin"; fail=1; }
grep -q '^  "residual": false$' "$tmp/l32/meta.json" || { echo "meta.json lacks \"residual\": false"; fail=1; }
for want in 'padding        conv 2,0,1,3 (top,left,bottom,right); pool window 3 stride 2 padding 1,0,1,1' \
  'shape          src \[2, 5, 19, 23\] float32 -> conv 20x24 -> pool 3 -> dst \[2, 7, 11, 12\]' \
  'activation     clamp \[4, 12.5\]' 'pool sizing    ceil'; do
  grep -q "^$want\$" "$tmp/l32.out" || { echo "--show-tiling lacks '$want'"; fail=1; }
done
# The dump's meta.json has the layer keys, written as documented.
for want in '"padding": \[2, 0, 1, 3\],' '"activation": {"clamp": \[4, 12.5\]},' '"pool_stride": 2,' \
  '"pool_padding": \[1, 0, 1, 1\],' '"ceil_mode": true,'; do
  grep -q "^  $want\$" "$tmp/l32/meta.json" || { echo "meta.json lacks $want"; fail=1; }
done
grep -q '^  "activation": {"clamp": \[0, 6\]},$' "$tmp/l16/meta.json" || { echo "relu6 is not written as clamp [0, 6]"; fail=1; }
[ "$(stat -c %s "$tmp/l32/out.bin")" -eq $((2 * 7 * 11 * 12 * 4)) ] || { echo "layer out.bin (float32) has the wrong size"; fail=1; }
[ "$(stat -c %s "$tmp/l16/out.bin")" -eq $((2 * 7 * 19 * 23 * 2)) ] || { echo "layer out.bin (float16) has the wrong size"; fail=1; }
[ "$(stat -c %s "$tmp/lonnx/out.bin")" -eq $((2 * 7 * 10 * 12 * 4)) ] || { echo "layer out.bin (pool padding P - 1) has the wrong size"; fail=1; }
[ "$(stat -c %s "$tmp/lpart/out.bin")" -eq $((2 * 7 * 1 * 1 * 4)) ] || { echo "layer out.bin (partial window) has the wrong size"; fail=1; }
# The dumps are checked against the reference above (independent of
# scripts/check_conv.py and the binding), and reloaded with --load-dir.
if [ -x /usr/bin/python3 ]; then
  for d in l32 l16 lonnx lpart c32 c16; do
    reference "$tmp/$d" || { echo "$d: out.bin differs from the reference"; fail=1; }
  done
else
  echo "skipped: the Python reference of the layer dumps (/usr/bin/python3 is not available)"
fi
for d in l32 l16 lonnx lpart c32 c16; do
  mkdir "$tmp/$d-load"
  for f in meta.json x.bin w.bin bias.bin residual.bin; do [ ! -e "$tmp/$d/$f" ] || cp "$tmp/$d/$f" "$tmp/$d-load/"; done
  "$cli" --load-dir "$tmp/$d-load" >/dev/null || { echo "$d: load-dir failed"; fail=1; }
  cmp -s "$tmp/$d/out.bin" "$tmp/$d-load/out.bin" || { echo "$d: load-dir out.bin differs from the dump"; fail=1; }
done
# A meta.json without the conv keys (as earlier versions wrote it) loads as
# stride, dilation and groups 1 without a residual: l32's dump again.
mkdir "$tmp/l32-old"
cp "$tmp/l32/x.bin" "$tmp/l32/w.bin" "$tmp/l32/bias.bin" "$tmp/l32-old/"
sed -e '/^  "\(stride\|dilation\|groups\|residual\)": /d' -e 's/^  "ceil_mode": \(true\|false\),$/  "ceil_mode": \1/' \
  "$tmp/l32/meta.json" >"$tmp/l32-old/meta.json"
if grep -q '"residual"' "$tmp/l32-old/meta.json"; then
  echo "the old-style meta.json still has the conv keys"; fail=1
fi
"$cli" --load-dir "$tmp/l32-old" >/dev/null || { echo "old-style meta.json: load-dir failed"; fail=1; }
cmp -s "$tmp/l32/out.bin" "$tmp/l32-old/out.bin" || { echo "old-style meta.json: out.bin differs"; fail=1; }
# "residual": true without residual.bin is refused, naming the file.
mkdir "$tmp/c32-nores"
cp "$tmp/c32/meta.json" "$tmp/c32/x.bin" "$tmp/c32/w.bin" "$tmp/c32/bias.bin" "$tmp/c32-nores/"
if "$cli" --load-dir "$tmp/c32-nores" >/dev/null 2>"$tmp/err" || ! grep -q "residual.bin" "$tmp/err"; then
  echo "a missing residual.bin: $(cat "$tmp/err")"; fail=1
fi
[ ! -e "$tmp/c32-nores/out.bin" ] || { echo "a failed --load-dir (no residual.bin) left out.bin"; fail=1; }
for flag in --padding --activation --pool-stride --pool-padding --ceil-mode relu6 clamp:MIN,MAX \
  --stride --dilation --groups --residual; do
  "$cli" --help | grep -q -- "$flag" || { echo "--help does not mention $flag"; fail=1; }
done
# --help lists the library's algorithms: the names its refusal of an unknown
# one gives, in the same order.
known=$("$cli" --impl none 2>&1 | sed -n "s/.*is not one of //p")
impls=$("$cli" --help | sed -n 's/^  --impl \([a-z0-9|]*\)$/\1/p')
if [ -z "$known" ] || [ "$impls" != "$(echo "$known" | sed 's/, /|/g')" ]; then
  echo "--help lists the algorithms '$impls', the library knows '$known'"; fail=1
fi
# Every algorithm the library lists runs a 3x3 layer (depthwise: a depthwise
# one; it declines the others).
for impl in $(echo "$impls" | tr '|' ' '); do
  layer=$small
  [ "$impl" = depthwise ] && layer="$small --out-channels 10 --groups 5"
  # shellcheck disable=SC2086
  "$cli" $layer --impl "$impl" >/dev/null || { echo "--impl $impl failed"; fail=1; }
done
# Spellings of the same layer give the same bytes: relu6 and clamp:0,6;
# --padding N and N,N,N,N; the default pool stride and --pool-stride P.
# shellcheck disable=SC2086
if ! "$cli" $small --activation relu6 --padding 1 --dump-dir "$tmp/s1" >/dev/null ||
  ! "$cli" $small --activation clamp:0,6 --padding 1,1,1,1 --pool-stride 2 --dump-dir "$tmp/s2" >/dev/null; then
  echo "spelling dumps failed"; fail=1
fi
for f in out.bin meta.json; do
  cmp -s "$tmp/s1/$f" "$tmp/s2/$f" || { echo "relu6/clamp:0,6, --padding 1/1,1,1,1, stride: $f differs"; fail=1; }
done

out=$("$cli" --in-channels 16 --out-channels 16 --height 40 --width 40 --iters 3 --warmup 1)
echo "$out" | grep -Eq '^\[INFO\] min=[0-9.]+ us median=[0-9.]+ us avg=[0-9.]+ us \(threads=[0-9]+, items=[0-9]+\)$' ||
  { echo "no timing line in: $out"; fail=1; }
echo "$out" | grep -Eq 'GFLOP/s' || { echo "no GFLOP/s line"; fail=1; }

# --threads 0 means the usable CPUs, as in the API (and is the default).
# shellcheck disable=SC2086
t0=$("$cli" $small --threads 0 | sed -n 's/.*(threads=\([0-9]*\),.*/\1/p')
# shellcheck disable=SC2086
tdef=$("$cli" $small | sed -n 's/.*(threads=\([0-9]*\),.*/\1/p')
if [ -z "$t0" ] || [ "$t0" -lt 1 ] || [ "$t0" != "$tdef" ]; then
  echo "--threads 0 ran with '$t0' threads, the default with '$tdef'"; fail=1
else
  echo "--threads 0: $t0 threads, as the default"
fi
if command -v taskset >/dev/null 2>&1; then
  # shellcheck disable=SC2086
  t1=$(taskset -c 0 "$cli" $small --threads 0 | sed -n 's/.*(threads=\([0-9]*\),.*/\1/p')
  [ "$t1" = 1 ] || { echo "--threads 0 on one CPU (taskset -c 0) ran with '$t1' threads"; fail=1; }
else
  echo "skipped: --threads 0 under taskset (taskset is not installed)"
fi

# bad inputs: "arguments|expected text in the message"
mkdir "$tmp/trunc"
cp "$tmp/a/meta.json" "$tmp/a/w.bin" "$tmp/a/bias.bin" "$tmp/trunc/"
head -c 100 "$tmp/a/x.bin" > "$tmp/trunc/x.bin"
mkdir "$tmp/nometa"
while IFS='|' read -r args expect; do
  [ -n "$args" ] || continue
  rm -f "$tmp/err"
  # shellcheck disable=SC2086
  eval "\"$cli\" $args" >/dev/null 2>"$tmp/err"
  rc=$?
  lines=$(wc -l < "$tmp/err")
  if [ "$rc" -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -q -- "$expect" "$tmp/err"; then
    echo "bad input '$args': exit $rc, $lines stderr lines: $(cat "$tmp/err")"
    fail=1
  else
    echo "refused: $args -> $(cat "$tmp/err")"
  fi
done <<LIST
--filter 0|--filter = 0
--height 2 --filter 3|smaller than the filter
--pool 0|--pool = 0
--height 10 --width 10 --pool 9|pool = 9 is larger than the conv output 8x8
--dtype int8|int8
--batch -1|--batch = -1
--threads -1|threads = -1 must be in 0..1024
--threads 1025|threads = 1025 must be in 0..1024
--load-dir ""|--load-dir is empty
--dump-dir ""|--dump-dir is empty
--dump-dir|--dump-dir needs a directory
--height abc|'abc' is not an integer
--width 12x|'12x' is not an integer
--batch 99999999999 --in-channels 99999999999 --height 99999 --width 99999|overflows
--frobnicate|unknown option '--frobnicate'
--iters|--iters needs a value
--impl gemm|--impl = 'gemm'
--load-dir $tmp/nometa|meta.json
--load-dir $tmp/trunc|x.bin has 100 bytes
--load-dir $tmp/doesnotexist|doesnotexist
LIST
[ ! -e "$tmp/trunc/out.bin" ] || { echo "a failed --load-dir left out.bin"; fail=1; }

# The layer flags: each bad value with --dump-dir (given first, so that a
# flag at the end has no value), which must stay empty.
mkdir "$tmp/bad"
while IFS='|' read -r args expect; do
  [ -n "$args" ] || continue
  rm -f "$tmp/err"
  # shellcheck disable=SC2086
  eval "\"$cli\" $small --dump-dir \"$tmp/bad\" $args" >/dev/null 2>"$tmp/err"
  rc=$?
  lines=$(wc -l < "$tmp/err")
  if [ "$rc" -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -q -- "$expect" "$tmp/err"; then
    echo "bad input '$args': exit $rc, $lines stderr lines: $(cat "$tmp/err")"
    fail=1
  elif [ -n "$(ls -A "$tmp/bad")" ]; then
    echo "bad input '$args' wrote into the dump directory: $(ls -A "$tmp/bad")"
    fail=1
  else
    echo "refused: $args -> $(cat "$tmp/err")"
  fi
done <<LIST
--padding -1|padding top = -1 must be in 0..16777216
--padding 16777217|padding top = 16777217 must be in 0..16777216
--padding 1,2,3|--padding = '1,2,3' must be N or T,L,B,R (one or four integers, not 3)
--padding 1,2,3,4,5|--padding = '1,2,3,4,5' must be N or T,L,B,R
--padding 1,x,3,4|--padding = '1,x,3,4': left 'x' is not an integer
--padding 1,2,-3,4|padding bottom = -3 must be in 0..16777216
--padding 0,0,0,99999999999|padding right = 99999999999 must be in 0..16777216
--padding 1.5|--padding = '1.5' is not an integer
--padding ''|--padding = '' is not an integer
--padding|--padding needs a value
--activation sigmoid|--activation = 'sigmoid' is not one of none, relu, relu6, clamp:MIN,MAX
--activation RELU|--activation = 'RELU' is not one of
--activation clamp:6,0|clamp \[6, 0\] must have min <= max
--activation clamp:nan,1|--activation = 'clamp:nan,1': MIN 'nan' is not a finite float32
--activation clamp:1,NaN|--activation = 'clamp:1,NaN': MAX 'NaN' is not a finite float32
--activation clamp:1|--activation = 'clamp:1' must be clamp:MIN,MAX (two numbers)
--activation clamp:1,2,3|--activation = 'clamp:1,2,3' must be clamp:MIN,MAX
--activation clamp:|must be clamp:MIN,MAX
--activation clamp:a,1|MIN 'a' is not a number
--activation clamp:0,|MAX '' is not a number
--activation clamp:0,inf|MAX 'inf' is not a finite float32
--activation clamp:-1e39,0|MIN '-1e39' is not a finite float32
--activation|--activation needs a value
--pool-stride 0|--pool-stride = 0 must be in 1..1099511627776
--pool-stride -1|--pool-stride = -1 must be in 1..
--pool-stride 2x|--pool-stride = '2x' is not an integer
--pool-stride 1099511627777|--pool-stride = 1099511627777 must be in 1..1099511627776
--pool-padding -1|pool_padding top = -1 must be in 0..1
--pool-padding 1,1|--pool-padding = '1,1' must be N or T,L,B,R
--pool 2 --pool-padding 2|pool_padding top = 2 must be in 0..1 (less than the pool window 2)
--pool 3 --pool-padding 1,1,3,1|pool_padding bottom = 3 must be in 0..2
--pool 4 --padding 1 --pool-padding 0,0,0,4|pool_padding right = 4 must be in 0..3
--padding 1 --height 10 --width 10 --pool 11|pool = 11 is larger than the conv output 10x10
--height 10 --width 10 --pool 11 --pool-stride 2 --ceil-mode|pool = 11 is larger than the conv output 8x8
--height 4 --width 4 --filter 7 --padding 1|padded input 6x6 is smaller than the filter k = 7
--stride 0|--stride = 0 must be in 1..1099511627776
--stride 16777217|conv stride = 16777217 must be in 1..16777216
--stride x|--stride = 'x' is not an integer
--dilation 0|--dilation = 0 must be in 1..
--dilation 16777217|conv dilation = 16777217 must be in 1..16777216
--dilation 10|smaller than the dilated filter k = 3, dilation = 10 (extent 21)
--groups 0|--groups = 0 must be in 1..
--groups 5|conv groups = 5 must be >= 1 and divide c_in = 5 and c_out = 7
--groups 2|conv groups = 2 must be >= 1 and divide c_in = 5 and c_out = 7
--impl winograd --stride 2|stride = 2
--impl winograd --in-channels 7 --groups 7|groups = 7
--impl winograd2x3 --dilation 2|dilation = 2
--impl sr --dilation 2|dilation = 2
--residual=1|unknown option '--residual=1'
--ceil-mode=1|unknown option '--ceil-mode=1'
LIST

# ---- auto's measured rules: a 3x3 filter of stride 2 goes to direct with vector kernels
# (AVX2, AVX-512: where its rule was measured) and to im2col on the portable kernels
# (shift-reduce is passed over, with its reason, and direct too); the 7x7 stem likewise goes
# to direct with vector kernels and stays with shift-reduce on the portable ones; a 1x1 of
# stride 1 over 512 channels goes to direct on AVX-512 only (over 256 it stays with
# shift-reduce); shift-reduce
# asked for by name still computes the 3x3 one, to the same values as auto's within fp32
# rounding ----
s2="--in-channels 64 --out-channels 8 --height 15 --width 17 --filter 3 --padding 1 --stride 2 --pool 1 --iters 1 --warmup 0"
"$cli" $s2 --show-tiling --dump-dir "$tmp/s2a" >"$tmp/s2a.out" || { echo "stride-2 auto failed"; fail=1; }
if grep -q '^isa            scalar ' "$tmp/s2a.out"; then vector=0; else vector=1; fi
if [ $vector = 1 ]; then
  grep -q '^algorithm      channels-in-lanes direct (direct)' "$tmp/s2a.out" || { echo "auto did not take direct for 3x3 stride 2 with vector kernels"; fail=1; }
fi
CONVPOOL_ISA=scalar "$cli" $s2 --show-tiling >"$tmp/s2p.out" || { echo "stride-2 auto (scalar) failed"; fail=1; }
grep -q '^algorithm      im2col + GEMM (im2col)' "$tmp/s2p.out" || { echo "auto did not take im2col for 3x3 stride 2 on the portable kernels"; fail=1; }
grep -q '^auto           shift-reduce: passed over: im2col is faster: the 3x3 filter split for stride 2 multiplies 16/9 as many taps' "$tmp/s2p.out" ||
  { echo "--show-tiling lacks why shift-reduce was passed over"; fail=1; }
grep -q '^auto           channels-in-lanes direct: passed over: measured faster with vector kernels only' "$tmp/s2p.out" ||
  { echo "--show-tiling lacks why direct was passed over"; fail=1; }
"$cli" $s2 --impl sr --show-tiling --dump-dir "$tmp/s2s" >"$tmp/s2s.out" || { echo "stride-2 --impl sr failed"; fail=1; }
grep -q '^algorithm      shift-reduce (sr)' "$tmp/s2s.out" || { echo "--impl sr was not shift-reduce"; fail=1; }
if [ -x /usr/bin/python3 ]; then
  /usr/bin/python3 - "$tmp/s2a/out.bin" "$tmp/s2s/out.bin" <<'PY' || { echo "stride-2 auto and sr differ"; fail=1; }
import struct, sys
a, b = (open(f, "rb").read() for f in sys.argv[1:3])
x, y = (struct.unpack("<%df" % (len(v) // 4), v) for v in (a, b))
scale = max(1.0, max(abs(v) for v in x))
sys.exit(0 if len(x) == len(y) and max(abs(p - q) for p, q in zip(x, y)) <= 1e-5 * scale else 1)
PY
fi
"$cli" --in-channels 8 --out-channels 8 --height 15 --width 17 --filter 5 --padding 1 --pool 1 --iters 1 --warmup 0 --show-tiling >"$tmp/s1.out" || { echo "stride-1 auto failed"; fail=1; }
grep -q '^auto           channels-in-lanes direct: passed over: ' "$tmp/s1.out" || { echo "auto did not pass direct over at stride 1"; fail=1; }
stem="--in-channels 3 --out-channels 8 --height 30 --width 30 --filter 7 --padding 3 --stride 2 --pool 3 --pool-stride 2 --iters 1 --warmup 0"
"$cli" $stem --show-tiling >"$tmp/stem.out" || { echo "stem failed"; fail=1; }
if [ $vector = 1 ]; then
  grep -q '^algorithm      channels-in-lanes direct (direct)' "$tmp/stem.out" || { echo "auto did not take direct for the 7x7 stride-2 stem with vector kernels"; fail=1; }
fi
deep1="--in-channels 512 --out-channels 8 --height 5 --width 5 --filter 1 --pool 1 --iters 1 --warmup 0 --show-tiling"
"$cli" $deep1 >"$tmp/deep1.out" || { echo "deep 1x1 failed"; fail=1; }
if grep -q '^isa            avx512' "$tmp/deep1.out"; then
  grep -q '^algorithm      channels-in-lanes direct (direct)' "$tmp/deep1.out" || { echo "auto did not take direct for a 1x1 over 512 channels on avx512"; fail=1; }
  "$cli" $(echo "$deep1" | sed 's/--in-channels 512/--in-channels 256/') >"$tmp/deep1c.out" || { echo "1x1 over 256 channels failed"; fail=1; }
  grep -q '^algorithm      shift-reduce (sr)' "$tmp/deep1c.out" || { echo "auto did not keep a 1x1 over 256 channels on shift-reduce"; fail=1; }
fi
CONVPOOL_ISA=avx2 "$cli" $deep1 >"$tmp/deep1b.out" || { echo "deep 1x1 (avx2) failed"; fail=1; }
grep -q '^algorithm      shift-reduce (sr)' "$tmp/deep1b.out" || { echo "auto did not keep a 1x1 over 512 channels on shift-reduce below avx512"; fail=1; }
if grep -q '^isa            avx2' "$tmp/deep1b.out"; then # 1024 channels on either side: direct
  for io in "--in-channels 1024" "--in-channels 16 --out-channels 1024"; do
    CONVPOOL_ISA=avx2 "$cli" $deep1 $io | grep -q '^algorithm      channels-in-lanes direct (direct)' || { echo "auto did not take direct for a 1x1 with $io on avx2"; fail=1; }
  done
fi
# direct: items of a few register tiles contract in one pass on AVX-512, larger ones in passes
# whose weights stay in L1; the same sums either way, so the same bytes
# two row groups of a 14-row output (a region per thread, or a panel budget of 8 rows) are
# 7 + 7 rows, not 8 + 6 (cp_even_rows), whatever the L2
"$cli" --impl direct --in-channels 128 --out-channels 256 --height 28 --width 28 --filter 3 --stride 2 --padding 1 --pool 1 --threads 2 --iters 1 --warmup 0 --show-tiling >"$tmp/even.out" || { echo "even rows layer failed"; fail=1; }
if grep -q '^work items .* x row groups 2 x' "$tmp/even.out"; then
  grep -q '^panel          7 pooled rows' "$tmp/even.out" || { echo "two row groups of 14 rows are not 7 + 7"; fail=1; }
fi
onepass="--impl direct --in-channels 64 --out-channels 40 --height 14 --width 14 --padding 1 --activation relu --pool 1 --iters 1 --warmup 0"
"$cli" $onepass --rows-per-item 14 --dump-dir "$tmp/dpass" >/dev/null || { echo "direct in passes failed"; fail=1; }
"$cli" $onepass --rows-per-item 1 --dump-dir "$tmp/d1pass" >/dev/null || { echo "direct in one pass failed"; fail=1; }
cmp -s "$tmp/dpass/out.bin" "$tmp/d1pass/out.bin" || { echo "direct: one pass and passes differ"; fail=1; }
CONVPOOL_ISA=scalar "$cli" $stem --show-tiling >"$tmp/stemp.out" || { echo "stem (scalar) failed"; fail=1; }
grep -q '^algorithm      shift-reduce (sr)' "$tmp/stemp.out" || { echo "auto did not keep the 7x7 stride-2 stem on shift-reduce on the portable kernels"; fail=1; }

# ---- shift-reduce reads a 1x1 layer's source in place only where the L1 stride
# prefetcher follows the planes' stride (Intel: 2 KiB; the caches line says which):
# 256 -> 64 at 56x56 (planes 12.5 KiB apart) is packed there, in place elsewhere;
# at 14x14 (784 bytes) in place on every CPU ----
one="--in-channels 256 --out-channels 64 --filter 1 --pool 1 --iters 1 --warmup 0 --show-tiling"
"$cli" $one --height 56 --width 56 >"$tmp/ip56.out" || { echo "1x1 at 56x56 failed"; fail=1; }
"$cli" $one --height 14 --width 14 >"$tmp/ip14.out" || { echo "1x1 at 14x14 failed"; fail=1; }
grep -q 'an item whose window lies inside the image reads it in place' "$tmp/ip14.out" || { echo "1x1 at 14x14 not read in place"; fail=1; }
if grep -q '^caches .*L1 stride prefetch: strides up to 2048 bytes' "$tmp/ip56.out"; then
  grep -q 'reads it in place' "$tmp/ip56.out" && { echo "1x1 at 56x56 read in place past the stride prefetcher's reach"; fail=1; }
else
  grep -q '^caches .*L1 stride prefetch: any stride' "$tmp/ip56.out" || { echo "caches line: no stride prefetch reach"; fail=1; }
  grep -q 'reads it in place' "$tmp/ip56.out" || { echo "1x1 at 56x56 not read in place"; fail=1; }
fi

# ---- Winograd on small images: a batch's images side by side in one item, the same
# bytes as items of one image each (--rows-per-item keeps the images apart), on 1 and 2
# threads; with a residual, conv padding 2 (the border tiles' direct path), a batch that
# leaves a shorter last group, and 16-bit data; both tile sizes. Auto takes Winograd
# F(4x4,3x3) for 8 images of 512 -> 512 channels at 12x12; hands one image of 7x7 (every
# F(4x4,3x3) tile at a corner, fewer than 16 tiles side by side) on AVX-512 to direct,
# on direct's own weights: the same bytes as --impl direct, and keeps eight there on
# F(4x4,3x3) side by side; with AVX2 alone hands both to F(2x2,3x3): the same bytes as
# --impl winograd2x3; one image of 14x14 to F(2x2,3x3) (U of 8 MiB or more for at
# most 16 tiles); not one of 128 -> 128 channels (U 2.3 MiB) or 8 of 14x14 ----
deep="--in-channels 512 --out-channels 512 --padding 1 --pool 1 --iters 1 --warmup 0 --show-tiling"
"$cli" $deep --height 12 --width 12 --batch 8 | grep -q '^algorithm      winograd (' || { echo "auto did not take Winograd for 8 images at 12x12"; fail=1; }
run_isa() { if [ $isa = native ]; then "$cli" "$@"; else CONVPOOL_ISA=$isa "$cli" "$@"; fi; }
for isa in native avx2; do
  for b in 8 1; do
    run_isa $deep --height 7 --width 7 --batch $b --activation relu --any-shape --dump-dir "$tmp/hand" >"$tmp/hand.out" || { echo "auto at 7x7 ($b images, $isa) failed"; fail=1; }
    if grep -q '^isa            avx512' "$tmp/hand.out" && [ $b = 8 ]; then
      grep -q '^algorithm      winograd (winograd), kernel f32-cl-' "$tmp/hand.out" || { echo "auto did not keep 8 images at 7x7 on Winograd F(4x4,3x3) ($isa)"; fail=1; }
      grep -q '^auto           winograd hands' "$tmp/hand.out" && { echo "auto at 7x7 (8 images, $isa) handed over"; fail=1; }
      continue
    elif grep -q '^isa            avx512' "$tmp/hand.out"; then
      to=direct; name='channels-in-lanes direct (direct)'
    elif grep -q '^isa            avx2' "$tmp/hand.out"; then
      to=winograd2x3; name='winograd2x3 (winograd2x3)'
    else
      continue # the portable kernels: shift-reduce (tested above)
    fi
    grep -q "^algorithm      $name" "$tmp/hand.out" || { echo "auto did not hand $b images at 7x7 to $to ($isa)"; fail=1; }
    grep -q "^auto           winograd hands this run to ${name% (*}" "$tmp/hand.out" || { echo "auto at 7x7 ($b images, $isa): no hand-over line"; fail=1; }
    run_isa $deep --height 7 --width 7 --batch $b --activation relu --impl $to --threads 1 --dump-dir "$tmp/handd" >/dev/null || { echo "$to at 7x7 ($b images, $isa) failed"; fail=1; }
    cmp -s "$tmp/hand/out.bin" "$tmp/handd/out.bin" || { echo "auto's hand-over to $to ($b images at 7x7, $isa) differs from --impl $to"; fail=1; }
  done
done
# the run's own shape (the default): auto settled at create for it, the same algorithm and
# bytes as the operator made for any shape (--any-shape), fewer packed weights
for isa in native avx2; do
  run_isa $deep --height 7 --width 7 --activation relu --dump-dir "$tmp/set" >"$tmp/set.out" || { echo "settled auto at 7x7 ($isa) failed"; fail=1; }
  run_isa $deep --height 7 --width 7 --activation relu --any-shape --dump-dir "$tmp/any" >"$tmp/any.out" || { echo "auto for any shape at 7x7 ($isa) failed"; fail=1; }
  grep -q '^auto           settled at create for the expected shape \[1, 512, 7, 7\]: winograd hands that shape to ' "$tmp/set.out" || { echo "auto at 7x7 ($isa): no settled line"; fail=1; }
  # (the kernel may differ: direct alone may take wider tiles, the same sums)
  [ "$(grep '^algorithm' "$tmp/set.out" | sed 's/, kernel.*//')" = "$(grep '^algorithm' "$tmp/any.out" | sed 's/, kernel.*//')" ] || { echo "settled auto at 7x7 ($isa) runs another algorithm than for any shape"; fail=1; }
  cmp -s "$tmp/set/out.bin" "$tmp/any/out.bin" || { echo "settled auto at 7x7 ($isa) differs from auto for any shape"; fail=1; }
  held=$(sed -n 's/.* the operator holds \([0-9]*\) bytes of packed weights.*/\1/p' "$tmp/any.out")
  packed=$(sed -n 's/^packed weights *\([0-9]*\) bytes.*/\1/p' "$tmp/set.out")
  [ -n "$held" ] && [ -n "$packed" ] && [ "$packed" -lt "$held" ] || { echo "settled auto at 7x7 ($isa): packed '$packed' bytes, not fewer than the '$held' held for any shape"; fail=1; }
done
"$cli" $deep --height 14 --width 14 --batch 1 | grep -q '^algorithm      winograd2x3 (winograd2x3), kernel f32-cl-' || { echo "auto did not hand 1 image at 14x14 to winograd2x3 (or named another kernel than its products')"; fail=1; }
# 256 -> 256 (U 9 MiB): F(2x2,3x3) on AVX-512, F(4x4,3x3) with AVX2 alone (there from U 32 MiB)
for isa in native avx2; do
  run_isa $deep --in-channels 256 --out-channels 256 --height 14 --width 14 >"$tmp/w256.out" || { echo "256 -> 256 at 14x14 ($isa) failed"; fail=1; }
  if grep -q '^isa            avx512' "$tmp/w256.out"; then want='winograd2x3 (winograd2x3)'
  elif grep -q '^isa            avx2' "$tmp/w256.out"; then want='winograd (winograd)'
  else continue; fi
  grep -q "^algorithm      $want" "$tmp/w256.out" || { echo "auto: 256 -> 256 at 14x14 ($isa) not on $want"; fail=1; }
done
"$cli" $deep --height 14 --width 14 --batch 8 | grep -q '^algorithm      winograd (' || { echo "auto handed 8 images at 14x14 over"; fail=1; }
"$cli" $deep --in-channels 128 --out-channels 128 --height 14 --width 14 | grep -q '^algorithm      winograd (' ||
  { echo "auto handed 128 -> 128 at 14x14 over"; fail=1; }
# strided 1x1 filters: auto hands runs of one or two images on AVX-512 to direct (its own
# weights, the source read in place), the same bytes as --impl direct; four images, or
# AVX2 alone, stay on shift-reduce
s1="--in-channels 64 --out-channels 96 --height 20 --width 20 --filter 1 --stride 2 --pool 1 --iters 1 --warmup 0 --show-tiling"
for isa in native avx2; do
  for b in 1 2 4; do
    run_isa $s1 --batch $b --any-shape --dump-dir "$tmp/s1" >"$tmp/s1.out" || { echo "auto strided 1x1 ($b images, $isa) failed"; fail=1; }
    if grep -q '^isa            avx512' "$tmp/s1.out" && [ $b -le 2 ]; then
      to=direct; name='channels-in-lanes direct (direct)'
      grep -q "^auto           shift-reduce hands this run to channels-in-lanes direct" "$tmp/s1.out" || { echo "auto strided 1x1 ($b images, $isa): no hand-over line"; fail=1; }
    elif grep -q '^isa            avx' "$tmp/s1.out"; then
      to=sr; name='shift-reduce (sr)'
    else
      continue # the portable kernels: auto's choice there is tested above
    fi
    grep -q "^algorithm      $name" "$tmp/s1.out" || { echo "auto strided 1x1 ($b images, $isa) not on $to"; fail=1; }
    run_isa $s1 --batch $b --impl $to --threads 1 --dump-dir "$tmp/s1d" >/dev/null || { echo "$to strided 1x1 ($b images, $isa) failed"; fail=1; }
    cmp -s "$tmp/s1/out.bin" "$tmp/s1d/out.bin" || { echo "auto strided 1x1 ($b images, $isa) differs from --impl $to"; fail=1; }
  done
done
# bfloat16 where the CPU has the pair kernels (isa avx512bf16): auto takes shift-reduce on
# them, which hands a 3x3 layer's conv outputs of at most 14x14 over >= 256 input channels
# to direct (its pair kernels), keeps the rest under 14x14 and hands larger ones to Winograd
# F(4x4,3x3) where Winograd would keep them (each the same bytes as --impl of it); direct
# takes 1x1 over >= 1024 input channels and strided k >= 3 on its pair kernels. With avx512
# alone (no pairs) the fp32 rules stay: Winograd, direct.
b3="--dtype bfloat16 --in-channels 64 --out-channels 64 --filter 3 --padding 1 --pool 1 --activation relu --iters 1 --warmup 0 --show-tiling"
for isa in native avx512; do
  run_isa $b3 --height 7 --width 7 >"$tmp/b7.out" || { echo "bf16 auto at 7x7 ($isa) failed"; fail=1; }
  if grep -q '^isa            avx512bf16' "$tmp/b7.out"; then
    grep -q '^algorithm      shift-reduce (sr), kernel bf16-sr-' "$tmp/b7.out" || { echo "bf16 auto at 7x7 ($isa): not on shift-reduce's pair kernels"; fail=1; }
    grep -q '^auto           winograd: passed over: bfloat16 with the pair kernels' "$tmp/b7.out" || { echo "bf16 auto at 7x7 ($isa): no reason for passing Winograd over"; fail=1; }
    run_isa $b3 --height 20 --width 20 --batch 2 --any-shape --dump-dir "$tmp/b20" >"$tmp/b20.out" || { echo "bf16 auto at 20x20 ($isa) failed"; fail=1; }
    grep -q '^algorithm      winograd (winograd)' "$tmp/b20.out" || { echo "bf16 auto at 20x20 ($isa): not handed to Winograd"; fail=1; }
    grep -q '^auto           shift-reduce hands this run to winograd' "$tmp/b20.out" || { echo "bf16 auto at 20x20 ($isa): no hand-over line"; fail=1; }
    run_isa $b3 --height 20 --width 20 --batch 2 --impl winograd --threads 1 --dump-dir "$tmp/b20w" >/dev/null || { echo "bf16 winograd at 20x20 ($isa) failed"; fail=1; }
    cmp -s "$tmp/b20/out.bin" "$tmp/b20w/out.bin" || { echo "bf16 auto's hand-over to winograd ($isa) differs from --impl winograd"; fail=1; }
    # 256 channels: 9x9 to direct's pair kernels, 20x20 still to Winograd
    b256="--dtype bfloat16 --in-channels 256 --out-channels 72 --filter 3 --padding 1 --pool 1 --activation relu --iters 1 --warmup 0 --show-tiling --batch 2"
    run_isa $b256 --height 9 --width 9 --any-shape --dump-dir "$tmp/b9" >"$tmp/b9.out" || { echo "bf16 auto 256 ch at 9x9 ($isa) failed"; fail=1; }
    grep -q '^algorithm      channels-in-lanes direct (direct), kernel bf16-cl-' "$tmp/b9.out" || { echo "bf16 auto 256 ch at 9x9 ($isa): not on direct's pair kernels"; fail=1; }
    grep -q '^auto           shift-reduce hands this run to channels-in-lanes direct' "$tmp/b9.out" || { echo "bf16 auto 256 ch at 9x9 ($isa): no hand-over line"; fail=1; }
    run_isa $b256 --height 9 --width 9 --impl direct --threads 1 --dump-dir "$tmp/b9d" >/dev/null || { echo "bf16 direct 256 ch at 9x9 ($isa) failed"; fail=1; }
    cmp -s "$tmp/b9/out.bin" "$tmp/b9d/out.bin" || { echo "bf16 auto's hand-over to direct ($isa) differs from --impl direct"; fail=1; }
    run_isa $b256 --height 20 --width 20 >"$tmp/b256w.out" || { echo "bf16 auto 256 ch at 20x20 ($isa) failed"; fail=1; }
    grep -q '^algorithm      winograd (winograd)' "$tmp/b256w.out" || { echo "bf16 auto 256 ch at 20x20 ($isa): not handed to Winograd"; fail=1; }
    want1='shift-reduce (sr), kernel bf16-sr-'
    wantd='channels-in-lanes direct (direct), kernel bf16-cl-'
  elif grep -q '^isa            avx512' "$tmp/b7.out"; then
    grep -q 'passed over: bfloat16 with the pair kernels' "$tmp/b7.out" && { echo "bf16 auto at 7x7 ($isa) applied the pair kernels' rule without them"; fail=1; }
    want1='channels-in-lanes direct (direct)'
    wantd='channels-in-lanes direct (direct), kernel f32-cl-'
  else
    continue
  fi
  run_isa --dtype bfloat16 --in-channels 512 --out-channels 64 --height 7 --width 7 --filter 1 --pool 1 --iters 1 --warmup 0 --show-tiling >"$tmp/b1x1.out" || { echo "bf16 1x1 ($isa) failed"; fail=1; }
  grep -q "^algorithm      $want1" "$tmp/b1x1.out" || { echo "bf16 512 -> 64 1x1 ($isa): not on $want1"; fail=1; }
  run_isa --dtype bfloat16 --in-channels 1024 --out-channels 40 --height 7 --width 7 --filter 1 --pool 1 --iters 1 --warmup 0 --show-tiling >"$tmp/b1x1d.out" || { echo "bf16 1024 -> 40 1x1 ($isa) failed"; fail=1; }
  grep -q "^algorithm      $wantd" "$tmp/b1x1d.out" || { echo "bf16 1024 -> 40 1x1 ($isa): not on $wantd"; fail=1; }
  # a stem-like 7x7 stride 2 and a 3x3 stride 2 are direct's
  run_isa --dtype bfloat16 --in-channels 3 --out-channels 32 --height 40 --width 40 --filter 7 --stride 2 --padding 3 --pool 3 --pool-stride 2 --pool-padding 1 --iters 1 --warmup 0 --show-tiling >"$tmp/b7s2.out" || { echo "bf16 7x7 stride 2 ($isa) failed"; fail=1; }
  grep -q "^algorithm      $wantd" "$tmp/b7s2.out" || { echo "bf16 7x7 stride 2 ($isa): not on $wantd"; fail=1; }
  run_isa --dtype bfloat16 --in-channels 32 --out-channels 64 --height 20 --width 20 --filter 3 --stride 2 --padding 1 --pool 1 --iters 1 --warmup 0 --show-tiling >"$tmp/b3s2.out" || { echo "bf16 3x3 stride 2 ($isa) failed"; fail=1; }
  grep -q "^algorithm      $wantd" "$tmp/b3s2.out" || { echo "bf16 3x3 stride 2 ($isa): not on $wantd"; fail=1; }
done
# V's budget grows with U (36 MiB here): the 7 tile rows of a 28x28 image in one item,
# U streamed once, not 6 + 1 rows in two items
"$cli" $deep --height 28 --width 28 --impl winograd | grep -q '^work items     .* x row groups 1 x ' ||
  { echo "Winograd split a 512 -> 512 image of 28x28 into row groups (U streamed twice)"; fail=1; }
# items of one tile row where U (576 KiB), V and M (~310 KiB) fit in L2 and give the two
# threads their 8 items without channel groups; with 128 -> 32 channels at 28x28 (7 tile
# rows) they would not, and its split keeps channel groups of larger items (one item of
# all 7 rows with 1 MiB of L2, 3 row groups with 2 MiB: 0.21 ms either way on a Xeon)
w56="--in-channels 64 --out-channels 64 --height 56 --width 56 --padding 1 --pool 1 --iters 1 --warmup 0 --show-tiling --impl winograd --threads 2"
"$cli" $w56 >"$tmp/w56.out" || { echo "Winograd 64 -> 64 at 56x56 failed"; fail=1; }
l2=$(sed -n 's/^caches .*L2 \([0-9]*\) KiB.*/\1/p' "$tmp/w56.out")
if [ -n "$l2" ] && [ "$l2" -ge 1024 ]; then
  grep -q '^work items     14 = batch 1 x row groups 14 x column blocks 1 x channel groups 1 ' "$tmp/w56.out" ||
    { echo "Winograd 64 -> 64 at 56x56 with L2 $l2 KiB: not 14 items of one tile row"; fail=1; }
  "$cli" $w56 --in-channels 128 --out-channels 32 --height 28 --width 28 | grep -q '^work items     .* x row groups 7 x ' &&
    { echo "Winograd 128 -> 32 at 28x28: split into items of one tile row"; fail=1; }
else
  echo "skip: Winograd's one-row items need 1 MiB of L2 (caches line: L2 ${l2:-unknown} KiB)"
fi
for side in "--batch 8 --in-channels 48 --out-channels 13 --height 7 --width 7 --padding 1 --activation relu --pool 1" \
            "--batch 5 --in-channels 24 --out-channels 9 --height 6 --width 5 --padding 2 --pool 2 --pool-padding 1 --ceil-mode --residual" \
            "--batch 9 --in-channels 600 --out-channels 12 --height 7 --width 6 --padding 1 --pool 3 --pool-stride 2" \
            "--dtype bfloat16 --batch 3 --in-channels 40 --out-channels 17 --height 5 --width 7 --padding 1 --pool 1"; do
  for wino in winograd winograd2x3; do
    "$cli" $side --iters 1 --warmup 0 --impl $wino --show-tiling --dump-dir "$tmp/sbs" >"$tmp/sbs.out" ||
      { echo "side by side ($wino): run failed: $side"; fail=1; }
    grep -q 'images side by side' "$tmp/sbs.out" || { echo "side by side ($wino): the images were not side by side: $side"; fail=1; }
    "$cli" $side --iters 1 --warmup 0 --impl $wino --rows-per-item 1 --dump-dir "$tmp/sbs1" >/dev/null ||
      { echo "side by side ($wino): one image per item failed: $side"; fail=1; }
    "$cli" $side --iters 1 --warmup 0 --impl $wino --threads 1 --dump-dir "$tmp/sbs2" >/dev/null ||
      { echo "side by side ($wino): 1 thread failed: $side"; fail=1; }
    cmp -s "$tmp/sbs/out.bin" "$tmp/sbs1/out.bin" || { echo "side by side ($wino) differs from one image per item: $side"; fail=1; }
    cmp -s "$tmp/sbs/out.bin" "$tmp/sbs2/out.bin" || { echo "side by side ($wino) differs on 1 thread: $side"; fail=1; }
  done
done

# ---- CONVPOOL_VERBOSE: the library's lines on stderr, none without it ----
# One line at create (algorithm, kernel, layer shape, threads), one per run
# (2 warm-up + 3 timed: shapes, threads, items, time), none on stdout.
verbose_flags="$small --iters 3 --warmup 2 --padding 1 --activation relu6"
CONVPOOL_VERBOSE=1 "$cli" $verbose_flags >"$tmp/v.out" 2>"$tmp/v.err" || { echo "verbose run failed"; fail=1; }
creates=$(grep -c '^convpool: create op 0x[0-9a-f]*: float32 w \[7, 5, 3, 3\] bias pad 1,1,1,1 clamp \[0, 6\] pool 2/2: [a-z0-9]*, kernel [a-z0-9x-]* ([a-z0-9]*), 2 threads$' "$tmp/v.err")
runs=$(grep -c '^convpool: run op 0x[0-9a-f]*: \[2, 5, 19, 23\] -> \[2, 7, 9, 11\]: [a-z0-9]*, kernel [a-z0-9x-]*, [0-9]* threads*, [0-9]* items: [0-9.]* ms$' "$tmp/v.err")
lines=$(wc -l <"$tmp/v.err")
[ "$creates" -eq 1 ] && [ "$runs" -eq 5 ] && [ "$lines" -eq 6 ] || {
  echo "CONVPOOL_VERBOSE=1: expected 1 create and 5 run lines on stderr, got:"; cat "$tmp/v.err"; fail=1; }
grep -q '^convpool:' "$tmp/v.out" && { echo "CONVPOOL_VERBOSE=1 wrote to stdout"; fail=1; }
for quiet in "" 0; do
  CONVPOOL_VERBOSE=$quiet "$cli" $verbose_flags >/dev/null 2>"$tmp/q.err" || { echo "quiet run failed"; fail=1; }
  [ ! -s "$tmp/q.err" ] || { echo "CONVPOOL_VERBOSE='$quiet' printed:"; cat "$tmp/q.err"; fail=1; }
done
env -u CONVPOOL_VERBOSE "$cli" $verbose_flags >/dev/null 2>"$tmp/q.err"
[ ! -s "$tmp/q.err" ] || { echo "without CONVPOOL_VERBOSE the library printed:"; cat "$tmp/q.err"; fail=1; }

# ---- CONVPOOL_L3_KIB: the L3 the plans are made for, or ignored, said so ----
CONVPOOL_L3_KIB=1024 "$cli" $small --iters 1 --warmup 0 --show-tiling >"$tmp/l3.out" ||
  { echo "CONVPOOL_L3_KIB=1024 run failed"; fail=1; }
grep -q '^caches .* L3 1024 KiB ([a-z ]*; L3 from CONVPOOL_L3_KIB)' "$tmp/l3.out" ||
  { echo "CONVPOOL_L3_KIB=1024: the plan does not say so:"; grep '^caches' "$tmp/l3.out"; fail=1; }
for bad in abc 12 1024x -5; do
  CONVPOOL_L3_KIB=$bad "$cli" $small --iters 1 --warmup 0 --show-tiling >"$tmp/l3b.out" ||
    { echo "CONVPOOL_L3_KIB=$bad run failed"; fail=1; }
  grep -q '^caches .*CONVPOOL_L3_KIB not recognised, ignored' "$tmp/l3b.out" ||
    { echo "CONVPOOL_L3_KIB=$bad: not said to be ignored:"; grep '^caches' "$tmp/l3b.out"; fail=1; }
done

# ---- CONVPOOL_DIRECT_MR: direct's tiles of 64 or 32 channels, the same bytes ----
wide="--in-channels 72 --out-channels 136 --height 9 --width 7 --padding 1 --pool 2 --activation relu --impl direct --iters 1 --warmup 0"
if "$cli" $wide --show-tiling | grep -q '^isa            avx512'; then
  for mr in 32 64; do
    CONVPOOL_DIRECT_MR=$mr "$cli" $wide --show-tiling --dump-dir "$tmp/mr$mr" >"$tmp/mr$mr.out" ||
      { echo "CONVPOOL_DIRECT_MR=$mr run failed"; fail=1; }
    grep -q "^register tile  $mr output channels .*tiles of $mr channels (CONVPOOL_DIRECT_MR)" "$tmp/mr$mr.out" ||
      { echo "CONVPOOL_DIRECT_MR=$mr: not $mr-channel tiles:"; grep '^register' "$tmp/mr$mr.out"; fail=1; }
  done
  cmp -s "$tmp/mr32/out.bin" "$tmp/mr64/out.bin" || { echo "direct's 64-channel tiles changed the bytes"; fail=1; }
  CONVPOOL_DIRECT_MR=48 "$cli" $wide --show-tiling | grep -q '^register tile .*CONVPOOL_DIRECT_MR not recognised, ignored' ||
    { echo "CONVPOOL_DIRECT_MR=48: not said to be ignored"; fail=1; }
  # capped to AVX2, the plan does not speak of AVX-512 tiles
  CONVPOOL_ISA=avx2 "$cli" $wide --show-tiling | grep -q '^register tile .*AVX-512' &&
    { echo "direct under CONVPOOL_ISA=avx2 describes AVX-512 tiles"; fail=1; }
else
  echo "skip: direct's 64-channel tiles are AVX-512's (this CPU has no AVX-512)"
fi

[ $fail -eq 0 ] && echo "cli: all checks passed"
exit $fail
