"""Locating and loading libconvpool, and the ctypes declarations of its C API.

The library is loaded lazily, on the first call that needs it, so that the
pure-Python parts of the package (``convpool.layer``, ``convpool.bfloat16``) work without it.

Lookup order (see ``candidate_paths``):

1. ``$CONVPOOL_LIB`` when it is set. It is authoritative: if it is set but
   cannot be loaded, nothing else is tried, so a test never silently runs a
   different build than the one it was pointed at.
2. An installed package (``cmake --install``) has a generated ``_config.py``
   naming the installed library relative to the package directory, so the
   install prefix can move.
3. ``build/lib/libconvpool.so`` relative to the repository root (this package
   lives in ``<root>/python/convpool``).
4. ``ctypes.util.find_library("convpool")`` (the system's library path).
"""

import ctypes
import ctypes.util
import os
import threading
from pathlib import Path

# Values of the C enums (include/convpool.h).
SUCCESS = 0
INVALID_ARGUMENT = 1
UNSUPPORTED = 2
OUT_OF_MEMORY = 3
INVALID_STATE = 4
INTERNAL_ERROR = 5

FLOAT32 = 0
FLOAT16 = 1
BFLOAT16 = 2


REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_TREE_LIBRARY = REPO_ROOT / "build" / "lib" / "libconvpool.so"


class LibraryNotFoundError(OSError):
    """libconvpool could not be loaded; the message lists every path tried."""


class ConvpoolAllocator(ctypes.Structure):
    _fields_ = [
        ("alloc", ctypes.c_void_p),
        ("free", ctypes.c_void_p),
        ("context", ctypes.c_void_p),
    ]


class ConvpoolOptions(ctypes.Structure):
    # A versioned struct: convpool_options_init sets ``size``, and the library
    # refuses a size it does not know instead of misreading the fields.
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("threads", ctypes.c_int),
        ("algo", ctypes.c_int),
        ("rows_per_item", ctypes.c_int),
        ("allocator", ctypes.POINTER(ConvpoolAllocator)),
        ("shared_pool", ctypes.c_int),
        ("expected_batch", ctypes.c_int64),
        ("expected_height", ctypes.c_int64),
        ("expected_width", ctypes.c_int64),
    ]


class ConvpoolLayer(ctypes.Structure):
    """Mirror of convpool_layer (include/convpool.h), field for field.

    Never filled from zero here: ``init_struct`` lets the library's
    convpool_layer_init write its size and defaults, then the binding sets
    what differs.
    """
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("dtype", ctypes.c_int),
        ("c_out", ctypes.c_int64),
        ("c_in", ctypes.c_int64),
        ("k", ctypes.c_int64),
        ("padding", ctypes.c_int64 * 4),
        ("stride", ctypes.c_int64),
        ("dilation", ctypes.c_int64),
        ("groups", ctypes.c_int64),
        ("activation", ctypes.c_int),
        ("clamp_min", ctypes.c_float),
        ("clamp_max", ctypes.c_float),
        ("pool", ctypes.c_int64),
        ("pool_stride", ctypes.c_int64),
        ("pool_padding", ctypes.c_int64 * 4),
        ("ceil_mode", ctypes.c_int),
        ("has_residual", ctypes.c_int64),
    ]


# convpool_activation
ACTIVATION_NONE = 0
ACTIVATION_RELU = 1
ACTIVATION_CLAMP = 2


class ConvpoolInfo(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_char_p),
        ("isa", ctypes.c_char_p),
        ("usable_cpus", ctypes.c_int),
        ("l1d_bytes", ctypes.c_size_t),
        ("l2_bytes", ctypes.c_size_t),
        ("l3_bytes", ctypes.c_size_t),
        ("caches_from_cpuid", ctypes.c_int),
    ]


class ConvpoolPlanInfo(ctypes.Structure):
    _fields_ = [
        ("threads", ctypes.c_int),
        ("items", ctypes.c_int64),
        ("rows_per_item", ctypes.c_int64),
        ("mr", ctypes.c_int),
        ("nr", ctypes.c_int),
        ("col_block", ctypes.c_int64),
        ("packed_weight_bytes", ctypes.c_size_t),
        ("scratch_bytes_per_thread", ctypes.c_size_t),
        ("isa", ctypes.c_char_p),
        ("kernel", ctypes.c_char_p),
    ]


