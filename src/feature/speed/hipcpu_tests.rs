//! SpEED's kernels on the kernel model (`gpu::hipcpu`) at 64 and 32 lanes, with the geometry
//! of [`super::launch`] and the sequence of [`super::gpu`], against the CPU pipeline bit for
//! bit: the normalised decimated planes and their covariance matrices, for every prescaling
//! method, kernel scale, bit depth and chroma layout, and for frame differences.

use std::ffi::c_int;

use super::gsm::covariance_matrix;
use super::scale::{
    antialias_filter, filter_and_downscale, load, mean_filter, prescales, resample_axis,
    ScaleMethod,
};
use super::{Dims, Params, NB};
use crate::gpu::hipcpu::{
    dense_u16, dense_u8, launch, model_or_skip, mptr, ptr, LaunchFn, A, NULL, WAVES,
};
use crate::picture::{PictureData, PixelFormat};
use crate::simd::CpuLevel;
use crate::testutil::{load_parity_clip, noise_picture};

/// Plane `c` of a picture as the kernels read it: dense samples of its type.
enum Dense {
    U8(Vec<u8>),
    U16(Vec<u16>),
}

impl Dense {
    fn of(p: &PictureData, c: usize) -> Dense {
        if p.bpc == 8 {
            Dense::U8(dense_u8(p, c))
        } else {
            Dense::U16(dense_u16(p, c))
        }
    }

    fn arg(&self) -> A<'_> {
        match self {
            Dense::U8(v) => ptr(v),
            Dense::U16(v) => ptr(v),
        }
    }
}

/// gpu.rs's sequence for one pair on the model: picture z is `a[z]`, minus `b[z]` when given
/// (all `d.w`x`d.h`, dense). Returns both normalised planes and both covariance matrices.
fn speed_on_model(
    f: LaunchFn,
    d: &Dims,
    p: &Params,
    bpc: u32,
    a: [&Dense; 2],
    b: [Option<&Dense>; 2],
    warp: c_int,
) -> (Vec<f32>, Vec<f32>) {
    let fail = |e: String| panic!("speed wave {warp}: {e}");
    let int = |v: usize| A::I32(v as i32);
    let grid = |w: usize, h: usize| ((w as u32).div_ceil(16), (h as u32).div_ceil(16), 2);
    let scaler = match bpc {
        8 => 1.0f32,
        10 => 4.0,
        12 => 16.0,
        _ => 256.0,
    };
    let suffix = if bpc == 8 { "u8" } else { "u16" };
    let aa = antialias_filter(p.kernelscale);
    let mean = mean_filter(p.kernelscale);
    let mut dec = vec![0.0f32; 2 * d.dw * d.dh];
    let pair = |k: usize| -> [A<'_>; 2] { [a[k].arg(), A::I32(d.w as i32)] };
    let minus = |k: usize| -> [A<'_>; 2] {
        match b[k] {
            Some(x) => [x.arg(), A::I32(d.w as i32)],
            None => [NULL, A::I32(0)],
        }
    };
    let planes: Vec<A<'_>> = [pair(0), minus(0), pair(1), minus(1)].concat();
    if !prescales(p) {
        // Dense w x h planes, read below (w, h); writes 2 * dw * dh floats.
        let mut args = planes.clone();
        args.extend([
            int(d.w),
            int(d.h),
            int(d.sw),
            int(d.sh),
            int(d.dw),
            int(d.dh),
            A::F32(scaler),
            ptr(&aa),
            int(aa.len()),
            mptr(&mut dec),
        ]);
        let name = format!("vmaf_speed_decimate_{suffix}");
        launch(f, &name, grid(d.dw, d.dh), (16, 16, 1), warp, &args).unwrap_or_else(fail);
    } else {
        let mut flt = vec![0.0f32; 2 * d.w * d.h];
        let mut args = planes.clone();
        args.extend([int(d.w), int(d.h), A::F32(scaler), mptr(&mut flt)]);
        let name = format!("vmaf_speed_to_float_{suffix}");
        launch(f, &name, grid(d.w, d.h), (16, 16, 1), warp, &args).unwrap_or_else(fail);
        let mut rs = vec![0.0f32; 2 * d.sw * d.sh];
        let src = if (d.sw, d.sh) == (d.w, d.h) {
            &flt
        } else {
            let (x, y) = (
                resample_axis(p.method, d.w, d.sw),
                resample_axis(p.method, d.h, d.sh),
            );
            let method = match p.method {
                ScaleMethod::Nearest => 0,
                ScaleMethod::Bilinear => 1,
                ScaleMethod::Bicubic => 2,
                ScaleMethod::Lanczos4 => 3,
            };
            // Dense w x h sources, clamped table indices; writes 2 * sw * sh floats.
            launch(
                f,
                "vmaf_speed_resample",
                grid(d.sw, d.sh),
                (16, 16, 1),
                warp,
                &[
                    ptr(&flt),
                    int(d.w),
                    int(d.h),
                    int(d.sw),
                    int(d.sh),
                    A::I32(method),
                    int(x.taps),
                    ptr(&x.idx),
                    ptr(&x.wt),
                    ptr(&y.idx),
                    ptr(&y.wt),
                    mptr(&mut rs),
                ],
            )
            .unwrap_or_else(fail);
            &rs
        };
        // Dense sw x sh sources read at mirrored coordinates; writes 2 * dw * dh floats.
        launch(
            f,
            "vmaf_speed_decimate_f32",
            grid(d.dw, d.dh),
            (16, 16, 1),
            warp,
            &[
                ptr(src),
                int(d.sw),
                int(d.sh),
                int(d.dw),
                int(d.dh),
                ptr(&aa),
                int(aa.len()),
                mptr(&mut dec),
            ],
        )
        .unwrap_or_else(fail);
    }
    let mut norm = vec![0.0f32; 2 * d.dw * d.dh];
    let mut cov = vec![0.0f32; 2 * NB * NB];
    // One block per picture; mirrored reads inside each dw x dh plane.
    launch(
        f,
        "vmaf_speed_moments",
        (2, 1, 1),
        (super::launch::MOMENTS_THREADS, 1, 1),
        warp,
        &[
            ptr(&dec),
            int(d.dw),
            int(d.dh),
            ptr(&mean),
            int(mean.len()),
            int(d.subw),
            int(d.subh),
            mptr(&mut norm),
            mptr(&mut cov),
        ],
    )
    .unwrap_or_else(fail);
    (norm, cov)
}

fn params(kernelscale: f32, prescale: f64, method: ScaleMethod) -> Params {
    Params {
        kernelscale,
        prescale,
        method,
        sigma_nn: 0.29,
        nn_floor: 0.0,
        weight_var_mode: 0,
    }
}

/// The CPU's normalised plane and covariance matrix of `a - b` (or `a`), plane `c`.
fn cpu_moments(
    d: &Dims,
    p: &Params,
    a: &PictureData,
    b: Option<&PictureData>,
    c: usize,
) -> (Vec<f32>, Vec<f32>) {
    let mut rows = load(a, c, d, p).unwrap();
    if let Some(b) = b {
        rows.subtract(&load(b, c, d, p).unwrap()).unwrap();
    }
    let norm = filter_and_downscale(CpuLevel::SCALAR, d, p, rows).unwrap();
    let k = covariance_matrix(d, &norm);
    (norm, k.to_vec())
}

fn assert_same(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.to_bits(), w.to_bits(), "{what}: element {i}: {g} vs {w}");
    }
}

