#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds a device bundle: one folder with posenc, its device tests and examples, and the Vulkan
# and OpenCL loaders and the Khronos validation layer of this machine, that runs the device check
# (the bundle's `run`) on a bare GPU machine with bash and coreutils alone.
set -euo pipefail

usage() {
    cat <<'EOF'
usage: tools/device-bundle.sh OUT [--build-dir DIR] [--jobs N]

Builds, on this x86-64 Linux machine, a self-contained folder OUT (at most 48 MiB) for a bare,
offline GPU machine that has bash and coreutils but no cmake, compiler or python, and maybe no
Vulkan or OpenCL loader:
  1. builds posenc (Release, tests and examples, the Vulkan and OpenCL backends both ON, the
     tests linked to one shared library: POSENC_TEST_SHARED_LIBRARY) in DIR, unless DIR
     already holds such a build;
  2. writes OUT/tests.tsv, the device tests of tools/device-check.sh as ctest runs them, with
     build paths written {bundle}/...; tests that need cmake or other files outside the bundle
     are left out, and named in the manifest;
  3. copies, stripped: OUT/bin/posenc, the tests' programs to OUT/tests/, the examples and
     their data files to OUT/examples/, and the libposenc libraries they link to OUT/lib/;
  4. copies this machine's Vulkan loader (libvulkan.so.1), OpenCL ICD loader (libOpenCL.so.1)
     and Khronos validation layer to OUT/lib/, the layer's manifest to OUT/layers/, and checks
     that the bundle lists this machine's Vulkan device through them and the layer;
  5. writes OUT/manifest.txt (every file with its size and sha256; the versions of posenc, the
     compiler and the runtimes; the tests left out) and copies tools/device-bundle/run and the
     scripts it sources;
  6. checks the size of OUT.
OUT is emptied first; a folder that is not empty and not a bundle (no manifest.txt) is refused.
Exits 0 when the bundle is complete and within the size, 1 otherwise (the bundle stays, for a
look), 2 on a usage error. Needs: cmake, ninja, a C compiler, glslc, the Vulkan and OpenCL
development packages, vulkan-validationlayers, python3, readelf and strip (binutils), dpkg.

options:
  --build-dir DIR  where to build (default: build/device-bundle in the source tree); an
                   existing build there with tests and examples is used as it is
  --jobs N         parallel build jobs (default: the number of processors)
  -h, --help       this text
EOF
}

die_usage() {
    echo "device-bundle: $*" >&2
    echo "device-bundle: see tools/device-bundle.sh --help" >&2
    exit 2
}

die() {
    echo "device-bundle: $*" >&2
    exit 1
}

step() {
    echo
    echo "== $*"
}

source_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
helpers=$source_dir/tools/device-bundle
max_bytes=$((48 * 1024 * 1024))
out=""
build_dir=""
jobs=""

while (($#)); do
    case $1 in
        -h | --help)
            usage
            exit 0
            ;;
        --build-dir)
            (($# >= 2)) || die_usage "--build-dir: missing value"
            build_dir=$2
            shift
            ;;
        --build-dir=*) build_dir=${1#*=} ;;
        --jobs)
            (($# >= 2)) || die_usage "--jobs: missing value"
            jobs=$2
            shift
            ;;
        --jobs=*) jobs=${1#*=} ;;
        -*) die_usage "unknown option '$1'" ;;
        *)
            [[ -z $out ]] || die_usage "one OUT folder only ('$out', then '$1')"
            out=$1
            ;;
    esac
    shift
done

[[ -n $out ]] || die_usage "missing OUT, the bundle's folder"
if [[ -n $jobs && ! $jobs =~ ^[1-9][0-9]*$ ]]; then
    die_usage "--jobs: expected a positive integer, got '$jobs'"
fi
jobs=${jobs:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)}
build_dir=${build_dir:-$source_dir/build/device-bundle}
build_dir=$(realpath -m "$build_dir")
out=$(realpath -m "$out")

for tool in cmake ctest python3 readelf strip sha256sum dpkg dpkg-query ldconfig; do
    command -v "$tool" >/dev/null 2>&1 || die "needs $tool (see --help)"
done

