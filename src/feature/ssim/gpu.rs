//! Float SSIM and MS-SSIM on the GPU. kernels/float_ssim.hip repeats every float operation of
//! [`super::tools`] per pixel, in the same order and precision (luma to float, mirrored
//! decimation, the separable Gaussian, the SSIM terms); each row of the SSIM map is summed on
//! the device in a fixed order and the host adds the rows in order and finishes with the CPU's
//! own [`means_from_sums`] and [`float_ms_ssim::finish`]. Only the order of those double sums
//! differs from the CPU, which moves them by a few ulps at most before they are rounded to
//! float, so the scores equal the CPU's (bit for bit on every parity clip).
//!
//! Every size the CPU accepts runs on the GPU (the same size checks reject the others).

use super::float_ms_ssim::{self, MsSsim, SCALES};
use super::float_ssim::{box_taps, checked_scale};
use super::launch::{self, DeviceImage};
use super::tools::{
    check_pair, decimated_len, luma_scaler, means_from_sums, ssim_constants, SsimMeans, GAUSSIAN,
    GAUSSIAN_LEN, LPF_9X9,
};
use crate::error::{Error, Result};
use crate::gpu::job::{Job, Parts};
use crate::gpu::launch::Sample;
use crate::gpu::planes::PlaneAs;
use crate::gpu::{DeviceBuffer, GpuState, PinnedHostBuffer};
use crate::picture::Picture;
use std::sync::Arc;

/// What a pipeline computes: the levels of its float pyramid and the decimation between them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plan {
    /// Size of each level; level 0 is the luma plane.
    pub(crate) dims: Vec<(usize, usize)>,
    /// Decimation factor and square kernel from one level to the next.
    pub(crate) factor: usize,
    pub(crate) taps: Vec<f32>,
    pub(crate) size: usize,
    /// Levels whose SSIM is computed, in output order.
    pub(crate) ssim_levels: Vec<usize>,
}

impl Plan {
    pub(crate) fn float_ssim(w: usize, h: usize, scale: usize) -> Plan {
        let mut dims = vec![(w, h)];
        if scale > 1 {
            dims.push((decimated_len(w, scale), decimated_len(h, scale)));
        }
        Plan {
            ssim_levels: vec![dims.len() - 1],
            dims,
            factor: scale,
            taps: box_taps(scale),
            size: scale,
        }
    }

    pub(crate) fn ms_ssim(w: usize, h: usize) -> Plan {
        let mut dims = vec![(w, h)];
        for _ in 1..SCALES {
            let (pw, ph) = dims[dims.len() - 1];
            dims.push((decimated_len(pw, 2), decimated_len(ph, 2)));
        }
        Plan {
            dims,
            factor: 2,
            taps: LPF_9X9.to_vec(),
            size: 9,
            ssim_levels: (0..SCALES).collect(),
        }
    }

    /// Row sums (4 per valid window row) of each SSIM level, as (offset, rows, positions).
    pub(crate) fn sum_layout(&self) -> Vec<(usize, usize, usize)> {
        let mut off = 0;
        self.ssim_levels
            .iter()
            .map(|&l| {
                let (w, h) = self.dims[l];
                let (dw, dh) = (w + 1 - GAUSSIAN_LEN, h + 1 - GAUSSIAN_LEN);
                let entry = (off, dh, dw * dh);
                off += 4 * dh;
                entry
            })
            .collect()
    }
}

/// Device buffers of one [`Plan`]. `MS` separates the float_ssim and float_ms_ssim scratch,
/// so both extractors in one context keep their own buffers.
struct Pipeline<const MS: bool> {
    plan: Plan,
    refs: Vec<DeviceBuffer<f32>>,
    dis: Vec<DeviceBuffer<f32>>,
    hbuf: DeviceBuffer<f32>,
    gauss: DeviceBuffer<f32>,
    taps: DeviceBuffer<f32>,
    sums_dev: DeviceBuffer<f64>,
    sums_host: PinnedHostBuffer<f64>,
}

