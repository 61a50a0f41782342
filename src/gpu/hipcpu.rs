//! The kernels of `kernels/*.hip` run on the CPU with 64- and 32-lane wavefront semantics
//! (tests/hipcpu: the execution model `hip_cpu.h` and the entry point `kernels.cpp`, built here
//! with the system C++ compiler into `target/hipcpu/libhipcpu.so`), launched with the geometry of
//! src/gpu/launch, and checked bit for bit against the CPU reference the GPU path must equal
//! (psnr, motion, VIF, ADM integer accumulators; cambi c-value maps, statistics and score;
//! float_ssim and float_ms_ssim results).
//! No AMD GPU is needed: what this proves is that no kernel depends on the lane count (every
//! lane reaches every full-wave shuffle, reductions are sized from warpSize) and that the
//! integer results are the reference's. Without a C++ compiler (`$CXX`, else `c++`) each test
//! prints "skipped: no C++ compiler" and passes.

use std::ffi::{c_char, c_int, c_uint, c_void, CString};
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Instant;

use crate::picture::{Picture, PictureData, PixelFormat};
use crate::testutil::{load_parity_clip, noise_picture, repo_root, PARITY_CLIPS};

/// The wave sizes every test runs at: AMD CDNA/GCN, then RDNA and NVIDIA.
pub(crate) const WAVES: [c_int; 2] = [64, 32];

pub(crate) type LaunchFn = unsafe extern "C" fn(
    *const c_char,
    *const c_uint,
    *const c_uint,
    c_int,
    *const *mut c_void,
    c_uint,
    *mut c_char,
    usize,
) -> c_int;

fn newest_mtime(dirs: &[PathBuf]) -> std::time::SystemTime {
    let mut best = std::time::SystemTime::UNIX_EPOCH;
    for d in dirs {
        for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
            if let Ok(t) = e.metadata().and_then(|m| m.modified()) {
                best = best.max(t);
            }
        }
    }
    best
}

/// Builds (when stale) and loads the model; None without a C++ compiler.
pub(crate) fn model() -> Option<LaunchFn> {
    static LIB: OnceLock<Option<(libloading::Library, LaunchFn)>> = OnceLock::new();
    LIB.get_or_init(|| {
        let root = repo_root();
        let src = root.join("tests/hipcpu");
        let kdir = root.join("kernels");
        let out_dir = root.join("target/hipcpu");
        std::fs::create_dir_all(&out_dir).expect("create target/hipcpu");
        let lib = out_dir.join("libhipcpu.so");
        let fresh = lib
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t >= newest_mtime(&[src.clone(), kdir.clone()]));
        if !fresh {
            let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
            let tmp = out_dir.join(format!("libhipcpu.{}.tmp", std::process::id()));
            let t0 = Instant::now();
            let run = Command::new(&cxx)
                .args(["-std=c++17", "-O2", "-g0", "-fPIC", "-shared", "-pthread"])
                // Every float/double step must round as written, as on the GPU.
                .args(["-ffp-contract=off", "-fno-fast-math", "-DVMAF_HIPCPU"])
                .arg(format!("-I{}", src.display()))
                .arg(format!("-I{}", kdir.display()))
                .arg(src.join("kernels.cpp"))
                .arg(src.join("hip_cpu.cpp"))
                .arg("-o")
                .arg(&tmp)
                .output();
            match run {
                Err(e) => {
                    println!("skipped: no C++ compiler ({cxx}: {e})");
                    return None;
                }
                Ok(o) if !o.status.success() => panic!(
                    "{cxx} failed on tests/hipcpu:\n{}",
                    String::from_utf8_lossy(&o.stderr)
                ),
                Ok(_) => {}
            }
            std::fs::rename(&tmp, &lib).expect("rename libhipcpu.so");
            println!("built {} in {:.1?}", lib.display(), t0.elapsed());
        }
        // SAFETY: libhipcpu.so is built just above from tests/hipcpu (its initialisers only set
        // up static tables) and stays loaded for the process (the OnceLock keeps it).
        let library = unsafe { libloading::Library::new(&lib) }.expect("load libhipcpu.so");
        // SAFETY: `hipcpu_launch` is defined in tests/hipcpu/kernels.cpp with exactly the
        // signature of LaunchFn.
        let f = unsafe { library.get::<LaunchFn>(b"hipcpu_launch\0") }.expect("hipcpu_launch");
        let f = *f;
        Some((library, f))
    })
    .as_ref()
    .map(|(_, f)| *f)
}

/// A kernel argument (every parameter of the kernels fits 8 bytes).
#[derive(Clone, Copy)]
pub(crate) enum A {
    I32(i32),
    U32(u32),
    I64(i64),
    F32(f32),
    F64(f64),
    P(*const c_void),
}

