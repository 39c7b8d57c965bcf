#!/usr/bin/env bash
# Pack LLVM's llvm-mc with the shared libraries it loads into one archive, for a bare host without it
# (the device machine: its image has llvmlite but no llvm-mc). Debian/Ubuntu packages are downloaded
# with apt-get (no root needed for `download`), unpacked here and the needed files kept:
#
#   tools/carry_llvm_mc.sh .devcarry/llvm.tar.xz        # ~38 MB (libLLVM-14 is most of it)
#
# On the other host (any folder; under /tmp works: the sandbox binds $KEGEN_LLVM_MC's folder back):
#
#   tar xJf .devcarry/llvm.tar.xz -C /tmp/kc
#   printf '#!/bin/sh\nLD_LIBRARY_PATH=/tmp/kc/llvmcarry/lib exec /tmp/kc/llvmcarry/llvm-mc "$@"\n' \
#       > /tmp/kc/llvmcarry/mc.sh && chmod +x /tmp/kc/llvmcarry/mc.sh
#   export KEGEN_LLVM_MC=/tmp/kc/llvmcarry/mc.sh
set -euo pipefail
out=$(realpath -m "${1:?usage: tools/carry_llvm_mc.sh OUT.tar.xz}")
version=${LLVM_VERSION:-14}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
apt-get download "llvm-$version" "libllvm$version" libz3-4 libicu72 libxml2 libedit2 libbsd0 libmd0 >/dev/null
for deb in ./*.deb; do dpkg -x "$deb" root; done
mkdir -p llvmcarry/lib
cp -L "root/usr/lib/llvm-$version/bin/llvm-mc" llvmcarry/
libs=$(LD_LIBRARY_PATH=root/usr/lib/x86_64-linux-gnu ldd llvmcarry/llvm-mc | awk '/=> .*root\// {print $3}')
for lib in $libs; do cp -L "$lib" llvmcarry/lib/; done
for lib in libicuuc.so.72 libicudata.so.72; do cp -L "root/usr/lib/x86_64-linux-gnu/$lib" llvmcarry/lib/; done
LD_LIBRARY_PATH=llvmcarry/lib llvmcarry/llvm-mc --version | head -2
mkdir -p "$(dirname "$out")"
tar cJf "$out" llvmcarry
ls -la "$out"
