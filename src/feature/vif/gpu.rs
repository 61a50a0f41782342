//! VIF on the GPU: kernels/vif.hip computes the same per-scale integer sums as
//! [`super::compute_accums`], and the CPU's [`super::vif_scores`] finishes them, so the
//! scores are identical to the CPU path.

use super::{log2_table, VifAccums};
use crate::error::{Error, Result};
use crate::gpu::planes::{dense, PlaneAs};
use std::sync::Arc;

use super::launch;
use crate::gpu::job::{Job, Parts, Queued, ReadBack, Replay};
use crate::gpu::launch::Sample;
use crate::gpu::{DeviceBuffer, GpuState, PinnedHostBuffer};
use crate::picture::Picture;
use std::sync::OnceLock;

/// The upper half of [`log2_table`] (entries 2^15..2^16, all the kernels index) packed to
/// stay in the GPU's L1: word `b` covers entries `2^15 + 32 b ..` with the first one's value in its
/// high 32 bits and, in bit `j` of the low 32, whether entry `j` is one above entry `j - 1`
/// (the table rises by 0 or 1 per entry, checked here). 8 KB instead of 64.
pub fn log2_steps() -> &'static [u64] {
    static STEPS: OnceLock<Box<[u64]>> = OnceLock::new();
    STEPS.get_or_init(|| {
        let table = log2_table();
        (0..launch::VIF_LOG2_WORDS)
            .map(|b| {
                let run = &table[(1 << 15) + 32 * b..][..32];
                let mask = (1..32).fold(0u32, |m, j| match run[j] - run[j - 1] {
                    0 => m,
                    1 => m | 1 << j,
                    _ => unreachable!("log2 table rises by more than 1"),
                });
                u64::from(run[0]) << 32 | u64::from(mask)
            })
            .collect()
    })
}

/// Smallest luma side the kernels take: every scale must be wider than its filter's half
/// width for plain mirroring to equal upstream's padding; smaller frames use the CPU.
pub const MIN_SIDE: usize = 72;

/// Device buffers for one picture size and sample type.
struct Scratch<T: Sample> {
    w: usize,
    h: usize,
    _sample: std::marker::PhantomData<T>,
    /// Decimated pictures of scales 1..=3.
    pyr_ref: Vec<DeviceBuffer<u16>>,
    pyr_dis: Vec<DeviceBuffer<u16>>,
    /// [`log2_steps`].
    table: DeviceBuffer<u64>,
    acc_dev: DeviceBuffer<u64>,
    acc_host: PinnedHostBuffer<u64>,
    /// Scale 0 (the head, or its decimation alone), scales 1-3 and the read-back, the same
    /// every frame for a given (gain limit, depth, scale 0 skipped).
    tail: Replay<(u64, u32, bool)>,
}

impl<T: Sample> Scratch<T> {
    fn new(state: &GpuState, w: usize, h: usize) -> Result<Self> {
        let dev = state.device();
        let mut pyr_ref = Vec::new();
        let mut pyr_dis = Vec::new();
        let (mut cw, mut ch) = (w, h);
        for _ in 1..4 {
            cw /= 2;
            ch /= 2;
            pyr_ref.push(DeviceBuffer::new(dev, cw * ch)?);
            pyr_dis.push(DeviceBuffer::new(dev, cw * ch)?);
        }
        // Zeroed here, then after each frame's read-back (by the recorded tail).
        let acc_dev = DeviceBuffer::new(dev, 16)?;
        acc_dev.zero(state.stream())?;
        let mut table = DeviceBuffer::new(dev, launch::VIF_LOG2_WORDS)?;
        table.upload_blocking(state.stream(), log2_steps())?;
        Ok(Scratch {
            w,
            h,
            _sample: std::marker::PhantomData,
            pyr_ref,
            pyr_dis,
            table,
            acc_dev,
            acc_host: PinnedHostBuffer::new(dev, 16)?,
            tail: Replay::default(),
        })
    }
}

