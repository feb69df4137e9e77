# _lib.py - finds and loads libreshard (ctypes), declares the C API's structs and prototypes (reshard.h), and
# turns failing results into ReshardError carrying the library's message (rsGetLastError).
import ctypes
import ctypes.util
import glob
import os
import threading

# Must match reshard.h.
RESHARD_MAJOR, RESHARD_MINOR = 0, 1
RS_CONFIG_VERSION = 1
RS_ALL_RANKS = -1
RS_DEFAULT_TIMEOUT_MS = 300000

RESULT_NAMES = (
    "rsSuccess", "rsInvalidArgument", "rsInvalidUsage", "rsPlanInvalid", "rsBindingError", "rsMismatch",
    "rsTimeout", "rsAborted", "rsRemoteError", "rsTransportError", "rsSystemError", "rsNotSupported",
    "rsInProgress", "rsInternalError",
)
(rsSuccess, rsInvalidArgument, rsInvalidUsage, rsPlanInvalid, rsBindingError, rsMismatch, rsTimeout, rsAborted,
 rsRemoteError, rsTransportError, rsSystemError, rsNotSupported, rsInProgress, rsInternalError) = range(14)

TRANSPORTS = {"cpu": 0, "cuda": 1, "nccl": 2}


class ReshardError(RuntimeError):
    """A reshard call failed. ``code`` is the rsResult_t value, ``name`` its name (``"rsBindingError"``),
    ``message`` the library's detail (rsGetLastError) or the Python layer's, ``call`` the failing function."""

    def __init__(self, code, message, call=None):
        self.code = int(code)
        self.name = RESULT_NAMES[self.code] if 0 <= self.code < len(RESULT_NAMES) else "rs?%d" % self.code
        self.message = message
        self.call = call
        text = error_string(self.code)
        if message and call and message.startswith(call + ":"):  # the library's messages often name the call
            message = message[len(call) + 1:].lstrip()
        head = "%s: %s" % (call, text) if call else text
        super().__init__("%s: %s" % (head, message) if message else head)


def error_string(code):
    """Static text of a result code (rsGetErrorString), without needing the library for the common ones."""
    if _lib is not None:
        return _lib.rsGetErrorString(int(code)).decode()
    return RESULT_NAMES[code] if 0 <= code < len(RESULT_NAMES) else "unknown result code"  # not loaded (yet)


# ---------------------------------------------------------------------------------------------- structs
class Config(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("version", ctypes.c_uint), ("timeoutMs", ctypes.c_int),
                ("stream", ctypes.c_void_p), ("device", ctypes.c_int), ("staging", ctypes.c_void_p),
                ("stagingBytes", ctypes.c_size_t)]


def make_config(timeout_ms=None, stream=None, device=None, staging=None, staging_bytes=0):
    c = Config()
    c.size = ctypes.sizeof(Config)
    c.version = RS_CONFIG_VERSION
    c.timeoutMs = RS_DEFAULT_TIMEOUT_MS if timeout_ms is None else int(timeout_ms)
    c.stream = stream or None
    c.device = -1 if device is None else int(device)
    c.staging = staging or None
    c.stagingBytes = int(staging_bytes)
    return c


class PlanInfoC(ctypes.Structure):
    _fields_ = [("worldSize", ctypes.c_int), ("rank", ctypes.c_int), ("numDomains", ctypes.c_int),
                ("formatMajor", ctypes.c_int), ("formatMinor", ctypes.c_int), ("fingerprint", ctypes.c_uint64),
                ("sourceFingerprint", ctypes.c_uint64)]


class BufferInfoC(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("side", ctypes.c_int), ("dtype", ctypes.c_char_p),
                ("ndim", ctypes.c_int), ("shape", ctypes.c_int64 * 8), ("bytes", ctypes.c_size_t)]


class ExecStatsC(ctypes.Structure):
    _fields_ = [("runsStarted", ctypes.c_uint64), ("runsCompleted", ctypes.c_uint64),
                ("destinationBytes", ctypes.c_uint64), ("bytesSent", ctypes.c_uint64 * 2),
                ("bytesReceived", ctypes.c_uint64 * 2), ("bytesCopied", ctypes.c_uint64),
                ("stagingBytes", ctypes.c_uint64), ("numSteps", ctypes.c_int * 2), ("lastRunSeconds", ctypes.c_double)]


