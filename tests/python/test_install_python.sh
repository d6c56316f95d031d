#!/bin/sh
# Install the build into a temporary prefix, then import the installed Python
# package from a clean environment (env -i: no CONVPOOL_LIB, no build tree on
# the path) and run a small layer: it must load the installed libconvpool, also
# after the whole prefix has moved. Then check that -DCONVPOOL_PYTHON=OFF
# leaves the package out of the install rules.
#   test_install_python.sh BUILD_DIR PYTHON INSTALL_DIR (relative to the prefix, or absolute)
set -eu
build=$1
python=$2
pydir=$3
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null

# PREFIX SITE: import convpool from SITE, run a layer, check where things came from.
check() {
  env -i PYTHONPATH="$2" PYTHONDONTWRITEBYTECODE=1 "$python" -c '
import sys
import numpy as np
import convpool
prefix, site = sys.argv[1], sys.argv[2]
assert convpool.__file__.startswith(site + "/"), convpool.__file__
lib = convpool.library_path()
assert lib.startswith(prefix + "/"), f"loaded {lib}, not the one in {prefix}"
x = np.ones((1, 2, 5, 5), np.float32)
w = np.ones((3, 2, 3, 3), np.float32)
b = np.array([0.0, -20.0, 1.0], np.float32)
y = convpool.conv2d_maxpool(x, w, b, pool=2, padding=1, activation="relu")
# corner windows see 2x2 of the input (8 products), the others more; max over 2x2
assert y.shape == (1, 3, 2, 2), y.shape
assert y[0, 0, 0, 0] == 18.0 and y[0, 1, 0, 0] == 0.0 and y[0, 2, 0, 0] == 19.0, y
version = convpool.info()["version"]
print(f"python install: ok (convpool {version} from {convpool.__file__}, {lib})")
' "$1" "$2"
}

case $pydir in
  /*) check "$tmp/prefix" "$pydir"; exit 0 ;;    # absolute: not under the prefix
esac
[ -f "$tmp/prefix/$pydir/convpool/_config.py" ] || { echo "no _config.py installed"; exit 1; }
check "$tmp/prefix" "$tmp/prefix/$pydir"
mv "$tmp/prefix" "$tmp/moved"
check "$tmp/moved" "$tmp/moved/$pydir"

# -DCONVPOOL_PYTHON=OFF: no Python install rules (configure only).
cmake -S "$src" -B "$tmp/off" -DCONVPOOL_PYTHON=OFF -DCONVPOOL_BUILD_TESTS=OFF >/dev/null
if [ -e "$tmp/off/python/cmake_install.cmake" ] || grep -q "convpool/_config.py\|dist-packages\|site-packages" "$tmp/off/cmake_install.cmake"; then
  echo "CONVPOOL_PYTHON=OFF still installs the Python package"
  exit 1
fi
echo "python install: CONVPOOL_PYTHON=OFF installs no Python package"
