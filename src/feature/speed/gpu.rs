//! SpEED on the GPU: kernels/speed.hip turns each pair of planes into the normalised decimated
//! planes and their covariance matrices, exactly the CPU's values; the host finishes with the
//! CPU's own code (`gsm::score_from_moments`: eigenvalues, GSM solve, entropies, score), so
//! both paths give the same scores bit for bit.
//!
//! `speed_chroma` stages the U and V planes of both pictures and uploads them (one job, both
//! planes); `speed_temporal` reads the luma planes of the frame and of its predecessor from the
//! state's uploaded-plane cache, which the other luma features share.

use std::sync::Arc;

use super::gsm::{score_from_moments, Mat};
use super::launch::{self, DeviceAxis, PairPlanes};
use super::scale::{antialias_filter, mean_filter, prescales, resample_axis};
use super::{Dims, Params, NB};
use crate::error::{Error, Result};
use crate::feature::ssim::tools::luma_scaler;
use crate::gpu::frames::{device_frame, HeldFrameReads};
use crate::gpu::job::{Job, Parts, Queued, Replay};
use crate::gpu::launch::{DevicePlane, Sample};
use crate::gpu::planes::{host_registration, PlaneAs};
use crate::gpu::{DeviceBuffer, GpuState, PinnedHostBuffer, Stream};
use crate::picture::{Picture, PictureData};
use crate::simd::CpuLevel;

/// The filters and resampling tables of one geometry and option set, on the device.
struct Consts {
    dims: (usize, usize, usize, usize),
    params: (u32, u64, u32),
    aa: DeviceBuffer<f32>,
    n_aa: usize,
    mean: DeviceBuffer<f32>,
    n_mean: usize,
    /// Column then row tables of the resampler (prescaling to another size only).
    tables: Option<[(DeviceBuffer<i32>, DeviceBuffer<f32>); 2]>,
    taps: usize,
}

/// A key that tells option sets apart for [`Consts`] (the values the device work depends on).
fn params_key(p: &Params) -> (u32, u64, u32) {
    (
        p.kernelscale.to_bits(),
        p.prescale.to_bits(),
        p.method as u32,
    )
}

fn upload<T: crate::gpu::DeviceCopy>(
    state: &GpuState,
    stream: &Stream,
    data: &[T],
) -> Result<DeviceBuffer<T>> {
    let mut buf = DeviceBuffer::new(state.device(), data.len().max(1))?;
    buf.upload_blocking(stream, data)?;
    Ok(buf)
}

impl Consts {
    fn new(state: &GpuState, stream: &Stream, d: &Dims, p: &Params) -> Result<Self> {
        let aa = antialias_filter(p.kernelscale);
        let mean = mean_filter(p.kernelscale);
        let resamples = prescales(p) && (d.sw, d.sh) != (d.w, d.h);
        let (tables, taps) = if resamples {
            let x = resample_axis(p.method, d.w, d.sw);
            let y = resample_axis(p.method, d.h, d.sh);
            let taps = x.taps;
            (
                Some([
                    (
                        upload(state, stream, &x.idx)?,
                        upload(state, stream, &x.wt)?,
                    ),
                    (
                        upload(state, stream, &y.idx)?,
                        upload(state, stream, &y.wt)?,
                    ),
                ]),
                taps,
            )
        } else {
            (None, 0)
        };
        Ok(Consts {
            dims: (d.w, d.h, d.sw, d.sh),
            params: params_key(p),
            aa: upload(state, stream, &aa)?,
            n_aa: aa.len(),
            mean: upload(state, stream, &mean)?,
            n_mean: mean.len(),
            tables,
            taps,
        })
    }

    fn fits(&self, d: &Dims, p: &Params) -> bool {
        self.dims == (d.w, d.h, d.sw, d.sh) && self.params == params_key(p)
    }
}

