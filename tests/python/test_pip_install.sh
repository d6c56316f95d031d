#!/bin/sh
# pip builds and installs the package from pyproject.toml and setup.py, offline:
# from a copy of the source tree (so the checkout stays clean), into a virtual
# environment that sees the system's site-packages (Debian's numpy, torch,
# setuptools and wheel), with --no-build-isolation --no-index, as the README
# says. The installed package must carry its own libconvpool and load it from
# a clean environment (env -i: no CONVPOOL_LIB, no LD_LIBRARY_PATH, no build
# tree), run a layer and, with torch, a fused model. Then the same with
# --prefix and no virtual environment.
#   test_pip_install.sh SOURCE_DIR PYTHON
# Exit 77 (skipped) without python3-venv, python3-setuptools or python3-wheel.
set -eu
src=$1
python=$2
if ! "$python" -c "import venv, ensurepip, setuptools, wheel" 2>/dev/null; then
  echo "skipped: pip's build needs python3-venv, python3-setuptools and python3-wheel"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/src"
(cd "$src" && tar --exclude=./build --exclude='./build-*' --exclude=./.git \
  --exclude='*.egg-info' --exclude=__pycache__ -cf - .) | tar -xf - -C "$tmp/src"

# PYTHON SITE: import convpool from SITE in a clean environment and use it.
check() {
  env -i PATH=/usr/bin:/bin PYTHONDONTWRITEBYTECODE=1 ${3:+PYTHONPATH="$3"} "$1" -c '
import os, sys
import numpy as np
import convpool
site = sys.argv[1]
assert convpool.__file__.startswith(site + "/"), convpool.__file__
lib = convpool.library_path()
assert lib == os.path.join(os.path.dirname(convpool.__file__), "libconvpool.so.0"), lib
x = np.ones((1, 2, 5, 5), np.float32)
w = np.ones((3, 2, 3, 3), np.float32)
b = np.array([0.0, -20.0, 1.0], np.float32)
y = convpool.conv2d_maxpool(x, w, b, pool=2, padding=1, activation="relu")
assert y.shape == (1, 3, 2, 2) and y[0, 0, 0, 0] == 18.0 and y[0, 1, 0, 0] == 0.0, y
try:
    import torch
except ImportError:
    torch = None
if torch is not None:
    import convpool.torch as cpt
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(),
                                torch.nn.MaxPool2d(2)).eval()
    fused = cpt.fuse(model)
    assert len(fused.convpool_report.fused) == 1, fused.convpool_report
    x = torch.rand(1, 3, 10, 10)
    with torch.no_grad():
        assert torch.allclose(fused(x), model(x), rtol=1e-5, atol=1e-6)
version = convpool.info()["version"]
print(f"pip install: ok (convpool {version} from {convpool.__file__}, {lib})")
' "$2"
}

"$python" -m venv --system-site-packages "$tmp/venv"
"$tmp/venv/bin/python" -m pip install --no-build-isolation --no-index --quiet "$tmp/src"
site=$("$tmp/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
check "$tmp/venv/bin/python" "$site"

# Without a virtual environment: --prefix (Debian's pip refuses to write the
# system's site-packages, PEP 668, but not a prefix).
rm -rf "$tmp/src/build-python"
"$python" -m pip install --no-build-isolation --no-index --quiet --prefix "$tmp/prefix" \
  "$tmp/src" 2>/dev/null
site=$(find "$tmp/prefix" -path '*/site-packages/convpool' -o -path '*/dist-packages/convpool' |
  head -n 1)
[ -n "$site" ] || { echo "pip install --prefix put no convpool package under $tmp/prefix"; exit 1; }
site=$(dirname "$site")
check "$python" "$site" "$site"
