#!/bin/sh
# SPDX-License-Identifier: MIT
# file_size_limit.sh BLOCKS COMMAND ARGS...: runs COMMAND with files limited to BLOCKS blocks
# (ulimit -f; RLIMIT_FSIZE) and SIGXFSZ at its default action, which kills a process that
# writes past the limit: posenc ignores the signal itself, so that the write fails with EFBIG,
# as a write to a full disk fails, and its temporary file is removed.
trap - XFSZ
ulimit -f "$1" || exit 125
shift
exec "$@"
