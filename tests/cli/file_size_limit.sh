#!/bin/sh
# SPDX-License-Identifier: MIT
# file_size_limit.sh BLOCKS COMMAND ARGS...: runs COMMAND with files limited to BLOCKS blocks
# (ulimit -f; RLIMIT_FSIZE) and SIGXFSZ ignored, so that a write past the limit fails with
# EFBIG, as a write to a full disk fails, instead of killing the process.
trap '' XFSZ
ulimit -f "$1" || exit 125
shift
exec "$@"
