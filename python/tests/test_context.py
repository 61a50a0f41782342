"""Context over NumPy planes equals score_files on the same clip, whatever the strides."""

import numpy as np
import pytest

import vmaf_hip
from conftest import clip, read_y4m, same_scores, semiplanar


def score_frames(frames, depth, transform=lambda p: p, **ctx_args):
    ctx = vmaf_hip.Context(**ctx_args)
    bitdepth = None if depth == 8 else depth
    for r, d in frames:
        ctx.read([transform(p) for p in r], [transform(p) for p in d], bitdepth=bitdepth)
    out = ctx.to_dict()
    ctx.close()
    return out


def pairs(name):
    refs, depth = read_y4m(clip(name, "ref"))
    dists, _ = read_y4m(clip(name, "dist"))
    return list(zip(refs, dists)), depth


@pytest.mark.parametrize("name,threads", [("natural_576x324_420p8", 0),
                                          ("natural_640x360_420p10", 2),
                                          ("natural_320x180_420p12", 0)])
def test_numpy_equals_score_files(name, threads):
    frames, depth = pairs(name)
    want = vmaf_hip.score_files(clip(name, "ref"), clip(name, "dist"), features=["psnr"])
    got = score_frames(frames, depth, features=["psnr"], threads=threads)
    same_scores(got, want)


def write_y4m(path, frames, w, h):
    with open(path, "wb") as f:
        f.write(f"YUV4MPEG2 W{w} H{h} F25:1 Ip A1:1 C420jpeg\n".encode())
        for planes in frames:
            f.write(b"FRAME\n")
            for p in planes:
                f.write(np.ascontiguousarray(p).tobytes())


