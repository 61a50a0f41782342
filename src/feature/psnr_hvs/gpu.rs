//! psnr_hvs on the GPU: kernels/psnr_hvs.hip computes every block's 64 weighted squared errors
//! with the CPU's operations in its order and precision, then adds each plane's terms in
//! raster order in one float, as the CPU does (that sum has no parallel form with the same
//! rounding, so it runs sequentially, on the device). The host gets three floats per frame and
//! finishes with the CPU's own normalisation.

use super::device_tables;
use super::launch::{self, blocks, TABLE_LEN};
use crate::error::{Error, Result};
use crate::feature::psnr::gpu::{device_pair, frame_plane, PackedPair, PairLayout};
use crate::gpu::frames::{DeviceFrame, FrameReads};
use crate::gpu::job::{Job, Parts};
use crate::gpu::launch::Sample;
use crate::gpu::planes::PlaneAs;
use crate::gpu::{DeviceBuffer, GpuState, PinnedHostBuffer};
use crate::picture::PictureData;
use std::sync::Arc;

/// Buffers of one frame in flight, sized for the largest pictures seen.
struct Scratch<T: Sample> {
    pair: PackedPair<T>,
    tables: DeviceBuffer<f32>,
    terms: DeviceBuffer<f32>,
    sums_dev: DeviceBuffer<f32>,
    sums_host: PinnedHostBuffer<f32>,
}

impl<T: Sample + PlaneAs> Scratch<T> {
    fn new(state: &GpuState, layout: &PairLayout, terms: usize) -> Result<Self> {
        let dev = state.device();
        let host = device_tables();
        let mut tables = DeviceBuffer::new(dev, host.len())?;
        tables.upload_blocking(state.stream(), &host)?;
        Ok(Scratch {
            pair: PackedPair::new(state, layout)?,
            tables,
            terms: DeviceBuffer::new(dev, terms.max(1))?,
            sums_dev: DeviceBuffer::new(dev, 3)?,
            sums_host: PinnedHostBuffer::new(dev, 3)?,
        })
    }

    fn fits(&self, layout: &PairLayout, terms: usize) -> bool {
        self.pair.fits(layout) && self.terms.len() >= terms
    }
}

/// Per plane: upstream's running sum of the plane's terms and their count (the CPU's
/// `plane_sum`), for two pictures of the same format and size: host pictures, or with
/// `frames` the device memory of both, read in place.
fn sums_typed<T: Sample + PlaneAs>(
    state: &Arc<GpuState>,
    r: &PictureData,
    d: &PictureData,
    frames: Option<(&DeviceFrame, &DeviceFrame)>,
) -> Result<[(f32, i32); 3]> {
    let layout = PairLayout::new::<T>(r, d, 3)?;
    let mut starts = [0usize; 4];
    for p in 0..3 {
        starts[p + 1] = starts[p] + 64 * blocks(r.w[p]) * blocks(r.h[p]);
    }
    let n_terms = starts[3];
    let mut job = Job::<Scratch<T>, T, 0>::start(
        state,
        [],
        |s| s.fits(&layout, n_terms),
        |st| Scratch::new(st, &layout, n_terms),
    )?;
    {
        let Parts {
            state,
            stream,
            scratch: s,
            ..
        } = job.parts();
        match frames {
            Some((fr, fd)) => {
                fr.order_after_writes(stream)?;
                fd.order_after_writes(stream)?;
            }
            None => s.pair.upload(stream, r, d, &layout)?,
        }
        for p in 0..3 {
            if starts[p + 1] == starts[p] {
                continue;
            }
            let (rp, dp) = match frames {
                Some((fr, fd)) => (frame_plane::<T>(r, fr, p)?, frame_plane::<T>(d, fd, p)?),
                None => s.pair.planes(r, d, &layout, p),
            };
            launch::psnr_hvs_terms(state, rp, dp, &s.tables, p * TABLE_LEN, &s.terms, starts[p])?
                .queue(stream)?;
        }
        launch::psnr_hvs_sum(state, &s.terms, starts, &s.sums_dev)?.queue(stream)?;
        s.sums_dev.download_async(stream, &mut s.sums_host, 3)?;
    }
    let reads = frames.map(|(fr, fd)| FrameReads::new([fr, fd]));
    let sums = job.wait(|s, _| {
        let sums = s.sums_host.as_slice()?;
        // The CPU counts terms in an i32 too.
        let count = |p: usize| (starts[p + 1] - starts[p]) as i32;
        Ok(std::array::from_fn(|p| (sums[p], count(p))))
    })?;
    if let Some(reads) = reads {
        reads.waited();
    }
    Ok(sums)
}

