//! psnr feature extractor (CPU reference; GPU dispatch when a HIP state is imported).
//!
//! Per plane: an exact integer SSE, then `10·log10(peak² / mse)` capped at a per-bit-depth
//! maximum. With `enable_apsnr` the SSEs and pixel counts of all frames are summed for an
//! aggregate PSNR, which is why upstream registers the extractor as TEMPORAL.
//!
//! Layout: `cpu.rs` is the CPU reference ([`sse_plane`], [`psnr_from_sse`]), `x86.rs` /
//! `aarch64.rs` its AVX2, AVX-512 and NEON row sums, `gpu.rs` the same SSEs on the device
//! (kernels/psnr.hip); this file holds the extractor, its options, the dispatch and the
//! aggregate state.

#[cfg(target_arch = "aarch64")]
mod aarch64;
mod cpu;
pub mod gpu;
#[cfg(test)]
mod hipcpu_tests;
pub(crate) mod launch;
#[cfg(target_arch = "x86_64")]
mod x86;
use crate::gpu::GpuSet;
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::feature::{Dict, Extractor, ExtractorFlags, FrameInput, OptSpec, Opts, Scores};
use crate::picture::{PictureData, PixelFormat};

use super::c_min;
pub use cpu::{psnr_from_sse, sse_plane};

/// Full feature names this extractor provides.
pub const PROVIDED_FEATURES: &[&str] = &["psnr_y", "psnr_cb", "psnr_cr"];

const PSNR_NAMES: [&str; 3] = ["psnr_y", "psnr_cb", "psnr_cr"];
const MSE_NAMES: [&str; 3] = ["mse_y", "mse_cb", "mse_cr"];
const APSNR_NAMES: [&str; 3] = ["apsnr_y", "apsnr_cb", "apsnr_cr"];

// None of these are feature parameters: psnr names never depend on options.
static OPTIONS: [OptSpec; 5] = [
    OptSpec::boolean("enable_chroma", None, true, false),
    OptSpec::boolean("enable_mse", None, false, false),
    OptSpec::boolean("enable_apsnr", None, false, false),
    OptSpec::boolean("reduced_hbd_peak", None, false, false),
    OptSpec::double("min_sse", None, 0.0, 0.0, f64::MAX, false),
];

/// Running sums for aggregate PSNR.
#[derive(Debug, Default)]
struct ApsnrState {
    sse: [u64; 3],
    n_pixels: [u64; 3],
    /// Bit depth of the stream, fixed by the first frame.
    bpc: Option<u32>,
}

/// The psnr extractor.
pub struct Psnr {
    enable_chroma: bool,
    enable_mse: bool,
    enable_apsnr: bool,
    reduced_hbd_peak: bool,
    min_sse: f64,
    apsnr: Mutex<ApsnrState>,
    /// GPU used for the sums of squared differences, when one was imported.
    gpu: Option<GpuSet>,
}

impl Psnr {
    /// Creates the extractor from its options.
    pub fn new(opts: &Dict) -> Result<Self> {
        let o = Opts::parse(&OPTIONS, opts)?;
        Ok(Psnr {
            enable_chroma: o.bool("enable_chroma"),
            enable_mse: o.bool("enable_mse"),
            enable_apsnr: o.bool("enable_apsnr"),
            reduced_hbd_peak: o.bool("reduced_hbd_peak"),
            min_sse: o.double("min_sse"),
            apsnr: Mutex::new(ApsnrState::default()),
            gpu: None,
        })
    }

    /// Computes the sums of squared differences on `gpu` when given.
    pub fn with_gpu(mut self, gpu: Option<GpuSet>) -> Self {
        self.gpu = gpu;
        self
    }

    /// Peak sample value at `bpc`: `2^bpc − 1`, or `255·2^(bpc−8)` with `reduced_hbd_peak`.
    pub fn peak(&self, bpc: u32) -> u32 {
        if self.reduced_hbd_peak {
            255 << (bpc - 8)
        } else {
            (1 << bpc) - 1
        }
    }

