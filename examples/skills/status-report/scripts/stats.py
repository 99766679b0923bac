#!/usr/bin/env python3
"""Count work items by state.

Usage: stats.py name=state [name=state ...]
States: done, doing, todo. Prints JSON {"total", "by_state", "done_ratio"}.
"""
import json
import sys

STATES = ("done", "doing", "todo")


def main(argv):
    counts = {s: 0 for s in STATES}
    for arg in argv:
        name, sep, state = arg.partition("=")
        if not sep or state not in STATES:
            print(f"bad item {arg!r}: want name=state with state in {STATES}", file=sys.stderr)
            return 2
        counts[state] += 1
    total = sum(counts.values())
    ratio = round(counts["done"] / total, 2) if total else 0.0
    print(json.dumps({"total": total, "by_state": counts, "done_ratio": ratio}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
