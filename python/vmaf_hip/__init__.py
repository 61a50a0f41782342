"""vmaf_hip: bit-exact VMAF (libvmaf 3.2) on the CPU and on AMD/NVIDIA GPUs.

``score_files`` scores two videos as the ``vmaf`` command does; ``Context`` scores frames
handed over as NumPy arrays (or any DLPack tensors) per plane, on the GPU in place. Both
return the structure ``vmaf --json`` writes, parsed: ``version``, ``fps``, ``frames`` (one
``{"frameNum", "metrics"}`` per frame), ``pooled_metrics`` (per metric: min, max, mean,
harmonic_mean) and ``aggregate_metrics`` -- the same numbers, by construction.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import Any, Iterable, Mapping, Optional, Sequence, Tuple, Union

from . import _native
from ._native import MAX_THREADS, CancelFlag, NoDeviceError, libvmaf_version

__version__: str = _native.__version__

__all__ = [
    "CancelFlag",
    "Context",
    "MAX_THREADS",
    "NoDeviceError",
    "__version__",
    "devices",
    "gpu_unavailable_reason",
    "libvmaf_version",
    "score_files",
]

ModelArg = Union[None, str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]]
FeatureArg = Union[str, Tuple[str, Mapping[str, Any]]]

# DLPack device types (DLDeviceType).
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_ROCM = 1, 2, 3, 10


def devices() -> list:
    """The GPUs the library sees, one line each (empty without a usable GPU runtime)."""
    return _native.devices()


def gpu_unavailable_reason() -> Optional[str]:
    """Why ``backend="hip"`` cannot run here, or None when a GPU is usable."""
    return _native.gpu_unavailable_reason()


def _models(model: ModelArg) -> list:
    """Model arguments as strings: built-in versions, paths, or the CLI's ``-m`` syntax."""
    if model is None:
        return []
    if isinstance(model, (str, os.PathLike)):
        return [os.fspath(model)]
    if isinstance(model, (list, tuple)):
        out = []
        for m in model:
            if not isinstance(m, (str, os.PathLike)):
                raise ValueError(f"model {m!r}: expected a name or a path")
            out.append(os.fspath(m))
        return out
    raise ValueError(f"model {model!r}: expected a name, a path, a list of them or None")


def _option_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float, str)):
        return str(v)
    raise ValueError(f"feature option value {v!r}: expected a bool, number or string")


def _features(features: Iterable[FeatureArg]) -> list:
    """Features as ``(name, [(key, value), ...])``; strings in the CLI's ``--feature`` syntax
    (``"psnr"``, ``"float_ssim=enable_lcs=true"``) or ``(name, {key: value})`` pairs."""
    if isinstance(features, str):
        features = [features]
    out = []
    for f in features:
        if isinstance(f, str):
            name, _, rest = f.partition("=")
            opts = []
            for kv in filter(None, rest.split(":")):
                k, eq, v = kv.partition("=")
                if not eq or not k:
                    raise ValueError(f"bad option {kv!r} for feature {name} (expected key=value)")
                opts.append((k, v))
        elif isinstance(f, tuple) and len(f) == 2 and isinstance(f[0], str):
            name = f[0]
            opts = [(str(k), _option_value(v)) for k, v in dict(f[1]).items()]
        else:
            raise ValueError(f"feature {f!r}: expected a name or (name, {{option: value}})")
        if not name:
            raise ValueError("missing feature name")
        out.append((name, opts))
    return out


def _count(name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"{name}={v!r}: expected a non-negative integer")
    if v < 0 or v >= 1 << 64:
        raise ValueError(f"{name}={v!r}: expected a non-negative integer")
    return v


def _u32(name: str, v: Any) -> int:
    v = _count(name, v)
    if v >= 1 << 32:
        raise ValueError(f"{name}={v!r}: too large")
    return v


def _opt_u32(name: str, v: Any) -> Optional[int]:
    return None if v is None else _u32(name, v)


def _pixel_format(p: Any) -> Optional[str]:
    if p is None:
        return None
    return str(p)


def _path(name: str, p: Any) -> str:
    try:
        return os.fspath(p)
    except TypeError:
        raise ValueError(f"{name}={p!r}: expected a path") from None


