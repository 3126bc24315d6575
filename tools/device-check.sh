#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Checks posenc on this machine's GPUs: builds it, lists the devices, runs the device tests, the
# float64 accuracy demo and the benchmark on each GPU, and prints a summary (also as JSON).
set -euo pipefail

usage() {
    cat <<'EOF'
usage: tools/device-check.sh [options]

Checks posenc on the GPUs of this machine, in five steps:
  1. builds posenc (Release, tests on) in its own build directory, with the Vulkan and OpenCL
     backends wherever their build tools are found;
  2. lists the devices (posenc devices);
  3. runs the tests that use Vulkan and OpenCL devices (every library test and example except
     the CPU-only ones), with the Khronos validation layer (VK_INSTANCE_LAYERS=
     VK_LAYER_KHRONOS_validation) when it is installed; every test runs on every device;
  4. on each GPU: posenc demo (RoPE and a sinusoidal table on a Llama-sized layer, every
     element checked against float64) and posenc bench --json (RoPE and sinusoidal next to a
     copy of the same bytes on the same device);
  5. prints a summary per device: tests passed and failed, the worst error against float64,
     and RoPE throughput / copy throughput (1.0 = as fast as memory allows); writes it to
     BUILD_DIR/device-check/summary.txt and summary.json, and the logs to
     BUILD_DIR/device-check/logs/. The summary is the device bundle's (tools/device-bundle.sh),
     written by the same script, tools/device-bundle/summary.sh.
Exits 0 when every test passed, every check on every GPU passed and at least one GPU was
found; 1 otherwise; 2 on a usage error. A few minutes, most of them the build: 5 minutes on 2
busy cores with lavapipe and PoCL, of which 1 for the tests, demos and benches.

A GPU is a Vulkan or OpenCL device whose type (posenc devices) is discrete, integrated or
virtual GPU. The others are taken for software devices: Mesa's lavapipe (type "software"),
PoCL and other OpenCL runtimes on the CPU (type "CPU"), and devices of type "other". The tests
run on them too, but they are checked (demo, bench) and count as the GPU the check needs only
with --allow-software.

Needs: bash, a C11 compiler, CMake 3.20 or newer (ninja is used when present), and
  for Vulkan: a Vulkan loader (libvulkan.so.1) and driver, the headers (vulkan/vulkan.h;
              Debian/Ubuntu: libvulkan-dev) and glslc or glslangValidator (glslc or
              glslang-tools) to compile the shaders; without either the build leaves the
              Vulkan backend out, and the summary says which was missing;
  for OpenCL: an ICD loader (libOpenCL.so.1) and driver, and the headers (CL/cl.h;
              opencl-headers); clang (optional) checks the kernels at build time.
posenc loads both libraries at run time; the engine tests and examples link them (the
development packages libvulkan-dev and ocl-icd-opencl-dev), and are left out without them.
The Khronos validation layer (vulkan-validationlayers) is used when installed. No root is
needed, unless --install-deps is given (apt-get, through sudo when not root).

options:
  --build-dir DIR   where to build (default: build/device-check in the source tree); an
                    existing build there is reused
  --allow-software  check software devices too, and let them satisfy "a GPU was found"
  --quick           posenc bench --quick on every device (default: --quick on software
                    devices only, the full bench on GPUs)
  --no-validation   run the tests without VK_INSTANCE_LAYERS
  --jobs N          parallel build and test jobs (default: the number of processors)
  --cmake-arg ARG   one more argument for the configure step (repeatable), e.g.
                    -DPOSENC_VULKAN_INCLUDE_DIR=/opt/vulkan/include
  --install-deps    first apt-get install the build tools and headers named above
  --summary-only    only write the summary again from the logs of the last run in
                    --build-dir, with that run's options
  --dry-run         print what would run, run nothing
  -h, --help        this text
EOF
}

die_usage() {
    echo "device-check: $*" >&2
    echo "device-check: see tools/device-check.sh --help" >&2
    exit 2
}

die() {
    echo "device-check: $*" >&2
    exit 1
}

