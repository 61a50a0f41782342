//! Motion on the GPU: kernels/motion.hip computes the same integer SAD as
//! [`super::motion::motion_sad`]; the CPU's `Motion::finish` turns it into scores.

use super::psnr_gpu::PlaneAs;
use super::vif_gpu::pack_luma;
use crate::error::{Error, Result};
use crate::gpu::kernels::{self, DevicePlane, Sample};
use crate::gpu::{DeviceBuffer, GpuState, PinnedHostBuffer};
use crate::picture::PictureData;

struct Scratch<T: Sample> {
    w: usize,
    h: usize,
    prev_host: PinnedHostBuffer<T>,
    cur_host: PinnedHostBuffer<T>,
    prev_dev: DeviceBuffer<T>,
    cur_dev: DeviceBuffer<T>,
    rows: DeviceBuffer<u64>,
    out_dev: DeviceBuffer<u64>,
    out_host: PinnedHostBuffer<u64>,
}

impl<T: Sample> Scratch<T> {
    fn new(state: &GpuState, w: usize, h: usize) -> Result<Self> {
        let dev = state.device();
        Ok(Scratch {
            w,
            h,
            prev_host: PinnedHostBuffer::new(dev, w * h)?,
            cur_host: PinnedHostBuffer::new(dev, w * h)?,
            prev_dev: DeviceBuffer::new(dev, w * h)?,
            cur_dev: DeviceBuffer::new(dev, w * h)?,
            rows: DeviceBuffer::new(dev, h)?,
            out_dev: DeviceBuffer::new(dev, 1)?,
            out_host: PinnedHostBuffer::new(dev, 1)?,
        })
    }
}

fn sad_typed<T: Sample + PlaneAs>(
    state: &GpuState,
    prev: &PictureData,
    cur: &PictureData,
) -> Result<u64> {
    let (w, h) = (cur.w[0], cur.h[0]);
    state.with_scratch(|slot: &mut Option<Scratch<T>>| {
        if slot.as_ref().is_none_or(|s| (s.w, s.h) != (w, h)) {
            *slot = None;
            *slot = Some(Scratch::new(state, w, h)?);
        }
        let s = slot.as_mut().ok_or_else(|| Error::inval("no scratch"))?;
        let stream = &*state.lane_stream()?;
        pack_luma(prev, s.prev_host.as_mut_slice()?)?;
        pack_luma(cur, s.cur_host.as_mut_slice()?)?;
        s.rows.zero(stream)?;
        s.prev_dev.upload_async(stream, &mut s.prev_host, w * h)?;
        s.cur_dev.upload_async(stream, &mut s.cur_host, w * h)?;
        let plane = |buf| DevicePlane {
            buf,
            offset: 0,
            w,
            h,
            stride: w,
        };
        kernels::motion_sad(
            state,
            stream,
            plane(&s.prev_dev),
            plane(&s.cur_dev),
            cur.bpc,
            &s.rows,
            &s.out_dev,
        )?;
        s.out_dev.download_async(stream, &mut s.out_host, 1)?;
        Ok(s.out_host.as_slice()?[0])
    })
}

/// SAD of the blurred difference of two reference luma planes, on the GPU.
pub fn motion_sad(state: &GpuState, prev: &PictureData, cur: &PictureData) -> Result<u64> {
    if prev.w[0] != cur.w[0] || prev.h[0] != cur.h[0] || prev.bpc != cur.bpc {
        return Err(Error::inval(
            "motion: previous reference differs in size or bit depth",
        ));
    }
    if cur.w[0] < 3 || cur.h[0] < 3 {
        return Err(Error::inval("motion: luma must be at least 3x3"));
    }
    if cur.bpc == 8 {
        sad_typed::<u8>(state, prev, cur)
    } else {
        sad_typed::<u16>(state, prev, cur)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{load_parity_clip, PARITY_CLIPS};

    #[test]
    fn gpu_sad_equals_cpu_sad_on_parity_clips() {
        let Some(state) = crate::gpu::test_state() else {
            return;
        };
        for clip in PARITY_CLIPS {
            let (refs, _) = load_parity_clip(clip);
            for (i, pair) in refs.windows(2).enumerate().take(5) {
                let cpu = super::super::motion::motion_sad(&pair[0], &pair[1]).unwrap();
                let gpu = motion_sad(&state, &pair[0], &pair[1]).unwrap();
                assert_eq!(gpu, cpu, "{clip} frames {i}..{}", i + 1);
            }
        }
    }
}
