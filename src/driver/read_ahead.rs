//! Frames of one input read ahead of the scorer on threads of their own: one thread reading in
//! order through a channel, or several taking the next unread frame by position (see
//! [`FrameReaderAt`]) and handing frames over in order.

use std::collections::BTreeMap;
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use crate::error::{Error, Result};
use crate::gpu::Device;
use crate::io::{FrameReaderAt, VideoInfo, VideoReader};
use crate::picture::pool::PicturePool;
use crate::picture::{Picture, PictureData};

/// A frame as a reader hands it over: a picture, the end (`None`), or why it could not be read.
pub(super) type Frame = Result<Option<Picture>>;

pub(super) enum ReadAhead {
    Channel(Receiver<Frame>),
    Shared(Arc<Ordered>),
}

impl ReadAhead {
    /// Reads `reader` in order on one thread, `depth` frames ahead, at most `limit` frames.
    pub(super) fn start(
        mut reader: Box<dyn VideoReader>,
        depth: usize,
        limit: Option<usize>,
        pool: Option<Arc<PicturePool>>,
    ) -> std::io::Result<ReadAhead> {
        let info = reader.info();
        let read = move |get: &mut dyn FnMut() -> Result<PictureData>| reader.read_frame_with(get);
        let rx = spawn_reader(read, info, depth, limit, pool)?;
        Ok(ReadAhead::Channel(rx))
    }

    /// Reads `frames` on `threads` threads, each taking the next unread frame, `depth` frames
    /// ahead per thread.
    pub(super) fn start_at(
        frames: Arc<FrameReaderAt>,
        info: VideoInfo,
        threads: usize,
        depth: usize,
        limit: Option<usize>,
        pool: Option<Arc<PicturePool>>,
    ) -> std::io::Result<ReadAhead> {
        let limit = limit.unwrap_or(usize::MAX);
        let shared = Arc::new(Ordered::new(window(depth, threads), limit));
        let ahead = ReadAhead::Shared(shared.clone());
        for _ in 0..threads {
            let (frames, shared, pool) = (frames.clone(), shared.clone(), pool.clone());
            // On failure `ahead` drops: the readers started so far stop.
            std::thread::Builder::new()
                .name("vmaf-reader".into())
                .spawn(move || read_claimed(&frames, &shared, info, pool))?;
        }
        Ok(ahead)
    }

    /// The next frame; `None` after the last one.
    pub(super) fn next(&self) -> Frame {
        match self {
            // A closed channel means its reader stopped after an end, an error or the limit.
            ReadAhead::Channel(rx) => rx.recv().unwrap_or(Ok(None)),
            ReadAhead::Shared(o) => o.take(),
        }
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        if let ReadAhead::Shared(o) = self {
            o.close();
        }
    }
}

/// Frames the readers of one input may hold ahead of the scorer: `depth` each, plus the one
/// each is reading.
fn window(depth: usize, threads: usize) -> usize {
    (depth + 1) * threads
}

/// One positional reader's loop: claim the next frame, read it, hand it over.
fn read_claimed(
    frames: &FrameReaderAt,
    shared: &Ordered,
    info: VideoInfo,
    pool: Option<Arc<PicturePool>>,
) {
    let mut scratch = Vec::new();
    let mut times = ReaderTimes::default();
    let mut n = 0usize;
    loop {
        let t = Instant::now();
        let Some(k) = shared.claim() else { break };
        let claimed = Claimed {
            shared,
            k,
            put: false,
        };
        times.handing += t.elapsed().as_secs_f64();
        let t = Instant::now();
        let mut get = || times.fetch(&pool, info);
        let frame = frames.read(k as u64, &mut get, &mut scratch);
        times.reading += t.elapsed().as_secs_f64();
        n += usize::from(matches!(frame, Ok(Some(_))));
        claimed.put(frame.map(|f| f.map(Arc::new)));
    }
    times.log(n);
}

/// Where the reader threads of one input leave frames for the scorer. Each reader takes the
/// next frame nobody has taken, so a slow read delays only its own frame. (With frames dealt
/// out in turn, the other readers stopped once their few frames were ahead: in a 4K run on an
/// H100 host, readers stood for up to 227 ms beside 340 ms of reading.)
pub(super) struct Ordered {
    state: Mutex<OrderedState>,
    changed: Condvar,
    /// Frames that may be read ahead of the one the scorer takes next.
    window: usize,
    /// Frames to read at most (the frame count).
    limit: usize,
}

struct OrderedState {
    /// The next frame a reader takes.
    next_read: usize,
    /// The next frame the scorer takes.
    next_take: usize,
    /// Frames read and not yet taken (with the end or an error, at its position).
    ready: BTreeMap<usize, Frame>,
    /// The first position that holds an end or an error: nothing past it is read.
    end: usize,
    /// The scorer is gone: readers stop.
    closed: bool,
}