/// Device and read-back buffers of one pair of planes.
struct PairBufs {
    /// The prescaling path's float planes: converted, then resampled.
    flt: Option<DeviceBuffer<f32>>,
    rs: Option<DeviceBuffer<f32>>,
    dec: DeviceBuffer<f32>,
    norm: DeviceBuffer<f32>,
    cov: DeviceBuffer<f32>,
    norm_host: PinnedHostBuffer<f32>,
    cov_host: PinnedHostBuffer<f32>,
}

impl PairBufs {
    fn new(state: &GpuState, d: &Dims, p: &Params) -> Result<Self> {
        let dev = state.device();
        let n = 2 * d.dw * d.dh;
        let (flt, rs) = if prescales(p) {
            let rs = if (d.sw, d.sh) != (d.w, d.h) {
                Some(DeviceBuffer::new(dev, 2 * d.sw * d.sh)?)
            } else {
                None
            };
            (Some(DeviceBuffer::new(dev, 2 * d.w * d.h)?), rs)
        } else {
            (None, None)
        };
        Ok(PairBufs {
            flt,
            rs,
            dec: DeviceBuffer::new(dev, n)?,
            norm: DeviceBuffer::new(dev, n)?,
            cov: DeviceBuffer::new(dev, 2 * NB * NB)?,
            norm_host: PinnedHostBuffer::new(dev, n)?,
            cov_host: PinnedHostBuffer::new(dev, 2 * NB * NB)?,
        })
    }

    /// The pair's score from its read-back moments (after the job's wait).
    fn score(&mut self, cpu: CpuLevel, d: &Dims, p: &Params) -> Result<(f32, bool)> {
        let n = d.dw * d.dh;
        let mut k = [[0.0f32; NB * NB]; 2];
        let cov = self.cov_host.as_slice()?;
        k[0].copy_from_slice(&cov[..NB * NB]);
        k[1].copy_from_slice(&cov[NB * NB..2 * NB * NB]);
        let norm = self.norm_host.as_slice()?;
        let (r, s): (&Mat, &Mat) = (&k[0], &k[1]);
        Ok(score_from_moments(
            cpu,
            d,
            p,
            (&norm[..n], r),
            (&norm[n..2 * n], s),
        ))
    }
}

/// What one pair's device work reads besides its buffers: the planes, their geometry, the
/// options, the sample scale and the constants.
struct PairWork<'a, T: Sample> {
    input: &'a PairPlanes<'a, T>,
    d: &'a Dims,
    p: &'a Params,
    scaler: f32,
    c: &'a Consts,
}

/// Queues the whole device side of one pair: decimation (through prescaling when asked),
/// local mean removal and moments, and their read-back, which reading `b`'s host buffers then
/// waits for.
fn queue_pair<T: Sample>(
    state: &GpuState,
    stream: &Stream,
    w: &PairWork<'_, T>,
    b: &mut PairBufs,
) -> Result<()> {
    b.norm_host.prepare_download()?;
    b.cov_host.prepare_download()?;
    queue_pair_work(state, stream, w, b)?;
    b.norm_host.mark_in_use(stream)?;
    b.cov_host.mark_in_use(stream)
}

