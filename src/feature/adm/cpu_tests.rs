//! checkasm-style tests of the integer ADM stages: every SIMD level against the scalar
//! reference on random geometry, content and depth, compared exactly; and a timing harness.

use super::*;
use crate::testutil::checkasm::{plane, sizes, Content, Rng, CONTENTS};

/// The SIMD levels of this CPU (the scalar reference excluded).
fn simd_levels() -> Vec<CpuLevel> {
    CpuLevel::available()
        .into_iter()
        .filter(|&l| l != CpuLevel::SCALAR)
        .collect()
}

/// Frame sizes of the tests: `checkasm::sizes`, raised to ADM's minimum side, plus sizes
/// around it.
fn frame_sizes(rng: &mut Rng, n: usize) -> Vec<(usize, usize)> {
    let mut v: Vec<_> = sizes(rng, n)
        .into_iter()
        .map(|(w, h)| (w.max(MIN_SIDE), h.max(MIN_SIDE)))
        .collect();
    v.extend([(33, 33), (34, 35), (37, 33), (33, 40), (47, 41), (66, 34)]);
    v.sort();
    v.dedup();
    v
}

const DEPTHS: [u32; 5] = [8, 9, 10, 12, 16];

/// A luma plane of `content` at `bpc` bits with a random stride.
enum Pic {
    U8(Vec<u8>),
    U16(Vec<u16>),
}

impl Pic {
    fn luma(&self) -> Luma<'_> {
        match self {
            Pic::U8(v) => Luma::U8(v),
            Pic::U16(v) => Luma::U16(v),
        }
    }
}

fn picture(rng: &mut Rng, w: usize, h: usize, bpc: u32, content: Content) -> (Pic, usize) {
    let stride = w + [0, 1, 3, 17][rng.below(4)];
    let p = plane(rng, w, h, stride, bpc, content);
    if bpc == 8 {
        (Pic::U8(p.into_iter().map(|v| v as u8).collect()), stride)
    } else {
        (Pic::U16(p), stride)
    }
}

/// A distorted version of `p`: the same plane with noise added to some samples (so that
/// decoupling sees both near and far orientations), or an unrelated plane.
fn distort(rng: &mut Rng, p: &Pic, bpc: u32) -> Pic {
    let max = (1u32 << bpc) - 1;
    let amp = [1u32, 4, 64, max][rng.below(4)].max(1);
    let mut f = |v: u32| {
        if rng.below(3) == 0 {
            v
        } else {
            let d = rng.next_u32() % (2 * amp + 1);
            (v + d).saturating_sub(amp).min(max)
        }
    };
    match p {
        Pic::U8(v) => Pic::U8(v.iter().map(|&x| f(x as u32) as u8).collect()),
        Pic::U16(v) => Pic::U16(v.iter().map(|&x| f(x as u32) as u16).collect()),
    }
}

/// Random i16 band of `content` (full range: -32768 included).
fn band16(rng: &mut Rng, n: usize, content: Content) -> Vec<i16> {
    let flat = rng.next_u32() as i16;
    let amp = [1i32, 64, 4096, 32768][rng.below(4)];
    (0..n)
        .map(|k| match content {
            Content::Flat => flat,
            Content::Noise => (rng.next_u32() as i32 % amp) as i16,
            Content::Extremes => [i16::MIN, i16::MAX, 0, -1, 1, i16::MIN + 1][rng.below(6)],
            Content::Smooth => ((k as i32 * 7) % 2000 - 1000 + rng.below(5) as i32) as i16,
        })
        .collect()
}

/// Random i32 band of `content`; Noise spans a random magnitude up to the full range.
fn band32(rng: &mut Rng, n: usize, content: Content) -> Vec<i32> {
    let flat = rng.next_u32() as i32 >> rng.below(32);
    let bits = [8u32, 16, 20, 25, 26, 27, 31, 32][rng.below(8)];
    (0..n)
        .map(|k| match content {
            Content::Flat => flat,
            Content::Noise => {
                let v = rng.next_u32() as i32;
                if bits == 32 {
                    v
                } else {
                    v % (1 << bits)
                }
            }
            Content::Extremes => [i32::MIN, i32::MAX, 0, -1, 1 << 26, -(1 << 26)][rng.below(6)],
            Content::Smooth => (k as i32 % 5000 - 2500) * 300 + rng.below(100) as i32,
        })
        .collect()
}

