"""backend="hip": scores equal the CPU's (so the CLI's), from files, NumPy frames and frames
already in GPU memory (the package's own test producer, and PyTorch CUDA/ROCm tensors through
DLPack) scored in place. Without a GPU each test skips ("no device"); under
VMAF_TEST_REQUIRE_GPU=1 it fails instead."""

import os

import numpy as np
import pytest

import vmaf_hip
from conftest import clip, gpu_or_skip, have_vmaf_bin, read_y4m, same_scores, semiplanar
from vmaf_hip import _native

CLIPS = ["natural_576x324_420p8", "natural_640x360_420p10"]


def frames_of(name, n=None):
    refs, depth = read_y4m(clip(name, "ref"))
    dists, _ = read_y4m(clip(name, "dist"))
    pairs = list(zip(refs, dists))
    return (pairs[:n] if n else pairs), depth


def crop_chroma(planes, w, h):
    """Chroma planes cut to the picture's size (the GPU path takes them as they are)."""
    cw, ch = w // 2, h // 2
    return [planes[0], np.ascontiguousarray(planes[1][:ch, :cw]),
            np.ascontiguousarray(planes[2][:ch, :cw])]


def score(frames, depth, to_plane=lambda p: p, **kw):
    ctx = vmaf_hip.Context(features=["psnr"], **kw)
    bitdepth = None if depth == 8 else depth
    for r, d in frames:
        ctx.read([to_plane(p) for p in r], [to_plane(p) for p in d], bitdepth=bitdepth)
    out = ctx.to_dict()
    ctx.close()
    return out


@pytest.mark.parametrize("name", CLIPS)
def test_score_files_on_gpu_equals_cpu(name, cli_cache):
    """The CPU scores are the `vmaf` command's (test_score_files); where the command is here,
    its GPU backend is checked too."""
    gpu_or_skip()
    want = vmaf_hip.score_files(clip(name, "ref"), clip(name, "dist"), features=["psnr"])
    for threads in (0, 2):
        got = vmaf_hip.score_files(clip(name, "ref"), clip(name, "dist"), features=["psnr"],
                                   backend="hip", device=0 if threads else None,
                                   threads=threads)
        same_scores(got, want)
    if have_vmaf_bin():
        same_scores(cli_cache(name, "--feature", "psnr", "--backend", "hip"), want)
        same_scores(cli_cache(name, "--feature", "psnr"), want)


@pytest.mark.parametrize("name", CLIPS)
def test_numpy_frames_on_gpu_equal_cpu(name):
    gpu_or_skip()
    frames, depth = frames_of(name, 12)
    want = score(frames, depth)
    same_scores(score(frames, depth, backend="hip"), want)
    same_scores(score(frames, depth, backend="hip", threads=3), want)


@pytest.mark.parametrize("name", CLIPS)
def test_device_arrays_scored_in_place(name):
    """The package's test producer: planes copied to the GPU on the legacy stream (not waited
    for), handed over as DLPack capsules, released through their deleter after the last use."""
    gpu_or_skip()
    frames, depth = frames_of(name, 12)
    h, w = frames[0][0][0].shape
    frames = [(crop_chroma(r, w, h), crop_chroma(d, w, h)) for r, d in frames]
    want = score(frames, depth)
    for threads in (0, 3):
        before = _native._test_arrays_freed()
        got = score(frames, depth, lambda p: _native._DeviceArray(p.__dlpack__()),
                    backend="hip", threads=threads)
        same_scores(got, want)
        assert _native._test_arrays_freed() - before == 6 * len(frames)


