# _memory.py - what can be bound: the address, byte size, element size, device and writability of a torch
# tensor, a numpy (or any __array_interface__ / __cuda_array_interface__) array, a writable Python buffer, or a
# raw integer pointer with an explicit size.
import ctypes
from dataclasses import dataclass

# Element sizes of the layout dtypes (reshard.h rsBufferInfo_t.dtype).
DTYPE_SIZE = {"bf16": 2, "fp16": 2, "fp32": 4, "fp64": 8, "fp8e4m3": 1, "fp8e5m2": 1, "int8": 1, "uint8": 1,
              "int16": 2, "int32": 4, "int64": 8, "bool": 1}
# numpy dtype that holds each layout dtype bit for bit (no bf16 / fp8 in numpy: same-size integers).
NUMPY_DTYPE = {"bf16": "uint16", "fp16": "float16", "fp32": "float32", "fp64": "float64", "fp8e4m3": "uint8",
               "fp8e5m2": "uint8", "int8": "int8", "uint8": "uint8", "int16": "int16", "int32": "int32",
               "int64": "int64", "bool": "bool"}
# torch dtype names (str(tensor.dtype) without "torch.") of each layout dtype.
TORCH_DTYPE = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32",
               "float64": "fp64", "double": "fp64", "float8_e4m3fn": "fp8e4m3", "float8_e5m2": "fp8e5m2",
               "int8": "int8", "uint8": "uint8", "int16": "int16", "int32": "int32", "int64": "int64", "bool": "bool"}


@dataclass
class Memory:
    ptr: int
    nbytes: int
    itemsize: int = 0      # 0: unknown (raw pointer, bytes-like)
    dtype: str = ""        # layout dtype name when the object says exactly (torch), else ""
    device: str = ""       # "cpu", "cuda" or "" (unknown)
    writable: bool = True
    what: str = ""         # short description for messages

    def describe(self):
        return "%s (%d bytes)" % (self.what, self.nbytes)


def _c_contiguous(shape, strides, itemsize):
    if strides is None:
        return True
    expect = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expect:
            return False
        expect *= n
    return True


def _typestr_size(typestr):
    try:
        return int(typestr[2:])
    except (TypeError, ValueError):
        return 0


def _from_interface(ai, device, kind):
    shape = tuple(ai.get("shape", ()))
    itemsize = _typestr_size(ai.get("typestr", ""))
    n = 1
    for d in shape:
        n *= d
    ptr, readonly = ai["data"][0] or 0, bool(ai["data"][1])
    if not _c_contiguous(shape, ai.get("strides"), itemsize):
        raise ValueError("%s of shape %s is not contiguous (row-major): bind a contiguous copy or view" % (kind, shape))
    return Memory(ptr, n * itemsize, itemsize, "", device, not readonly, "%s %s %s" % (kind, ai.get("typestr"), list(shape)))


def memory_of(obj, nbytes=None):
    """Describe obj as bindable memory. Raises ValueError / TypeError with a clear message when it cannot be
    bound (non-contiguous, unknown type, missing size for a raw pointer)."""
    # raw pointers: int, ctypes.c_void_p, (ptr, nbytes)
    if isinstance(obj, tuple) and len(obj) == 2 and all(isinstance(v, int) for v in obj):
        obj, nbytes = obj
    if isinstance(obj, ctypes.c_void_p):
        obj = obj.value or 0
    if isinstance(obj, int) and not isinstance(obj, bool):
        if nbytes is None:
            raise TypeError("a raw pointer needs its size: bind(name, ptr, nbytes=...)")
        return Memory(int(obj), int(nbytes), what="pointer")
    m = None
    if callable(getattr(obj, "data_ptr", None)) and callable(getattr(obj, "element_size", None)):  # torch
        if callable(getattr(obj, "is_contiguous", None)) and not obj.is_contiguous():
            raise ValueError("tensor of shape %s is not contiguous: bind a contiguous tensor (the parameter itself, "
                             "not a transposed or sliced view)" % (tuple(obj.shape),))
        dev = getattr(getattr(obj, "device", None), "type", "")
        dt = str(getattr(obj, "dtype", "")).replace("torch.", "")
        es, n = int(obj.element_size()), int(obj.numel())
        m = Memory(int(obj.data_ptr()), es * n, es, TORCH_DTYPE.get(dt, ""), "cuda" if dev == "cuda" else dev,
                   True, "tensor %s%s on %s" % (dt, list(obj.shape), getattr(obj, "device", "?")))
    elif hasattr(obj, "__cuda_array_interface__"):
        m = _from_interface(obj.__cuda_array_interface__, "cuda", "CUDA array")
    elif hasattr(obj, "__array_interface__"):
        m = _from_interface(obj.__array_interface__, "cpu", "array")
    elif isinstance(obj, bytes):
        m = Memory(ctypes.cast(ctypes.c_char_p(obj), ctypes.c_void_p).value or 0, len(obj), 0, "", "cpu", False,
                   "bytes")
    else:
        try:
            mv = memoryview(obj)
        except TypeError:
            raise TypeError("cannot bind %s: pass a torch tensor, a numpy array, an object with "
                            "__array_interface__ or __cuda_array_interface__, a writable buffer, or an integer "
                            "pointer with nbytes" % type(obj).__name__) from None
        if not mv.c_contiguous:
            raise ValueError("buffer is not contiguous")
        if mv.readonly:
            raise ValueError("read-only %s: bind a writable buffer (bytearray, numpy array) or bytes" %
                             type(obj).__name__)
        addr = ctypes.addressof(ctypes.c_char.from_buffer(mv)) if mv.nbytes else 0
        untyped = mv.format in ("B", "b", "c")  # bytes: no element size to check
        m = Memory(addr, mv.nbytes, 0 if untyped else mv.itemsize, "", "cpu", True, type(obj).__name__)
    if nbytes is not None and int(nbytes) != m.nbytes:
        raise ValueError("nbytes=%d given for %s" % (nbytes, m.describe()))
    return m