/// [`queue_pair`]'s stream work, with the read-back unmarked (the host buffers prepared
/// before, and something queued after it waited for before they are read): what a replay
/// records.
fn queue_pair_work<T: Sample>(
    state: &GpuState,
    stream: &Stream,
    w: &PairWork<'_, T>,
    b: &PairBufs,
) -> Result<()> {
    let PairWork {
        input,
        d,
        p,
        scaler,
        c,
    } = *w;
    let missing = || Error::inval("SpEED: prescaling buffers missing");
    if !prescales(p) {
        launch::decimate(state, input, (d.sw, d.sh), scaler, &c.aa, c.n_aa, &b.dec)?
            .queue(stream)?;
    } else {
        let flt = b.flt.as_ref().ok_or_else(missing)?;
        launch::to_float(state, input, scaler, flt)?.queue(stream)?;
        match (&c.tables, &b.rs) {
            (Some([(xi, xw), (yi, yw)]), Some(rs)) => {
                let axes = (
                    DeviceAxis { idx: xi, wt: xw },
                    DeviceAxis { idx: yi, wt: yw },
                );
                launch::resample(
                    state,
                    flt,
                    (d.w, d.h),
                    (d.sw, d.sh),
                    p.method,
                    c.taps,
                    axes,
                    rs,
                )?
                .queue(stream)?;
                launch::decimate_f32(state, rs, (d.sw, d.sh), &c.aa, c.n_aa, &b.dec)?
                    .queue(stream)?;
            }
            // A prescale that rounds to the same size copies: filter the converted planes.
            (None, None) => {
                launch::decimate_f32(state, flt, (d.w, d.h), &c.aa, c.n_aa, &b.dec)?
                    .queue(stream)?;
            }
            _ => return Err(missing()),
        }
    }
    launch::moments(
        state,
        &b.dec,
        (d.dw, d.dh),
        &c.mean,
        c.n_mean,
        (d.subw, d.subh),
        &b.norm,
        &b.cov,
    )?
    .queue(stream)?;
    b.norm
        .queue_download(stream, &b.norm_host, 2 * d.dw * d.dh)?;
    b.cov.queue_download(stream, &b.cov_host, 2 * NB * NB)
}

/// What `bpc`-bit samples are divided by to reach the 8-bit scale.
fn scaler(bpc: u32) -> Result<f32> {
    luma_scaler(bpc).map_err(|e| e.prefixed("speed"))
}

/// Scratch of `speed_chroma`: constants, the U and V pairs, and the staged planes.
struct ChromaScratch<T: Sample> {
    consts: Consts,
    pairs: [PairBufs; 2],
    /// U then V of the reference, then of the distorted picture (whole planes, `plane_len`
    /// apart): the staging copy of pictures that are not page-locked, allocated when the
    /// first one comes.
    host: Option<PinnedHostBuffer<T>>,
    dev: DeviceBuffer<T>,
    plane_len: usize,
    /// Both pairs' work on the staged planes, by strides, plane length, sample scale, size
    /// and options.
    replay: Replay<ChromaKey>,
}

type ChromaKey = ([usize; 4], usize, u32, usize, usize, (u32, u64, u32));

/// Where speed_chroma's scratch keeps plane k (U of the reference, U of the distorted picture,
/// V of the reference, V of the distorted picture), in whole planes: each picture's U and V
/// adjacent, as in a picture's own buffer.
const SLOT: [usize; 4] = [0, 2, 1, 3];

/// Queues the device work of the U and V planes of a picture pair (`d` their geometry); the
/// returned closure waits and gives each plane's (score, singular).
pub(super) fn queue_chroma(
    state: &Arc<GpuState>,
    cpu: CpuLevel,
    d: &Dims,
    p: &Params,
    r: &PictureData,
    dp: &PictureData,
) -> Result<Queued<'static, [(f32, bool); 2]>> {
    if r.bpc == 8 {
        chroma_typed::<u8>(state, cpu, d, p, r, dp)
    } else {
        chroma_typed::<u16>(state, cpu, d, p, r, dp)
    }
}

