#!/bin/sh
# Build the libFuzzer targets with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer, and run each for SECONDS seconds.
#
# Usage: tests/fuzz/run_fuzz.sh BUILD_DIR SECONDS
#
# The checked-in corpora (corpus_api/, corpus_meta/) are the seeds; inputs the
# fuzzer finds go to BUILD_DIR/fuzz-corpus/<target>/ (kept between runs),
# crash reproducers to BUILD_DIR/fuzz-artifacts/. Exits non-zero on any
# finding (crash, sanitizer report, leak, timeout, failed property) and prints
# the number of executions of each target.
set -eu
build=${1:?usage: run_fuzz.sh BUILD_DIR SECONDS}
seconds=${2:?usage: run_fuzz.sh BUILD_DIR SECONDS}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)

command -v clang >/dev/null 2>&1 || { echo "run_fuzz.sh: clang is required (libFuzzer)"; exit 2; }
cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCONVPOOL_WERROR=ON -DCONVPOOL_FUZZ=ON -DCONVPOOL_SANITIZE=address,undefined >/dev/null
cmake --build "$build" -j "$jobs" --target fuzz_api fuzz_meta >/dev/null

mkdir -p "$build/fuzz-artifacts"
stamp="$build/fuzz-artifacts/.start"
: >"$stamp" # reproducers newer than this are this run's findings
status=0
total=0
for target in api meta; do
  work="$build/fuzz-corpus/$target"
  mkdir -p "$work"
  log="$build/fuzz-$target.log"
  # -max_len: the API harness reads 16 header bytes and then tensor data;
  # meta.json is read up to 64 KiB by the CLI, 8 KiB covers every structure.
  max_len=4096
  [ "$target" = meta ] && max_len=8192
  set +e
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$build/bin/fuzz_$target" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 \
    -max_len=$max_len -print_final_stats=1 -artifact_prefix="$build/fuzz-artifacts/$target-" \
    "$work" "$here/corpus_$target" >"$log" 2>&1
  rc=$?
  set -e
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  corpus=$(find "$work" -type f | wc -l)
  if [ "$rc" -ne 0 ]; then
    echo "fuzz_$target: FINDING (exit $rc) after ${runs:-?} executions; log: $log"
    grep -E '^(fuzz_|==[0-9]+==ERROR|SUMMARY|.*runtime error)' "$log" | head -n 5
    find "$build/fuzz-artifacts" -name "$target-*" -newer "$stamp" | sed 's/^/  reproducer: /'
    status=1
  else
    echo "fuzz_$target: ${runs:-?} executions in ${seconds}s, no finding ($corpus inputs in $work)"
  fi
  total=$((total + ${runs:-0}))
done
echo "run_fuzz.sh: $total executions in all"
exit $status
