#!/usr/bin/env python3
"""docs/where.md against the tree: every source, script, test and doc file that git tracks is
named there by its path, every path it names exists, and every command of `refit` (cli/refit.c's
table) is named as `refit NAME`. Data folders (configs, calibration files, topologies, test
data, experiment inputs and results) are named as folders, not file by file.
Exit 1 with one line per finding. Usage: check_where.py (from anywhere in the repository)
"""
import os
import re
import subprocess
import sys

CODE = (".c", ".h", ".cu", ".cpp", ".py", ".sh", ".cmake", ".md")
FOLDERS = ("model/", "sim/", "real/", "cli/", "scripts/", "tests/", ".ci/", "docs/")
DATA = ("model/configs/", "sim/calibration/", "tests/data/", "tests/fuzz/seeds/")


def tracked(root):
    out = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def wanted(path):
    if not path.startswith(FOLDERS) or path.startswith(DATA) or path == "docs/where.md":
        return False
    return path.endswith(CODE) or path.startswith((".ci/", "scripts/")) and "." not in os.path.basename(path)


def main():
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                          check=True).stdout.strip()
    files = tracked(root)
    with open(os.path.join(root, "docs/where.md"), encoding="utf-8") as f:
        text = f.read()
    named = set(re.findall(r"`([A-Za-z0-9_.][A-Za-z0-9_./-]*)`", text))
    bad = ["%s is not named in docs/where.md" % p for p in sorted(files) if wanted(p) and p not in named]
    for p in sorted(named):
        if p.startswith(FOLDERS) and not p.endswith("/") and "." in os.path.basename(p) and p not in files:
            bad.append("docs/where.md names %s, which git does not track" % p)
    with open(os.path.join(root, "cli/refit.c"), encoding="utf-8") as f:
        commands = re.findall(r'\{"([a-z]+)", rf_cmd_', f.read())
    for c in commands:
        if "`refit %s" % c not in text:
            bad.append("docs/where.md does not name the command `refit %s`" % c)
    for line in bad:
        print("check_where: " + line)
    print("check_where: %d files, %d commands: %s" % (sum(map(wanted, files)), len(commands),
                                                    "FAILED" if bad else "every one named"))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