# ---- 0. the bundle's folder ---------------------------------------------------------------------
# Nothing of the bundle goes into the source tree, except under build/ (which git ignores).
case $out/ in
    / | "$source_dir"/ | "$build_dir"/ | "$build_dir"/*) die "$out: not a folder for a bundle" ;;
    "$source_dir"/build/?*) ;;
    "$source_dir"/*) die "$out: inside the source tree; put it under build/ or elsewhere" ;;
esac
case $build_dir/ in
    "$out"/*) die "$out: holds the build folder $build_dir" ;;
esac
if [[ -e $out && ! -d $out ]]; then
    die "$out: exists and is not a folder"
fi
if [[ -d $out && -n $(ls -A "$out") ]]; then
    # Only what this script made is emptied: its manifest's first line says so.
    if [[ $(head -n 1 "$out/manifest.txt" 2>/dev/null) != "# posenc device bundle"* ]]; then
        die "$out: not empty, and not a device bundle (no manifest.txt of one); not emptying it"
    fi
    echo "emptying the earlier bundle in $out"
    find "$out" -mindepth 1 -delete
fi
mkdir -p "$out"/bin "$out"/tests "$out"/examples "$out"/lib "$out"/layers
# Marks the folder as a bundle from the start, so that a run cut short can be redone.
echo "# posenc device bundle (incomplete: tools/device-bundle.sh did not finish)" \
    >"$out/manifest.txt"
work=$(mktemp -d "${TMPDIR:-/tmp}/device-bundle.XXXXXX")
trap 'rm -rf "$work"' EXIT

# ---- 1. build -----------------------------------------------------------------------------------
step "1. build ($build_dir)"
has_tests_and_examples() {
    [[ -f $build_dir/CMakeCache.txt && -x $build_dir/posenc ]] &&
        grep -qx 'POSENC_BUILD_TESTS:BOOL=ON' "$build_dir/CMakeCache.txt" &&
        grep -qx 'POSENC_BUILD_EXAMPLES:BOOL=ON' "$build_dir/CMakeCache.txt" &&
        grep -qx 'POSENC_TEST_SHARED_LIBRARY:BOOL=ON' "$build_dir/CMakeCache.txt" &&
        [[ -f $build_dir/tests/CTestTestfile.cmake && -f $build_dir/examples/CTestTestfile.cmake ]]
}
if [[ $build_dir != "$source_dir/build/device-bundle" ]] && has_tests_and_examples; then
    echo "using the build in $build_dir as it is"
elif [[ $build_dir != "$source_dir/build/device-bundle" && -f $build_dir/CMakeCache.txt ]]; then
    die "$build_dir is not a build with tests, examples and POSENC_TEST_SHARED_LIBRARY=ON" \
        "(the tests then share one libposenc_test_shared.so instead of 1.7 MiB each);" \
        "leave --build-dir out to build one in build/device-bundle"
else
    configure=(cmake -S "$source_dir" -B "$build_dir")
    if [[ ! -f $build_dir/CMakeCache.txt ]]; then
        command -v ninja >/dev/null 2>&1 || die "needs ninja (Debian: ninja-build)"
        configure+=(-G Ninja)
    fi
    configure+=(-DCMAKE_BUILD_TYPE=Release -DPOSENC_WERROR=OFF -DPOSENC_BUILD_TESTS=ON
        -DPOSENC_BUILD_EXAMPLES=ON -DPOSENC_BUILD_PYTHON=OFF -DPOSENC_BUILD_FUZZERS=OFF
        -DPOSENC_VULKAN=ON -DPOSENC_OPENCL=ON -DPOSENC_TEST_SHARED_LIBRARY=ON)
    mkdir -p "$build_dir"
    echo "+ ${configure[*]} > $build_dir/device-bundle-configure.log"
    if ! "${configure[@]}" >"$build_dir/device-bundle-configure.log" 2>&1; then
        tail -n 30 "$build_dir/device-bundle-configure.log" >&2
        die "configure failed (with both backends ON: their tools must be installed)"
    fi
    grep '^-- posenc:' "$build_dir/device-bundle-configure.log" || true
    echo "+ cmake --build $build_dir -j $jobs > $build_dir/device-bundle-build.log"
    if ! cmake --build "$build_dir" -j "$jobs" >"$build_dir/device-bundle-build.log" 2>&1; then
        tail -n 30 "$build_dir/device-bundle-build.log" >&2
        die "build failed (log: $build_dir/device-bundle-build.log)"
    fi
fi
# The bundle must carry both GPU backends, whoever configured the build.
backends=$(POSENC_DEVICE='' "$build_dir/posenc" devices 2>&1 | sed -n '/^backends:/,/^[^ ]/p') ||
    die "$build_dir/posenc devices failed"
for backend in vulkan opencl; do
    line=$(grep -E "^  $backend " <<<"$backends" || true)
    [[ -n $line ]] || die "$build_dir/posenc does not name the $backend backend"
    if [[ $line == *"not compiled in"* || $line == *"built without"* ]]; then
        die "$build_dir was built without the $backend backend: $line"
    fi
done
# The build's own source tree (another clone, for a build passed with --build-dir).
build_source=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build_dir/CMakeCache.txt")
build_source=${build_source:-$source_dir}

# ---- 2. the test list ---------------------------------------------------------------------------
step "2. test list"
echo "+ ctest --test-dir $build_dir --show-only=json-v1"
ctest --test-dir "$build_dir" --show-only=json-v1 >"$work/ctest.json" ||
    die "ctest --show-only failed"
PYTHONDONTWRITEBYTECODE=1 python3 "$helpers/tests.py" "$work/ctest.json" "$build_dir" \
    "$out/tests.tsv" "$work/files.txt" "$work/left-out.txt" "$build_source" "$source_dir" ||
    die "the test list failed"
# Checked here too: a kept line that names the build or source tree would not run there.
for root in "$build_dir" "$(realpath "$build_dir")" "$build_source" "$source_dir"; do
    if grep -F -- "$root" "$out/tests.tsv" >&2; then
        die "tests.tsv still names $root (lines above)"
    fi
done
test_count=$(grep -vc '^#' "$out/tests.tsv" || true)
((test_count > 0)) || die "no device tests in $build_dir"
echo "$test_count tests in tests.tsv"
while IFS=$'\t' read -r name why; do
    echo "not bundled: $name: $why"
done <"$work/left-out.txt"

# ---- 3. posenc, tests, examples -----------------------------------------------------------------
step "3. posenc, tests and examples"
is_elf() {
    [[ $(head -c 4 "$1" | od -An -c | tr -d ' ') == '177ELF' ]]
}
# Copies FILE to DEST, stripped when it is an ELF file and stripping makes it smaller.
copy_stripped() {
    local file=$1 dest=$2
    mkdir -p "$(dirname "$dest")"
    cp -L --preserve=mode "$file" "$dest"
    if is_elf "$dest"; then
        strip --strip-unneeded -o "$work/stripped" "$dest" || die "strip $file failed"
        if (($(stat -c %s "$work/stripped") < $(stat -c %s "$dest"))); then
            cat "$work/stripped" >"$dest"
        fi
        rm -f "$work/stripped"
    fi
}
copy_stripped "$build_dir/posenc" "$out/bin/posenc"
while IFS= read -r rel; do
    [[ $rel == posenc ]] && continue
    copy_stripped "$build_dir/$rel" "$out/$rel"
done <"$work/files.txt"
# The examples read data files beside them (vulkan_engine's *.spv): all but CMake's own files.
for file in "$build_dir"/examples/*; do
    [[ -f $file && $file != *.cmake && $(basename "$file") != Makefile ]] || continue
    [[ -e $out/examples/$(basename "$file") ]] || copy_stripped "$file" "$out/examples/${file##*/}"
