#!/usr/bin/env python3
"""layout_ref.py - checks an example layout against an independent emulation of Megatron-Core and vLLM.

It evaluates the layout (a small interpreter of the layout language, written from docs and common/layout.h,
sharing no code with the compiler), builds a toy checkpoint in Hugging Face form where every element has a
unique id, and emulates how Megatron-Core shards it on each training rank and how vLLM loads it on each
inference rank (both written from the frameworks' own logic: QKV interleaving, vocabulary padding, experts,
MLA fusions, pipeline stages). Then, element by element:
  - the layout's source pieces must describe exactly Megatron's buffers: same buffer names on the same ranks,
    same sizes, and one consistent one-to-one map from layout tensor elements to checkpoint elements;
  - through that map, the layout's destination pieces must fill every real (non-padding) element of every vLLM
    buffer with the right checkpoint element and leave padding rows alone;
  - every checkpoint element is transferred.
Usage: layout_ref.py LAYOUT [-D NAME=VALUE]... [--replay-args]   (--replay-args: also apply the file's line)
Exit 0 when everything matches; 1 with the first mismatches listed otherwise.
"""
import os
import re
import sys

# ---------------------------------------------------------------------------------------------------------
# A small interpreter of the layout language (only evaluation; the compiler does the diagnostics).

TOKEN = re.compile(r"""
    (?P<ws>\s+|\#[^\n]*)
  | (?P<num>[0-9][0-9_]*)
  | (?P<str>"(?:[^"\\]|\\.)*")
  | (?P<id>[A-Za-z_][A-Za-z_0-9]*)
  | (?P<op>\.\.|==|!=|<=|>=|&&|\|\||[-+*/%<>!?:;,=\[\]{}()])
""", re.X)


def tokenize(text, path):
    toks, pos = [], 0
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m:
            raise SyntaxError(f"{path}: bad character at offset {pos}: {text[pos:pos + 10]!r}")
        pos = m.end()
        kind = m.lastgroup
        if kind == "ws":
            continue
        val = m.group(kind)
        if kind == "num":
            val = int(val.replace("_", ""))
        elif kind == "str":
            val = val[1:-1]
        toks.append((kind, val))
    toks.append(("eof", None))
    return toks


def cdiv(a, b):
    if b == 0:
        raise ZeroDivisionError("division by zero in layout")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def cmod(a, b):
    return a - cdiv(a, b) * b