fn chroma_typed<T: Sample + PlaneAs>(
    state: &Arc<GpuState>,
    cpu: CpuLevel,
    d: &Dims,
    p: &Params,
    r: &PictureData,
    dp: &PictureData,
) -> Result<Queued<'static, [(f32, bool); 2]>> {
    let depth = || Error::inval("speed_chroma: sample depth mismatch");
    let strides = [r.stride[1], dp.stride[1], r.stride[2], dp.stride[2]];
    // Pictures in this device's memory are read where they are; others are staged from the
    // host (device pictures of another device through host copies).
    let dev = state.device();
    let on_device = |pic| device_frame(pic, dev).filter(|f| T::device_plane(f, 2).is_some());
    let reads = match (on_device(r), on_device(dp)) {
        (Some(a), Some(b)) => Some(HeldFrameReads::new([a.clone(), b.clone()])),
        _ => {
            let chroma = crate::picture::ALL_PLANES & !crate::picture::LUMA;
            r.fetch_host(chroma)?;
            dp.fetch_host(chroma)?;
            None
        }
    };
    let planes: [&[T]; 4] = if reads.is_some() {
        [&[]; 4]
    } else {
        [
            T::plane_of(r, 1).ok_or_else(depth)?,
            T::plane_of(dp, 1).ok_or_else(depth)?,
            T::plane_of(r, 2).ok_or_else(depth)?,
            T::plane_of(dp, 2).ok_or_else(depth)?,
        ]
    };
    let plane_len = planes.iter().map(|s| s.len()).max().unwrap_or(0);
    let total = plane_len
        .checked_mul(4)
        .ok_or_else(|| Error::inval("speed_chroma: picture too large"))?;
    let scaler = scaler(r.bpc)?;
    let mut job = Job::<ChromaScratch<T>, T, 0>::start(
        state,
        [],
        |s| s.consts.fits(d, p) && s.plane_len >= plane_len,
        |st| {
            let stream = st.lane_stream()?;
            Ok(ChromaScratch {
                consts: Consts::new(st, &stream, d, p)?,
                pairs: [PairBufs::new(st, d, p)?, PairBufs::new(st, d, p)?],
                host: None,
                dev: DeviceBuffer::new(st.device(), total.max(1))?,
                plane_len,
                replay: Replay::default(),
            })
        },
    )?;
    {
        let Parts {
            state,
            stream,
            scratch: s,
            ..
        } = job.parts();
        // Plane k (U of the reference, U of the distorted picture, then V of each) lies at
        // SLOT[k] * len: each picture's U and V are adjacent. Host pictures in page-locked
        // memory (as the luma upload leaves recycled buffers) are copied by DMA where they
        // are, a picture's U and V in one copy when they are adjacent in its buffer too;
        // others through one staging copy.
        let len = s.plane_len;
        if reads.is_none() {
            let regs = [r, dp].map(|pic| host_registration(pic, stream));
            match regs {
                [Some(rr), Some(rd)]
                    if planes
                        .iter()
                        .zip([rr, rd, rr, rd])
                        .all(|(p, g)| g.covers(p)) =>
                {
                    for (i, (pic, reg)) in [(r, rr), (dp, rd)].into_iter().enumerate() {
                        match T::span_of(pic, 1, 2) {
                            // U then V, V starting where the slots put it.
                            Some(uv)
                                if uv.len() <= 2 * len
                                    && pic.plane_offset(2).checked_sub(pic.plane_offset(1))
                                        == Some(len) =>
                            {
                                s.dev
                                    .upload_registered_at_async(stream, reg, uv, 2 * i * len)?;
                            }
                            _ => {
                                for k in [i, i + 2] {
                                    s.dev.upload_registered_at_async(
                                        stream,
                                        reg,
                                        planes[k],
                                        SLOT[k] * len,
                                    )?;
                                }
                            }
                        }
                    }
                }
                _ => {
                    let staging = match &mut s.host {
                        Some(h) => h,
                        slot => slot.insert(PinnedHostBuffer::new(stream.device(), s.dev.len())?),
                    };
                    let host = staging.as_mut_slice()?;
                    for (k, src) in planes.iter().enumerate() {
                        let at = SLOT[k] * len;
                        host[at..at + src.len()].copy_from_slice(src);
                    }
                    s.dev.upload_async(stream, staging, 4 * len)?;
                }
            }
        }
        let (bufs, offsets): ([&DeviceBuffer<T>; 4], [usize; 4]) = match &reads {
            Some(held) => {
                let [fr, fd] = held.frames();
                fr.order_after_writes(stream)?;
                fd.order_after_writes(stream)?;
                let mut bufs = [&s.dev; 4];
                for (k, f) in [fr, fd, fr, fd].into_iter().enumerate() {
                    bufs[k] = T::device_plane(f, 1 + k / 2).ok_or_else(depth)?;
                }
                (bufs, [0; 4])
            }
            None => ([&s.dev; 4], SLOT.map(|slot| slot * len)),
        };
        let plane = |k: usize| DevicePlane {
            buf: bufs[k],
            offset: offsets[k],
            w: d.w,
            h: d.h,
            stride: strides[k],
        };
        let input = |c: usize| PairPlanes {
            a: [plane(2 * c), plane(2 * c + 1)],
            b: [None, None],
        };
        if reads.is_some() {
            // The caller's planes, at addresses that change from frame to frame.
            for (c, pair) in s.pairs.iter_mut().enumerate() {
                let w = PairWork {
                    input: &input(c),
                    d,
                    p,
                    scaler,
                    c: &s.consts,
                };
                queue_pair(state, stream, &w, pair)?;
            }
        } else {
            // The planes were copied into the scratch: the rest is the same every frame for
            // this geometry and these options, and is replayed. Only the last read-back is
            // marked: reading it first (in the closure below) waits for the others.
            for pair in &mut s.pairs {
                pair.norm_host.prepare_download()?;
                pair.cov_host.prepare_download()?;
            }
            let key = (strides, len, scaler.to_bits(), d.w, d.h, params_key(p));
            let (pairs, consts) = (&s.pairs, &s.consts);
            s.replay.run_fixed(&key, stream, |stream| {
                for (c, pair) in pairs.iter().enumerate() {
                    let w = PairWork {
                        input: &input(c),
                        d,
                        p,
                        scaler,
                        c: consts,
                    };
                    queue_pair_work(state, stream, &w, pair)?;
                }
                Ok(())
            })?;
            s.pairs[1].cov_host.mark_in_use(stream)?;
        }
    }
    let (d, p) = (*d, *p);
    // The second pair's read-back is the job's last work: waiting for it covers everything.
    Ok(job.finish(move |s| {
        s.pairs[1].cov_host.as_slice()?;
        let scores = [
            s.pairs[0].score(cpu, &d, &p)?,
            s.pairs[1].score(cpu, &d, &p)?,
        ];
        if let Some(held) = reads {
            held.waited();
        }
        Ok(scores)
    }))
}

