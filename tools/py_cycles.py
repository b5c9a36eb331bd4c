#!/usr/bin/env python3
"""Prints the import circles between the modules of one Python package (issue 30, 4).

Reads every module of the package with ast (nothing is imported or run) and draws an edge
A -> B when module A imports module B of the same package, by any spelling: "import
pkg.b", "from pkg import b", "from . import b", "from .b import name", "from pkg.b import
name". An import of a name from the package itself ("from . import name" where name is not
a module) is an edge to __init__. Two graphs are reported:

  module level   imports executed when the module is loaded (also inside if/try blocks at
                 the top level, not inside a def or a class body's def);
  all            those plus the imports inside functions (deferred until a call).

A circle is a set of two or more modules each of which reaches every other one (a strongly
connected component). For each graph the circles are printed with the edges inside them and
the line of one import that makes each edge; then a count line:

  circles: module level N, all M; in-function imports inside circles K

Exit status: 1 when the module-level graph has more circles than --max-top (default 0: a
module-level circle makes Python load a half-made module), or when --max-all/--max-deferred
is given and the all-imports count or the count of in-function imports that hold circles
together is above it; else 0. The budgets let a test say "no more than today" while the
circles are being taken apart.

  python3 tools/py_cycles.py python/ipuof
  python3 tools/py_cycles.py python/ipuof --max-top 1 --max-all 2 --max-deferred 16
"""
import argparse
import ast
import os
import sys


def modules(root):
    """Maps dotted module names (relative to the package root, "" for __init__) to paths."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(("_", ".")) or
                             os.path.exists(os.path.join(dirpath, d, "__init__.py")))
        rel = os.path.relpath(dirpath, root)
        pkg = [] if rel == "." else rel.split(os.sep)
        for f in sorted(filenames):
            if not f.endswith(".py"):
                continue
            stem = f[:-3]
            parts = pkg if stem == "__init__" else pkg + [stem]
            out[".".join(parts)] = os.path.join(dirpath, f)
    return out


def resolve(mods, pkgname, here, node):
    """The package modules one Import/ImportFrom node names (here: the importing module)."""
    found = []
    if isinstance(node, ast.Import):
        for a in node.names:
            parts = a.name.split(".")
            if parts[0] != pkgname:
                continue
            # "import pkg.a.b" loads pkg, pkg.a and pkg.a.b: the deepest is the one meant.
            name = ".".join(parts[1:])
            if name in mods:
                found.append(name)
        return found
    if node.level == 0:
        if node.module is None or node.module.split(".")[0] != pkgname:
            return found
        base = node.module.split(".")[1:]
    else:
        is_pkg = mods.get(here, "").endswith("__init__.py")
        cur = here.split(".") if here else []
        if not is_pkg:
            cur = cur[:-1]
        up = node.level - 1
        if up > len(cur):
            return found
        cur = cur[:len(cur) - up] if up else cur
        base = cur + (node.module.split(".") if node.module else [])
    basename = ".".join(base)
    for a in node.names:
        sub = ".".join(base + [a.name])
        if sub in mods:
            found.append(sub)          # from pkg import module
        elif basename in mods:
            found.append(basename)     # from pkg.mod import name
    return found


class Finder(ast.NodeVisitor):
    """Collects (target, line, deferred) for every import of a package module."""

    def __init__(self, mods, pkgname, here):
        self.mods, self.pkgname, self.here = mods, pkgname, here
        self.depth = 0
        self.edges = []

    def _func(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _func

    def _imp(self, node):
        for t in resolve(self.mods, self.pkgname, self.here, node):
            if t != self.here:
                self.edges.append((t, node.lineno, self.depth > 0))

    visit_Import = visit_ImportFrom = _imp


def sccs(nodes, edges):
    """Strongly connected components of two or more nodes (Tarjan, iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def show(name):
    return name or "__init__"


def report(title, comps, why):
    print("== %s" % title)
    if not comps:
        print("no circle")
    for comp in comps:
        print("circle of %d modules: %s" % (len(comp), " ".join(show(m) for m in comp)))
        inside = set(comp)
        for (a, b), (line, deferred) in sorted(why.items()):
            if a in inside and b in inside:
                print("    %s -> %s (line %d%s)" % (show(a), show(b), line,
                                                   ", in a function" if deferred else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("package", help="the package's directory, e.g. python/ipuof")
    ap.add_argument("--max-top", type=int, default=0,
                    help="fail when the module-level graph has more circles than this")
    ap.add_argument("--max-all", type=int, default=None,
                    help="fail when the graph of all imports has more circles than this")
    ap.add_argument("--max-deferred", type=int, default=None,
                    help="fail when more in-function imports than this lie inside circles")
    args = ap.parse_args()
    root = args.package.rstrip("/")
    pkgname = os.path.basename(root)
    mods = modules(root)
    if not mods:
        print("no Python modules under %s" % root, file=sys.stderr)
        return 2
    top, every = {}, {}
    why_top, why_all = {}, {}
    deferred = []  # (from, to) of every in-function import
    for m, path in mods.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=path)
        fd = Finder(mods, pkgname, m)
        fd.visit(tree)
        for t, line, d in fd.edges:
            every.setdefault(m, set()).add(t)
            why_all.setdefault((m, t), (line, d))
            if d:
                deferred.append((m, t))
            else:
                top.setdefault(m, set()).add(t)
                why_top.setdefault((m, t), (line, d))
                why_all[(m, t)] = (line, d)
    c_top = sccs(sorted(mods), top)
    c_all = sccs(sorted(mods), every)
    report("module-level imports (%s)" % root, c_top, why_top)
    report("all imports, in-function ones included (%s)" % root, c_all, why_all)
    comp_of = {m: i for i, comp in enumerate(c_all) for m in comp}
    held = sum(1 for a, b in deferred if a in comp_of and comp_of[a] == comp_of.get(b))
    print("circles: module level %d, all %d; in-function imports inside circles %d "
          "(of %d in-function imports)" % (len(c_top), len(c_all), held, len(deferred)))
    bad = False
    if len(c_top) > args.max_top:
        print("more module-level circles than --max-top %d" % args.max_top)
        bad = True
    if args.max_all is not None and len(c_all) > args.max_all:
        print("more circles than --max-all %d" % args.max_all)
        bad = True
    if args.max_deferred is not None and held > args.max_deferred:
        print("more in-function imports inside circles than --max-deferred %d" %
              args.max_deferred)
        bad = True
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