class Parser:
    def __init__(self, toks, path):
        self.t, self.i, self.path = toks, 0, path

    def peek(self, k=0):
        return self.t[self.i + k]

    def next(self):
        tok = self.t[self.i]
        self.i += 1
        return tok

    def accept(self, val):
        if self.t[self.i][1] == val and self.t[self.i][0] in ("op", "id"):
            self.i += 1
            return True
        return False

    def expect(self, val):
        if not self.accept(val):
            raise SyntaxError(f"{self.path}: expected {val!r}, got {self.t[self.i]!r}")

    def ident(self):
        kind, val = self.next()
        if kind != "id":
            raise SyntaxError(f"{self.path}: expected a name, got {val!r}")
        return val

    # expressions -> nested tuples
    def expr(self):
        c = self.or_()
        if self.accept("?"):
            a = self.expr()
            self.expect(":")
            b = self.expr()
            return ("?", c, a, b)
        return c

    def binary(self, sub, ops):
        left = sub()
        while self.peek()[0] == "op" and self.peek()[1] in ops:
            op = self.next()[1]
            left = (op, left, sub())
        return left

    def or_(self):
        return self.binary(self.and_, ("||",))

    def and_(self):
        return self.binary(self.eq, ("&&",))

    def eq(self):
        return self.binary(self.rel, ("==", "!="))

    def rel(self):
        return self.binary(self.add, ("<", "<=", ">", ">="))

    def add(self):
        return self.binary(self.mul, ("+", "-"))

    def mul(self):
        return self.binary(self.unary, ("*", "/", "%"))

    def unary(self):
        if self.accept("-"):
            return ("neg", self.unary())
        if self.accept("!"):
            return ("not", self.unary())
        if self.accept("+"):
            return self.unary()
        return self.primary()

    def primary(self):
        kind, val = self.next()
        if kind == "num":
            return ("num", val)
        if kind == "str":   # text: a const's value, or {NAME} inside another string
            return ("text", val)
        if kind == "op" and val == "(":
            e = self.expr()
            self.expect(")")
            return e
        if kind == "id":
            if val in ("min", "max") and self.accept("("):
                args = [self.expr()]
                while self.accept(","):
                    args.append(self.expr())
                self.expect(")")
                return (val, args)
            return ("name", val)
        raise SyntaxError(f"{self.path}: unexpected {val!r} in expression")

    def name(self):
        kind, val = self.next()
        if kind not in ("id", "str"):
            raise SyntaxError(f"{self.path}: expected a tensor name, got {val!r}")
        return ("lit" if kind == "id" else "fmt", val)

    def items(self, close):
        """slice / box items up to `close` ("]")."""
        out = []
        if self.accept(close):
            return out
        while True:
            if self.peek()[1] == ":" and self.peek()[0] == "op":
                self.next()
                hi = None if self.peek()[1] in (",", close) else self.expr()
                out.append(("range", None, hi))
            else:
                lo = self.expr()
                if self.accept(":"):
                    hi = None if self.peek()[1] in (",", close) else self.expr()
                    out.append(("range", lo, hi))
                else:
                    out.append(("index", lo))
            if self.accept(close):
                return out
            self.expect(",")

    def block(self):
        self.expect("{")
        body = []
        while not self.accept("}"):
            body.append(self.stmt())
        return body

    def stmt(self):
        kind, val = self.peek()
        if kind == "id" and val == "topology":
            self.next()
            self.expect("{")
            depth = 1
            while depth:
                k, v = self.next()
                if k == "op" and v == "{":
                    depth += 1
                elif k == "op" and v == "}":
                    depth -= 1
            return ("topology",)
        if kind == "id" and val == "include":
            self.next()
            k, p = self.next()
            self.expect(";")
            return ("include", p)
        if kind == "id" and val == "assert":
            self.next()
            c = self.expr()
            self.expect(",")
            k, msg = self.next()
            self.expect(";")
            return ("assert", c, msg)
        if kind == "id" and val == "const":
            self.next()
            defs = []
            while True:
                n = self.ident()
                self.expect("=")
                defs.append((n, self.expr()))
                if self.accept(";"):
                    break
                self.expect(",")
            return ("const", defs)
        if kind == "id" and val == "mesh":
            self.next()
            n = self.ident()
            if self.accept("="):   # a view: mesh v = base [a, b = x * y];
                base = self.ident()
                self.expect("[")
                axes = []
                while True:
                    a = self.ident()
                    fac = [a]
                    if self.accept("="):
                        fac = [self.ident()]
                        while self.accept("*"):
                            fac.append(self.ident())
                    axes.append((a, fac))
                    if self.accept("]"):
                        break
                    self.expect(",")
                self.expect(";")
                return ("view", n, base, axes)
            self.expect("[")
            axes = []
            while True:
                a = self.ident()
                self.expect("=")
                axes.append((a, self.expr()))
                if self.accept("]"):
                    break
                self.expect(",")
            self.expect("=")
            self.expect("ranks")
            if self.accept("["):
                ranks = ("list", [])
                while True:
                    ranks[1].append(self.expr())
                    if self.accept("]"):
                        break
                    self.expect(",")
            else:
                lo = self.expr()
                self.expect("..")
                ranks = ("range", lo, self.expr())
            self.expect(";")
            return ("mesh", n, axes, ranks)
        if kind == "id" and val == "tensor":
            self.next()
            n = self.name()
            self.expect(":")
            dt = self.ident()
            self.expect("[")
            dims = [self.expr()]
            while self.accept(","):
                dims.append(self.expr())
            self.expect("]")
            self.expect(";")
            return ("tensor", n, dt, dims)
        if kind == "id" and val in ("src", "dst"):
            self.next()
            n = self.name()
            sl = self.items("]") if self.accept("[") else None
            self.expect("on")
            mesh = self.ident()
            places = []
            if self.accept("{"):
                while not self.accept("}"):
                    ax = self.ident()
                    if self.accept("="):
                        places.append((ax, "pin", self.expr(), None))
                    else:
                        self.expect(":")
                        how = self.ident()
                        if how == "replicate":
                            places.append((ax, "rep", None, None))
                        else:
                            self.expect("(")
                            d = self.expr()
                            blk = None
                            if self.accept(","):
                                if self.accept("balanced"):
                                    blk = "balanced"
                                else:
                                    self.expect("block")
                                    self.expect("=")
                                    blk = self.expr()
                            self.expect(")")
                            places.append((ax, "shard", d, blk))
                    self.accept(",")
            self.expect("as")
            k, buf = self.next()
            shape = box = None
            if self.accept(":"):
                self.expect("[")
                shape = [self.expr()]
                while self.accept(","):
                    shape.append(self.expr())
                self.expect("]")
                if self.accept("["):
                    box = self.items("]")
            self.expect(";")
            return (val, n, sl, mesh, places, buf, shape, box)
        if kind == "id" and val == "for":
            self.next()
            v = self.ident()
            self.expect("in")
            lo = self.expr()
            self.expect("..")
            hi = self.expr()
            return ("for", v, lo, hi, self.block())
        if kind == "id" and val == "if":
            self.next()
            c = self.expr()
            then = self.block()
            other = []
            if self.accept("else"):
                other = [self.stmt()] if self.peek()[1] == "if" else self.block()
            return ("if", c, then, other)
        raise SyntaxError(f"{self.path}: unexpected {val!r}")


