//! PSNR on the GPU: per-plane integer sums of squared differences, which the CPU extractor turns
//! into PSNR with the same formula it uses for its own sums (so both paths agree bit for bit).
//!
//! Each call stages both pictures in pinned memory, uploads them, runs one kernel per plane and
//! reads back three `u64`s. Staging and device buffers live in the [`GpuState`]'s scratch and
//! are reused while the picture size stays the same.

use super::launch;
use crate::error::{Error, Result};
use crate::gpu::frames::{device_frame, DeviceFrame, DevicePlaneAs, FrameReads};
use crate::gpu::job::{Job, Parts};
use crate::gpu::launch::{DevicePlane, Sample};
use crate::gpu::planes::PlaneAs;
use crate::gpu::{DeviceBuffer, GpuState, PinnedHostBuffer};
use crate::picture::{Picture, PictureData};
use std::sync::Arc;

/// Buffers for one sample type, sized for the largest picture seen.
struct Scratch<T: Sample> {
    pair: PackedPair<T>,
    sums_dev: DeviceBuffer<u64>,
    sums_host: PinnedHostBuffer<u64>,
}

impl<T: Sample + PlaneAs> Scratch<T> {
    fn new(state: &GpuState, layout: &PairLayout) -> Result<Self> {
        let dev = state.device();
        Ok(Scratch {
            pair: PackedPair::new(state, layout)?,
            sums_dev: DeviceBuffer::new(dev, 3)?,
            sums_host: PinnedHostBuffer::new(dev, 3)?,
        })
    }
}

/// Where each of the first `n_planes` planes of a picture pair lies when each picture's planes
/// are packed back to back.
pub(crate) struct PairLayout {
    n_planes: usize,
    ref_offs: [usize; 3],
    ref_len: usize,
    dis_offs: [usize; 3],
    dis_len: usize,
}

impl PairLayout {
    pub(crate) fn new<T: PlaneAs>(
        r: &PictureData,
        d: &PictureData,
        n_planes: usize,
    ) -> Result<Self> {
        let (ref_offs, ref_len) = packed_layout::<T>(r, n_planes)?;
        let (dis_offs, dis_len) = packed_layout::<T>(d, n_planes)?;
        Ok(PairLayout {
            n_planes,
            ref_offs,
            ref_len,
            dis_offs,
            dis_len,
        })
    }
}

/// Both pictures' planes packed in pinned memory and uploaded, for extractors that read every
/// plane of host pictures (PSNR, psnr_hvs): sized for the largest pair seen.
pub(crate) struct PackedPair<T: Sample> {
    ref_host: PinnedHostBuffer<T>,
    dis_host: PinnedHostBuffer<T>,
    ref_dev: DeviceBuffer<T>,
    dis_dev: DeviceBuffer<T>,
}

impl<T: Sample + PlaneAs> PackedPair<T> {
    pub(crate) fn new(state: &GpuState, l: &PairLayout) -> Result<Self> {
        let dev = state.device();
        Ok(PackedPair {
            // At least one sample: pairs read in place have nothing to pack.
            ref_host: PinnedHostBuffer::new(dev, l.ref_len.max(1))?,
            dis_host: PinnedHostBuffer::new(dev, l.dis_len.max(1))?,
            ref_dev: DeviceBuffer::new(dev, l.ref_len.max(1))?,
            dis_dev: DeviceBuffer::new(dev, l.dis_len.max(1))?,
        })
    }

    pub(crate) fn fits(&self, l: &PairLayout) -> bool {
        self.ref_dev.len() >= l.ref_len && self.dis_dev.len() >= l.dis_len
    }

    /// Packs `r` and `d` as `l` lays them out and queues their uploads on `stream`.
    pub(crate) fn upload(
        &mut self,
        stream: &crate::gpu::Stream,
        r: &PictureData,
        d: &PictureData,
        l: &PairLayout,
    ) -> Result<()> {
        fill(&mut self.ref_host, r, &l.ref_offs, l.n_planes)?;
        fill(&mut self.dis_host, d, &l.dis_offs, l.n_planes)?;
        self.ref_dev
            .upload_async(stream, &mut self.ref_host, l.ref_len)?;
        self.dis_dev
            .upload_async(stream, &mut self.dis_host, l.dis_len)
    }

    /// Plane `i` of the uploaded reference and distorted pictures.
    pub(crate) fn planes<'a>(
        &'a self,
        r: &PictureData,
        d: &PictureData,
        l: &PairLayout,
        i: usize,
    ) -> (DevicePlane<'a, T>, DevicePlane<'a, T>) {
        let plane = |buf, offset, stride| DevicePlane {
            buf,
            offset,
            w: r.w[i],
            h: r.h[i],
            stride,
        };
        (
            plane(&self.ref_dev, l.ref_offs[i], r.stride[i]),
            plane(&self.dis_dev, l.dis_offs[i], d.stride[i]),
        )
    }
}

