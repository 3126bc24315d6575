#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds posenc for macOS on a Linux machine with cmake/toolchains/zig-macos.cmake, warnings as
# errors: everything (library, both GPU backends, CLI, tests, examples) for arm64, the library
# and CLI for x86_64, and the library as a universal binary (arm64;x86_64), where the per-file
# x86 flags must reach the x86_64 slice only. Built, never run: there is no macOS to run on.
# Usage: check-macos-build.sh SOURCE_DIR WORK_DIR; POSENC_ZIG names zig (tools/zig-macos-cc).
set -euo pipefail
source_dir=$(cd "$1" && pwd)
work_dir=$2
jobs=${POSENC_CHECK_JOBS:-2}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [[ -z "${POSENC_LIPO:-}" ]]; then
    # llvm-lipo, else the newest versioned one (Debian's llvm package: llvm-lipo-NN).
    versioned=$(compgen -c llvm-lipo- | sort -t- -k3 -n -r | head -n 1 || true)
    for lipo in llvm-lipo $versioned lipo; do
        if command -v "$lipo" >/dev/null; then
            export POSENC_LIPO=$lipo
            break
        fi
    done
fi

build() {
    local name=$1
    shift
    echo "== macOS $name"
    # No build type: unoptimized, the quickest to compile; the checks are the compiler's.
    cmake -S "$source_dir" -B "$work_dir/$name" "${generator[@]}" -DCMAKE_BUILD_TYPE= \
        --toolchain "$source_dir/cmake/toolchains/zig-macos.cmake" -DPOSENC_WERROR=ON "$@" \
        >"$work_dir/$name.configure.log" || { cat "$work_dir/$name.configure.log"; exit 1; }
    cmake --build "$work_dir/$name" -j "$jobs"
}

mkdir -p "$work_dir"
build arm64 -DCMAKE_OSX_ARCHITECTURES=arm64
build x86_64 -DCMAKE_OSX_ARCHITECTURES=x86_64 -DPOSENC_BUILD_TESTS=OFF \
    -DPOSENC_BUILD_EXAMPLES=OFF
# The libraries only: their objects are fat (one slice per architecture, as Apple clang makes
# them), which zig links into the shared library, but linking a program against an archive of
# fat objects needs Apple's toolchain.
build universal "-DCMAKE_OSX_ARCHITECTURES=arm64;x86_64" -DPOSENC_BUILD_CLI=OFF \
    -DPOSENC_BUILD_TESTS=OFF -DPOSENC_BUILD_EXAMPLES=OFF

# The universal library really holds both slices.
universal_library=$(find "$work_dir/universal" -name 'libposenc.*.dylib' -type f | head -n 1)
archs=$("$POSENC_LIPO" -archs "$universal_library")
for arch in arm64 x86_64; do
    if [[ " $archs " != *" $arch "* ]]; then
        echo "check-macos-build: $universal_library holds '$archs', no $arch" >&2
        exit 1
    fi
done
archs=$(echo $archs)
echo "macOS build check passed: arm64 (library, backends, CLI, tests, examples), x86_64" \
     "(library, CLI) and a universal library ($archs), warnings as errors"