/// Distorted band: `o` with some coefficients scaled, negated, zeroed or kept.
fn distort_band<T: Copy>(rng: &mut Rng, o: &[T], f: impl Fn(T, u32) -> T) -> Vec<T> {
    o.iter().map(|&x| f(x, rng.next_u32())).collect()
}

fn d16(x: i16, r: u32) -> i16 {
    match r % 6 {
        0 => x,
        1 => x / 2,
        2 => x.wrapping_neg(),
        3 => 0,
        4 => x.saturating_add((r >> 8) as i16 % 64),
        _ => (r >> 16) as i16,
    }
}

fn d32(x: i32, r: u32) -> i32 {
    match r % 6 {
        0 => x,
        1 => x / 2,
        2 => x.wrapping_neg(),
        3 => 0,
        4 => x.saturating_add((r >> 8) as i32 % 4096),
        _ => (r as i32) >> (r % 31),
    }
}

fn split3<T: Clone>(v: &[T], n: usize) -> [Vec<T>; 3] {
    [
        v[..n].to_vec(),
        v[n..2 * n].to_vec(),
        v[2 * n..3 * n].to_vec(),
    ]
}

fn refs<T>(v: &[Vec<T>; 3]) -> [&[T]; 3] {
    [&v[0], &v[1], &v[2]]
}

fn muts<T>(v: &mut [Vec<T>; 3]) -> [&mut [T]; 3] {
    let [a, b, c] = v;
    [a, b, c]
}

#[test]
fn checkasm_dwt_scale0() {
    let mut rng = Rng::new(1);
    for level in simd_levels() {
        for (w, h) in frame_sizes(&mut rng, 6) {
            for content in CONTENTS {
                for bpc in DEPTHS {
                    if w * h > 100_000 && bpc != 8 && bpc != 16 {
                        continue;
                    }
                    let (pic, stride) = picture(&mut rng, w, h, bpc, content);
                    let (bw, bh) = band_size(w, h, 0);
                    let n = bw * bh;
                    let run = |cpu| {
                        let mut approx = vec![0i32; n];
                        let mut bands = [vec![0i16; n], vec![0i16; n], vec![0i16; n]];
                        let mut tmp = Vec::new();
                        match pic.luma() {
                            Luma::U8(p) => dwt_scale0(
                                cpu,
                                p,
                                stride,
                                w,
                                h,
                                bpc,
                                &mut approx,
                                muts(&mut bands),
                                &mut tmp,
                            ),
                            Luma::U16(p) => dwt_scale0(
                                cpu,
                                p,
                                stride,
                                w,
                                h,
                                bpc,
                                &mut approx,
                                muts(&mut bands),
                                &mut tmp,
                            ),
                        }
                        (approx, bands)
                    };
                    assert!(
                        run(CpuLevel::SCALAR) == run(level),
                        "dwt_scale0 {level} {w}x{h} stride {stride} {content:?} bpc {bpc}"
                    );
                }
            }
        }
    }
}

#[test]
fn checkasm_dwt_scale123() {
    let mut rng = Rng::new(2);
    for level in simd_levels() {
        for (w, h) in frame_sizes(&mut rng, 8) {
            for content in CONTENTS {
                for scale in 1..NUM_SCALES {
                    // The previous approximation band of a w x h frame.
                    let (pw, ph) = band_size(w, h, scale - 1);
                    let src = band32(&mut rng, pw * ph, content);
                    let (bw, bh) = band_size(w, h, scale);
                    let n = bw * bh;
                    let run = |cpu| {
                        let mut approx = vec![0i32; n];
                        let mut bands = [vec![0i32; n], vec![0i32; n], vec![0i32; n]];
                        let mut tmp = Vec::new();
                        let b = muts(&mut bands);
                        dwt_scale123(cpu, &src, pw, ph, scale, &mut approx, b, &mut tmp);
                        (approx, bands)
                    };
                    assert!(
                        run(CpuLevel::SCALAR) == run(level),
                        "dwt_scale123 {level} scale {scale} {pw}x{ph} {content:?}"
                    );
                }
            }
        }
    }
}

