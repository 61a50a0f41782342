//! The kernels of `kernels/*.hip` run on the CPU with 64- and 32-lane wavefront semantics
//! (tests/hipcpu: the execution model `hip_cpu.h` and the entry point `kernels.cpp`, built here
//! with the system C++ compiler into `target/hipcpu/libhipcpu.so`): the harness the kernel-model
//! tests of each feature (`feature/<f>/hipcpu_tests.rs`) launch their kernels with, at their
//! launchers' geometry, to check them bit for bit against the CPU reference the GPU path must
//! equal. Launches are safe: arguments are scalars and borrowed slices, checked against the
//! kernel's declared parameter types.
//!
//! No AMD GPU is needed: what this proves is that no kernel depends on the lane count (every
//! lane reaches every full-wave shuffle, reductions are sized from warpSize) and that the
//! integer results are the reference's. Without a C++ compiler (`$CXX`, else `c++`) each test
//! prints "skipped: no C++ compiler" and passes.

use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_uint, c_void, CString};
use std::marker::PhantomData;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Instant;

use super::launch::{signature, ParamType};
use crate::picture::{Picture, PictureData, PixelFormat};
use crate::testutil::{load_parity_clip, noise_picture, repo_root, PARITY_CLIPS};

/// The wave sizes every test runs at: AMD CDNA/GCN, then RDNA and NVIDIA.
pub(crate) const WAVES: [c_int; 2] = [64, 32];

pub(crate) type LaunchFn = unsafe extern "C" fn(
    *const c_char,
    *const c_uint,
    *const c_uint,
    c_int,
    usize,
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

/// A kernel argument (every parameter of the kernels fits 8 bytes): a scalar, or a slice the
/// kernel may read (`ptr`) or write (`mptr`), borrowed (mutably for `mptr`) for as long as the
/// argument lives, so Rust code cannot touch it until the launch is over.
#[derive(Clone, Copy)]
pub(crate) enum A<'a> {
    I32(i32),
    U32(u32),
    I64(i64),
    F32(f32),
    F64(f64),
    /// The first element of a slice and its element's C type.
    P(*const c_void, fn() -> String, PhantomData<&'a ()>),
    /// NULL, for any pointer parameter.
    Null,
}

impl A<'_> {
    /// The C type as [`ParamType`] spells it (`*` alone for NULL).
    fn c_type(&self) -> String {
        match self {
            A::I32(_) => i32::c_type(),
            A::U32(_) => u32::c_type(),
            A::I64(_) => i64::c_type(),
            A::F32(_) => f32::c_type(),
            A::F64(_) => f64::c_type(),
            A::P(_, t, _) => format!("*{}", t()),
            A::Null => "*".into(),
        }
    }
}

/// A slice the kernel reads.
pub(crate) fn ptr<T: ParamType>(s: &[T]) -> A<'_> {
    A::P(s.as_ptr().cast(), T::c_type, PhantomData)
}
/// A slice the kernel writes (and may read).
pub(crate) fn mptr<T: ParamType>(s: &mut [T]) -> A<'_> {
    A::P(s.as_mut_ptr().cast(), T::c_type, PhantomData)
}
pub(crate) const NULL: A<'static> = A::Null;

/// The parameter types of every kernel the model has (kernels/*.hip and the model's own in
/// tests/hipcpu/kernels.cpp), by name.
fn declarations() -> &'static BTreeMap<String, Vec<String>> {
    static DECLARED: OnceLock<BTreeMap<String, Vec<String>>> = OnceLock::new();
    DECLARED.get_or_init(|| {
        let model = repo_root().join("tests/hipcpu/kernels.cpp");
        let model = std::fs::read_to_string(&model).expect("tests/hipcpu/kernels.cpp");
        signature::kernel_sources()
            .values()
            .chain(std::iter::once(&model))
            .flat_map(|src| signature::parse_kernels(src).expect("kernel declarations"))
            .collect()
    })
}