done

# Every ELF program of the bundle: libposenc where one links it, and no DT_RPATH, which would
# take precedence over LD_LIBRARY_PATH (the bundle's libraries); DT_RUNPATH does not.
mapfile -t programs < <(find "$out/bin" "$out/tests" "$out/examples" -type f -perm -u+x | sort)
for program in "${programs[@]}"; do
    is_elf "$program" || continue
    dynamic=$(readelf -d "$program" 2>/dev/null || true)
    while IFS= read -r needed; do
        [[ -e $out/lib/$needed ]] && continue
        library=$build_dir/src/$needed
        [[ -e $library ]] || die "${program#"$out"/} needs $needed, not in $build_dir/src"
        copy_stripped "$library" "$out/lib/$needed"
        echo "lib/$needed (linked by ${program#"$out"/})"
    done < <(sed -n 's/.*(NEEDED).*\[\(libposenc[^]]*\)\]/\1/p' <<<"$dynamic")
    if grep -q '(RPATH)' <<<"$dynamic"; then
        command -v patchelf >/dev/null 2>&1 ||
            die "${program#"$out"/} has a DT_RPATH, which overrides LD_LIBRARY_PATH; install" \
                "patchelf to remove it, or build with DT_RUNPATH (-Wl,--enable-new-dtags)"
        patchelf --remove-rpath "$program"
        echo "${program#"$out"/}: DT_RPATH removed"
    fi
done
echo "bin/posenc, $(find "$out/tests" -type f | wc -l) test programs," \
    "$(find "$out/examples" -type f | wc -l) example files"