@pytest.mark.parametrize("name", CLIPS)
def test_pitched_device_arrays_scored_in_place(name):
    """Rows at a pitch (a decoder's padded surfaces, cropped views whose storage ends with the
    last row's samples): read in place at that pitch, also beside a dense picture."""
    gpu_or_skip()
    frames, depth = frames_of(name, 6)
    h, w = frames[0][0][0].shape
    frames = [(crop_chroma(r, w, h), crop_chroma(d, w, h)) for r, d in frames]
    want = score(frames, depth)
    pitched = lambda p: _native._DeviceArray(p.__dlpack__(), pitch=p.shape[1] + 40)  # noqa: E731
    dense = lambda p: _native._DeviceArray(p.__dlpack__())  # noqa: E731
    for threads in (0, 3):
        same_scores(score(frames, depth, pitched, backend="hip", threads=threads), want)
        ctx = vmaf_hip.Context(features=["psnr"], backend="hip", threads=threads)
        for i, (r, d) in enumerate(frames):
            ref, dist = (pitched, dense) if i % 2 else (dense, pitched)
            ctx.read([ref(p) for p in r], [dist(p) for p in d],
                     bitdepth=None if depth == 8 else depth)
        same_scores(ctx.to_dict(), want)
        ctx.close()


def test_device_arrays_rejected_where_they_do_not_fit():
    gpu_or_skip()
    frames, depth = frames_of("natural_576x324_420p8", 1)
    r, d = frames[0]
    h, w = r[0].shape
    r, d = crop_chroma(r, w, h), crop_chroma(d, w, h)
    dev = lambda planes: [_native._DeviceArray(p.__dlpack__()) for p in planes]  # noqa: E731
    cpu = vmaf_hip.Context()
    with pytest.raises(ValueError, match="backend"):
        cpu.read(dev(r), dev(d))
    gpu = vmaf_hip.Context(backend="hip")
    # An odd-sized picture's chroma planes of the file's (rounded-up) size are fine on the
    # host, not in place: the device planes must be the picture's own size.
    odd = lambda f: [f[0][:-1, :-1], f[1], f[2]]  # noqa: E731
    with pytest.raises(ValueError, match="contiguous"):
        gpu.read(dev(odd(r)), dev(odd(d)))
    gpu.read(dev(r), dev(d))
    assert gpu.frames == 1
    gpu.close()


def torch_cuda():
    """PyTorch with a usable GPU, or a skip ("no torch" / "no device")."""
    try:
        import torch
    except ImportError:
        pytest.skip("no torch")
    if not torch.cuda.is_available():
        if os.environ.get("VMAF_TEST_REQUIRE_GPU") == "1":
            pytest.fail("no device: torch.cuda.is_available() is False (VMAF_TEST_REQUIRE_GPU=1)")
        pytest.skip("no device")
    gpu_or_skip()
    return torch


@pytest.mark.parametrize("name", CLIPS)
def test_torch_tensors_scored_in_place(name):
    torch = torch_cuda()
    frames, depth = frames_of(name, 12)
    h, w = frames[0][0][0].shape
    frames = [(crop_chroma(r, w, h), crop_chroma(d, w, h)) for r, d in frames]
    want = score(frames, depth)

    def to_cuda(p):
        return torch.from_numpy(p).to("cuda:0", non_blocking=True)

    if depth > 8:
        try:
            to_cuda(frames[0][0][0]).__dlpack__()
        except Exception as e:  # an older torch: no uint16 tensors, or none through DLPack
            pytest.skip(f"this torch cannot hand over uint16 tensors: {e}")

    for threads in (0, 3):
        same_scores(score(frames, depth, to_cuda, backend="hip", device=0, threads=threads),
                    want)
    # Tensors made on a side stream: __dlpack__(stream=1) orders them before our reads.
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        got = score(frames, depth, to_cuda, backend="hip", device=0)
    same_scores(got, want)


def test_torch_nv12_surfaces_scored_in_place():
    """A whole NV12 surface per picture, one (h * 3 / 2, w) CUDA tensor as PyNvVideoCodec
    hands it out, split into its luma and chroma views and read in place."""
    torch = torch_cuda()
    frames, depth = frames_of("natural_576x324_420p8", 6)
    want = score(frames, depth)
    ctx = vmaf_hip.Context(features=["psnr"], backend="hip", device=0)
    for r, d in frames:
        surf = [torch.from_numpy(np.vstack(semiplanar(p))).to("cuda:0") for p in (r, d)]
        ctx.read(surf[0], surf[1], pixel_format="nv12")
    same_scores(ctx.to_dict(), want)
    ctx.close()


