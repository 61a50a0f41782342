//! Test helpers: parity clips loaded as pictures, and upstream's expected JSON logs. Finding
//! and decompressing the clips is shared with the integration tests (`tests/common/clips.rs`).

#![forbid(unsafe_code)]

use std::path::Path;
use std::sync::Arc;

use crate::picture::{Picture, PictureData, PixelFormat};

#[path = "../tests/common/clips.rs"]
mod clips;
pub use clips::*;

/// The value upstream printed for `metric` at `frame` in `log`.
pub fn expected_metric(log: &serde_json::Value, frame: usize, metric: &str) -> Option<f64> {
    log["frames"][frame]["metrics"][metric].as_f64()
}

fn read_planes(bytes: &[u8], fmt: PixelFormat, bpc: u32, w: usize, h: usize) -> (Picture, usize) {
    let mut pic = PictureData::new(fmt, bpc, w, h).expect("picture");
    let bps = if bpc > 8 { 2 } else { 1 };
    let (sx, sy) = fmt.chroma_shift();
    // Files store ceil-sized chroma; pictures keep libvmaf's floor size.
    let file_dims = [(w, h), ((w + sx as usize) >> sx, (h + sy as usize) >> sy)];
    let mut pos = 0;
    for p in 0..fmt.plane_count() {
        let (fw, fh) = file_dims[p.min(1)];
        let (pw, ph, stride) = (pic.w[p], pic.h[p], pic.stride[p]);
        for y in 0..fh {
            let row = &bytes[pos + y * fw * bps..pos + (y + 1) * fw * bps];
            if y < ph {
                if bpc == 8 {
                    pic.plane_u8_mut(p)[y * stride..y * stride + pw].copy_from_slice(&row[..pw]);
                } else {
                    let dst = &mut pic.plane_u16_mut(p)[y * stride..y * stride + pw];
                    for (x, d) in dst.iter_mut().enumerate() {
                        *d = u16::from_le_bytes([row[2 * x], row[2 * x + 1]]);
                    }
                }
            }
        }
        pos += fw * fh * bps;
    }
    (Arc::new(pic), pos)
}

/// Loads every frame of a y4m file.
pub fn load_y4m(path: &Path) -> Vec<Picture> {
    let data = std::fs::read(path).expect("read y4m");
    let nl = data.iter().position(|&b| b == b'\n').expect("header");
    let header = std::str::from_utf8(&data[..nl]).expect("ascii header");
    let (mut w, mut h, mut c) = (0, 0, "420".to_string());
    for tok in header.split_whitespace().skip(1) {
        match tok.as_bytes()[0] {
            b'W' => w = tok[1..].parse().unwrap(),
            b'H' => h = tok[1..].parse().unwrap(),
            b'C' => c = tok[1..].to_string(),
            _ => {}
        }
    }
    let (fmt, bpc) = if let Some(rest) = c.strip_prefix("420") {
        (
            PixelFormat::Yuv420p,
            rest.strip_prefix('p')
                .and_then(|b| b.parse().ok())
                .unwrap_or(8),
        )
    } else if let Some(rest) = c.strip_prefix("422") {
        (
            PixelFormat::Yuv422p,
            rest.strip_prefix('p')
                .and_then(|b| b.parse().ok())
                .unwrap_or(8),
        )
    } else if let Some(rest) = c.strip_prefix("444") {
        (
            PixelFormat::Yuv444p,
            rest.strip_prefix('p')
                .and_then(|b| b.parse().ok())
                .unwrap_or(8),
        )
    } else {
        panic!("unsupported y4m colorspace {c}")
    };
    let mut pos = nl + 1;
    let mut out = Vec::new();
    while pos < data.len() {
        let fnl = pos
            + data[pos..]
                .iter()
                .position(|&b| b == b'\n')
                .expect("frame header");
        pos = fnl + 1;
        let (pic, used) = read_planes(&data[pos..], fmt, bpc, w, h);
        pos += used;
        out.push(pic);
    }
    out
}

/// Loads every frame of a raw planar file.
pub fn load_yuv(path: &Path, fmt: PixelFormat, bpc: u32, w: usize, h: usize) -> Vec<Picture> {
    let data = std::fs::read(path).expect("read yuv");
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < data.len() {
        let (pic, used) = read_planes(&data[pos..], fmt, bpc, w, h);
        pos += used;
        out.push(pic);
    }
    out
}