impl<const MS: bool> Pipeline<MS> {
    fn new(state: &GpuState, plan: Plan) -> Result<Self> {
        let dev = state.device();
        let mut refs = Vec::new();
        let mut dis = Vec::new();
        for &(w, h) in &plan.dims {
            refs.push(DeviceBuffer::new(dev, w * h)?);
            dis.push(DeviceBuffer::new(dev, w * h)?);
        }
        let hbuf_len = plan
            .ssim_levels
            .iter()
            .map(|&l| 5 * launch::ssim_hconv_plane(plan.dims[l].0, plan.dims[l].1))
            .max()
            .unwrap_or(0);
        let n_sums = plan
            .sum_layout()
            .last()
            .map_or(0, |&(off, rows, _)| off + 4 * rows);
        let mut gauss = DeviceBuffer::new(dev, GAUSSIAN_LEN)?;
        gauss.upload_blocking(state.stream(), &GAUSSIAN)?;
        let mut taps = DeviceBuffer::new(dev, plan.taps.len().max(1))?;
        if !plan.taps.is_empty() {
            taps.upload_blocking(state.stream(), &plan.taps)?;
        }
        Ok(Pipeline {
            refs,
            dis,
            hbuf: DeviceBuffer::new(dev, hbuf_len)?,
            gauss,
            taps,
            sums_dev: DeviceBuffer::new(dev, n_sums)?,
            sums_host: PinnedHostBuffer::new(dev, n_sums)?,
            plan,
        })
    }

    /// Queues the plan on the job's picture pair: to float, the decimated levels, and the
    /// SSIM row sums of each SSIM level, read back into `sums_host`.
    fn queue<T: Sample + PlaneAs>(job: &mut Job<Self, T, 2>, bpc: u32) -> Result<()> {
        let Parts {
            state,
            stream,
            scratch: p,
            luma: [r, d],
        } = job.parts();
        let (w, h) = p.plan.dims[0];
        let scaler = luma_scaler(bpc)?;
        let image = |buf, (w, h): (usize, usize)| DeviceImage { buf, w, h };
        launch::ssim_to_float(
            state,
            r.plane(w, h),
            d.plane(w, h),
            scaler,
            image(&p.refs[0], (w, h)),
            image(&p.dis[0], (w, h)),
        )?
        .queue(stream)?;
        let plan = &p.plan;
        for l in 1..plan.dims.len() {
            launch::ssim_decimate(
                state,
                image(&p.refs[l - 1], plan.dims[l - 1]),
                image(&p.dis[l - 1], plan.dims[l - 1]),
                &p.taps,
                plan.size,
                plan.factor,
                image(&p.refs[l], plan.dims[l]),
                image(&p.dis[l], plan.dims[l]),
            )?
            .queue(stream)?;
        }
        for (&l, &(offset, _, _)) in plan.ssim_levels.iter().zip(&plan.sum_layout()) {
            let dims = plan.dims[l];
            launch::ssim_hconv(
                state,
                image(&p.refs[l], dims),
                image(&p.dis[l], dims),
                &p.gauss,
                &p.hbuf,
            )?
            .queue(stream)?;
            launch::ssim_rows(
                state,
                &p.hbuf,
                dims.0,
                dims.1,
                &p.gauss,
                ssim_constants(),
                &p.sums_dev,
                offset,
            )?
            .queue(stream)?;
        }
        let n = p.sums_dev.len();
        p.sums_dev.download_async(stream, &mut p.sums_host, n)?;
        Ok(())
    }

    /// The SSIM means of each SSIM level from the read-back row sums (waits for them).
    fn means(&mut self) -> Result<Vec<SsimMeans>> {
        Ok(self.plan.means(self.sums_host.as_slice()?))
    }
}

impl Plan {
    /// The SSIM means of each SSIM level from the row sums of all levels (`sum_layout`).
    pub(crate) fn means(&self, sums: &[f64]) -> Vec<SsimMeans> {
        self.sum_layout()
            .iter()
            .map(|&(offset, rows, count)| {
                let mut acc = [0.0f64; 4];
                for row in sums[offset..offset + 4 * rows].chunks_exact(4) {
                    for (a, &v) in acc.iter_mut().zip(row) {
                        *a += v;
                    }
                }
                means_from_sums(acc, count)
            })
            .collect()
    }
}

