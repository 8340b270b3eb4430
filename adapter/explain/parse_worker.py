"""The child process that parses one ``/explain`` manifest (see ``manifest.py``); run as a script, alone.

Reads a YAML or JSON document on stdin and writes it to stdout as compact JSON, or exits non-zero with one
line on stderr saying why. It imports nothing of the adapter (it runs with ``python -I``) and bounds itself:
a lower CPU priority (the adapter's event loop comes first), an address-space limit (an alias bomb expands
into a MemoryError here, never in the adapter) and a bound on its output (a parsed document whose JSON is
larger than any HPA manifest is refused, so the adapter's own work on the answer stays small).
"""

from __future__ import annotations

import json
import os
import resource
import sys

import yaml

# Exit codes the parent maps to its answers.
EXIT_SYNTAX = 3
EXIT_TOO_BIG = 4
EXIT_MEMORY = 5


def main() -> int:
    max_output, max_memory = int(sys.argv[1]), int(sys.argv[2])
    os.nice(10)
    resource.setrlimit(resource.RLIMIT_AS, (max_memory, max_memory))
    data = sys.stdin.buffer.read()
    try:
        if data.lstrip()[:1] in (b"{", b"["):
            doc = json.loads(data)  # JSON (what kubectl -o json writes): the C parser, linear in the input
        else:
            loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when built with it
            doc = yaml.load(data, Loader=loader)  # noqa: S506 - a safe loader, C or Python
        out = json.dumps(doc, separators=(",", ":"), default=str)
    except MemoryError:
        print("the manifest needs too much memory to parse", file=sys.stderr)
        return EXIT_MEMORY
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        print(" ".join(str(exc).split())[:500], file=sys.stderr)
        return EXIT_SYNTAX
    if len(out) > max_output:
        print(f"the parsed manifest is over {max_output} bytes of JSON", file=sys.stderr)
        return EXIT_TOO_BIG
    sys.stdout.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