impl Ordered {
    fn new(window: usize, limit: usize) -> Ordered {
        Ordered {
            state: Mutex::new(OrderedState {
                next_read: 0,
                next_take: 0,
                ready: BTreeMap::new(),
                end: usize::MAX,
                closed: false,
            }),
            changed: Condvar::new(),
            window,
            limit,
        }
    }

    fn lock(&self) -> MutexGuard<'_, OrderedState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A reader's next frame position, once it is inside the window; `None` when done.
    fn claim(&self) -> Option<usize> {
        let mut st = self.lock();
        loop {
            if st.closed || st.next_read >= st.end.min(self.limit) {
                return None;
            }
            if st.next_read < st.next_take + self.window {
                st.next_read += 1;
                return Some(st.next_read - 1);
            }
            st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// A reader's frame `k`; an end or an error stops the reading past it.
    fn put(&self, k: usize, frame: Frame) {
        let mut st = self.lock();
        if !matches!(frame, Ok(Some(_))) {
            st.end = st.end.min(k + 1);
        }
        if !st.closed {
            st.ready.insert(k, frame);
        }
        drop(st);
        self.changed.notify_all();
    }

    /// The scorer's next frame, in order; `None` after the last one.
    fn take(&self) -> Frame {
        let mut st = self.lock();
        loop {
            let k = st.next_take;
            // Past the limit, or past an end or error already handed over.
            if k >= self.limit.min(st.end) {
                return Ok(None);
            }
            if let Some(frame) = st.ready.remove(&k) {
                st.next_take += 1;
                drop(st);
                self.changed.notify_all();
                return frame;
            }
            st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn close(&self) {
        let mut st = self.lock();
        st.closed = true;
        // Pictures go back to their pool now, not when the last reader ends.
        let ready = std::mem::take(&mut st.ready);
        drop(st);
        self.changed.notify_all();
        drop(ready);
    }
}

/// A frame a reader has taken and not yet handed over: should the reader unwind, the scorer
/// gets an error at its place instead of waiting for it forever.
struct Claimed<'a> {
    shared: &'a Ordered,
    k: usize,
    put: bool,
}

impl Claimed<'_> {
    fn put(mut self, frame: Frame) {
        self.put = true;
        self.shared.put(self.k, frame);
    }
}

impl Drop for Claimed<'_> {
    fn drop(&mut self) {
        if !self.put {
            let e = Error::inval(format!("frame {}: its reader stopped", self.k));
            self.shared.put(self.k, Err(e));
        }
    }
}

/// Reads with `read` (which takes a picture from its argument) on a new thread, `depth` frames
/// ahead, until an end, an error, `count` frames, or until the receiver is gone; pictures come
/// from `pool` if any.
fn spawn_reader(
    mut read: impl FnMut(&mut dyn FnMut() -> Result<PictureData>) -> Result<Option<PictureData>>
        + Send
        + 'static,
    info: VideoInfo,
    depth: usize,
    count: Option<usize>,
    pool: Option<Arc<PicturePool>>,
) -> std::io::Result<Receiver<Frame>> {
    let (tx, rx) = sync_channel(depth);
    // `Builder::spawn` reports a thread that cannot start instead of panicking.
    std::thread::Builder::new()
        .name("vmaf-reader".into())
        .spawn(move || {
            let mut n = 0usize;
            let mut times = ReaderTimes::default();
            while count.is_none_or(|c| n < c) {
                let t = Instant::now();
                let mut get = || times.fetch(&pool, info);
                let frame = read(&mut get).map(|f| f.map(Arc::new));
                times.reading += t.elapsed().as_secs_f64();
                let more = matches!(frame, Ok(Some(_)));
                let t = Instant::now();
                if tx.send(frame).is_err() || !more {
                    break;
                }
                times.handing += t.elapsed().as_secs_f64();
                n += 1;
            }
            times.log(n);
        })?;
    Ok(rx)
}

/// Where a reader's time goes, logged at debug level: reading, waiting for a free picture,
/// waiting for the scorer.
#[derive(Default)]
struct ReaderTimes {
    reading: f64,
    fetching: f64,
    handing: f64,
}

impl ReaderTimes {
    /// A picture to read into: from the pool, else a new one.
    fn fetch(&mut self, pool: &Option<Arc<PicturePool>>, info: VideoInfo) -> Result<PictureData> {
        let t = Instant::now();
        let pic = match pool {
            Some(p) => p.fetch(),
            None => PictureData::for_writing(info.pix_fmt, info.bpc, info.width, info.height),
        };
        self.fetching += t.elapsed().as_secs_f64();
        pic
    }

    fn log(&self, n: usize) {
        crate::log_debug!(
            "reader: {n} frames; {:.0} ms reading (of which {:.0} ms getting pictures), \
             {:.0} ms waiting for the scorer",
            self.reading * 1e3,
            self.fetching * 1e3,
            self.handing * 1e3
        );
    }
}

/// Threads reading one input by position: a quarter of the cores, 1 to 4, or
/// `VMAF_HIP_READ_THREADS` (1 to 16).
pub(super) fn readers_per_input() -> usize {
    crate::settings::get().read_threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get() / 4)
            .clamp(1, 4)
    })
}