/// Reference and distorted frames of parity clip `name`.
pub fn load_parity_clip(name: &str) -> (Vec<Picture>, Vec<Picture>) {
    match parity_files(name) {
        (r, d, Some(g)) => {
            let fmt = match g.chroma {
                420 => PixelFormat::Yuv420p,
                422 => PixelFormat::Yuv422p,
                444 => PixelFormat::Yuv444p,
                c => panic!("{name}: chroma {c}"),
            };
            (
                load_yuv(&r, fmt, g.bpc, g.w, g.h),
                load_yuv(&d, fmt, g.bpc, g.w, g.h),
            )
        }
        (r, d, None) => (load_y4m(&r), load_y4m(&d)),
    }
}

/// Runs `ext` on every frame of parity clip `clip`, in order, with the previous references
/// supplied, and returns each frame's scores.
pub(crate) fn extract_clip(
    clip: &str,
    ext: &dyn crate::feature::Extractor,
) -> Vec<crate::feature::Scores> {
    extract_clip_at(clip, ext, crate::simd::CpuLevel::default())
}

/// [`extract_clip`] with the CPU code at level `cpu`.
pub(crate) fn extract_clip_at(
    clip: &str,
    ext: &dyn crate::feature::Extractor,
    cpu: crate::simd::CpuLevel,
) -> Vec<crate::feature::Scores> {
    let (refs, dists) = load_parity_clip(clip);
    (0..refs.len())
        .map(|i| {
            let input = crate::feature::FrameInput {
                index: i,
                reference: &refs[i],
                distorted: &dists[i],
                prev_ref: i.checked_sub(1).map(|p| &refs[p]),
                prev_prev_ref: i.checked_sub(2).map(|p| &refs[p]),
                prev_dist: i.checked_sub(1).map(|p| &dists[p]),
                cpu,
            };
            let mut out = Vec::new();
            ext.extract(&input, &mut out).expect("extract");
            out
        })
        .collect()
}

/// Asserts that, on every frame of every parity clip, `ext` stores a score named `stored` that
/// prints (`%.6f`) as upstream printed metric `printed` in `<clip>.json`.
pub(crate) fn assert_matches_upstream(
    ext: &dyn crate::feature::Extractor,
    stored: &str,
    printed: &str,
) {
    for clip in PARITY_CLIPS {
        let log = expected_json(&format!("{clip}.json"));
        let frames = log["frames"].as_array().expect("frames");
        let scores = extract_clip(clip, ext);
        assert_eq!(scores.len(), frames.len(), "{clip}");
        for (i, out) in scores.iter().enumerate() {
            let got = out
                .iter()
                .find(|(n, _)| n == stored)
                .unwrap_or_else(|| panic!("{clip} frame {i}: no {stored}"))
                .1;
            let want = expected_metric(&log, i, printed)
                .unwrap_or_else(|| panic!("{clip} frame {i}: upstream printed no {printed}"));
            assert_eq!(
                format!("{got:.6}"),
                format!("{want:.6}"),
                "{clip} frame {i} {printed}"
            );
        }
    }
}

/// A picture of pseudo-random samples (every plane, luma first), the same for the same `seed`.
pub fn noise_picture(
    fmt: crate::picture::PixelFormat,
    bpc: u32,
    w: usize,
    h: usize,
    seed: u64,
) -> crate::picture::Picture {
    let mut pic = crate::picture::PictureData::new(fmt, bpc, w, h).unwrap();
    let mut s = seed;
    let mut next = move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 33) as u32
    };
    let max = (1u32 << bpc) - 1;
    for i in 0..fmt.plane_count() {
        if bpc == 8 {
            pic.plane_u8_mut(i)
                .iter_mut()
                .for_each(|v| *v = next() as u8);
        } else {
            pic.plane_u16_mut(i)
                .iter_mut()
                .for_each(|v| *v = (next() & max) as u16);
        }
    }
    std::sync::Arc::new(pic)
}

/// Helpers of the checkasm-style SIMD tests (every kernel at every [`crate::simd::CpuLevel`]
/// against the scalar reference on random geometry and content, compared exactly).
pub mod checkasm {
    /// A small seeded generator (PCG-style LCG, high bits out): the same inputs on every run.
    pub struct Rng(u64);

    impl Rng {
        pub fn new(seed: u64) -> Self {
            Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
        }

