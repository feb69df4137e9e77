# plan.py - a loaded plan (one rank's program, or every rank's): its info, the buffers a rank binds, its
# staging size, and matching a name -> tensor map against those buffers (missing / unknown / wrong size).
import ctypes
import difflib
import os
from dataclasses import dataclass

from . import _lib
from ._lib import RS_ALL_RANKS, ReshardError, check, rsBindingError, rsInvalidArgument
from ._memory import DTYPE_SIZE, NUMPY_DTYPE, memory_of


@dataclass(frozen=True)
class PlanInfo:
    world_size: int
    rank: int               # the loaded rank, or -1 (every rank)
    num_domains: int
    format_version: tuple
    fingerprint: int        # equal on every rank of one refit
    source_fingerprint: int


@dataclass(frozen=True)
class BufferInfo:
    index: int              # rsExecBindIndex order
    name: str               # the layout's `as "..."` name
    side: str               # "source" or "destination"
    dtype: str              # "bf16", "fp32", ...
    shape: tuple            # on this rank, in elements
    nbytes: int             # exact size to bind

    @property
    def is_source(self):
        return self.side == "source"

    @property
    def itemsize(self):
        return DTYPE_SIZE.get(self.dtype, 0)

    @property
    def numpy_dtype(self):
        """numpy dtype name holding this dtype bit for bit ("uint16" for bf16, "uint8" for fp8)."""
        return NUMPY_DTYPE[self.dtype]

    def __str__(self):
        return '"%s" (%s %s %s, %d bytes)' % (self.name, self.side, self.dtype, list(self.shape), self.nbytes)


class Plan:
    """A plan file (from `reshardc LAYOUT -o plan.bin`) loaded for one rank (what a worker does) or for every rank
    (rank=None: in-process transports, tools). ``source`` is a path or the file's bytes."""

    def __init__(self, source, rank=None):
        L = _lib.lib()
        h = ctypes.c_void_p()
        r = RS_ALL_RANKS if rank is None else int(rank)
        if isinstance(source, (bytes, bytearray, memoryview)):
            data = bytes(source)
            check(L.rsPlanLoadMemory(data, len(data), r, ctypes.byref(h)), "rsPlanLoadMemory")
            self.path = None
        else:
            self.path = os.fspath(source)
            check(L.rsPlanLoad(os.fsencode(self.path), r, ctypes.byref(h)), "rsPlanLoad")
        self._h = h
        info = _lib.PlanInfoC()
        check(L.rsPlanGetInfo(h, ctypes.byref(info)), "rsPlanGetInfo")
        self.info = PlanInfo(info.worldSize, info.rank, info.numDomains, (info.formatMajor, info.formatMinor),
                             info.fingerprint, info.sourceFingerprint)
        self._buffers = {}

    # ------------------------------------------------------------------ basics
    @property
    def handle(self):
        if not self._h:
            raise ReshardError(rsInvalidArgument, "the plan is closed", "Plan")
        return self._h

    @property
    def world_size(self):
        return self.info.world_size

    @property
    def rank(self):
        """The loaded rank, or None when every rank was loaded."""
        return None if self.info.rank == RS_ALL_RANKS else self.info.rank

    @property
    def fingerprint(self):
        return self.info.fingerprint

    def _rank(self, rank):
        if rank is None:
            if self.rank is None:
                raise ReshardError(rsInvalidArgument, "this plan holds every rank: say which (rank=...)", "Plan")
            return self.rank
        return int(rank)

    def buffers(self, rank=None):
        """The buffers ``rank`` (default: the loaded rank) binds, in index order: list of BufferInfo."""
        r = self._rank(rank)
        if r not in self._buffers:
            L = _lib.lib()
            n = ctypes.c_int(0)
            check(L.rsPlanBufferCount(self.handle, r, ctypes.byref(n)), "rsPlanBufferCount")
            out = []
            for i in range(n.value):
                b = _lib.BufferInfoC()
                check(L.rsPlanGetBuffer(self.handle, r, i, ctypes.byref(b)), "rsPlanGetBuffer")
                out.append(BufferInfo(i, b.name.decode(), "destination" if b.side else "source", b.dtype.decode(),
                                      tuple(b.shape[d] for d in range(b.ndim)), int(b.bytes)))
            self._buffers[r] = out
        return list(self._buffers[r])

    def staging_bytes(self, rank=None):
        n = ctypes.c_size_t(0)
        check(_lib.lib().rsPlanStagingBytes(self.handle, self._rank(rank), ctypes.byref(n)), "rsPlanStagingBytes")
        return n.value

    def close(self):
        """Release the plan (executors made from it keep what they need)."""
        h, self._h = getattr(self, "_h", None), None
        if h and _lib._lib is not None:
            _lib._lib.rsPlanDestroy(h)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "<reshard.Plan %s: %d ranks, rank %s, fingerprint %016x>" % (
            self.path or "(memory)", self.world_size, "all" if self.rank is None else self.rank, self.fingerprint)

    # ------------------------------------------------------------------ names
    def match(self, tensors, rank=None, side=None, check_dtype=True):
        """Match a name -> object map (e.g. from named_tensors()) against the buffers ``rank`` binds, restricted
        to ``side`` ("source" / "destination") if given. Returns a Match: .pairs [(BufferInfo, obj)], .missing
        (buffers without an object), .unknown (names that are not buffers of this rank and side), .wrong
        (objects of the wrong size or element size, with the reason). Binds nothing."""
        if side not in (None, "source", "destination"):
            raise ValueError('side must be None, "source" or "destination"')
        r = self._rank(rank)
        bufs = [b for b in self.buffers(r) if side is None or b.side == side]
        by_name = {}
        for b in bufs:
            by_name.setdefault(b.name, []).append(b)
        items = dict(tensors.items() if hasattr(tensors, "items") else tensors)
        m = Match(r, side)
        for name, bs in by_name.items():
            if len(bs) > 1:
                m.ambiguous.append(name)
                continue
            b = bs[0]
            if name not in items:
                m.missing.append(b)
                continue
            obj = items[name]
            try:
                mem = memory_of(obj)
            except (TypeError, ValueError) as e:
                m.wrong.append((b, str(e)))
                continue
            why = mismatch(b, mem, check_dtype)
            if why:
                m.wrong.append((b, why))
            else:
                m.pairs.append((b, obj))
        m.unknown = sorted(n for n in items if n not in by_name)
        m.known = sorted({b.name for b in self.buffers(r)})
        return m


