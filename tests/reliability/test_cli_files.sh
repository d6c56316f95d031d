#!/bin/sh
# Hostile --load-dir directories for the CLI.
#
# Every case starts from a good dump, breaks one thing (file sizes, dtype,
# meta.json content, file types, missing files) and runs `convpool
# --load-dir`. Each must give exit code 2 and exactly one line on stderr
# ("convpool: error: ..."), leave out.bin as it was (absent, or the previous
# out.bin byte for byte) with no temporary file left behind, and leave every
# input file unmodified (md5 before and after). Good directories, loaded the
# same way, must reproduce the dumped out.bin (positive controls).
#
# Usage: test_cli_files.sh path/to/convpool
set -u
cli=${1:?usage: test_cli_files.sh path/to/convpool}
tmp=$(mktemp -d)
mounts="" # tmpfs mounted by the writing cases, unmounted at exit
cleanup() {
  for m in $mounts; do umount "$m" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
cases=0
refused=0
limit=10 # seconds per run; a run that blocks is a failure

shape="--batch 2 --in-channels 3 --out-channels 4 --height 10 --width 9 --filter 3 --pool 2"
# $shape is split into words on purpose below.
# shellcheck disable=SC2086
"$cli" $shape --threads 2 --iters 1 --warmup 0 --dump-dir "$tmp/good32" >/dev/null ||
  { echo "FAIL: cannot make the float32 dump"; exit 1; }
# shellcheck disable=SC2086
"$cli" $shape --dtype float16 --no-bias --threads 1 --iters 1 --warmup 0 \
  --dump-dir "$tmp/good16" >/dev/null || { echo "FAIL: cannot make the float16 dump"; exit 1; }
# shellcheck disable=SC2086
"$cli" $shape --dtype bfloat16 --threads 3 --iters 1 --warmup 0 \
  --dump-dir "$tmp/goodbf16" >/dev/null || { echo "FAIL: cannot make the bfloat16 dump"; exit 1; }
# The layer keys: padding, a clamp, pool stride and padding, ceil sizing.
layer="--padding 1,0,2,1 --activation clamp:1,2.5 --pool 3 --pool-stride 2 --pool-padding 1 --ceil-mode"
# shellcheck disable=SC2086
"$cli" $shape $layer --threads 2 --iters 1 --warmup 0 --dump-dir "$tmp/goodlayer" >/dev/null ||
  { echo "FAIL: cannot make the layer dump"; exit 1; }
# shellcheck disable=SC2086
"$cli" $shape --activation relu6 --padding 1 --threads 1 --iters 1 --warmup 0 \
  --dump-dir "$tmp/goodrelu6" >/dev/null || { echo "FAIL: cannot make the relu6 dump"; exit 1; }
# The conv keys: stride, dilation, a residual (residual.bin).
# shellcheck disable=SC2086
"$cli" $shape --stride 2 --dilation 2 --padding 2 --residual --threads 2 --iters 1 --warmup 0 \
  --dump-dir "$tmp/goodres" >/dev/null || { echo "FAIL: cannot make the residual dump"; exit 1; }

# md5 of every regular input file (not out.bin) under $1, in a stable order.
inputs_md5() {
  (cd "$1" && find . -type f ! -name out.bin ! -name 'out.bin.tmp.*' | LC_ALL=C sort |
    while read -r f; do md5sum "$f"; done)
}

# listing DIR: the names in DIR, sorted, one per line. The links the writing
# cases plant at pid-dependent names are shown as NAME.tmp.PID (to the
# victim) and NAME.tmp.PID+1 (dangling).
listing() {
  (cd "$1" && LC_ALL=C ls -A | while read -r f; do
    base=${f%.tmp.*}
    if [ "$base" != "$f" ] && [ -L "$f" ] && [ "$f" != "$base.tmp.0" ]; then
      case $(readlink "$f") in
        "$tmp/victim") f="$base.tmp.PID" ;;
        "$tmp/dangling.$base") f="$base.tmp.PID+1" ;;
      esac
    fi
    printf '%s\n' "$f"
  done | LC_ALL=C sort)
}

# try_mount DIR: mount a 64 KiB tmpfs at DIR (made); the reason of a failure
# is left in $tmp/mount-err.
try_mount() {
  mkdir -p "$1"
  mount -t tmpfs -o size=64k convpool-test "$1" 2>"$tmp/mount-err" || return 1
  mounts="$1 $mounts"
}

# new_dir NAME [SOURCE]: a copy of the good dump without out.bin; prints its path.
new_dir() {
  d="$tmp/case-$1"
  mkdir "$d"
  src="$tmp/${2:-good32}"
  for f in meta.json x.bin w.bin bias.bin residual.bin; do
    [ -e "$src/$f" ] && cp "$src/$f" "$d/"
  done
  echo "$d"
}

# set_meta DIR SED-EXPRESSION: edit DIR/meta.json.
set_meta() { sed -i "$2" "$1/meta.json"; }