class Layout:
    def __init__(self, path, defines):
        self.defines = dict(defines)
        self.consts = {}
        self.meshes = {}    # name -> (axes [(name, size)], ranks list)
        self.tensors = {}   # name -> (dtype, shape)
        self.tensor_order = []
        self.pieces = []    # dicts
        self.run_file(path, {})

    def run_file(self, path, scope):
        with open(path) as f:
            prog = Parser(tokenize(f.read(), path), path)
        stmts = []
        while prog.peek()[0] != "eof":
            stmts.append(prog.stmt())
        self.run(stmts, scope, os.path.dirname(path))

    def ev(self, e, scope):
        op = e[0]
        if op == "num":
            return e[1]
        if op == "text":
            return self.fmt(("fmt", e[1]), scope)
        if op == "name":
            if e[1] in scope:
                return scope[e[1]]
            return self.consts[e[1]]
        if op in ("min", "max"):
            vals = [self.ev(a, scope) for a in e[1]]
            return min(vals) if op == "min" else max(vals)
        if op == "neg":
            return -self.ev(e[1], scope)
        if op == "not":
            return int(not self.ev(e[1], scope))
        if op == "?":
            return self.ev(e[2], scope) if self.ev(e[1], scope) else self.ev(e[3], scope)
        a = self.ev(e[1], scope)
        if op == "&&":
            return int(bool(a) and bool(self.ev(e[2], scope)))
        if op == "||":
            return int(bool(a) or bool(self.ev(e[2], scope)))
        b = self.ev(e[2], scope)
        return {
            "+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
            "/": lambda: cdiv(a, b), "%": lambda: cmod(a, b),
            "==": lambda: int(a == b), "!=": lambda: int(a != b), "<": lambda: int(a < b),
            "<=": lambda: int(a <= b), ">": lambda: int(a > b), ">=": lambda: int(a >= b),
        }[op]()

    def fmt(self, name, scope):
        kind, s = name
        if kind == "lit":
            return s
        out, i = [], 0
        while i < len(s):
            c = s[i]
            if c == "{" and s[i + 1:i + 2] == "{":
                out.append("{")
                i += 2
            elif c == "}" and s[i + 1:i + 2] == "}":
                out.append("}")
                i += 2
            elif s[i:i + 3] == "{*}":   # a buffer group: members are named later (layout_buffers)
                out.append("{*}")
                i += 3
            elif re.match(r"\{\s*\*\s*\+", s[i:]):   # "{* + offset}": a member index shifted in the name
                j = s.index("}", i)
                p = Parser(tokenize(s[s.index("+", i) + 1:j], "<string>"), "<string>")
                off = self.ev(p.expr(), scope)
                out.append("{*+%d}" % off if off else "{*}")
                i = j + 1
            elif c == "{":
                j = s.index("}", i)
                p = Parser(tokenize(s[i + 1:j], "<string>"), "<string>")
                out.append(str(self.ev(p.expr(), scope)))
                i = j + 1
            else:
                out.append(c)
                i += 1
        return "".join(out)

    def items(self, items, shape, scope):
        lo, hi = [], []
        for it, n in zip(items, shape):
            if it[0] == "index":
                v = self.ev(it[1], scope)
                lo.append(v)
                hi.append(v + 1)
            else:
                lo.append(0 if it[1] is None else self.ev(it[1], scope))
                hi.append(n if it[2] is None else self.ev(it[2], scope))
        assert len(items) == len(shape), "slice/box rank"
        return lo, hi

    def run(self, stmts, scope, base):
        for s in stmts:
            k = s[0]
            if k == "topology":
                continue
            if k == "assert":
                assert self.ev(s[1], scope), "assertion failed: " + self.fmt(("fmt", s[2]), scope)
                continue
            if k == "include":
                self.run_file(os.path.join(base, self.fmt(("fmt", s[1]), scope)), scope)
            elif k == "const":
                for n, e in s[1]:
                    if n in self.defines and not scope:   # -D: text for a text const, else a number
                        try:
                            text = isinstance(self.ev(e, scope), str)
                        except (KeyError, ZeroDivisionError, AssertionError):
                            text = False
                        v = self.defines[n] if text else int(self.defines[n].replace("_", ""))
                    else:
                        v = self.ev(e, scope)
                    if scope:
                        scope[n] = v
                    else:
                        self.consts[n] = v
            elif k == "mesh":
                axes = [(a, self.ev(e, scope)) for a, e in s[2]]
                r = s[3]
                ranks = ([self.ev(e, scope) for e in r[1]] if r[0] == "list"
                         else list(range(self.ev(r[1], scope), self.ev(r[2], scope))))
                n = 1
                for _, sz in axes:
                    n *= sz
                assert n == len(ranks), f"mesh {s[1]}: size {n} != {len(ranks)} ranks"
                self.meshes[s[1]] = (axes, ranks)
            elif k == "view":
                # the base's ranks with its axes regrouped: view axis = base axes, outermost first
                baxes, branks = self.meshes[s[2]]
                bsize = dict(baxes)
                order = [f for _, fac in s[3] for f in fac]
                assert sorted(order) == sorted(bsize), f"mesh {s[1]}: a view uses every axis of {s[2]} once"
                axes = []
                for a, fac in s[3]:
                    n = 1
                    for f in fac:
                        n *= bsize[f]
                    axes.append((a, n))
                ranks = []
                for lin in range(len(branks)):   # the view's positions in row-major order
                    coord, x = {}, lin
                    for f in reversed(order):
                        coord[f] = x % bsize[f]
                        x //= bsize[f]
                    b = 0
                    for a, n in baxes:
                        b = b * n + coord[a]
                    ranks.append(branks[b])
                self.meshes[s[1]] = (axes, ranks)
            elif k == "tensor":
                n = self.fmt(s[1], scope)
                assert n not in self.tensors, f"duplicate tensor {n}"
                self.tensors[n] = (s[2], [self.ev(e, scope) for e in s[3]])
                self.tensor_order.append(n)
            elif k in ("src", "dst"):
                _, name, sl, mesh, places, buf, shape, box = s
                tn = self.fmt(name, scope)
                dt, tshape = self.tensors[tn]
                slo, shi = self.items(sl, tshape, scope) if sl is not None else ([0] * len(tshape), list(tshape))
                axes = [a for a, _ in self.meshes[mesh][0]]
                pl = []
                for ax, how, a1, a2 in places:
                    pl.append((axes.index(ax), how, None if a1 is None else self.ev(a1, scope),
                               a2 if a2 in (None, "balanced") else self.ev(a2, scope)))
                bshape = [self.ev(e, scope) for e in shape] if shape is not None else None
                bbox = None
                if bshape is not None:
                    bbox = self.items(box, bshape, scope) if box is not None else ([0] * len(bshape), list(bshape))
                self.pieces.append(dict(side=k, tensor=tn, slo=slo, shi=shi, mesh=mesh, places=pl,
                                        buf=self.fmt(("fmt", buf), scope), bshape=bshape, box=bbox))
            elif k == "for":
                lo, hi = self.ev(s[2], scope), self.ev(s[3], scope)
                for v in range(lo, hi):
                    inner = dict(scope)
                    inner[s[1]] = v
                    self.run(s[4], inner, base)
            elif k == "if":
                body = s[2] if self.ev(s[1], scope) else s[3]
                self.run(body, dict(scope), base)


