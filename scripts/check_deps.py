#!/usr/bin/env python3
"""The dependency rules of the source tree, read from the object files' symbols (nm).

A file uses another when its object file has an undefined symbol the other's defines. Fails
(exit 1, one line per finding) on:
  - a cycle between files (any length), anywhere;
  - an arrow against the folder direction: cli -> sim, real -> model; never the reverse, never
    sim <-> real;
  - an arrow against the room order inside a folder that has rooms (model/: base <- zoo <-
    problem <- plan), and a file of such a folder outside its rooms.
Usage: check_deps.py BUILD_DIR   (after a build: it reads BUILD_DIR/{model,sim,real,cli}/**/*.o)
"""
import os
import subprocess
import sys
from collections import defaultdict

FOLDERS = ("model", "sim", "real", "cli")
# folder -> the folders it may use
ALLOWED = {"cli": {"sim", "real", "model"}, "sim": {"model"}, "real": {"model"}, "model": set()}
# folder -> its rooms, lowest first: a room may use itself and the rooms before it
ROOMS = {"model": ("base", "zoo", "problem", "plan")}
DEFINED = set("TDBRG")  # global text, data, bss, read-only, small data; weak (W, V) skipped


def source_of(build, obj):
    """model/CMakeFiles/refit_model.dir/base/zoo.c.o -> model/base/zoo.c"""
    rel = os.path.relpath(obj, build).split(os.sep)
    inner = rel[rel.index("CMakeFiles") + 2:]
    return "/".join([rel[0]] + inner)[: -len(".o")]


def objects(build):
    for folder in FOLDERS:
        for root, _, files in os.walk(os.path.join(build, folder)):
            for f in files:
                if f.endswith(".o") and "CMakeFiles" in root and "CompilerId" not in root:
                    yield os.path.join(root, f)


def symbols(objs):
    """obj -> (defined, undefined) symbol sets, from one nm run over every object."""
    out = subprocess.run(["nm", "-A"] + objs, capture_output=True, text=True, check=True).stdout
    table = {o: (set(), set()) for o in objs}
    for line in out.splitlines():
        obj, _, rest = line.partition(":")
        parts = rest.split()
        if obj not in table:
            continue
        if len(parts) == 3 and parts[1] in DEFINED:
            table[obj][0].add(parts[2])
        elif len(parts) == 2 and parts[0] == "U":
            table[obj][1].add(parts[1])
    return table


def graph(build):
    owner, uses = {}, {}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # objects left in the build tree by a file since moved or deleted are not the program
    objs = [o for o in objects(build) if os.path.exists(os.path.join(root, source_of(build, o)))]
    for obj, (d, u) in symbols(objs).items():
        src = source_of(build, obj)
        uses[src] = u
        for s in d:
            owner[s] = src
    edges = defaultdict(dict)  # a -> b -> one symbol that makes the arrow
    for a, us in uses.items():
        for s in sorted(us):
            b = owner.get(s)
            if b and b != a:
                edges[a].setdefault(b, s)
    return sorted(uses), edges


def cycles(nodes, edges):
    """Strongly connected components of more than one file (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, {}))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        x = stack.pop()
                        on.discard(x)
                        comp.append(x)
                        if x == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
            elif w not in index:
                index[w] = low[w] = counter[0]
                counter[0] += 1
                stack.append(w)
                on.add(w)
                work.append((w, iter(sorted(edges.get(w, {})))))
            elif w in on:
                low[v] = min(low[v], index[w])
    return out


def room(path):
    parts = path.split("/")
    rooms = ROOMS.get(parts[0])
    if rooms is None:
        return None
    return rooms.index(parts[1]) if len(parts) > 2 and parts[1] in rooms else -1


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        sys.exit("usage: check_deps.py BUILD_DIR (a built tree)")
    nodes, edges = graph(sys.argv[1])
    if not nodes:
        sys.exit("check_deps: no object files under %s: build first" % sys.argv[1])
    bad = []
    for comp in cycles(nodes, edges):
        arrows = ["%s -> %s (%s)" % (a, b, s) for a in comp for b, s in edges[a].items() if b in comp]
        bad.append("cycle between %s: %s" % (", ".join(comp), "; ".join(arrows)))
    for a in nodes:
        if room(a) == -1:
            bad.append("%s is outside the rooms of %s/ (%s)" % (a, a.split("/")[0], ", ".join(ROOMS[a.split("/")[0]])))
        for b, s in sorted(edges[a].items()):
            fa, fb = a.split("/")[0], b.split("/")[0]
            if fa != fb and fb not in ALLOWED[fa]:
                bad.append("%s -> %s (%s): %s/ must not use %s/" % (a, b, s, fa, fb))
            elif fa == fb and room(a) is not None and room(a) >= 0 and room(b) is not None and room(b) > room(a):
                bad.append("%s -> %s (%s): a lower room uses a higher one" % (a, b, s))
    for line in bad:
        print("check_deps: " + line)
    narrows = sum(len(v) for v in edges.values())
    print("check_deps: %d files, %d arrows: %s" % (len(nodes), narrows, "FAILED" if bad else "no cycle, no arrow against the direction"))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