class ConvpoolRunStats(ctypes.Structure):
    _fields_ = [
        ("wall_seconds", ctypes.c_double),
        ("pack_seconds", ctypes.c_double),
        ("compute_seconds", ctypes.c_double),
        ("epilogue_seconds", ctypes.c_double),
        ("items", ctypes.c_int64),
        ("threads", ctypes.c_int),
    ]


_i64 = ctypes.c_int64
_vp = ctypes.c_void_p
_sz = ctypes.c_size_t
_st = ctypes.c_int  # convpool_status

# name: (restype, argtypes)
_PROTOTYPES = {
    "convpool_status_string": (ctypes.c_char_p, [_st]),
    "convpool_last_error": (ctypes.c_char_p, []),
    "convpool_dtype_size": (_sz, [ctypes.c_int]),
    "convpool_dtype_name": (ctypes.c_char_p, [ctypes.c_int]),
    "convpool_options_init": (None, [_vp]),
    "convpool_layer_init": (None, [_vp, ctypes.c_int, _i64, _i64, _i64, _i64]),
    "convpool_op_create_layer": (
        _st, [ctypes.POINTER(ConvpoolLayer), _vp, _vp, ctypes.POINTER(ConvpoolOptions),
              ctypes.POINTER(_vp)]),
    "convpool_layer_run": (
        _st, [ctypes.POINTER(ConvpoolLayer), _vp, _i64, _i64, _i64, _vp, _vp, _vp, _sz,
              ctypes.POINTER(ConvpoolOptions)]),
    "convpool_layer_run_residual": (
        _st, [ctypes.POINTER(ConvpoolLayer), _vp, _i64, _i64, _i64, _vp, _vp, _vp, _vp, _sz,
              ctypes.POINTER(ConvpoolOptions)]),
    "convpool_layer_conv_shape": (
        _st, [ctypes.POINTER(ConvpoolLayer), _i64, _i64, _i64, ctypes.POINTER(_i64),
              ctypes.POINTER(_sz)]),
    "convpool_algo_name": (ctypes.c_char_p, [ctypes.c_int]),
    "convpool_algo_from_name": (_st, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_int)]),
    "convpool_get_info": (_st, [ctypes.POINTER(ConvpoolInfo)]),
    "convpool_op_create": (
        _st,
        [ctypes.c_int, _vp, _vp, _i64, _i64, _i64, _i64,
         ctypes.POINTER(ConvpoolOptions), ctypes.POINTER(_vp)],
    ),
    "convpool_op_output_shape": (
        _st, [_vp, _i64, _i64, _i64, ctypes.POINTER(_i64), ctypes.POINTER(_sz)]),
    "convpool_op_run": (_st, [_vp, _vp, _i64, _i64, _i64, _vp, _sz]),
    "convpool_op_run_residual": (_st, [_vp, _vp, _i64, _i64, _i64, _vp, _vp, _sz]),
    "convpool_op_describe": (_st, [_vp, _i64, _i64, _i64, ctypes.c_char_p, _sz]),
    "convpool_op_plan": (
        _st, [_vp, _i64, _i64, _i64, ctypes.POINTER(ConvpoolPlanInfo)]),
    "convpool_op_destroy": (_st, [_vp]),
    "convpool_conv2d_maxpool": (
        _st,
        [ctypes.c_int, _vp, _i64, _i64, _i64, _i64, _vp, _i64, _i64, _vp, _i64,
         _vp, _sz, ctypes.POINTER(ConvpoolOptions)],
    ),
}

# Newer entry points: declared when present, so an older library still loads.
_OPTIONAL_PROTOTYPES = {
    "convpool_op_last_run_stats": (_st, [_vp, ctypes.POINTER(ConvpoolRunStats)]),
    "convpool_shared_pool_set_threads": (_st, [ctypes.c_int]),
    "convpool_shared_pool_get_threads": (_st, [ctypes.POINTER(ctypes.c_int)]),
    "convpool_shared_pool_use_openmp": (_st, [ctypes.c_int]),
    "convpool_shared_pool_get_openmp": (_st, [ctypes.POINTER(ctypes.c_int)]),
}

