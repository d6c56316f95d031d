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
trap 'rm -rf "$tmp"' EXIT
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

# md5 of every regular input file (not out.bin) under $1, in a stable order.
inputs_md5() {
  (cd "$1" && find . -type f ! -name out.bin ! -name 'out.bin.tmp.*' | LC_ALL=C sort |
    while read -r f; do md5sum "$f"; done)
}

# new_dir NAME [SOURCE]: a copy of the good dump without out.bin; prints its path.
new_dir() {
  d="$tmp/case-$1"
  mkdir "$d"
  src="$tmp/${2:-good32}"
  for f in meta.json x.bin w.bin bias.bin; do
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
  before_in=""
  [ -d "$dir" ] && before_in=$(inputs_md5 "$dir")
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
    for f in "$dir"/out.bin.tmp.*; do
      [ -e "$f" ] && problems="$problems a temporary out.bin was left;"
      break
    done
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
d=$(new_dir nest-obj); set_meta "$d" 's/"seed": 0/"seed": 0, "x": {"y": 1}/'
expect_refused "nested object" "$d" "nested"
d=$(new_dir nest-deep)
{ printf '{"deep": '; i=0; while [ $i -lt 5000 ]; do printf '['; i=$((i + 1)); done; printf '}'; } > "$d/meta.json"
expect_refused "5000 nested arrays" "$d" "nested"
d=$(new_dir top-array)
{ i=0; while [ $i -lt 5000 ]; do printf '['; i=$((i + 1)); done; } > "$d/meta.json"
expect_refused "meta.json is 5000 open brackets" "$d" "object"
d=$(new_dir trailing); printf 'x' >> "$d/meta.json"
expect_refused "trailing characters" "$d" "trailing"
d=$(new_dir two-objs); cat "$tmp/good32/meta.json" >> "$d/meta.json"
expect_refused "two objects" "$d" "trailing"
d=$(new_dir unterminated); head -c 60 "$tmp/good32/meta.json" > "$d/meta.json"
expect_refused "meta.json cut in the middle" "$d"
d=$(new_dir big-meta)
{ printf '{"pad": "'; head -c 70000 /dev/zero | tr '\0' 'a'; printf '", '; tail -c +2 "$tmp/good32/meta.json"; } > "$d/meta.json"
expect_refused "meta.json of 70 KB" "$d" "meta.json"
d=$(new_dir bom); { printf '\357\273\277'; cat "$tmp/good32/meta.json"; } > "$d/meta.json"
expect_refused "meta.json with a UTF-8 byte order mark" "$d" "object"
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
d=$(new_dir esc-unicode); set_meta "$d" 's/"float32"/"float\\u0033\\u0032"/'
expect_refused "\\u escape in dtype" "$d" "escape"
# The key is: x, backslash, newline (an escape the parser does not support).
d=$(new_dir esc-newline); printf '{"x\\\n": 1}\n' > "$d/meta.json"
expect_refused "backslash followed by a newline in a key" "$d" "escape"
d=$(new_dir ctrl); printf '{"dtype": "float32\t"}' > "$d/meta.json"
expect_refused "tab character inside a string" "$d" "control"

# ---- the directory itself ----
expect_refused "load-dir does not exist" "$tmp/no-such-dir" "no-such-dir"
: > "$tmp/plain-file"
expect_refused "load-dir is a regular file" "$tmp/plain-file" "plain-file"

echo "test_cli_files: $cases cases, $refused hostile directories refused as required"
[ "$fail" -eq 0 ] || { echo "test_cli_files: FAILED"; exit 1; }
echo "test_cli_files: passed"
