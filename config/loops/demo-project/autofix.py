"""A stand-in fixer for the starter loop: it knows one bug and repairs it.

A real loop's `fix` is another coding agent's command line, or an OpenLoop agent with coding
tools. This one reads the failing test from its first argument (the loop's `{last_error}`)
and only acts when `test_mean` is named, so the loop's rounds are easy to follow.
"""

import sys
from pathlib import Path

last_error = sys.argv[1] if len(sys.argv) > 1 else ""
if "test_mean" not in last_error:
    print("autofix: no failure I know how to fix")
    sys.exit(1)
source = Path("calc.py")
text = source.read_text()
fixed = text.replace("/ (len(values) + 1)", "/ len(values)")
if fixed == text:
    print("autofix: calc.mean already divides by len(values)")
    sys.exit(1)
source.write_text(fixed)
print("autofix: calc.mean now divides by len(values)")
