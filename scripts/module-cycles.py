#!/usr/bin/env python3
"""Import circles between the modules of a crate, from its `use` paths.

Reads every .rs file under a crate's src/, turns each `crate::a::b` path (in `use` items and in
code) into an edge from the file's module to the longest module of the crate it names, and
prints every strongly connected component of more than one module: an import circle. Also
prints the edges that reach from a module into one of its own ancestors ("reaching up").
Exit status 1 when a circle or an upward edge exists, so CI can run it.

With --layers, also prints every edge from a top-level module into a higher layer ("reaches
up" a layer): layers are given lowest first, separated by `|`, e.g.
    --layers "clock visible | analysis | db | fleet | state | web | app"
A top-level module not named in any layer is reported, so the map stays complete.

Usage: scripts/module-cycles.py SRC_DIR [--layers "a b | c | ..."]
       scripts/module-cycles.py --self-test
Tests (`#[cfg(test)] mod tests` bodies) are skipped: a test may use anything.
"""
import os
import re
import sys


def module_of(root, path):
    rel = os.path.relpath(path, root)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib", "main"):
        rel = rel[:-1]
    return "::".join(["crate"] + rel)


def strip_tests(text):
    # Drop `#[cfg(test)]` items: find the attribute, then the brace block that follows it.
    out, i = [], 0
    while True:
        j = text.find("#[cfg(test)]", i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:j])
        k = text.find("{", j)
        semi = text.find(";", j)
        if k < 0 or (0 <= semi < k):
            i = semi + 1
            continue
        depth = 0
        for pos in range(k, len(text)):
            c = text[pos]
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    break
        i = pos + 1


def strip_comments(text):
    """Blanks comments and the insides of string and char literals, in one pass that knows
    them all (nested block comments, raw strings, lifetimes), so that neither a `//` in a string
    nor a `/*` in a comment hides code, and no path inside a string counts as an import."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            out.append(" ")
        elif c == "r" and re.match(r'r#*"', text[i:]) and not re.match(r"\w", text[i - 1 : i] or " "):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            i = n if end < 0 else end + 1 + len(hashes)
            out.append('""')
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            out.append('""')
        elif c == "'" and re.match(r"'(\\.[^']*|[^\\'])'", text[i:]):
            i += re.match(r"'(\\.[^']*|[^\\'])'", text[i:]).end()
            out.append("' '")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def expand_use_groups(text):
    """`use crate::{a::{b, c}, d}` → paths crate::a::b, crate::a::c, crate::d."""
    paths = []
    for m in re.finditer(r"\buse\s+(crate|super|self)((?:::[^;]*?)?);", text, flags=re.S):
        tree = re.sub(r"\s+as\s+\w+", "", m.group(1) + m.group(2))
        paths.extend(expand(tree))
    return paths


def expand(tree):
    tree = re.sub(r"\s+", "", tree)
    i = tree.find("{")
    if i < 0:
        return [tree]
    prefix, body = tree[:i], tree[i + 1 : tree.rfind("}")]
    parts, depth, cur = [], 0, ""
    for c in body:
        if c == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += c == "{"
        depth -= c == "}"
        cur += c
    if cur:
        parts.append(cur)
    result = []
    for p in parts:
        result.extend(expand(prefix + p) if p not in ("self",) else [prefix.rstrip(":")])
    return result


def resolve(path, here, modules):
    segs = path.split("::")
    if segs[0] == "super":
        base = here.split("::")
        while segs and segs[0] == "super":
            base = base[:-1]
            segs = segs[1:]
        segs = base + segs
    elif segs[0] == "self":
        segs = here.split("::") + segs[1:]
    for n in range(len(segs), 0, -1):
        cand = "::".join(segs[:n])
        if cand in modules:
            return cand
    return None


SELF_TEST = {
    "lib.rs": "pub mod a;\npub mod b;\npub mod c;\npub mod d;\n",
    "a/mod.rs": (
        "//! Doc with */* and a // and \"quote\n"
        "pub mod x;\n"
        "pub fn f<'a>(s: &'a str) -> char { let _u = \"https://x\"; crate::b::g(); '\"' }\n"
        "// #[cfg(test)] in a comment\n"
        "pub fn h() { let _r = r#\"crate::d::n \"q\" \"#; crate::c::k(); }\n"
    ),
    "a/x.rs": "pub fn y() { let _c = '\\''; super::h(); }\n",
    "b.rs": "pub fn g() {}\n/* outer /* nested */ still crate::d::n */\n",
    "c.rs": "pub fn k() {}\n#[cfg(test)]\nmod tests { use crate::d::n; }\n",
    "d.rs": "pub fn n() {}\n",
    # One file compiled into two modules by `#[path]`: each copy's `super` is its includer.
    "e/mod.rs": '#[path = "../shared/s.rs"]\nmod s;\nmod k;\n',
    "e/k.rs": "pub fn z() {}\n",
    "f/mod.rs": '#[path = "../shared/s.rs"]\nmod s;\nmod k;\n// #[path = "../b.rs"] mod b;\n',
    "f/k.rs": "pub fn z() {}\n",
    "shared/s.rs": "use super::k::z;\n",
}


def self_test():
    """The parser against the cases that fooled it once: paths in strings, raw strings and
    comments (nested, or holding `*/*`), lifetimes and quote characters, test modules."""
    import tempfile

    with tempfile.TemporaryDirectory() as root:
        for name, text in SELF_TEST.items():
            os.makedirs(os.path.dirname(os.path.join(root, name)), exist_ok=True)
            with open(os.path.join(root, name), "w", encoding="utf-8") as f:
                f.write(text)
        edges = module_edges(root)
    got = sorted((a, b) for a, targets in edges.items() for b in targets)
    expected = [
        ("crate::a", "crate::b"),
        ("crate::a", "crate::c"),
        ("crate::a::x", "crate::a"),
        ("crate::e::s", "crate::e::k"),
        ("crate::f::s", "crate::f::k"),
    ]
    if got != expected:
        print(f"self-test failed: edges {got}, expected {expected}")
        sys.exit(1)
    print("self-test passed")


PATH_MOD = re.compile(
    r'#\[path\s*=\s*"([^"]+)"\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;'
)


def path_includes(files):
    """Modules declared with `#[path = "..."] mod name;`: {module: file}. Such a file is a
    module of the declaring one (its `super` is the declarer), once per declaration: one file
    included by two modules is two modules, as the compiler sees it. The path is relative to the
    declaring file's directory."""
    included = {}
    for mod, path in files.items():
        # Lines that are comments are left out; the path's string must be kept, which
        # strip_comments would blank.
        lines = open(path, encoding="utf-8").read().split("\n")
        code = "\n".join(line for line in lines if not line.lstrip().startswith("//"))
        for m in PATH_MOD.finditer(code):
            target = os.path.normpath(os.path.join(os.path.dirname(path), m.group(1)))
            included[mod + "::" + m.group(2)] = target
    return included


