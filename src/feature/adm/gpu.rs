//! ADM on the GPU: kernels/adm.hip computes the same per-scale [`ScaleAccum`]s as
//! [`super::cpu::accumulate`], and the CPU's [`super::finish`] turns them into scores, so
//! the results are identical to the CPU path.
//!
//! Per scale two kernels run: the wavelet level of both pictures (which also decouples and
//! CSF-weights every pixel of the CSF window into threshold maps), then one block per score
//! row for the denominator and both numerators, rounding each row before it is added.

use super::cpu::{band_size, csf_window, scale_shifts, score_window, MIN_SIDE};
use super::tables::div_lookup;
use super::{AdmParams, ScaleAccum, NUM_SCALES};
use crate::error::{Error, Result};
use std::sync::Arc;

use super::launch::{self, AdmBuffers, AdmScale, ADM_LUT_LEN};
use crate::gpu::job::{Job, Parts, Queued, ReadBack, Replay};
use crate::gpu::launch::{DevicePlane, Sample};
use crate::gpu::planes::PlaneAs;
use crate::gpu::{DeviceBuffer, GpuState, PinnedHostBuffer};
use crate::picture::Picture;

/// Accumulator slots per scale: den h, v, d; num h, v, d; aim h, v, d.
const SLOTS: usize = 9;

/// Device buffers for one picture size and sample type.
struct Scratch<T: Sample> {
    w: usize,
    h: usize,
    _sample: std::marker::PhantomData<T>,
    /// Approximation bands, ping-pong between scales: `[picture][slot]`.
    approx: [[DeviceBuffer<i32>; 2]; 2],
    /// The reference bands and their decoupled parts of the scale being processed (6 planes
    /// at scale 0, 9 smaller ones later: `AdmBuffers::bands`).
    bands: DeviceBuffer<i32>,
    /// Four threshold-map planes.
    maps: DeviceBuffer<i32>,
    lut: DeviceBuffer<i32>,
    out_dev: DeviceBuffer<u64>,
    out_host: PinnedHostBuffer<u64>,
    /// Scale 0's wavelet (the head, its arguments set each frame) and everything after it, the
    /// same every frame for given parameters.
    tail: Replay<AdmParams>,
}

impl<T: Sample> Scratch<T> {
    fn new(state: &GpuState, w: usize, h: usize) -> Result<Self> {
        let dev = state.device();
        let (bw, bh) = band_size(w, h, 0);
        let plane = bw * bh;
        let buf = || DeviceBuffer::<i32>::new(dev, plane);
        // Zeroed here, then after each frame's read-back (by the recorded tail).
        let out_dev = DeviceBuffer::new(dev, SLOTS * NUM_SCALES)?;
        out_dev.zero(state.stream())?;
        let mut lut = DeviceBuffer::new(dev, ADM_LUT_LEN)?;
        lut.upload_blocking(state.stream(), &div_lookup()[..])?;
        Ok(Scratch {
            w,
            h,
            _sample: std::marker::PhantomData,
            approx: [[buf()?, buf()?], [buf()?, buf()?]],
            bands: DeviceBuffer::new(dev, launch::adm_bands_len(w, h))?,
            maps: DeviceBuffer::new(dev, 4 * plane)?,
            lut,
            out_dev,
            out_host: PinnedHostBuffer::new(dev, SLOTS * NUM_SCALES)?,
            tail: Replay::default(),
        })
    }
}

/// Kernel parameters of `scale` for a `w`x`h` frame.
pub(crate) fn scale_params(w: usize, h: usize, scale: usize, p: &AdmParams) -> AdmScale {
    let (bw, bh) = band_size(w, h, scale);
    let sh = scale_shifts(scale, bw, bh);
    let active = scale != 0 || !p.skip_scale0;
    let (csf, score) = if active {
        let ((cl, cr), (ct, cb)) = (csf_window(bw), csf_window(bh));
        let ((sl, sr), (st, sb)) = (score_window(bw), score_window(bh));
        ([cl, cr, ct, cb], [sl, sr, st, sb])
    } else {
        ([0; 4], [0; 4])
    };
    AdmScale {
        scale,
        csf,
        score,
        den_row: sh.den_row,
        den_cube: sh.den_cube,
        cm_cube: sh.cm_cube,
        cm_row: sh.cm_row,
        irf: if scale == 0 {
            p.irf0.map(u32::from)
        } else {
            p.irf123[scale - 1]
        },
        egl: p.egl,
        aim: !p.skip_aim,
    }
}