    /// Number of planes scored for a picture of `pix_fmt` (chroma is off for 4:0:0).
    pub fn plane_count(&self, pix_fmt: PixelFormat) -> usize {
        if self.enable_chroma && pix_fmt != PixelFormat::Yuv400p {
            3
        } else {
            1
        }
    }

    /// Cap of plane `plane`'s PSNR for a `w`x`h` picture: `6·bpc + 12`, or with `min_sse` the
    /// PSNR that SSE would give, rounded up.
    pub fn psnr_max(
        &self,
        pix_fmt: PixelFormat,
        bpc: u32,
        w: usize,
        h: usize,
        plane: usize,
    ) -> f64 {
        if self.min_sse == 0.0 {
            return f64::from(6 * bpc + 12);
        }
        // Upstream's plane size rule here: any non-4:4:4 halves chroma width, only 4:2:0
        // halves its height.
        let chroma = plane > 0;
        let pw = if chroma && pix_fmt != PixelFormat::Yuv444p {
            w as u32 / 2
        } else {
            w as u32
        };
        let ph = if chroma && pix_fmt == PixelFormat::Yuv420p {
            h as u32 / 2
        } else {
            h as u32
        };
        let mse = self.min_sse / f64::from(pw.wrapping_mul(ph));
        let peak = self.peak(bpc);
        (10.0 * (f64::from(peak.wrapping_mul(peak)) / mse).log10()).ceil()
    }

    fn check_pair(reference: &PictureData, distorted: &PictureData) -> Result<()> {
        if !matches!(reference.bpc, 8 | 10 | 12 | 16) {
            return Err(Error::inval(format!(
                "psnr: unsupported bit depth {}",
                reference.bpc
            )));
        }
        if reference.bpc != distorted.bpc
            || reference.pix_fmt != distorted.pix_fmt
            || reference.w != distorted.w
            || reference.h != distorted.h
        {
            return Err(Error::inval(
                "psnr: reference and distorted pictures differ in format or size",
            ));
        }
        Ok(())
    }

    /// Host finishing of one frame from the SSE of each scored plane (`sse.len()` is
    /// [`Psnr::plane_count`]): appends psnr (and mse) scores and feeds the APSNR sums.
    pub fn finish(&self, reference: &PictureData, sse: &[u64], out: &mut Scores) -> Result<()> {
        let bpc = reference.bpc;
        if sse.len() != self.plane_count(reference.pix_fmt) {
            return Err(Error::inval("psnr: wrong number of plane SSEs"));
        }
        let (w, h) = (reference.w[0], reference.h[0]);
        let peak = self.peak(bpc);
        for (p, &s) in sse.iter().enumerate() {
            let psnr_max = self.psnr_max(reference.pix_fmt, bpc, w, h, p);
            let (pw, ph) = (reference.w[p], reference.h[p]);
            let (psnr, mse) = psnr_from_sse(s, pw, ph, peak, psnr_max);
            out.push((PSNR_NAMES[p].to_string(), psnr));
            if self.enable_mse {
                out.push((MSE_NAMES[p].to_string(), mse));
            }
        }
        if self.enable_apsnr {
            let mut st = self.apsnr.lock().unwrap_or_else(|e| e.into_inner());
            st.bpc.get_or_insert(bpc);
            for (p, &s) in sse.iter().enumerate() {
                st.sse[p] += s;
                let n = (reference.w[p] as u32).wrapping_mul(reference.h[p] as u32);
                st.n_pixels[p] += u64::from(n);
            }
        }
        Ok(())
    }

