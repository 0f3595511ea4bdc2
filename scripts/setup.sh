#!/usr/bin/env bash
# Installs the Debian packages qsa needs, only when one is missing, so it is
# cheap to run before every build. Usage: scripts/setup.sh [--plots] [--hip] [--fuzz]
# The Python tools (scripts/qsa_trace.py and its cross-language test) need
# numpy and h5py, so those are part of the default set.
set -euo pipefail

packages=(g++ cmake ninja-build pkg-config libeigen3-dev libhdf5-dev libcli11-dev libfmt-dev
          libgtest-dev libgmock-dev libbenchmark-dev python3 python3-numpy python3-h5py)
for arg in "$@"; do
  case $arg in
    --plots) packages+=(python3-matplotlib) ;;
    --hip) packages+=(hipcc libamd-comgr-dev libhsa-runtime-dev) ;;  # the hip preset's toolchain
    # The fuzz preset: clang-14 with its libFuzzer/ASan/UBSan runtimes and
    # OpenMP (clang-15's libomp-15-dev conflicts with Debian's default 14).
    # llvm-14 (llvm-symbolizer, for readable sanitizer stacks) is optional.
    --fuzz) packages+=(clang-14 libclang-rt-14-dev libomp-14-dev) ;;
    *) echo "setup: unknown option $arg (accepted: --plots, --hip, --fuzz)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "setup: installing ${missing[*]}" >&2
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install ${missing[*]}" >&2; exit 2; }
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
