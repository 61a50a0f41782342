//! Where the extracting threads' time goes, frame by frame, summed per extractor name (two
//! instances of one extractor, e.g. with different options, share a row): the numbers
//! that show what bounds a context's frame rate (the `fps` bench prints them, the flush logs
//! them at debug level).
//!
//! For each frame the thread that extracts it spends, per extractor, time queueing its GPU
//! work (host staging copies, uploads and launches), time computing on the CPU (extractors
//! without GPU work) and time in its finishing closure (the wait for the device, then the
//! host's share of the scores). The finishing closures run last queued first and the first
//! wait covers all of the frame's device work, so the device time shows up under the
//! extractor queued last; the others' `finish` is their host work alone.

#![forbid(unsafe_code)]

use std::sync::Mutex;
use std::time::Duration;

/// One extractor's summed times.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExtractorTimes {
    /// The extractor's name (`Extractor::name`).
    pub name: &'static str,
    /// Frames it ran on.
    pub frames: u64,
    /// Queueing its device work: host copies into staging memory, uploads, launches.
    pub queue: Duration,
    /// CPU extraction (extractors with no device work for the frame).
    pub cpu: Duration,
    /// Its finishing closure: waiting for the device and finishing the scores on the host.
    pub finish: Duration,
}

/// The summed times of a context's extractors, in the order they first ran.
#[derive(Debug, Default)]
pub(crate) struct FrameTimes {
    per: Mutex<Vec<ExtractorTimes>>,
}

/// Which of an extractor's times a duration adds to.
#[derive(Clone, Copy)]
pub(crate) enum Part {
    Queue = 0,
    Cpu = 1,
    Finish = 2,
}

/// One frame's times before they are added (so the lock is taken once per frame).
#[derive(Default)]
pub(crate) struct FrameSample {
    per: Vec<(&'static str, [Duration; 3])>,
}

impl FrameSample {
    pub(crate) fn with_capacity(n: usize) -> Self {
        FrameSample {
            per: Vec::with_capacity(n),
        }
    }

    /// Adds `d` to `name`'s time in `part`.
    pub(crate) fn add(&mut self, name: &'static str, part: Part, d: Duration) {
        let i = part as usize;
        match self.per.iter_mut().find(|(n, _)| *n == name) {
            Some((_, t)) => t[i] += d,
            None => {
                let mut t = [Duration::ZERO; 3];
                t[i] = d;
                self.per.push((name, t));
            }
        }
    }
}

impl FrameTimes {
    /// Adds one frame's times.
    pub(crate) fn add(&self, frame: FrameSample) {
        let mut per = self.per.lock().unwrap_or_else(|e| e.into_inner());
        for (name, [q, c, f]) in frame.per {
            let i = match per.iter().position(|e| e.name == name) {
                Some(i) => i,
                None => {
                    per.push(ExtractorTimes {
                        name,
                        ..ExtractorTimes::default()
                    });
                    per.len() - 1
                }
            };
            let e = &mut per[i];
            e.frames += 1;
            e.queue += q;
            e.cpu += c;
            e.finish += f;
        }
    }

    /// The sums so far.
    pub(crate) fn snapshot(&self) -> Vec<ExtractorTimes> {
        self.per.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// `times` as one line, microseconds per frame: `name queue/cpu/finish` for each extractor.
pub fn summary(times: &[ExtractorTimes]) -> String {
    let us = |d: Duration, n: u64| d.as_secs_f64() * 1e6 / n.max(1) as f64;
    times
        .iter()
        .map(|e| {
            format!(
                "{} {:.0}/{:.0}/{:.0}",
                e.name,
                us(e.queue, e.frames),
                us(e.cpu, e.frames),
                us(e.finish, e.frames)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_add_per_extractor_in_first_seen_order() {
        let t = FrameTimes::default();
        let ms = Duration::from_millis;
        let mut a = FrameSample::with_capacity(2);
        a.add("adm", Part::Queue, ms(2));
        a.add("adm", Part::Finish, ms(5));
        a.add("cambi", Part::Cpu, ms(3));
        t.add(a);
        let mut b = FrameSample::default();
        b.add("cambi", Part::Cpu, ms(1));
        b.add("adm", Part::Queue, ms(4));
        t.add(b);
        let s = t.snapshot();
        assert_eq!(s.len(), 2);
        assert_eq!(
            (s[0].name, s[0].frames, s[0].queue, s[0].cpu, s[0].finish),
            ("adm", 2, ms(6), ms(0), ms(5))
        );
        assert_eq!((s[1].name, s[1].frames, s[1].cpu), ("cambi", 2, ms(4)));
        assert_eq!(summary(&s), "adm 3000/0/2500, cambi 0/2000/0");
    }
}
