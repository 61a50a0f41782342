//! AVX2 kernels of the float SSIM filters and statistics (AVX-512 measured no faster here, on
//! Zen 4, so there is none). Vectorised across output pixels only: every output sees the scalar code's float operations on the same values
//! in the same order (f32 products widened exactly to f64, f64 sums tap by tap from 0.0, no FMA,
//! IEEE division and square root, round-to-nearest conversions), so results are bit-exact.

#![allow(unsafe_code)]

use std::arch::x86_64::*;

use super::tools::{dot_taps_one, ssim_terms_one, TERMS_CHUNK};
use crate::simd::CpuLevel;

/// The AVX2 kernels, only made when `cpu` has AVX2.
#[derive(Clone, Copy)]
pub(super) struct Simd(());

impl Simd {
    /// The kernels `cpu` runs, if any.
    pub(super) fn new(cpu: CpuLevel) -> Option<Simd> {
        cpu.has_avx2().then_some(Simd(()))
    }

    /// `out[x] = (Σ_t f64(srcs[t][x] * taps[t])) as f32`, the sum from 0.0 in tap order.
    pub(super) fn dot_taps(self, srcs: &[&[f32]], taps: &[f32], out: &mut [f32]) {
        // SAFETY: a `Simd` exists only when the CPU runs AVX2.
        unsafe { dot_taps_avx2(srcs, taps, out) }
    }

    /// The SSIM terms `[l·c·s, l, c, s]` of each position of the five statistics maps
    /// `[mu_r, mu_d, sq_r, sq_d, cross]` (at most [`TERMS_CHUNK`] positions).
    pub(super) fn ssim_terms(
        self,
        maps: [&[f32]; 5],
        consts: [f32; 3],
        terms: &mut [[f64; TERMS_CHUNK]; 4],
    ) {
        // SAFETY: a `Simd` exists only when the CPU runs AVX2.
        unsafe { ssim_terms_avx2(maps, consts, terms) }
    }
}

#[inline]
#[target_feature(enable = "avx2")]
fn load8(s: &[f32]) -> __m256 {
    let s = &s[..8];
    // SAFETY: `s` holds the 8 lanes read; unaligned load.
    unsafe { _mm256_loadu_ps(s.as_ptr()) }
}

#[inline]
#[target_feature(enable = "avx2")]
fn store8(d: &mut [f32], v: __m256) {
    let d = &mut d[..8];
    // SAFETY: `d` holds the 8 lanes written; unaligned store.
    unsafe { _mm256_storeu_ps(d.as_mut_ptr(), v) }
}

#[inline]
#[target_feature(enable = "avx2")]
fn load4(s: &[f32]) -> __m128 {
    let s = &s[..4];
    // SAFETY: `s` holds the 4 lanes read; unaligned load.
    unsafe { _mm_loadu_ps(s.as_ptr()) }
}

#[inline]
#[target_feature(enable = "avx2")]
fn store4_f64(d: &mut [f64], v: __m256d) {
    let d = &mut d[..4];
    // SAFETY: `d` holds the 4 lanes written; unaligned store.
    unsafe { _mm256_storeu_pd(d.as_mut_ptr(), v) }
}

/// `acc += f64(p * tap)` on 8 lanes held as two f64x4 halves.
#[inline]
#[target_feature(enable = "avx2")]
fn add_product(acc: &mut [__m256d; 2], p: __m256, tap: __m256) {
    let prod = _mm256_mul_ps(p, tap);
    acc[0] = _mm256_add_pd(acc[0], _mm256_cvtps_pd(_mm256_castps256_ps128(prod)));
    acc[1] = _mm256_add_pd(acc[1], _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(prod)));
}

/// The two f64x4 halves rounded back to 8 floats.
#[inline]
#[target_feature(enable = "avx2")]
fn narrow(acc: [__m256d; 2]) -> __m256 {
    _mm256_set_m128(_mm256_cvtpd_ps(acc[1]), _mm256_cvtpd_ps(acc[0]))
}

/// Blocks of 32 outputs (8 independent f64 sums in flight hide the add latency), then of 8,
/// then one output at a time.
#[target_feature(enable = "avx2")]
fn dot_taps_avx2(srcs: &[&[f32]], taps: &[f32], out: &mut [f32]) {
    let n = out.len();
    let mut x = 0;
    while x + 32 <= n {
        let mut acc = [[_mm256_setzero_pd(); 2]; 4];
        for (s, &tap) in srcs.iter().zip(taps) {
            let s = &s[x..x + 32];
            let tap = _mm256_set1_ps(tap);
            for (b, a) in acc.iter_mut().enumerate() {
                add_product(a, load8(&s[8 * b..]), tap);
            }
        }
        for (b, a) in acc.into_iter().enumerate() {
            store8(&mut out[x + 8 * b..], narrow(a));
        }
        x += 32;
    }
    while x + 8 <= n {
        let mut acc = [_mm256_setzero_pd(); 2];
        for (s, &tap) in srcs.iter().zip(taps) {
            add_product(&mut acc, load8(&s[x..]), _mm256_set1_ps(tap));
        }
        store8(&mut out[x..], narrow(acc));
        x += 8;
    }
    for (x, o) in out.iter_mut().enumerate().skip(x) {
        *o = dot_taps_one(srcs, taps, x);
    }
}

/// C's `MAX(0.0, v)` per lane (a NaN stays NaN: the ordered compare is false).
#[inline]
#[target_feature(enable = "avx2")]
fn floor_zero4(v: __m128) -> __m128 {
    let zero = _mm_setzero_ps();
    _mm_blendv_ps(v, zero, _mm_cmpgt_ps(zero, v))
}