# ---- 4. runtimes --------------------------------------------------------------------------------
step "4. runtimes"
# The real file behind a library name, from the linker cache, else from its Debian package.
system_library() {
    local name=$1 package=$2 path
    path=$(ldconfig -p | awk -v n="$name" '$1 == n && /x86-64/ { print $NF; exit }')
    if [[ -z $path ]]; then
        path=$(dpkg -L "$package" 2>/dev/null | grep -m 1 "/$name\$" || true)
    fi
    [[ -n $path && -e $path ]] || die "no $name here (Debian: $package)"
    realpath "$path"
}
vulkan_loader=$(system_library libvulkan.so.1 libvulkan1)
opencl_loader=$(system_library libOpenCL.so.1 ocl-icd-libopencl1)
copy_stripped "$vulkan_loader" "$out/lib/libvulkan.so.1"
copy_stripped "$opencl_loader" "$out/lib/libOpenCL.so.1"
echo "lib/libvulkan.so.1 from $vulkan_loader"
echo "lib/libOpenCL.so.1 from $opencl_loader"

layer_files=$(dpkg -L vulkan-validationlayers 2>/dev/null) ||
    die "the Khronos validation layer is not installed (Debian: vulkan-validationlayers)"
layer_json=$(grep -m 1 '/VkLayer_khronos_validation\.json$' <<<"$layer_files" || true)
layer_library=$(grep -m 1 '/libVkLayer_khronos_validation\.so$' <<<"$layer_files" || true)
[[ -f $layer_json && -f $layer_library ]] ||
    die "vulkan-validationlayers lacks VkLayer_khronos_validation.json or its library"
copy_stripped "$layer_library" "$out/lib/libVkLayer_khronos_validation.so"
# The loader reads a relative library_path from the manifest's own folder.
sed -E 's#("library_path"[[:space:]]*:[[:space:]]*)"[^"]*"#\1"../lib/libVkLayer_khronos_validation.so"#' \
    "$layer_json" >"$out/layers/VkLayer_khronos_validation.json"
grep -q '"library_path": *"\.\./lib/libVkLayer_khronos_validation\.so"' \
    "$out/layers/VkLayer_khronos_validation.json" || die "could not rewrite $layer_json's library_path"
echo "lib/libVkLayer_khronos_validation.so from $layer_library"
echo "layers/VkLayer_khronos_validation.json from $layer_json"

# Libraries the bundle's files need from the machine: the C library and, for the layer, the
# C++ runtime (libstdc++6, libgcc-s1), which a bare machine normally has.
system_needs=$(find "$out" -type f -exec sh -c 'readelf -d "$1" 2>/dev/null' _ {} \; |
    sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u |
    while IFS= read -r needed; do [[ -e $out/lib/$needed ]] || echo "$needed"; done |
    tr '\n' ' ')
echo "from the machine: ${system_needs% }"

echo "smoke test: posenc devices through the bundle's loaders and validation layer"
echo "+ VK_LAYER_PATH=$out/layers VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation" \
    "VK_LOADER_DEBUG=layer LD_LIBRARY_PATH=$out/lib $out/bin/posenc devices"
smoke_rc=0
env POSENC_DEVICE= VK_LAYER_PATH="$out/layers" VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation \
    VK_LOADER_DEBUG=layer LD_LIBRARY_PATH="$out/lib" LD_DEBUG=libs \
    "$out/bin/posenc" devices >"$work/smoke.txt" 2>"$work/smoke.err" || smoke_rc=$?
grep -v -E '^ *[0-9]+:|^(INFO|WARNING|DEBUG|LAYER|ERROR)' "$work/smoke.txt" | sed 's/^/  /'
smoke_fail() {
    grep -v -E '^ *[0-9]+:' "$work/smoke.err" | tail -n 20 >&2
    die "$@"
}
((smoke_rc == 0)) || smoke_fail "posenc devices failed (exit $smoke_rc)"
grep -qE '^ *\[[0-9]+\] vulkan:[0-9]+ ' "$work/smoke.txt" ||
    smoke_fail "no Vulkan device through the bundle (is a driver installed here? lavapipe:" \
        "mesa-vulkan-drivers)"
# The loader and layer that were loaded, as the dynamic linker and the loader report them.
loaded() {
    grep -h -E "$1" "$work/smoke.txt" "$work/smoke.err" | head -n 1
}
for library in libvulkan.so.1 libOpenCL.so.1; do
    line=$(loaded "calling init: .*/$library\$|trying file=.*/$library\$" || true)
    [[ $line == *"$out/lib/$library"* ]] ||
        smoke_fail "$library was not loaded from the bundle: ${line:-not loaded}"
