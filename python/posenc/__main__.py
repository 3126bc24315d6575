# SPDX-License-Identifier: MIT
# `python -m posenc COMMAND`: the package's command line (bench: timings beside C and numpy).
import sys


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    commands = {"bench": "posenc.bench"}
    if not argv or argv[0] not in commands:
        print("usage: python -m posenc {" + ",".join(commands) + "} [options]", file=sys.stderr)
        return 2
    import importlib
    return importlib.import_module(commands[argv[0]]).main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