def mismatch(b, mem, check_dtype=True):
    """Why memory ``mem`` cannot be bound as buffer ``b`` (None when it can): size, element size, dtype,
    read-only destination."""
    if mem.nbytes != b.nbytes:
        return "the plan wants %d bytes (%s %s), got %s" % (b.nbytes, b.dtype, list(b.shape), mem.describe())
    if mem.itemsize and b.itemsize and mem.itemsize != b.itemsize:
        return "the plan's dtype is %s (%d-byte elements), got %d-byte elements: %s" % (
            b.dtype, b.itemsize, mem.itemsize, mem.what)
    if check_dtype and mem.dtype and mem.dtype != b.dtype:
        return "the plan's dtype is %s, got %s (check_dtype=False to bind anyway)" % (b.dtype, mem.what)
    if not b.is_source and not mem.writable:
        return "destination memory is read-only: %s" % mem.what
    return None


def _n(n, word):
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


class Match:
    """Result of Plan.match(): what binds, what is missing, unknown, or wrong."""

    def __init__(self, rank, side):
        self.rank, self.side = rank, side
        self.pairs, self.missing, self.unknown, self.wrong, self.ambiguous, self.known = [], [], [], [], [], []

    @property
    def ok(self):
        return not (self.missing or self.unknown or self.wrong or self.ambiguous)

    def report(self, limit=20):
        """A readable account of every problem (empty string when there is none)."""
        what = "%s buffer" % self.side if self.side else "buffer"
        lines = []

        def cut(items):
            return items[:limit], (["  ... and %d more" % (len(items) - limit)] if len(items) > limit else [])

        if self.missing:
            lines.append("rank %d: %s of the plan without a tensor:" % (self.rank, _n(len(self.missing), what)))
            shown, more = cut(self.missing)
            for b in shown:
                near = difflib.get_close_matches(b.name, self.unknown, 1, 0.75)
                lines.append("  missing %s%s" % (b, '; closest unbound name given: "%s"' % near[0] if near else ""))
            lines += more
        if self.unknown:
            lines.append("rank %d: %s given that this rank does not bind as %s (rename them, or map them to None "
                         "to leave them out):" % (self.rank, _n(len(self.unknown), "name"), what))
            shown, more = cut(self.unknown)
            for n in shown:
                near = difflib.get_close_matches(n, self.known, 1, 0.75)
                lines.append('  unknown "%s"%s' % (n, '; closest buffer: "%s"' % near[0] if near else ""))
            lines += more
        if self.wrong:
            lines.append("rank %d: %s not fitting the buffer:" % (self.rank, _n(len(self.wrong), "tensor")))
            shown, more = cut(self.wrong)
            for b, why in shown:
                lines.append('  wrong   "%s": %s' % (b.name, why))
            lines += more
        for n in self.ambiguous:
            lines.append('rank %d: "%s" is both a source and a destination here: match each side separately '
                         '(side="source" / side="destination")' % (self.rank, n))
        return "\n".join(lines)

    def raise_if_bad(self):
        if not self.ok:
            e = ReshardError(rsBindingError, self.report(), "bind_all")
            e.missing, e.unknown, e.wrong = [b.name for b in self.missing], list(self.unknown), \
                [b.name for b, _ in self.wrong]
            raise e
