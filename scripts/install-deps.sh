#!/bin/sh
# Install the Debian packages the build and the tests need, if any is missing.
# Runs apt-get as root (directly, or through sudo when available).
#   scripts/install-deps.sh        what `make test` needs
#   scripts/install-deps.sh --ci   also the sanitizer, fuzzing and valgrind tools
set -eu
packages="cmake make gcc pkg-config python3 python3-numpy python3-torch python3-torchvision
  python3-onnx python3-pip python3-setuptools python3-wheel python3-venv"
if [ "${1:-}" = "--ci" ]; then
  packages="$packages clang clang-format libclang-rt-14-dev valgrind"
fi
missing=""
for p in $packages; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "installing:$missing"
if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing
