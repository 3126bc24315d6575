#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# posenc beside ggml's RoPE on this machine's CPU: fetches ggml's sources, builds both and runs
# tools/peers/ggml_rope_bench.c.
set -euo pipefail

# llama-cpp-python's source package carries llama.cpp, and with it ggml 0.25.3: the one place
# ggml's sources come from where PyPI is the only registry.
GGML_PACKAGE="llama-cpp-python==0.3.36"

usage() {
    cat <<USAGE
usage: tools/peers/ggml-bench.sh [--ggml DIR] [--build-dir DIR] [--threads N]

Times posenc's RoPE against ggml's (ggml_rope_ext on the CPU, as llama.cpp runs it) in one
process, in alternating rounds: q [T, 32, 128] and k [T, 8, 128] in place, a decode step and a
4096-token prefill, f32 and f16, NeoX and GPT-J; and f32 NeoX after Qwen3's QK RMSNorm
(ggml's rms_norm, mul and rope graph against one posenc_rope with the norm's weights). Each
row prints both medians, ggml / posenc, and each side's worst error against a float64
rotation of the same input.

  --ggml DIR       ggml's source tree (llama.cpp's ggml/); default: the one in the source
                   package of ${GGML_PACKAGE}, downloaded with pip
  --build-dir DIR  where to download and build (default: build/peers)
  --threads N      threads for each library (default: every core this process may use)

Needs: bash, a C and a C++ compiler, CMake 3.20 or newer, and (without --ggml) python3 with
pip and access to PyPI. The build takes a few minutes, the run about a minute.
USAGE
}

root=$(cd "$(dirname "$0")/../.." && pwd)
build="$root/build/peers"
ggml=""
threads=0
while [ $# -gt 0 ]; do
    case "$1" in
        --ggml) ggml=$(cd "$2" && pwd); shift 2 ;;
        --build-dir) build=$2; shift 2 ;;
        --threads) threads=$2; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
done

if [ -z "$ggml" ]; then
    mkdir -p "$build/download"
    python3 -m pip download --quiet --no-deps --no-binary :all: "$GGML_PACKAGE" \
        -d "$build/download"
    archive=$(ls "$build"/download/llama_cpp_python-*.tar.gz | head -n 1)
    rm -rf "$build/source.tmp"
    mkdir -p "$build/source.tmp"
    tar -xzf "$archive" -C "$build/source.tmp"
    rm -rf "$build/source"
    mv "$build/source.tmp" "$build/source"
    ggml=$(ls -d "$build"/source/llama_cpp_python-*/vendor/llama.cpp/ggml | head -n 1)
fi

generator=()
if command -v ninja >/dev/null 2>&1; then
    generator=(-G Ninja)
fi
cmake -S "$root/tools/peers" -B "$build/cmake" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DGGML_SOURCE_DIR="$ggml" >/dev/null
cmake --build "$build/cmake" --target ggml_rope_bench
"$build/cmake/ggml_rope_bench" "$threads"