/// Runs `plan` on a picture pair with a pooled pipeline of kind `MS` (rebuilt when the plan
/// changes) and waits for the SSIM means of each SSIM level.
fn run_plan<const MS: bool>(
    state: &Arc<GpuState>,
    reference: &Picture,
    distorted: &Picture,
    plan: Plan,
) -> Result<Vec<SsimMeans>> {
    fn typed<const MS: bool, T: Sample + PlaneAs>(
        state: &Arc<GpuState>,
        pics: [&Picture; 2],
        plan: Plan,
    ) -> Result<Vec<SsimMeans>> {
        let bpc = pics[0].bpc;
        let mut job = Job::<Pipeline<MS>, T, 2>::start(
            state,
            pics,
            |p| p.plan == plan,
            |st| Pipeline::new(st, plan.clone()),
        )?;
        Pipeline::queue(&mut job, bpc)?;
        job.finish(|p| p.means())()
    }
    let pics = [reference, distorted];
    if reference.bpc == 8 {
        typed::<MS, u8>(state, pics, plan)
    } else {
        typed::<MS, u16>(state, pics, plan)
    }
}

/// [`super::float_ssim::compute`] on the GPU: same results, same errors.
pub fn float_ssim(
    state: &Arc<GpuState>,
    reference: &Picture,
    distorted: &Picture,
    scale: i32,
) -> Result<SsimMeans> {
    check_pair("float_ssim", reference, distorted)?;
    let (w, h) = (reference.w[0], reference.h[0]);
    let scale = checked_scale(scale, w, h)?;
    if w < GAUSSIAN_LEN || h < GAUSSIAN_LEN {
        return Err(Error::inval(format!(
            "ssim: {w}x{h} is smaller than the {GAUSSIAN_LEN}x{GAUSSIAN_LEN} window"
        )));
    }
    let m = run_plan::<false>(state, reference, distorted, Plan::float_ssim(w, h, scale))?;
    m.first()
        .copied()
        .ok_or_else(|| Error::inval("float_ssim: no SSIM level"))
}

