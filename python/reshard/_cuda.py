# _cuda.py - CUDA and NCCL handles from Python objects (streams, communicators, unique ids), ncclGetUniqueId from
# the NCCL that libreshard uses, and ordering a run after / before another stream with two CUDA events.
import ctypes
import os

from ._lib import ReshardError, lib, rsInvalidArgument, rsNotSupported, rsTransportError

NCCL_UNIQUE_ID_BYTES = 128


def stream_handle(stream):
    """cudaStream_t value of: None (0), an int, a ctypes.c_void_p, torch.cuda.Stream (.cuda_stream), a CuPy stream
    (.ptr) or any object with an integer .handle."""
    if stream is None:
        return 0
    if isinstance(stream, ctypes.c_void_p):
        return stream.value or 0
    if isinstance(stream, int) and not isinstance(stream, bool):
        return stream
    for attr in ("cuda_stream", "ptr", "handle"):
        v = getattr(stream, attr, None)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    raise TypeError("not a CUDA stream: %r (pass an int, torch.cuda.Stream or an object with .cuda_stream)" % (stream,))


def comm_handle(comm):
    """ncclComm_t value of: an int, a ctypes.c_void_p, or an object holding one in .comm (vLLM's
    PyNcclCommunicator) or .value."""
    if isinstance(comm, int) and not isinstance(comm, bool):
        return comm
    if isinstance(comm, ctypes.c_void_p):
        return comm.value or 0
    for attr in ("comm", "value"):
        v = getattr(comm, attr, None)
        if v is not None and v is not comm:
            return comm_handle(v)
    raise TypeError("not an NCCL communicator handle: %r" % (comm,))


def unique_id_bytes(uid):
    """The 128 bytes of an ncclUniqueId from bytes, bytearray, memoryview, a list of ints, or an object with
    .internal (NCCL's struct field name)."""
    if hasattr(uid, "internal"):
        uid = bytes(bytearray(uid.internal))
    if isinstance(uid, (list, tuple)):
        uid = bytes(bytearray(int(b) & 0xFF for b in uid))
    b = bytes(uid)
    if len(b) != NCCL_UNIQUE_ID_BYTES:
        raise ReshardError(rsInvalidArgument, "an ncclUniqueId is %d bytes, got %d" % (NCCL_UNIQUE_ID_BYTES, len(b)),
                           "nccl_from_id")
    return b


def _loaded(prefix):
    """Path of an already-loaded shared object whose file name starts with prefix (the copy libreshard uses)."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                p = line.split(None, 5)[-1].strip()
                if os.path.basename(p).startswith(prefix):
                    return p
    except OSError:
        pass
    return None


def nccl_unique_id():
    """A new ncclUniqueId (bytes) from the NCCL library libreshard is linked with. Call it on rank 0 and share
    the bytes with every rank (e.g. torch.distributed.broadcast_object_list)."""
    lib()  # loads libnccl as libreshard's dependency, when it has one
    path = _loaded("libnccl.so")
    if not path:
        raise ReshardError(rsNotSupported, "libreshard was built without NCCL (no libnccl loaded)", "nccl_unique_id")
    nccl = ctypes.CDLL(path)
    buf = ctypes.create_string_buffer(NCCL_UNIQUE_ID_BYTES)
    r = nccl.ncclGetUniqueId(buf)
    if r != 0:
        raise ReshardError(rsTransportError, "ncclGetUniqueId failed with ncclResult %d" % r, "nccl_unique_id")
    return buf.raw


class StreamJoin:
    """Orders an executor's run on stream E after the work queued on another stream S, and S's later work after
    the run: event on S -> E waits; run; event on E -> S waits (CUDA driver API, so any CUDA runtime copy in the
    process interoperates). Events are made once per executor."""

    def __init__(self):
        self._cu = None
        self._ev = None

    def _init(self):
        if self._cu is None:
            try:
                cu = ctypes.CDLL("libcuda.so.1")
            except OSError as e:
                raise ReshardError(rsNotSupported, "run(stream=...) needs the CUDA driver: %s" % e, "run")
            for n in ("cuEventCreate", "cuEventRecord", "cuStreamWaitEvent", "cuEventDestroy_v2"):
                getattr(cu, n).restype = ctypes.c_int
            cu.cuEventCreate.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint]
            cu.cuEventRecord.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
            cu.cuStreamWaitEvent.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint]
            cu.cuEventDestroy_v2.argtypes = [ctypes.c_void_p]
            ev = [ctypes.c_void_p(), ctypes.c_void_p()]
            for e in ev:
                self._ok(cu.cuEventCreate(ctypes.byref(e), 2), "cuEventCreate")  # CU_EVENT_DISABLE_TIMING
            self._cu, self._ev = cu, ev

    @staticmethod
    def _ok(r, what):
        if r != 0:
            raise ReshardError(rsTransportError, "%s failed with CUresult %d" % (what, r), "run")

    def before(self, other, mine):
        self._init()
        self._ok(self._cu.cuEventRecord(self._ev[0], other), "cuEventRecord")
        self._ok(self._cu.cuStreamWaitEvent(mine, self._ev[0], 0), "cuStreamWaitEvent")

    def after(self, mine, other):
        self._ok(self._cu.cuEventRecord(self._ev[1], mine), "cuEventRecord")
        self._ok(self._cu.cuStreamWaitEvent(other, self._ev[1], 0), "cuStreamWaitEvent")

    def close(self):
        if self._cu is not None:
            for e in self._ev:
                self._cu.cuEventDestroy_v2(e)
            self._cu = self._ev = None