source_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=""
allow_software=0
quick=0
validation_wanted=1
jobs=""
cmake_args=()
install_deps=0
summary_only=0
dry_run=0

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
        --allow-software) allow_software=1 ;;
        --quick) quick=1 ;;
        --no-validation) validation_wanted=0 ;;
        --jobs)
            (($# >= 2)) || die_usage "--jobs: missing value"
            jobs=$2
            shift
            ;;
        --jobs=*) jobs=${1#*=} ;;
        --cmake-arg)
            (($# >= 2)) || die_usage "--cmake-arg: missing value"
            cmake_args+=("$2")
            shift
            ;;
        --cmake-arg=*) cmake_args+=("${1#*=}") ;;
        --install-deps) install_deps=1 ;;
        --summary-only) summary_only=1 ;;
        --dry-run) dry_run=1 ;;
        *) die_usage "unknown option '$1'" ;;
    esac
    shift
done

if [[ -n $jobs && ! $jobs =~ ^[1-9][0-9]*$ ]]; then
    die_usage "--jobs: expected a positive integer, got '$jobs'"
fi
if [[ -z $build_dir ]]; then
    build_dir=$source_dir/build/device-check
fi
if [[ -z $jobs ]]; then
    jobs=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
fi
check_dir=$build_dir/device-check
log_dir=$check_dir/logs
summary_script=$source_dir/tools/device-bundle/summary.sh
posenc=$build_dir/posenc

# The words of a command as one would type them: single-quoted where the shell would otherwise
# read something into them.
shell_words() {
    local word out=""
    for word in "$@"; do
        if [[ $word =~ ^[A-Za-z0-9_./:=,+@%-]+$ ]]; then
            out+="$word "
        else
            out+="'${word//\'/\'\\\'\'}' "
        fi
    done
    printf '%s' "${out% }"
}

# Prints a command, then runs it unless this is a dry run.
run() {
    echo "+ $(shell_words "$@")"
    if ((!dry_run)); then
        "$@"
    fi
}

# Runs a command (never in a dry run) with its output going to the log file LOG.
run_logged() {
    local log=$1
    shift
    echo "+ $(shell_words "$@") > $log"
    "$@" >"$log" 2>&1
}

# Where the Vulkan loader looks for explicit layer manifests (its Linux search order), and
# whether one of them holds the Khronos validation layer; else vulkaninfo's list of layers.
validation_layer_installed() {
    local dirs=() dir
    local IFS=:
    for dir in ${VK_LAYER_PATH:-} ${VK_ADD_LAYER_PATH:-}; do
        [[ -n $dir ]] && dirs+=("$dir")
    done
    for dir in ${XDG_CONFIG_HOME:-${HOME:-}/.config} ${XDG_CONFIG_DIRS:-/etc/xdg} /etc \
        ${XDG_DATA_HOME:-${HOME:-}/.local/share} ${XDG_DATA_DIRS:-/usr/local/share:/usr/share}; do
        [[ -n $dir ]] && dirs+=("$dir/vulkan/explicit_layer.d")
    done
    unset IFS
    for dir in ${dirs[@]+"${dirs[@]}"}; do
        if [[ -d $dir ]] && grep -qs '"VK_LAYER_KHRONOS_validation"' "$dir"/*.json; then
            return 0
        fi
    done
    # All of its output first: grep -q would stop reading, and pipefail see vulkaninfo's SIGPIPE.
    local layers=""
    if command -v vulkaninfo >/dev/null 2>&1; then
        layers=$(vulkaninfo 2>/dev/null || true)
    fi
    [[ $layers == *VK_LAYER_KHRONOS_validation* ]]
}

# ctest -V's log as the summary reads a test run (tools/device-bundle/summary.sh): tests.tsv,
# "NAME<tab>all<tab>RESULT<tab>SECONDS" per test ("all": every device in one run), and each
# test's output in test-all-NAME.log. ctest -V puts "N: " before each line of test N's output
# and ends the test with "  3/40 Test  #3: test_rope ....   Passed    1.20 sec" (or "***Failed",
# "***Skipped", "***Timeout", "***Exception: SegFault", "Not Run").
split_ctest_log() {
    local dir=$1
    rm -f "$dir"/tests.tsv "$dir"/test-all-*.log
    [[ -f $dir/ctest.log ]] || return 0
    awk -v dir="$dir" '
        /^[0-9]+: / {
            n = $0; sub(/:.*/, "", n)
            line = $0; sub(/^[0-9]+: /, "", line)
            output[n] = output[n] line "\n"
            next
        }
        /^ *[0-9]+\/[0-9]+ Test +#[0-9]+: / {
            n = $0; sub(/^ *[0-9]+\/[0-9]+ Test +#/, "", n); sub(/:.*/, "", n)
            rest = $0; sub(/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: /, "", rest)
            name = rest; sub(/ .*/, "", name)
            outcome = rest; sub(/^[^ ]+ [ .]*/, "", outcome)
            seconds = outcome; sub(/ sec$/, "", seconds); sub(/.* /, "", seconds)
            sub(/ +[0-9.]+ sec$/, "", outcome); sub(/^\*+/, "", outcome)
            if (outcome ~ /^Passed/) result = "passed"
            else if (outcome ~ /Skipped|Not Run/) result = "skipped"
            else result = "FAILED (" outcome ")"
            printf "%s\tall\t%s\t%s\n", name, result, seconds >> (dir "/tests.tsv")
            printf "%s", output[n] > (dir "/test-all-" name ".log")
            close(dir "/test-all-" name ".log")
        }' "$dir/ctest.log"
}