/// Pictures of the pair `(a0 - b0, a1 - b1)` on the model against the CPU, plane `c`.
fn check(
    f: LaunchFn,
    what: &str,
    p: &Params,
    pics: [&PictureData; 2],
    minus: Option<[&PictureData; 2]>,
    c: usize,
) {
    let d = Dims::new(pics[0].w[c], pics[0].h[c], p.prescale).unwrap();
    let a = [Dense::of(pics[0], c), Dense::of(pics[1], c)];
    let b = minus.map(|m| [Dense::of(m[0], c), Dense::of(m[1], c)]);
    let bref = [b.as_ref().map(|b| &b[0]), b.as_ref().map(|b| &b[1])];
    let want: Vec<_> = (0..2)
        .map(|z| cpu_moments(&d, p, pics[z], minus.map(|m| m[z]), c))
        .collect();
    let n = d.dw * d.dh;
    for warp in WAVES {
        let (norm, cov) = speed_on_model(f, &d, p, pics[0].bpc, [&a[0], &a[1]], bref, warp);
        for z in 0..2 {
            let w = format!("{what} plane {c} picture {z} wave {warp}");
            assert_same(
                &format!("{w} normalised"),
                &norm[z * n..(z + 1) * n],
                &want[z].0,
            );
            assert_same(
                &format!("{w} covariance"),
                &cov[z * NB * NB..(z + 1) * NB * NB],
                &want[z].1,
            );
        }
    }
}

/// speed_chroma's planes of the parity clips with the v1.0.16 model options and others.
#[test]
fn speed_chroma_equals_cpu_at_wave64_and_wave32() {
    let f = model_or_skip!();
    let cases: &[(&str, f32, f64, ScaleMethod)] = &[
        ("natural_1920x1080_420p8", 1.0, 1.0, ScaleMethod::Nearest),
        ("natural_1920x1080_420p8", 1.0, 0.6, ScaleMethod::Bilinear),
        ("natural_640x360_420p10", 1.5, 1.0, ScaleMethod::Nearest),
        ("mandel_352x288_422p8", 2.0, 1.25, ScaleMethod::Lanczos4),
        ("testsrc_480x270_444p8", 0.5, 0.8, ScaleMethod::Bicubic),
        ("natural_320x180_420p12", 4.0, 1.0005, ScaleMethod::Nearest),
    ];
    for &(clip, ks, ps, method) in cases {
        let (refs, dists) = load_parity_clip(clip);
        let p = params(ks, ps, method);
        for c in 1..3 {
            if Dims::new(refs[0].w[c], refs[0].h[c], ps).is_err() {
                continue;
            }
            check(
                f,
                &format!("{clip} ks {ks} ps {ps} {method:?}"),
                &p,
                [&refs[1], &dists[1]],
                None,
                c,
            );
        }
    }
}

/// speed_temporal's frame differences (and a same-size prescale, which copies) at every depth.
#[test]
fn speed_temporal_equals_cpu_at_wave64_and_wave32() {
    let f = model_or_skip!();
    let cases: &[(PixelFormat, u32, usize, usize, f64, ScaleMethod)] = &[
        (PixelFormat::Yuv420p, 8, 336, 200, 1.0, ScaleMethod::Nearest),
        (
            PixelFormat::Yuv420p,
            10,
            250,
            170,
            0.5,
            ScaleMethod::Bicubic,
        ),
        (
            PixelFormat::Yuv444p,
            12,
            170,
            90,
            1.002,
            ScaleMethod::Lanczos4,
        ),
    ];
    for (n, &(fmt, bpc, w, h, ps, method)) in cases.iter().enumerate() {
        let pic = |s: u64| noise_picture(fmt, bpc, w, h, 100 * n as u64 + s);
        let (pr, pd, r, d) = (pic(1), pic(2), pic(3), pic(4));
        let p = params(1.0, ps, method);
        check(f, &format!("case {n}"), &p, [&pr, &pd], Some([&r, &d]), 0);
    }
}
