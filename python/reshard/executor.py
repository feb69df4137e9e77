# executor.py - one rank's executor: created on the NCCL transport (unique id or existing communicator) or on an
# in-process group (CPU threads, CUDA in one process); binds memory by name, runs the plan at every refit,
# synchronizes, aborts, reports statistics. Each call checks the library's result (ReshardError on failure).
import ctypes
import logging
from dataclasses import dataclass

from . import _cuda, _lib
from ._lib import (TRANSPORTS, ReshardError, check, make_config, rsBindingError, rsInProgress, rsInvalidArgument,
                   rsInvalidUsage, rsSuccess)
from ._memory import memory_of
from .plan import Plan, mismatch

log = logging.getLogger("reshard")


@dataclass(frozen=True)
class Stats:
    runs_started: int
    runs_completed: int        # successful runs: destinations updated
    destination_bytes: int     # bytes a run writes into this rank's destinations
    bytes_sent: tuple          # per run: (network, NVLink)
    bytes_received: tuple
    bytes_copied: int          # per run: pack + unpack + local copy bytes
    staging_bytes: int
    num_steps: tuple           # (NET steps, NVL steps)
    last_run_seconds: float    # in-process transports


class LocalGroup:
    """Ranks of one plan in this process: transport "cpu" (every rank a set of host threads, buffers in host
    memory) or "cuda" (every rank on a visible GPU). Each rank creates its executor from its own thread
    (creation is collective); close the group after every executor on it."""

    def __init__(self, nranks, transport="cpu", timeout_ms=None):
        if transport not in ("cpu", "cuda"):
            raise ValueError('LocalGroup transport is "cpu" or "cuda"; NCCL ranks use Executor.nccl*')
        self.nranks, self.transport = int(nranks), transport
        self.timeout_ms = timeout_ms
        cfg = make_config(timeout_ms=timeout_ms)
        h = ctypes.c_void_p()
        check(_lib.lib().rsGroupCreate(TRANSPORTS[transport], self.nranks, ctypes.byref(cfg), ctypes.byref(h)),
              "rsGroupCreate")
        self._h = h

    def executor(self, plan, rank, timeout_ms=None, **kw):
        """This rank's executor on the group (blocks until every rank of the group has called it)."""
        return Executor.local(plan, self, rank, timeout_ms=self.timeout_ms if timeout_ms is None else timeout_ms,
                              **kw)

    def close(self):
        """Free the group; refused (ReshardError) while executors on it are open."""
        h = getattr(self, "_h", None)
        if h and _lib._lib is not None:
            check(_lib._lib.rsGroupDestroy(h), "rsGroupDestroy")
        self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Executor:
    """One rank's executor. Make it with Executor.local (or LocalGroup.executor), Executor.nccl or
    Executor.nccl_from_id; bind every buffer (bind / bind_all); then run() at every refit."""

    def __init__(self, plan, rank, transport, handle, stream, keep=()):
        self.plan, self.rank, self.transport = plan, rank, transport
        self._h = handle
        self._stream = stream       # cudaStream_t value runs are ordered on (0 for the CPU transport)
        self._bound = {}            # index -> bound object (kept alive while bound)
        self._keep = keep           # objects the executor needs alive (group, staging)
        self._join = None
        log.info("rank %s: executor on the %s transport, %d buffers to bind", rank, transport, len(self.buffers))

    # ------------------------------------------------------------------ creation
    @staticmethod
    def _config(timeout_ms, stream, device, staging):
        smem = memory_of(staging) if staging is not None else None
        cfg = make_config(timeout_ms=timeout_ms, stream=_cuda.stream_handle(stream), device=device,
                          staging=smem.ptr if smem else None, staging_bytes=smem.nbytes if smem else 0)
        return cfg

    @classmethod
    def local(cls, plan, group, rank, timeout_ms=None, device=None, staging=None):
        """Executor of ``rank`` on an in-process LocalGroup (collective over the group)."""
        cfg = cls._config(timeout_ms if timeout_ms is not None else group.timeout_ms, None, device, staging)
        h = ctypes.c_void_p()
        check(_lib.lib().rsExecCreateLocal(plan.handle, group._h, int(rank), ctypes.byref(cfg), ctypes.byref(h)),
              "rsExecCreateLocal")
        x = cls(plan, int(rank), group.transport, h, 0, (group, staging))
        x._stream = x._get_stream()
        return x

    @classmethod
    def nccl(cls, plan, comm, stream=None, device=None, timeout_ms=None, staging=None):
        """Executor on an existing NCCL communicator spanning the plan's world (its rank i is plan rank i):
        ``comm`` is the ncclComm_t as an int, a ctypes.c_void_p or an object holding it in .comm (vLLM's
        PyNcclCommunicator). ``plan`` is loaded for this rank. Collective over the communicator. ``stream``: the
        CUDA stream runs are ordered on (int, torch.cuda.Stream, ...; None: the executor makes one)."""
        if plan.rank is None:
            raise ReshardError(rsInvalidArgument, "load the plan for this rank: Plan(path, rank)", "Executor.nccl")
        cfg = cls._config(timeout_ms, stream, device, staging)
        h = ctypes.c_void_p()
        check(_lib.lib().rsExecCreateNccl(plan.handle, ctypes.c_void_p(_cuda.comm_handle(comm)), ctypes.byref(cfg),
                                          ctypes.byref(h)), "rsExecCreateNccl")
        x = cls(plan, plan.rank, "nccl", h, 0, (comm, staging))
        x._stream = x._get_stream()
        return x

    @classmethod
    def nccl_from_id(cls, plan, unique_id, nranks, rank, stream=None, device=None, timeout_ms=None, staging=None):
        """Executor on a communicator the library makes (non-blocking ncclCommInitRankConfig) from ``unique_id``:
        the 128 bytes rank 0 got from nccl_unique_id() (or torch.cuda.nccl.unique_id()) and shared with every
        rank, e.g. with torch.distributed.broadcast_object_list. Collective over the nranks ranks; a rank that
        never joins fails the others with rsTimeout after ``timeout_ms``."""
        uid = ctypes.create_string_buffer(_cuda.unique_id_bytes(unique_id), _cuda.NCCL_UNIQUE_ID_BYTES)
        cfg = cls._config(timeout_ms, stream, device, staging)
        h = ctypes.c_void_p()
        check(_lib.lib().rsExecCreateNcclFromId(plan.handle, uid, int(nranks), int(rank), ctypes.byref(cfg),
                                                ctypes.byref(h)), "rsExecCreateNcclFromId")
        x = cls(plan, int(rank), "nccl", h, 0, (staging,))
        x._stream = x._get_stream()
        return x

    def _get_stream(self):
        s = ctypes.c_void_p()
        check(_lib.lib().rsExecGetStream(self.handle, ctypes.byref(s)), "rsExecGetStream")
        return s.value or 0

    # ------------------------------------------------------------------ state
    @property
    def handle(self):
        if not self._h:
            raise ReshardError(rsInvalidUsage, "the executor is closed", "Executor")
        return self._h

    @property
    def stream(self):
        """The cudaStream_t (int) runs are ordered on; 0 for the CPU transport."""
        return self._stream

    @property
    def buffers(self):
        """The buffers this rank binds (list of BufferInfo)."""
        return self.plan.buffers(self.rank)

    @property
    def unbound(self):
        """Buffers not bound yet (list of BufferInfo)."""
        return [b for b in self.buffers if b.index not in self._bound]

    def _resolve(self, key, side):
        if isinstance(key, int) and not isinstance(key, bool):
            bufs = self.buffers
            if not 0 <= key < len(bufs):
                raise ReshardError(rsInvalidArgument, "rank %d: buffer index %d outside 0..%d" % (
                    self.rank, key, len(bufs)), "bind")
            return bufs[key]
        hits = [b for b in self.buffers if b.name == key and (side is None or b.side == side)]
        if len(hits) == 1:
            return hits[0]
        return None  # unknown or ambiguous: the library says which, in its own words

    # ------------------------------------------------------------------ binding
    def bind(self, key, obj, nbytes=None, side=None, check_dtype=True):
        """Bind ``obj`` as the buffer named ``key`` (or of index ``key``): a torch tensor (its data_ptr(),
        element_size() * numel() bytes), a numpy array, an object with __array_interface__ or
        __cuda_array_interface__, a writable buffer, or an integer pointer with ``nbytes``. ``side`` picks
        between a source and a destination of the same name on this rank. The size must be the plan's exactly;
        the object is kept alive while bound."""
        b = self._resolve(key, side)
        try:
            mem = memory_of(obj, nbytes)
        except ValueError as e:
            raise ReshardError(rsBindingError, "rank %d: buffer %r: %s" % (self.rank, key, e), "bind") from None
        want = "cuda" if self.transport != "cpu" else "cpu"
        if mem.device and mem.device != want:
            raise ReshardError(rsBindingError, "rank %d: %s is %s memory; the %s transport needs %s memory" % (
                self.rank, mem.what, mem.device, self.transport, want), "bind")
        if b is not None:
            why = mismatch(b, mem, check_dtype)
            if why and mem.nbytes == b.nbytes:  # sizes are the library's to check (and word)
                raise ReshardError(rsBindingError, 'rank %d: buffer "%s": %s' % (self.rank, b.name, why), "bind")
            check(_lib.lib().rsExecBindIndex(self.handle, b.index, ctypes.c_void_p(mem.ptr), mem.nbytes),
                  "rsExecBindIndex")
        else:
            if not isinstance(key, str):
                raise TypeError("buffer key must be a name or an index")
            if side is not None:
                raise ReshardError(rsBindingError, 'rank %d: no %s buffer "%s" on this rank' % (self.rank, side, key),
                                   "bind")
            check(_lib.lib().rsExecBind(self.handle, key.encode(), ctypes.c_void_p(mem.ptr), mem.nbytes),
                  "rsExecBind")
            b = self._resolve(key, None)
        self._bound[b.index] = obj
        return b

    def bind_all(self, tensors, side=None, allow_unknown=False, check_dtype=True):
        """Bind every buffer of this rank (of ``side`` if given) from a name -> object map (e.g. from
        named_tensors(model.named_parameters(), rename)). Checks everything first and raises one ReshardError
        listing every missing name, unknown name (unless allow_unknown) and wrong-sized object, with the
        closest names; binds nothing then. Returns the Match (pairs, unknown names)."""
        m = self.plan.match(tensors, self.rank, side, check_dtype)
        if allow_unknown:
            m.unknown = []
        m.raise_if_bad()
        for b, obj in m.pairs:
            self.bind(b.index, obj, check_dtype=check_dtype)
        log.info("rank %s: bound %d %sbuffers (%d bytes)%s", self.rank, len(m.pairs), side + " " if side else "",
                 sum(b.nbytes for b, _ in m.pairs), "; %d unbound left" % len(self.unbound) if self.unbound else "")
        return m

    def unbind(self, name):
        """Forget a binding (to bind new memory); not while a run is in progress."""
        check(_lib.lib().rsExecUnbind(self.handle, name.encode()), "rsExecUnbind")
        for i, b in enumerate(self.buffers):
            if b.name == name:
                self._bound.pop(i, None)

    # ------------------------------------------------------------------ running
    def run(self, stream=None):
        """Start one replay (asynchronous). NCCL: queued on the executor's stream (the ``stream`` given at
        creation). Passing another CUDA stream here orders the run after the work already queued on it and that
        stream's later work after the run (two CUDA events). In-process transports start the rank's threads:
        call synchronize() before reading destinations or running again."""
        s = _cuda.stream_handle(stream)
        if s and self.transport == "cpu":
            raise ReshardError(rsInvalidArgument, "the CPU transport has no CUDA stream", "run")
        if s and s != self._stream:
            if self.transport != "nccl":
                raise ReshardError(rsInvalidArgument, "an in-process CUDA group runs on its own streams; call "
                                   "synchronize() instead of passing a stream", "run")
            if self._join is None:
                self._join = _cuda.StreamJoin()
            self._join.before(s, self._stream)
            check(_lib.lib().rsExecRun(self.handle), "rsExecRun")
            self._join.after(self._stream, s)
            return
        check(_lib.lib().rsExecRun(self.handle), "rsExecRun")

    def query(self):
        """True when the last run has completed, False while it runs; raises the run's error."""
        return check(_lib.lib().rsExecQuery(self.handle), "rsExecQuery", (rsSuccess, rsInProgress)) == rsSuccess

    def synchronize(self):
        """Wait for the last run (bounded by timeout_ms). On error the destinations are not updated and the
        executor only accepts close()."""
        check(_lib.lib().rsExecSynchronize(self.handle), "rsExecSynchronize")

    def abort(self):
        """Stop the run now, from any thread: every rank of the group / communicator fails with rsAborted."""
        check(_lib.lib().rsExecAbort(self.handle), "rsExecAbort")

    def stats(self):
        s = _lib.ExecStatsC()
        check(_lib.lib().rsExecGetStats(self.handle, ctypes.byref(s)), "rsExecGetStats")
        return Stats(s.runsStarted, s.runsCompleted, s.destinationBytes, tuple(s.bytesSent), tuple(s.bytesReceived),
                     s.bytesCopied, s.stagingBytes, tuple(s.numSteps), s.lastRunSeconds)

    def close(self):
        """Wait for a run in progress (bounded, then abort it) and free the executor."""
        h, self._h = getattr(self, "_h", None), None
        if self._join is not None:
            self._join.close()
            self._join = None
        if h and _lib._lib is not None:
            self._bound.clear()
            check(_lib._lib.rsExecDestroy(h), "rsExecDestroy")

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
            return
        try:  # an exception is on its way: the other ranks fail now instead of waiting, and it stays the error
            if self._h:
                self.abort()
            self.close()
        except ReshardError:
            pass

    def __repr__(self):
        return "<reshard.Executor rank %s on %s, %d of %d buffers bound>" % (
            self.rank, self.transport, len(self._bound), len(self.buffers))


def load(path, rank=None):
    """Load a plan file for ``rank`` (None: every rank)."""
    return Plan(path, rank)