def test_torch_tensors_rejected_where_they_do_not_fit():
    torch = torch_cuda()
    frames, _ = frames_of("natural_576x324_420p8", 1)
    r, d = frames[0]
    h, w = r[0].shape
    r, d = crop_chroma(r, w, h), crop_chroma(d, w, h)
    cuda = lambda planes: [torch.from_numpy(p).cuda() for p in planes]  # noqa: E731
    ctx = vmaf_hip.Context(backend="hip", device=0)
    with pytest.raises(ValueError, match="uint8"):
        ctx.read([t.float() for t in cuda(r)], cuda(d))
    with pytest.raises(ValueError, match="contiguous"):
        wide = [torch.from_numpy(np.repeat(p, 2, axis=1)).cuda()[:, ::2] for p in r]
        ctx.read(wide, cuda(d))
    if torch.cuda.device_count() > 1:
        with pytest.raises(ValueError, match="device"):
            ctx.read([t.to("cuda:1") for t in cuda(r)], cuda(d))
    ctx.read(cuda(r), cuda(d))
    # Host tensors are copied, as NumPy arrays are.
    ctx.read([torch.from_numpy(p) for p in r], [torch.from_numpy(p) for p in d])
    assert ctx.frames == 2
    ctx.close()
    with pytest.raises(ValueError, match="backend"):
        vmaf_hip.Context().read(cuda(r), cuda(d))


def test_torch_tensors_on_another_device_than_the_current_one():
    """Tensors on cuda:1, written late on cuda:1's current stream (a side stream) while
    cuda:0 is the current device: their export must order those writes before our reads
    (PyTorch orders the current device's streams), else the scores are wrong."""
    torch = torch_cuda()
    if torch.cuda.device_count() < 2:
        pytest.skip("one GPU")
    frames, depth = frames_of("natural_576x324_420p8", 8)
    h, w = frames[0][0][0].shape
    frames = [(crop_chroma(r, w, h), crop_chroma(d, w, h)) for r, d in frames]
    want = score(frames, depth)

    def late(p):
        with torch.cuda.device(1):
            src = torch.from_numpy(p).to("cuda:1")
            torch.cuda._sleep(100_000_000)  # the copy lands well after __dlpack__ returns
            return src.clone()

    torch.cuda.set_device(1)
    torch.cuda.set_stream(torch.cuda.Stream(device="cuda:1"))
    torch.cuda.set_device(0)
    try:
        got = score(frames, depth, late, backend="hip", device=1)
    finally:
        torch.cuda.set_device(1)
        torch.cuda.set_stream(torch.cuda.default_stream(1))
        torch.cuda.set_device(0)
    same_scores(got, want)


@pytest.mark.parametrize("name,fmt,shift", [("natural_576x324_420p8", "nv12", 0),
                                            ("natural_640x360_420p10", "p010", 6)])
def test_semiplanar_device_arrays_scored_in_place(name, fmt, shift):
    """NV12/P010 surfaces in GPU memory (rows at a pitch, as a decoder's): unpacked on the
    device, scored as the planar frames on the CPU, with chroma read (PSNR) and without (the
    model alone: the chroma is never unpacked)."""
    gpu_or_skip()
    frames, depth = frames_of(name, 6)
    pitched = lambda p: _native._DeviceArray(p.__dlpack__(), pitch=p.shape[1] + 64)  # noqa: E731
    for features in (["psnr"], []):
        ctx = vmaf_hip.Context(features=features)
        for r, d in frames:
            ctx.read(r, d, bitdepth=None if depth == 8 else depth)
        want = ctx.to_dict()
        ctx.close()
        for threads in (0, 3):
            before = _native._test_arrays_freed()
            ctx = vmaf_hip.Context(features=features, backend="hip", threads=threads)
            for r, d in frames:
                ctx.read([pitched(p) for p in semiplanar(r, shift)],
                         [pitched(p) for p in semiplanar(d, shift)], pixel_format=fmt)
            same_scores(ctx.to_dict(), want)
            ctx.close()
            assert _native._test_arrays_freed() - before == 4 * len(frames)
