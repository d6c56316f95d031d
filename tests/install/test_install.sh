#!/bin/sh
# Install the build into a temporary prefix, then build the README example
# against it with find_package(convpool) and with pkg-config (also after the
# prefix has moved); each program must start without LD_LIBRARY_PATH.
set -eu
build=$1
src=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
# Both programs must start without LD_LIBRARY_PATH: CMake gives the first a
# run-time path to the imported library, the .pc file's Libs give the second one.
env -u LD_LIBRARY_PATH "$tmp/consumer/example"
libdir=$(ls -d "$tmp"/prefix/lib*/pkgconfig | head -n 1)
flags=$(PKG_CONFIG_PATH="$libdir" pkg-config --cflags --libs convpool)
case $flags in
  *-Wl,-rpath,*) ;;
  *) echo "convpool.pc's Libs have no run-time path: $flags"; exit 1 ;;
esac
# shellcheck disable=SC2086
cc "$src/example.c" $flags -lm -o "$tmp/example-pc"
env -u LD_LIBRARY_PATH "$tmp/example-pc"
# After the prefix moves, pkg-config's paths (the run-time path too) follow it.
mv "$tmp/prefix" "$tmp/moved"
libdir=$(ls -d "$tmp"/moved/lib*/pkgconfig | head -n 1)
flags=$(PKG_CONFIG_PATH="$libdir" pkg-config --cflags --libs convpool)
# shellcheck disable=SC2086
cc "$src/example.c" $flags -lm -o "$tmp/example-moved"
env -u LD_LIBRARY_PATH "$tmp/example-moved"