fn queue_typed<T: Sample + PlaneAs>(
    state: &Arc<GpuState>,
    r: &Picture,
    d: &Picture,
    egl: f64,
    skip_scale0: bool,
) -> Result<Queued<'static, [VifAccums; 4]>> {
    let (w, h, bpc) = (r.w[0], r.h[0], r.bpc);
    let mut job = Job::<Scratch<T>, T, 2>::start(
        state,
        [r, d],
        |s| (s.w, s.h) == (w, h),
        |st| Scratch::new(st, w, h),
    )?;
    {
        let Parts {
            state,
            stream,
            scratch: s,
            luma: [ref_dev, dis_dev],
        } = job.parts();
        let (r0, d0) = (ref_dev.plane(w, h), dis_dev.plane(w, h));
        let Scratch {
            pyr_ref,
            pyr_dis,
            table,
            acc_dev,
            acc_host,
            tail,
            ..
        } = s;
        let down0 = (
            dense(&pyr_ref[0], w / 2, h / 2),
            dense(&pyr_dis[0], w / 2, h / 2),
        );
        // The head reads the frame's pictures (its arguments change each frame); the rest only
        // reads and writes these buffers.
        let head = if skip_scale0 {
            launch::vif_down(state, r0, d0, 0, bpc, down0.0, down0.1)?
        } else {
            // Scale 0's statistics also write the decimated scale-1 pictures.
            launch::vif_stats(state, r0, d0, 0, bpc, table, egl, acc_dev, Some(down0))?
        };
        let rb = ReadBack {
            from: acc_dev,
            into: acc_host,
            count: 16,
            reset: acc_dev,
        };
        tail.run_and_read_back(
            &(egl.to_bits(), bpc, skip_scale0),
            stream,
            rb,
            &head,
            |stream| {
                let (mut cw, mut ch) = (w / 2, h / 2);
                for scale in 1..4 {
                    let (pr, pd) = (
                        dense(&pyr_ref[scale - 1], cw, ch),
                        dense(&pyr_dis[scale - 1], cw, ch),
                    );
                    launch::vif_stats(state, pr, pd, scale, bpc, table, egl, acc_dev, None)?
                        .queue(stream)?;
                    if scale < 3 {
                        let next = (
                            dense(&pyr_ref[scale], cw / 2, ch / 2),
                            dense(&pyr_dis[scale], cw / 2, ch / 2),
                        );
                        launch::vif_down(state, pr, pd, scale, bpc, next.0, next.1)?
                            .queue(stream)?;
                    }
                    cw /= 2;
                    ch /= 2;
                }
                Ok(())
            },
        )?;
    }
    Ok(job.finish(|s| {
        // Waits for the read-back (and so for every kernel before it on the stream).
        let a = s.acc_host.as_slice()?;
        let mut out = [VifAccums::default(); 4];
        for (i, o) in out.iter_mut().enumerate() {
            // The device sums in two's complement; reinterpret as signed.
            *o = VifAccums {
                num_log: a[4 * i] as i64,
                den_log: a[4 * i + 1] as i64,
                num_non_log: a[4 * i + 2] as i64,
                den_non_log: a[4 * i + 3] as i64,
            };
        }
        Ok(out)
    }))
}

/// Tests: the four scales' integer sums computed on the GPU, waited for (same contract as the CPU's
/// `compute_accums`; frames smaller than [`MIN_SIDE`] are rejected, callers use the CPU).
#[cfg(test)]
pub fn compute_accums(
    state: &Arc<GpuState>,
    reference: &Picture,
    distorted: &Picture,
    egl: f64,
    skip_scale0: bool,
) -> Result<[VifAccums; 4]> {
    queue_accums(state, reference, distorted, egl, skip_scale0)?()
}