# expect_refused NAME DIR [EXPECTED-TEXT]: the checks described at the top.
# Every other case gets a "previous" out.bin that must survive unchanged.
expect_refused() {
  name=$1 dir=$2 expect=${3:-}
  cases=$((cases + 1))
  if [ $((cases % 2)) -eq 0 ] && [ -d "$dir" ] && [ ! -e "$dir/out.bin" ]; then
    printf 'previous out.bin\n' > "$dir/out.bin"
  fi
  before_out=absent
  [ -f "$dir/out.bin" ] && before_out=$(md5sum < "$dir/out.bin")
  before_in="" before_list=""
  [ -d "$dir" ] && before_in=$(inputs_md5 "$dir") && before_list=$(listing "$dir")
  timeout "$limit" "$cli" --load-dir "$dir" >"$tmp/stdout" 2>"$tmp/stderr"
  rc=$?
  lines=$(wc -l < "$tmp/stderr")
  msg=$(cat "$tmp/stderr")
  problems=""
  [ "$rc" -eq 2 ] || problems="$problems exit code $rc (want 2);"
  [ "$rc" -ne 124 ] || problems="$problems timed out after ${limit}s;"
  [ "$lines" -eq 1 ] || problems="$problems $lines lines on stderr (want 1);"
  case $msg in
    "convpool: error: "*) ;;
    *) problems="$problems stderr does not start with 'convpool: error: ';" ;;
  esac
  if [ -n "$expect" ] && ! grep -q -- "$expect" "$tmp/stderr"; then
    problems="$problems message does not contain '$expect';"
  fi
  after_out=absent
  [ -f "$dir/out.bin" ] && after_out=$(md5sum < "$dir/out.bin")
  [ "$before_out" = "$after_out" ] || problems="$problems out.bin was written;"
  if [ -d "$dir" ]; then
    [ "$before_list" = "$(listing "$dir")" ] || problems="$problems a file was added or removed;"
    [ "$before_in" = "$(inputs_md5 "$dir")" ] || problems="$problems an input file changed;"
  fi
  if [ -n "$problems" ]; then
    echo "FAIL: $name:$problems"
    echo "      stderr: $(printf '%s' "$msg" | head -c 400 | tr '\n' '|' | LC_ALL=C tr -c '[:print:]|' '?')"
    fail=1
  else
    refused=$((refused + 1))
    echo "refused: $name -> $msg"
  fi
}

# expect_loaded NAME DIR REFERENCE-OUT: a good directory reproduces the dump.
expect_loaded() {
  cases=$((cases + 1))
  before_in=$(inputs_md5 "$2")
  if ! timeout "$limit" "$cli" --load-dir "$2" >/dev/null 2>"$tmp/stderr"; then
    echo "FAIL: $1: the good directory was refused: $(cat "$tmp/stderr")"
    fail=1
  elif [ -s "$tmp/stderr" ]; then
    echo "FAIL: $1: stderr is not empty: $(cat "$tmp/stderr")"
    fail=1
  elif ! cmp -s "$2/out.bin" "$3"; then
    echo "FAIL: $1: out.bin differs from the dump"
    fail=1
  elif [ "$before_in" != "$(inputs_md5 "$2")" ]; then
    echo "FAIL: $1: an input file changed"
    fail=1
  else
    echo "loaded: $1"
  fi
}

# ---- positive controls ----
expect_loaded "float32 dump" "$(new_dir ok32)" "$tmp/good32/out.bin"
expect_loaded "float16 dump without bias" "$(new_dir ok16 good16)" "$tmp/good16/out.bin"
expect_loaded "bfloat16 dump" "$(new_dir okbf16 goodbf16)" "$tmp/goodbf16/out.bin"
d=$(new_dir okprev)
printf 'stale' > "$d/out.bin"
expect_loaded "float32 dump over a stale out.bin" "$d" "$tmp/good32/out.bin"
d=$(new_dir okextra)
set_meta "$d" 's/"seed": 0/"seed": 0, "comment": "made by hand", "version": 1.5e3/'
expect_loaded "meta.json with unknown keys" "$d" "$tmp/good32/out.bin"
# Valid JSON that the parser used to refuse (RFC 8259, as Python writes it).
d=$(new_dir oknest)
set_meta "$d" 's/"seed": 0/"seed": 0, "x": {"y": [1, -2.5e-3, null, {"z": []}]}, "n": null/'
expect_loaded "nested values under unknown keys" "$d" "$tmp/good32/out.bin"
d=$(new_dir okbom); { printf '\357\273\277'; cat "$tmp/good32/meta.json"; } > "$d/meta.json"
expect_loaded "meta.json with a UTF-8 byte order mark (skipped)" "$d" "$tmp/good32/out.bin"
d=$(new_dir okescape)
set_meta "$d" 's/"float32"/"\\u0066loat\\u0033\\u0032"/; s/"batch"/"\\u0062atch"/'
expect_loaded "\\u escapes in dtype and in a key" "$d" "$tmp/good32/out.bin"
d=$(new_dir oksurrogates)
set_meta "$d" 's|"seed": 0|"seed": 0, "emoji": "\\ud83d\\ude00", "lone": "\\udc00\\ud800", "\\ud800": "\\b\\f\\n\\r\\t\\/\\"\\\\"|'
expect_loaded "surrogate pairs, lone surrogates and every escape" "$d" "$tmp/good32/out.bin"
d=$(new_dir ok512)
{ printf '{"deep": '; i=0; while [ $i -lt 511 ]; do printf '['; i=$((i + 1)); done
  i=0; while [ $i -lt 511 ]; do printf ']'; i=$((i + 1)); done
  printf ', '; tail -c +2 "$tmp/good32/meta.json"; } > "$d/meta.json"
expect_loaded "valid JSON nested 512 deep (the limit)" "$d" "$tmp/good32/out.bin"
d=$(new_dir okpython)
if /usr/bin/python3 -c 'import json, sys
m = {"dtype": "float32", "batch": 2, "in_channels": 3, "out_channels": 4, "height": 10,
     "width": 9, "filter": 3, "pool": 2, "bias": True, "seed": 0,
     "note": "caf\u00e9 \U0001f600", "tags": ["x", {"y": None}]}
json.dump(m, open(sys.argv[1] + "/meta.json", "w"), indent=1)' "$d" 2>/dev/null; then
  expect_loaded "meta.json written by Python's json.dump (\\u escapes)" "$d" "$tmp/good32/out.bin"
else
  echo "skipped: a meta.json from Python's json.dump (/usr/bin/python3 is not available)"
fi

# The layer keys of meta.json.
d=$(new_dir oklayer goodlayer)
expect_loaded "dump with padding, clamp, pool stride, pool padding, ceil mode" "$d" "$tmp/goodlayer/out.bin"
expect_loaded "dump with stride, dilation and a residual" "$(new_dir okres goodres)" \
  "$tmp/goodres/out.bin"