/// Gains to try: 1 (integer fast path), the default 100, and odd ones.
fn egl(rng: &mut Rng) -> f64 {
    [1.0, 100.0, 1.2, 1.0 + rng.below(1000) as f64 / 7.0][rng.below(4)]
}

#[test]
fn checkasm_decouple_scale0() {
    let mut rng = Rng::new(3);
    for level in simd_levels() {
        for (w, h) in frame_sizes(&mut rng, 8) {
            for (content, indep) in CONTENTS.iter().flat_map(|&c| [(c, false), (c, true)]) {
                let (bw, bh) = band_size(w, h, 0);
                let n = bw * bh;
                let o = split3(&band16(&mut rng, 3 * n, content), n);
                // Distorted bands: derived from o, or independent (all sign and magnitude
                // combinations, e.g. every (h, v) coefficient -32768 with any d pair).
                let t = if indep {
                    split3(&band16(&mut rng, 3 * n, content), n)
                } else {
                    [0, 1, 2].map(|b| distort_band(&mut rng, &o[b], d16))
                };
                let egl = egl(&mut rng);
                let run = |cpu| {
                    let mut r = [vec![0i16; n], vec![0i16; n], vec![0i16; n]];
                    let mut a = r.clone();
                    decouple_scale0(
                        cpu,
                        refs(&o),
                        refs(&t),
                        bw,
                        bh,
                        egl,
                        muts(&mut r),
                        muts(&mut a),
                    );
                    (r, a)
                };
                assert!(
                    run(CpuLevel::SCALAR) == run(level),
                    "decouple_scale0 {level} {bw}x{bh} {content:?} indep {indep} egl {egl}"
                );
            }
        }
    }
}

#[test]
fn checkasm_decouple_scale123() {
    let mut rng = Rng::new(4);
    for level in simd_levels() {
        for (w, h) in frame_sizes(&mut rng, 8) {
            for (content, indep) in CONTENTS.iter().flat_map(|&c| [(c, false), (c, true)]) {
                let (bw, bh) = band_size(w, h, 1);
                let n = bw * bh;
                let o = split3(&band32(&mut rng, 3 * n, content), n);
                let t = if indep {
                    split3(&band32(&mut rng, 3 * n, content), n)
                } else {
                    [0, 1, 2].map(|b| distort_band(&mut rng, &o[b], d32))
                };
                let egl = egl(&mut rng);
                let run = |cpu| {
                    let mut r = [vec![0i32; n], vec![0i32; n], vec![0i32; n]];
                    let mut a = r.clone();
                    let (rm, am) = (muts(&mut r), muts(&mut a));
                    decouple_scale123(cpu, refs(&o), refs(&t), bw, bh, egl, rm, am);
                    (r, a)
                };
                assert!(
                    run(CpuLevel::SCALAR) == run(level),
                    "decouple_scale123 {level} {bw}x{bh} {content:?} indep {indep} egl {egl}"
                );
            }
        }
    }
}

#[test]
fn checkasm_csf() {
    let mut rng = Rng::new(5);
    for level in simd_levels() {
        for (w, h) in frame_sizes(&mut rng, 8) {
            for content in CONTENTS {
                let (bw, bh) = band_size(w, h, 0);
                let n = bw * bh;
                let src = split3(&band16(&mut rng, 3 * n, content), n);
                let irf = [[36453, 36453, 49417], [rng.next_u32() as u16; 3]][rng.below(2)];
                let run = |cpu| {
                    let mut d = [vec![0i16; n], vec![0i16; n], vec![0i16; n]];
                    let mut f = d.clone();
                    csf_scale0(cpu, refs(&src), irf, bw, bh, muts(&mut d), muts(&mut f));
                    (d, f)
                };
                assert!(
                    run(CpuLevel::SCALAR) == run(level),
                    "csf_scale0 {level} {bw}x{bh} {content:?} irf {irf:?}"
                );
                let (bw, bh) = band_size(w, h, 1 + rng.below(3));
                let n = bw * bh;
                let src = split3(&band32(&mut rng, 3 * n, content), n);
                let irf = [
                    [137373792, 137373792, 61414028],
                    [
                        rng.next_u32(),
                        rng.next_u32() | 1 << 31,
                        rng.next_u32() >> 3,
                    ],
                ][rng.below(2)];
                let run = |cpu| {
                    let mut d = [vec![0i32; n], vec![0i32; n], vec![0i32; n]];
                    let mut f = d.clone();
                    csf_scale123(cpu, refs(&src), irf, bw, bh, muts(&mut d), muts(&mut f));
                    (d, f)
                };
                assert!(
                    run(CpuLevel::SCALAR) == run(level),
                    "csf_scale123 {level} {bw}x{bh} {content:?} irf {irf:?}"
                );
            }
        }
    }
}