_lock = threading.Lock()
_library = None
_library_path = None


def candidate_paths():
    """Yield the lookup order as (description, path or None).

    A generator, so that find_library (which may run external programs) is
    only consulted when the earlier candidates failed.
    """
    env = os.environ.get("CONVPOOL_LIB")
    if env:
        yield "$CONVPOOL_LIB", env
        return
    installed = installed_library()
    if installed is not None:
        yield "installed (convpool/_config.py)", installed
    yield "build tree", str(BUILD_TREE_LIBRARY)
    yield "ctypes.util.find_library('convpool')", ctypes.util.find_library("convpool")


def installed_library():
    """The library path recorded by ``cmake --install`` in _config.py, or None.

    _config.py is generated at install time only; a source checkout has none.
    Its LIBRARY is relative to the package directory (or absolute).
    """
    try:
        from . import _config
    except ImportError:
        return None
    library = getattr(_config, "LIBRARY", None)
    if not library:
        return None
    return os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), library))


# Room for a struct that a newer library has grown: its init function writes
# sizeof(its struct) bytes, which must land in memory we own.
_STRUCT_ROOM = 4096


def init_struct(cls, init, *args):
    """A ``cls`` filled by the library's init function (size and defaults from the library).

    The init function writes the library's own sizeof into the first field;
    the struct is laid in a buffer large enough for a newer library's larger
    struct, so fields this binding does not know keep the library's
    defaults. A library whose struct is smaller than this binding's mirror is
    older than the binding: refused, naming both sizes.
    """
    buffer = ctypes.create_string_buffer(max(_STRUCT_ROOM, ctypes.sizeof(cls)))
    init(ctypes.addressof(buffer), *args)
    size = ctypes.c_size_t.from_buffer(buffer).value
    if size < ctypes.sizeof(cls) or size > len(buffer):
        raise LibraryNotFoundError(
            f"{library_path()}: {init.__name__} reports a struct of {size} bytes, this "
            f"binding's {cls.__name__} has {ctypes.sizeof(cls)}: the library does not "
            "match this binding")
    return cls.from_buffer(buffer)   # shares (and keeps alive) the buffer


def _declare(lib, path):
    for name, (restype, argtypes) in _PROTOTYPES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise LibraryNotFoundError(
                f"{path} was loaded but lacks the symbol {name}; "
                "it is not a libconvpool matching this binding") from None
        fn.restype = restype
        fn.argtypes = argtypes
    for name, (restype, argtypes) in _OPTIONAL_PROTOTYPES.items():
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype = restype
            fn.argtypes = argtypes


def has_symbol(name):
    """Whether the loaded library exports name."""
    return getattr(load(), name, None) is not None


def load():
    """Load libconvpool once and return the ctypes.CDLL.

    Raises LibraryNotFoundError (an OSError) naming every path tried and why
    each one failed.
    """
    global _library, _library_path
    lib = _library           # set once, never cleared: no lock once loaded (every call asks)
    if lib is not None:
        return lib
    with _lock:
        if _library is not None:
            return _library
        tried = []
        for description, path in candidate_paths():
            if not path:
                tried.append(f"  {description}: no library found")
                continue
            if os.sep in path and not os.path.exists(path):
                tried.append(f"  {description}: {path} (no such file)")
                continue
            try:
                lib = ctypes.CDLL(path)
            except OSError as exc:
                tried.append(f"  {description}: {path} ({exc})")
                continue
            _declare(lib, path)
            _library, _library_path = lib, path
            return lib
        hint = ("set CONVPOOL_LIB=/path/to/libconvpool.so, or build with "
                "'cmake -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build'")
        raise LibraryNotFoundError(
            "cannot load libconvpool; paths tried:\n" + "\n".join(tried) + "\n" + hint)


def library_path():
    """Path (or name) of the loaded library, loading it if needed."""
    load()
    return _library_path