        pub fn next_u32(&mut self) -> u32 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 32) as u32
        }

        /// Uniform in `0..n` (n > 0).
        pub fn below(&mut self, n: usize) -> usize {
            ((u64::from(self.next_u32()) * n as u64) >> 32) as usize
        }

        /// Uniform in `lo..=hi`.
        pub fn range(&mut self, lo: usize, hi: usize) -> usize {
            lo + self.below(hi - lo + 1)
        }
    }

    /// What a random plane looks like: kernels have different edge cases for each.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Content {
        /// One value everywhere (zero variance).
        Flat,
        /// Uniform noise over the full range.
        Noise,
        /// Only 0 and the maximum (largest sums and differences).
        Extremes,
        /// A smooth gradient with a little noise (realistic statistics).
        Smooth,
    }

    pub const CONTENTS: [Content; 4] = [
        Content::Flat,
        Content::Noise,
        Content::Extremes,
        Content::Smooth,
    ];

    /// Frame sizes every kernel is tried at: tiny, odd, around vector widths, and real ones.
    pub fn sizes(rng: &mut Rng, n_random: usize) -> Vec<(usize, usize)> {
        let mut v = vec![
            (1, 1),
            (2, 3),
            (7, 5),
            (15, 17),
            (16, 16),
            (31, 33),
            (33, 31),
            (63, 65),
            (65, 64),
            (127, 9),
            (576, 324),
            (577, 325),
            (1920, 1080),
        ];
        for _ in 0..n_random {
            v.push((rng.range(1, 300), rng.range(1, 300)));
        }
        v
    }

    /// `h` rows of `w` samples, `stride` apart (`stride >= w`), with `bpc`-bit values of
    /// `content`; samples between rows hold noise, which kernels must never read.
    pub fn plane(
        rng: &mut Rng,
        w: usize,
        h: usize,
        stride: usize,
        bpc: u32,
        content: Content,
    ) -> Vec<u16> {
        let max = (1u32 << bpc) - 1;
        let flat = rng.next_u32() & max;
        let (gx, gy) = (rng.below(7) as u32, rng.below(7) as u32);
        let mut v = vec![0u16; stride * h.max(1)];
        for y in 0..h {
            for x in 0..stride {
                let r = rng.next_u32();
                v[y * stride + x] = if x >= w {
                    (r & max) as u16
                } else {
                    (match content {
                        Content::Flat => flat,
                        Content::Noise => r & max,
                        Content::Extremes => {
                            if r & 1 == 0 {
                                0
                            } else {
                                max
                            }
                        }
                        Content::Smooth => {
                            let base = (x as u32 * gx + y as u32 * gy) & max;
                            (base + (r & 3)).min(max)
                        }
                    }) as u16
                };
            }
        }
        v
    }

    /// Best of `reps` runs of `f`, in milliseconds of this thread's CPU time (the ignored
    /// timing tests use it: on a shared machine wall time counts other jobs).
    pub fn best_cpu_ms(reps: usize, mut f: impl FnMut()) -> f64 {
        (0..reps)
            .map(|_| {
                let t = cpu_time::ThreadTime::now();
                f();
                t.elapsed().as_secs_f64() * 1e3
            })
            .fold(f64::INFINITY, f64::min)
    }

    /// [`plane`] narrowed to bytes (`bpc` must be 8).
    pub fn plane_u8(rng: &mut Rng, w: usize, h: usize, stride: usize, content: Content) -> Vec<u8> {
        plane(rng, w, h, stride, 8, content)
            .into_iter()
            .map(|v| v as u8)
            .collect()
    }
}

/// Adds each `(name, "key=value:key=value")` feature to `ctx`.
pub(crate) fn use_features(
    ctx: &mut crate::context::Context,
    features: &[(&str, &str)],
) -> crate::error::Result<()> {
    for (name, opts) in features {
        let mut d = crate::feature::Dict::new();
        for kv in opts.split(':').filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once('=').expect("key=value");
            d.set(k, v);
        }
        ctx.use_feature(name, &d)?;
    }
    Ok(())
}

/// Every feature's scores in `ctx`'s collector, by name (extractors finish in any order).
pub(crate) fn collected_scores(ctx: &crate::context::Context) -> Vec<(String, Vec<Option<f64>>)> {
    let mut all: Vec<_> = ctx
        .collector()
        .snapshot()
        .into_iter()
        .map(|v| (v.name.clone(), v.scores.clone()))
        .collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_parity_clips() {
        // Despite its name this clip is stored as 320x240 in its y4m header.
        let (r, d) = load_parity_clip("testsrc_321x241_420p8");
        assert_eq!(r.len(), 12);
        assert_eq!(d.len(), 12);
        assert_eq!(
            (r[0].w[0], r[0].h[0], r[0].w[1], r[0].h[1]),
            (320, 240, 160, 120)
        );
        let (r, _) = load_parity_clip("natural_320x180_420p12");
        assert_eq!(r[0].bpc, 12);
        let (r, _) = load_parity_clip("mandel_352x288_422p8");
        assert_eq!(r.len(), 24);
    }
}
