#!/usr/bin/env python3
"""Fails when a reference doc carries a date or an account of how the work went.

docs/*.md and README.md are reference: what each part guarantees, how to use it, and the
current figures with their commands and limits. Dates, superseded runs and how a result was
reached belong in docs/history/ (or in git), which this check leaves alone. Prints
FILE:LINE: the rule and the line for each offending line, then a verdict; exit status 1
when anything was found.

  tests/docs/check_reference.py [ROOT]      # the tree (default: this checkout)
  tests/docs/check_reference.py --self-test # the rules catch planted lines, and pass clean ones
"""
import glob
import os
import re
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

MONTH = (r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
         r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)")
# (name, pattern): each is matched against one line of a reference doc.
RULES = [
    # 2026-11-27, 2026/11/27 (a version such as 2.28.9 or a size is not a date)
    ("date", re.compile(r"\b(?:19|20)\d\d[-/](?:0[1-9]|1[0-2])[-/](?:0[1-9]|[12]\d|3[01])\b")),
    # "Nov 28", "November 28th", "March 2026", "28 November 2026" (months spelt as in English)
    ("date", re.compile(r"\b" + MONTH + r"\.? (?:\d{1,2}(?:st|nd|rd|th)?|(?:19|20)\d\d)\b")),
    ("date", re.compile(r"\b\d{1,2} " + MONTH + r" (?:19|20)\d\d\b")),
    # the order of the work: sessions, issue numbers, the branch a run was made on
    ("session", re.compile(r"\b(?:this|last|previous|earlier|later|next|that|other|our|"
                           r"the (?:first|second|third|fourth|same)) sessions?\b", re.I)),
    ("session", re.compile(r"\bsessions? \d+\b", re.I)),
    ("session", re.compile(r"\b(?:session by session|all session|sessions? ago)\b", re.I)),
    ("issue number", re.compile(r"\bissue #?\d+\b", re.I)),
    ("commit of main", re.compile(r"\b(?:main|master) (?:at|was at|is at) [0-9a-f]{7,40}\b")),
    ("commit of main", re.compile(r"\bmerged? (?:with|into) main\b", re.I)),
    ("relative day", re.compile(r"\b(?:today|yesterday|tomorrow|this (?:morning|afternoon|evening|week)|"
                                r"last (?:night|week)|later the same day|the same day)\b", re.I)),
    # a heading that numbers the work: "## Stage 3", "### Session 5: ..."
    ("numbered heading", re.compile(r"^#+ .*\b(?:[Ss]tage|[Ss]ession|[Pp]hase|[Ss]print) \d+\b")),
]


def reference_docs(root):
    """README.md and docs/*.md: not docs/history/, not the generated tables in docs/benchmarks/."""
    files = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    return [f for f in files if os.path.isfile(f)]


def findings(root):
    out = []
    for path in reference_docs(root):
        in_code = False
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if line.lstrip().startswith("```"):
                    in_code = not in_code
                for name, rule in RULES:
                    if name == "numbered heading" and in_code:
                        continue  # a shell comment in a code block is not a heading
                    if rule.search(line):
                        out.append(f"{os.path.relpath(path, root)}:{number}: {name}: {line.strip()}")
                        break
    return out


def self_test():
    bad = ["Measured on 2026-11-27 at load 3.", "The run of Nov 28 gave 3x.", "As of March 2026 it holds.",
           "This session measured 1.2x.", "It grew session by session.", "Two regimes showed up all session.", "Before session 5 it was slower.", "The scan (issue 29) found it.",
           "on main at 20b1194, load 0.1", "Merged with main before the run.", "Today the default is 4 MiB.",
           "## Stage 3: the reshape", "### Session 6: before against after"]
    good = ["NCCL 2.28.9's ABI, ncclGetVersion 22809.", "A 16 MiB all_reduce at 1.5x, 2048 B, 0x10001.",
            "May be called from any thread.", "stage 0: embedding, layers 0; stage 1: the head",
            "in a session of its own (setsid)", "the commit of the bundle (9eeb02d)", "sizes 2000-2048 B",
            "```sh\n# stage 2 of the pipeline\n```"]
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "docs", "history"))
        with open(os.path.join(d, "docs", "bad.md"), "w") as f:
            f.write("\n".join(bad) + "\n")
        with open(os.path.join(d, "docs", "good.md"), "w") as f:
            f.write("\n".join(good) + "\n")
        with open(os.path.join(d, "docs", "history", "journal.md"), "w") as f:
            f.write("\n".join(bad) + "\n")  # history may say all of that
        found = findings(d)
    caught = [line for line in found if line.startswith("docs/bad.md:")]
    wrong = [line for line in found if not line.startswith("docs/bad.md:")]
    for line in found:
        print(line)
    ok = len(caught) == len(bad) and not wrong
    print(f"planted lines caught: {len(caught)} of {len(bad)}; clean lines flagged: {len(wrong)}:",
          "OK" if ok else "FAILED")
    return 0 if ok else 1


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else ROOT
    found = findings(root)
    for line in found:
        print(line)
    docs = len(reference_docs(root))
    if found:
        print(f"{len(found)} line(s) in {docs} reference docs carry a date or the work's history: "
              "move them to docs/history/ (or keep them in git)")
        return 1
    print(f"{docs} reference docs: no dates, no account of how the work went")
    return 0


if __name__ == "__main__":
    sys.exit(main())