#[test]
fn checkasm_den() {
    let mut rng = Rng::new(6);
    for level in simd_levels() {
        for (w, h) in frame_sizes(&mut rng, 8) {
            for content in CONTENTS {
                let (bw, bh) = band_size(w, h, 0);
                let n = bw * bh;
                let o = split3(&band16(&mut rng, 3 * n, content), n);
                let sh = scale_shifts(0, bw, bh);
                let want = den_scale0(CpuLevel::SCALAR, refs(&o), bw, bh, sh.den_row);
                let got = den_scale0(level, refs(&o), bw, bh, sh.den_row);
                assert_eq!(want, got, "den_scale0 {level} {bw}x{bh} {content:?}");
                for scale in 1..NUM_SCALES {
                    let (bw, bh) = band_size(w, h, scale);
                    let n = bw * bh;
                    let o = split3(&band32(&mut rng, 3 * n, content), n);
                    let sh = scale_shifts(scale, bw, bh);
                    let want = den_scale123(CpuLevel::SCALAR, refs(&o), scale, bw, bh, &sh);
                    let got = den_scale123(level, refs(&o), scale, bw, bh, &sh);
                    assert_eq!(want, got, "den_scale123 {level} {bw}x{bh} {content:?}");
                }
            }
        }
    }
}

#[test]
fn checkasm_contrast_mask() {
    let mut rng = Rng::new(7);
    for level in simd_levels() {
        for (w, h) in frame_sizes(&mut rng, 8) {
            for content in CONTENTS {
                let (bw, bh) = band_size(w, h, 0);
                let n = bw * bh;
                let [s, d, f] = [0; 3].map(|_| split3(&band16(&mut rng, 3 * n, content), n));
                let irf = [[36453, 36453, 49417], [rng.next_u32() as u16; 3]][rng.below(2)];
                let sh = scale_shifts(0, bw, bh);
                let run = |cpu| cm_scale0(cpu, refs(&s), refs(&d), refs(&f), irf, bw, bh, &sh);
                assert_eq!(
                    run(CpuLevel::SCALAR),
                    run(level),
                    "cm_scale0 {level} {bw}x{bh} {content:?} irf {irf:?}"
                );
                for scale in 1..NUM_SCALES {
                    let (bw, bh) = band_size(w, h, scale);
                    let n = bw * bh;
                    let [s, d, f] = [0; 3].map(|_| split3(&band32(&mut rng, 3 * n, content), n));
                    let irf = [
                        [137373792, 137373792, 61414028],
                        [
                            rng.next_u32(),
                            rng.next_u32() | 1 << 31,
                            rng.next_u32() >> 3,
                        ],
                    ][rng.below(2)];
                    let sh = scale_shifts(scale, bw, bh);
                    let run =
                        |cpu| cm_scale123(cpu, refs(&s), refs(&d), refs(&f), irf, bw, bh, &sh);
                    assert_eq!(
                        run(CpuLevel::SCALAR),
                        run(level),
                        "cm_scale{scale} {level} {bw}x{bh} {content:?} irf {irf:?}"
                    );
                }
            }
        }
    }
}

fn params(rng: &mut Rng) -> AdmParams {
    use super::super::tables::CsfMode;
    let egl = egl(rng);
    let (skip_aim, skip_scale0) = [(false, false), (true, false), (false, true)][rng.below(3)];
    AdmParams::new(
        CsfMode::Watson97,
        3.0,
        1080,
        1.0,
        1.0,
        egl,
        0.03125,
        0.5,
        0.0,
        skip_aim,
        skip_scale0,
    )
    .unwrap()
}