/// [`float_ms_ssim::compute`] on the GPU: same results, same errors.
pub fn float_ms_ssim(
    state: &Arc<GpuState>,
    reference: &Picture,
    distorted: &Picture,
) -> Result<MsSsim> {
    check_pair("float_ms_ssim", reference, distorted)?;
    let (w, h) = (reference.w[0], reference.h[0]);
    float_ms_ssim::check_size(w, h)?;
    let m = run_plan::<true>(state, reference, distorted, Plan::ms_ssim(w, h))?;
    let means: [SsimMeans; SCALES] = m
        .try_into()
        .map_err(|_| Error::inval("float_ms_ssim: wrong number of scales"))?;
    float_ms_ssim::finish(&means)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feature::{create, create_on, Dict, FrameInput, Scores};
    use crate::gpu::GpuSet;
    use crate::picture::PixelFormat;
    use crate::testutil::noise_picture;
    use crate::testutil::{load_parity_clip, PARITY_CLIPS};
    use std::sync::OnceLock;

    /// One compared value: what it is, CPU value, GPU value.
    type Row = (String, f64, f64);

    /// float_ssim (auto, 2 and 3 decimation) and float_ms_ssim values of every frame of every
    /// parity clip, CPU beside GPU; computed once for the tests below.
    fn parity_rows(state: &Arc<GpuState>) -> &'static [Row] {
        static ROWS: OnceLock<Vec<Row>> = OnceLock::new();
        ROWS.get_or_init(|| {
            let mut rows = Vec::new();
            for clip in PARITY_CLIPS {
                let (refs, dists) = load_parity_clip(clip);
                for (i, (r, d)) in refs.iter().zip(&dists).enumerate() {
                    for scale in [0, 2, 3] {
                        let cpu = super::super::float_ssim::compute(
                            r,
                            d,
                            scale,
                            crate::simd::CpuLevel::SCALAR,
                        )
                        .unwrap();
                        let gpu = float_ssim(state, r, d, scale).unwrap();
                        for (k, (a, b)) in [
                            (cpu.ssim, gpu.ssim),
                            (cpu.l, gpu.l),
                            (cpu.c, gpu.c),
                            (cpu.s, gpu.s),
                        ]
                        .into_iter()
                        .enumerate()
                        {
                            let what = ["ssim", "l", "c", "s"][k];
                            let label = format!("{clip} frame {i} float_ssim scale {scale} {what}");
                            rows.push((label, f64::from(a), f64::from(b)));
                        }
                    }
                    let cpu = float_ms_ssim::compute(r, d, crate::simd::CpuLevel::SCALAR).unwrap();
                    let gpu = float_ms_ssim(state, r, d).unwrap();
                    let label = format!("{clip} frame {i} float_ms_ssim");
                    rows.push((label.clone(), cpu.score, gpu.score));
                    for s in 0..SCALES {
                        for (what, a, b) in [
                            ("l", cpu.l[s], gpu.l[s]),
                            ("c", cpu.c[s], gpu.c[s]),
                            ("s", cpu.s[s], gpu.s[s]),
                        ] {
                            rows.push((format!("{label} {what} scale {s}"), a, b));
                        }
                    }
                }
            }
            let differ: Vec<&Row> = rows.iter().filter(|r| r.1 != r.2).collect();
            let max = differ.iter().map(|r| (r.1 - r.2).abs()).fold(0.0, f64::max);
            println!(
                "{} values compared, {} not bit-identical (max difference {max:e})",
                rows.len(),
                differ.len()
            );
            for r in differ.iter().take(20) {
                println!("  {}: cpu {:.17} gpu {:.17}", r.0, r.1, r.2);
            }
            rows
        })
    }

    #[test]
    fn plans_follow_the_cpu_pyramid() {
        let p = Plan::ms_ssim(321, 241);
        let dims = [(321, 241), (161, 121), (81, 61), (41, 31), (21, 16)];
        assert_eq!(p.dims, dims);
        let layout = p.sum_layout();
        assert_eq!(layout[0], (0, 231, 311 * 231));
        assert_eq!(layout[4], (4 * (231 + 111 + 51 + 21), 6, 11 * 6));
        let p = Plan::float_ssim(1920, 1080, 4);
        assert_eq!(p.dims, [(1920, 1080), (480, 270)]);
        assert_eq!((p.ssim_levels, p.taps.len()), (vec![1], 16));
        assert_eq!(Plan::float_ssim(99, 67, 1).dims, [(99, 67)]);
    }

    /// The kernel text compiles under hiprtc and nvrtc wherever they are installed, GPU or not
    /// (hipcc and nvcc compile it at build time when present).
    #[test]
    fn run_time_compilers_accept_the_gpu_ssim_kernels() {
        use crate::gpu::code::{compile_source, embedded};
        use crate::gpu::{sys, Vendor};
        let k = embedded("float_ssim").unwrap();
        if sys::hiprtc().is_ok() {
            let opts = ["--offload-arch=gfx90a".to_string(), "-O3".to_string()];
            let obj = compile_source(Vendor::Amd, k.name, k.source, &opts).unwrap();
            let text = String::from_utf8_lossy(&obj);
            for entry in [
                "vmaf_ssim_to_float_u16",
                "vmaf_ssim_decimate",
                "vmaf_ssim_rows",
            ] {
                assert!(text.contains(entry), "{entry} missing");
            }
        }
        if sys::nvrtc().is_ok() {
            let opts = [
                "--gpu-architecture=sm_90".to_string(),
                "-fmad=false".to_string(),
            ];
            let obj = compile_source(Vendor::Nvidia, k.name, k.source, &opts).unwrap();
            assert!(obj.starts_with(b"\x7fELF"));
        }
    }

    /// The hard requirement: every value prints (`%.6f`) as the CPU's.
    #[test]
    fn gpu_ssim_equals_cpu_at_printed_precision_on_parity_clips() {
        let Some(state) = crate::gpu::test_state() else {
            return;
        };
        for (what, cpu, gpu) in parity_rows(&state) {
            assert_eq!(format!("{cpu:.6}"), format!("{gpu:.6}"), "{what}");
        }
    }

    /// What the design gives: the same float operations in the same order, so identical values
    /// (only the order of the final double sums differs, which does not show after rounding).
    #[test]
    fn gpu_ssim_bit_exact_with_cpu_on_parity_clips() {
        let Some(state) = crate::gpu::test_state() else {
            return;
        };
        for (what, cpu, gpu) in parity_rows(&state) {
            assert_eq!(cpu.to_bits(), gpu.to_bits(), "{what}: cpu {cpu} gpu {gpu}");
        }
    }

    fn extract(x: &dyn crate::feature::Extractor, r: &Picture, d: &Picture) -> Result<Scores> {
        let input = FrameInput::pair(0, r, d);
        let mut out = Scores::new();
        x.extract(&input, &mut out).map(|()| out)
    }

    /// The extractors `create_on` makes with a GPU give the CPU extractors' scores and errors,
    /// with every option, on odd sizes (mirrored borders of every decimation) and depths.
    #[test]
    fn gpu_extractors_equal_cpu_extractors() {
        let Some(state) = crate::gpu::test_state() else {
            return;
        };
        let set = GpuSet::new(vec![state]).unwrap();
        let mut pairs = vec![
            (
                noise_picture(PixelFormat::Yuv420p, 10, 203, 181, 1),
                noise_picture(PixelFormat::Yuv420p, 10, 203, 181, 2),
            ),
            (
                noise_picture(PixelFormat::Yuv444p, 8, 99, 67, 3),
                noise_picture(PixelFormat::Yuv444p, 8, 99, 67, 4),
            ),
            (
                noise_picture(PixelFormat::Yuv400p, 16, 177, 176, 5),
                noise_picture(PixelFormat::Yuv400p, 16, 177, 176, 6),
            ),
            // Too small for either extractor (and for decimation by 3).
            (
                noise_picture(PixelFormat::Yuv420p, 8, 10, 40, 7),
                noise_picture(PixelFormat::Yuv420p, 8, 10, 40, 8),
            ),
            (
                noise_picture(PixelFormat::Yuv420p, 8, 40, 33, 9),
                noise_picture(PixelFormat::Yuv420p, 8, 40, 33, 10),
            ),
        ];
        let (refs, dists) = load_parity_clip("natural_320x180_420p12");
        pairs.push((refs[1].clone(), dists[1].clone()));
        // Identical pictures: SSIM exactly 1 (infinite dB unless clipped).
        pairs.push((refs[0].clone(), refs[0].clone()));
        let mut option_sets = vec![Dict::new()];
        let mut o = Dict::new();
        o.set("enable_lcs", "true");
        o.set("enable_db", "true");
        option_sets.push(o.clone());
        o.set("clip_db", "true");
        option_sets.push(o);
        let mut checked = 0;
        for name in ["float_ssim", "float_ms_ssim"] {
            let mut sets = option_sets.clone();
            if name == "float_ssim" {
                for scale in ["2", "3"] {
                    let mut o = Dict::new();
                    o.set("enable_lcs", "true");
                    o.set("scale", scale);
                    sets.push(o);
                }
            }
            for opts in &sets {
                let cpu = create(name, opts).unwrap();
                let gpu = create_on(name, opts, Some(&set)).unwrap();
                for (k, (r, d)) in pairs.iter().enumerate() {
                    let want = extract(&*cpu, r, d);
                    let got = extract(&*gpu, r, d);
                    match (&want, &got) {
                        (Ok(a), Ok(b)) => {
                            let bits = |s: &Scores| -> Vec<(String, u64)> {
                                s.iter().map(|(n, v)| (n.clone(), v.to_bits())).collect()
                            };
                            assert_eq!(bits(a), bits(b), "{name} {opts:?} pair {k}");
                            checked += 1;
                        }
                        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                        _ => panic!("{name} {opts:?} pair {k}: cpu {want:?} gpu {got:?}"),
                    }
                }
            }
        }
        assert!(checked > 20, "only {checked} pairs scored");
    }
}