/// Scratch of `speed_temporal`.
struct TemporalScratch {
    consts: Consts,
    pair: PairBufs,
}

/// Queues the device work of the frame differences `prev - cur` of the luma planes, reference
/// and distorted (or the reference's difference for both with `use_ref_diff`); the returned
/// closure waits and gives (score, singular).
pub(super) fn queue_temporal(
    state: &Arc<GpuState>,
    cpu: CpuLevel,
    d: &Dims,
    p: &Params,
    [pr, pd, r, dp]: [&Picture; 4],
    use_ref_diff: bool,
) -> Result<Queued<'static, (f32, bool)>> {
    if r.bpc == 8 {
        temporal_typed::<u8>(state, cpu, d, p, [pr, pd, r, dp], use_ref_diff)
    } else {
        temporal_typed::<u16>(state, cpu, d, p, [pr, pd, r, dp], use_ref_diff)
    }
}

fn temporal_typed<T: Sample + PlaneAs>(
    state: &Arc<GpuState>,
    cpu: CpuLevel,
    d: &Dims,
    p: &Params,
    pics: [&Picture; 4],
    use_ref_diff: bool,
) -> Result<Queued<'static, (f32, bool)>> {
    let scaler = scaler(pics[2].bpc)?;
    let mut job = Job::<TemporalScratch, T, 4>::start(
        state,
        pics,
        |s| s.consts.fits(d, p),
        |st| {
            let stream = st.lane_stream()?;
            Ok(TemporalScratch {
                consts: Consts::new(st, &stream, d, p)?,
                pair: PairBufs::new(st, d, p)?,
            })
        },
    )?;
    {
        let Parts {
            state,
            stream,
            scratch: s,
            luma,
        } = job.parts();
        let [prev_r, prev_d, cur_r, cur_d] = &luma;
        let cur_for_dist = if use_ref_diff { cur_r } else { cur_d };
        let input = PairPlanes {
            a: [prev_r.plane(d.w, d.h), prev_d.plane(d.w, d.h)],
            b: [
                Some(cur_r.plane(d.w, d.h)),
                Some(cur_for_dist.plane(d.w, d.h)),
            ],
        };
        let w = PairWork {
            input: &input,
            d,
            p,
            scaler,
            c: &s.consts,
        };
        queue_pair(state, stream, &w, &mut s.pair)?;
    }
    let (d, p) = (*d, *p);
    Ok(job.finish(move |s| s.pair.score(cpu, &d, &p)))
}