def score_files(
    ref: Union[str, "os.PathLike[str]"],
    dist: Union[str, "os.PathLike[str]"],
    model: ModelArg = "vmaf_v0.6.1",
    features: Iterable[FeatureArg] = (),
    backend: str = "cpu",
    device: Union[None, int, str] = None,
    threads: int = 0,
    *,
    width: Optional[int] = None,
    height: Optional[int] = None,
    pixel_format: Optional[str] = None,
    bitdepth: Optional[int] = None,
    subsample: int = 0,
    frame_cnt: int = 0,
    frame_skip_ref: int = 0,
    frame_skip_dist: int = 0,
    cpumask: int = 0,
    gpumask: int = 0,
    cancel: Optional[CancelFlag] = None,
) -> dict:
    """Scores ``dist`` against ``ref`` like ``vmaf -r ref -d dist --json``.

    Inputs are y4m, or raw planar .yuv given ``width``, ``height``, ``pixel_format``
    (420/422/444/400) and ``bitdepth`` (8/10/12/16). ``model``: a built-in version name
    (``"vmaf_v0.6.1"``, ``"vmaf_4k_v0.6.1"``, ...), a model file, a string in the CLI's
    ``-m`` syntax (``"version=vmaf_v0.6.1neg:name=neg"``), a list of those, or None for no
    model (features only). ``features``: extra feature extractors (``"psnr"``,
    ``"float_ssim=enable_lcs=true"`` or ``("psnr", {"enable_chroma": False})``).
    ``backend="hip"`` extracts on a GPU: ``device`` picks one by index, or ``"all"``.
    ``threads``, ``subsample``, ``frame_cnt``, ``frame_skip_ref``/``_dist``, ``cpumask`` and
    ``gpumask`` are the CLI's options of those names.

    ``cancel``: a ``CancelFlag``; once it is set (from any thread), the call stops at the
    next frame with ``InterruptedError``.

    Returns the parsed JSON the ``vmaf`` command writes. Raises ValueError for bad arguments
    or input data, OSError when a file cannot be read, ``NoDeviceError`` (a RuntimeError)
    without a usable GPU, RuntimeError for other failures.
    """
    text = _native.score_files_json(
        _path("ref", ref),
        _path("dist", dist),
        _models(model),
        _features(features),
        str(backend),
        device,
        _u32("threads", threads),
        _u32("subsample", subsample),
        _opt_u32("width", width),
        _opt_u32("height", height),
        _pixel_format(pixel_format),
        _opt_u32("bitdepth", bitdepth),
        _u32("frame_cnt", frame_cnt),
        _u32("frame_skip_ref", frame_skip_ref),
        _u32("frame_skip_dist", frame_skip_dist),
        _count("cpumask", cpumask),
        _count("gpumask", gpumask),
        cancel,
    )
    return json.loads(text)


def _capsule(plane: Any, which: str, i: int) -> Any:
    """A DLPack capsule of ``plane``, made visible to the library's GPU reads: CUDA producers
    are asked to order their work before the legacy default stream (``stream=1``), ROCm ones
    before the null stream (``stream=0``)."""
    if not hasattr(plane, "__dlpack__"):
        try:
            import numpy as np
        except ImportError:
            raise ValueError(
                f"{which} plane {i}: expected a NumPy array or a DLPack tensor, got {type(plane).__name__}"
            ) from None
        plane = np.asarray(plane)
    try:
        dev_type, dev_id = plane.__dlpack_device__()
    except AttributeError:
        dev_type, dev_id = _DL_CPU, 0
    stream = {_DL_CUDA: 1, _DL_ROCM: 0}.get(int(dev_type))
    kwargs = {} if stream is None else {"stream": stream}

    def export(p: Any) -> Any:
        with _on_tensor_device(p, stream, dev_id):
            try:
                return p.__dlpack__(max_version=(1, 0), **kwargs)
            except TypeError:
                # Producers from before DLPack 1.0 know no max_version.
                return p.__dlpack__(**kwargs)

    try:
        return export(plane)
    except BufferError as e:
        # Old NumPy refuses to export read-only arrays: a copy is ours to hand over.
        if int(dev_type) == _DL_CPU and hasattr(plane, "copy"):
            try:
                return export(plane.copy())
            except BufferError:
                pass
        raise ValueError(f"{which} plane {i}: cannot be exported through DLPack: {e}") from None


def _on_tensor_device(plane: Any, stream: Optional[int], dev_id: Any) -> Any:
    """For a PyTorch GPU tensor, its device made current while it exports: PyTorch orders the
    *current* device's current stream before that device's default stream, so a tensor on
    another device would reach our reads with its writes unordered (a wrong score)."""
    torch = sys.modules.get("torch")
    if stream is None or torch is None or not isinstance(plane, torch.Tensor):
        return contextlib.nullcontext()
    return torch.cuda.device(int(dev_id))


_SEMIPLANAR = {"nv12", "p010", "p010le", "p012", "p012le", "p016", "p016le"}


