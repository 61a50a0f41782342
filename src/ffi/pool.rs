//! Preallocated picture pools (`vmaf_preallocate_pictures` / `vmaf_fetch_preallocated_picture`).
//!
//! Pools live in a registry keyed by the context's address rather than inside the context, so
//! fetching (which may block, on any thread) never touches the `Context` while the owning thread
//! is inside `vmaf_read_pictures` with a mutable borrow of it. A fetched picture carries a
//! release hook holding the pool: when its last reference drops (the caller's unref, or the
//! library's after extraction) the buffer goes back to the free list and one waiter wakes.
//! `vmaf_close` closes the pool instead of waiting for outstanding pictures (upstream blocks):
//! blocked fetchers fail with -EINVAL and pictures still out are freed when released.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::error::{Error, Result};
use crate::picture::PictureData;

struct State {
    free: Vec<PictureData>,
    /// Pictures handed out and not yet returned.
    out: usize,
    closed: bool,
}

pub(crate) struct Pool {
    state: Mutex<State>,
    available: Condvar,
}

impl Pool {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Blocks until a picture is free; it comes back here when its last reference drops.
    pub(crate) fn fetch(self: &Arc<Self>) -> Result<PictureData> {
        let mut st = self.lock();
        loop {
            if st.closed {
                return Err(Error::inval("the picture pool was closed"));
            }
            if let Some(mut pic) = st.free.pop() {
                st.out += 1;
                let pool = Arc::clone(self);
                pic.set_release(move |pic| pool.give_back(pic));
                return Ok(pic);
            }
            st = self.available.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn give_back(&self, pic: PictureData) {
        let mut st = self.lock();
        st.out -= 1;
        if !st.closed {
            st.free.push(pic);
            self.available.notify_one();
        }
    }

    /// Frees the idle pictures and wakes blocked fetchers; returns how many are still out.
    fn close(&self) -> usize {
        let mut st = self.lock();
        st.closed = true;
        st.free.clear();
        self.available.notify_all();
        st.out
    }
}

/// Registered pools by context address.
static POOLS: Mutex<Vec<(usize, Arc<Pool>)>> = Mutex::new(Vec::new());

fn registry() -> MutexGuard<'static, Vec<(usize, Arc<Pool>)>> {
    POOLS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Allocates `cnt` pictures (at most [`crate::limits::MAX_POOL_PICTURES`]) for context `ctx`,
/// replacing (closing) a previous pool.
pub(crate) fn preallocate(
    ctx: usize,
    cnt: usize,
    make: impl Fn() -> Result<PictureData>,
) -> Result<()> {
    let max = crate::limits::MAX_POOL_PICTURES;
    if cnt > max {
        return Err(Error::inval(format!(
            "a pool of {cnt} pictures exceeds the limit of {max}"
        )));
    }
    let mut free = Vec::new();
    free.try_reserve_exact(cnt)
        .map_err(|_| Error::NoMem(format!("cannot allocate a pool of {cnt} pictures")))?;
    for i in 0..cnt {
        // On failure `free` drops here: the pictures made so far are freed, and an earlier pool
        // stays registered.
        let pic = make().map_err(|e| match e {
            Error::NoMem(m) => Error::NoMem(format!("picture {} of a pool of {cnt}: {m}", i + 1)),
            e => e,
        })?;
        free.push(pic);
    }
    let pool = Arc::new(Pool {
        state: Mutex::new(State {
            free,
            out: 0,
            closed: false,
        }),
        available: Condvar::new(),
    });
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

/// The pool of context `ctx`.
pub(crate) fn get(ctx: usize) -> Result<Arc<Pool>> {
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
    use crate::picture::PixelFormat;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn small() -> Result<PictureData> {
        PictureData::new(PixelFormat::Yuv400p, 8, 8, 8)
    }

    #[test]
    fn pool_size_limit_is_einval() {
        let made = AtomicUsize::new(0);
        let key = 0x5eed_0001;
        let e = preallocate(key, crate::limits::MAX_POOL_PICTURES + 1, || {
            made.fetch_add(1, Ordering::SeqCst);
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
        let e = preallocate(key, 5, || {
            if made.fetch_add(1, Ordering::SeqCst) == 3 {
                return Err(Error::NoMem("test".into()));
            }
            let mut p = small()?;
            let freed = freed.clone();
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
}
