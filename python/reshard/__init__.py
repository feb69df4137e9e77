# reshard - Python binding of libreshard (ctypes, no compile step): load a plan for a rank, bind the rank's
# weight buffers (torch tensors, numpy arrays, raw pointers), replay the plan at every refit on NCCL, or on CPU
# threads for tests. See docs/integration.md.
"""Replay reshard weight-transfer plans from Python.

    plan = reshard.Plan("plan.bin", rank)
    x = reshard.Executor.nccl_from_id(plan, uid, world, rank, stream=torch.cuda.current_stream())
    x.bind_all(reshard.named_tensors(model.named_parameters(), rename))
    x.run()          # every refit

Errors raise ReshardError carrying the library's message (rsGetLastError). The library is found through
RESHARD_LIBRARY, then next to this package, then the source tree's build directories, then the system.
"""
from ._cuda import NCCL_UNIQUE_ID_BYTES, nccl_unique_id
from ._lib import (RESULT_NAMES, ReshardError, error_string, library_path, rsAborted, rsBindingError, rsInProgress,
                   rsInternalError, rsInvalidArgument, rsInvalidUsage, rsMismatch, rsNotSupported, rsPlanInvalid,
                   rsRemoteError, rsSuccess, rsSystemError, rsTimeout, rsTransportError)
from ._lib import version as library_version
from ._memory import DTYPE_SIZE, NUMPY_DTYPE
from .executor import Executor, LocalGroup, Stats, load
from .names import named_tensors, regex_rename
from .plan import BufferInfo, Match, Plan, PlanInfo
from .threads import RankError, run_threads

__version__ = "0.1.0"


def transport_available(transport):
    """Whether a transport ("cpu", "cuda", "nccl") is built into the library and usable here."""
    import ctypes
    from . import _lib
    v = ctypes.c_int(0)
    _lib.check(_lib.lib().rsTransportAvailable(_lib.TRANSPORTS[transport], ctypes.byref(v)), "rsTransportAvailable")
    return bool(v.value)


__all__ = [
    "BufferInfo", "DTYPE_SIZE", "Executor", "LocalGroup", "Match", "NCCL_UNIQUE_ID_BYTES", "NUMPY_DTYPE", "Plan",
    "PlanInfo", "RESULT_NAMES", "RankError", "ReshardError", "Stats", "error_string", "library_path",
    "library_version", "load", "named_tensors", "nccl_unique_id", "regex_rename", "run_threads",
    "transport_available", "rsSuccess", "rsInvalidArgument", "rsInvalidUsage", "rsPlanInvalid", "rsBindingError",
    "rsMismatch", "rsTimeout", "rsAborted", "rsRemoteError", "rsTransportError", "rsSystemError", "rsNotSupported",
    "rsInProgress", "rsInternalError",
]