_P = ctypes.c_void_p
_PP = ctypes.POINTER(ctypes.c_void_p)
_I = ctypes.c_int
_PROTOS = {
    "rsGetErrorString": (ctypes.c_char_p, [_I]),
    "rsGetLastError": (ctypes.c_char_p, []),
    "rsGetVersion": (_I, [ctypes.POINTER(_I)]),
    "rsPlanLoad": (_I, [ctypes.c_char_p, _I, _PP]),
    "rsPlanLoadMemory": (_I, [ctypes.c_void_p, ctypes.c_size_t, _I, _PP]),
    "rsPlanDestroy": (_I, [_P]),
    "rsPlanGetInfo": (_I, [_P, ctypes.POINTER(PlanInfoC)]),
    "rsPlanBufferCount": (_I, [_P, _I, ctypes.POINTER(_I)]),
    "rsPlanGetBuffer": (_I, [_P, _I, _I, ctypes.POINTER(BufferInfoC)]),
    "rsPlanStagingBytes": (_I, [_P, _I, ctypes.POINTER(ctypes.c_size_t)]),
    "rsTransportAvailable": (_I, [_I, ctypes.POINTER(_I)]),
    "rsGroupCreate": (_I, [_I, _I, ctypes.POINTER(Config), _PP]),
    "rsGroupDestroy": (_I, [_P]),
    "rsExecCreateLocal": (_I, [_P, _P, _I, ctypes.POINTER(Config), _PP]),
    "rsExecCreateNccl": (_I, [_P, _P, ctypes.POINTER(Config), _PP]),
    "rsExecCreateNcclFromId": (_I, [_P, ctypes.c_void_p, _I, _I, ctypes.POINTER(Config), _PP]),
    "rsExecBind": (_I, [_P, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]),
    "rsExecBindIndex": (_I, [_P, _I, ctypes.c_void_p, ctypes.c_size_t]),
    "rsExecUnbind": (_I, [_P, ctypes.c_char_p]),
    "rsExecRun": (_I, [_P]),
    "rsExecQuery": (_I, [_P]),
    "rsExecSynchronize": (_I, [_P]),
    "rsExecAbort": (_I, [_P]),
    "rsExecDestroy": (_I, [_P]),
    "rsExecGetStats": (_I, [_P, ctypes.POINTER(ExecStatsC)]),
    "rsExecGetStream": (_I, [_P, _PP]),
}

LIBNAMES = ("libreshard.so.%d" % RESHARD_MAJOR, "libreshard.so")


# ---------------------------------------------------------------------------------------------- lookup
def _sanitized_build(builddir):
    """A build made with sanitizers: its library cannot be loaded into a plain Python."""
    try:
        with open(os.path.join(builddir, "CMakeCache.txt"), errors="replace") as f:
            for line in f:
                if line.startswith("RESHARD_SANITIZE:BOOL=ON") or (
                        line.startswith("CMAKE_C_FLAGS:") and "-fsanitize" in line):
                    return True
    except OSError:
        pass
    return False


def candidates():
    """Where libreshard is looked for, in order: [(origin, path or name)]. RESHARD_LIBRARY, when set, is the
    only candidate. Then next to the package (a copy inside it, or the installed libdir recorded by
    `cmake --install` in _install.py), then the source tree's build directories (build/ first, then the most
    recently built build*/ that is not a sanitizer build), then the system's library path."""
    env = os.environ.get("RESHARD_LIBRARY")
    if env:
        return [("RESHARD_LIBRARY", env)]
    out = []
    here = os.path.dirname(os.path.abspath(__file__))
    for n in LIBNAMES:
        out.append(("package", os.path.join(here, n)))
    try:
        from . import _install  # written by cmake --install
        libdir = os.path.normpath(os.path.join(here, _install.LIBDIR))
        for n in LIBNAMES:
            out.append(("installed", os.path.join(libdir, n)))
    except ImportError:
        pass
    root = os.path.dirname(os.path.dirname(here))
    if os.path.exists(os.path.join(root, "runtime", "include", "reshard.h")):
        builds = []
        for d in glob.glob(os.path.join(root, "build*")):
            lib = os.path.join(d, "runtime", "libreshard.so")
            if os.path.exists(lib) and not _sanitized_build(d):
                builds.append((os.path.basename(d) != "build", -os.path.getmtime(lib), lib))
        for _, _, lib in sorted(builds):
            out.append(("build tree", lib))
    found = ctypes.util.find_library("reshard")
    out.append(("system", found or LIBNAMES[0]))
    return out


_lock = threading.RLock()
_lib = None
_lib_path = None


def _load():
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for origin, path in candidates():
            if os.sep in path and not os.path.exists(path):
                tried.append("%s (%s): not there" % (path, origin))
                continue
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                tried.append("%s (%s): %s" % (path, origin, e))
                if origin == "RESHARD_LIBRARY":
                    break
                continue
            for name, (res, args) in _PROTOS.items():
                f = getattr(lib, name)
                f.restype, f.argtypes = res, args
            v = ctypes.c_int(0)
            lib.rsGetVersion(ctypes.byref(v))
            major, minor = v.value // 10000, v.value // 100 % 100
            if (major, minor) != (RESHARD_MAJOR, RESHARD_MINOR):
                raise ReshardError(rsNotSupported, "%s is libreshard %d.%d.%d; this Python package needs %d.%d.x" % (
                    path, major, minor, v.value % 100, RESHARD_MAJOR, RESHARD_MINOR), "load")
            _lib, _lib_path = lib, getattr(lib, "_name", path)
            return _lib
        raise ReshardError(rsNotSupported, "cannot load libreshard; set RESHARD_LIBRARY to its path. Tried:\n  " +
                           "\n  ".join(tried), "load")


def lib():
    """The loaded libreshard (ctypes.CDLL), loading it on first use."""
    return _load()


def library_path():
    """The path (or name) libreshard was loaded from."""
    _load()
    return os.path.abspath(_lib_path) if os.sep in _lib_path else _lib_path


def check(res, call, ok=(rsSuccess,)):
    """Raise ReshardError for a failed call, with this thread's rsGetLastError()."""
    if res in ok:
        return res
    msg = _lib.rsGetLastError()
    raise ReshardError(res, msg.decode(errors="replace") if msg else "", call)


def version():
    """Version of the loaded library as (major, minor, patch)."""
    v = ctypes.c_int(0)
    check(lib().rsGetVersion(ctypes.byref(v)), "rsGetVersion")
    return (v.value // 10000, v.value // 100 % 100, v.value % 100)