# Why the build left a backend out, from its cache: meta.txt's hint_vulkan and hint_opencl, for
# the summary to say beside "not compiled in".
cache_value() {
    sed -n "s/^$1:[A-Z]*=//p" "$build_dir/CMakeCache.txt" 2>/dev/null | head -n 1
}
not_found() { [[ -z $1 || $1 == *NOTFOUND ]]; }
write_build_hints() {
    local hint_vulkan="" hint_opencl=""
    if [[ -f $build_dir/CMakeCache.txt ]]; then
        if not_found "$(cache_value POSENC_GLSLC_EXECUTABLE)" &&
            not_found "$(cache_value POSENC_GLSLANG_EXECUTABLE)"; then
            hint_vulkan="no glslc or glslangValidator to compile the shaders, in Debian/Ubuntu's"
            hint_vulkan+=" glslc or glslang-tools"
        elif not_found "$(cache_value POSENC_VULKAN_INCLUDE_DIR)"; then
            hint_vulkan="vulkan/vulkan.h not found, in Debian/Ubuntu's libvulkan-dev"
        fi
        if not_found "$(cache_value POSENC_OPENCL_INCLUDE_DIR)"; then
            hint_opencl="CL/cl.h not found, in Debian/Ubuntu's opencl-headers"
        fi
    fi
    grep -v '^hint_' "$log_dir/meta.txt" >"$log_dir/meta.txt.tmp" || true
    printf 'hint_vulkan=%s\nhint_opencl=%s\n' "$hint_vulkan" "$hint_opencl" >>"$log_dir/meta.txt.tmp"
    mv "$log_dir/meta.txt.tmp" "$log_dir/meta.txt"
}

summarize() {
    split_ctest_log "$log_dir"
    write_build_hints
    local status=0
    bash "$summary_script" "$log_dir" "$check_dir" || status=$?
    ((status <= 1)) || die "the summary failed"
    echo
    cat "$check_dir/summary.txt"
    echo "summary: $check_dir/summary.json; logs: $log_dir/"
    return "$status"
}

if ((summary_only)); then
    if ((dry_run)); then
        echo "+ bash $summary_script $log_dir $check_dir"
        exit 0
    fi
    [[ -f $log_dir/meta.txt ]] || die "$log_dir: no logs of an earlier run"
    summarize
    exit
fi

start_seconds=$SECONDS
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)

# ---- 0. build tools, when asked -----------------------------------------------------------------
if ((install_deps)); then
    command -v apt-get >/dev/null 2>&1 ||
        die "--install-deps needs apt-get; install the tools listed in --help by hand"
    sudo=()
    if [[ $(id -u) != 0 ]]; then
        command -v sudo >/dev/null 2>&1 || die "--install-deps: not root, and no sudo"
        sudo=(sudo)
    fi
    # The validation layer for the tests; ocl-icd-opencl-dev and libvulkan-dev also hold the
    # libraries the OpenCL and Vulkan examples and engine tests link, as engines do.
    packages=(cmake gcc libc6-dev ninja-build glslang-tools libvulkan-dev vulkan-validationlayers
        opencl-headers ocl-icd-opencl-dev clang)
    # glslc (shaderc) is packaged from Debian 12 and Ubuntu 22.04; glslangValidator suffices.
    if apt-cache show glslc >/dev/null 2>&1; then
        packages+=(glslc)
    fi
    run ${sudo[@]+"${sudo[@]}"} apt-get update
    run ${sudo[@]+"${sudo[@]}"} apt-get install -y "${packages[@]}"