/// Element offsets of each plane when the planes are packed back to back, and the total.
fn packed_layout<T: PlaneAs>(pic: &PictureData, n_planes: usize) -> Result<([usize; 3], usize)> {
    let mut offs = [0usize; 3];
    let mut total = 0usize;
    for (i, off) in offs.iter_mut().enumerate().take(n_planes) {
        let plane = T::plane_of(pic, i).ok_or_else(|| Error::inval("sample depth mismatch"))?;
        *off = total;
        total += plane.len();
    }
    Ok((offs, total))
}

fn fill<T: Sample + PlaneAs>(
    host: &mut PinnedHostBuffer<T>,
    pic: &PictureData,
    offs: &[usize; 3],
    n_planes: usize,
) -> Result<()> {
    let dst = host.as_mut_slice()?;
    for (i, &off) in offs.iter().enumerate().take(n_planes) {
        let src = T::plane_of(pic, i).ok_or_else(|| Error::inval("sample depth mismatch"))?;
        dst[off..off + src.len()].copy_from_slice(src);
    }
    Ok(())
}

fn sse_typed<T: Sample + PlaneAs>(
    state: &Arc<GpuState>,
    r: &PictureData,
    d: &PictureData,
    n_planes: usize,
) -> Result<[u64; 3]> {
    let layout = PairLayout::new::<T>(r, d, n_planes)?;
    // No shared luma planes: PSNR uploads every plane of both pictures itself.
    let mut job = Job::<Scratch<T>, T, 0>::start(
        state,
        [],
        |s| s.pair.fits(&layout),
        |st| Scratch::new(st, &layout),
    )?;
    {
        let Parts {
            state,
            stream,
            scratch: s,
            ..
        } = job.parts();
        s.sums_dev.zero(stream)?;
        s.pair.upload(stream, r, d, &layout)?;
        for i in 0..n_planes {
            let (rp, dp) = s.pair.planes(r, d, &layout, i);
            launch::psnr_sse(state, rp, dp, &s.sums_dev, i)?.queue(stream)?;
        }
        s.sums_dev.download_async(stream, &mut s.sums_host, 3)?;
    }
    job.wait(|s, _| {
        let sums = s.sums_host.as_slice()?;
        Ok([sums[0], sums[1], sums[2]])
    })
}

/// Read-back buffers of the device-picture path.
struct Sums {
    dev: DeviceBuffer<u64>,
    host: PinnedHostBuffer<u64>,
}

/// [`sse_typed`] for two pictures already in the state's device memory: the kernels read
/// their planes where the caller wrote them.
fn sse_device<T: Sample + PlaneAs + DevicePlaneAs>(
    state: &Arc<GpuState>,
    (r, fr): (&PictureData, &DeviceFrame),
    (d, fd): (&PictureData, &DeviceFrame),
    n_planes: usize,
) -> Result<[u64; 3]> {
    let mut job = Job::<Sums, T, 0>::start(
        state,
        [],
        |_| true,
        |st| {
            Ok(Sums {
                dev: DeviceBuffer::new(st.device(), 3)?,
                host: PinnedHostBuffer::new(st.device(), 3)?,
            })
        },
    )?;
    let reads = FrameReads::new([fr, fd]);
    {
        let Parts {
            state,
            stream,
            scratch: s,
            ..
        } = job.parts();
        fr.order_after_writes(stream)?;
        fd.order_after_writes(stream)?;
        s.dev.zero(stream)?;
        for i in 0..n_planes {
            launch::psnr_sse(
                state,
                frame_plane::<T>(r, fr, i)?,
                frame_plane::<T>(d, fd, i)?,
                &s.dev,
                i,
            )?
            .queue(stream)?;
        }
        s.dev.download_async(stream, &mut s.host, 3)?;
    }
    let sums = job.wait(|s, _| {
        let sums = s.host.as_slice()?;
        Ok([sums[0], sums[1], sums[2]])
    })?;
    reads.waited();
    Ok(sums)
}

/// Plane `i` of device picture `pic` where the caller's memory (`frame`) holds it.
pub(crate) fn frame_plane<'f, T: Sample + DevicePlaneAs>(
    pic: &PictureData,
    frame: &'f DeviceFrame,
    i: usize,
) -> Result<DevicePlane<'f, T>> {
    let buf = T::device_plane(frame, i)
        .ok_or_else(|| Error::inval(format!("device picture without plane {i} of its depth")))?;
    Ok(DevicePlane {
        buf,
        offset: 0,
        w: pic.w[i],
        h: pic.h[i],
        stride: pic.stride[i],
    })
}

/// Both pictures' device memory on `state`'s device, or None; host copies of the planes in
/// `mask` of a device picture that is not (on another device, or beside a host picture).
pub(crate) fn device_pair<'p>(
    state: &Arc<GpuState>,
    r: &'p PictureData,
    d: &'p PictureData,
    mask: u8,
) -> Result<Option<(&'p DeviceFrame, &'p DeviceFrame)>> {
    let dev = state.device();
    if let (Some(fr), Some(fd)) = (device_frame(r, dev), device_frame(d, dev)) {
        return Ok(Some((fr, fd)));
    }
    r.fetch_host(mask)?;
    d.fetch_host(mask)?;
    Ok(None)
}