d=$(new_dir okold)
set_meta "$d" '/"padding"\|"activation"\|"pool_stride"\|"pool_padding"\|"ceil_mode"\|"stride"\|"dilation"\|"groups"\|"residual"/d; s/"seed": 0,/"seed": 0/'
if grep -q '"padding"\|"ceil_mode"' "$d/meta.json"; then
  echo "FAIL: the layer keys were not removed"; fail=1
fi
expect_loaded "meta.json without the layer keys (the defaults)" "$d" "$tmp/good32/out.bin"
d=$(new_dir okrelu6 goodrelu6)
set_meta "$d" 's/{"clamp": \[0, 6\]}/"relu6"/'
expect_loaded "activation \"relu6\" for the dump's {\"clamp\": [0, 6]}" "$d" "$tmp/goodrelu6/out.bin"
d=$(new_dir oklayerforms goodlayer)
set_meta "$d" 's/"activation": {"clamp": \[1, 2.5\]}/"\\u0061ctivation": { "clamp" : [ 1.0e0 , 25E-1 ] }/; s/"pool_padding": \[1, 1, 1, 1\]/"pool_padding":[1,1,1,1]/'
expect_loaded "layer keys: an escaped key, other number forms, no spaces" "$d" "$tmp/goodlayer/out.bin"

# ---- tensor files ----
d=$(new_dir x-short); head -c 2159 "$tmp/good32/x.bin" > "$d/x.bin"
expect_refused "x.bin one byte short" "$d" "x.bin"
d=$(new_dir x-empty); : > "$d/x.bin"
expect_refused "x.bin empty" "$d" "x.bin"
d=$(new_dir x-long); printf '\0' >> "$d/x.bin"
expect_refused "x.bin one byte too long" "$d" "x.bin"
d=$(new_dir x-double); cat "$tmp/good32/x.bin" >> "$d/x.bin"
expect_refused "x.bin twice as long" "$d" "x.bin"
d=$(new_dir w-short); head -c 400 "$tmp/good32/w.bin" > "$d/w.bin"
expect_refused "w.bin truncated" "$d" "w.bin"
d=$(new_dir w-long); cat "$tmp/good32/w.bin" >> "$d/w.bin"
expect_refused "w.bin too long" "$d" "w.bin"
d=$(new_dir b-short); head -c 15 "$tmp/good32/bias.bin" > "$d/bias.bin"
expect_refused "bias.bin truncated" "$d" "bias.bin"
d=$(new_dir x-missing); rm "$d/x.bin"
expect_refused "x.bin missing" "$d" "x.bin"
d=$(new_dir w-missing); rm "$d/w.bin"
expect_refused "w.bin missing" "$d" "w.bin"
d=$(new_dir b-missing); rm "$d/bias.bin"
expect_refused "bias.bin missing while bias is true" "$d" "bias.bin"
d=$(new_dir x-dir); rm "$d/x.bin"; mkdir "$d/x.bin"
expect_refused "x.bin is a directory" "$d" "x.bin"
d=$(new_dir x-dev); rm "$d/x.bin"; ln -s /dev/zero "$d/x.bin"
expect_refused "x.bin is a link to /dev/zero" "$d" "x.bin"
d=$(new_dir x-fifo); rm "$d/x.bin"
if mkfifo "$d/x.bin" 2>/dev/null; then
  expect_refused "x.bin is a FIFO with no writer" "$d" "x.bin"
else
  echo "skipped: x.bin is a FIFO (mkfifo is not available here)"
fi

# ---- dtype against the file sizes ----
d=$(new_dir as16); set_meta "$d" 's/"float32"/"float16"/'
expect_refused "float32 files, meta.json says float16" "$d" "bytes"
d=$(new_dir as32 good16); set_meta "$d" 's/"float16"/"float32"/'
expect_refused "float16 files, meta.json says float32" "$d" "bytes"
d=$(new_dir bf16); set_meta "$d" 's/"float32"/"bfloat16"/'
expect_refused "float32 files, meta.json says bfloat16" "$d" "bytes"
d=$(new_dir bf16as32 goodbf16); set_meta "$d" 's/"bfloat16"/"float32"/'
expect_refused "bfloat16 files, meta.json says float32" "$d" "bytes"
d=$(new_dir f64); set_meta "$d" 's/"float32"/"float64"/'
expect_refused "dtype float64" "$d" "float64"
d=$(new_dir dtnum); set_meta "$d" 's/"float32"/32/'
expect_refused "dtype is a number" "$d"

