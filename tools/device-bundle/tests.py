#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# The device bundle's test list (tools/device-bundle.sh, at bundle-build time only): reads
# `ctest --show-only=json-v1`, keeps the device tests, rewrites build-tree paths as {bundle}/...
# and writes tests.tsv, the build files the kept tests need, and the tests left out with why.
"""usage: tests.py CTEST_JSON BUILD_DIR OUT_TSV OUT_FILES OUT_LEFT_OUT [SOURCE_DIR...]"""

import json
import math
import os
import re
import sys

# The tests tools/device-check.sh runs: keep the two in step.
INCLUDE = re.compile(r"^(test_|example_)")
EXCLUDE = re.compile(
    r"^test_(cpu|cpu_threads|platform|kernels)$|_(portable|avx2|avx512|avx512bf16|neon)$"
)
# Set by the bundle's `run` for each machine, or meaningful only in the build tree.
DROPPED_ENV = ("POSENC_DEVICE=", "XDG_CACHE_HOME=", "POSENC_TEST_REQUIRE_DEVICES=", "ASAN_OPTIONS=")
DEFAULT_TIMEOUT = 600

# Where the build tree's files go in the bundle: (build-relative path, bundle-relative path).
LAYOUT = (("posenc", "bin/posenc"), ("tests", "tests"), ("examples", "examples"))
# A folder a test names (a layer manifest folder, an OpenCL vendors folder) goes along whole
# when it holds files alone, this few and this small.
FOLDER_FILES, FOLDER_BYTES = 16, 1 << 20


class LeftOut(Exception):
    """A test the bundle cannot run; the message says why."""


def properties(test):
    return {p["name"]: p["value"] for p in test.get("properties", [])}


class Rewriter:
    def __init__(self, build_roots, source_dirs):
        self.build_roots = build_roots  # the build folder as ctest names it, and its real path
        self.source_dirs = source_dirs
        self.files = set()  # build-relative paths of files the kept tests name
        self.folder = False  # the word being mapped is a working folder

    def path_word(self, word, folder=False):
        """One word (an argument, an environment value): build paths mapped into the bundle.
        With `folder`, the word is a working folder: mapped, its files not carried."""
        self.folder = folder
        for root in self.build_roots:
            # a path runs to the end of the word, or to a list separator
            word = re.sub(re.escape(root) + r"(?=/|$|[:;,])[^:;,]*", self._bundle_path, word)
        for root in self.source_dirs:
            if root in word:
                raise LeftOut(f"needs the source tree ({word})")
        return word

    @staticmethod
    def _small_folder(path, rel):
        """The build-relative paths of a small folder's files; LeftOut when it is not small."""
        entries = sorted(os.listdir(path))
        files = [os.path.join(path, e) for e in entries]
        if (len(entries) > FOLDER_FILES or not all(os.path.isfile(f) for f in files)
                or sum(os.path.getsize(f) for f in files) > FOLDER_BYTES):
            raise LeftOut(f"needs the build's folder {rel}")
        return {rel + "/" + e for e in entries}

    def _bundle_path(self, match):
        path = match.group(0)
        rel = os.path.relpath(path, next(r for r in self.build_roots if path.startswith(r)))
        for build_rel, bundle_rel in LAYOUT:
            if rel != build_rel and not rel.startswith(build_rel + "/"):
                continue
            if os.path.isfile(path):
                self.files.add(rel)
            elif os.path.isdir(path) and rel != build_rel and not self.folder:
                self.files.update(self._small_folder(path, rel))
            # A path that does not exist (a test's "no such file") stays one in the bundle.
            return "{bundle}/" + bundle_rel + rel[len(build_rel):]
        raise LeftOut(f"needs {rel} of the build tree")


def convert(test, rewriter):
    argv = test.get("command") or []
    if not argv:
        raise LeftOut("has no command")
    props = properties(test)
    exe = os.path.basename(argv[0])
    if not any(argv[0].startswith(root + "/") for root in rewriter.build_roots):
        if exe in ("cmake", "ctest"):
            raise LeftOut(f"needs {exe}")
        raise LeftOut(f"needs {argv[0]}, outside the bundle")
    for word in argv:
        if word == "" or re.search(r"[\t\n\r]", word):
            raise LeftOut("has an argument tests.tsv cannot hold (empty, or a tab or newline)")
    if not os.path.isfile(argv[0]):
        raise LeftOut(f"its program {argv[0]} was not built")
    words = [rewriter.path_word(word) for word in argv]

    workdir = props.get("WORKING_DIRECTORY") or os.path.dirname(argv[0])
    workdir = rewriter.path_word(workdir, folder=True)
    timeout = props.get("TIMEOUT")
    timeout = int(math.ceil(float(timeout))) if timeout else DEFAULT_TIMEOUT
    skip_rc = int(props.get("SKIP_RETURN_CODE", 0))

    env = []
    for entry in props.get("ENVIRONMENT", []):
        if entry.startswith(DROPPED_ENV):
            continue
        if re.search(r"\s", entry):
            raise LeftOut(f"has an environment entry with a space ({entry})")
        env.append(rewriter.path_word(entry))
    for name in ("FIXTURES_REQUIRED", "REQUIRED_FILES"):
        if props.get(name):
            raise LeftOut(f"uses ctest's {name}, which the bundle's run does not")
    return [test["name"], workdir, str(timeout), str(skip_rc), " ".join(env) or "-"] + words


def main(argv):
    if len(argv) < 6:
        sys.exit(__doc__)
    json_path, build_dir, out_tsv, out_files, out_left = argv[1:6]
    build_roots = sorted({os.path.abspath(build_dir), os.path.realpath(build_dir)}, key=len,
                         reverse=True)
    source_dirs = sorted({os.path.realpath(d) for d in argv[6:]} | {os.path.abspath(d) for d in
                         argv[6:]}, key=len, reverse=True)
    with open(json_path, encoding="utf-8") as f:
        tests = json.load(f)["tests"]

    rewriter = Rewriter(build_roots, source_dirs)
    rows, left_out = [], []
    for test in tests:
        name = test["name"]
        if not INCLUDE.search(name) or EXCLUDE.search(name):
            continue
        if properties(test).get("DISABLED"):
            left_out.append((name, "disabled in ctest"))
            continue
        files_before = set(rewriter.files)
        try:
            rows.append(convert(test, rewriter))
        except LeftOut as why:
            rewriter.files = files_before
            left_out.append((name, str(why)))

    forbidden = build_roots + source_dirs
    for row in rows:
        line = "\t".join(row)
        for root in forbidden:
            if root in line:
                sys.exit(f"tests.py: {row[0]}: still names {root} after rewriting: {line}")

    with open(out_tsv, "w", encoding="utf-8") as f:
        f.write("# name\tworkdir\ttimeout_s\tskip_rc\tenv\targv...\n")
        for row in rows:
            f.write("\t".join(row) + "\n")
    with open(out_files, "w", encoding="utf-8") as f:
        for rel in sorted(rewriter.files):
            f.write(rel + "\n")
    with open(out_left, "w", encoding="utf-8") as f:
        for name, why in left_out:
            f.write(f"{name}\t{why}\n")


if __name__ == "__main__":
    main(sys.argv)
