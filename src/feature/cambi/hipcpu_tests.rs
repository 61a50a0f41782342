//! Cambi's kernels on the kernel model (`gpu::hipcpu`) at 64 and 32 lanes, with the geometry of
//! [`super::launch`], against the CPU reference bit for bit.

use std::ffi::c_int;
use std::time::Instant;

use crate::gpu::hipcpu::{
    dense_u16, dense_u8, launch, launch_cfg, model_or_skip, mptr, ptr, LaunchFn, A, WAVES,
};
use crate::picture::{Picture, PictureData, PixelFormat};
use crate::testutil::{load_parity_clip, noise_picture};

/// The cambi sequence of gpu.rs (`with_c_values`: preprocessing, the first scale's mask,
/// then per scale the decimated, mode-filtered picture with its window values and the
/// c-values with their statistics) with the launches of launch.rs, through the sliding or the
/// direct c-value kernel: each scale's c-value map and statistics.
fn cambi_on_model(
    f: LaunchFn,
    c: &super::gpu::ModelCase,
    pic: &PictureData,
    warp: c_int,
    slide: Option<super::launch::Sliding>,
) -> (Vec<Vec<f32>>, Vec<Vec<u64>>) {
    let (w, h, in_w, in_h) = (c.w, c.h, c.in_w, c.in_h);
    let (taps, params, lut) = (&c.taps, &c.params, c.lut);
    let fail = |e: String| panic!("cambi wave {warp}: {e}");
    let px = |w: usize, h: usize| ((w as u32).div_ceil(32), (h as u32).div_ceil(8), 1);
    let mut pre = vec![0u16; w * h];
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
    // w + h entries; pre is w x h.
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
            mptr(&mut pre),
            A::I32(wi),
            A::I32(hi),
            A::I32(wi),
        ],
    )
    .unwrap_or_else(fail);
    let (fw, fh) = c.sizes[0];
    let step0 = if (fw, fh) == (w, h) { 1 } else { 2 };
    let mut mask = vec![0u16; fw * fh];
    // w x h image; fw x fh = ceil(w / step0) x ceil(h / step0) mask.
    launch(
        f,
        "vmaf_cambi_mask",
        px(fw, fh),
        (32, 8, 1),
        warp,
        &[
            ptr(&pre),
            A::I32(wi),
            A::I32(hi),
            A::I32(wi),
            A::U32(c.mask_threshold),
            A::I32(step0),
            mptr(&mut mask),
            A::I32(fw as i32),
            A::I32(fh as i32),
            A::I32(fw as i32),
        ],
    )
    .unwrap_or_else(fail);
    let (mut maps, mut stats) = (Vec::new(), Vec::new());
    let mut prev = (pre, w, 1);
    for (scale, &(sw, sh)) in c.sizes.iter().enumerate() {
        let (swi, shi) = (sw as i32, sh as i32);
        let (mut mode, mut wv) = (vec![0u16; sw * sh], vec![0u16; sw * sh]);
        // prev is read at (i * step, j * step) inside its plane (sizes halve with ceil), the
        // mask at (i << scale, j << scale) inside fw x fh; mode and wv are sw x sh.
        launch(
            f,
            "vmaf_cambi_scale",
            px(sw, sh),
            (32, 8, 1),
            warp,
            &[
                ptr(&prev.0),
                A::I32(prev.1 as i32),
                A::I32(prev.2),
                ptr(&mask),
                A::I32(fw as i32),
                A::I32(1 << scale),
                A::I32(i32::from(c.band_base)),
                A::I32(i32::from(c.band_size)),
                mptr(&mut mode),
                mptr(&mut wv),
                A::I32(swi),
                A::I32(shi),
            ],
        )
        .unwrap_or_else(fail);
        let mut cv = vec![0f32; sw * sh];
        let mut st = vec![0u64; super::launch::CAMBI_STATS_LEN];
        let (kernel, grid, block, rows, shmem) = if let Some(k) = slide {
            // As the launcher shortens the rows on small scales; `k` keeps its own rows on the
            // scales large enough.
            let k = k.for_size(&c.c_values(), sw, sh);
            let bw = k.width as u32;
            (
                k.kernel,
                (
                    (sw as u32).div_ceil(bw),
                    (sh as u32).div_ceil(k.rows as u32),
                    1,
                ),
                (bw, 1, 1),
                k.rows,
                k.dynamic_shared,
            )
        } else {
            (
                "vmaf_cambi_cvalues",
                ((sw as u32).div_ceil(16), (sh as u32).div_ceil(16), 1),
                (16, 16, 1),
                0,
                0,
            )
        };
        // dense sw x sh window values below band_size or the no-value mark; params holds
        // 2 * nd values; the LUT is longer than the window area (as cambi_cvalues checks); cv
        // holds sw * sh, st 257 zeroed entries.
        let cfg = crate::gpu::LaunchConfig {
            grid,
            block,
            shared_mem_bytes: shmem as u32,
        };
        launch_cfg(
            f,
            kernel,
            cfg,
            warp,
            &[
                ptr(&wv),
                A::I32(swi),
                A::I32(shi),
                A::I32(c.pad as i32),
                A::I32(i32::from(c.band_base)),
                A::I32(i32::from(c.band_size)),
                A::I32(c.num_diffs as i32),
                A::I32(i32::from(c.vlt)),
                ptr(params),
                ptr(lut),
                A::I32(rows as i32),
                mptr(&mut cv),
                mptr(&mut st),
            ],
        )
        .unwrap_or_else(fail);
        maps.push(cv);
        stats.push(st);
        prev = (mode, sw, 2);
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
    for (k, (bpc, w, h)) in [(8u32, 231usize, 97usize), (10, 150, 219), (8, 1200, 360)]
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
        "window_size=127",
    ];
    let mut runs = 0;
    let mut sliding = std::collections::BTreeMap::new();
    for (what, pic) in &pics {
        for opts in option_sets {
            let Some(c) = ModelCase::new(opts, pic) else {
                println!("cambi: the CPU refuses {what} [{opts}]");
                continue;
            };
            // The direct kernel always, and every sliding one that takes the case on an
            // H100/H200 (227 KiB of shared memory per block).
            let kernels: Vec<_> = std::iter::once(None)
                .chain(c.sliding_kernels(232_448).into_iter().map(Some))
                .collect();
            for (warp, slide) in WAVES
                .iter()
                .flat_map(|&w| kernels.iter().map(move |&k| (w, k)))
            {
                if let Some(k) = slide {
                    *sliding.entry((k.kernel, k.rows)).or_insert(0) += 1;
                }
                let at = format!("{what} [{opts}] wave {warp} kernel {slide:?}");
                let (maps, stats) = cambi_on_model(f, &c, pic, warp, slide);
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
    println!(
        "cambi: {runs} runs in {:.1?}; sliding kernels: {sliding:?}",
        t0.elapsed()
    );
    // Cambi needs a side of at least 216: every picture above is taken. The wide and both
    // narrow sliding kernels ran, and the direct kernel alone where the contrast steps are
    // not 4.
    assert_eq!(runs, 156);
    let kernels: std::collections::BTreeSet<_> = sliding.keys().map(|k| k.0).collect();
    assert_eq!(kernels.len(), 3, "{sliding:?}");
}

/// The input range check flags a plane with one sample above the maximum, wherever it lies,
/// and leaves the flag of an in-range plane alone (odd sizes, padded rows, both waves).
#[test]
fn cambi_range_check_at_wave64_and_wave32() {
    let f = model_or_skip!();
    let (w, h, stride) = (37usize, 21usize, 40usize);
    for warp in WAVES {
        for bad in [None, Some((0, 0)), Some((20, 36)), Some((7, 13))] {
            let mut plane = vec![1023u16; stride * h];
            // Padding beyond w is never read, whatever it holds.
            for row in plane.chunks_mut(stride) {
                row[w..].fill(u16::MAX);
            }
            if let Some((y, x)) = bad {
                plane[y * stride + x] = 1024;
            }
            let mut flag = vec![0u64; 1];
            launch(
                f,
                "vmaf_cambi_range_u16",
                ((w as u32).div_ceil(32), (h as u32).div_ceil(8), 1),
                (32, 8, 1),
                warp,
                &[
                    ptr(&plane),
                    A::I32(w as i32),
                    A::I32(h as i32),
                    A::I32(stride as i32),
                    A::U32(1023),
                    mptr(&mut flag),
                ],
            )
            .unwrap_or_else(|e| panic!("wave {warp}: {e}"));
            assert_eq!(flag[0], u64::from(bad.is_some()), "wave {warp} {bad:?}");
        }
    }
}