pub(crate) fn ptr<T>(s: &[T]) -> A {
    A::P(s.as_ptr().cast())
}
pub(crate) fn mptr<T>(s: &mut [T]) -> A {
    A::P(s.as_mut_ptr().cast())
}
pub(crate) const NULL: A = A::P(std::ptr::null());

/// Runs kernel `name` on the model; Err with the model's message when the launch fails (a lane
/// missing from a shuffle, mismatched barriers, a block that is not whole waves).
///
/// # Safety
/// Every pointer in `args` must cover all elements the kernel touches for this geometry (the
/// same condition src/gpu/launch checks before a device launch).
pub(crate) unsafe fn launch(
    f: LaunchFn,
    name: &str,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    warp: c_int,
    args: &[A],
) -> Result<(), String> {
    let mut slots: Vec<u64> = args
        .iter()
        .map(|a| {
            let mut b = [0u8; 8];
            match *a {
                A::I32(v) => b[..4].copy_from_slice(&v.to_ne_bytes()),
                A::U32(v) => b[..4].copy_from_slice(&v.to_ne_bytes()),
                A::I64(v) => b.copy_from_slice(&v.to_ne_bytes()),
                A::F32(v) => b[..4].copy_from_slice(&v.to_ne_bytes()),
                A::F64(v) => b.copy_from_slice(&v.to_ne_bytes()),
                A::P(p) => b[..size_of::<usize>()].copy_from_slice(&(p as usize).to_ne_bytes()),
            }
            u64::from_ne_bytes(b)
        })
        .collect();
    let ptrs: Vec<*mut c_void> = slots.iter_mut().map(|s| (s as *mut u64).cast()).collect();
    let g = [grid.0, grid.1, grid.2];
    let b = [block.0, block.1, block.2];
    let cname = CString::new(name).expect("kernel name");
    let mut err = vec![0u8; 4096];
    // SAFETY: the argument values live in `slots` for the call; the kernel's memory accesses
    // are the caller's guarantee; `err` holds err.len() bytes.
    let rc = unsafe {
        f(
            cname.as_ptr(),
            g.as_ptr(),
            b.as_ptr(),
            warp,
            ptrs.as_ptr(),
            ptrs.len() as c_uint,
            err.as_mut_ptr().cast(),
            err.len(),
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let n = err.iter().position(|&c| c == 0).unwrap_or(err.len());
    Err(String::from_utf8_lossy(&err[..n]).into_owned())
}

/// Gets the model or reports the skip.
macro_rules! model_or_skip {
    () => {
        match model() {
            Some(f) => f,
            None => {
                println!("skipped: no C++ compiler");
                return;
            }
        }
    };
}

/// A plane's samples as a dense `Vec<T>` (w x h), read through `sample()`.
pub(crate) fn dense_u8(p: &PictureData, plane: usize) -> Vec<u8> {
    let (w, h) = (p.w[plane], p.h[plane]);
    (0..h)
        .flat_map(|y| (0..w).map(move |x| (y, x)))
        .map(|(y, x)| p.sample(plane, x, y) as u8)
        .collect()
}
pub(crate) fn dense_u16(p: &PictureData, plane: usize) -> Vec<u16> {
    let (w, h) = (p.w[plane], p.h[plane]);
    (0..h)
        .flat_map(|y| (0..w).map(move |x| (y, x)))
        .map(|(y, x)| p.sample(plane, x, y))
        .collect()
}

/// Pairs of the parity clips (at most `frames` per clip, the 1080p clip 1) and random-size
/// noise pictures of every depth.
pub(crate) fn cases(frames: usize, min_side: usize) -> Vec<(String, Picture, Picture)> {
    let mut out = Vec::new();
    for clip in PARITY_CLIPS {
        let (r, d) = load_parity_clip(clip);
        let n = if clip.contains("1920x1080") {
            1
        } else {
            frames
        };
        for (i, (r, d)) in r.into_iter().zip(d).enumerate().take(n) {
            out.push((format!("{clip} frame {i}"), r, d));
        }
    }
    let mut rng = crate::testutil::checkasm::Rng::new(0x5eed);
    for (k, bpc) in [8u32, 10, 12, 16, 8, 10].into_iter().enumerate() {
        let w = rng.range(min_side, 300);
        let h = rng.range(min_side, 200);
        let r = noise_picture(PixelFormat::Yuv420p, bpc, w, h, 2 * k as u64 + 1);
        let d = noise_picture(PixelFormat::Yuv420p, bpc, w, h, 2 * k as u64 + 2);
        out.push((format!("noise {w}x{h} {bpc}-bit"), r, d));
    }
    out
}

/// The model's own semantics: shuffles (down/up/xor/idx with widths), and the failures it
/// must report instead of computing garbage.
#[test]
fn model_shuffles_barriers_and_divergence() {
    let f = model_or_skip!();
    for warp in WAVES {
        let wu = warp as usize;
        for width in [2usize, 4, 8, 16, 32, 64].into_iter().filter(|&w| w <= wu) {
            for delta in [0usize, 1, 3, 16, 31] {
                let n = 128usize;
                let mut out = vec![0u64; n * 4];
                // SAFETY: the kernel writes out[rank * 4 .. rank * 4 + 4] for rank < 128.
                unsafe {
                    launch(
                        f,
                        "hipcpu_test_shuffles",
                        (1, 1, 1),
                        (n as u32, 1, 1),
                        warp,
                        &[A::I32(delta as i32), A::I32(width as i32), mptr(&mut out)],
                    )
                }
                .unwrap();
                let val = |r: usize| r as u64 * 3 + 1 + ((r as u64) << 40);
                for r in 0..n {
                    let lane = r % wu;
                    let base = r - lane;
                    let seg = lane / width * width;
                    let (pos, seg_start) = (lane - seg, base + seg);
                    let down = if pos + delta < width { r + delta } else { r };
                    let up = if pos >= delta { r - delta } else { r };
                    let x = lane ^ delta;
                    let xor = if x < seg + width { base + x } else { r };
                    let idx = seg_start + delta % width;
                    let want = [val(down), val(up), val(xor), val(idx)];
                    assert_eq!(
                        &out[r * 4..r * 4 + 4],
                        &want,
                        "wave {warp} width {width} delta {delta} rank {r}"
                    );
                }
            }
        }
        // Lanes returning before a full-wave reduction: caught, not summed.
        let mut out = [0u64; 1];
        // SAFETY: the kernel writes out[0] only.
        let e = unsafe {
            launch(
                f,
                "hipcpu_test_early_return",
                (1, 1, 1),
                (128, 1, 1),
                warp,
                &[A::I32(100), mptr(&mut out)],
            )
        }
        .unwrap_err();
        assert!(e.contains("every lane of the wave"), "{e}");
        // SAFETY: as above.
        unsafe {
            launch(
                f,
                "hipcpu_test_early_return",
                (1, 1, 1),
                (128, 1, 1),
                warp,
                &[A::I32(128), mptr(&mut out)],
            )
        }
        .unwrap();
        assert_eq!(out[0], 128);
        // 96 threads: whole waves at 32 lanes, one and a half at 64.
        let mut sums = [0u64; 3];
        // SAFETY: the kernel writes sums[blockIdx.x] for 3 blocks.
        let r = unsafe {
            launch(
                f,
                "hipcpu_test_block_sum",
                (3, 1, 1),
                (96, 1, 1),
                warp,
                &[mptr(&mut sums)],
            )
        };
        if warp == 32 {
            r.unwrap();
            assert_eq!(sums, [96 * 97 / 2; 3]);
        } else {
            let e = r.unwrap_err();
            assert!(e.contains("not a whole number of waves"), "{e}");
        }
        let mut out = [0u64; 64];
        // SAFETY: the kernel writes out[threadIdx.x] for 64 threads.
        let e = unsafe {
            launch(
                f,
                "hipcpu_test_divergent_barrier",
                (1, 1, 1),
                (64, 1, 1),
                warp,
                &[mptr(&mut out)],
            )
        }
        .unwrap_err();
        assert!(e.contains("different __syncthreads"), "{e}");
    }
}

/// kernels/psnr.hip with the launch of src/gpu/launch/psnr.rs, every plane, against
/// `psnr::cpu::sse_plane` at the scalar level.
#[test]
fn psnr_sse_equals_cpu_at_wave64_and_wave32() {
    let f = model_or_skip!();
    let t0 = Instant::now();
    for (what, r, d) in cases(3, 1) {
        for plane in 0..r.pix_fmt.plane_count() {
            let (w, h) = (r.w[plane] as u32, r.h[plane] as u32);
            let want =
                crate::feature::psnr::sse_plane(&r, &d, plane, crate::simd::CpuLevel::SCALAR);
            let (rd8, dd8, rd16, dd16);
            let (kernel, rp, dp) = if r.bpc == 8 {
                (rd8, dd8) = (dense_u8(&r, plane), dense_u8(&d, plane));
                ("vmaf_psnr_sse_u8", ptr(&rd8), ptr(&dd8))
            } else {
                (rd16, dd16) = (dense_u16(&r, plane), dense_u16(&d, plane));
                ("vmaf_psnr_sse_u16", ptr(&rd16), ptr(&dd16))
            };
            for warp in WAVES {
                let mut out = [0u64; 1];
                // SAFETY: both planes are dense w x h; the kernel reads rows < h, columns < w
                // and adds to out[0].
                unsafe {
                    launch(
                        f,
                        kernel,
                        (w.div_ceil(256), h.min(512), 1),
                        (256, 1, 1),
                        warp,
                        &[
                            rp,
                            dp,
                            A::U32(w),
                            A::U32(h),
                            A::U32(w),
                            A::U32(w),
                            mptr(&mut out),
                        ],
                    )
                }
                .unwrap_or_else(|e| panic!("{what} plane {plane} wave {warp}: {e}"));
                assert_eq!(out[0], want, "{what} plane {plane} wave {warp}");
            }
        }
    }
    println!("psnr: {:.1?}", t0.elapsed());
}

/// The rows + reduce kernels of kernels/motion.hip with the launch of
/// src/gpu/launch/motion.rs, against `motion::motion_sad` at the scalar level.
fn motion_on_model(f: LaunchFn, prev: &PictureData, cur: &PictureData, warp: c_int) -> u64 {
    let (w, h) = (cur.w[0], cur.h[0]);
    let shift = if cur.bpc == 8 { 8 } else { cur.bpc as i32 };
    let mut rows = vec![0u64; h];
    let mut out = [0u64; 1];
    let (p8, c8, p16, c16);
    let (kernel, pp, cp) = if cur.bpc == 8 {
        (p8, c8) = (dense_u8(prev, 0), dense_u8(cur, 0));
        ("vmaf_motion_rows_u8", ptr(&p8), ptr(&c8))
    } else {
        (p16, c16) = (dense_u16(prev, 0), dense_u16(cur, 0));
        ("vmaf_motion_rows_u16", ptr(&p16), ptr(&c16))
    };
    let (wi, hi) = (w as i32, h as i32);
    // SAFETY: dense w x h planes, read at mirrored coordinates inside them; rows[row] for
    // row < h.
    unsafe {
        launch(
            f,
            kernel,
            ((w as u32).div_ceil(32), (h as u32).div_ceil(32), 1),
            (32, 8, 1),
            warp,
            &[
                pp,
                cp,
                A::I32(wi),
                A::I32(hi),
                A::I32(wi),
                A::I32(shift),
                mptr(&mut rows),
            ],
        )
    }
    .unwrap_or_else(|e| panic!("motion rows wave {warp}: {e}"));
    // SAFETY: reads rows[0..h], writes out[0].
    unsafe {
        launch(
            f,
            "vmaf_motion_reduce",
            (1, 1, 1),
            (256, 1, 1),
            warp,
            &[ptr(&rows), A::I32(hi), mptr(&mut out)],
        )
    }
    .unwrap_or_else(|e| panic!("motion reduce wave {warp}: {e}"));
    out[0]
}

#[test]
fn motion_sad_equals_cpu_at_wave64_and_wave32() {
    let f = model_or_skip!();
    let t0 = Instant::now();
    let mut pairs: Vec<(String, Picture, Picture)> = Vec::new();
    for clip in PARITY_CLIPS {
        let (refs, _) = load_parity_clip(clip);
        let n = if clip.contains("1920x1080") { 1 } else { 3 };
        for (i, p) in refs.windows(2).enumerate().take(n) {
            pairs.push((
                format!("{clip} frames {i}..{}", i + 1),
                p[0].clone(),
                p[1].clone(),
            ));
        }
    }
    for (what, r, d) in cases(0, 3) {
        pairs.push((what, r, d));
    }
    for (what, prev, cur) in &pairs {
        let want =
            crate::feature::motion::motion_sad(prev, cur, crate::simd::CpuLevel::SCALAR).unwrap();
        for warp in WAVES {
            assert_eq!(
                motion_on_model(f, prev, cur, warp),
                want,
                "{what} wave {warp}"
            );
        }
    }
    println!("motion: {:.1?}", t0.elapsed());
}

/// The VIF sequence of src/feature/vif/gpu.rs (scale 0 statistics with the fused decimation,
/// or the decimation alone when scale 0 is skipped; then statistics and decimation per scale)
/// with the launches of src/gpu/launch/vif.rs. `alt` runs the statistics kernels built with
/// the other horizontal-sum variant (integer or FP64, kernels/vif.hip `VIF_F64`).
fn vif_on_model(
    f: LaunchFn,
    r: &PictureData,
    d: &PictureData,
    egl: f64,
    skip0: bool,
    warp: c_int,
    alt: bool,
) -> [crate::feature::vif::VifAccums; 4] {
    let sfx = if alt { "_alt" } else { "" };
    let stats_u16 = format!("vmaf_vif_stats_u16{sfx}");
    let (w, h, bpc) = (r.w[0], r.h[0], r.bpc as i32);
    let table = crate::feature::vif::gpu::log2_steps();
    let mut acc = [0u64; 16];
    let mut pyr: Vec<(Vec<u16>, Vec<u16>)> = Vec::new();
    let (mut cw, mut ch) = (w, h);
    for _ in 1..4 {
        cw /= 2;
        ch /= 2;
        pyr.push((vec![0u16; cw * ch], vec![0u16; cw * ch]));
    }
    let fail = |e: String| panic!("vif wave {warp}: {e}");
    let stats_grid = |w: usize, h: usize| ((w as u32).div_ceil(32), (h as u32).div_ceil(32), 1);
    let down_grid = |w: usize, h: usize| {
        (
            ((w / 2) as u32).div_ceil(32),
            ((h / 2) as u32).div_ceil(8),
            1,
        )
    };
    let (r8, d8, r16, d16);
    let (k_stats, k_down, rp, dp) = if r.bpc == 8 {
        (r8, d8) = (dense_u8(r, 0), dense_u8(d, 0));
        (
            format!("vmaf_vif_stats_u8{sfx}"),
            "vmaf_vif_down_u8",
            ptr(&r8),
            ptr(&d8),
        )
    } else {
        (r16, d16) = (dense_u16(r, 0), dense_u16(d, 0));
        (stats_u16.clone(), "vmaf_vif_down_u16", ptr(&r16), ptr(&d16))
    };
    let (wi, hi) = (w as i32, h as i32);
    {
        let (pr, pd) = &mut pyr[0];
        let (pr, pd) = (mptr(pr), mptr(pd));
        let half = (w / 2) as i32;
        // SAFETY: dense w x h inputs read at reflected coordinates; the (w/2) x (h/2) outputs
        // hold w/2 * h/2 samples; acc[0..4].
        let res = unsafe {
            if skip0 {
                launch(
                    f,
                    k_down,
                    down_grid(w, h),
                    (32, 8, 1),
                    warp,
                    &[
                        rp,
                        dp,
                        A::I32(wi),
                        A::I32(hi),
                        A::I32(wi),
                        A::I32(0),
                        A::I32(bpc),
                        pr,
                        pd,
                        A::I32(half),
                    ],
                )
            } else {
                launch(
                    f,
                    &k_stats,
                    stats_grid(w, h),
                    (32, 8, 1),
                    warp,
                    &[
                        rp,
                        dp,
                        A::I32(wi),
                        A::I32(hi),
                        A::I32(wi),
                        A::I32(0),
                        A::I32(bpc),
                        ptr(table),
                        A::F64(egl),
                        mptr(&mut acc),
                        pr,
                        pd,
                        A::I32(half),
                    ],
                )
            }
        };
        res.unwrap_or_else(fail);
    }
    let (mut cw, mut ch) = (w / 2, h / 2);
    for scale in 1..4usize {
        let (lo, hi_) = pyr.split_at_mut(scale);
        let (pr, pd) = &lo[scale - 1];
        let (cwi, chi) = (cw as i32, ch as i32);
        // SAFETY: dense cw x ch 16-bit inputs; acc[4 * scale .. 4 * scale + 4].
        unsafe {
            launch(
                f,
                &stats_u16,
                stats_grid(cw, ch),
                (32, 8, 1),
                warp,
                &[
                    ptr(pr),
                    ptr(pd),
                    A::I32(cwi),
                    A::I32(chi),
                    A::I32(cwi),
                    A::I32(scale as i32),
                    A::I32(bpc),
                    ptr(table),
                    A::F64(egl),
                    mptr(&mut acc[4 * scale..]),
                    NULL,
                    NULL,
                    A::I32(0),
                ],
            )
        }
        .unwrap_or_else(fail);
        if scale < 3 {
            let (nr, nd) = &mut hi_[0];
            // SAFETY: dense cw x ch inputs; (cw/2) x (ch/2) outputs.
            unsafe {
                launch(
                    f,
                    "vmaf_vif_down_u16",
                    down_grid(cw, ch),
                    (32, 8, 1),
                    warp,
                    &[
                        ptr(pr),
                        ptr(pd),
                        A::I32(cwi),
                        A::I32(chi),
                        A::I32(cwi),
                        A::I32(scale as i32),
                        A::I32(bpc),
                        mptr(nr),
                        mptr(nd),
                        A::I32((cw / 2) as i32),
                    ],
                )
            }
            .unwrap_or_else(fail);
        }
        cw /= 2;
        ch /= 2;
    }
    std::array::from_fn(|i| crate::feature::vif::VifAccums {
        num_log: acc[4 * i] as i64,
        den_log: acc[4 * i + 1] as i64,
        num_non_log: acc[4 * i + 2] as i64,
        den_non_log: acc[4 * i + 3] as i64,
    })
}

#[test]
fn vif_accums_equal_cpu_at_wave64_and_wave32() {
    let f = model_or_skip!();
    let t0 = Instant::now();
    for (what, r, d) in cases(2, crate::feature::vif::gpu::MIN_SIDE) {
        for (egl, skip) in [(100.0, false), (1.0, false), (100.0, true)] {
            let want = crate::feature::vif::compute_accums(
                &r,
                &d,
                egl,
                skip,
                crate::simd::CpuLevel::SCALAR,
            )
            .unwrap();
            for warp in WAVES {
                for alt in [false, true] {
                    let got = vif_on_model(f, &r, &d, egl, skip, warp, alt);
                    assert_eq!(
                        got, want,
                        "{what} egl {egl} skip_scale0 {skip} wave {warp} alt {alt}"
                    );
                }
            }
        }
    }
    println!("vif: {:.1?}", t0.elapsed());
}

/// The ADM sequence of src/feature/adm/gpu.rs (per scale: the wavelet level with the maps,
/// then the contrast masking) with the launches of src/gpu/launch/adm.rs.
fn adm_on_model(
    f: LaunchFn,
    r: &PictureData,
    d: &PictureData,
    p: &crate::feature::adm::AdmParams,
    warp: c_int,
) -> [crate::feature::adm::ScaleAccum; 4] {
    use crate::feature::adm::{band_size, gpu::scale_params, tables::div_lookup, ScaleAccum};
    let (w, h) = (r.w[0], r.h[0]);
    let (bw0, bh0) = band_size(w, h, 0);
    let plane = bw0 * bh0;
    let mut approx = [
        [vec![0i32; plane], vec![0i32; plane]],
        [vec![0i32; plane], vec![0i32; plane]],
    ];
    let mut bands = vec![0i32; crate::gpu::launch::adm_bands_len(w, h)];
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
        // SAFETY: the pw x ph inputs are dense; each thread writes band pixel (i, j) < (bh, bw)
        // of approx and of the 6 (scale 0) or 9 band planes and 4 map planes bw * bh apart (the
        // buffers hold them); the LUT has 32769 entries.
        unsafe {
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
        }
        .unwrap_or_else(fail);
        let [left, right, top, bottom] = sp.score.map(|v| v as i32);
        if left != right && top != bottom {
            let [ch, cv, cd] = sp.cm_cube.map(|v| A::I32(v as i32));
            // SAFETY: one block per score-window row inside the band; reads bands/maps of
            // the bw x bh band (3x3 neighbourhoods clamped inside), adds to out[9 * scale..].
            unsafe {
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
            }
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
    use crate::feature::adm::cpu::{self, Luma, Scratch};
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
            let adm = crate::feature::adm::Adm::new(&dict).unwrap();
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

/// The cambi sequence of src/feature/cambi/gpu.rs (`with_c_values`: preprocessing, mask,
/// then per scale decimation, mode filter, c-values and statistics) with the launches of
/// src/gpu/launch/cambi.rs: each scale's c-value map and statistics.
fn cambi_on_model(
    f: LaunchFn,
    c: &crate::feature::cambi::gpu::ModelCase,
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
    // SAFETY: the dense in_w x in_h source is read at taps clamped inside it; taps holds
    // w + h entries; img[0] is w x h.
    unsafe {
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
    }
    .unwrap_or_else(fail);
    // SAFETY: w x h image and mask.
    unsafe {
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
    }
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
                // SAFETY: a dense cw x ch input read at even coordinates; a sw x sh output
                // (sw = ceil(cw / 2), sh = ceil(ch / 2)) in a different buffer.
                unsafe {
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
                }
                .unwrap_or_else(fail);
                *i ^= 1;
            }
            (cw, ch) = (sw, sh);
        }
        {
            let [a, b] = &mut img;
            let (src, dst) = if im == 0 { (a, b) } else { (b, a) };
            // SAFETY: dense sw x sh planes in different buffers.
            unsafe {
                launch(
                    f,
                    "vmaf_cambi_mode",
                    px(sw, sh),
                    (32, 8, 1),
                    warp,
                    &[ptr(src), mptr(dst), A::I32(swi), A::I32(shi), A::I32(swi)],
                )
            }
            .unwrap_or_else(fail);
            im ^= 1;
        }
        let mut cv = vec![0f32; sw * sh];
        // SAFETY: dense sw x sh image and mask; params holds 2 * nd values; the LUT is
        // longer than the window area (as cambi_cvalues checks); cv holds sw * sh.
        unsafe {
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
        }
        .unwrap_or_else(fail);
        let mut st = vec![0u64; crate::gpu::launch::CAMBI_STATS_LEN];
        // SAFETY: reads cv[0..sw * sh], adds to st[0..257].
        unsafe {
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
        }
        .unwrap_or_else(fail);
        maps.push(cv);
        stats.push(st);
    }
    (maps, stats)
}

/// What the GPU tests of src/feature/cambi/gpu.rs require of the device: every c-value map bit
/// for bit, the statistics of the CPU's maps, and the score the host finishes from them
/// (statistics pooling, else the map) identical to the CPU score.
#[test]
fn cambi_equals_cpu_at_wave64_and_wave32() {
    use crate::feature::cambi::gpu::ModelCase;
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

/// The float_ssim / float_ms_ssim sequence of src/feature/ssim/gpu.rs (`Pipeline::queue`: to
/// float, the decimated levels, then per SSIM level the horizontal pass and the row sums) with
/// the launches of src/gpu/launch/float_ssim.rs; the host's means from those row sums.
fn ssim_on_model(
    f: LaunchFn,
    plan: &crate::feature::ssim::gpu::Plan,
    r: &PictureData,
    d: &PictureData,
    warp: c_int,
) -> Vec<crate::feature::ssim::tools::SsimMeans> {
    use crate::feature::ssim::tools::{luma_scaler, ssim_constants, GAUSSIAN, GAUSSIAN_LEN};
    let fail = |e: String| panic!("ssim wave {warp}: {e}");
    let grid = |w: usize, h: usize| ((w as u32).div_ceil(32), (h as u32).div_ceil(8), 1);
    let mut refs: Vec<Vec<f32>> = plan.dims.iter().map(|&(w, h)| vec![0.0; w * h]).collect();
    let mut dis = refs.clone();
    let (w, h) = plan.dims[0];
    let (wi, hi) = (w as i32, h as i32);
    let (r8, d8, r16, d16);
    let (kernel, rp, dp) = if r.bpc == 8 {
        (r8, d8) = (dense_u8(r, 0), dense_u8(d, 0));
        ("vmaf_ssim_to_float_u8", ptr(&r8), ptr(&d8))
    } else {
        (r16, d16) = (dense_u16(r, 0), dense_u16(d, 0));
        ("vmaf_ssim_to_float_u16", ptr(&r16), ptr(&d16))
    };
    // SAFETY: dense w x h inputs and outputs.
    unsafe {
        launch(
            f,
            kernel,
            grid(w, h),
            (32, 8, 1),
            warp,
            &[
                rp,
                dp,
                A::I32(wi),
                A::I32(hi),
                A::I32(wi),
                A::F32(luma_scaler(r.bpc).unwrap()),
                mptr(&mut refs[0]),
                mptr(&mut dis[0]),
            ],
        )
    }
    .unwrap_or_else(fail);
    for l in 1..plan.dims.len() {
        let ((pw, ph), (lw, lh)) = (plan.dims[l - 1], plan.dims[l]);
        let (rlo, rhi) = refs.split_at_mut(l);
        let (dlo, dhi) = dis.split_at_mut(l);
        // SAFETY: pw x ph inputs read at mirrored coordinates inside them; lw x lh outputs;
        // size * size taps (as ssim_decimate checks).
        unsafe {
            launch(
                f,
                "vmaf_ssim_decimate",
                grid(lw, lh),
                (32, 8, 1),
                warp,
                &[
                    ptr(&rlo[l - 1]),
                    ptr(&dlo[l - 1]),
                    A::I32(pw as i32),
                    A::I32(ph as i32),
                    ptr(&plan.taps),
                    A::I32(plan.size as i32),
                    A::I32(plan.factor as i32),
                    mptr(&mut rhi[0]),
                    mptr(&mut dhi[0]),
                    A::I32(lw as i32),
                    A::I32(lh as i32),
                ],
            )
        }
        .unwrap_or_else(fail);
    }
    let layout = plan.sum_layout();
    let n_sums = layout.last().map_or(0, |&(off, rows, _)| off + 4 * rows);
    let mut sums = vec![0f64; n_sums];
    let [c1, c2, c3] = ssim_constants();
    for (&l, &(offset, _, _)) in plan.ssim_levels.iter().zip(&layout) {
        let (lw, lh) = plan.dims[l];
        let plane = crate::gpu::launch::ssim_hconv_plane(lw, lh);
        let mut hbuf = vec![0f32; 5 * plane];
        let (lwi, lhi) = (lw as i32, lh as i32);
        // SAFETY: lw x lh inputs; 11 Gaussian taps; five (lw - 10) x lh planes in hbuf.
        unsafe {
            launch(
                f,
                "vmaf_ssim_hconv",
                grid(lw - (GAUSSIAN_LEN - 1), lh),
                (32, 8, 1),
                warp,
                &[
                    ptr(&refs[l]),
                    ptr(&dis[l]),
                    A::I32(lwi),
                    A::I32(lhi),
                    ptr(&GAUSSIAN),
                    mptr(&mut hbuf),
                    A::I64(plane as i64),
                ],
            )
        }
        .unwrap_or_else(fail);
        let (dw, dh) = (lw + 1 - GAUSSIAN_LEN, lh + 1 - GAUSSIAN_LEN);
        // SAFETY: reads the five planes of hbuf; writes sums[offset + 4 * row ..][..4] for
        // row < dh, inside `sums` (the layout's extent).
        unsafe {
            launch(
                f,
                "vmaf_ssim_rows",
                (dh as u32, 1, 1),
                (256, 1, 1),
                warp,
                &[
                    ptr(&hbuf),
                    A::I32(dw as i32),
                    A::I32(lhi),
                    A::I64(plane as i64),
                    ptr(&GAUSSIAN),
                    A::F32(c1),
                    A::F32(c2),
                    A::F32(c3),
                    mptr(&mut sums[offset..]),
                ],
            )
        }
        .unwrap_or_else(fail);
    }
    plan.means(&sums)
}

/// What the GPU tests of src/feature/ssim/gpu.rs require of the device (bit-exact, no
/// tolerance): the float_ssim means at scales auto, 2 and 3 and the float_ms_ssim result, bit for
/// bit the CPU's at the scalar level.
#[test]
fn float_ssim_equals_cpu_at_wave64_and_wave32() {
    use crate::feature::ssim::{float_ms_ssim, float_ssim, gpu::Plan, tools::GAUSSIAN_LEN};
    let f = model_or_skip!();
    let t0 = Instant::now();
    let mut pairs: Vec<(String, Picture, Picture)> = Vec::new();
    for clip in [
        "natural_576x324_420p8",
        "life_320x240_420p8",
        "natural_320x180_420p12",
    ] {
        let (refs, dists) = load_parity_clip(clip);
        pairs.push((format!("{clip} frame 1"), refs[1].clone(), dists[1].clone()));
    }
    for (k, (bpc, w, h)) in [(8u32, 203usize, 181usize), (10, 99, 67), (16, 177, 176)]
        .into_iter()
        .enumerate()
    {
        let r = noise_picture(PixelFormat::Yuv420p, bpc, w, h, 60 + 2 * k as u64);
        let d = noise_picture(PixelFormat::Yuv420p, bpc, w, h, 61 + 2 * k as u64);
        pairs.push((format!("noise {w}x{h} {bpc}-bit"), r, d));
    }
    let bits =
        |m: &crate::feature::ssim::tools::SsimMeans| [m.ssim, m.l, m.c, m.s].map(f32::to_bits);
    let mut runs = 0;
    for (what, r, d) in &pairs {
        let (w, h) = (r.w[0], r.h[0]);
        for scale in [0, 2, 3] {
            let want = float_ssim::compute(r, d, scale, crate::simd::CpuLevel::SCALAR).unwrap();
            let s = float_ssim::checked_scale(scale, w, h).unwrap();
            let plan = Plan::float_ssim(w, h, s);
            let (lw, lh) = plan.dims[plan.dims.len() - 1];
            if lw < GAUSSIAN_LEN || lh < GAUSSIAN_LEN {
                continue;
            }
            for warp in WAVES {
                let got = ssim_on_model(f, &plan, r, d, warp);
                assert_eq!(
                    bits(&got[0]),
                    bits(&want),
                    "{what} float_ssim scale {scale} wave {warp}: model {:?} cpu {want:?}",
                    got[0]
                );
                runs += 1;
            }
        }
        if float_ms_ssim::check_size(w, h).is_ok() {
            let want = float_ms_ssim::compute(r, d, crate::simd::CpuLevel::SCALAR).unwrap();
            for warp in WAVES {
                let m = ssim_on_model(f, &Plan::ms_ssim(w, h), r, d, warp);
                let got = float_ms_ssim::finish(&m.try_into().unwrap()).unwrap();
                let all = |x: &float_ms_ssim::MsSsim| {
                    let mut v = vec![x.score.to_bits()];
                    v.extend(x.l.iter().chain(&x.c).chain(&x.s).map(|v| v.to_bits()));
                    v
                };
                assert_eq!(all(&got), all(&want), "{what} float_ms_ssim wave {warp}");
                runs += 1;
            }
        }
    }
    println!("float_ssim: {runs} runs in {:.1?}", t0.elapsed());
    assert!(runs >= 40, "only {runs} runs");
}

/// Model time of one 576x324 8-bit frame per feature at 64 lanes (printed; run with
/// `--nocapture`).
#[test]
fn model_time_per_576x324_frame() {
    let f = model_or_skip!();
    let (refs, dists) = load_parity_clip("natural_576x324_420p8");
    let (r, d) = (&refs[1], &dists[1]);
    let t = Instant::now();
    motion_on_model(f, &refs[0], r, 64);
    let motion = t.elapsed();
    let t = Instant::now();
    vif_on_model(f, r, d, 100.0, false, 64, false);
    let vif = t.elapsed();
    let adm = crate::feature::adm::Adm::new(&crate::feature::options::Dict::new()).unwrap();
    let t = Instant::now();
    adm_on_model(f, r, d, adm.params(), 64);
    let adm = t.elapsed();
    println!("576x324 at wave64: motion {motion:.1?}, vif {vif:.1?}, adm {adm:.1?}");
}
