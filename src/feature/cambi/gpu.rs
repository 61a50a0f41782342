//! cambi on the GPU: kernels/cambi.hip computes the same 10-bit picture, flat-area mask, mode
//! filtered scales and c-value maps as the CPU stages in [`super::cpu`], bit for bit.
//!
//! Pooling: the CPU's top-k mean sums in the order its quickselect leaves, so it is not
//! reproduced in parallel. Instead the device returns exact integer statistics of each map, and
//! when they prove the CPU's sum exact ([`pooled_from_stats`]; the usual case) the host
//! computes the identical value from them without the map. Otherwise the map is copied back
//! and pooled with the CPU's own code. The input range check (9..15-bit pictures) and the
//! 16:8:4:2:1 weighting also stay on the host. Every picture size the CPU accepts works here.

use super::launch::{self, CambiCValues, CAMBI_MAX_DIFFS, CAMBI_MAX_PAD, CAMBI_STATS_LEN};
use super::{
    decimation_taps, mask_index, reciprocal_lut, scale_sizes, spatial_pooling, weighted_score,
    Setup, NUM_SCALES,
};
use crate::error::{Error, Result};
use crate::gpu::job::{Job, Parts, Queued, ReadBack, Replay};
use crate::gpu::launch::Sample;
use crate::gpu::planes::{dense, PlaneAs};
use crate::gpu::{DeviceBuffer, GpuState, PinnedHostBuffer};
use crate::picture::Picture;
use std::sync::Arc;

/// Device buffers of one frame in flight (pooled per state), sized for pictures up to `cap` pixels at the processing size.
struct Scratch {
    cap: usize,
    /// The preprocessed picture, the first scale's mask, each scale's mode-filtered picture
    /// (ping-pong: the next scale reads the previous one) and its window values.
    pre: DeviceBuffer<u16>,
    mask: DeviceBuffer<u16>,
    mode: [DeviceBuffer<u16>; 2],
    wv: DeviceBuffer<u16>,
    /// Each scale's c-value map, on the device and (when the statistics cannot pool it) in
    /// pinned memory, allocated the first time a map is read back: about 11 MB per scratch set
    /// at 1080p that most runs never use, and page-locking it cost the start of every run.
    cv: Vec<DeviceBuffer<f32>>,
    cv_host: Vec<Option<PinnedHostBuffer<f32>>>,
    /// Per scale: the statistics [`launch::cambi_cvalues`] accumulates of the map.
    stats: DeviceBuffer<u64>,
    stats_host: PinnedHostBuffer<u64>,
    lut: DeviceBuffer<f32>,
    /// Adjusted thresholds then contrast weights.
    params: DeviceBuffer<i32>,
    params_host: PinnedHostBuffer<i32>,
    /// Source columns then source rows of the preprocessing.
    taps: DeviceBuffer<u32>,
    taps_host: PinnedHostBuffer<u32>,
    taps_cap: usize,
    /// What `taps` and `params` hold on the device: uploaded again only when it changes.
    tables: Option<Tables>,
    /// Everything after the preprocessing (the head, which reads the picture), replayed.
    tail: Replay<TailKey>,
}

/// The small per-call tables of the device's `taps` and `params`: the preprocessing's source
/// columns and rows for an `in_w`x`in_h` picture processed at `w`x`h`, and the thresholds
/// then contrast weights.
struct Tables {
    sizes: (usize, usize, usize, usize),
    params: Vec<i32>,
}

/// What the replayed tail of one frame's work depends on besides the scratch's buffers: the
/// processing size, the scales' sizes and the c-value parameters (one scratch serves every
/// cambi instance, whatever its options).
#[derive(Clone, PartialEq)]
struct TailKey {
    /// Bytes per input sample: which preprocessing kernel the recorded head is.
    sample: usize,
    w: usize,
    h: usize,
    sizes: [(usize, usize); NUM_SCALES],
    pad: usize,
    band_base: u16,
    band_size: u16,
    num_diffs: usize,
    vlt: u16,
}

/// The statistics buffer: each scale's map statistics, then the input range flag (set when a
/// 9..15-bit picture has a sample above its maximum, which the CPU rejects).
const RANGE_FLAG: usize = NUM_SCALES * CAMBI_STATS_LEN;
const STATS_ALL: usize = RANGE_FLAG + 1;