# ---- numbers ----
d=$(new_dir h-huge); set_meta "$d" 's/"height": 10/"height": 4611686018427387904/'
expect_refused "height 2^62 (byte count overflows)" "$d" "overflows"
d=$(new_dir c-huge); set_meta "$d" 's/"in_channels": 3/"in_channels": 1099511627776/'
expect_refused "in_channels 2^40 (files far too small)" "$d" "x.bin"
d=$(new_dir w-huge); set_meta "$d" 's/"width": 9/"width": 2147483648/'
expect_refused "width 2^31" "$d"
d=$(new_dir h-over); set_meta "$d" 's/"height": 10/"height": 4611686018427387905/'
expect_refused "height 2^62 + 1 (beyond the parser's range)" "$d" "too large"
d=$(new_dir h-wrap); set_meta "$d" 's/"height": 10/"height": 18446744073709551626/'
expect_refused "height 2^64 + 10 (wraps to 10 in 64 bits)" "$d" "height"
d=$(new_dir h-long); set_meta "$d" 's/"height": 10/"height": 100000000000000000000000000000000000000000/'
expect_refused "height with 42 digits" "$d" "height"
d=$(new_dir b-neg); set_meta "$d" 's/"batch": 2/"batch": -2/'
expect_refused "batch -2" "$d" "batch"
d=$(new_dir p-zero); set_meta "$d" 's/"pool": 2/"pool": 0/'
expect_refused "pool 0" "$d" "pool"
d=$(new_dir f-zero); set_meta "$d" 's/"filter": 3/"filter": 0/'
expect_refused "filter 0" "$d" "filter"
d=$(new_dir neg0); set_meta "$d" 's/"out_channels": 4/"out_channels": -0/'
expect_refused "out_channels -0" "$d" "out_channels"
d=$(new_dir frac); set_meta "$d" 's/"batch": 2/"batch": 2.0/'
expect_refused "batch 2.0" "$d" "batch"
d=$(new_dir expo); set_meta "$d" 's/"batch": 2/"batch": 2e0/'
expect_refused "batch 2e0" "$d" "batch"
d=$(new_dir k-big); set_meta "$d" 's/"filter": 3/"filter": 11/'
expect_refused "filter 11 larger than the 10x9 input" "$d" "filter"
d=$(new_dir p-big); set_meta "$d" 's/"pool": 2/"pool": 8/'
expect_refused "pool 8 larger than the 8x7 conv output" "$d" "pool"
d=$(new_dir bias-int); set_meta "$d" 's/"bias": true/"bias": 1/'
expect_refused "bias 1" "$d" "bias"
d=$(new_dir lead0); set_meta "$d" 's/"height": 10/"height": 010/'
expect_refused "height 010 (a leading zero is not JSON)" "$d" "leading zero"
d=$(new_dir lead0-extra); set_meta "$d" 's/"seed": 0/"seed": 0, "x": 00/'
expect_refused "unknown key with value 00" "$d" "leading zero"
d=$(new_dir bareword); set_meta "$d" 's/"seed": 0/"seed": 0, "x": foo/'
expect_refused "unknown key with a bare word" "$d" "not true, false or null"
d=$(new_dir nan); set_meta "$d" 's/"seed": 0/"seed": 0, "x": NaN/'
expect_refused "unknown key with NaN" "$d" "found 'N'"
d=$(new_dir truex); set_meta "$d" 's/"bias": true/"bias": truex/'
expect_refused "bias truex" "$d"
d=$(new_dir plus); set_meta "$d" 's/"seed": 0/"seed": +0/'
expect_refused "seed +0" "$d" "found '+'"
d=$(new_dir dot); set_meta "$d" 's/"seed": 0/"seed": 0, "x": 1./'
expect_refused "unknown key with value 1." "$d" "decimal point"
d=$(new_dir trailing-comma); set_meta "$d" 's/"seed": 0/"seed": 0,/'
expect_refused "a comma before the closing brace" "$d" "string key"