/// Runs kernel `name` on the model `f`; Err with the model's message when the launch fails (a
/// lane missing from a shuffle, mismatched barriers, a block that is not whole waves), or when
/// `args` are not the kernel's parameter types. The caller sizes each slice to what the kernel
/// touches for this geometry, as the device launchers' spans do.
pub(crate) fn launch(
    f: LaunchFn,
    name: &str,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    warp: c_int,
    args: &[A<'_>],
) -> Result<(), String> {
    let cfg = crate::gpu::LaunchConfig {
        grid,
        block,
        shared_mem_bytes: 0,
    };
    launch_cfg(f, name, cfg, warp, args)
}

/// [`launch`] with a device launcher's whole geometry, its dynamic shared memory included
/// (kernels see it through `VMAF_DYNAMIC_SHARED_BYTES`; each block's buffer itself is the
/// kernel's fixed maximum).
pub(crate) fn launch_cfg(
    f: LaunchFn,
    name: &str,
    cfg: crate::gpu::LaunchConfig,
    warp: c_int,
    args: &[A<'_>],
) -> Result<(), String> {
    let (grid, block, shmem) = (cfg.grid, cfg.block, cfg.shared_mem_bytes as usize);
    let declared = declarations()
        .get(name)
        .ok_or_else(|| format!("no kernel {name} declared"))?;
    let passed: Vec<String> = args.iter().map(A::c_type).collect();
    let fits = |(d, p): (&String, &String)| d == p || (p == "*" && d.starts_with('*'));
    if declared.len() != passed.len() || !declared.iter().zip(&passed).all(fits) {
        return Err(format!(
            "{name} takes ({}), given ({})",
            declared.join(", "),
            passed.join(", ")
        ));
    }
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
                A::P(p, ..) => b[..size_of::<usize>()].copy_from_slice(&(p as usize).to_ne_bytes()),
                A::Null => {}
            }
            u64::from_ne_bytes(b)
        })
        .collect();
    let ptrs: Vec<*mut c_void> = slots.iter_mut().map(|s| (s as *mut u64).cast()).collect();
    let g = [grid.0, grid.1, grid.2];
    let b = [block.0, block.1, block.2];
    let cname = CString::new(name).expect("kernel name");
    let mut err = vec![0u8; 4096];
    // SAFETY: the argument values live in `slots` for the call and are the kernel's parameter
    // types (checked above); pointers are slices borrowed for the call (written ones
    // exclusively), and the model runs the whole launch before returning; the kernels keep
    // their accesses inside the slices their callers size for the geometry (each kernel's
    // contract, which the device launchers state as spans); `err` holds err.len() bytes.
    let rc = unsafe {
        f(
            cname.as_ptr(),
            g.as_ptr(),
            b.as_ptr(),
            warp,
            shmem,
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
        match $crate::gpu::hipcpu::model() {
            Some(f) => f,
            None => {
                println!("skipped: no C++ compiler");
                return;
            }
        }
    };
}
pub(crate) use model_or_skip;

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
                // the kernel writes out[rank * 4 .. rank * 4 + 4] for rank < 128.
                launch(
                    f,
                    "hipcpu_test_shuffles",
                    (1, 1, 1),
                    (n as u32, 1, 1),
                    warp,
                    &[A::I32(delta as i32), A::I32(width as i32), mptr(&mut out)],
                )
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
        // the kernel writes out[0] only.
        let e = launch(
            f,
            "hipcpu_test_early_return",
            (1, 1, 1),
            (128, 1, 1),
            warp,
            &[A::I32(100), mptr(&mut out)],
        )
        .unwrap_err();
        assert!(e.contains("every lane of the wave"), "{e}");
        // as above.
        launch(
            f,
            "hipcpu_test_early_return",
            (1, 1, 1),
            (128, 1, 1),
            warp,
            &[A::I32(128), mptr(&mut out)],
        )
        .unwrap();
        assert_eq!(out[0], 128);
        // 96 threads: whole waves at 32 lanes, one and a half at 64.
        let mut sums = [0u64; 3];
        // the kernel writes sums[blockIdx.x] for 3 blocks.
        let r = launch(
            f,
            "hipcpu_test_block_sum",
            (3, 1, 1),
            (96, 1, 1),
            warp,
            &[mptr(&mut sums)],
        );
        if warp == 32 {
            r.unwrap();
            assert_eq!(sums, [96 * 97 / 2; 3]);
        } else {
            let e = r.unwrap_err();
            assert!(e.contains("not a whole number of waves"), "{e}");
        }
        let mut out = [0u64; 64];
        // the kernel writes out[threadIdx.x] for 64 threads.
        let e = launch(
            f,
            "hipcpu_test_divergent_barrier",
            (1, 1, 1),
            (64, 1, 1),
            warp,
            &[mptr(&mut out)],
        )
        .unwrap_err();
        assert!(e.contains("different __syncthreads"), "{e}");
    }
}