/// Page-locked pictures for the frames of an input scored on `device`, so its uploads read the
/// luma planes in place (when their rows are back to back); `None` otherwise, or when memory
/// cannot be page-locked (then frames go to ordinary pictures, only the upload is slower).
pub(super) fn pinned_pool(
    device: Option<&Arc<Device>>,
    info: VideoInfo,
    workers: usize,
    depth: usize,
    readers: usize,
) -> Option<Arc<PicturePool>> {
    let dev = device?.clone();
    if !info.width.is_multiple_of(32) {
        return None;
    }
    // Pictures read ahead (the shared window), in flight on the workers, and one being scored.
    let cnt = window(depth, readers) + 1 + 2 * workers;
    let new = move || PictureData::for_writing(info.pix_fmt, info.bpc, info.width, info.height);
    let make = move || {
        // Memory that cannot be page-locked still serves, only its uploads are slower.
        crate::gpu::pin_picture(&dev, new()?).or_else(|e| {
            crate::log_debug!("an input picture could not be page-locked: {e}");
            new()
        })
    };
    // Made by the readers as they need them: they start reading at once and lock pages side
    // by side, instead of the scoring thread locking every picture before the first read.
    PicturePool::lazy(cnt, make)
        .map_err(|e| crate::log_debug!("page-locked input pictures unavailable: {e}"))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::picture::PixelFormat;

    fn frame(k: usize) -> Frame {
        let mut pic = PictureData::new(PixelFormat::Yuv400p, 8, 2, 2)?;
        pic.plane_u8_mut(0)[0] = k as u8;
        Ok(Some(Arc::new(pic)))
    }

    fn number(f: Frame) -> Option<u8> {
        f.unwrap().map(|p| p.plane_u8(0)[0])
    }

    /// Readers finishing out of order still hand frames over in order; none reads past the
    /// window, an end stops the reading past it, and the scorer sees that end once.
    #[test]
    fn shared_readers_hand_frames_over_in_order() {
        let o = Arc::new(Ordered::new(4, usize::MAX));
        let ks: Vec<usize> = (0..4).map(|_| o.claim().unwrap()).collect();
        assert_eq!(ks, [0, 1, 2, 3]);
        let waiting = {
            let o = o.clone();
            std::thread::spawn(move || o.claim())
        };
        for k in [3, 1, 2] {
            o.put(k, frame(k));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        // Frame 0 is not read yet: the window holds the fifth claim back.
        assert!(!waiting.is_finished());
        o.put(0, frame(0));
        for k in 0..4 {
            assert_eq!(number(o.take()), Some(k as u8));
        }
        assert_eq!(waiting.join().unwrap(), Some(4));
        o.put(4, Ok(None));
        assert_eq!(o.claim(), None);
        assert_eq!(number(o.take()), None);
        // A limit ends the claims and the takes.
        let o = Ordered::new(8, 1);
        assert_eq!(o.claim(), Some(0));
        assert_eq!(o.claim(), None);
        o.put(0, frame(0));
        assert_eq!(number(o.take()), Some(0));
        assert_eq!(number(o.take()), None);
    }

    /// An error is handed over at its frame; a reader that unwinds with a claimed frame leaves
    /// an error there rather than a scorer waiting forever; closing wakes waiting readers.
    #[test]
    fn shared_readers_report_errors_in_place() {
        let o = Arc::new(Ordered::new(4, usize::MAX));
        for k in 0..3 {
            assert_eq!(o.claim(), Some(k));
        }
        o.put(1, Err(Error::inval("bad frame")));
        o.put(0, frame(0));
        o.put(2, frame(2));
        // Nothing past the error is read.
        assert_eq!(o.claim(), None);
        assert_eq!(number(o.take()), Some(0));
        assert!(o.take().unwrap_err().to_string().contains("bad frame"));

        let o = Arc::new(Ordered::new(4, usize::MAX));
        let reader = {
            let o = o.clone();
            std::thread::spawn(move || {
                let k = o.claim().unwrap();
                let _claimed = Claimed {
                    shared: &o,
                    k,
                    put: false,
                };
                panic!("reader fails");
            })
        };
        assert!(reader.join().is_err());
        let e = o.take().unwrap_err().to_string();
        assert!(e.contains("frame 0: its reader stopped"), "{e}");

        let o = Arc::new(Ordered::new(1, usize::MAX));
        assert_eq!(o.claim(), Some(0));
        let waiting = {
            let o = o.clone();
            std::thread::spawn(move || o.claim())
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        o.close();
        assert_eq!(waiting.join().unwrap(), None);
    }

    /// The window sizes the pool of page-locked pictures too: depth 3 on 4 readers holds 16
    /// frames, and a depth of 0 still lets each reader hold the frame it reads.
    #[test]
    fn window_counts_each_readers_frame() {
        assert_eq!(window(3, 4), 16);
        assert_eq!(window(0, 2), 2);
    }
}
