//! Motion on the GPU: kernels/motion.hip computes the same integer SAD as
//! [`super::motion_sad`]; the CPU's `Motion::finish` turns it into scores.

use std::sync::Arc;

use super::launch;
use crate::error::{Error, Result};
use crate::gpu::job::{Job, Parts, Queued, ReadBack, Replay};
use crate::gpu::launch::Sample;
use crate::gpu::planes::PlaneAs;
use crate::gpu::{DeviceBuffer, GpuState, PinnedHostBuffer};
use crate::picture::Picture;

/// Per-row sums and the result, for one picture size.
struct Scratch {
    h: usize,
    rows: DeviceBuffer<u64>,
    out_dev: DeviceBuffer<u64>,
    out_host: PinnedHostBuffer<u64>,
    /// The row kernel (the head), the reduction and the read-back, the same every frame for a
    /// given width and sample size (the scratch is shared by 8- and 16-bit frames of one height).
    tail: Replay<(usize, usize)>,
}

fn queue_typed<T: Sample + PlaneAs>(
    state: &Arc<GpuState>,
    prev: &Picture,
    cur: &Picture,
) -> Result<Queued<'static, u64>> {
    let (w, h) = (cur.w[0], cur.h[0]);
    let mut job = Job::<Scratch, T, 2>::start(
        state,
        [prev, cur],
        |s| s.h == h,
        |st| {
            let dev = st.device();
            // Zeroed here, then after each frame's reduction (by the recorded tail).
            let rows = DeviceBuffer::new(dev, h)?;
            rows.zero(st.stream())?;
            st.stream().synchronize()?;
            Ok(Scratch {
                h,
                rows,
                out_dev: DeviceBuffer::new(dev, 1)?,
                out_host: PinnedHostBuffer::new(dev, 1)?,
                tail: Replay::default(),
            })
        },
    )?;
    {
        let Parts {
            state,
            stream,
            scratch: s,
            luma: [p, c],
        } = job.parts();
        let (rows, out_dev) = (&s.rows, &s.out_dev);
        // The head reads the frame's pictures: recorded with the reduction, its arguments set
        // each frame.
        let (pd, cd, bpc) = (p.plane(w, h), c.plane(w, h), cur.bpc);
        let head = launch::motion_rows(state, pd, cd, bpc, rows)?;
        let rb = ReadBack {
            from: out_dev,
            into: &mut s.out_host,
            count: 1,
            reset: rows,
        };
        s.tail
            .run_and_read_back(&(w, size_of::<T>()), stream, rb, &head, |stream| {
                launch::motion_reduce(state, rows, h, out_dev)?.queue(stream)
            })?;
    }
    // Waits for the read-back (and so for the kernels before it on the stream).
    Ok(job.finish(|s| Ok(s.out_host.as_slice()?[0])))
}

/// Tests: the SAD of the blurred difference of two reference luma planes on the GPU, waited for.
#[cfg(test)]
pub fn motion_sad(state: &Arc<GpuState>, prev: &Picture, cur: &Picture) -> Result<u64> {
    queue_motion_sad(state, prev, cur)?()
}

/// Queues [`motion_sad`] on the calling thread's stream without waiting: the returned closure
/// waits for the read-back and gives the SAD.
pub fn queue_motion_sad(
    state: &Arc<GpuState>,
    prev: &Picture,
    cur: &Picture,
) -> Result<Queued<'static, u64>> {
    if prev.w[0] != cur.w[0] || prev.h[0] != cur.h[0] || prev.bpc != cur.bpc {
        return Err(Error::inval(
            "motion: previous reference differs in size or bit depth",
        ));
    }
    if cur.w[0] < 3 || cur.h[0] < 3 {
        return Err(Error::inval("motion: luma must be at least 3x3"));
    }
    if cur.bpc == 8 {
        queue_typed::<u8>(state, prev, cur)
    } else {
        queue_typed::<u16>(state, prev, cur)
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
                let cpu =
                    super::super::motion_sad(&pair[0], &pair[1], crate::simd::CpuLevel::SCALAR)
                        .unwrap();
                let gpu = motion_sad(&state, &pair[0], &pair[1]).unwrap();
                assert_eq!(gpu, cpu, "{clip} frames {i}..{}", i + 1);
            }
        }
    }

    /// Page-locked pictures (read in place by the uploads) give the CPU's SAD.
    #[test]
    fn page_locked_pictures_give_the_cpu_sad() {
        let Some(state) = crate::gpu::test_state() else {
            return;
        };
        let (refs, _) = load_parity_clip("natural_576x324_420p8");
        let pin =
            |p: &Picture| Arc::new(crate::gpu::pin_picture(state.device(), p.duplicate()).unwrap());
        let pinned: Vec<_> = refs.iter().take(3).map(pin).collect();
        for i in 1..3 {
            let cpu =
                super::super::motion_sad(&refs[i - 1], &refs[i], crate::simd::CpuLevel::SCALAR)
                    .unwrap();
            let gpu = motion_sad(&state, &pinned[i - 1], &pinned[i]).unwrap();
            assert_eq!(gpu, cpu, "frame {i}");
        }
    }
}