/// c-value entries of each scale of a `w`x`h` picture without the high-resolution speed-up
/// (with it every scale is smaller).
fn cv_lens(w: usize, h: usize) -> [usize; NUM_SCALES] {
    let (mut sw, mut sh) = (w, h);
    std::array::from_fn(|_| {
        let n = sw * sh;
        sw = sw.div_ceil(2);
        sh = sh.div_ceil(2);
        n
    })
}

impl Scratch {
    fn new(state: &GpuState, w: usize, h: usize) -> Result<Self> {
        let dev = state.device();
        let cap = w * h;
        let taps_cap = w + h;
        let mut lut = DeviceBuffer::new(dev, reciprocal_lut().len())?;
        lut.upload_blocking(state.stream(), reciprocal_lut())?;
        let lens = cv_lens(w, h);
        // Zeroed here, then at the end of each frame's replayed work (after its read-back).
        let stats = DeviceBuffer::new(dev, STATS_ALL)?;
        stats.zero(state.stream())?;
        state.stream().synchronize()?;
        Ok(Scratch {
            cap,
            pre: DeviceBuffer::new(dev, cap)?,
            mask: DeviceBuffer::new(dev, cap)?,
            mode: [DeviceBuffer::new(dev, cap)?, DeviceBuffer::new(dev, cap)?],
            wv: DeviceBuffer::new(dev, cap)?,
            cv: lens
                .iter()
                .map(|&n| DeviceBuffer::new(dev, n))
                .collect::<Result<_>>()?,
            cv_host: lens.iter().map(|_| None).collect(),
            stats,
            stats_host: PinnedHostBuffer::new(dev, STATS_ALL)?,
            lut,
            params: DeviceBuffer::new(dev, 2 * CAMBI_MAX_DIFFS)?,
            params_host: PinnedHostBuffer::new(dev, 2 * CAMBI_MAX_DIFFS)?,
            taps: DeviceBuffer::new(dev, taps_cap)?,
            taps_host: PinnedHostBuffer::new(dev, taps_cap)?,
            taps_cap,
            tables: None,
            tail: Replay::default(),
        })
    }

    fn fits(&self, w: usize, h: usize) -> bool {
        w * h <= self.cap
            && w + h <= self.taps_cap
            && cv_lens(w, h)
                .iter()
                .zip(&self.cv)
                .all(|(&n, b)| n <= b.len())
    }
}