def _planes(frame: Any, which: str, pixel_format: Optional[str] = None) -> list:
    if hasattr(frame, "__dlpack__") or not isinstance(frame, (list, tuple)):
        shape = getattr(frame, "shape", None)
        semi = pixel_format is not None and pixel_format.strip().lower() in _SEMIPLANAR
        if semi and shape is not None and len(shape) == 2 and shape[0] % 3 == 0:
            # A whole semi-planar surface, (h * 3 / 2, w) as decoders hand it out: its luma
            # rows, then its interleaved chroma rows.
            h = shape[0] // 3 * 2
            frame = [frame[:h], frame[h:]]
        else:
            # One array: the luma plane of a 4:0:0 picture.
            frame = [frame]
    return [_capsule(p, which, i) for i, p in enumerate(frame)]


class Context:
    """A scoring session fed frame by frame.

    ``read(ref_planes, dist_planes)`` takes one frame of each: a sequence of 3 planes (Y, U, V)
    or 1 (luma only, 4:0:0), each a 2-D array (rows, columns) of uint8 (8-bit) or uint16
    (give ``bitdepth``). The pixel format follows from the plane shapes (chroma of half width
    and height: 4:2:0; half width: 4:2:2; full: 4:4:4), or is given. Host arrays (NumPy, any
    strides) are copied. With ``backend="hip"``, tensors already in GPU memory (PyTorch CUDA
    tensors, CuPy arrays: anything with ``__dlpack__``) on the context's device are scored in
    place, without a host copy; each plane must then be of the picture's plane size with
    adjacent samples in each row (rows may be padded: cropped views, a decoder's pitched
    surfaces), and must not be written until the context is flushed or closed.

    Decoder frames: with ``pixel_format="nv12"`` (uint8) or ``"p010"``, ``"p012"``, ``"p016"``
    (uint16, samples in the high bits) each frame is 2 planes, the luma (rows, columns) and the
    interleaved chroma (rows/2, 2*(columns/2)) or (rows/2, columns/2, 2), or one array of the
    whole surface, (rows*3/2, columns), as decoders hand it out; it is scored as the yuv420p
    picture of the same samples. GPU tensors are read in place as above.

    ``to_dict()`` (or ``score()``, ``pooled()``, ``frame_scores()``) flushes and returns what
    ``score_files`` returns for the same frames.
    """

    def __init__(
        self,
        model: ModelArg = "vmaf_v0.6.1",
        features: Iterable[FeatureArg] = (),
        backend: str = "cpu",
        device: Union[None, int, str] = None,
        threads: int = 0,
        *,
        subsample: int = 0,
        cpumask: int = 0,
        gpumask: int = 0,
    ) -> None:
        self._model_names = _models(model)
        self._native = _native._Context(
            self._model_names,
            _features(features),
            str(backend),
            device,
            _u32("threads", threads),
            _u32("subsample", subsample),
            _count("cpumask", cpumask),
            _count("gpumask", gpumask),
        )
        self._result: Optional[dict] = None

    def read(
        self,
        ref: Any,
        dist: Any,
        *,
        pixel_format: Optional[str] = None,
        bitdepth: Optional[int] = None,
    ) -> None:
        """Submits the next frame (reference and distorted planes)."""
        if self._result is not None:
            raise ValueError("the context is flushed: no more frames")
        self._native.read(
            _planes(ref, "reference", _pixel_format(pixel_format)),
            _planes(dist, "distorted", _pixel_format(pixel_format)),
            _pixel_format(pixel_format),
            _opt_u32("bitdepth", bitdepth),
        )

    def flush(self) -> None:
        """Scores the frames still in flight; no frames can be read afterwards."""
        self._native.flush()

    @property
    def frames(self) -> int:
        """Frames read so far."""
        return self._native.frames

    @property
    def devices(self) -> list:
        """The GPUs this context scores on."""
        return self._native.devices

    def to_dict(self) -> dict:
        """Every score, as ``score_files`` returns them (flushes first)."""
        if self._result is None:
            self._result = json.loads(self._native.json())
        return self._result

    def pooled(self) -> dict:
        """Pooled scores: ``{metric: {"min", "max", "mean", "harmonic_mean"}}``."""
        return self.to_dict()["pooled_metrics"]

    def frame_scores(self) -> list:
        """Per-frame scores: ``[{"frameNum": n, "metrics": {metric: value}}, ...]``."""
        return self.to_dict()["frames"]

    def score(self, metric: Optional[str] = None, pool: str = "mean") -> float:
        """One pooled score: of ``metric`` (default: the first model's name, ``"vmaf"``)."""
        pooled = self.pooled()
        if metric is None:
            metric = "vmaf"
            for m in self._model_names:
                for part in m.split(":"):
                    if part.startswith("name="):
                        metric = part[len("name=") :]
                break
        try:
            return pooled[metric][pool]
        except KeyError:
            raise ValueError(
                f"no pooled {pool} of {metric!r} (metrics: {', '.join(pooled)})"
            ) from None

    def close(self) -> None:
        """Lets the context's threads, GPU buffers and any frames it still holds go."""
        self._native.close()

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
