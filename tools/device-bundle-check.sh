#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Proves a device bundle (tools/device-bundle.sh) on this machine as a bare GPU machine would
# see it: in a private mount namespace, cmake, ctest, the compilers, glslc, python3 and the
# system's Vulkan and OpenCL loaders are covered by /dev/null, and the bundle's `run` starts
# with an empty environment. Three runs, on lavapipe and PoCL (--allow-software --quick):
#   bare        both backends checked, every test passed;
#   no-vulkan   no Vulkan driver (VK_DRIVER_FILES names none): said, and OpenCL still checked;
#   no-opencl   no OpenCL ICD (an empty vendors folder): said, and Vulkan still checked.
# Needs root (or unprivileged user namespaces) for unshare -m. Usage: BUNDLE OUT_DIR
set -euo pipefail

if [[ ${1:-} == -h || ${1:-} == --help || $# -ne 2 ]]; then
    sed -n '3,11p' "$0" | sed 's/^# \{0,1\}//'
    [[ $# -eq 2 ]] || exit 2
    exit 0
fi
bundle=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
[[ -x $bundle/run && -f $bundle/tests.tsv ]] || { echo "$bundle: not a bundle" >&2; exit 1; }

# What a bare machine lacks: build tools, python, and the system's loaders.
hidden=()
for tool in cmake ctest cpack cc gcc g++ clang glslc glslangValidator python3; do
    # as the bare run's PATH finds them
    path=$(PATH=/usr/bin:/bin command -v "$tool" 2>/dev/null) || continue
    hidden+=("$(readlink -f "$path")")
done
for library in libvulkan.so.1 libOpenCL.so.1; do
    for dir in /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib64 /usr/lib; do
        [[ -e $dir/$library ]] && hidden+=("$(readlink -f "$dir/$library")")
    done
done

mounts="mount --make-rprivate /"
for path in "${hidden[@]}"; do
    mounts+=" && mount --bind /dev/null '$path'"
done

# Runs words in the bare namespace with an empty environment: bare WORDS...
bare() {
    unshare -m bash -c "$mounts && exec env -i PATH=/usr/bin:/bin HOME=/nonexistent $*"
}

# Runs the bundle there: run_bare NAME [VAR=VALUE...]
run_bare() {
    local name=$1
    shift
    echo "== $name: ${*:-(no variables)}"
    set +e
    bare "$*" "'$bundle/run'" --allow-software --quick --out "'$out/$name'" >"$out/$name.log" 2>&1
    local rc=$?
    set -e
    echo "   exit $rc; $(grep -E '^result:' "$out/$name/summary.txt" 2>/dev/null || echo 'no summary')"
    return $rc
}

# The summary's devices, "backend:tests_failed:ok" each.
devices_of() {
    grep -o '"backend": "[a-z]*", "type"' "$out/$1/summary.json" | sed 's/"backend": "\([a-z]*\)".*/\1/' |
        sort | tr '\n' ' '
}

fail=0
check() {
    if eval "$2"; then
        echo "   ok: $1"
    else
        echo "   FAILED: $1"
        fail=1
    fi
}

run_bare bare || true
check "cmake, the compilers and python3 are hidden" \
    "! bare cmake --version >/dev/null 2>&1 && ! bare cc --version >/dev/null 2>&1 && ! bare python3 -c 1 >/dev/null 2>&1"
check "both backends checked" "[[ '$(devices_of bare 2>/dev/null)' == *opencl*vulkan* ]]"
check "every test passed" "! grep -q '\"tests_failed\": [1-9]' '$out/bare/summary.json'"
check "result PASS" "grep -q '\"result\": \"PASS\"' '$out/bare/summary.json'"
check "the bundle's loaders were used" "grep -q 'loader: libvulkan.so.1 from the bundle' '$out/bare/summary.txt'"

empty=$out/no-such-vulkan-driver.json
run_bare no-vulkan "VK_DRIVER_FILES=$empty" || true
check "no Vulkan driver is said" "grep -q 'vulkan: no driver' '$out/no-vulkan/summary.txt'"
check "OpenCL still checked" "[[ '$(devices_of no-vulkan 2>/dev/null)' == 'opencl ' ]] && grep -q '\"result\": \"PASS\"' '$out/no-vulkan/summary.json'"

mkdir -p "$out/empty-vendors"
run_bare no-opencl "OCL_ICD_VENDORS=$out/empty-vendors" || true
check "no OpenCL ICD is said" "grep -q 'opencl: no driver' '$out/no-opencl/summary.txt'"
check "Vulkan still checked" "[[ '$(devices_of no-opencl 2>/dev/null)' == 'vulkan ' ]] && grep -q '\"result\": \"PASS\"' '$out/no-opencl/summary.json'"

if ((fail)); then
    echo "device-bundle-check: FAILED (logs: $out)"
    exit 1
fi
echo "device-bundle-check: passed (bare machine, no Vulkan driver, no OpenCL ICD)"
