#!/bin/sh
# The CLI: dumps are reproducible, --load-dir reproduces a dump's out.bin,
# the timing line is printed, and every bad input gives one line on stderr
# and exit code 2 without leaving an out.bin behind.
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
--threads -1|--threads = -1 must be in 0..1024
--threads 1025|--threads = 1025 must be in 0..1024
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
[ $fail -eq 0 ] && echo "cli: all checks passed"
exit $fail
