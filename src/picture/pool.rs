//! A pool of pictures of one size: fetched, filled, handed to a context, and back in the pool
//! when the last reference drops (the release hook of a lent picture holds the pool).
//!
//! A pool lends up to [`EXTRA`] pictures beyond its size, made on demand when it runs dry: a
//! context keeps the last references a motion extractor looks back to as they are (no copy on
//! the feeding thread), and those must not starve a caller whose pool was sized for the frames
//! it feeds (a pool of two pictures still serves a caller with no worker threads).
//!
//! A lazy pool ([`PicturePool::lazy`]) makes its pictures on first demand instead of up front,
//! on the fetching threads: a reader starts at once, and several readers page-lock their
//! pictures side by side instead of one thread locking them all before the first read.

#![forbid(unsafe_code)]

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::error::{Error, Result};
use crate::picture::PictureData;

/// Pictures a pool may make beyond its size: the previous two references and the previous
/// distorted picture a context keeps.
pub const EXTRA: usize = 3;

/// Makes one picture of a pool.
type Make = Box<dyn Fn() -> Result<PictureData> + Send + Sync>;

struct State {
    free: Vec<PictureData>,
    /// Pictures of the pool's size not made yet (a lazy pool's).
    unmade: usize,
    /// Pictures handed out and not yet returned.
    out: usize,
    /// Pictures made beyond the pool's size (at most [`EXTRA`]).
    extra: usize,
    /// Time fetchers spent waiting for a picture (logged when the pool goes).
    waited: std::time::Duration,
    closed: bool,
}

/// Pictures of one size, lent out and taken back (see the module).
pub struct PicturePool {
    state: Mutex<State>,
    available: Condvar,
    make: Make,
}

impl PicturePool {
    /// A pool of `cnt` pictures from `make` (at most [`crate::limits::MAX_POOL_PICTURES`]),
    /// which also makes the extra ones.
    pub fn new(
        cnt: usize,
        make: impl Fn() -> Result<PictureData> + Send + Sync + 'static,
    ) -> Result<Arc<Self>> {
        let mut free = Self::free_list(cnt)?;
        for i in 0..cnt {
            // On failure `free` drops here: the pictures made so far are freed.
            let pic = make().map_err(|e| match e {
                Error::NoMem(m) => {
                    Error::NoMem(format!("picture {} of a pool of {cnt}: {m}", i + 1))
                }
                e => e,
            })?;
            free.push(pic);
        }
        Ok(Self::with(free, 0, make))
    }

    /// A pool of `cnt` pictures from `make`, each made by the fetch that first finds none free
    /// (at most [`crate::limits::MAX_POOL_PICTURES`]). A picture that cannot be made is the
    /// fetch's error (a later fetch tries again); past `cnt`, extra pictures behave as in
    /// [`PicturePool::new`]'s pools.
    pub fn lazy(
        cnt: usize,
        make: impl Fn() -> Result<PictureData> + Send + Sync + 'static,
    ) -> Result<Arc<Self>> {
        Ok(Self::with(Self::free_list(cnt)?, cnt, make))
    }

    /// Room for the `cnt` pictures of a pool, within the limit.
    fn free_list(cnt: usize) -> Result<Vec<PictureData>> {
        let max = crate::limits::MAX_POOL_PICTURES;
        if cnt > max {
            return Err(Error::inval(format!(
                "a pool of {cnt} pictures exceeds the limit of {max}"
            )));
        }
        let mut free = Vec::new();
        free.try_reserve_exact(cnt)
            .map_err(|_| Error::NoMem(format!("cannot allocate a pool of {cnt} pictures")))?;
        Ok(free)
    }