/// What the host gets of one scale.
enum ScaleData<'a> {
    /// The map's statistics (accumulated by [`launch::cambi_cvalues`]).
    Stats(&'a [u64]),
    /// The c-value map itself (dense, the scale's width wide).
    Map(&'a mut [f32]),
}

/// Runs the kernels for `pic` and gives `each` the statistics of every scale's c-value map in
/// scale order; then the maps of the scales for which `each` answered true (the tests' view of
/// what [`queue_score`] pools).
#[cfg(test)]
fn with_c_values<T: Sample + PlaneAs>(
    state: &Arc<GpuState>,
    s: &Setup,
    pic: &Picture,
    is_src: bool,
    each: impl FnMut(usize, ScaleData<'_>) -> bool,
) -> Result<()> {
    let sizes = scale_sizes(s, s.geometry(is_src).0, s.geometry(is_src).1);
    let job = queue_c_values::<T>(state, s, pic, is_src)?;
    job.wait(|sc, stream| read_c_values(sc, stream, &sizes, each))
}

/// Gives `each` the read-back statistics of every scale in scale order, then downloads and
/// gives the maps of the scales for which it answered true (all queued before the first wait).
fn read_c_values(
    sc: &mut Scratch,
    stream: &crate::gpu::Stream,
    sizes: &[(usize, usize)],
    mut each: impl FnMut(usize, ScaleData<'_>) -> bool,
) -> Result<()> {
    let mut wanted = [false; NUM_SCALES];
    for (scale, want) in wanted.iter_mut().enumerate() {
        let st = &sc.stats_host.as_slice()?[scale * CAMBI_STATS_LEN..][..CAMBI_STATS_LEN];
        *want = each(scale, ScaleData::Stats(st));
    }
    for (scale, &(sw, sh)) in sizes.iter().enumerate() {
        if wanted[scale] {
            let host = match &mut sc.cv_host[scale] {
                Some(h) => h,
                slot => slot.insert(PinnedHostBuffer::new(stream.device(), sc.cv[scale].len())?),
            };
            sc.cv[scale].download_async(stream, host, sw * sh)?;
        }
    }
    for (scale, &(sw, sh)) in sizes.iter().enumerate() {
        if wanted[scale] {
            each(
                scale,
                ScaleData::Map(
                    &mut sc.cv_host[scale]
                        .as_mut()
                        .ok_or_else(|| Error::inval("cambi: map read-back buffer missing"))?
                        .as_mut_slice()?[..sw * sh],
                ),
            );
        }
    }
    Ok(())
}

/// Queues the kernels for `pic` and the read-back of every scale's map statistics.
fn queue_c_values<T: Sample + PlaneAs>(
    state: &Arc<GpuState>,
    s: &Setup,
    pic: &Picture,
    is_src: bool,
) -> Result<Job<Scratch, T, 1>> {
    let (w, h, window) = s.geometry(is_src);
    let (in_w, in_h, bpc) = (pic.w[0], pic.h[0], pic.bpc);
    let pad = window >> 1;
    let nd = s.tvi.len();
    if pad > CAMBI_MAX_PAD || !(1..=CAMBI_MAX_DIFFS).contains(&nd) {
        return Err(Error::inval(
            "cambi: window or contrast range too large for the GPU",
        ));
    }
    let sizes = scale_sizes(s, w, h);
    let mut job = Job::<Scratch, T, 1>::start(
        state,
        [pic],
        |sc| sc.fits(w, h),
        // Sized for both pictures of full-reference mode at once.
        |st| Scratch::new(st, s.alloc_w.max(w), s.alloc_h.max(h)),
    )?;
    {
        let Parts {
            state,
            stream,
            scratch: sc,
            luma: [luma],
        } = job.parts();

        // Small per-call tables: the scratch is shared by every cambi instance, so they are
        // uploaded whenever they differ from the last ones (usually only the first frame).
        let table_sizes = (in_w, in_h, w, h);
        let params = || {
            s.tvi[..nd]
                .iter()
                .map(|&t| i32::from(t))
                .chain(s.diff_weights[..nd].iter().copied())
        };
        // Compared in place: nothing is allocated on a frame that reuses the tables.
        let current = sc
            .tables
            .as_ref()
            .is_some_and(|t| t.sizes == table_sizes && t.params.iter().copied().eq(params()));
        if !current {
            sc.tables = None;
            let tables = Tables {
                sizes: table_sizes,
                params: params().collect(),
            };
            let taps = sc.taps_host.as_mut_slice()?;
            if (in_w, in_h) == (w, h) {
                taps[..w]
                    .iter_mut()
                    .enumerate()
                    .for_each(|(i, t)| *t = i as u32);
                taps[w..w + h]
                    .iter_mut()
                    .enumerate()
                    .for_each(|(i, t)| *t = i as u32);
            } else {
                let xs = decimation_taps(in_w, w);
                let ys = decimation_taps(in_h, h);
                for (t, v) in taps.iter_mut().zip(xs.iter().chain(&ys)) {
                    *t = *v as u32;
                }
            }
            sc.params_host.as_mut_slice()?[..2 * nd].copy_from_slice(&tables.params);
            sc.taps.upload_async(stream, &mut sc.taps_host, w + h)?;
            sc.params
                .upload_async(stream, &mut sc.params_host, 2 * nd)?;
            sc.tables = Some(tables);
        }
        // The statistics are zero here (from the scratch's making, or the last frame's reset);
        // the range check sets its flag among them before the replayed work.
        if bpc != 8 && bpc != 16 {
            launch::cambi_range(
                state,
                luma.plane(in_w, in_h),
                (1u32 << bpc) - 1,
                &sc.stats,
                RANGE_FLAG,
            )?
            .queue(stream)?;
        }
        let head = launch::cambi_preprocess(
            state,
            luma.plane(in_w, in_h),
            &sc.taps,
            bpc,
            s.enc_bitdepth < 10,
            dense(&sc.pre, w, h),
        )?;
        // The mask is only ever read where the first scale samples the picture.
        let (fw, fh) = sizes[0];
        let step0 = if (fw, fh) == (w, h) { 1 } else { 2 };
        let p = CambiCValues {
            pad,
            band_base: s.band_base,
            band_size: s.band_size,
            num_diffs: nd,
            vlt: s.vlt_luma,
        };
        let key = TailKey {
            sample: std::mem::size_of::<T>(),
            w,
            h,
            sizes,
            pad,
            band_base: p.band_base,
            band_size: p.band_size,
            num_diffs: nd,
            vlt: p.vlt,
        };
        let (pre, mask, mode, wv, cv, stats) =
            (&sc.pre, &sc.mask, &sc.mode, &sc.wv, &sc.cv, &sc.stats);
        let (lut, params) = (&sc.lut, &sc.params);
        let rb = ReadBack {
            from: stats,
            into: &mut sc.stats_host,
            count: STATS_ALL,
            reset: stats,
        };
        sc.tail
            .run_and_read_back(&key, stream, rb, &head, |stream| {
                launch::cambi_mask(
                    state,
                    dense(pre, w, h),
                    mask_index(w, h),
                    step0,
                    dense(mask, fw, fh),
                )?
                .queue(stream)?;
                for (scale, &(sw, sh)) in sizes.iter().enumerate() {
                    let [a, b] = mode;
                    let (prev, step) = match scale {
                        0 => (dense(pre, w, h), step0),
                        _ => {
                            let (pw, ph) = sizes[scale - 1];
                            (dense(if scale % 2 == 1 { a } else { b }, pw, ph), 2)
                        }
                    };
                    let out = if scale % 2 == 0 { a } else { b };
                    launch::cambi_scale(
                        state,
                        prev,
                        step,
                        dense(mask, fw, fh),
                        1 << scale,
                        s.band_base,
                        s.band_size,
                        dense(out, sw, sh),
                        dense(wv, sw, sh),
                    )?
                    .queue(stream)?;
                    launch::cambi_cvalues(
                        state,
                        dense(wv, sw, sh),
                        &p,
                        params,
                        lut,
                        &cv[scale],
                        stats,
                        scale * CAMBI_STATS_LEN,
                    )?
                    .queue(stream)?;
                }
                Ok(())
            })?;
    }
    Ok(job)
}

/// Queues the cambi score of `pic` (the distorted picture, or the source when `is_src`) with
/// its per-pixel stages on `state`; the returned closure waits and finishes it on the host,
/// with the same contract as the CPU's per-picture score.
pub(super) fn queue_score(
    state: &Arc<GpuState>,
    s: &Setup,
    pic: &Picture,
    is_src: bool,
) -> Result<Queued<'static, f64>> {
    let (w, h, window) = s.geometry(is_src);
    let sizes = scale_sizes(s, w, h);
    let topk = s.topk;
    let bpc = pic.bpc;
    let finish = move |sc: &mut Scratch, stream: &crate::gpu::Stream| {
        // The statistics' read-back covers the range check (queued before it).
        if sc.stats_host.as_slice()?[RANGE_FLAG] != 0 {
            return Err(Error::inval(format!(
                "cambi: input has values above the {bpc}-bit maximum {}",
                (1u32 << bpc) - 1
            )));
        }
        let mut per_scale = [0.0f64; NUM_SCALES];
        let pool = |scale: usize, data: ScaleData<'_>| match data {
            ScaleData::Stats(st) => {
                let (sw, sh) = sizes[scale];
                match pooled_from_stats(st, sw * sh, topk) {
                    Some(v) => {
                        per_scale[scale] = v;
                        false
                    }
                    None => true,
                }
            }
            ScaleData::Map(cv) => {
                per_scale[scale] = spatial_pooling(cv, topk);
                false
            }
        };
        read_c_values(sc, stream, &sizes, pool)?;
        Ok(weighted_score(&per_scale, window))
    };
    Ok(if pic.bpc == 8 {
        queue_c_values::<u8>(state, s, pic, is_src)?.finish_then(finish)
    } else {
        queue_c_values::<u16>(state, s, pic, is_src)?.finish_then(finish)
    })
}

/// `spatial_pooling` of an `n`-value map from its statistics alone, when that provably gives
/// the same `f64`; None otherwise (the caller pools the map).
///
/// The CPU sums the top k values in an order left by its quickselect. When at most k values
/// are non-zero, the top k are all of them plus zeros, whatever that order. The values are
/// non-negative, so every partial sum lies between 0 and the total, and is a multiple of the
/// smallest value's unit in the last place; if the total is below 2^53 such units, every
/// partial sum is an exact `f64` and so is the CPU's result: the exact total, which the
/// integer statistics give in any order.
fn pooled_from_stats(stats: &[u64], n: usize, topk: f64) -> Option<f64> {
    // As spatial_pooling computes k.
    let n = i32::try_from(n).ok()?;
    let k = ((topk * f64::from(n)) as i32).clamp(1, n);
    if stats[0] > k as u64 {
        return None;
    }
    let buckets = &stats[1..CAMBI_STATS_LEN];
    let Some(low) = buckets.iter().position(|&m| m != 0) else {
        return Some(0.0 / f64::from(k));
    };
    // Total in units of 2^(low - 150), the last place of bucket `low`'s significands.
    let mut total: u128 = 0;
    for (e, &m) in buckets.iter().enumerate().skip(low) {
        if m == 0 {
            continue;
        }
        let shift = e - low;
        if shift >= 64 {
            return None;
        }
        total += u128::from(m) << shift;
        if total >= 1 << 53 {
            return None;
        }
    }
    // 2^(low - 150) is a normal f64 for every f32 exponent.
    let unit = f64::from_bits(((low as i64 - 150 + 1023) as u64) << 52);
    Some(total as f64 * unit / f64::from(k))
}

/// What the kernel-model test (`hipcpu_tests.rs`) needs to replay [`with_c_values`] on the CPU
/// execution model of the kernels, with the CPU results the device must equal.
#[cfg(test)]
pub(crate) struct ModelCase {
    /// Processing size, source size, window half-width.
    pub w: usize,
    pub h: usize,
    pub in_w: usize,
    pub in_h: usize,
    pub pad: usize,
    pub sizes: [(usize, usize); NUM_SCALES],
    /// As uploaded by [`with_c_values`].
    pub taps: Vec<u32>,
    pub params: Vec<i32>,
    pub num_diffs: usize,
    pub dither: bool,
    pub band_base: u16,
    pub band_size: u16,
    pub vlt: u16,
    pub mask_threshold: u32,
    pub lut: &'static [f32],
    /// The CPU's c-value maps, their statistics, and its score.
    pub cpu_maps: Vec<Vec<f32>>,
    pub cpu_stats: Vec<Vec<u64>>,
    pub cpu_score: f64,
    topk: f64,
    window: usize,
}

#[cfg(test)]
impl ModelCase {
    /// The distorted-picture case of `pic` with cambi options `opts` (`k=v:k=v`); None when
    /// the CPU refuses the picture.
    pub(crate) fn new(opts: &str, pic: &Picture) -> Option<Self> {
        let c = tests::cambi(opts);
        let s = c.setup_for(pic).ok()?;
        let cpu_score = super::Work::new(s)
            .ok()?
            .score(s, pic, false, crate::simd::CpuLevel::SCALAR)
            .ok()?;
        let (w, h, window) = s.geometry(false);
        let (in_w, in_h) = (pic.w[0], pic.h[0]);
        let taps = if (in_w, in_h) == (w, h) {
            (0..w).chain(0..h).map(|v| v as u32).collect()
        } else {
            let (xs, ys) = (decimation_taps(in_w, w), decimation_taps(in_h, h));
            xs.iter().chain(&ys).map(|&v| v as u32).collect()
        };
        let cpu_maps = super::cpu_c_value_maps(s, pic, false);
        Some(ModelCase {
            w,
            h,
            in_w,
            in_h,
            pad: window >> 1,
            sizes: scale_sizes(s, w, h),
            taps,
            params: s
                .tvi
                .iter()
                .map(|&t| i32::from(t))
                .chain(s.diff_weights.iter().copied())
                .collect(),
            num_diffs: s.tvi.len(),
            dither: s.enc_bitdepth < 10,
            band_base: s.band_base,
            band_size: s.band_size,
            vlt: s.vlt_luma,
            mask_threshold: mask_index(w, h),
            lut: reciprocal_lut(),
            cpu_stats: cpu_maps.iter().map(|m| tests::host_stats(m)).collect(),
            cpu_maps,
            cpu_score,
            topk: s.topk,
            window,
        })
    }

    /// The sliding kernels that take this case on a device with `block_shared` bytes of
    /// shared memory per block, best first (the first is what [`launch::cambi_cvalues`] takes).
    pub(crate) fn sliding_kernels(&self, block_shared: usize) -> Vec<launch::Sliding> {
        self.c_values().sliding_kernels(block_shared)
    }

    /// The c-value launch options of this case.
    pub(crate) fn c_values(&self) -> CambiCValues {
        CambiCValues {
            pad: self.pad,
            band_base: self.band_base,
            band_size: self.band_size,
            num_diffs: self.num_diffs,
            vlt: self.vlt,
        }
    }

    /// The score the host finishes from the device's statistics and maps, as [`score`] does.
    pub(crate) fn score(&self, stats: &[Vec<u64>], maps: &[Vec<f32>]) -> f64 {
        let mut per_scale = [0.0f64; NUM_SCALES];
        for (scale, v) in per_scale.iter_mut().enumerate() {
            let n = maps[scale].len();
            *v = pooled_from_stats(&stats[scale], n, self.topk)
                .unwrap_or_else(|| spatial_pooling(&mut maps[scale].clone(), self.topk));
        }
        weighted_score(&per_scale, self.window)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{cpu_c_value_maps, spatial_pooling, Cambi, Setup};
    use super::{pooled_from_stats, with_c_values, ScaleData, CAMBI_STATS_LEN};
    use crate::feature::{Dict, Extractor, FrameInput, Scores};
    use crate::gpu::GpuSet;
    use crate::gpu::GpuState;
    use crate::picture::Picture;
    use crate::testutil::{load_parity_clip, PARITY_CLIPS};
    use std::time::Instant;

    pub(super) fn cambi(opts: &str) -> Cambi {
        let mut d = Dict::new();
        for kv in opts.split(':').filter(|kv| !kv.is_empty()) {
            let (k, v) = kv.split_once('=').unwrap();
            d.set(k, v);
        }
        Cambi::new(&d).unwrap()
    }

    fn run(
        c: &Cambi,
        i: usize,
        r: &crate::picture::Picture,
        d: &crate::picture::Picture,
    ) -> Scores {
        let input = FrameInput::pair(i, r, d);
        let mut out = Scores::new();
        c.extract(&input, &mut out).unwrap();
        out
    }

    /// Options the CPU supports, each checked on the clips it applies to.
    const OPTION_CASES: &[(&str, &str)] = &[
        ("natural_1920x1080_420p8", "enc_width=960:enc_height=540"),
        ("natural_1920x1080_420p8", "enc_width=1280:enc_height=720"),
        (
            "natural_1920x1080_420p8",
            "cambi_high_res_speedup=1080:cambi_vis_lum_threshold=0.06:cambi_max_val=17.0",
        ),
        (
            "natural_1920x1080_420p8",
            "cambi_high_res_speedup=1080:eotf=pq:cambi_vis_lum_threshold=1",
        ),
        ("natural_640x360_420p10", "full_ref=true"),
        ("natural_640x360_420p10", "enc_bitdepth=8"),
        (
            "natural_640x360_420p10",
            "window_size=127:max_log_contrast=5:cambi_vis_lum_threshold=10",
        ),
        (
            "natural_576x324_420p8",
            "eotf=pq:max_log_contrast=3:topk=0.3",
        ),
        (
            "natural_576x324_420p8",
            "cambi_eotf=pq:tvi_threshold=0.05:cambi_topk=0.9",
        ),
        ("natural_576x324_420p8", "enc_width=400:enc_height=300"),
        ("natural_576x324_420p8", "window_size=15:max_log_contrast=1"),
        // Few values pooled: the statistics cannot stand in for the map.
        ("natural_576x324_420p8", "cambi_topk=0.001"),
        ("natural_1920x1080_420p8", "topk=0.01"),
        (
            "natural_576x324_420p8",
            "cambi_vis_lum_threshold=100:max_log_contrast=0:cambi_max_val=0.5",
        ),
        ("natural_320x180_420p12", "enc_bitdepth=8:window_size=100"),
        (
            "testsrc_480x270_444p8",
            "full_ref=true:src_width=400:src_height=240:enc_width=460:enc_height=260",
        ),
    ];

    fn check(set: &GpuSet, clip: &str, opts: &str, frames: usize) {
        let (refs, dists) = load_parity_clip(clip);
        let cpu = cambi(opts);
        let gpu = cambi(opts).with_gpu(Some(set.clone()));
        for (i, (r, d)) in refs.iter().zip(&dists).enumerate().take(frames) {
            let want = run(&cpu, i, r, d);
            let got = run(&gpu, i, r, d);
            assert_eq!(got.len(), want.len(), "{clip} {opts} frame {i}");
            for ((gn, gv), (wn, wv)) in got.iter().zip(&want) {
                assert_eq!(gn, wn);
                // Identical f64 values, hence also the printed 6 decimals.
                assert_eq!(
                    gv.to_bits(),
                    wv.to_bits(),
                    "{clip} {opts} frame {i} {gn}: gpu {gv} cpu {wv} (diff {:e})",
                    gv - wv
                );
            }
        }
    }

    /// Each scale's c-value map from the GPU.
    fn gpu_maps(
        state: &std::sync::Arc<GpuState>,
        s: &Setup,
        pic: &Picture,
        is_src: bool,
    ) -> Vec<Vec<f32>> {
        let mut maps = Vec::new();
        let keep = |_: usize, data: ScaleData<'_>| {
            if let ScaleData::Map(cv) = data {
                maps.push(cv.to_vec());
            }
            true
        };
        if pic.bpc == 8 {
            with_c_values::<u8>(state, s, pic, is_src, keep).unwrap();
        } else {
            with_c_values::<u16>(state, s, pic, is_src, keep).unwrap();
        }
        maps
    }

    /// What kernels/cambi.hip's statistics kernel computes, on the host.
    pub(super) fn host_stats(cv: &[f32]) -> Vec<u64> {
        let mut st = vec![0u64; CAMBI_STATS_LEN];
        for v in cv {
            let bits = v.to_bits();
            if bits == 0 {
                continue;
            }
            st[0] += 1;
            let (e, m) = ((bits >> 23) & 0xFF, bits & 0x7F_FFFF);
            let (e, m) = if e == 0 { (1, m) } else { (e, m | 0x80_0000) };
            st[1 + e as usize] += u64::from(m);
        }
        st
    }

    /// The pooling shortcut gives the CPU's value bit for bit whenever it applies (CPU-only:
    /// runs without a device), and applies on the default options' maps.
    #[test]
    fn pooling_from_statistics_equals_quickselect() {
        let (mut used, mut total) = (0, 0);
        for clip in PARITY_CLIPS {
            let (_, dists) = load_parity_clip(clip);
            for topk in ["", "topk=0.01", "cambi_topk=0.9"] {
                let c = cambi(topk);
                let s = c.setup_for(&dists[0]).unwrap();
                for mut cv in cpu_c_value_maps(s, &dists[0], false) {
                    let st = host_stats(&cv);
                    let fast = pooled_from_stats(&st, cv.len(), s.topk);
                    let want = spatial_pooling(&mut cv, s.topk);
                    total += 1;
                    if let Some(v) = fast {
                        used += 1;
                        assert_eq!(v.to_bits(), want.to_bits(), "{clip} [{topk}]: {v} {want}");
                    }
                }
                if topk.is_empty() {
                    assert!(pooled_from_stats(&host_stats(&[0.0; 8]), 8, s.topk) == Some(0.0));
                }
            }
        }
        println!("statistics pooled {used} of {total} maps");
        assert!(used > total / 2);
        // Too wide a range of magnitudes for an exact f64 sum: refused.
        let wide = [1.0e-3f32, 3.0e12, 7.0];
        assert_eq!(pooled_from_stats(&host_stats(&wide), 3, 1.0), None);
    }

    /// Stage-level check: every c-value map equals the CPU's (reports the first difference),
    /// and so do the statistics the GPU computes from them.
    #[test]
    fn gpu_cambi_c_value_maps_equal_cpu() {
        let Some(state) = crate::gpu::test_state() else {
            return;
        };
        for (clip, opts) in [
            ("natural_576x324_420p8", ""),
            ("natural_640x360_420p10", "enc_bitdepth=8"),
            (
                "natural_640x360_420p10",
                "max_log_contrast=3:window_size=127",
            ),
            ("natural_1920x1080_420p8", "enc_width=1280:enc_height=720"),
            ("natural_1920x1080_420p8", "max_log_contrast=0"),
        ] {
            let (_, dists) = load_parity_clip(clip);
            let c = cambi(opts);
            let s = c.setup_for(&dists[0]).unwrap();
            let cpu = cpu_c_value_maps(s, &dists[0], false);
            let mut stats = Vec::new();
            let collect = |_: usize, data: ScaleData<'_>| {
                if let ScaleData::Stats(st) = data {
                    stats.push(st.to_vec());
                }
                false
            };
            if dists[0].bpc == 8 {
                with_c_values::<u8>(&state, s, &dists[0], false, collect).unwrap();
            } else {
                with_c_values::<u16>(&state, s, &dists[0], false, collect).unwrap();
            }
            let gpu = gpu_maps(&state, s, &dists[0], false);
            let mut bad = false;
            for (scale, (g, c)) in gpu.iter().zip(&cpu).enumerate() {
                assert_eq!(g.len(), c.len());
                let diffs: Vec<usize> = (0..g.len())
                    .filter(|&i| g[i].to_bits() != c[i].to_bits())
                    .collect();
                let nz = c.iter().filter(|v| **v != 0.0).count();
                let st_ok = stats[scale] == host_stats(c);
                println!(
                    "{clip} [{opts}] scale {scale}: {} of {} c-values differ ({nz} non-zero), \
                     statistics equal: {st_ok}",
                    diffs.len(),
                    g.len()
                );
                if let Some(&i) = diffs.first() {
                    bad = true;
                    println!("  first at {i}: gpu {} cpu {}", g[i], c[i]);
                }
                bad |= !st_ok;
            }
            assert!(!bad, "{clip} [{opts}]: c-value maps or statistics differ");
        }
    }

    #[test]
    fn gpu_cambi_equals_cpu_on_parity_clips_and_options() {
        let Some(state) = crate::gpu::test_state() else {
            return;
        };
        let set = GpuSet::new(vec![state]).unwrap();
        for clip in PARITY_CLIPS {
            check(&set, clip, "", 3);
        }
        for (clip, opts) in OPTION_CASES {
            check(&set, clip, opts, 2);
        }
    }

    #[test]
    fn gpu_cambi_speed_on_1080p() {
        let Some(state) = crate::gpu::test_state() else {
            return;
        };
        let set = GpuSet::new(vec![state]).unwrap();
        let clip = "natural_1920x1080_420p8";
        let (refs, dists) = load_parity_clip(clip);
        for opts in ["", "cambi_high_res_speedup=1080"] {
            let cpu = cambi(opts);
            let gpu = cambi(opts).with_gpu(Some(set.clone()));
            // Warm-up: kernel loading and buffer allocation.
            let want = run(&cpu, 0, &refs[0], &dists[0]);
            assert_eq!(run(&gpu, 0, &refs[0], &dists[0]), want);
            let n = refs.len().min(3);
            let t = Instant::now();
            for i in 0..n {
                run(&cpu, i, &refs[i], &dists[i]);
            }
            let cpu_ms = t.elapsed().as_secs_f64() * 1e3 / n as f64;
            let t = Instant::now();
            for i in 0..n {
                run(&gpu, i, &refs[i], &dists[i]);
            }
            let gpu_ms = t.elapsed().as_secs_f64() * 1e3 / n as f64;
            println!(
                "cambi {clip} [{opts}]: cpu {cpu_ms:.1} ms/frame, gpu {gpu_ms:.1} ms/frame, \
                 speed-up {:.1}x",
                cpu_ms / gpu_ms
            );
        }
    }
}