/// Queues [`compute_accums`] on the calling thread's stream without waiting: the returned
/// closure waits for the read-back and gives the sums.
pub fn queue_accums(
    state: &Arc<GpuState>,
    reference: &Picture,
    distorted: &Picture,
    egl: f64,
    skip_scale0: bool,
) -> Result<Queued<'static, [VifAccums; 4]>> {
    let (r, d) = (reference, distorted);
    if r.bpc != d.bpc || r.w[0] != d.w[0] || r.h[0] != d.h[0] {
        return Err(Error::inval("vif: reference and distorted pictures differ"));
    }
    if r.w[0] < MIN_SIDE || r.h[0] < MIN_SIDE {
        return Err(Error::inval("vif: frame too small for the GPU path"));
    }
    if r.bpc == 8 {
        queue_typed::<u8>(state, r, d, egl, skip_scale0)
    } else {
        queue_typed::<u16>(state, r, d, egl, skip_scale0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::load_parity_clip;

    /// The kernels' lookup (kernels/vif.hip `vif_log2_16`) on the packed words gives every
    /// entry of the table they index, and nothing past it is addressed.
    #[test]
    fn packed_log2_steps_give_every_table_entry() {
        let (table, steps) = (log2_table(), log2_steps());
        assert_eq!(steps.len(), launch::VIF_LOG2_WORDS);
        for i in 1u32 << 15..1 << 16 {
            let word = steps[(i >> 5) as usize - launch::VIF_LOG2_WORDS];
            let got = (word >> 32) as u32 + ((word as u32) << (31 - (i & 31))).count_ones();
            assert_eq!(got, u32::from(table[i as usize]), "entry {i}");
        }
        // First entries of the first and last runs; bit 0 (entry j - 1 outside the run) unused.
        assert_eq!((steps[0] >> 32, steps[1023] >> 32), (30720, 32767));
        assert!(steps.iter().all(|w| w & 1 == 0));
    }

    #[test]
    fn gpu_accums_equal_cpu_accums_on_parity_clips() {
        let Some(state) = crate::gpu::test_state() else {
            return;
        };
        for clip in crate::testutil::PARITY_CLIPS {
            let (refs, dists) = load_parity_clip(clip);
            for (i, (r, d)) in refs.iter().zip(&dists).enumerate().take(4) {
                // Scale 0 computed (decimation fused into its statistics) and skipped
                // (decimation on its own).
                for (egl, skip) in [(100.0, false), (1.0, false), (100.0, true)] {
                    let cpu = super::super::compute_accums(
                        r,
                        d,
                        egl,
                        skip,
                        crate::simd::CpuLevel::default(),
                    )
                    .unwrap();
                    let gpu = compute_accums(&state, r, d, egl, skip).unwrap();
                    assert_eq!(gpu, cpu, "{clip} frame {i} egl {egl} skip_scale0 {skip}");
                }
            }
        }
    }

    /// Page-locked pictures (read in place by the uploads) give the CPU's VIF.
    #[test]
    fn page_locked_pictures_give_the_cpu_accums() {
        let Some(state) = crate::gpu::test_state() else {
            return;
        };
        let (refs, dists) = load_parity_clip("natural_576x324_420p8");
        let pin =
            |p: &Picture| Arc::new(crate::gpu::pin_picture(state.device(), p.duplicate()).unwrap());
        for i in 0..3 {
            let (r, d) = (pin(&refs[i]), pin(&dists[i]));
            assert!(r.pinned().is_some() && d.pinned().is_some());
            let cpu = super::super::compute_accums(
                &refs[i],
                &dists[i],
                100.0,
                false,
                crate::simd::CpuLevel::default(),
            )
            .unwrap();
            let gpu = compute_accums(&state, &r, &d, 100.0, false).unwrap();
            assert_eq!(gpu, cpu, "frame {i}");
        }
    }

    /// Pictures of an upstream-style pool (HOST, `vmaf_preallocate_pictures`) are page-locked at
    /// their first upload, keep the lock while they wait in the pool, are read in place from then
    /// on, and give the CPU's VIF; the pool unlocks them when it closes.
    #[test]
    fn pooled_pictures_are_locked_at_their_first_upload() {
        use crate::picture::pool::PicturePool;
        let Some(state) = crate::gpu::test_state() else {
            return;
        };
        let (refs, dists) = load_parity_clip("natural_1920x1080_420p8");
        let (r0, d0) = (refs[0].clone(), dists[0].clone());
        let ref_pool = PicturePool::new(1, move || Ok(r0.duplicate())).unwrap();
        let dist_pool = PicturePool::new(1, move || Ok(d0.duplicate())).unwrap();
        let cpu = super::super::compute_accums(
            &refs[0],
            &dists[0],
            100.0,
            false,
            crate::simd::CpuLevel::default(),
        )
        .unwrap();
        for round in 0..3 {
            let r = Arc::new(ref_pool.fetch().unwrap());
            let d = Arc::new(dist_pool.fetch().unwrap());
            assert_eq!(
                r.pinned().is_some(),
                round > 0,
                "round {round}: locked from the first upload on"
            );
            let gpu = compute_accums(&state, &r, &d, 100.0, false).unwrap();
            assert_eq!(gpu, cpu, "round {round}");
            let reg = r
                .pinned()
                .and_then(|p| p.as_any().downcast_ref::<crate::gpu::HostRegistration>());
            assert!(
                reg.is_some(),
                "round {round}: a registration of this device"
            );
        }
        assert_eq!(ref_pool.close(), 0);
        assert_eq!(dist_pool.close(), 0);
    }
}