def shard_interval(plo, phi, n, b, j):
    length = phi - plo
    if b == "balanced":   # the first length % n blocks one longer
        q, r = divmod(length, n)
        lo = j * q + min(j, r)
        return plo + lo, plo + lo + q + (1 if j < r else 0)
    bs = b if b else -(-length // n)
    lo = min(j * bs, length)
    hi = min((j + 1) * bs, length)
    return plo + lo, plo + hi


def box_offsets(lo, hi, shape):
    """flat row-major offsets (in an array of `shape`) of the box [lo, hi), in row-major order of the box"""
    offs = [0]
    for d, n in enumerate(shape):
        a, b = lo[d], hi[d]
        if d == len(shape) - 1:
            out = []
            for o in offs:
                base = o * n
                out.extend(range(base + a, base + b))
            return out
        offs = [o * n + i for o in offs for i in range(a, b)]
    return offs


def layout_buffers(lay, side):
    """{(rank, buffer): list over buffer positions of tensor element ids (None: not filled)} for one side."""
    tid = {n: i for i, n in enumerate(lay.tensor_order)}
    out = {}
    members = {}  # (rank, group buffer) -> member count: its first dim on that rank
    for p in lay.pieces:
        memo = {}   # replicas of a block share one list
        if p["side"] != side:
            continue
        axes, ranks = lay.meshes[p["mesh"]]
        sizes = [s for _, s in axes]
        dt, tshape = lay.tensors[p["tensor"]]
        base = tid[p["tensor"]] << 40
        for lin, rank in enumerate(ranks):
            coord, x = [], lin
            for s in reversed(sizes):
                coord.append(x % s)
                x //= s
            coord.reverse()
            if any(how == "pin" and coord[a] != v for a, how, v, _ in p["places"]):
                continue
            lo, hi = list(p["slo"]), list(p["shi"])
            for a, how, d, blk in p["places"]:
                if how == "shard":
                    lo[d], hi[d] = shard_interval(lo[d], hi[d], sizes[a], blk, coord[a])
            n = 1
            for a, b in zip(lo, hi):
                n *= b - a
            if p["bshape"] is None:
                if n == 0:
                    continue
                bsize = n
                positions = None
            else:
                bsize = 1
                for s in p["bshape"]:
                    bsize *= s
                blo, bhi = p["box"]
                positions = box_offsets(blo, bhi, p["bshape"])
                assert len(positions) == n, f"box of {p['buf']} has {len(positions)} elements, block {n}"
            key = (rank, p["buf"])
            marks = MARKER.findall(p["buf"])
            if marks:   # member counts along the first len(marks) dims of the block or the buffer
                dims = [h - l for l, h in zip(lo, hi)] if p["bshape"] is None else p["bshape"]
                members[key] = dims[:len(marks)]
            mk = (tuple(lo), tuple(hi))
            elems = memo.get(mk)
            if elems is None:
                elems = memo[mk] = [base | o for o in box_offsets(lo, hi, tshape)]
            if positions is None:
                assert key not in out, f"{key}: implicit buffer filled twice"
                out[key] = elems
                continue
            fill = out.get(key)
            if fill is None:
                fill = out[key] = [None] * bsize
            assert len(fill) == bsize, f"{key}: buffer size {len(fill)} vs {bsize}"
            for pos, e in zip(positions, elems):
                assert fill[pos] is None, f"{key}: position {pos} filled twice"
                fill[pos] = e
    # A group's first one or two dims index its members, each a buffer of its own named with its index along
    # each dim (plus the marker's offset) in place of each "{*}" / "{*+N}".
    for (rank, name), dims in members.items():
        elems = out.pop((rank, name))
        n = 1
        for d in dims:
            n *= d
        size = len(elems) // n
        for j in range(n):
            idx = [j] if len(dims) == 1 else [j // dims[1], j % dims[1]]
            it = iter(idx)
            key = (rank, MARKER.sub(lambda m: str(next(it) + int(m.group(1) or 0)), name))
            assert key not in out, f"{key}: member of {name} is also another buffer"
            out[key] = elems[j * size:(j + 1) * size]
    return out


MARKER = re.compile(r"\{\*(?:\+([1-9][0-9]*))?\}")

# ---------------------------------------------------------------------------------------------------------
# Toy checkpoint and the two frameworks' sharding. A weight is (shape, flat list of ids); None is padding.


class Ckpt:
    def __init__(self):
        self.names, self.w = [], {}

    def add(self, name, *shape):
        n = 1
        for s in shape:
            n *= s
        base = len(self.names) << 40
        self.names.append(name)
        self.w[name] = (list(shape), [base | i for i in range(n)])


def rows(w, a, b):
    shape, d = w
    c = len(d) // shape[0]
    return [b - a] + shape[1:], d[a * c:b * c]


def cols(w, a, b):
    shape, d = w
    r, c = shape
    out = []
    for i in range(r):
        out.extend(d[i * c + a:i * c + b])
    return [r, b - a], out


def cat(*ws):
    shape = [sum(w[0][0] for w in ws)] + ws[0][0][1:]
    out = []
    for w in ws:
        out.extend(w[1])
    return shape, out


def chunk_rows(w, n, j):
    per = w[0][0] // n
    assert per * n == w[0][0], "uneven split"
    return rows(w, j * per, (j + 1) * per)


def chunk_cols(w, n, j):
    per = w[0][1] // n
    assert per * n == w[0][1], "uneven split"
    return cols(w, j * per, (j + 1) * per)


def pad_rows(w, total):
    shape, d = w
    c = len(d) // shape[0]
    return [total] + shape[1:], d + [None] * ((total - shape[0]) * c)


def stack(ws):
    return [len(ws)] + ws[0][0], [x for w in ws for x in w[1]]


def reference(C):
    """Build the checkpoint and return (megatron {(rank, name): ids}, vllm {(rank, name): ids}, ckpt)."""
    mla = "NH" in C
    g = C.get
    L, H, V = C["L"], C["H"], C["V"]
    ck = Ckpt()
    ck.add("model.embed_tokens.weight", V, H)
    ck.add("lm_head.weight", V, H)
    ck.add("model.norm.weight", H)

    def moe_layer(l):
        return (l >= C["NDENSE"]) if mla else bool(C["MOE"])

    # DeepSeek-V3's multi-token-prediction layers are checkpoint layers L.. (each a MoE decoder layer plus
    # enorm, hnorm, eh_proj and shared_head.norm; its embed_tokens and shared_head.head copies are the main
    # model's, which vLLM shares with the drafter, so they are left out here)
    MTP = C.get("MTP", 0)
    for l in range(L, L + MTP):
        p = f"model.layers.{l}."
        for n in ("enorm", "hnorm", "shared_head.norm"):
            ck.add(p + n + ".weight", H)
        ck.add(p + "eh_proj.weight", H, 2 * H)
    for l in range(L + MTP):
        p = f"model.layers.{l}."
        ck.add(p + "input_layernorm.weight", H)
        ck.add(p + "post_attention_layernorm.weight", H)
        if mla:
            NH, QL, KVL, NOPE, ROPE, VHD = (C[k] for k in ("NH", "QL", "KVL", "NOPE", "ROPE", "VHD"))
            ck.add(p + "self_attn.q_a_proj.weight", QL, H)
            ck.add(p + "self_attn.q_a_layernorm.weight", QL)
            ck.add(p + "self_attn.q_b_proj.weight", NH * (NOPE + ROPE), QL)
            ck.add(p + "self_attn.kv_a_proj_with_mqa.weight", KVL + ROPE, H)
            ck.add(p + "self_attn.kv_a_layernorm.weight", KVL)
            ck.add(p + "self_attn.kv_b_proj.weight", NH * (NOPE + VHD), KVL)
            ck.add(p + "self_attn.o_proj.weight", H, NH * VHD)
        else:
            NQ, NKV, HD = C["NQ"], C["NKV"], C["HD"]
            ck.add(p + "self_attn.q_proj.weight", NQ * HD, H)
            ck.add(p + "self_attn.k_proj.weight", NKV * HD, H)
            ck.add(p + "self_attn.v_proj.weight", NKV * HD, H)
            ck.add(p + "self_attn.o_proj.weight", H, NQ * HD)
            if C["QKNORM"]:
                ck.add(p + "self_attn.q_norm.weight", HD)
                ck.add(p + "self_attn.k_norm.weight", HD)
        if moe_layer(l):
            E, F = C["E"], C["F"]
            ck.add(p + "mlp.gate.weight", E, H)
            if mla:
                ck.add(p + "mlp.gate.e_score_correction_bias", E)
                for n in ("gate_proj", "up_proj"):
                    ck.add(p + f"mlp.shared_experts.{n}.weight", C["FS"], H)
                ck.add(p + "mlp.shared_experts.down_proj.weight", H, C["FS"])
            for e in range(E):
                ck.add(p + f"mlp.experts.{e}.gate_proj.weight", F, H)
                ck.add(p + f"mlp.experts.{e}.up_proj.weight", F, H)
                ck.add(p + f"mlp.experts.{e}.down_proj.weight", H, F)
        else:
            ck.add(p + "mlp.gate_proj.weight", C["I"], H)
            ck.add(p + "mlp.up_proj.weight", C["I"], H)
            ck.add(p + "mlp.down_proj.weight", H, C["I"])
    w = ck.w

    # ---- Megatron-Core: dense rank = tp + TP * (cp + CP * (dp + DP * pp)); experts etp + ETP * (ep + EP * (edp +
    # EDP * pp)), EDP = NT / (ETP * EP * PP). Weights are the same on every cp and dp coordinate.
    NT, PP, TP, CP = C["NT"], C["PP"], C["TP"], C.get("CP", 1)
    DP = NT // (PP * CP * TP)
    # stage layer counts: first / last given (Megatron's --decoder-first/last-pipeline-num-layers), rest even
    if PP == 1:
        counts = [L]
    else:
        first, last = C["FIRST"], C["LAST"]
        mid = (L - first - last) // (PP - 2) if PP > 2 else 0
        counts = [first] + [mid] * (PP - 2) + [last]
    assert sum(counts) == L, f"stages {counts} do not add up to {L}"
    starts = [sum(counts[:s]) for s in range(PP)]
    # virtual pipeline: VPP model chunks per stage, each a module named "vp{v}." by the trainer; chunk v of
    # stage p holds layers (v * PP + p) * lpc .. + lpc with chunk-local numbers (even stages only)
    VPP = C.get("VPP", 1)
    if VPP > 1:
        assert len(set(counts)) == 1 and L % (PP * VPP) == 0, "virtual pipeline with uneven stages"
        lpc = L // (PP * VPP)
    first_chunk, last_chunk = ("vp0.", f"vp{VPP - 1}.") if VPP > 1 else ("", "")
    vpm = -(-V // (C["MEG_PAD"] * TP)) * C["MEG_PAD"] * TP   # Megatron-LM's padded vocabulary
    meg = {}
    for r in range(NT):
        tp, pp = r % TP, r // (TP * CP * DP)
        b = {}
        if pp == 0:
            b[first_chunk + "embedding.word_embeddings.weight"] = chunk_rows(
                pad_rows(w["model.embed_tokens.weight"], vpm), TP, tp)
        if pp == PP - 1:
            b[last_chunk + "output_layer.weight"] = chunk_rows(pad_rows(w["lm_head.weight"], vpm), TP, tp)
            b[last_chunk + "decoder.final_layernorm.weight"] = w["model.norm.weight"]
        if VPP > 1:
            layers = [((v * PP + pp) * lpc + i, f"vp{v}.decoder.layers.{i}.") for v in range(VPP) for i in range(lpc)]
        else:
            layers = [(starts[pp] + i, f"decoder.layers.{i}.") for i in range(counts[pp])]
        if pp == PP - 1:   # MTP layers: on the last stage (its last chunk), after the decoder's
            if MTP and (PP > 1 or VPP > 1):   # the MTP chunk builds its own copy of the embedding
                b[last_chunk + "embedding.word_embeddings.weight"] = chunk_rows(
                    pad_rows(w["model.embed_tokens.weight"], vpm), TP, tp)
            for i in range(MTP):
                mt = f"{last_chunk}mtp.layers.{i}."
                ew = w[f"model.layers.{L + i}.eh_proj.weight"]
                b[mt + "enorm.weight"] = w[f"model.layers.{L + i}.enorm.weight"]
                b[mt + "hnorm.weight"] = w[f"model.layers.{L + i}.hnorm.weight"]
                b[mt + "eh_proj.weight"] = chunk_rows(ew, TP, tp)   # column-parallel
                b[mt + "final_layernorm.weight"] = w[f"model.layers.{L + i}.shared_head.norm.weight"]
                layers.append((L + i, mt + "mtp_model_layer."))
        for l, m in layers:
            p = f"model.layers.{l}."
            if mla:
                b[m + "input_layernorm.weight"] = w[p + "input_layernorm.weight"]
                sa = m + "self_attention."
                b[sa + "linear_q_down_proj.weight"] = w[p + "self_attn.q_a_proj.weight"]
                b[sa + "linear_q_up_proj.layer_norm_weight"] = w[p + "self_attn.q_a_layernorm.weight"]
                b[sa + "linear_q_up_proj.weight"] = chunk_rows(w[p + "self_attn.q_b_proj.weight"], TP, tp)
                b[sa + "linear_kv_down_proj.weight"] = w[p + "self_attn.kv_a_proj_with_mqa.weight"]
                b[sa + "linear_kv_up_proj.layer_norm_weight"] = w[p + "self_attn.kv_a_layernorm.weight"]
                b[sa + "linear_kv_up_proj.weight"] = chunk_rows(w[p + "self_attn.kv_b_proj.weight"], TP, tp)
                b[sa + "linear_proj.weight"] = chunk_cols(w[p + "self_attn.o_proj.weight"], TP, tp)
            else:
                NQ, NKV, HD = C["NQ"], C["NKV"], C["HD"]
                qpg = NQ // NKV
                sa = m + "self_attention."
                b[sa + "linear_qkv.layer_norm_weight"] = w[p + "input_layernorm.weight"]
                q, k, v = (w[p + f"self_attn.{n}_proj.weight"] for n in "qkv")
                groups = []
                for gi in range(NKV):
                    groups += [rows(q, gi * qpg * HD, (gi + 1) * qpg * HD), rows(k, gi * HD, (gi + 1) * HD),
                               rows(v, gi * HD, (gi + 1) * HD)]
                b[sa + "linear_qkv.weight"] = chunk_rows(cat(*groups), TP, tp)
                b[sa + "linear_proj.weight"] = chunk_cols(w[p + "self_attn.o_proj.weight"], TP, tp)
                if C["QKNORM"]:
                    b[sa + "q_layernorm.weight"] = w[p + "self_attn.q_norm.weight"]
                    b[sa + "k_layernorm.weight"] = w[p + "self_attn.k_norm.weight"]
            if moe_layer(l):
                EP, ETP, E = C["EP"], C["ETP"], C["E"]
                EDP = NT // (PP * EP * ETP)
                etp, ep, edp, epp = r % ETP, (r // ETP) % EP, (r // (ETP * EP)) % EDP, r // (ETP * EP * EDP)
                assert epp == pp
                b[m + "pre_mlp_layernorm.weight"] = w[p + "post_attention_layernorm.weight"]
                b[m + "mlp.router.weight"] = w[p + "mlp.gate.weight"]
                if mla:
                    b[m + "mlp.router.expert_bias"] = w[p + "mlp.gate.e_score_correction_bias"]
                    se = p + "mlp.shared_experts."
                    b[m + "mlp.shared_experts.linear_fc1.weight"] = cat(
                        chunk_rows(w[se + "gate_proj.weight"], TP, tp), chunk_rows(w[se + "up_proj.weight"], TP, tp))
                    b[m + "mlp.shared_experts.linear_fc2.weight"] = chunk_cols(w[se + "down_proj.weight"], TP, tp)
                eloc = E // EP
                for j in range(eloc):
                    ex = p + f"mlp.experts.{ep * eloc + j}."
                    b[m + f"mlp.experts.linear_fc1.weight{j}"] = cat(
                        chunk_rows(w[ex + "gate_proj.weight"], ETP, etp), chunk_rows(w[ex + "up_proj.weight"], ETP, etp))
                    b[m + f"mlp.experts.linear_fc2.weight{j}"] = chunk_cols(w[ex + "down_proj.weight"], ETP, etp)
            else:
                b[m + "mlp.linear_fc1.layer_norm_weight"] = w[p + "post_attention_layernorm.weight"]
                b[m + "mlp.linear_fc1.weight"] = cat(chunk_rows(w[p + "mlp.gate_proj.weight"], TP, tp),
                                                     chunk_rows(w[p + "mlp.up_proj.weight"], TP, tp))
                b[m + "mlp.linear_fc2.weight"] = chunk_cols(w[p + "mlp.down_proj.weight"], TP, tp)
        for n, x in b.items():
            meg[(r, n)] = x[1]

    # ---- vLLM: rank NT + (dp * PPI + pp) * TPI + tp.
    NI, TPI, PPI = C["NI"], C["TPI"], C.get("PPI", 1)
    DPI = NI // (TPI * PPI)
    # pipeline stages as vllm.distributed.utils.get_pp_indices: L // PPI layers each, the remainder one each to
    # the stages before the last, from the second-to-last backwards
    parts = [L // PPI] * PPI
    for i in range(2, L % PPI + 2):
        parts[-i] += 1
    vstart = [sum(parts[:s]) for s in range(PPI)]
    vl = {}
    def vllm_rank(tp, dp, pp):
        b = {}
        vp = -(-V // 64) * 64
        if pp == 0:
            b["model.embed_tokens.weight"] = chunk_rows(pad_rows(w["model.embed_tokens.weight"], vp), TPI, tp)
        if pp == PPI - 1:
            b["lm_head.weight"] = chunk_rows(pad_rows(w["lm_head.weight"], vp), TPI, tp)
            b["model.norm.weight"] = w["model.norm.weight"]
        mine = list(range(vstart[pp], vstart[pp] + parts[pp]))
        if pp == PPI - 1:
            mine += list(range(L, L + MTP))
        for l in range(L, L + MTP):   # the drafter (DeepSeekMTP): its decoder layer is under mtp_block
            if pp != PPI - 1:
                continue
            p = f"model.layers.{l}."
            for n in ("enorm", "hnorm", "shared_head.norm", "eh_proj"):
                b[p + n + ".weight"] = w[p + n + ".weight"]   # eh_proj: a plain Linear, replicated
        for l in mine:
            p = f"model.layers.{l}."
            vq = p if l < L else p + "mtp_block."   # vLLM's name prefix
            b[vq + "input_layernorm.weight"] = w[p + "input_layernorm.weight"]
            b[vq + "post_attention_layernorm.weight"] = w[p + "post_attention_layernorm.weight"]
            sa, qa = p + "self_attn.", vq + "self_attn."
            if mla:
                b[qa + "fused_qkv_a_proj.weight"] = cat(w[sa + "q_a_proj.weight"], w[sa + "kv_a_proj_with_mqa.weight"])
                b[qa + "q_a_layernorm.weight"] = w[sa + "q_a_layernorm.weight"]
                b[qa + "q_b_proj.weight"] = chunk_rows(w[sa + "q_b_proj.weight"], TPI, tp)
                b[qa + "kv_a_layernorm.weight"] = w[sa + "kv_a_layernorm.weight"]
                b[qa + "kv_b_proj.weight"] = chunk_rows(w[sa + "kv_b_proj.weight"], TPI, tp)
            else:
                NQ, NKV, HD = C["NQ"], C["NKV"], C["HD"]
                # QKVParallelLinear: q heads split by tp; kv heads split, or replicated on TPI / NKV ranks
                qh = NQ // TPI
                q = rows(w[sa + "q_proj.weight"], tp * qh * HD, (tp + 1) * qh * HD)
                if TPI >= NKV:
                    kvh, kv0 = 1, tp // (TPI // NKV)
                else:
                    kvh = NKV // TPI
                    kv0 = tp * kvh
                k = rows(w[sa + "k_proj.weight"], kv0 * HD, (kv0 + kvh) * HD)
                v = rows(w[sa + "v_proj.weight"], kv0 * HD, (kv0 + kvh) * HD)
                b[qa + "qkv_proj.weight"] = cat(q, k, v)
                if C["QKNORM"]:
                    b[qa + "q_norm.weight"] = w[sa + "q_norm.weight"]
                    b[qa + "k_norm.weight"] = w[sa + "k_norm.weight"]
            b[qa + "o_proj.weight"] = chunk_cols(w[sa + "o_proj.weight"], TPI, tp)
            if moe_layer(l):
                E = C["E"]
                b[vq + "mlp.gate.weight"] = w[p + "mlp.gate.weight"]
                if mla:
                    b[vq + "mlp.gate.e_score_correction_bias"] = w[p + "mlp.gate.e_score_correction_bias"]
                    se, vse = p + "mlp.shared_experts.", vq + "mlp.shared_experts."
                    b[vse + "gate_up_proj.weight"] = cat(chunk_rows(w[se + "gate_proj.weight"], TPI, tp),
                                                         chunk_rows(w[se + "up_proj.weight"], TPI, tp))
                    b[vse + "down_proj.weight"] = chunk_cols(w[se + "down_proj.weight"], TPI, tp)
                mode = C["EXPERTS"]
                if mode == 2:   # expert parallel over DPI x TPI: contiguous blocks, first E % EP ranks one more
                    epn, epr = DPI * TPI, dp * TPI + tp
                    base, rem = E // epn, E % epn
                    first = epr * base + min(epr, rem)
                    mine = range(first, first + base + (1 if epr < rem else 0))
                    tpm, tpr = 1, 0
                elif mode == 3:   # expert parallel, vLLM's round-robin placement: experts r, r + EP, r + 2 EP, ...
                    mine = range(dp * TPI + tp, E, DPI * TPI)
                    tpm, tpr = 1, 0
                else:
                    mine = range(E)
                    tpm, tpr = (TPI, tp) if mode == 0 else (DPI * TPI, dp * TPI + tp)
                ex, vex = p + "mlp.experts.", vq + "mlp.experts."
                b[vex + "w13_weight"] = stack([cat(chunk_rows(w[ex + f"{e}.gate_proj.weight"], tpm, tpr),
                                                   chunk_rows(w[ex + f"{e}.up_proj.weight"], tpm, tpr)) for e in mine])
                b[vex + "w2_weight"] = stack([chunk_cols(w[ex + f"{e}.down_proj.weight"], tpm, tpr) for e in mine])
            else:
                b[vq + "mlp.gate_up_proj.weight"] = cat(chunk_rows(w[p + "mlp.gate_proj.weight"], TPI, tp),
                                                        chunk_rows(w[p + "mlp.up_proj.weight"], TPI, tp))
                b[vq + "mlp.down_proj.weight"] = chunk_cols(w[p + "mlp.down_proj.weight"], TPI, tp)
        return b

    per_dp = any(moe_layer(l) for l in range(L)) and C.get("EXPERTS", 0) != 0
    cache = {}
    for i in range(NI):
        tp, pp, dp = i % TPI, (i // TPI) % PPI, i // (TPI * PPI)
        k = (tp, pp, dp if per_dp else 0)
        if k not in cache:
            cache[k] = vllm_rank(tp, dp, pp)
        for n, x in cache[k].items():
            vl[(NT + i, n)] = x[1]
    return meg, vl, ck


def main(argv):
    path, defines, use_replay = None, {}, False
    it = iter(argv[1:])
    for a in it:
        if a == "-D":
            a = "-D" + next(it)
        if a.startswith("-D"):
            n, v = a[2:].split("=", 1)
            defines[n] = v
        elif a == "--replay-args":
            use_replay = True
        else:
            path = a
    if use_replay:
        with open(path) as f:
            lines = [ln for ln in f.read().splitlines() if ln.startswith("# replay-args:")]
        assert len(lines) == 1, "need exactly one replay-args line"
        toks = lines[0].split(":", 1)[1].split()
        rd = {}
        for i in range(0, len(toks), 2):
            assert toks[i] == "-D"
            n, v = toks[i + 1].split("=", 1)
            rd[n] = v
        rd.update(defines)
        defines = rd
    lay = Layout(path, defines)
    meg, vl, ck = reference(lay.consts)
    errors = []

    def err(msg):
        errors.append(msg)
        return len(errors) < 20

    src = layout_buffers(lay, "src")
    dst = layout_buffers(lay, "dst")
    # 1. source side: the layout's buffers are Megatron's, and name one consistent map tensor elem -> ckpt elem
    fwd, back = {}, {}
    for key in sorted(meg):
        if key not in src and any(x is not None for x in meg[key]):
            if not err(f"src: layout has no buffer {key[1]} on rank {key[0]} (Megatron has it)"):
                break
    for key in sorted(src):
        fill = src[key]
        if key not in meg:
            if not err(f"src: layout's buffer {key[1]} on rank {key[0]} does not exist in Megatron"):
                break
            continue
        ref = meg[key]
        if len(fill) != len(ref):
            if not err(f"src: {key[1]} on rank {key[0]}: layout size {len(fill)}, Megatron {len(ref)}"):
                break
            continue
        for pos, (t, h) in enumerate(zip(fill, ref)):
            if t is None or h is None:
                if t is not h:
                    err(f"src: {key[1]} on rank {key[0]}: element {pos} is "
                        + ("not described" if t is None else "padding but in a piece"))
                    break
            elif fwd.setdefault(t, h) != h or back.setdefault(h, t) != t:
                err(f"src: {key[1]} on rank {key[0]} element {pos}: inconsistent with another replica")
                break
        if len(errors) >= 20:
            break
    # 2. destination side: every real element of every vLLM buffer, exactly
    covered, seen = set(), {}
    for key in sorted(vl):
        ref = vl[key]
        if key not in dst:
            if any(x is not None for x in ref) and not err(f"dst: layout has no buffer {key[1]} on rank {key[0]}"):
                break
            continue
        fill = dst[key]
        if len(fill) != len(ref):
            if not err(f"dst: {key[1]} on rank {key[0]}: layout size {len(fill)}, vLLM {len(ref)}"):
                break
            continue
        mapped = seen.get(id(fill))
        if mapped is None:
            mapped = seen[id(fill)] = [None if t is None else fwd.get(t, -1) for t in fill]
            covered.update(ref)
        if mapped != ref:
            bad = sum(1 for m, h in zip(mapped, ref) if m != h)
            if not err(f"dst: {key[1]} on rank {key[0]}: {bad} of {len(ref)} elements wrong or missing"):
                break
    covered.discard(None)
    for key in sorted(dst):
        if key not in vl and not err(f"dst: layout's buffer {key[1]} on rank {key[0]} does not exist in vLLM"):
            break
    total = sum(len(x[1]) for x in ck.w.values())
    if not errors and len(covered) != total:
        err(f"only {len(covered)} of {total} checkpoint elements reach vLLM")
    for e in errors:
        print("layout_ref:", e)
    nb = sum(len(x[1]) for x in ck.w.values())
    print(f"layout_ref: {os.path.basename(path)}: {len(lay.tensors)} tensors, {len(lay.pieces)} pieces, "
          f"{len(meg)} Megatron and {len(vl)} vLLM buffers, {nb} checkpoint elements: "
          + ("MISMATCH" if errors else "all match"))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
