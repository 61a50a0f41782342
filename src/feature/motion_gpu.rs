//! Motion on the GPU: kernels/motion.hip computes the same integer SAD as
//! [`super::motion::motion_sad`]; the CPU's `Motion::finish` turns it into scores.

use super::gpu_frames::with_luma;
use super::gpu_frames::{dense, PlaneAs};
use crate::error::{Error, Result};
use crate::gpu::kernels::{self, Sample};
use crate::gpu::{DeviceBuffer, GpuState, PinnedHostBuffer};
use crate::picture::Picture;

/// Per-row sums and the result, for one picture size.
struct Scratch {
    h: usize,
    rows: DeviceBuffer<u64>,
    out_dev: DeviceBuffer<u64>,
    out_host: PinnedHostBuffer<u64>,
}

fn sad_typed<T: Sample + PlaneAs>(state: &GpuState, prev: &Picture, cur: &Picture) -> Result<u64> {
    let (w, h) = (cur.w[0], cur.h[0]);
    state.with_scratch(|slot: &mut Option<Scratch>| {
        if slot.as_ref().is_none_or(|s| s.h != h) {
            *slot = None;
            let dev = state.device();
            *slot = Some(Scratch {
                h,
                rows: DeviceBuffer::new(dev, h)?,
                out_dev: DeviceBuffer::new(dev, 1)?,
                out_host: PinnedHostBuffer::new(dev, 1)?,
            });
        }
        let s = slot.as_mut().ok_or_else(|| Error::inval("no scratch"))?;
        let stream = &*state.lane_stream()?;
        s.rows.zero(stream)?;
        with_luma(
            state,
            stream,
            [prev, cur],
            |[p, c]: [&DeviceBuffer<T>; 2]| {
                kernels::motion_sad(
                    state,
                    stream,
                    dense(p, w, h),
                    dense(c, w, h),
                    cur.bpc,
                    &s.rows,
                    &s.out_dev,
                )?;
                // Read back inside: the planes stay held until the stream is done with them.
                s.out_dev.download_async(stream, &mut s.out_host, 1)?;
                Ok(s.out_host.as_slice()?[0])
            },
        )
    })
}

/// SAD of the blurred difference of two reference luma planes, on the GPU.
pub fn motion_sad(state: &GpuState, prev: &Picture, cur: &Picture) -> Result<u64> {
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
