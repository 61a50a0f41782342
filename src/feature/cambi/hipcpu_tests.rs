//! Cambi's kernels on the kernel model (`gpu::hipcpu`) at 64 and 32 lanes, with the geometry of
//! [`super::launch`], against the CPU reference bit for bit.

use std::ffi::c_int;
use std::time::Instant;

use crate::gpu::hipcpu::{
    dense_u16, dense_u8, launch, model_or_skip, mptr, ptr, LaunchFn, A, WAVES,
};
use crate::picture::{Picture, PictureData, PixelFormat};
use crate::testutil::{load_parity_clip, noise_picture};

/// The cambi sequence of gpu.rs (`with_c_values`: preprocessing, mask,
/// then per scale decimation, mode filter, c-values and statistics) with the launches of
/// launch.rs: each scale's c-value map and statistics.
fn cambi_on_model(
    f: LaunchFn,
    c: &super::gpu::ModelCase,
    pic: &PictureData,
    warp: c_int,
) -> (Vec<Vec<f32>>, Vec<Vec<u64>>) {
    let (w, h, in_w, in_h) = (c.w, c.h, c.in_w, c.in_h);
    let (taps, params, lut) = (&c.taps, &c.params, c.lut);
    let fail = |e: String| panic!("cambi wave {warp}: {e}");
    let px = |w: usize, h: usize| ((w as u32).div_ceil(32), (h as u32).div_ceil(8), 1);
    let (mut img, mut mask) = ([vec![0u16; w * h], vec![0u16; w * h]], {
        [vec![0u16; w * h], vec![0u16; w * h]]
    });
    let (p8, p16);
    let (kernel, src) = if pic.bpc == 8 {
        p8 = dense_u8(pic, 0);
        ("vmaf_cambi_preprocess_u8", ptr(&p8))
    } else {
        p16 = dense_u16(pic, 0);
        ("vmaf_cambi_preprocess_u16", ptr(&p16))
    };
    let (wi, hi) = (w as i32, h as i32);
    // the dense in_w x in_h source is read at taps clamped inside it; taps holds
    // w + h entries; img[0] is w x h.
    launch(
        f,
        kernel,
        px(w, h),
        (32, 8, 1),
        warp,
        &[
            src,
            A::I32(in_w as i32),
            A::I32(in_h as i32),
            A::I32(in_w as i32),
            ptr(taps),
            A::I32(pic.bpc as i32),
            A::I32(i32::from(c.dither)),
            mptr(&mut img[0]),
            A::I32(wi),
            A::I32(hi),
            A::I32(wi),
        ],
    )
    .unwrap_or_else(fail);
    // w x h image and mask.
    launch(
        f,
        "vmaf_cambi_mask",
        px(w, h),
        (32, 8, 1),
        warp,
        &[
            ptr(&img[0]),
            A::I32(wi),
            A::I32(hi),
            A::I32(wi),
            A::U32(c.mask_threshold),
            mptr(&mut mask[0]),
            A::I32(wi),
        ],
    )
    .unwrap_or_else(fail);
    let (mut im, mut mk) = (0usize, 0usize);
    let (mut cw, mut ch) = (w, h);
    let (mut maps, mut stats) = (Vec::new(), Vec::new());
    for &(sw, sh) in &c.sizes {
        let (swi, shi) = (sw as i32, sh as i32);
        if (sw, sh) != (cw, ch) {
            for (bufs, i) in [(&mut img, &mut im), (&mut mask, &mut mk)] {
                let [a, b] = bufs;
                let (src, dst) = if *i == 0 { (a, b) } else { (b, a) };
                // a dense cw x ch input read at even coordinates; a sw x sh output
                // (sw = ceil(cw / 2), sh = ceil(ch / 2)) in a different buffer.
                launch(
                    f,
                    "vmaf_cambi_decimate",
                    px(sw, sh),
                    (32, 8, 1),
                    warp,
                    &[
                        ptr(src),
                        A::I32(cw as i32),
                        mptr(dst),
                        A::I32(swi),
                        A::I32(shi),
                        A::I32(swi),
                    ],
                )
                .unwrap_or_else(fail);
                *i ^= 1;
            }
            (cw, ch) = (sw, sh);
        }
        {
            let [a, b] = &mut img;
            let (src, dst) = if im == 0 { (a, b) } else { (b, a) };
            // dense sw x sh planes in different buffers.
            launch(
                f,
                "vmaf_cambi_mode",
                px(sw, sh),
                (32, 8, 1),
                warp,
                &[ptr(src), mptr(dst), A::I32(swi), A::I32(shi), A::I32(swi)],
            )
            .unwrap_or_else(fail);
            im ^= 1;
        }
        let mut cv = vec![0f32; sw * sh];
        // dense sw x sh image and mask; params holds 2 * nd values; the LUT is
        // longer than the window area (as cambi_cvalues checks); cv holds sw * sh.
        launch(
            f,
            "vmaf_cambi_cvalues",
            ((sw as u32).div_ceil(16), (sh as u32).div_ceil(16), 1),
            (16, 16, 1),
            warp,
            &[
                ptr(&img[im]),
                ptr(&mask[mk]),
                A::I32(swi),
                A::I32(shi),
                A::I32(swi),
                A::I32(c.pad as i32),
                A::I32(i32::from(c.band_base)),
                A::I32(i32::from(c.band_size)),
                A::I32(c.num_diffs as i32),
                A::I32(i32::from(c.vlt)),
                ptr(params),
                ptr(lut),
                mptr(&mut cv),
            ],
        )
        .unwrap_or_else(fail);
        let mut st = vec![0u64; super::launch::CAMBI_STATS_LEN];
        // reads cv[0..sw * sh], adds to st[0..257].
        launch(
            f,
            "vmaf_cambi_stats",
            (
                ((sw * sh) as u32)
                    .div_ceil(256)
                    .min(crate::gpu::launch::MAX_ROW_BLOCKS),
                1,
                1,
            ),
            (256, 1, 1),
            warp,
            &[ptr(&cv), A::I32((sw * sh) as i32), mptr(&mut st)],
        )
        .unwrap_or_else(fail);
        maps.push(cv);
        stats.push(st);
    }
    (maps, stats)
}