/// The whole integer pipeline on real pictures (reference and a distorted copy).
#[test]
fn checkasm_accumulate() {
    let mut rng = Rng::new(8);
    for level in simd_levels() {
        for (w, h) in frame_sizes(&mut rng, 6) {
            for content in CONTENTS {
                for bpc in DEPTHS {
                    if w * h > 100_000 && bpc != 8 {
                        continue;
                    }
                    let (r, stride) = picture(&mut rng, w, h, bpc, content);
                    let d = distort(&mut rng, &r, bpc);
                    let p = params(&mut rng);
                    let run = |cpu| {
                        let mut s = Scratch::default();
                        accumulate(
                            cpu,
                            r.luma(),
                            d.luma(),
                            stride,
                            stride,
                            w,
                            h,
                            bpc,
                            &p,
                            &mut s,
                        )
                    };
                    assert_eq!(
                        run(CpuLevel::SCALAR),
                        run(level),
                        "accumulate {level} {w}x{h} stride {stride} {content:?} bpc {bpc} egl {}",
                        p.egl
                    );
                }
            }
        }
    }
}

/// Every kernel takes a whole-vector prefix at every SIMD level (a dispatch that silently
/// fell back to scalar would still pass the equality tests).
#[test]
fn kernels_engage() {
    // NEON is part of the aarch64 baseline: the SIMD tests must not be vacuous there.
    #[cfg(target_arch = "aarch64")]
    assert!(!simd_levels().is_empty());
    let n = 64;
    let (i16s, i32s) = (vec![3i16; 2 * n + 8], vec![3i32; 2 * n + 8]);
    let (u8s, u16s) = (vec![3u8; n], vec![3u16; n]);
    for cpu in simd_levels() {
        let (mut a16, mut b16, mut c16, mut d16) =
            (vec![0i16; n], vec![0i16; n], vec![0i16; n], vec![0i16; n]);
        let (mut a32, mut b32, mut c32, mut d32) =
            (vec![0i32; n], vec![0i32; n], vec![0i32; n], vec![0i32; n]);
        let r16 = [&i16s[..n]; 3];
        let r32 = [&i32s[..n]; 3];
        let done = [
            u8::dwt0_vert(cpu, [&u8s; 4], [&u8s; 2], 8, &mut a16, &mut b16),
            u16::dwt0_vert(cpu, [&u16s; 4], [&u16s; 2], 10, &mut a16, &mut b16),
            arch::dwt0_horiz(cpu, &i16s, &i16s, &mut a32, &mut a16, &mut b16, &mut c16),
            arch::dwt123_vert(cpu, [&i32s[..n]; 4], [&i32s; 2], 0, 0, &mut a32, &mut b32),
            arch::dwt123_vert(
                cpu,
                [&i32s[..n]; 4],
                [&i32s; 2],
                32768,
                16,
                &mut a32,
                &mut b32,
            ),
            arch::dwt123_horiz(
                cpu, &i32s, &i32s, 16384, 15, &mut a32, &mut b32, &mut c32, &mut d32,
            ),
            arch::dwt123_horiz(
                cpu, &i32s, &i32s, 32768, 16, &mut a32, &mut b32, &mut c32, &mut d32,
            ),
            arch::decouple0(
                cpu,
                r16,
                r16,
                100.0,
                [&mut a16, &mut b16, &mut c16],
                [&mut d16, &mut vec![0; n], &mut vec![0; n]],
            ),
            arch::decouple123(
                cpu,
                r32,
                r32,
                1.0,
                [&mut a32, &mut b32, &mut c32],
                [&mut d32, &mut vec![0; n], &mut vec![0; n]],
            ),
            arch::csf0(cpu, &i16s[..n], 36453, 16384, 15, &mut a16, &mut b16),
            arch::csf123(cpu, &i32s[..n], 1 << 31, &mut a32, &mut b32),
            arch::den0(cpu, &i16s[..n]).1,
            arch::den123(cpu, &i32s[..n], 31, 2, 2).1,
            arch::cm_cols0(cpu, r16, r16, r16, r16, &mut a32, &mut b32),
            arch::cm_cols123(cpu, r32, r32, r32, r32, &mut a32, &mut b32),
            arch::cm_thr(cpu, &i32s[..n + 2], &i32s[..n], &mut a32),
            arch::cm_pix0(cpu, &i16s[..n], &i32s[..n], [36453, 10, 29], 4, 3).1,
            arch::cm_pix123(cpu, &i32s[..n], &i32s[..n], 137373792, 4, 3).1,
        ];
        for (k, d) in done.iter().enumerate() {
            assert!(*d >= n - 8 && *d > 0, "kernel #{k} at {cpu} did {d} of {n}");
        }
    }
}

