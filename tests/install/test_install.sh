#!/bin/sh
# Install the build into a temporary prefix, then build the README example
# against it twice: with find_package(convpool) and with pkg-config.
set -eu
build=$1
src=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/consumer/example"
libdir=$(ls -d "$tmp"/prefix/lib*/pkgconfig | head -n 1)
flags=$(PKG_CONFIG_PATH="$libdir" pkg-config --cflags --libs convpool)
# shellcheck disable=SC2086
cc "$src/example.c" $flags -lm -o "$tmp/example-pc"
LD_LIBRARY_PATH="$(dirname "$libdir")" "$tmp/example-pc"
