#!/bin/sh
# $targets, $vg and $small are split into words on purpose.
# shellcheck disable=SC2086
# The C tests under AddressSanitizer + UndefinedBehaviorSanitizer and under
# ThreadSanitizer, then valgrind memcheck on small CLI runs and on the API
# tests. Each configuration has its own build directory:
#
#   build-asan      -DCONVPOOL_SANITIZE=address,undefined  (clang if installed: its
#                   UBSan also checks pointer arithmetic on NULL; else the default cc)
#   build-tsan      -DCONVPOOL_SANITIZE=thread
#   build-valgrind  no sanitizer, RelWithDebInfo
#
# Usage: tests/reliability/run_sanitizers.sh [--no-asan] [--no-tsan] [--no-valgrind]
#   BUILD_ROOT=dir  puts the build directories there (default: the repository root)
#   WERROR=ON       builds with -Werror (default OFF: a compiler warning is not
#                   what these builds look for, and clang warns about more)
#
# About 5-8 minutes on 2 cores. Exits non-zero if any step fails; the summary
# at the end lists every step.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
broot=${BUILD_ROOT:-$root}
werror=${WERROR:-OFF}
jobs=$(nproc 2>/dev/null || echo 2)
do_asan=1 do_tsan=1 do_valgrind=1
for a in "$@"; do
  case $a in
    --no-asan) do_asan=0 ;;
    --no-tsan) do_tsan=0 ;;
    --no-valgrind) do_valgrind=0 ;;
    *) echo "usage: run_sanitizers.sh [--no-asan] [--no-tsan] [--no-valgrind]"; exit 2 ;;
  esac
done