    /// Aggregate metrics (`apsnr_y/cb/cr`) over every frame extracted so far; empty unless
    /// `enable_apsnr` is set and a frame was seen. Like upstream, all three planes are reported
    /// even when chroma was not scored (those come out as −inf).
    pub fn apsnr_metrics(&self) -> Vec<(String, f64)> {
        if !self.enable_apsnr {
            return Vec::new();
        }
        let st = self.apsnr.lock().unwrap_or_else(|e| e.into_inner());
        let Some(bpc) = st.bpc else {
            return Vec::new();
        };
        let peak_sq = self.peak(bpc).wrapping_mul(self.peak(bpc));
        (0..3)
            .map(|p| {
                let n = st.n_pixels[p];
                let apsnr = 10.0
                    * (f64::from(peak_sq).log10() + (n as f64).log10()
                        - (st.sse[p] as f64).log10());
                let cap_arg = u64::from(peak_sq).wrapping_mul(n).wrapping_mul(2);
                let max_apsnr = (10.0 * (cap_arg as f64).log10()).ceil();
                (APSNR_NAMES[p].to_string(), c_min(apsnr, max_apsnr))
            })
            .collect()
    }
}

impl Extractor for Psnr {
    fn on_gpu(&self) -> bool {
        self.gpu.is_some()
    }

    fn planes_read(&self) -> u8 {
        if self.enable_chroma {
            crate::feature::ALL_PLANES
        } else {
            crate::feature::LUMA
        }
    }

    fn host_planes(&self) -> u8 {
        // The GPU path reads device pictures in place (and fetches what it needs otherwise).
        if self.gpu.is_some() {
            0
        } else {
            self.planes_read()
        }
    }