fi

# ---- 1. build -----------------------------------------------------------------------------------
configure=(cmake -S "$source_dir" -B "$build_dir")
if [[ ! -f $build_dir/CMakeCache.txt ]] && command -v ninja >/dev/null 2>&1; then
    configure+=(-G Ninja)
fi
# Warnings stay warnings: a newer compiler's new warning must not stop a check of the devices.
configure+=(-DCMAKE_BUILD_TYPE=Release -DPOSENC_WERROR=OFF -DPOSENC_BUILD_TESTS=ON
    -DPOSENC_BUILD_EXAMPLES=ON -DPOSENC_BUILD_PYTHON=OFF -DPOSENC_BUILD_FUZZERS=OFF
    -DPOSENC_VULKAN=AUTO -DPOSENC_OPENCL=AUTO ${cmake_args[@]+"${cmake_args[@]}"})

if ((dry_run)); then
    echo "device-check: dry run, build directory $build_dir, $jobs jobs"
else
    mkdir -p "$log_dir"
    # Logs of an earlier run must not pass for this one's.
    rm -rf "$log_dir" "$check_dir/summary.json" "$check_dir/summary.txt"
    mkdir -p "$log_dir"
fi

# Steps and their seconds, for the summary.
step_names=()
step_seconds=()
step_start=$SECONDS
step() {
    if ((${#step_names[@]})); then
        step_seconds+=($((SECONDS - step_start)))
    fi
    step_start=$SECONDS
    step_names+=("${*#[0-9]. }")
    echo
    echo "== $*"
}

step "1. build ($build_dir)"
if ((dry_run)); then
    run "${configure[@]}"
    run cmake --build "$build_dir" -j "$jobs"
else
    if ! run_logged "$log_dir/configure.log" "${configure[@]}"; then
        tail -n 30 "$log_dir/configure.log" >&2
        die "configure failed (log: $log_dir/configure.log)"
    fi
    # posenc's own lines, and each warning (a backend left out, and why) with its message.
    awk '/^-- posenc:/ { print; next } /^CMake Warning/ { w = 1 } w && /^$/ { w = 0 } w' \
        "$log_dir/configure.log"
    if ! run_logged "$log_dir/build.log" cmake --build "$build_dir" -j "$jobs"; then
        tail -n 30 "$log_dir/build.log" >&2
        die "build failed (log: $log_dir/build.log)"
    fi
    echo "built in $((SECONDS - start_seconds)) s"
fi

# The user's device choice would steer the automatic choice of the tests' helpers.
unset POSENC_DEVICE

# ---- 2. devices ---------------------------------------------------------------------------------
step "2. devices"
run "$posenc" devices || die "posenc devices failed"
if ((dry_run)); then
    run "$posenc" devices --json
else
    "$posenc" devices --json >"$log_dir/devices.json" || die "posenc devices --json failed"
fi

# The devices to check, and which of them are software, from the first line of each device
# object ({"index": 0, "selector": "vulkan:0", ..., "type": "integrated GPU", ...}); the summary
# reads the same file with a JSON parser.
selectors=()
software=()
if ((!dry_run)); then
    device_line='"selector": "((vulkan|opencl):[0-9]+)".*"type": "([^"]*)"'
    while IFS= read -r line; do
        [[ $line =~ $device_line ]] || continue
        selector=${BASH_REMATCH[1]}
        case ${BASH_REMATCH[3]} in
            *GPU) selectors+=("$selector") software+=(0) ;;
            *)
                if ((allow_software)); then
                    selectors+=("$selector") software+=(1)
                fi
                ;;
        esac
    done <"$log_dir/devices.json"
fi

# ---- 3. tests -----------------------------------------------------------------------------------
validation=off
if ((validation_wanted)); then
    if validation_layer_installed; then
        validation=on
    else
        validation="absent (not installed)"
    fi
fi
step "3. device tests (Vulkan validation: $validation)"
# Backends with a device here must not skip: a test that finds none fails instead.
required=""
if ((!dry_run)); then
    for backend in vulkan opencl; do
        if grep -q "\"selector\": \"$backend:" "$log_dir/devices.json"; then
            required+="${required:+;}$backend"
        fi
    done
    cmake -S "$source_dir" -B "$build_dir" "-DPOSENC_TEST_REQUIRE_DEVICES=$required" \
        >>"$log_dir/configure.log" 2>&1 ||
        die "reconfigure failed (log: $log_dir/configure.log)"
else
    echo "+ cmake -S $source_dir -B $build_dir" \
        "-DPOSENC_TEST_REQUIRE_DEVICES=<backends with a device>"
fi
# Every library test and example, which run on each device present, but not those of the CPU
# path alone (its kernel variants, thread pool, private kernels) or of the platform layer.
include='^(test_|example_)'
exclude='^test_(cpu|cpu_threads|platform|kernels)$|_(portable|avx2|avx512|avx512bf16|neon)$'
test_env=()
if [[ $validation == on ]]; then
    test_env=(VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation)
fi
# ctest -V puts "N: " before each output line of test N only when it runs tests in parallel: the
# summary needs it to tell the tests' lines apart, so two jobs at least.
ctest=(ctest --test-dir "$build_dir" -R "$include" -E "$exclude" -j "$((jobs > 1 ? jobs : 2))" -V)
if ((dry_run)); then
    run env ${test_env[@]+"${test_env[@]}"} "${ctest[@]}"
else
    if run_logged "$log_dir/ctest.log" env ${test_env[@]+"${test_env[@]}"} "${ctest[@]}"; then
        echo "tests passed"
    else
        echo "tests FAILED: see $log_dir/ctest.log"
    fi
    grep -E '^ *[0-9]+/[0-9]+ Test +#' "$log_dir/ctest.log" | grep -v ' Passed ' || true
fi

# ---- 4. accuracy and bench on each device -------------------------------------------------------
step "4. accuracy and bench per device"
if ((dry_run)); then
    echo "for each GPU device SEL (and software device with --allow-software):"
    run "$posenc" demo --device SEL --runs 3
    echo "+ $posenc bench --device SEL --json [--quick]"
fi
bench_mode="full on GPUs, --quick on software devices"
if ((quick)); then
    bench_mode="--quick"
fi
for i in "${!selectors[@]}"; do
    selector=${selectors[i]}
    file_id=${selector/:/-}
    bench=("$posenc" bench --device "$selector" --json)
    if ((quick || software[i])); then
        bench+=(--quick)
    fi
    rc=0
    run_logged "$log_dir/demo-$file_id.log" "$posenc" demo --device "$selector" --runs 3 || rc=$?
    echo "$rc" >"$log_dir/demo-$file_id.rc"
    tail -n 1 "$log_dir/demo-$file_id.log"
    # The JSON alone on stdout; stderr (a runtime's own messages) beside it.
    echo "+ $(shell_words "${bench[@]}") > $log_dir/bench-$file_id.json"
    rc=0
    "${bench[@]}" >"$log_dir/bench-$file_id.json" 2>"$log_dir/bench-$file_id.err" || rc=$?
    echo "$rc" >"$log_dir/bench-$file_id.rc"
    if ((rc)); then
        echo "bench failed (exit code $rc):"
        tail -n 5 "$log_dir/bench-$file_id.err"
    fi
done

# ---- 5. summary ---------------------------------------------------------------------------------
step "5. summary"
if ((dry_run)); then
    echo "+ bash $summary_script $log_dir $check_dir"
    exit 0
fi
step_seconds+=(0)
{
    echo "tool=tools/device-check.sh"
    echo "posenc=$("$posenc" --version 2>/dev/null | head -n 1)"
    echo "host=$(uname -srm)"
    echo "started=$started"
    echo "seconds=$((SECONDS - start_seconds))"
    echo "allow_software=$allow_software"
    echo "validation=$validation"
    echo "bench_mode=$bench_mode"
    for i in "${!step_names[@]}"; do
        printf 'step=%s\t%s\n' "${step_names[$i]}" "${step_seconds[$i]}"
    done
} >"$log_dir/meta.txt"
# The build's own lines on its backends, once each (a reconfigure prints them again).
awk '/^-- posenc:/ && !seen[$0]++ { sub(/^-- /, ""); print }' "$log_dir/configure.log" \
    >"$log_dir/runtimes.txt" 2>/dev/null || true
summarize