# The C tests (the Python ones are slow and not C): layer_*, api, alloc_fail,
# threads, soak, cpu, cli, cli_files, fuzz_corpus_*, and meta_differential
# (Python, but it drives the instrumented parser).
tests='layer_|api|alloc|threads|soak|cpu|cli|fuzz_corpus|meta_differential'
targets="test_layer test_api test_alloc_fail test_threads test_shared_pool test_pool_runs soak test_cpu convpool_cli fuzz_api_replay fuzz_meta_replay meta_check"
summary=""
failed=0
note() { summary="$summary$1
"; }
t_start=$(date +%s)
rm -f "$broot/build-asan/failed.txt" "$broot/build-tsan/failed.txt"

# configure_build DIR CC SANITIZE: configure and build the test targets.
configure_build() {
  dir=$1 cc=$2 san=$3
  mkdir -p "$dir"
  # ThreadSanitizer does not see inside the OpenMP runtime (not instrumented):
  # that build leaves the shared pool's OpenMP mode out.
  openmp=ON
  [ "$san" = thread ] && openmp=OFF
  cmake -S "$root" -B "$dir" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCONVPOOL_WERROR="$werror" -DCONVPOOL_SANITIZE="$san" -DCONVPOOL_OPENMP="$openmp" \
    >"$dir/configure.log" 2>&1 &&
    cmake --build "$dir" -j "$jobs" --target $targets >"$dir/build.log" 2>&1
}

# run_ctest NAME DIR: the selected tests, in parallel, failures shown in full.
run_ctest() {
  name=$1 dir=$2
  start=$(date +%s)
  if (cd "$dir" && ctest -R "$tests" -j "$jobs" --output-on-failure --timeout 900 >"$dir/ctest.log" 2>&1); then
    note "PASS  $name: $(grep -E 'tests passed' "$dir/ctest.log") ($(( $(date +%s) - start )) s)"
  else
    note "FAIL  $name: $(grep -E 'tests passed|tests failed' "$dir/ctest.log" | head -n 1) (log: $dir/ctest.log)"
    grep -E '^[[:space:]]*[0-9]+ - ' "$dir/ctest.log" | sed 's/^/        /' >>"$dir/failed.txt"
    failed=1
  fi
}

# ---- AddressSanitizer + UndefinedBehaviorSanitizer ----
if [ "$do_asan" -eq 1 ]; then
  cc=cc
  command -v clang >/dev/null 2>&1 && cc=clang
  echo "== address,undefined ($cc) in $broot/build-asan"
  if configure_build "$broot/build-asan" "$cc" address,undefined; then
    ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1 \
      UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      run_ctest "address,undefined ($cc)" "$broot/build-asan"
  else
    note "FAIL  address,undefined: build failed (see $broot/build-asan/build.log)"
    failed=1
  fi
fi

# ---- ThreadSanitizer ----
if [ "$do_tsan" -eq 1 ]; then
  echo "== thread in $broot/build-tsan"
  if configure_build "$broot/build-tsan" cc thread; then
    TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 run_ctest "thread" "$broot/build-tsan"
  else
    note "FAIL  thread: build failed (see $broot/build-tsan/build.log)"
    failed=1
  fi
fi

# ---- valgrind memcheck ----
if [ "$do_valgrind" -eq 1 ]; then
  if ! command -v valgrind >/dev/null 2>&1; then
    note "SKIP  valgrind: valgrind is not installed"
  else
    vdir="$broot/build-valgrind"
    echo "== valgrind memcheck in $vdir"
    if configure_build "$vdir" cc ""; then
      tmp=$(mktemp -d)
      vg="valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect,possible --track-origins=yes"
      cli="$vdir/bin/convpool"
      small="--batch 2 --in-channels 3 --out-channels 5 --height 12 --width 11 --filter 3 --pool 2 --iters 2 --warmup 1"
      # valgrind_run LABEL EXPECTED-EXIT COMMAND...: memcheck errors give exit 1.
      valgrind_run() {
        label=$1 want=$2
        shift 2
        $vg "$@" >"$tmp/out" 2>"$tmp/err"
        rc=$?
        if [ "$rc" -eq "$want" ] && ! grep -q '^==[0-9]*==' "$tmp/err"; then
          note "PASS  valgrind: $label"
        else
          note "FAIL  valgrind: $label (exit $rc, want $want)"
          sed 's/^/        /' "$tmp/err" | head -n 30 >>"$tmp/report"
          failed=1
        fi
      }
      valgrind_run "cli float32, 2 threads, --dump-dir" 0 "$cli" $small --threads 2 --dump-dir "$tmp/d32"
      cp "$tmp/d32/out.bin" "$tmp/dumped.bin" 2>/dev/null
      valgrind_run "cli --load-dir (float32)" 0 "$cli" --load-dir "$tmp/d32"
      if ! cmp -s "$tmp/d32/out.bin" "$tmp/dumped.bin"; then
        note "FAIL  valgrind: --load-dir did not reproduce the dumped out.bin"
        failed=1
      fi
      valgrind_run "cli float16, no bias, --show-tiling, --dump-dir" 0 "$cli" $small --dtype float16 --no-bias --threads 3 --show-tiling --dump-dir "$tmp/d16"
      valgrind_run "cli --load-dir (float16)" 0 "$cli" --load-dir "$tmp/d16"
      valgrind_run "cli bfloat16, im2col, 1 thread" 0 "$cli" $small --dtype bfloat16 --impl im2col --threads 1
      valgrind_run "cli bad input (pool larger than the conv output)" 2 "$cli" $small --pool 40
      cp -r "$tmp/d32" "$tmp/bad" && head -c 100 "$tmp/d32/x.bin" >"$tmp/bad/x.bin"
      valgrind_run "cli --load-dir with a truncated x.bin" 2 "$cli" --load-dir "$tmp/bad"
      printf '{"dtype": "float32", "batch": 1' >"$tmp/bad/meta.json"
      valgrind_run "cli --load-dir with a cut meta.json" 2 "$cli" --load-dir "$tmp/bad"
      ln -sf "$tmp/dumped.bin" "$tmp/d32/out.bin"
      valgrind_run "cli --load-dir over a link at out.bin" 0 "$cli" --load-dir "$tmp/d32"
      if [ -L "$tmp/d32/out.bin" ] || ! cmp -s "$tmp/d32/out.bin" "$tmp/dumped.bin"; then
        note "FAIL  valgrind: the link at out.bin was not replaced by the output"
        failed=1
      fi
      mkdir -p "$tmp/dmeta/meta.json"
      valgrind_run "cli --dump-dir failing to write (meta.json is a directory)" 1 "$cli" $small --dump-dir "$tmp/dmeta"
      valgrind_run "test_api" 0 "$vdir/bin/test_api"
      valgrind_run "test_cpu" 0 "$vdir/bin/test_cpu"
      valgrind_run "test_alloc_fail" 0 "$vdir/bin/test_alloc_fail"
      valgrind_run "soak 40" 0 "$vdir/bin/soak" 40
      [ -f "$tmp/report" ] && cat "$tmp/report"
      rm -rf "$tmp"
    else
      note "FAIL  valgrind: build failed (see $vdir/build.log)"
      failed=1
    fi
  fi
fi

echo
echo "== summary ($(( $(date +%s) - t_start )) s)"
printf '%s' "$summary"
for f in "$broot/build-asan/failed.txt" "$broot/build-tsan/failed.txt"; do
  [ -f "$f" ] && { echo "failed tests in ${f%/failed.txt}:"; cat "$f"; rm -f "$f"; }
done
exit $failed