# ---- the layer keys ----
d=$(new_dir pad3 goodlayer); set_meta "$d" 's/"padding": \[1, 0, 2, 1\]/"padding": [1, 0, 2]/'
expect_refused "padding with 3 items" "$d" '"padding" has 3 items'
d=$(new_dir pad5 goodlayer); set_meta "$d" 's/"padding": \[1, 0, 2, 1\]/"padding": [1, 0, 2, 1, 0]/'
expect_refused "padding with 5 items" "$d" '"padding" has 5 items'
d=$(new_dir padnum goodlayer); set_meta "$d" 's/"padding": \[1, 0, 2, 1\]/"padding": 1/'
expect_refused "padding a number" "$d" '"padding" must be an array of 4 integers'
d=$(new_dir padneg goodlayer); set_meta "$d" 's/"padding": \[1, 0, 2, 1\]/"padding": [1, -1, 2, 1]/'
expect_refused "padding item -1" "$d" '"padding"\[1\] = -1 must not be negative'
d=$(new_dir padfrac goodlayer); set_meta "$d" 's/"padding": \[1, 0, 2, 1\]/"padding": [1, 0, 2.0, 1]/'
expect_refused "padding item 2.0" "$d" '"padding"\[2\] must be an integer'
d=$(new_dir padstr goodlayer); set_meta "$d" 's/"padding": \[1, 0, 2, 1\]/"padding": ["1", 0, 2, 1]/'
expect_refused "padding item a string" "$d" '"padding"\[0\] must be an integer'
d=$(new_dir padbig goodlayer); set_meta "$d" 's/"padding": \[1, 0, 2, 1\]/"padding": [1, 0, 16777217, 1]/'
expect_refused "padding item 2^24 + 1" "$d" "padding bottom = 16777217 must be in 0..16777216"
d=$(new_dir padwrap goodlayer); set_meta "$d" 's/"padding": \[1, 0, 2, 1\]/"padding": [1, 0, 18446744073709551618, 1]/'
expect_refused "padding item 2^64 + 2 (wraps to 2)" "$d" '"padding"\[2\] is too large'
d=$(new_dir paddup goodlayer); set_meta "$d" 's/"seed": 0,/"seed": 0, "padding": [0, 0, 0, 0],/'
expect_refused "padding twice" "$d" 'duplicate key "padding"'
d=$(new_dir padfilter goodlayer)
set_meta "$d" 's/"filter": 3/"filter": 11/; s/"padding": \[1, 0, 2, 1\]/"padding": [0, 0, 0, 1]/'
expect_refused "filter 11 larger than the padded input 10x10" "$d" "padded input 10x10 is smaller than the filter k = 11"
d=$(new_dir ppad goodlayer); set_meta "$d" 's/"pool_padding": \[1, 1, 1, 1\]/"pool_padding": [1, 3, 1, 1]/'
expect_refused "pool_padding left 3, not below pool 3 (the library refuses)" "$d" "pool_padding left = 3 must be in 0..2"
d=$(new_dir ppadobj goodlayer); set_meta "$d" 's/"pool_padding": \[1, 1, 1, 1\]/"pool_padding": {"top": 1}/'
expect_refused "pool_padding an object" "$d" '"pool_padding" must be an array'
d=$(new_dir stride0 goodlayer); set_meta "$d" 's/"pool_stride": 2/"pool_stride": 0/'
expect_refused "pool_stride 0" "$d" '"pool_stride" = 0 must be >= 1'
d=$(new_dir stridebig goodlayer); set_meta "$d" 's/"pool_stride": 2/"pool_stride": 2199023255552/'
expect_refused "pool_stride 2^41" "$d" "pool_stride = 2199023255552 must be in 1..1099511627776"
d=$(new_dir stridestr goodlayer); set_meta "$d" 's/"pool_stride": 2/"pool_stride": "2"/'
expect_refused "pool_stride a string" "$d" '"pool_stride" must be an integer'
d=$(new_dir actname goodlayer); set_meta "$d" 's/{"clamp": \[1, 2.5\]}/"sigmoid"/'
expect_refused "activation \"sigmoid\"" "$d" '"activation" must be "none", "relu", "relu6" or'
d=$(new_dir actstr goodlayer); set_meta "$d" 's/{"clamp": \[1, 2.5\]}/"clamp:1,2.5"/'
expect_refused "activation in the CLI's string form" "$d" '"activation" must be'
d=$(new_dir actnul goodlayer); set_meta "$d" 's/{"clamp": \[1, 2.5\]}/"relu\\u0000"/'
expect_refused "activation \"relu\\u0000\"" "$d" '"activation" must be'
d=$(new_dir actorder goodlayer); set_meta "$d" 's/{"clamp": \[1, 2.5\]}/{"clamp": [2.5, 1]}/'
expect_refused "clamp [2.5, 1] (the library refuses min > max)" "$d" "clamp \[2.5, 1\] must have min <= max"
d=$(new_dir actone goodlayer); set_meta "$d" 's/{"clamp": \[1, 2.5\]}/{"clamp": [1]}/'
expect_refused "clamp with one bound" "$d" '"clamp" has 1 items'
d=$(new_dir actbig goodlayer); set_meta "$d" 's/{"clamp": \[1, 2.5\]}/{"clamp": [1, 1e39]}/'
expect_refused "clamp bound 1e39" "$d" '"clamp"\[1\] is beyond the float32 range'
d=$(new_dir actnan goodlayer); set_meta "$d" 's/{"clamp": \[1, 2.5\]}/{"clamp": [NaN, 2.5]}/'
expect_refused "clamp bound NaN (not JSON)" "$d" "found 'N'"
d=$(new_dir actextra goodlayer); set_meta "$d" 's/{"clamp": \[1, 2.5\]}/{"clamp": [1, 2.5], "slope": 0}/'
expect_refused "activation object with a second key" "$d" "exactly one key"
d=$(new_dir actbool goodlayer); set_meta "$d" 's/{"clamp": \[1, 2.5\]}/true/'
expect_refused "activation true" "$d" '"activation" must be'
d=$(new_dir ceilnum goodlayer); set_meta "$d" 's/"ceil_mode": true/"ceil_mode": 1/'
expect_refused "ceil_mode 1" "$d" '"ceil_mode" must be true or false'
d=$(new_dir cstride0 goodres); set_meta "$d" 's/"stride": 2/"stride": 0/'
expect_refused "stride 0" "$d" '"stride" = 0 must be >= 1'
d=$(new_dir cstridebig goodres); set_meta "$d" 's/"stride": 2/"stride": 16777217/'
expect_refused "stride 2^24 + 1 (the library refuses)" "$d" "conv stride = 16777217 must be in 1..16777216"
d=$(new_dir cdilation goodres); set_meta "$d" 's/"dilation": 2/"dilation": 2199023255552/'
expect_refused "dilation 2^41" "$d" "conv dilation = 2199023255552 must be in 1..16777216"
d=$(new_dir cgroups goodres); set_meta "$d" 's/"groups": 1/"groups": 2/'
expect_refused "groups 2 of 3 input channels" "$d" "conv groups = 2 must be >= 1 and divide c_in = 3"
d=$(new_dir cgroupsstr goodres); set_meta "$d" 's/"groups": 1/"groups": "1"/'
expect_refused "groups a string" "$d" '"groups" must be an integer'
d=$(new_dir resnum goodres); set_meta "$d" 's/"residual": true/"residual": 1/'
expect_refused "residual 1" "$d" '"residual" must be true or false'
d=$(new_dir resmissing goodres); rm "$d/residual.bin"
expect_refused "residual true without residual.bin" "$d" "residual.bin"
d=$(new_dir resshort goodres); head -c 100 "$tmp/goodres/residual.bin" > "$d/residual.bin"
expect_refused "residual.bin truncated" "$d" "residual.bin has 100 bytes"
d=$(new_dir resbig goodres); set_meta "$d" 's/"stride": 2/"stride": 1/'
expect_refused "residual.bin of stride 2 for a stride-1 layer" "$d" "residual.bin has"

# ---- structure ----
d=$(new_dir m-missing); rm "$d/meta.json"
expect_refused "meta.json missing" "$d" "meta.json"
d=$(new_dir m-empty); : > "$d/meta.json"
expect_refused "meta.json empty" "$d" "meta.json"
d=$(new_dir m-dir); rm "$d/meta.json"; mkdir "$d/meta.json"
expect_refused "meta.json is a directory" "$d" "meta.json"
d=$(new_dir no-filter); set_meta "$d" '/"filter"/d'
expect_refused "key filter missing" "$d" "filter"
d=$(new_dir no-dtype); set_meta "$d" '/"dtype"/d'
expect_refused "key dtype missing" "$d" "dtype"
d=$(new_dir dup); set_meta "$d" 's/"seed": 0/"seed": 0, "batch": 2/'
expect_refused "duplicate key batch" "$d" "duplicate"
d=$(new_dir nest-513)
{ printf '{"deep": '; i=0; while [ $i -lt 512 ]; do printf '['; i=$((i + 1)); done
  i=0; while [ $i -lt 512 ]; do printf ']'; i=$((i + 1)); done
  printf ', '; tail -c +2 "$tmp/good32/meta.json"; } > "$d/meta.json"