def test_odd_size_with_file_chroma(tmp_path):
    """An odd-sized 4:2:0 picture: chroma planes of the file's (rounded-up) size and of the
    picture's (rounded-down) size both score like the y4m file of those frames."""
    frames, depth = pairs("natural_576x324_420p8")
    frames = frames[:5]
    w, h = 575, 323
    cw, ch = (w + 1) // 2, (h + 1) // 2
    crop = [tuple([p[0][:h, :w], p[1][:ch, :cw], p[2][:ch, :cw]] for p in f) for f in frames]
    write_y4m(tmp_path / "r.y4m", [f[0] for f in crop], w, h)
    write_y4m(tmp_path / "d.y4m", [f[1] for f in crop], w, h)
    want = vmaf_hip.score_files(tmp_path / "r.y4m", tmp_path / "d.y4m", features=["psnr"])
    assert len(want["frames"]) == 5
    same_scores(score_frames(crop, depth, features=["psnr"]), want)
    floor = [tuple([p[0], p[1][: h // 2, : w // 2], p[2][: h // 2, : w // 2]] for p in f)
             for f in crop]
    same_scores(score_frames(floor, depth, features=["psnr"]), want)


def test_444_and_strides():
    """Padded rows, Fortran order, negative-free views of larger arrays, read-only arrays."""
    name = "testsrc_480x270_444p8"
    frames, depth = pairs(name)
    frames = frames[:6]
    want = score_frames(frames, depth)

    def padded(p):
        big = np.zeros((p.shape[0] + 3, p.shape[1] + 17), dtype=p.dtype)
        big[1:-2, 5:-12] = p
        return big[1:-2, 5:-12]

    def fortran(p):
        return np.asfortranarray(p)

    def every_other(p):
        big = np.zeros((p.shape[0], p.shape[1] * 2), dtype=p.dtype)
        big[:, ::2] = p
        return big[:, ::2]

    def readonly(p):
        q = p.copy()
        q.setflags(write=False)
        return q

    for t in (padded, fortran, every_other, readonly):
        same_scores(score_frames(frames, depth, transform=t), want)


def test_methods_and_luma_only():
    name = "natural_576x324_420p8"
    frames, depth = pairs(name)
    frames = frames[:4]
    ctx = vmaf_hip.Context(model=None, features=["psnr"])
    for r, d in frames:
        ctx.read(r[0], d[0])  # one array: a 4:0:0 picture
    assert ctx.frames == 4
    ctx.flush()
    pooled = ctx.pooled()
    assert set(pooled) == {"psnr_y"}
    assert len(ctx.frame_scores()) == 4
    assert ctx.score("psnr_y") == pooled["psnr_y"]["mean"]
    with pytest.raises(ValueError):
        ctx.read(frames[0][0][0], frames[0][1][0])

    with vmaf_hip.Context(model="version=vmaf_v0.6.1:name=main") as ctx:
        for r, d in frames:
            ctx.read(r, d, pixel_format="420")
        assert ctx.score() == ctx.pooled()["main"]["mean"]
        assert ctx.to_dict()["frames"][0]["frameNum"] == 0


def test_errors():
    name = "natural_640x360_420p10"
    frames, _ = pairs(name)
    r, d = frames[0]
    ctx = vmaf_hip.Context()
    with pytest.raises(ValueError, match="bitdepth"):
        ctx.read(r, d)  # uint16 without a bit depth
    with pytest.raises(ValueError, match="does not fit bitdepth"):
        ctx.read([p | 0x400 for p in r], d, bitdepth=10)
    with pytest.raises(ValueError, match="uint8"):
        ctx.read([p.astype(np.float32) for p in r], d, bitdepth=10)
    with pytest.raises(ValueError, match="differ"):
        ctx.read(r, [d[0][:-2], d[1][:-1], d[2][:-1]], bitdepth=10)
    with pytest.raises(ValueError, match="pixel format"):
        ctx.read([r[0], r[1][:, :10], r[2][:, :10]], d, bitdepth=10)
    with pytest.raises(ValueError, match="pixel_format"):
        ctx.read(r, d, bitdepth=10, pixel_format="444")
    with pytest.raises(ValueError, match="2-D"):
        ctx.read([r[0][None]] + r[1:], d, bitdepth=10)
    with pytest.raises(ValueError, match="planes"):
        ctx.read(r[:2], d[:2], bitdepth=10)
    with pytest.raises(ValueError, match="no frames"):
        ctx.to_dict()
    ctx.read(r, d, bitdepth=10)
    assert ctx.frames == 1
    ctx.close()
    with pytest.raises(ValueError, match="closed"):
        ctx.read(r, d, bitdepth=10)
    with pytest.raises(ValueError):
        vmaf_hip.Context(backend="cuda")
    with pytest.raises(ValueError):
        vmaf_hip.Context(device=0)  # a device is for backend="hip"
    with pytest.raises(ValueError):
        vmaf_hip.Context(model="no_such_model")
    with pytest.raises(ValueError):
        vmaf_hip.Context(features=["no_such_feature"])
    with pytest.raises(ValueError):
        vmaf_hip.Context(threads=-1)


def test_scores_after_a_failed_frame_are_refused():
    """A frame whose scoring failed (here float_ms_ssim on a picture too small for it,
    reported once, by a later read or the flush) leaves the context's scores incomplete:
    asking for them again raises instead of returning them without that feature."""
    rng = np.random.default_rng(0)
    w, h = 64, 64

    def planes():
        return [rng.integers(0, 256, s, dtype=np.uint8) for s in ((h, w), (h // 2, w // 2),
                                                                  (h // 2, w // 2))]

    for threads in (0, 2):
        ctx = vmaf_hip.Context(model=None, features=["psnr", "float_ms_ssim"], threads=threads)
        with pytest.raises(ValueError, match="too small"):
            for _ in range(3):
                ctx.read(planes(), planes())
            ctx.flush()
        for call in (ctx.to_dict, ctx.flush, lambda: ctx.read(planes(), planes())):
            with pytest.raises(ValueError, match="failed earlier"):
                call()
        ctx.close()


def test_mistakes_that_leave_the_scores_whole_are_not_fatal():
    """A frame refused before scoring (another size than the first) changes nothing."""
    frames, depth = pairs("natural_576x324_420p8")
    frames = frames[:3]
    want = score_frames(frames, depth)
    ctx = vmaf_hip.Context()

    def shrink(planes):
        return [planes[0][:-2, :-2]] + [p[:-1, :-1] for p in planes[1:]]

    for i, (r, d) in enumerate(frames):
        if i == 1:
            with pytest.raises(ValueError, match="first"):
                ctx.read(shrink(r), shrink(d))
        ctx.read(r, d)
    ctx.flush()
    with pytest.raises(ValueError, match="flushed"):
        ctx._native.read([p.__dlpack__() for p in frames[0][0]],
                         [p.__dlpack__() for p in frames[0][1]])
    same_scores(ctx.to_dict(), want)
    ctx.close()


@pytest.mark.parametrize("name,fmt,shift", [("natural_576x324_420p8", "nv12", 0),
                                            ("natural_640x360_420p10", "p010", 6),
                                            ("natural_320x180_420p12", "p012", 4),
                                            ("testsrc_321x241_420p8", "NV12", 0)])
def test_semiplanar_frames_score_as_planar(name, fmt, shift):
    """NV12/P010/P012 host arrays (a decoder's layout) score exactly as the planar frames of
    the same samples: luma, chroma (PSNR reads it) and odd sizes."""
    frames, depth = pairs(name)
    frames = frames[:8]
    want = score_frames(frames, depth, features=["psnr"])
    for chroma_as in ("2-D", "pairs", "padded"):
        ctx = vmaf_hip.Context(features=["psnr"], threads=2)
        for r, d in frames:
            r2, d2 = semiplanar(r, shift), semiplanar(d, shift)
            if chroma_as == "pairs":
                r2[1] = r2[1].reshape(r2[1].shape[0], -1, 2)
                d2[1] = d2[1].reshape(d2[1].shape[0], -1, 2)
            elif chroma_as == "padded":
                # rows of a wider surface: views with a pitch
                r2 = [np.pad(p, ((0, 0), (0, 16)))[:, :p.shape[1]] for p in r2]
                d2 = [np.pad(p, ((0, 0), (0, 16)))[:, :p.shape[1]] for p in d2]
            ctx.read(r2, d2, pixel_format=fmt)
        same_scores(ctx.to_dict(), want)
        ctx.close()


def test_a_whole_nv12_surface_is_one_array():
    """One (h * 3 / 2, w) array per picture, as PyNvVideoCodec and other decoders hand NV12
    frames out, scores as its luma and chroma planes do."""
    frames, depth = pairs("natural_576x324_420p8")
    frames = frames[:4]
    want = score_frames(frames, depth, features=["psnr"])
    ctx = vmaf_hip.Context(features=["psnr"])
    for r, d in frames:
        ctx.read(np.vstack(semiplanar(r)), np.vstack(semiplanar(d)), pixel_format="nv12")
    same_scores(ctx.to_dict(), want)
    ctx.close()


def test_p016_is_scored_at_16_bits():
    frames, _ = pairs("natural_640x360_420p10")
    frames = [([p << 6 for p in r], [p << 6 for p in d]) for r, d in frames[:4]]
    want = score_frames(frames, 16, features=["psnr"])
    ctx = vmaf_hip.Context(features=["psnr"])
    for r, d in frames:
        ctx.read(semiplanar(r), semiplanar(d), pixel_format="p016le", bitdepth=16)
    same_scores(ctx.to_dict(), want)
    ctx.close()


def test_semiplanar_errors():
    frames, _ = pairs("natural_576x324_420p8")
    r, d = frames[0]
    r2, d2 = semiplanar(r), semiplanar(d)
    ctx = vmaf_hip.Context()
    with pytest.raises(ValueError, match="takes 2"):
        ctx.read(r, d, pixel_format="nv12")
    with pytest.raises(ValueError, match="uint16"):
        ctx.read(r2, d2, pixel_format="p010")
    with pytest.raises(ValueError, match="bitdepth=10"):
        ctx.read(r2, d2, pixel_format="nv12", bitdepth=10)
    with pytest.raises(ValueError, match="interleaved chroma"):
        ctx.read([r2[0], r2[1][:, :-2]], d2, pixel_format="nv12")
    with pytest.raises(ValueError, match="interleaved chroma"):
        ctx.read([r2[0], r2[1].reshape(r2[1].shape[0], -1, 4)], d2, pixel_format="nv12")
    with pytest.raises(ValueError, match="differ"):
        ctx.read([r2[0][:-2], r2[1][:-1]], d2, pixel_format="nv12")
    ctx.read(r2, d2, pixel_format="nv12")
    # an NV12 frame is a yuv420p picture: planar frames of the size may follow
    ctx.read(r, d)
    assert ctx.frames == 2
    ctx.close()