/// The terms of 4 positions, each operation as `ssim_terms_one` does it.
#[inline]
#[target_feature(enable = "avx2")]
fn terms4([mr, md, sr, sd2, x]: [__m128; 5], [c1, c2, c3]: [f32; 3]) -> [__m256d; 4] {
    let zero = _mm_setzero_ps();
    let vr = floor_zero4(_mm_sub_ps(sr, _mm_mul_ps(mr, mr)));
    let vd = floor_zero4(_mm_sub_ps(sd2, _mm_mul_ps(md, md)));
    let cv = _mm_sub_ps(x, _mm_mul_ps(mr, md));
    let sd = _mm256_cvtpd_ps(_mm256_sqrt_pd(_mm256_cvtps_pd(_mm_mul_ps(vr, vd))));
    let two = _mm256_set1_pd(2.0);
    let l_num = _mm256_add_pd(
        _mm256_mul_pd(_mm256_mul_pd(two, _mm256_cvtps_pd(mr)), _mm256_cvtps_pd(md)),
        _mm256_set1_pd(f64::from(c1)),
    );
    let l_den = _mm_add_ps(
        _mm_add_ps(_mm_mul_ps(mr, mr), _mm_mul_ps(md, md)),
        _mm_set1_ps(c1),
    );
    let l = _mm256_div_pd(l_num, _mm256_cvtps_pd(l_den));
    let c_num = _mm256_add_pd(
        _mm256_mul_pd(two, _mm256_cvtps_pd(sd)),
        _mm256_set1_pd(f64::from(c2)),
    );
    let c_den = _mm_add_ps(_mm_add_ps(vr, vd), _mm_set1_ps(c2));
    let c = _mm256_div_pd(c_num, _mm256_cvtps_pd(c_den));
    let flat = _mm_and_ps(_mm_cmplt_ps(cv, zero), _mm_cmple_ps(sd, zero));
    let cv = _mm_blendv_ps(cv, zero, flat);
    let c3 = _mm_set1_ps(c3);
    let s = _mm256_cvtps_pd(_mm_div_ps(_mm_add_ps(cv, c3), _mm_add_ps(sd, c3)));
    [_mm256_mul_pd(_mm256_mul_pd(l, c), s), l, c, s]
}

#[target_feature(enable = "avx2")]
fn ssim_terms_avx2(maps: [&[f32]; 5], consts: [f32; 3], terms: &mut [[f64; TERMS_CHUNK]; 4]) {
    let n = maps[0].len().min(TERMS_CHUNK);
    let maps = maps.map(|m| &m[..n]);
    let mut i = 0;
    while i + 4 <= n {
        let t = terms4(maps.map(|m| load4(&m[i..])), consts);
        for (dst, v) in terms.iter_mut().zip(t) {
            store4_f64(&mut dst[i..], v);
        }
        i += 4;
    }
    for i in i..n {
        let t = ssim_terms_one(maps.map(|m| m[i]), consts);
        for (dst, v) in terms.iter_mut().zip(t) {
            dst[i] = v;
        }
    }
}

/// Timing per 1080p 8-bit frame, one thread:
/// `cargo test --release --lib ssim::x86::bench -- --ignored --nocapture`.
#[cfg(test)]
mod bench {
    use super::super::tools::{decimate, luma_to_float, ssim_means, LPF_9X9};
    use super::super::{float_ms_ssim, float_ssim};
    use crate::simd::CpuLevel;
    use std::hint::black_box;

    use crate::testutil::checkasm::best_cpu_ms as ms;

    #[test]
    #[ignore]
    fn bench_ssim_1080p() {
        let (refs, dists) = crate::testutil::load_parity_clip("natural_1920x1080_420p8");
        let (r, d) = (&refs[0], &dists[0]);
        let (fr, fd) = (luma_to_float(r).unwrap(), luma_to_float(d).unwrap());
        let box4 = float_ssim::box_taps(4);
        for cpu in CpuLevel::available() {
            let reps = if cpu == CpuLevel::SCALAR { 3 } else { 8 };
            let lpf = ms(reps, || {
                black_box(decimate(&fr, 2, &LPF_9X9, 9, cpu));
            });
            let dec4 = ms(reps, || {
                black_box(decimate(&fr, 4, &box4, 4, cpu));
            });
            let means = ms(reps, || {
                black_box(ssim_means(&fr, &fd, cpu).unwrap());
            });
            let (w, h) = (fr.w, fr.h);
            let (dw, dh) = (w - 10, h - 10);
            let mut cache = vec![0.0f32; dw * h];
            let mut out = vec![0.0f32; dw * dh];
            let conv = super::Simd::new(cpu).map(|k| {
                ms(reps, || {
                    for (y, c) in cache.chunks_mut(dw).enumerate() {
                        let row = &fr.data[y * w..][..w];
                        let s: [&[f32]; 11] = std::array::from_fn(|u| &row[u..]);
                        k.dot_taps(&s, &super::super::tools::GAUSSIAN, c);
                    }
                    for (y, o) in out.chunks_mut(dw).enumerate() {
                        let s: [&[f32]; 11] = std::array::from_fn(|v| &cache[(y + v) * dw..][..dw]);
                        k.dot_taps(&s, &super::super::tools::GAUSSIAN, o);
                    }
                })
            });
            let fs = ms(reps, || {
                black_box(float_ssim::compute(r, d, 0, cpu).unwrap());
            });
            let fms = ms(reps, || {
                black_box(float_ms_ssim::compute(r, d, cpu).unwrap());
            });
            println!(
                "{}: decimate lpf9 {lpf:.2} ms, decimate box4 {dec4:.2} ms, convolve {conv:.2?} ms, \
                 ssim_means {means:.2} ms, float_ssim {fs:.2} ms, float_ms_ssim {fms:.2} ms",
                cpu.name()
            );
        }
    }
}