expect_refused "valid JSON nested 513 deep (the limit is 512)" "$d" "nested more than 512"
d=$(new_dir nest-deep)
{ printf '{"deep": '; i=0; while [ $i -lt 5000 ]; do printf '['; i=$((i + 1)); done; printf '}'; } > "$d/meta.json"
expect_refused "5000 nested arrays" "$d" "nested"
d=$(new_dir top-array)
{ i=0; while [ $i -lt 5000 ]; do printf '['; i=$((i + 1)); done; } > "$d/meta.json"
expect_refused "meta.json is 5000 open brackets" "$d" "nested"
d=$(new_dir top-list); printf '[1, 2]\n' > "$d/meta.json"
expect_refused "meta.json is an array" "$d" "must be a JSON object"
d=$(new_dir trailing); printf 'x' >> "$d/meta.json"
expect_refused "trailing characters" "$d" "trailing"
d=$(new_dir two-objs); cat "$tmp/good32/meta.json" >> "$d/meta.json"
expect_refused "two objects" "$d" "trailing"
d=$(new_dir unterminated); head -c 60 "$tmp/good32/meta.json" > "$d/meta.json"
expect_refused "meta.json cut in the middle" "$d"
d=$(new_dir big-meta)
{ printf '{"pad": "'; head -c 70000 /dev/zero | tr '\0' 'a'; printf '", '; tail -c +2 "$tmp/good32/meta.json"; } > "$d/meta.json"
expect_refused "meta.json of 70 KB" "$d" "meta.json"
d=$(new_dir bom2); { printf '\357\273\277\357\273\277'; cat "$tmp/good32/meta.json"; } > "$d/meta.json"
expect_refused "meta.json with two UTF-8 byte order marks" "$d" "byte 0xef"
d=$(new_dir bom-late); { printf ' \357\273\277'; cat "$tmp/good32/meta.json"; } > "$d/meta.json"
expect_refused "a byte order mark after a space" "$d" "byte 0xef"
d=$(new_dir nul); { printf '{"dtype": "float32\000", '; tail -c +2 "$tmp/good32/meta.json" | sed '/"dtype"/d'; } > "$d/meta.json"
expect_refused "NUL byte inside a string" "$d"

# ---- encoding ----
d=$(new_dir utf8-bad); set_meta "$d" 's/"float32"/"float\o37732"/'
expect_refused "dtype with byte 0xff" "$d" "UTF-8"
d=$(new_dir utf8-overlong); set_meta "$d" 's/"seed": 0/"seed": 0, "\o300\o257": 1/'
expect_refused "overlong UTF-8 in a key" "$d" "UTF-8"
d=$(new_dir utf8-surrogate); set_meta "$d" 's/"seed": 0/"seed": 0, "note": "\o355\o240\o200"/'
expect_refused "UTF-16 surrogate encoded in UTF-8" "$d" "UTF-8"
d=$(new_dir utf8-cut); { printf '{"note": "\342\202'; } > "$d/meta.json"
expect_refused "UTF-8 sequence cut by the end of the file" "$d"
d=$(new_dir latin1); set_meta "$d" 's/"seed": 0/"seed": 0, "caf\o351": 1/'
expect_refused "Latin-1 byte in a key" "$d" "UTF-8"
d=$(new_dir esc-nul); set_meta "$d" 's/"float32"/"float32\\u0000"/'
expect_refused "dtype float32 followed by an escaped NUL" "$d" "dtype"
d=$(new_dir esc-nul-key); set_meta "$d" 's/"height"/"height\\u0000"/'
expect_refused "key height followed by an escaped NUL (another key)" "$d" "missing key \"height\""
d=$(new_dir esc-newline-dtype); set_meta "$d" 's/"float32"/"float32\\n"/'
expect_refused "dtype with an escaped newline" "$d" "printable"
d=$(new_dir esc-short); set_meta "$d" 's/"float32"/"\\u12"/'
expect_refused "\\u escape with 2 hex digits" "$d" "escape"
d=$(new_dir esc-upper); set_meta "$d" 's/"float32"/"\\U0041"/'
expect_refused "\\U escape" "$d" "escape"
# The key is: x, backslash, newline (an escape the parser does not support).
d=$(new_dir esc-newline); printf '{"x\\\n": 1}\n' > "$d/meta.json"
expect_refused "backslash followed by a newline in a key" "$d" "escape"
d=$(new_dir ctrl); printf '{"dtype": "float32\t"}' > "$d/meta.json"
expect_refused "tab character inside a string" "$d" "control"

# ---- the directory itself ----
expect_refused "load-dir does not exist" "$tmp/no-such-dir" "no-such-dir"
: > "$tmp/plain-file"
expect_refused "load-dir is a regular file" "$tmp/plain-file" "plain-file"

# ---- writing files: links, guessable names, failures ----
#
# Every file the CLI writes must be a new file (random name, O_EXCL,
# O_NOFOLLOW) renamed over its target. A symbolic link planted at an output
# name, or at a temporary name (the old scheme's NAME.tmp.PID is known in
# advance: the CLI is exec'd by the shell that plants it, so its pid is that
# shell's $$), must never be written through, a dangling link's target must
# never be created, and no temporary file may remain, whether the run
# succeeds or fails (a directory in the way, a file size limit, a full or a
# read-only filesystem). A failure to write exits 1 with one stderr line that
# gives the reason (strerror).
victim_text="victim: must never change"
victim_md5=$(echo "$victim_text" | md5sum)
outputs="x.bin w.bin bias.bin out.bin meta.json"
writes=0