#[cfg(test)]
mod tests {
    use crate::context::{Config, Context};
    use crate::gpu::{test_state, GpuState};
    use crate::testutil::load_parity_clip;
    use std::sync::Arc;

    /// Every score of `features` (name, options) on `clip`, on the CPU or on `state`.
    fn scores(
        clip: &str,
        features: &[(&str, &str)],
        state: Option<Arc<GpuState>>,
        threads: u32,
    ) -> Vec<(String, Vec<Option<f64>>)> {
        let (refs, dists) = load_parity_clip(clip);
        let mut ctx = Context::new(Config {
            n_threads: threads,
            ..Config::default()
        })
        .unwrap();
        if let Some(s) = state {
            ctx.import_gpu_state(s).unwrap();
        }
        crate::testutil::use_features(&mut ctx, features).unwrap();
        for (i, (r, d)) in refs.iter().zip(&dists).enumerate() {
            ctx.read_pictures(r.clone(), d.clone(), i).unwrap();
        }
        ctx.flush().unwrap();
        crate::testutil::collected_scores(&ctx)
    }

    /// speed_chroma and speed_temporal on the device give the CPU's scores bit for bit, for
    /// the v1.0.16 models' options, every prescaling method, and 8-, 10- and 12-bit clips in
    /// 4:2:0, 4:2:2 and 4:4:4, synchronously and on worker threads.
    #[test]
    fn speed_on_the_gpu_equals_the_cpu() {
        let Some(state) = test_state() else { return };
        let v1 = "speed_kernelscale=1.0:speed_nn_floor=0.1:speed_sigma_nn=0.19:speed_weight_var_mode=5:speed_max_val=45.0";
        let cases: &[(&str, &[(&str, &str)])] = &[
            (
                "natural_1920x1080_420p8",
                &[
                    ("speed_chroma", v1),
                    ("speed_chroma", "speed_nn_floor=0.1:speed_sigma_nn=0.19:speed_weight_var_mode=5:speed_prescale=0.6:speed_prescale_method=bilinear:speed_max_val=45.0"),
                    ("speed_temporal", ""),
                ],
            ),
            (
                "natural_640x360_420p10",
                &[
                    ("speed_chroma", "speed_prescale=1.3:speed_prescale_method=bicubic"),
                    ("speed_temporal", "speed_use_ref_diff=true:speed_kernelscale=1.5"),
                ],
            ),
            (
                "mandel_352x288_422p8",
                &[
                    ("speed_chroma", "speed_prescale=1.25:speed_prescale_method=lanczos4"),
                    ("speed_temporal", "speed_prescale=0.9:speed_prescale_method=nearest"),
                ],
            ),
            (
                "testsrc_480x270_444p8",
                &[("speed_chroma", "speed_kernelscale=2:speed_weight_var_mode=6")],
            ),
            ("natural_320x180_420p12", &[("speed_temporal", "speed_weight_var_mode=2")]),
        ];
        for &(clip, features) in cases {
            let cpu = scores(clip, features, None, 0);
            assert!(cpu.iter().all(|(_, s)| s.iter().all(Option::is_some)));
            for threads in [0, 3] {
                let gpu = scores(clip, features, Some(state.clone()), threads);
                assert_eq!(gpu, cpu, "{clip} threads {threads}");
            }
        }
    }
}