def module_edges(root):
    files = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            # main.rs is a binary of its own beside lib.rs: it uses the library by its name.
            if name.endswith(".rs") and not (name == "main.rs" and dirpath == root):
                path = os.path.join(dirpath, name)
                files[module_of(root, path)] = path
    included = path_includes(files)
    shared = {os.path.normpath(p) for p in included.values()}
    files = {m: p for m, p in files.items() if os.path.normpath(p) not in shared}
    files.update(included)
    modules = set(files)
    edges = {m: set() for m in modules}
    for mod, path in files.items():
        text = strip_tests(strip_comments(open(path, encoding="utf-8").read()))
        paths = expand_use_groups(text)
        paths += re.findall(r"\b(?:crate|super|self)(?:::\w+)+", text)
        # A parent names its children by relative paths: `use reports::X`, `reports::f()`.
        children = {m.rsplit("::", 1)[1] for m in modules if "::" in m and m.rsplit("::", 1)[0] == mod}
        for c in children:
            if re.search(r"(?<![:\w])" + c + r"::", text):
                paths.append(mod + "::" + c)
        for p in paths:
            target = resolve(p, mod, modules)
            if target and target != mod:
                edges[mod].add(target)
    return edges


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return
    root = sys.argv[1]
    layer_of = {}
    if "--layers" in sys.argv:
        spec = sys.argv[sys.argv.index("--layers") + 1]
        for rank, names in enumerate(spec.split("|")):
            for name in names.split():
                layer_of["crate::" + name] = rank
    edges = module_edges(root)
    modules = set(edges)
    # Tarjan's strongly connected components.
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            sccs.append(comp)

    for v in sorted(modules):
        if v not in index:
            visit(v)
    bad = 0
    for comp in sorted((c for c in sccs if len(c) > 1), key=len, reverse=True):
        bad += 1
        print(f"circle of {len(comp)} modules:")
        for m in sorted(comp):
            inside = sorted(w for w in edges[m] if w in comp)
            print(f"  {m} -> {', '.join(inside)}")
    for m in sorted(modules):
        for t in sorted(edges[m]):
            if m.startswith(t + "::") and t != "crate":
                bad += 1
                print(f"reaches up: {m} -> {t}")
    if layer_of:
        # A module's layer is its longest named prefix: `db::error` may sit below `db`.
        def top(m):
            segs = m.split("::")
            for n in range(len(segs), 1, -1):
                if "::".join(segs[:n]) in layer_of:
                    return "::".join(segs[:n])
            return "::".join(segs[:2])

        for m in sorted({top(m) for m in modules if m != "crate"}):
            if m not in layer_of:
                bad += 1
                print(f"in no layer: {m}")
        for m in sorted(modules):
            for t in sorted(edges[m]):
                a, b = top(m), top(t)
                if a in layer_of and b in layer_of and layer_of[b] > layer_of[a]:
                    bad += 1
                    print(f"reaches up a layer: {m} -> {t}")
    n_edges = sum(len(e) for e in edges.values())
    print(f"{len(modules)} modules, {n_edges} edges, {bad} problem(s)")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