    fn with(
        free: Vec<PictureData>,
        unmade: usize,
        make: impl Fn() -> Result<PictureData> + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(PicturePool {
            state: Mutex::new(State {
                free,
                unmade,
                out: 0,
                extra: 0,
                waited: std::time::Duration::ZERO,
                closed: false,
            }),
            available: Condvar::new(),
            make: Box::new(make),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Blocks until a picture is free; it comes back here when its last reference drops.
    pub fn fetch(self: &Arc<Self>) -> Result<PictureData> {
        let mut st = self.lock();
        // After a failed extra picture this call only waits (no retry loop on a failing
        // allocation).
        let mut may_grow = true;
        loop {
            if st.closed {
                return Err(Error::inval("the picture pool was closed"));
            }
            if let Some(pic) = st.free.pop() {
                st.out += 1;
                return Ok(self.lend(pic));
            }
            // A lazy pool's own pictures first, then the extra ones.
            let own = st.unmade > 0;
            if may_grow && (own || st.extra < EXTRA) {
                if own {
                    st.unmade -= 1;
                } else {
                    st.extra += 1;
                }
                drop(st);
                let made = (self.make)();
                st = self.lock();
                match made {
                    Ok(mut pic) => {
                        if st.closed {
                            self.unmake(&mut st, own);
                            drop(st);
                            pic.unpin();
                            return Err(Error::inval("the picture pool was closed"));
                        }
                        st.out += 1;
                        return Ok(self.lend(pic));
                    }
                    Err(e) => {
                        crate::log_warn!("picture pool: a picture failed: {e}");
                        self.unmake(&mut st, own);
                        // A lazy pool's own picture is the fetch's error: the pictures out may
                        // all wait for this one's frame (a reader ahead of the others), so
                        // none might come back. An extra one is not fatal: the caller waits
                        // for a picture to come back instead.
                        if own || (st.free.is_empty() && st.out == 0) {
                            return Err(e);
                        }
                        may_grow = false;
                        continue;
                    }
                }
            }
            let t = std::time::Instant::now();
            st = self.available.wait(st).unwrap_or_else(|e| e.into_inner());
            st.waited += t.elapsed();
        }
    }

    /// Takes back the count of a picture that was not made after all; a fetcher waiting
    /// because every count was taken may try it.
    fn unmake(&self, st: &mut State, own: bool) {
        if own {
            st.unmade += 1;
        } else {
            st.extra -= 1;
        }
        self.available.notify_one();
    }

    fn lend(self: &Arc<Self>, mut pic: PictureData) -> PictureData {
        // A pool's pictures are made to be lent again and again: on a GPU the buffer is page-
        // locked at its first upload and keeps the lock in the pool (`PictureData::
        // pin_shared`), so an upstream-style pool uploads without staging copies, like a
        // HOST_PINNED one. The pool unlocks its pictures when it closes.
        pic.reused = true;
        let pool = Arc::clone(self);
        pic.set_release(move |pic| pool.give_back(pic));
        pic
    }

    fn give_back(&self, mut pic: PictureData) {
        let mut st = self.lock();
        st.out -= 1;
        if !st.closed {
            st.free.push(pic);
            self.available.notify_one();
            return;
        }
        drop(st);
        // The pool's page-locking goes with the pool (unlocking waits for copies: not under
        // the lock); the buffer may serve later pictures.
        pic.unpin();
    }

    /// Frees the idle pictures and wakes blocked fetchers; returns how many are still out.
    pub fn close(&self) -> usize {
        let mut st = self.lock();
        st.closed = true;
        let idle = std::mem::take(&mut st.free);
        self.available.notify_all();
        let out = st.out;
        drop(st);
        unpin_all(idle);
        out
    }
}

/// Releases the page-locking of a pool's pictures before they go.
fn unpin_all(pics: Vec<PictureData>) {
    for mut p in pics {
        p.unpin();
    }
}

impl Drop for PicturePool {
    fn drop(&mut self) {
        let idle = std::mem::take(&mut self.lock().free);
        let kept = idle.len();
        unpin_all(idle);
        let st = self.lock();
        crate::log_debug!(
            "picture pool: {} pictures ({} made beyond its size); fetches waited {:.1} ms",
            kept + st.out,
            st.extra,
            st.waited.as_secs_f64() * 1e3
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::picture::PixelFormat;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A picture maker whose first call makes an 8x8 picture and every later call fails with
    /// out-of-memory; `made` counts the calls.
    fn once_then_nomem(
        made: &Arc<AtomicUsize>,
    ) -> impl Fn() -> Result<PictureData> + Send + Sync + 'static {
        let m = made.clone();
        move || {
            if m.fetch_add(1, Ordering::SeqCst) == 0 {
                PictureData::new(PixelFormat::Yuv400p, 8, 8, 8)
            } else {
                Err(Error::NoMem("only one picture".into()))
            }
        }
    }

    /// A failing extra picture is tried once per fetch: the fetch then waits for a picture to
    /// come back (or fails at once when none is out).
    #[test]
    fn a_failing_extra_picture_waits_instead_of_spinning() {
        let made = Arc::new(AtomicUsize::new(0));
        let pool = PicturePool::new(1, once_then_nomem(&made)).unwrap();
        let held = pool.fetch().unwrap();
        let p = pool.clone();
        let waiter = std::thread::spawn(move || p.fetch().map(|pic| pic.w[0]));
        std::thread::sleep(std::time::Duration::from_millis(100));
        // One try by the waiter, not a loop of them.
        assert_eq!(made.load(Ordering::SeqCst), 2);
        drop(held);
        assert_eq!(waiter.join().unwrap().unwrap(), 8);
        // With nothing out, a failing extra picture is the fetch's error.
        let dry = PicturePool::new(0, || Err(Error::NoMem("none".into()))).unwrap();
        assert_eq!(dry.fetch().unwrap_err().errno(), -libc::ENOMEM);
    }

    /// A lent picture's buffer may be page-locked (it will be lent again), keeps the lock
    /// while it waits in the pool, and is unlocked when the pool closes.
    #[test]
    fn lent_pictures_are_locked_once_and_unlocked_at_close() {
        use crate::picture::tests::FakePin;
        let (locks, unlocks) = (AtomicUsize::new(0), Arc::new(AtomicUsize::new(0)));
        let lock = |_: *const u8, bytes: usize| -> Result<Box<dyn crate::picture::HostPin>> {
            assert_eq!(bytes, 1024 * 1024);
            locks.fetch_add(1, Ordering::SeqCst);
            Ok(Box::new(FakePin(unlocks.clone())))
        };
        let pool =
            PicturePool::new(1, || PictureData::new(PixelFormat::Yuv400p, 8, 1024, 1024)).unwrap();
        for _ in 0..3 {
            let pic = pool.fetch().unwrap();
            assert!(pic.pin_shared(lock).is_some());
        }
        assert_eq!(locks.load(Ordering::SeqCst), 1, "locked once");
        assert_eq!(unlocks.load(Ordering::SeqCst), 0, "kept in the pool");
        assert_eq!(pool.close(), 0);
        assert_eq!(unlocks.load(Ordering::SeqCst), 1, "unlocked at close");
    }

    /// A lazy pool makes nothing up front, one picture per fetch that finds none free up to
    /// its size and then its extra ones, and after that waits for a picture to come back.
    #[test]
    fn a_lazy_pool_makes_pictures_on_demand() {
        let made = Arc::new(AtomicUsize::new(0));
        let m = made.clone();
        let pool = PicturePool::lazy(2, move || {
            m.fetch_add(1, Ordering::SeqCst);
            PictureData::new(PixelFormat::Yuv400p, 8, 8, 8)
        })
        .unwrap();
        assert_eq!(made.load(Ordering::SeqCst), 0);
        let first = pool.fetch().unwrap();
        assert_eq!(made.load(Ordering::SeqCst), 1);
        drop(first);
        // The returned picture serves the next fetch.
        let mut held = vec![pool.fetch().unwrap()];
        assert_eq!(made.load(Ordering::SeqCst), 1);
        for n in 2..=2 + EXTRA {
            held.push(pool.fetch().unwrap());
            assert_eq!(made.load(Ordering::SeqCst), n);
        }
        let p = pool.clone();
        let waiter = std::thread::spawn(move || p.fetch().map(|pic| pic.w[0]));
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert_eq!(made.load(Ordering::SeqCst), 2 + EXTRA);
        held.pop();
        assert_eq!(waiter.join().unwrap().unwrap(), 8);
        assert_eq!(made.load(Ordering::SeqCst), 2 + EXTRA);
        // A picture that cannot be made with nothing out is the fetch's error; the count it
        // took is given back, so a later fetch tries again.
        let fails = Arc::new(AtomicUsize::new(0));
        let f = fails.clone();
        let dry = PicturePool::lazy(1, move || {
            f.fetch_add(1, Ordering::SeqCst);
            Err(Error::NoMem("none".into()))
        })
        .unwrap();
        assert_eq!(dry.fetch().unwrap_err().errno(), -libc::ENOMEM);
        assert_eq!(dry.fetch().unwrap_err().errno(), -libc::ENOMEM);
        assert_eq!(fails.load(Ordering::SeqCst), 2);
        // With a picture out, a picture that cannot be made is still the fetch's error, not a
        // wait: the picture out may never come back before this fetch's frame is read.
        let made = Arc::new(AtomicUsize::new(0));
        let once = PicturePool::lazy(2, once_then_nomem(&made)).unwrap();
        let _held = once.fetch().unwrap();
        assert_eq!(once.fetch().unwrap_err().errno(), -libc::ENOMEM);
        assert!(PicturePool::lazy(crate::limits::MAX_POOL_PICTURES + 1, || {
            PictureData::new(PixelFormat::Yuv400p, 8, 8, 8)
        })
        .is_err());
    }
}