    fn name(&self) -> &'static str {
        "psnr"
    }

    fn flags(&self) -> ExtractorFlags {
        ExtractorFlags::TEMPORAL
    }

    fn aggregate(&self) -> Vec<(String, f64)> {
        self.apsnr_metrics()
    }

    fn extract(&self, input: &FrameInput<'_>, out: &mut Scores) -> Result<()> {
        let (r, d) = (&**input.reference, &**input.distorted);
        Self::check_pair(r, d)?;
        let n = self.plane_count(r.pix_fmt);
        let sse: Vec<u64> = match &self.gpu {
            Some(g) => gpu::sse_planes(
                g.for_frame(input.index),
                input.reference,
                input.distorted,
                n,
            )?[..n]
                .to_vec(),
            None => (0..n).map(|p| sse_plane(r, d, p, input.cpu)).collect(),
        };
        self.finish(r, &sse, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simd::CpuLevel;
    use crate::testutil::{expected_json, load_parity_clip, PARITY_CLIPS};

    fn run(clip: &str, psnr: &Psnr) -> Vec<Scores> {
        crate::testutil::extract_clip(clip, psnr)
    }

    /// [`run`] with the CPU kernels of `cpu`.
    fn run_at(clip: &str, psnr: &Psnr, cpu: CpuLevel) -> Vec<Scores> {
        let (refs, dists) = load_parity_clip(clip);
        (0..refs.len())
            .map(|i| {
                let input = FrameInput {
                    cpu,
                    ..FrameInput::pair(i, &refs[i], &dists[i])
                };
                let mut out = Scores::new();
                psnr.extract(&input, &mut out).unwrap();
                out
            })
            .collect()
    }

    #[test]
    fn parity_clips_match_upstream() {
        parity_clips_at(CpuLevel::default());
    }

    #[test]
    fn parity_clips_at_every_level() {
        for cpu in CpuLevel::available() {
            parity_clips_at(cpu);
        }
    }

    fn parity_clips_at(cpu: CpuLevel) {
        for clip in PARITY_CLIPS {
            let log = expected_json(&format!("{clip}.json"));
            let frames = log["frames"].as_array().unwrap();
            let scores = run_at(clip, &Psnr::new(&Dict::new()).unwrap(), cpu);
            assert_eq!(scores.len(), frames.len(), "{clip}");
            for (i, (fr, out)) in frames.iter().zip(&scores).enumerate() {
                assert_eq!(out.len(), 3);
                for (name, v) in out {
                    let want = fr["metrics"][name.as_str()]
                        .as_f64()
                        .unwrap_or_else(|| panic!("{clip} frame {i}: no {name}"));
                    assert_eq!(
                        format!("{v:.6}"),
                        format!("{want:.6}"),
                        "{clip} frame {i} {name} at {}",
                        cpu.name()
                    );
                }
            }
        }
    }

    #[test]
    fn mse_apsnr_and_options() {
        let mut d = Dict::new();
        d.set("enable_mse", "true");
        d.set("enable_apsnr", "true");
        d.set("enable_chroma", "false");
        let p = Psnr::new(&d).unwrap();
        assert_eq!(p.dedup_key(), "psnr");
        assert_eq!(p.flags(), ExtractorFlags::TEMPORAL);
        // Semi-planar device frames get their chroma split only for readers of chroma.
        assert_eq!(p.planes_read(), crate::feature::LUMA);
        assert_eq!(
            Psnr::new(&Dict::new()).unwrap().planes_read(),
            crate::feature::ALL_PLANES
        );
        let scores = run("natural_320x180_420p12", &p);
        let (refs, dists) = load_parity_clip("natural_320x180_420p12");
        let mut total = 0u64;
        for (i, out) in scores.iter().enumerate() {
            let names: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
            assert_eq!(names, ["psnr_y", "mse_y"]);
            let sse = sse_plane(&refs[i], &dists[i], 0, CpuLevel::SCALAR);
            total += sse;
            assert_eq!(out[1].1, sse as f64 / (320.0 * 180.0));
            let want = (10.0 * (4095.0f64 * 4095.0 / out[1].1).log10()).min(84.0);
            assert_eq!(out[0].1, want);
        }
        let agg = p.apsnr_metrics();
        assert_eq!(agg[0].0, "apsnr_y");
        let n = 320.0 * 180.0 * scores.len() as f64;
        let want = 10.0 * ((4095.0f64 * 4095.0).log10() + n.log10() - (total as f64).log10());
        assert_eq!(agg[0].1, want);
        // Chroma was never scored: upstream's formula degenerates to -inf.
        assert_eq!(agg[1].1, f64::NEG_INFINITY);
        assert_eq!(agg[2].0, "apsnr_cr");

        // Identical pictures: capped at 6·bpc + 12 per frame, and at the aggregate cap.
        let p = Psnr::new(&d).unwrap();
        let (refs, _) = load_parity_clip("life_320x240_420p8");
        let input = FrameInput::pair(0, &refs[0], &refs[0]);
        let mut out = Scores::new();
        p.extract(&input, &mut out).unwrap();
        assert_eq!(out[0].1, 60.0);
        let cap = (10.0 * (65025.0f64 * 320.0 * 240.0 * 2.0).log10()).ceil();
        assert_eq!(p.apsnr_metrics()[0].1, cap);

        let mut d = Dict::new();
        d.set("reduced_hbd_peak", "true");
        d.set("min_sse", "0.5");
        let p = Psnr::new(&d).unwrap();
        assert_eq!(p.peak(10), 1020);
        assert_eq!(p.peak(8), 255);
        let want = (10.0 * (1020.0f64 * 1020.0 / (0.5 / (160.0 * 90.0))).log10()).ceil();
        assert_eq!(p.psnr_max(PixelFormat::Yuv420p, 10, 320, 180, 1), want);
        assert!(p.apsnr_metrics().is_empty());
    }

    #[test]
    fn rejects_unsupported_depth_and_mismatch() {
        let p = Psnr::new(&Dict::new()).unwrap();
        let a = std::sync::Arc::new(PictureData::new(PixelFormat::Yuv420p, 9, 16, 16).unwrap());
        let input = FrameInput::pair(0, &a, &a);
        assert!(p.extract(&input, &mut Scores::new()).is_err());
        let b = std::sync::Arc::new(PictureData::new(PixelFormat::Yuv420p, 8, 16, 16).unwrap());
        let c = std::sync::Arc::new(PictureData::new(PixelFormat::Yuv420p, 8, 18, 16).unwrap());
        let input = FrameInput::pair(0, &b, &c);
        assert!(p.extract(&input, &mut Scores::new()).is_err());
        let y = std::sync::Arc::new(PictureData::new(PixelFormat::Yuv400p, 8, 16, 16).unwrap());
        let input = FrameInput::pair(0, &y, &y);
        let mut out = Scores::new();
        p.extract(&input, &mut out).unwrap();
        assert_eq!(out.len(), 1);
    }
}