# The planting shell: DIR COMMAND...; links to the victim at each output's
# NAME.tmp.PID, NAME.tmp, NAME.tmp.0 and .NAME.tmp, a dangling link at
# NAME.tmp.PID+1, then exec COMMAND (same pid). ln errors are dropped (a
# read-only directory): the listing check below sees what was planted.
# shellcheck disable=SC2016
plant='d=$1; shift
for n in x.bin w.bin bias.bin out.bin meta.json; do
  for t in "$n.tmp.$$" "$n.tmp" "$n.tmp.0" ".$n.tmp"; do ln -s "$VICTIM" "$d/$t" 2>/dev/null; done
  ln -s "$DANGLING.$n" "$d/$n.tmp.$(($$ + 1))" 2>/dev/null
done
exec "$@"'

# want_list [NAMES...]: a file listing what a directory must hold after a run
# in it: the planted links (pid-named ones as listing() shows them) and NAMES.
want_list() {
  {
    for n in $outputs; do
      printf '%s\n' ".$n.tmp" "$n.tmp" "$n.tmp.0" "$n.tmp.PID" "$n.tmp.PID+1"
    done
    for n in "$@"; do printf '%s\n' "$n"; done
  } | LC_ALL=C sort > "$tmp/want-list"
  echo "$tmp/want-list"
}

# check_write NAME WANT-RC EXPECTED-TEXT DIR WANT-LIST-FILE -- COMMAND...
# Plants the links in DIR, runs COMMAND, then checks the exit code, stderr
# (empty on success; else one line containing EXPECTED-TEXT), the victim, the
# dangling targets, and that DIR holds exactly the names in WANT-LIST-FILE.
check_write() {
  name=$1 want=$2 expect=$3 dir=$4 want_file=$5
  shift 6
  writes=$((writes + 1))
  rm -f "$tmp/victim" "$tmp"/dangling.* # each case starts afresh
  echo "$victim_text" > "$tmp/victim"
  VICTIM="$tmp/victim" DANGLING="$tmp/dangling" timeout "$limit" sh -c "$plant" sh "$dir" "$@" \
    >"$tmp/stdout" 2>"$tmp/stderr"
  rc=$?
  problems=""
  [ "$rc" -eq "$want" ] || problems="$problems exit code $rc (want $want);"
  lines=$(wc -l < "$tmp/stderr")
  if [ "$want" -eq 0 ]; then
    [ "$lines" -eq 0 ] || problems="$problems stderr is not empty;"
  else
    [ "$lines" -eq 1 ] || problems="$problems $lines lines on stderr (want 1);"
    grep -q "^convpool: error: .*$expect" "$tmp/stderr" ||
      problems="$problems the message does not contain '$expect';"
  fi
  if [ ! -f "$tmp/victim" ] || [ -L "$tmp/victim" ] ||
    [ "$(md5sum < "$tmp/victim")" != "$victim_md5" ]; then
    problems="$problems the victim changed;"
  fi
  for f in "$tmp"/dangling.*; do
    [ -e "$f" ] && problems="$problems a dangling link's target was created ($f);"
  done
  listing "$dir" > "$tmp/got-list"
  if ! cmp -s "$want_file" "$tmp/got-list"; then
    problems="$problems directory content differs (< missing, > unexpected):"
    problems="$problems $(diff "$want_file" "$tmp/got-list" | grep '^[<>]' | tr '\n' ' ');"
  fi
  if [ -n "$problems" ]; then
    echo "FAIL: $name:$problems"
    echo "      stderr: $(head -c 400 "$tmp/stderr" | tr '\n' '|')"
    fail=1
  else
    echo "writes: $name -> $(cat "$tmp/stderr")"
  fi
}

# regular_copies DIR NAMES...: each name is a regular file (not a link) equal
# to the float32 dump's.
regular_copies() {
  d=$1
  shift
  for n in "$@"; do
    if [ -L "$d/$n" ] || [ ! -f "$d/$n" ] || ! cmp -s "$d/$n" "$tmp/good32/$n"; then
      echo "FAIL: $d/$n is not a regular file equal to the dump's $n"
      fail=1
    fi
  done
}

# empty_dir DIR: remove everything in DIR (a mount point stays).
empty_dir() { find "$1" -mindepth 1 -delete; }

d="$tmp/w-dump-links"; mkdir "$d"
for n in $outputs; do ln -s "$tmp/victim" "$d/$n"; done
# shellcheck disable=SC2086
check_write "--dump-dir over links at every output and temporary name" 0 "" "$d" \
  "$(want_list $outputs)" -- "$cli" $shape --iters 1 --warmup 0 --dump-dir "$d"
# shellcheck disable=SC2086
regular_copies "$d" $outputs

d=$(new_dir w-load-link); ln -s "$tmp/victim" "$d/out.bin"
check_write "--load-dir, out.bin a link to the victim" 0 "" "$d" \
  "$(want_list bias.bin meta.json out.bin w.bin x.bin)" -- "$cli" --load-dir "$d"
regular_copies "$d" out.bin

d=$(new_dir w-load-dangling); ln -s "$tmp/dangling.final" "$d/out.bin"
check_write "--load-dir, out.bin a dangling link" 0 "" "$d" \
  "$(want_list bias.bin meta.json out.bin w.bin x.bin)" -- "$cli" --load-dir "$d"
regular_copies "$d" out.bin

# ---- failures while writing ----
d=$(new_dir w-out-dir); mkdir "$d/out.bin"; : > "$d/out.bin/keep"
check_write "--load-dir, out.bin is a directory" 1 "out.bin: Is a directory" "$d" \
  "$(want_list bias.bin meta.json out.bin w.bin x.bin)" -- "$cli" --load-dir "$d"

d="$tmp/w-meta-dir"; mkdir -p "$d/meta.json"; : > "$d/meta.json/keep"
# shellcheck disable=SC2086
check_write "--dump-dir, meta.json is a directory" 1 "meta.json: Is a directory" "$d" \
  "$(want_list $outputs)" -- "$cli" $shape --iters 1 --warmup 0 --dump-dir "$d"