/// What the GPU tests of gpu.rs require of the device: every c-value map bit
/// for bit, the statistics of the CPU's maps, and the score the host finishes from them
/// (statistics pooling, else the map) identical to the CPU score.
#[test]
fn cambi_equals_cpu_at_wave64_and_wave32() {
    use super::gpu::ModelCase;
    let f = model_or_skip!();
    let t0 = Instant::now();
    let mut pics: Vec<(String, Picture)> = Vec::new();
    for clip in [
        "natural_576x324_420p8",
        "life_320x240_420p8",
        "natural_320x180_420p12",
    ] {
        let (_, dists) = load_parity_clip(clip);
        pics.push((format!("{clip} frame 1"), dists[1].clone()));
    }
    for (k, (bpc, w, h)) in [(8u32, 231usize, 97usize), (10, 150, 219)]
        .into_iter()
        .enumerate()
    {
        let p = noise_picture(PixelFormat::Yuv420p, bpc, w, h, 40 + k as u64);
        pics.push((format!("noise {w}x{h} {bpc}-bit"), p));
    }
    let option_sets = [
        "",
        "enc_bitdepth=8",
        "enc_width=400:enc_height=300:topk=0.01",
        "window_size=15:max_log_contrast=1:cambi_high_res_speedup=200",
    ];
    let mut runs = 0;
    for (what, pic) in &pics {
        for opts in option_sets {
            let Some(c) = ModelCase::new(opts, pic) else {
                println!("cambi: the CPU refuses {what} [{opts}]");
                continue;
            };
            for warp in WAVES {
                let at = format!("{what} [{opts}] wave {warp}");
                let (maps, stats) = cambi_on_model(f, &c, pic, warp);
                for (scale, (g, want)) in maps.iter().zip(&c.cpu_maps).enumerate() {
                    assert_eq!(g.len(), want.len(), "{at} scale {scale}");
                    if let Some(i) = (0..g.len()).find(|&i| g[i].to_bits() != want[i].to_bits()) {
                        panic!(
                            "{at} scale {scale}: c-value {i}: model {} cpu {}",
                            g[i], want[i]
                        );
                    }
                    assert_eq!(
                        stats[scale], c.cpu_stats[scale],
                        "{at} scale {scale}: statistics"
                    );
                }
                let got = c.score(&stats, &maps);
                assert_eq!(
                    got.to_bits(),
                    c.cpu_score.to_bits(),
                    "{at}: model {got} cpu {}",
                    c.cpu_score
                );
                runs += 1;
            }
        }
    }
    // Cambi needs a side of at least 216: every picture above is taken.
    assert_eq!(runs, 40);
    println!("cambi: {runs} runs in {:.1?}", t0.elapsed());
}
