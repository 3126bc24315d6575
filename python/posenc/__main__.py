# SPDX-License-Identifier: MIT
# `python -m posenc COMMAND`: the package's command line (bench: timings beside C and numpy;
# plots: the pictures of docs/pictures.md).
import sys

COMMANDS = {
    "bench": ("posenc.bench", "posenc from Python beside the same call in C, numpy, ONNX Runtime"
                              " and torch"),
    "plots": ("posenc.plots", "writes the pictures of docs/pictures.md into a folder"),
}


def usage() -> str:
    lines = ["usage: python -m posenc {" + ",".join(COMMANDS) + "} [options]", "", "commands:"]
    lines += [f"  {name:<7}{text}" for name, (_, text) in COMMANDS.items()]
    lines.append("\n`python -m posenc COMMAND --help` for a command's options.")
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    if not argv or argv[0] not in COMMANDS:
        print(usage(), file=sys.stderr)
        return 2
    import importlib
    return importlib.import_module(COMMANDS[argv[0]][0]).main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