/// A dense `w`x`h` approximation band at the start of `buf`.
fn band_plane(buf: &DeviceBuffer<i32>, w: usize, h: usize) -> DevicePlane<'_, i32> {
    DevicePlane {
        buf,
        offset: 0,
        w,
        h,
        stride: w,
    }
}

fn queue_typed<T: Sample + PlaneAs>(
    state: &Arc<GpuState>,
    r: &Picture,
    d: &Picture,
    p: &AdmParams,
) -> Result<Queued<'static, [ScaleAccum; NUM_SCALES]>> {
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
        let b = AdmBuffers {
            bands: &s.bands,
            maps: &s.maps,
            lut: &s.lut,
        };
        let [ar, ad] = &s.approx;
        // Scale s writes approximation slot s % 2 and reads the other one. Only scale 0's
        // wavelet reads the frame's pictures (the head, its arguments set each frame); the
        // rest is recorded once and replayed.
        let (rd, dd) = (ref_dev.plane(w, h), dis_dev.plane(w, h));
        let sp0 = scale_params(w, h, 0, p);
        let head = launch::adm_dwt0(state, rd, dd, bpc, &ar[0], &ad[0], &b, &sp0)?;
        let out_dev = &s.out_dev;
        let rb = ReadBack {
            from: out_dev,
            into: &mut s.out_host,
            count: SLOTS * NUM_SCALES,
            reset: out_dev,
        };
        s.tail.run_and_read_back(p, stream, rb, &head, |stream| {
            let (mut pw, mut ph) = (w, h);
            for scale in 0..NUM_SCALES {
                let (bw, bh) = band_size(w, h, scale);
                let sp = scale_params(w, h, scale, p);
                let (cur, prev) = (scale % 2, (scale + 1) % 2);
                if scale > 0 {
                    launch::adm_dwt123(
                        state,
                        band_plane(&ar[prev], pw, ph),
                        band_plane(&ad[prev], pw, ph),
                        &ar[cur],
                        &ad[cur],
                        &b,
                        &sp,
                    )?
                    .queue(stream)?;
                }
                // An empty score window (a skipped scale 0) has nothing to sum.
                if let Some(cm) = launch::adm_cm(state, &b, bw, bh, &sp, out_dev, SLOTS * scale)? {
                    cm.queue(stream)?;
                }
                (pw, ph) = (bw, bh);
            }
            Ok(())
        })?;
    }
    Ok(job.finish(|s| {
        // Waits for the read-back (and so for every kernel before it on the stream).
        let o = s.out_host.as_slice()?;
        let mut acc = [ScaleAccum::default(); NUM_SCALES];
        for (scale, a) in acc.iter_mut().enumerate() {
            let v = &o[SLOTS * scale..SLOTS * (scale + 1)];
            // Numerators were summed in two's complement: reinterpret as signed.
            *a = ScaleAccum {
                den: [v[0], v[1], v[2]],
                num: [v[3] as i64, v[4] as i64, v[5] as i64],
                aim: [v[6] as i64, v[7] as i64, v[8] as i64],
            };
        }
        Ok(acc)
    }))
}

/// Tests: the per-scale accumulators of one picture pair computed on the GPU, waited for (same
/// contract as the CPU's `accumulate`). Frames smaller than [`MIN_SIDE`] are rejected.
#[cfg(test)]
pub fn accumulate(
    state: &Arc<GpuState>,
    reference: &Picture,
    distorted: &Picture,
    p: &AdmParams,
) -> Result<[ScaleAccum; NUM_SCALES]> {
    queue_accumulate(state, reference, distorted, p)?()
}

