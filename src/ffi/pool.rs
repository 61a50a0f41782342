//! Preallocated picture pools (`vmaf_preallocate_pictures` / `vmaf_fetch_preallocated_picture`).
//!
//! Pools live in a registry keyed by the context's address rather than inside the context, so
//! fetching (which may block, on any thread) never touches the `Context` while the owning thread
//! is inside `vmaf_read_pictures` with a mutable borrow of it. A fetched picture carries a
//! release hook holding the pool: when its last reference drops (the caller's unref, or the
//! library's after extraction) the buffer goes back to the free list and one waiter wakes.
//! `vmaf_close` closes the pool instead of waiting for outstanding pictures (upstream blocks):
//! blocked fetchers fail with -EINVAL and pictures still out are freed when released.
//! Pools lend three pictures beyond their size: see [`PicturePool`].

use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{Error, Result};
use crate::picture::pool::PicturePool;
use crate::picture::PictureData;

/// Registered pools by context address.
static POOLS: Mutex<Vec<(usize, Arc<PicturePool>)>> = Mutex::new(Vec::new());

fn registry() -> MutexGuard<'static, Vec<(usize, Arc<PicturePool>)>> {
    POOLS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Allocates `cnt` pictures (at most [`crate::limits::MAX_POOL_PICTURES`]) for context `ctx`,
/// replacing (closing) a previous pool.
pub(crate) fn preallocate(
    ctx: usize,
    cnt: usize,
    make: impl Fn() -> Result<PictureData> + Send + Sync + 'static,
) -> Result<()> {
    // On failure an earlier pool stays registered.
    let pool = PicturePool::new(cnt, make)?;
    let old = {
        let mut reg = registry();
        let old = reg
            .iter()
            .position(|(k, _)| *k == ctx)
            .map(|i| reg.remove(i).1);
        reg.push((ctx, pool));
        old
    };
    if let Some(old) = old {
        old.close();
    }
    Ok(())
}

/// An upstream-style pool of host pictures `make` makes for context `ctx`: with `dev` (the
/// context's first GPU), pictures are page-locked now, not at their first uploads on the
/// feeding thread (pictures that cannot be locked are uploaded through staging).
pub(crate) fn preallocate_host(
    ctx: usize,
    cnt: usize,
    dev: Option<Arc<crate::gpu::Device>>,
    make: impl Fn() -> Result<PictureData> + Send + Sync + 'static,
) -> Result<()> {
    match dev {
        Some(dev) => preallocate(ctx, cnt, move || {
            Ok(crate::gpu::pin_picture_if_worth(&dev, make()?))
        }),
        None => preallocate(ctx, cnt, make),
    }
}

/// The pool of context `ctx`.
pub(crate) fn get(ctx: usize) -> Result<Arc<PicturePool>> {
    registry()
        .iter()
        .find(|(k, _)| *k == ctx)
        .map(|(_, p)| Arc::clone(p))
        .ok_or_else(|| Error::inval("no preallocated pictures (call vmaf_preallocate_pictures)"))
}

/// Closes the pool of context `ctx`, if any; returns the number of pictures still out.
pub(crate) fn close(ctx: usize) -> usize {
    let pool = {
        let mut reg = registry();
        reg.iter()
            .position(|(k, _)| *k == ctx)
            .map(|i| reg.remove(i).1)
    };
    pool.map_or(0, |p| p.close())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::picture::pool::EXTRA;
    use crate::picture::PixelFormat;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn small() -> Result<PictureData> {
        PictureData::new(PixelFormat::Yuv400p, 8, 8, 8)
    }

    #[test]
    fn pool_size_limit_is_einval() {
        let made = Arc::new(AtomicUsize::new(0));
        let key = 0x5eed_0001;
        let m = made.clone();
        let e = preallocate(key, crate::limits::MAX_POOL_PICTURES + 1, move || {
            m.fetch_add(1, Ordering::SeqCst);
            small()
        })
        .unwrap_err();
        assert_eq!(e.errno(), -libc::EINVAL);
        assert!(e.to_string().contains("a pool of 1025 pictures"), "{e}");
        // Refused before allocating anything.
        assert_eq!(made.load(Ordering::SeqCst), 0);
        assert!(get(key).is_err());
    }

    #[test]
    fn failed_preallocation_frees_its_pictures_and_keeps_the_old_pool() {
        let key = 0x5eed_0002;
        preallocate(key, 2, small).unwrap();
        let freed = Arc::new(AtomicUsize::new(0));
        let made = AtomicUsize::new(0);
        let f = freed.clone();
        let e = preallocate(key, 5, move || {
            if made.fetch_add(1, Ordering::SeqCst) == 3 {
                return Err(Error::NoMem("test".into()));
            }
            let mut p = small()?;
            let freed = f.clone();
            p.set_release(move |_| {
                freed.fetch_add(1, Ordering::SeqCst);
            });
            Ok(p)
        })
        .unwrap_err();
        assert_eq!(e.errno(), -libc::ENOMEM);
        assert_eq!(
            e.to_string(),
            "out of memory: picture 4 of a pool of 5: test"
        );
        // The three pictures made before the failure are gone.
        assert_eq!(freed.load(Ordering::SeqCst), 3);
        // The earlier pool of two still serves.
        let pool = get(key).unwrap();
        let (a, b) = (pool.fetch().unwrap(), pool.fetch().unwrap());
        assert_eq!((a.w[0], b.h[0]), (8, 8));
        assert_eq!(close(key), 2);
    }

    /// A dry pool makes up to EXTRA more pictures, then blocks until one comes back.
    #[test]
    fn a_dry_pool_lends_two_more_then_waits() {
        let key = 0x5eed_0003;
        let made = Arc::new(AtomicUsize::new(0));
        let m = made.clone();
        preallocate(key, 2, move || {
            m.fetch_add(1, Ordering::SeqCst);
            small()
        })
        .unwrap();
        let pool = get(key).unwrap();
        let held: Vec<_> = (0..2 + EXTRA).map(|_| pool.fetch().unwrap()).collect();
        assert_eq!(made.load(Ordering::SeqCst), 2 + EXTRA);
        let (tx, rx) = std::sync::mpsc::channel();
        let p = pool.clone();
        let waiter = std::thread::spawn(move || tx.send(p.fetch().map(|pic| pic.w[0])).unwrap());
        assert!(rx
            .recv_timeout(std::time::Duration::from_millis(100))
            .is_err());
        drop(held);
        assert_eq!(rx.recv().unwrap().unwrap(), 8);
        waiter.join().unwrap();
        // Nothing more was made: the waiter got a returned picture.
        assert_eq!(made.load(Ordering::SeqCst), 2 + EXTRA);
        close(key);
    }
}
