//! ADM's kernels on the kernel model (`gpu::hipcpu`) at 64 and 32 lanes, with the geometry of
//! [`super::launch`], against the CPU reference bit for bit.

use std::ffi::c_int;
use std::time::Instant;

use crate::gpu::hipcpu::{
    cases, dense_u16, dense_u8, launch, model_or_skip, mptr, ptr, LaunchFn, A, WAVES,
};
use crate::picture::PictureData;

/// The ADM sequence of gpu.rs (per scale: the wavelet level with the maps,
/// then the contrast masking) with the launches of launch.rs.
pub(crate) fn adm_on_model(
    f: LaunchFn,
    r: &PictureData,
    d: &PictureData,
    p: &super::AdmParams,
    warp: c_int,
) -> [super::ScaleAccum; 4] {
    use super::{band_size, gpu::scale_params, tables::div_lookup, ScaleAccum};
    let (w, h) = (r.w[0], r.h[0]);
    let (bw0, bh0) = band_size(w, h, 0);
    let plane = bw0 * bh0;
    let mut approx = [
        [vec![0i32; plane], vec![0i32; plane]],
        [vec![0i32; plane], vec![0i32; plane]],
    ];
    let mut bands = vec![0i32; super::launch::adm_bands_len(w, h)];
    let mut maps = vec![0i32; 4 * plane];
    let lut = &div_lookup()[..];
    let mut out = [0u64; 36];
    let fail = |e: String| panic!("adm wave {warp}: {e}");
    let (r8, d8, r16, d16);
    let (k0, rp, dp) = if r.bpc == 8 {
        (r8, d8) = (dense_u8(r, 0), dense_u8(d, 0));
        ("vmaf_adm_dwt0_u8", ptr(&r8), ptr(&d8))
    } else {
        (r16, d16) = (dense_u16(r, 0), dense_u16(d, 0));
        ("vmaf_adm_dwt0_u16", ptr(&r16), ptr(&d16))
    };
    let (mut pw, mut ph) = (w, h);
    for scale in 0..4 {
        let (bw, bh) = band_size(w, h, scale);
        let sp = scale_params(w, h, scale, p);
        let maps_on = sp.csf[0] < sp.csf[1] && sp.csf[2] < sp.csf[3];
        let flags = i32::from(maps_on) | (i32::from(maps_on && sp.aim) << 1);
        let [cl, cr, ct, cb] = sp.csf.map(|v| A::I32(v as i32));
        let [ih, iv, id] = sp.irf.map(A::U32);
        let (cur, prev) = (scale % 2, (scale + 1) % 2);
        let [a_cur, a_prev] = if cur == 0 {
            let [a, b] = &mut approx;
            [a, b]
        } else {
            let [a, b] = &mut approx;
            [b, a]
        };
        let (src_r, src_d, kernel, first) = if scale == 0 {
            (rp, dp, k0, A::I32(r.bpc as i32))
        } else {
            (
                ptr(&a_prev[0]),
                ptr(&a_prev[1]),
                "vmaf_adm_dwt123",
                A::I32(scale as i32),
            )
        };
        let _ = prev;
        let grid = ((bw as u32).div_ceil(32), (bh as u32).div_ceil(8), 1);
        let [ar, ad] = a_cur;
        // the pw x ph inputs are dense; each thread writes band pixel (i, j) < (bh, bw)
        // of approx and of the 6 (scale 0) or 9 band planes and 4 map planes bw * bh apart (the
        // buffers hold them); the LUT has 32769 entries.
        launch(
            f,
            kernel,
            grid,
            (32, 8, 1),
            warp,
            &[
                src_r,
                src_d,
                A::I32(pw as i32),
                A::I32(ph as i32),
                A::I32(pw as i32),
                first,
                mptr(ar),
                mptr(ad),
                mptr(&mut bands),
                mptr(&mut maps),
                A::I32((bw * bh) as i32),
                ptr(lut),
                cl,
                cr,
                ct,
                cb,
                A::I32(flags),
                ih,
                iv,
                id,
                A::F64(sp.egl),
            ],
        )
        .unwrap_or_else(fail);
        let [left, right, top, bottom] = sp.score.map(|v| v as i32);
        if left != right && top != bottom {
            let [ch, cv, cd] = sp.cm_cube.map(|v| A::I32(v as i32));
            // one block per score-window row inside the band; reads bands/maps of
            // the bw x bh band (3x3 neighbourhoods clamped inside), adds to out[9 * scale..].
            launch(
                f,
                "vmaf_adm_cm",
                ((bottom - top) as u32, 1, 1),
                (256, 1, 1),
                warp,
                &[
                    ptr(&bands),
                    ptr(&maps),
                    A::I32((bw * bh) as i32),
                    A::I32(bw as i32),
                    A::I32(bh as i32),
                    A::I32(scale as i32),
                    A::I32(left),
                    A::I32(right),
                    A::I32(top),
                    A::I32(sp.den_row as i32),
                    A::I32(sp.den_cube as i32),
                    ch,
                    cv,
                    cd,
                    A::I32(sp.cm_row as i32),
                    ih,
                    iv,
                    id,
                    A::I32(i32::from(sp.aim)),
                    mptr(&mut out[9 * scale..]),
                ],
            )
            .unwrap_or_else(fail);
        }
        (pw, ph) = (bw, bh);
    }
    std::array::from_fn(|s| {
        let v = &out[9 * s..9 * s + 9];
        ScaleAccum {
            den: [v[0], v[1], v[2]],
            num: [v[3] as i64, v[4] as i64, v[5] as i64],
            aim: [v[6] as i64, v[7] as i64, v[8] as i64],
        }
    })
}

#[test]
fn adm_accums_equal_cpu_at_wave64_and_wave32() {
    use super::cpu::{self, Luma, Scratch};
    use crate::picture::PlaneRef;
    let f = model_or_skip!();
    let t0 = Instant::now();
    let option_sets: [&[(&str, &str)]; 3] = [
        &[],
        &[("adm_enhn_gain_limit", "1.0"), ("adm_csf_mode", "2")],
        &[("adm_skip_scale0", "true"), ("adm_skip_aim", "true")],
    ];
    fn luma(x: &PictureData) -> Luma<'_> {
        match x.plane(0) {
            PlaneRef::U8(v) => Luma::U8(v),
            PlaneRef::U16(v) => Luma::U16(v),
        }
    }
    for (what, r, d) in cases(2, 40) {
        for (k, opts) in option_sets.iter().enumerate() {
            let mut dict = crate::feature::options::Dict::new();
            for (key, v) in *opts {
                dict.set(key, v);
            }
            let adm = super::Adm::new(&dict).unwrap();
            let p = adm.params();
            let want = cpu::accumulate(
                crate::simd::CpuLevel::SCALAR,
                luma(&r),
                luma(&d),
                r.stride[0],
                d.stride[0],
                r.w[0],
                r.h[0],
                r.bpc,
                p,
                &mut Scratch::default(),
            );
            for warp in WAVES {
                let got = adm_on_model(f, &r, &d, p, warp);
                assert_eq!(got, want, "{what} option set {k} wave {warp}");
            }
        }
    }
    println!("adm: {:.1?}", t0.elapsed());
}