/// Queues [`accumulate`] on the calling thread's stream without waiting: the returned closure
/// waits for the read-back and gives the accumulators.
pub fn queue_accumulate(
    state: &Arc<GpuState>,
    reference: &Picture,
    distorted: &Picture,
    p: &AdmParams,
) -> Result<Queued<'static, [ScaleAccum; NUM_SCALES]>> {
    let (r, d) = (reference, distorted);
    if r.bpc != d.bpc || r.w[0] != d.w[0] || r.h[0] != d.h[0] {
        return Err(Error::inval("adm: reference and distorted pictures differ"));
    }
    if r.w[0] < MIN_SIDE || r.h[0] < MIN_SIDE {
        return Err(Error::inval("adm: frame too small for the GPU path"));
    }
    if r.bpc == 8 {
        queue_typed::<u8>(state, r, d, p)
    } else {
        queue_typed::<u16>(state, r, d, p)
    }
}

#[cfg(test)]
mod tests {
    use super::super::cpu::{self, Luma, Scratch as CpuScratch};
    use super::super::Adm;
    use super::*;
    use crate::feature::{Dict, Extractor, FrameInput, Scores};
    use crate::picture::{PictureData, PlaneRef};
    use crate::testutil::{load_parity_clip, PARITY_CLIPS};

    fn cpu_accumulate(r: &PictureData, d: &PictureData, p: &AdmParams) -> [ScaleAccum; 4] {
        fn luma(x: &PictureData) -> Luma<'_> {
            match x.plane(0) {
                PlaneRef::U8(v) => Luma::U8(v),
                PlaneRef::U16(v) => Luma::U16(v),
            }
        }
        let mut s = CpuScratch::default();
        cpu::accumulate(
            crate::simd::CpuLevel::SCALAR,
            luma(r),
            luma(d),
            r.stride[0],
            d.stride[0],
            r.w[0],
            r.h[0],
            r.bpc,
            p,
            &mut s,
        )
    }

    fn adm(opts: &[(&str, &str)]) -> Adm {
        let mut dict = Dict::new();
        for (k, v) in opts {
            dict.set(k, v);
        }
        Adm::new(&dict).unwrap()
    }

    /// Option sets: default, egl 1, vmaf v1.0.16's, and the two skips.
    const OPTION_SETS: [&[(&str, &str)]; 5] = [
        &[],
        &[("adm_enhn_gain_limit", "1.0")],
        &[
            ("adm_csf_mode", "2"),
            ("adm_dlm_weight", "0.7"),
            ("adm_enhn_gain_limit", "1"),
            ("adm_min_val", "0.5"),
            ("adm_noise_weight", "0.02"),
        ],
        &[("adm_skip_aim", "true")],
        &[("adm_skip_scale0", "true"), ("adm_enhn_gain_limit", "1.2")],
    ];

    #[test]
    fn gpu_accums_equal_cpu_accums_on_parity_clips() {
        let Some(state) = crate::gpu::test_state() else {
            return;
        };
        let extractors: Vec<Adm> = OPTION_SETS.iter().map(|o| adm(o)).collect();
        let mut n = 0;
        for clip in PARITY_CLIPS {
            let (refs, dists) = load_parity_clip(clip);
            for (i, (r, d)) in refs.iter().zip(&dists).enumerate().take(3) {
                for (k, e) in extractors.iter().enumerate() {
                    let cpu = cpu_accumulate(r, d, e.params());
                    let gpu = accumulate(&state, r, d, e.params()).unwrap();
                    assert_eq!(gpu, cpu, "{clip} frame {i} option set {k}");
                    n += 1;
                }
            }
        }
        assert_eq!(n, PARITY_CLIPS.len() * 3 * OPTION_SETS.len());
    }

    /// The extractor with a GPU prints exactly what it prints without one (and small frames
    /// fall back to the CPU).
    #[test]
    fn gpu_extractor_scores_equal_cpu_scores() {
        let Some(state) = crate::gpu::test_state() else {
            return;
        };
        let (refs, dists) = load_parity_clip("natural_320x180_420p12");
        let cpu = adm(&[("debug", "true")]);
        let gpu = adm(&[("debug", "true")]).with_gpu(crate::gpu::GpuSet::new(vec![state]));
        for (i, (r, d)) in refs.iter().zip(&dists).enumerate().take(3) {
            let input = FrameInput::pair(i, r, d);
            let (mut a, mut b) = (Scores::new(), Scores::new());
            cpu.extract(&input, &mut a).unwrap();
            gpu.extract(&input, &mut b).unwrap();
            assert_eq!(a, b, "frame {i}");
        }
    }
}