/// Sum over each of the first `planes` planes of (reference - distorted)^2 as exact integers:
/// `[Y, U, V]` (0 for planes not summed, and for chroma at 4:0:0). Both pictures must have the
/// same format, depth and size; strides may differ. Planes past `planes` are never read (a
/// semi-planar device frame has no chroma planes when no extractor reads chroma).
pub fn sse_planes(
    state: &Arc<GpuState>,
    reference: &Picture,
    distorted: &Picture,
    planes: usize,
) -> Result<[u64; 3]> {
    let (r, d) = (&**reference, &**distorted);
    if r.pix_fmt != d.pix_fmt || r.bpc != d.bpc || r.w != d.w || r.h != d.h {
        return Err(Error::inval(
            "GPU PSNR: reference and distorted pictures differ in format, depth or size",
        ));
    }
    let n_planes = r.pix_fmt.plane_count().min(planes);
    if n_planes == 0 {
        return Err(Error::inval("GPU PSNR: unknown pixel format"));
    }
    let mask = if n_planes == 1 {
        crate::feature::LUMA
    } else {
        crate::feature::ALL_PLANES
    };
    if let Some((fr, fd)) = device_pair(state, r, d, mask)? {
        return if r.bpc == 8 {
            sse_device::<u8>(state, (r, fr), (d, fd), n_planes)
        } else {
            sse_device::<u16>(state, (r, fr), (d, fd), n_planes)
        };
    }
    if r.bpc == 8 {
        sse_typed::<u8>(state, r, d, n_planes)
    } else {
        sse_typed::<u16>(state, r, d, n_planes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::picture::PixelFormat;
    use crate::testutil::noise_picture;

    /// Reference SSE written independently of the GPU code: walks (x, y) through `sample()`.
    fn cpu_sse(r: &PictureData, d: &PictureData) -> [u64; 3] {
        let mut out = [0u64; 3];
        for (p, o) in out.iter_mut().enumerate().take(r.pix_fmt.plane_count()) {
            for y in 0..r.h[p] {
                for x in 0..r.w[p] {
                    let e = r.sample(p, x, y) as i64 - d.sample(p, x, y) as i64;
                    *o += (e * e) as u64;
                }
            }
        }
        out
    }

    #[test]
    fn gpu_sse_equals_cpu_sse() {
        let Some(state) = crate::gpu::test_state() else {
            return;
        };
        let cases = [
            (PixelFormat::Yuv420p, 8, 576, 324),
            (PixelFormat::Yuv420p, 10, 641, 361),
            (PixelFormat::Yuv422p, 8, 352, 288),
            (PixelFormat::Yuv444p, 12, 33, 17),
            (PixelFormat::Yuv400p, 16, 1920, 1080),
            (PixelFormat::Yuv420p, 8, 1920, 1080),
            (PixelFormat::Yuv420p, 8, 321, 241),
        ];
        for (k, &(fmt, bpc, w, h)) in cases.iter().enumerate() {
            let r = noise_picture(fmt, bpc, w, h, 2 * k as u64 + 1);
            let d = noise_picture(fmt, bpc, w, h, 2 * k as u64 + 2);
            let got = sse_planes(&state, &r, &d, 3).unwrap();
            assert_eq!(got, cpu_sse(&r, &d), "{fmt:?} {bpc}-bit {w}x{h}");
            // Identical pictures: exactly zero.
            assert_eq!(sse_planes(&state, &r, &r, 3).unwrap(), [0, 0, 0]);
        }
    }

    #[test]
    fn gpu_sse_on_parity_clips() {
        let Some(state) = crate::gpu::test_state() else {
            return;
        };
        for clip in [
            "natural_576x324_420p8",
            "natural_640x360_420p10",
            "mandel_352x288_422p8",
        ] {
            let (refs, dists) = crate::testutil::load_parity_clip(clip);
            for (r, d) in refs.iter().zip(&dists).take(3) {
                assert_eq!(
                    sse_planes(&state, r, d, 3).unwrap(),
                    cpu_sse(r, d),
                    "{clip}"
                );
            }
        }
    }

    #[test]
    fn mismatched_pictures_are_invalid() {
        let Some(state) = crate::gpu::test_state() else {
            return;
        };
        let a = noise_picture(PixelFormat::Yuv420p, 8, 64, 64, 1);
        let b = noise_picture(PixelFormat::Yuv420p, 10, 64, 64, 1);
        let c = noise_picture(PixelFormat::Yuv420p, 8, 64, 66, 1);
        assert!(matches!(
            sse_planes(&state, &a, &b, 3),
            Err(Error::Invalid(_))
        ));
        assert!(matches!(
            sse_planes(&state, &a, &c, 3),
            Err(Error::Invalid(_))
        ));
    }
}