d="$tmp/w-not-dir"; mkdir "$d"; : > "$d/file"
# shellcheck disable=SC2086
check_write "--dump-dir is a regular file" 1 "file/x.bin: Not a directory" "$d" \
  "$(want_list file)" -- "$cli" $shape --iters 1 --warmup 0 --dump-dir "$d/file"

# A file size limit of 512 bytes (ulimit -f 1; stderr, a file here, is under
# it too): x.bin of the dump has 2160 bytes, out.bin of the load 768 (8
# output channels). The shell in between keeps the pid (exec).
d="$tmp/w-fsize"; mkdir "$d"
# shellcheck disable=SC2086,SC2016
check_write "--dump-dir under ulimit -f 1" 1 "x.bin: File too large" "$d" "$(want_list)" -- \
  sh -c 'ulimit -f 1 && exec "$@"' sh "$cli" $shape --iters 1 --warmup 0 --dump-dir "$d"
d="$tmp/w-fsize-load"
# shellcheck disable=SC2086
"$cli" $shape --out-channels 8 --iters 1 --warmup 0 --dump-dir "$d" >/dev/null && rm "$d/out.bin"
# shellcheck disable=SC2016
check_write "--load-dir under ulimit -f 1" 1 "out.bin: File too large" "$d" \
  "$(want_list bias.bin meta.json w.bin x.bin)" -- sh -c 'ulimit -f 1 && exec "$@"' sh "$cli" --load-dir "$d"

# A full filesystem: a 64 KiB tmpfs, when this process may mount one.
if try_mount "$tmp/w-full"; then
  # x.bin of a 2x3x100x90 input has 216000 bytes.
  check_write "--dump-dir on a 64 KiB tmpfs" 1 "x.bin: No space left on device" "$tmp/w-full" \
    "$(want_list)" -- "$cli" --batch 2 --in-channels 3 --out-channels 4 --height 100 --width 90 \
    --iters 1 --warmup 0 --dump-dir "$tmp/w-full"
  empty_dir "$tmp/w-full"
  for f in meta.json x.bin w.bin bias.bin; do cp "$tmp/good32/$f" "$tmp/w-full/"; done
  head -c 1048576 /dev/zero > "$tmp/w-full/filler" 2>/dev/null # takes what is left
  before=$(inputs_md5 "$tmp/w-full")
  check_write "--load-dir on a full tmpfs" 1 "out.bin: No space left on device" "$tmp/w-full" \
    "$(want_list bias.bin filler meta.json w.bin x.bin)" -- "$cli" --load-dir "$tmp/w-full"
  [ "$before" = "$(inputs_md5 "$tmp/w-full")" ] ||
    { echo "FAIL: an input changed on the full tmpfs"; fail=1; }
else
  echo "skipped: full-filesystem cases: mount -t tmpfs -o size=64k is not permitted ($(head -n 1 "$tmp/mount-err"))"
fi

# A directory that cannot be written: without write permission, or, for
# root (who ignores permissions), a tmpfs remounted read-only. Nothing can be
# planted there: the directory must keep exactly what it had.
if [ "$(id -u)" -ne 0 ]; then
  d=$(new_dir w-readonly); chmod 555 "$d"
  listing "$d" > "$tmp/ro-list"
  check_write "--load-dir in a directory without write permission" 1 "out.bin: Permission denied" \
    "$d" "$tmp/ro-list" -- "$cli" --load-dir "$d"
  chmod 755 "$d"
elif try_mount "$tmp/w-ro"; then
  for f in meta.json x.bin w.bin bias.bin; do cp "$tmp/good32/$f" "$tmp/w-ro/"; done
  if mount -o remount,ro "$tmp/w-ro" 2>"$tmp/mount-err"; then
    listing "$tmp/w-ro" > "$tmp/ro-list"
    check_write "--load-dir on a read-only filesystem" 1 "out.bin: Read-only file system" \
      "$tmp/w-ro" "$tmp/ro-list" -- "$cli" --load-dir "$tmp/w-ro"
    # shellcheck disable=SC2086
    check_write "--dump-dir on a read-only filesystem" 1 "x.bin: Read-only file system" \
      "$tmp/w-ro" "$tmp/ro-list" -- "$cli" $shape --iters 1 --warmup 0 --dump-dir "$tmp/w-ro"
  else
    echo "skipped: read-only cases: mount -o remount,ro is not permitted ($(head -n 1 "$tmp/mount-err"))"
  fi
else
  echo "skipped: read-only cases: root, and mount -t tmpfs is not permitted ($(head -n 1 "$tmp/mount-err"))"
fi

# An empty directory argument is refused (it used to mean the root).
for opt in --load-dir --dump-dir; do
  writes=$((writes + 1))
  root_before=$(LC_ALL=C ls -A /)
  # shellcheck disable=SC2086
  timeout "$limit" "$cli" $shape --iters 1 --warmup 0 "$opt" "" >/dev/null 2>"$tmp/stderr"
  rc=$?
  if [ "$rc" -ne 2 ] || [ "$(wc -l < "$tmp/stderr")" -ne 1 ] ||
    ! grep -q "^convpool: error: $opt is empty" "$tmp/stderr"; then
    echo "FAIL: $opt \"\": exit $rc, stderr: $(cat "$tmp/stderr")"
    fail=1
  elif [ "$root_before" != "$(LC_ALL=C ls -A /)" ]; then
    echo "FAIL: $opt \"\" changed the root directory"
    fail=1
  else
    echo "writes: $opt \"\" -> $(cat "$tmp/stderr")"
  fi
done

echo "test_cli_files: $cases cases, $refused hostile directories refused as required;" \
  "$writes writing cases"
[ "$fail" -eq 0 ] || { echo "test_cli_files: FAILED"; exit 1; }
echo "test_cli_files: passed"
