//! Upper bounds on every size a caller or an input file chooses, and fallible allocation.
//!
//! libvmaf trusts these sizes and lets `malloc` fail; a Rust `Vec` that cannot allocate aborts
//! the whole host process instead. So each size that reaches an allocation is checked against a
//! documented bound (past it: [`Error::Invalid`], `-EINVAL`), and buffers that stay large within
//! the bound are allocated with `try_filled` (failure: [`Error::NoMem`], `-ENOMEM`, with the
//! process and the context still usable).

#![forbid(unsafe_code)]

use crate::error::{Error, Result};

/// Largest picture width or height, in luma samples (`vmaf_picture_alloc`,
/// `vmaf_preallocate_pictures`, raw and y4m input).
///
/// 65536 is 8.5 times the width of 8K UHD (7680) and 4 times 16K (15360), so no real video is
/// refused, while the largest picture (65536², 4:4:4, 16-bit: 24 GiB) keeps every size and byte
/// offset far from `usize` overflow and every row pitch in bytes (at most 128 KiB) inside a C
/// `ptrdiff_t` and a GPU kernel's 32-bit arguments.
pub const MAX_PICTURE_SIDE: usize = 1 << 16;

/// Frame indices must be below this (`vmaf_read_pictures`, `vmaf_import_feature_score`, the
/// feature collector).
///
/// Scores are stored in one vector per feature indexed by frame (16 bytes a slot), so an index
/// costs memory up to it even when the frames before it were never scored. 2^26 frames are
/// 12.9 days of 60 fps video (31 days at 25 fps), more than any single scoring run, and cap
/// one feature's vector at 1 GiB.
pub const MAX_FRAMES: usize = 1 << 26;

/// Most pictures in one preallocated pool (`vmaf_preallocate_pictures`,
/// `vmaf_hip_preallocate_pictures`).
///
/// A pool only has to cover the frames in flight (at most twice the worker threads plus the
/// ones the caller is filling); 1024 1080p 4:2:0 8-bit pictures already take 3 GiB.
pub const MAX_POOL_PICTURES: usize = 1024;

/// Most worker threads of one context (`VmafConfiguration.n_threads`, `vmaf --threads`).
///
/// Extraction scales to the machine's cores (the largest current hosts have a few hundred);
/// each thread reserves a 2 MiB stack, so 1024 threads already reserve 2 GiB of address space
/// and up to 2048 frames in flight.
pub const MAX_THREADS: usize = 1024;

/// Largest model file read (`vmaf_model_load_from_path`, `vmaf_model_collection_load_from_path`,
/// `vmaf -m path=`).
///
/// Upstream's largest model (a bootstrapped collection, `vmaf_b_v0.6.3.json`) is 400 KiB; 64 MiB
/// leaves room for any real model while a device (`/dev/zero`) or a mistaken multi-gigabyte
/// file is refused after reading at most that much.
pub const MAX_MODEL_FILE_BYTES: usize = 64 << 20;

/// A vector of `n` copies of `value`, or [`Error::NoMem`] naming `what` when the memory cannot
/// be had (instead of aborting the process as `vec![value; n]` does).
pub(crate) fn try_filled<T: Clone>(n: usize, value: T, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        Error::NoMem(format!(
            "{what}: cannot allocate {} bytes",
            n.saturating_mul(std::mem::size_of::<T>())
        ))
    })?;
    v.resize(n, value);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::{Config, Context};
    use crate::log::LogLevel;
    use crate::picture::{PictureData, PixelFormat};
    use std::sync::Arc;

    #[test]
    fn picture_side_limit_is_einval() {
        for (w, h) in [
            (MAX_PICTURE_SIDE + 1, 2),
            (2, MAX_PICTURE_SIDE + 1),
            (1, u32::MAX as usize),
        ] {
            let e = PictureData::new(PixelFormat::Yuv420p, 8, w, h).unwrap_err();
            assert_eq!(e.errno(), -libc::EINVAL, "{w}x{h}");
            assert!(e.to_string().contains(&format!("{w}x{h}")), "{e}");
        }
        // The limit itself is a valid size.
        let p = PictureData::new(PixelFormat::Yuv422p, 10, MAX_PICTURE_SIDE, 3).unwrap();
        assert_eq!((p.w, p.h), ([65536, 32768, 32768], [3, 3, 3]));
        assert_eq!(p.stride, [65536, 32768, 32768]);
        assert_eq!(p.plane_u16(2).len(), 32768 * 3);
        assert!(p.plane_u16(0).iter().all(|&v| v == 0));
    }

    #[test]
    fn thread_limit_is_einval() {
        for n in [MAX_THREADS as u32 + 1, 100_000, u32::MAX] {
            let e = Context::new(Config {
                log_level: LogLevel::None,
                n_threads: n,
                ..Config::default()
            })
            .err()
            .expect("too many threads accepted");
            assert_eq!(e.errno(), -libc::EINVAL, "{n}");
            assert!(
                e.to_string().contains(&format!("n_threads {n} exceeds")),
                "{e}"
            );
        }
        let ctx = Context::new(Config {
            log_level: LogLevel::None,
            n_threads: 2,
            ..Config::default()
        });
        assert!(ctx.is_ok());
    }

    #[test]
    fn frame_index_limit_is_einval() {
        let mut ctx = Context::new(Config {
            log_level: LogLevel::None,
            ..Config::default()
        })
        .unwrap();
        let pic = || Arc::new(PictureData::new(PixelFormat::Yuv420p, 8, 16, 16).unwrap());
        for index in [MAX_FRAMES, 4_000_000_000, usize::MAX] {
            let e = ctx.read_pictures(pic(), pic(), index).unwrap_err();
            assert_eq!(e.errno(), -libc::EINVAL, "{index}");
            let e = ctx.import_feature_score("x", 1.0, index).unwrap_err();
            assert_eq!(e.errno(), -libc::EINVAL, "{index}");
        }
        // The last allowed index works; the refused reads did not count as pictures.
        ctx.import_feature_score("x", 4.25, MAX_FRAMES - 1).unwrap();
        assert_eq!(
            ctx.feature_score_at_index("x", MAX_FRAMES - 1).unwrap(),
            4.25
        );
        ctx.read_pictures(pic(), pic(), MAX_FRAMES - 1).unwrap();
        ctx.flush().unwrap();
    }

    #[test]
    fn try_filled_fills_or_reports_nomem() {
        let v = try_filled(5, 7u16, "test").unwrap();
        assert_eq!(v, vec![7u16; 5]);
        // More than any address space: refused up front, not aborted.
        let e = try_filled(usize::MAX / 2, 0u64, "huge buffer").unwrap_err();
        assert_eq!(e.errno(), -libc::ENOMEM);
        assert!(e.to_string().contains("huge buffer"), "{e}");
    }
}