/// Per-stage timing on a 1080p 8-bit frame, one thread, every level:
/// `cargo test --release --lib adm::cpu::tests::bench -- --ignored --nocapture`.
#[test]
#[ignore]
fn bench() {
    use crate::picture::PlaneRef;
    use crate::testutil::load_parity_clip;
    use std::time::Instant;

    /// On-CPU time of this thread (ns), updated at scheduler ticks: accurate over many frames
    /// and, unlike wall time, without the time other processes of a loaded machine run.
    fn cpu_ns() -> u64 {
        let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
        s.split_whitespace()
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    // ADM_BENCH_CLIP picks another 8-bit parity clip (e.g. natural_576x324_420p8).
    let clip = std::env::var("ADM_BENCH_CLIP").unwrap_or("natural_1920x1080_420p8".into());
    let (refs_, dists) = load_parity_clip(&clip);
    let (r, d) = (&refs_[1], &dists[1]);
    let p = super::super::Adm::new(&crate::feature::Dict::new())
        .unwrap()
        .params()
        .clone();
    let (PlaneRef::U8(rp), PlaneRef::U8(dp)) = (r.plane(0), d.plane(0)) else {
        panic!("8-bit clip")
    };
    let (w, h, stride) = (r.w[0], r.h[0], r.stride[0]);
    const STAGES: [&str; 10] = [
        "dwt0",
        "decouple0",
        "den0",
        "csf0",
        "cm0",
        "dwt123",
        "decouple123",
        "den123",
        "csf123",
        "cm123",
    ];
    let iters = 30;
    // ADM_BENCH_LEVELS=avx2,scalar restricts the levels (for profiling one).
    let only = std::env::var("ADM_BENCH_LEVELS").unwrap_or_default();
    let levels: Vec<CpuLevel> = CpuLevel::available()
        .into_iter()
        .filter(|l| only.is_empty() || only.split(',').any(|n| n == l.name()))
        .collect();
    let mut scratch: Vec<Scratch> = levels.iter().map(|_| Scratch::default()).collect();
    let mut best = vec![[f64::MAX; STAGES.len()]; levels.len()];
    let mut totals = vec![f64::MAX; levels.len()];
    // Levels interleaved, best of `iters`: the machine is shared and noisy.
    for _ in 0..iters {
        for (li, &level) in levels.iter().enumerate() {
            let s = &mut scratch[li];
            let (best, total) = (&mut best[li], &mut totals[li]);
            let mut t = [0f64; STAGES.len()];
            let mut clock = Instant::now();
            let mut lap = |k: usize, clock: &mut Instant| {
                t[k] += clock.elapsed().as_secs_f64();
                *clock = Instant::now();
            };
            // Scale 0, as `accumulate` runs it.
            let (bw, bh) = band_size(w, h, 0);
            let n = bw * bh;
            for v in s.ref_approx.iter_mut().chain(s.dis_approx.iter_mut()) {
                v.resize(n, 0);
            }
            for (px, approx, bands) in [
                (rp, &mut s.ref_approx[0], &mut s.ref0),
                (dp, &mut s.dis_approx[0], &mut s.dis0),
            ] {
                let bands = sized(bands, n);
                dwt_scale0(level, px, stride, w, h, 8, approx, bands, &mut s.tmp16);
            }
            lap(0, &mut clock);
            let sh = scale_shifts(0, bw, bh);
            let (o, tt) = (view(&s.ref0, n), view(&s.dis0, n));
            let (rm, am) = (sized(&mut s.r0, n), sized(&mut s.a0, n));
            decouple_scale0(level, o, tt, bw, bh, p.egl, rm, am);
            lap(1, &mut clock);
            std::hint::black_box(den_scale0(level, o, bw, bh, sh.den_row));
            lap(2, &mut clock);
            for pass in 0..2 {
                let (x, y) = if pass == 0 {
                    (view(&s.a0, n), view(&s.r0, n))
                } else {
                    (view(&s.r0, n), view(&s.a0, n))
                };
                let (dm, fm) = (sized(&mut s.dst0, n), sized(&mut s.flt0, n));
                csf_scale0(level, x, p.irf0, bw, bh, dm, fm);
                lap(3, &mut clock);
                let (dd, ff) = (view(&s.dst0, n), view(&s.flt0, n));
                std::hint::black_box(cm_scale0(level, y, dd, ff, p.irf0, bw, bh, &sh));
                lap(4, &mut clock);
            }
            let (mut pw, mut ph) = (bw, bh);
            for scale in 1..NUM_SCALES {
                let (bw, bh) = band_size(w, h, scale);
                let n = bw * bh;
                let cur = (scale + 1) % 2;
                for (approx, bands) in [
                    (&mut s.ref_approx, &mut s.ref1),
                    (&mut s.dis_approx, &mut s.dis1),
                ] {
                    let [a0, a1] = approx;
                    let (src, dst) = if cur == 0 { (a0, a1) } else { (a1, a0) };
                    dst.resize(n.max(dst.len()), 0);
                    let b = sized(bands, n);
                    dwt_scale123(
                        level,
                        &src[..pw * ph],
                        pw,
                        ph,
                        scale,
                        &mut dst[..n],
                        b,
                        &mut s.tmp32,
                    );
                }
                lap(5, &mut clock);
                let irf = p.irf123[scale - 1];
                let sh = scale_shifts(scale, bw, bh);
                let (o, tt) = (view(&s.ref1, n), view(&s.dis1, n));
                let (rm, am) = (sized(&mut s.r1, n), sized(&mut s.a1, n));
                decouple_scale123(level, o, tt, bw, bh, p.egl, rm, am);
                lap(6, &mut clock);
                std::hint::black_box(den_scale123(level, o, scale, bw, bh, &sh));
                lap(7, &mut clock);
                for pass in 0..2 {
                    let (x, y) = if pass == 0 {
                        (view(&s.a1, n), view(&s.r1, n))
                    } else {
                        (view(&s.r1, n), view(&s.a1, n))
                    };
                    let (dm, fm) = (sized(&mut s.dst1, n), sized(&mut s.flt1, n));
                    csf_scale123(level, x, irf, bw, bh, dm, fm);
                    lap(8, &mut clock);
                    let (dd, ff) = (view(&s.dst1, n), view(&s.flt1, n));
                    std::hint::black_box(cm_scale123(level, y, dd, ff, irf, bw, bh, &sh));
                    lap(9, &mut clock);
                }
                (pw, ph) = (bw, bh);
            }
            for k in 0..STAGES.len() {
                best[k] = best[k].min(t[k]);
            }
            let clock = Instant::now();
            std::hint::black_box(accumulate(
                level,
                Luma::U8(rp),
                Luma::U8(dp),
                stride,
                stride,
                w,
                h,
                8,
                &p,
                s,
            ));
            *total = total.min(clock.elapsed().as_secs_f64());
        }
    }
    // Whole frames: on-CPU time per frame over many frames.
    let mut per_frame = vec![0f64; levels.len()];
    for (li, &level) in levels.iter().enumerate() {
        let s = &mut scratch[li];
        let frames = 40;
        let t0 = cpu_ns();
        for _ in 0..frames {
            std::hint::black_box(accumulate(
                level,
                Luma::U8(rp),
                Luma::U8(dp),
                stride,
                stride,
                w,
                h,
                8,
                &p,
                s,
            ));
        }
        per_frame[li] = (cpu_ns() - t0) as f64 * 1e-9 / frames as f64;
    }
    for (li, level) in levels.iter().enumerate() {
        let stages: Vec<String> = STAGES
            .iter()
            .zip(best[li])
            .map(|(n, t)| format!("{n} {:.2}", t * 1e3))
            .collect();
        println!(
            "{:>6}: accumulate {:.2} ms cpu, {:.2} ms wall min, stages {:.2} ms | {}",
            level.name(),
            per_frame[li] * 1e3,
            totals[li] * 1e3,
            best[li].iter().sum::<f64>() * 1e3,
            stages.join(" | ")
        );
    }
}