/// Per plane of a 4:2:0, 4:2:2 or 4:4:4 picture pair: upstream's running sum of the plane's
/// weighted squared errors and their count, identical to the CPU's. Pictures in device memory
/// are read in place (through host copies when they are another device's, or beside a host
/// picture).
pub fn plane_sums(
    state: &Arc<GpuState>,
    r: &PictureData,
    d: &PictureData,
) -> Result<[(f32, i32); 3]> {
    if r.pix_fmt.plane_count() != 3
        || r.pix_fmt != d.pix_fmt
        || r.bpc != d.bpc
        || r.w != d.w
        || r.h != d.h
    {
        return Err(Error::inval(
            "GPU psnr_hvs: pictures differ in format or size, or have no chroma",
        ));
    }
    let frames = device_pair(state, r, d, crate::feature::ALL_PLANES)?;
    if r.bpc == 8 {
        sums_typed::<u8>(state, r, d, frames)
    } else {
        sums_typed::<u16>(state, r, d, frames)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{plane_sums as cpu_sums, PsnrHvs};
    use super::plane_sums;
    use crate::feature::{Dict, Extractor, FrameInput, Scores};
    use crate::gpu::GpuSet;
    use crate::picture::PixelFormat;
    use crate::testutil::{load_parity_clip, noise_picture, PARITY_CLIPS};

    /// Every plane sum of every parity clip frame and of noise at odd sizes and 8/10/12 bits,
    /// and the extractor's scores, bit for bit against the CPU.
    #[test]
    fn gpu_psnr_hvs_equals_cpu() {
        let Some(state) = crate::gpu::test_state() else {
            return;
        };
        let bits = |v: [(f32, i32); 3]| v.map(|(s, n)| (s.to_bits(), n));
        for clip in PARITY_CLIPS {
            let (refs, dists) = load_parity_clip(clip);
            for (i, (r, d)) in refs.iter().zip(&dists).enumerate() {
                let got = plane_sums(&state, r, d).unwrap();
                assert_eq!(bits(got), bits(cpu_sums(r, d)), "{clip} frame {i}");
            }
        }
        for (k, (fmt, bpc, w, h)) in [
            (PixelFormat::Yuv420p, 8, 333, 217),
            (PixelFormat::Yuv422p, 10, 64, 9),
            (PixelFormat::Yuv444p, 12, 129, 71),
            (PixelFormat::Yuv420p, 8, 14, 14),
        ]
        .into_iter()
        .enumerate()
        {
            let r = noise_picture(fmt, bpc, w, h, 70 + k as u64);
            let d = noise_picture(fmt, bpc, w, h, 90 + k as u64);
            let got = plane_sums(&state, &r, &d).unwrap();
            assert_eq!(
                bits(got),
                bits(cpu_sums(&r, &d)),
                "{fmt:?} {bpc}-bit {w}x{h}"
            );
        }
        let set = GpuSet::new(vec![state]).unwrap();
        let cpu = PsnrHvs::new(&Dict::new()).unwrap();
        let gpu = PsnrHvs::new(&Dict::new()).unwrap().with_gpu(Some(set));
        let (refs, dists) = load_parity_clip("natural_1920x1080_420p8");
        for (i, (r, d)) in refs.iter().zip(&dists).enumerate().take(3) {
            let (mut a, mut b) = (Scores::new(), Scores::new());
            cpu.extract(&FrameInput::pair(i, r, d), &mut a).unwrap();
            gpu.extract(&FrameInput::pair(i, r, d), &mut b).unwrap();
            let bits = |s: &Scores| {
                s.iter()
                    .map(|(n, v)| (n.clone(), v.to_bits()))
                    .collect::<Vec<_>>()
            };
            assert_eq!(bits(&a), bits(&b), "frame {i}");
        }
    }
}