done
# INFO | LAYER: Insert instance layer "VK_LAYER_KHRONOS_validation" (OUT/layers/../lib/...)
line=$(loaded 'Insert instance layer "VK_LAYER_KHRONOS_validation"' || true)
layer_loaded=$(sed -n 's/.*(\(.*\))$/\1/p' <<<"$line")
[[ -n $layer_loaded && $(realpath -m "$layer_loaded") == "$out/lib/libVkLayer_khronos_validation.so" ]] ||
    smoke_fail "the validation layer was not loaded from the bundle: ${line:-not loaded}"
echo "smoke test passed: vulkan device listed; libvulkan.so.1, libOpenCL.so.1 and the" \
    "validation layer loaded from $out/lib"
if ! grep -qE '^ *\[[0-9]+\] opencl:[0-9]+ ' "$work/smoke.txt"; then
    echo "note: no OpenCL device here (an ICD: pocl-opencl-icd); the loader is bundled all the same"
fi

# ---- 5. run script and manifest -----------------------------------------------------------------
step "5. run script and manifest"
# The bundle's `run` (tools/device-bundle/run) and the files it reads from the bundle
# ("$bundle/summary.sh"), where they are written yet.
if [[ -f $helpers/run ]]; then
    cp "$helpers/run" "$out/run"
    chmod +x "$out/run"
    echo "run from $helpers/run"
    # shellcheck disable=SC2016 # the words "$bundle/..." as run's text has them
    grep -o '\$bundle/[A-Za-z0-9_.-]*' "$helpers/run" | sed 's#.*/##' | sort -u |
        while IFS= read -r name; do
            [[ -f $helpers/$name && $name != run ]] || continue
            cp "$helpers/$name" "$out/$name"
            echo "$name from $helpers/$name (read by run)"
        done
else
    echo "note: $helpers/run does not exist yet; the bundle has no run script"
fi

# One line of a command's output, or "unknown" where it fails.
first_line() {
    local text
    text=$("$@" 2>/dev/null | head -n 1) || true
    echo "${text:-unknown}"
}
package_version() {
    # shellcheck disable=SC2016 # dpkg-query's own ${...}
    first_line dpkg-query -W -f='${Version}' "$1"
}
git_describe() {
    first_line git --no-optional-locks -C "$1" describe --always --dirty
}
compiler=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$build_dir/CMakeCache.txt")
{
    echo "# posenc device bundle (tools/device-bundle.sh); run ./run --help on the GPU machine"
    echo
    echo "[versions]"
    echo "posenc: $(first_line "$out/bin/posenc" --version)"
    echo "git: $(git_describe "$build_source") ($build_source)"
    if [[ -f $out/run ]]; then
        echo "run script: $(git_describe "$source_dir") ($source_dir)"
    fi
    echo "built: $(date -u -r "$build_dir/posenc" +%Y-%m-%dT%H:%M:%SZ) ($build_dir)"
    echo "bundled: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -srm)"
    echo "compiler: ${compiler:-unknown}: $(first_line "${compiler:-false}" --version)"
    echo "build type: $(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build_dir/CMakeCache.txt")"
    for package in libvulkan1 ocl-icd-libopencl1 vulkan-validationlayers; do
        echo "$package: $(package_version "$package")"
    done
    echo "from the machine: ${system_needs% }"
    echo
    echo "[not bundled] tests of tools/device-check.sh that tests.tsv leaves out"
    while IFS=$'\t' read -r name why; do
        echo "$name: not bundled: $why"
    done <"$work/left-out.txt"
    echo
    echo "[files] path, size in bytes, sha256"
    (cd "$out" && find . -type f ! -path ./manifest.txt | sed 's#^\./##' | LC_ALL=C sort) |
        while IFS= read -r path; do
            printf '%s\t%s\t%s\n' "$path" "$(stat -c %s "$out/$path")" \
                "$(sha256sum "$out/$path" | cut -d ' ' -f 1)"
        done
} >"$work/manifest.txt"
mv "$work/manifest.txt" "$out/manifest.txt"
sed -n '/^\[versions\]/,/^$/p' "$out/manifest.txt"

# ---- 6. size ------------------------------------------------------------------------------------
step "6. size"
total=$(du -sb "$out" | cut -f 1)
sizes=$(cd "$out" && du -sb -- * | sort -k 1,1nr)
mib() {
    awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'
}
if ((total > max_bytes)); then
    while read -r bytes name; do
        echo "  $(mib "$bytes")  $name"
    done <<<"$sizes" >&2
    die "$out is $(mib "$total") ($total bytes), over the $(mib "$max_bytes") a bundle may be" \
        "(the bundle stays there, for a look)"
fi
echo "$out: $(mib "$total") ($total bytes) of at most $(mib "$max_bytes"), $test_count tests"
