//! All-or-nothing output files: the text goes to a temporary file next to the destination,
//! which is renamed over it only once everything is written and synced. A failed write (full
//! disk, file size limit, I/O error) leaves no partial file, and an existing file untouched.
//!
//! Only a regular file that is the path's own is replaced that way. Anything else the path
//! names (a device, a FIFO, a descriptor link such as `/dev/stdout` or `/proc/self/fd/N`, a
//! file with other hard links) is opened and written in place, as libvmaf's `fopen` does, so
//! the text reaches whoever reads it and nothing but the file's contents changes.

use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, ErrorKind, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::error::{Error, Result};

/// Most symbolic links followed from an output path (Linux's own limit).
const MAX_LINKS: usize = 40;

/// Removes the temporary file unless the write went through.
struct TempFile {
    path: PathBuf,
    keep: bool,
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.keep {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// Rewrites an I/O error of `write` so it names the destination.
fn name_path(e: Error, path: &Path) -> Error {
    match e {
        Error::Io { source, .. } => Error::io(format!("cannot write {}", path.display()), source),
        other => other,
    }
}

/// Runs `write` on `file` through a buffer, then flushes and syncs.
fn fill(file: File, path: &Path, write: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    let io = |e| Error::io(format!("cannot write {}", path.display()), e);
    let mut w = BufWriter::new(file);
    write(&mut w).map_err(|e| name_path(e, path))?;
    let file = w.into_inner().map_err(|e| io(e.into_error()))?;
    // Some filesystems (NFS, quotas) only report a full disk here.
    file.sync_all().or_else(|e| match e.kind() {
        // Devices and pipes may not support syncing; there is nothing to lose there.
        ErrorKind::InvalidInput | ErrorKind::Unsupported => Ok(()),
        _ => Err(io(e)),
    })
}

/// Creates a fresh temporary file in `dir` for `name` (`.NAME.PID.N.tmp`).
fn create_temp(dir: &Path, name: &std::ffi::OsStr) -> std::io::Result<(File, PathBuf)> {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let mut last = None;
    for _ in 0..100 {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let mut file_name = std::ffi::OsString::from(".");
        file_name.push(name);
        file_name.push(format!(".{}.{n}.tmp", std::process::id()));
        let path = dir.join(file_name);
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(f) => return Ok((f, path)),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| ErrorKind::AlreadyExists.into()))
}

/// Writes a file at `path` through `write`, all or nothing.
///
/// * A new or existing regular file of its own (also at the end of symlinks, which are kept,
///   dangling ones included) is written as a temporary file in the directory of the link chain's
///   end and renamed over that end on success; on any failure the temporary file is removed and
///   `path` is as it was. An existing file keeps its permission bits, and must be writable, as
///   for a plain overwrite.
/// * Anything else (`/dev/null`, `/dev/stdout`, `/proc/self/fd/N`, a FIFO, a file with other
///   hard links) is opened and written in place, as there is no file of its own to replace.
/// * When the directory does not allow creating the temporary file but the existing file is
///   writable, the file is overwritten in place (not atomically), as a plain `fopen` would.
///
/// Errors name `path`: `cannot create PATH: ...` or `cannot write PATH: ...`.
pub fn write_atomic(path: &Path, write: impl FnOnce(&mut dyn Write) -> Result<()>) -> Result<()> {
    match prepare(path)? {
        None => {
            let f = File::create(path)
                .map_err(|e| Error::io(format!("cannot create {}", path.display()), e))?;
            fill(f, path, write)
        }
        Some((file, mut tmp, target)) => {
            fill(file, path, write)?;
            fs::rename(&tmp.path, &target)
                .map_err(|e| Error::io(format!("cannot write {}", path.display()), e))?;
            tmp.keep = true;
            Ok(())
        }
    }
}

/// What an output path names.
#[derive(Debug)]
enum Dest {
    /// Something to open and write in place.
    InPlace,
    /// A regular file of its own to replace (`existing`), or a new one to create, at `target`,
    /// the end of the path's symlinks.
    Replace {
        target: PathBuf,
        existing: Option<fs::Metadata>,
    },
}

/// Follows `path`'s symlinks one at a time (never `canonicalize`, which reads a descriptor link
/// such as `/proc/self/fd/1` as the name of its file, or as `pipe:[N]`) to what it names.
fn resolve(path: &Path) -> Dest {
    // Links in procfs (`/proc/self/fd/N`, reached through `/dev/stdout` or `/dev/fd/N`) name
    // open descriptions, not paths: whatever is behind them is written in place.
    let proc_dev = fs::metadata("/proc/self").ok().map(|m| m.dev());
    let mut p = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        let m = match fs::symlink_metadata(&p) {
            Ok(m) => m,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Dest::Replace {
                    target: p,
                    existing: None,
                }
            }
            // Let the open report it.
            Err(_) => return Dest::InPlace,
        };
        if Some(m.dev()) == proc_dev {
            return Dest::InPlace;
        }
        if m.file_type().is_symlink() {
            let Ok(text) = fs::read_link(&p) else {
                return Dest::InPlace;
            };
            // A relative link is relative to its own directory (`join` keeps an absolute one).
            p = match p.parent() {
                Some(dir) => dir.join(text),
                None => text,
            };
            continue;
        }
        // A file with other names keeps them only when written in place.
        if m.is_file() && m.nlink() == 1 {
            return Dest::Replace {
                target: p,
                existing: Some(m),
            };
        }
        return Dest::InPlace;
    }
    // A loop: the open reports it.
    Dest::InPlace
}

/// The temporary file for [`write_atomic`] and the path it replaces, or `None` to write
/// `path` in place.
fn prepare(path: &Path) -> Result<Option<(File, TempFile, PathBuf)>> {
    let create_err = |e| Error::io(format!("cannot create {}", path.display()), e);
    let (target, existing) = match resolve(path) {
        Dest::InPlace => return Ok(None),
        Dest::Replace { target, existing } => (target, existing),
    };
    if existing.is_some() {
        // Replacing a read-only file would succeed where overwriting it must not.
        OpenOptions::new()
            .write(true)
            .open(&target)
            .map_err(create_err)?;
    }
    let Some(name) = target.file_name() else {
        return Err(create_err(ErrorKind::InvalidInput.into()));
    };
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let (file, tmp_path) = match create_temp(dir, name) {
        Ok(t) => t,
        Err(e) if e.kind() == ErrorKind::PermissionDenied && existing.is_some() => return Ok(None),
        Err(e) => return Err(create_err(e)),
    };
    let tmp = TempFile {
        path: tmp_path,
        keep: false,
    };
    if let Some(m) = &existing {
        let _ = file.set_permissions(m.permissions());
    }
    Ok(Some((file, tmp, target)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("vmaf-atomic-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    fn entries(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn writes_new_and_replaces_existing() {
        let d = dir("ok");
        let p = d.join("out.json");
        write_atomic(&p, |w| w.write_all(b"one").map_err(|e| Error::io("x", e))).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"one");
        write_atomic(&p, |w| w.write_all(b"two!").map_err(|e| Error::io("x", e))).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two!");
        assert_eq!(entries(&d), ["out.json"]);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn failure_leaves_existing_file_and_no_temp() {
        let d = dir("fail");
        let p = d.join("out.xml");
        fs::write(&p, b"old").unwrap();
        let e = write_atomic(&p, |w| {
            w.write_all(&[b'x'; 100_000]).unwrap();
            Err(Error::io(
                "writing output",
                std::io::Error::from_raw_os_error(libc::ENOSPC),
            ))
        })
        .unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("cannot write {}", p.display())),
            "{msg}"
        );
        assert_eq!(e.errno(), -libc::ENOSPC);
        assert_eq!(fs::read(&p).unwrap(), b"old");
        assert_eq!(entries(&d), ["out.xml"]);

        // A failure on a new path leaves nothing.
        let q = d.join("new.xml");
        assert!(write_atomic(&q, |_| Err(Error::inval("no"))).is_err());
        assert_eq!(entries(&d), ["out.xml"]);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn symlinks_devices_and_bad_dirs() {
        let d = dir("links");
        let real = d.join("real.csv");
        fs::write(&real, b"old").unwrap();
        let link = d.join("link.csv");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        write_atomic(&link, |w| {
            w.write_all(b"new").map_err(|e| Error::io("x", e))
        })
        .unwrap();
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read(&real).unwrap(), b"new");
        assert_eq!(entries(&d), ["link.csv", "real.csv"]);

        // A device is written in place, never replaced.
        write_atomic(Path::new("/dev/null"), |w| {
            w.write_all(b"x").map_err(|e| Error::io("x", e))
        })
        .unwrap();
        assert!(!fs::metadata("/dev/null").unwrap().file_type().is_file());

        let missing = d.join("no/such/dir/out.json");
        let e = write_atomic(&missing, |_| Ok(())).unwrap_err().to_string();
        assert!(
            e.contains(&format!("cannot create {}", missing.display())),
            "{e}"
        );
        fs::remove_dir_all(&d).unwrap();
    }

    fn put(path: &Path, text: &'static [u8]) -> Result<()> {
        write_atomic(path, |w| w.write_all(text).map_err(|e| Error::io("x", e)))
    }

    #[test]
    fn dangling_and_relative_links_are_written_through() {
        let d = dir("dangling");
        std::fs::create_dir(d.join("sub")).unwrap();
        // link.json -> sub/rel.json -> target.json (relative to sub/), which does not exist.
        std::os::unix::fs::symlink("sub/rel.json", d.join("link.json")).unwrap();
        std::os::unix::fs::symlink("target.json", d.join("sub/rel.json")).unwrap();
        put(&d.join("link.json"), b"through").unwrap();
        for l in ["link.json", "sub/rel.json"] {
            assert!(fs::symlink_metadata(d.join(l))
                .unwrap()
                .file_type()
                .is_symlink());
        }
        assert_eq!(fs::read(d.join("sub/target.json")).unwrap(), b"through");
        assert_eq!(entries(&d.join("sub")), ["rel.json", "target.json"]);
        // A second write replaces the target, still through the links.
        put(&d.join("link.json"), b"again").unwrap();
        assert_eq!(fs::read(d.join("sub/target.json")).unwrap(), b"again");
        assert_eq!(entries(&d), ["link.json", "sub"]);
        // A loop is refused by the open, and creates nothing.
        std::os::unix::fs::symlink("loop_b", d.join("loop_a")).unwrap();
        std::os::unix::fs::symlink("loop_a", d.join("loop_b")).unwrap();
        let e = put(&d.join("loop_a"), b"x").unwrap_err().to_string();
        assert!(e.contains("cannot create"), "{e}");
        assert_eq!(entries(&d), ["link.json", "loop_a", "loop_b", "sub"]);
        fs::remove_dir_all(&d).unwrap();
    }

    /// `/proc/self/fd/N` (what `/dev/stdout` leads to) writes into the open file, even an
    /// unlinked one, and never creates or replaces a file by the link's text.
    #[test]
    fn descriptor_links_are_written_in_place() {
        use std::io::{Read, Seek};
        use std::os::fd::AsRawFd;
        let d = dir("fdlink");
        let named = d.join("named.json");
        let unlinked = d.join("unlinked.json");
        for (path, unlink) in [(&named, false), (&unlinked, true)] {
            let mut f = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(path)
                .unwrap();
            let ino = f.metadata().unwrap().ino();
            if unlink {
                fs::remove_file(path).unwrap();
            }
            let link = PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd()));
            put(&link, b"{\"all\": 1}").unwrap();
            let mut got = String::new();
            f.seek(std::io::SeekFrom::Start(0)).unwrap();
            f.read_to_string(&mut got).unwrap();
            assert_eq!(got, "{\"all\": 1}");
            assert_eq!(f.metadata().unwrap().ino(), ino);
            if !unlink {
                assert_eq!(
                    fs::metadata(path).unwrap().ino(),
                    ino,
                    "the file was replaced"
                );
            }
        }
        assert_eq!(entries(&d), ["named.json"]);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn fifos_sockets_and_hard_links_are_not_replaced() {
        let d = dir("special");
        // A FIFO: written in place for its reader.
        let fifo = d.join("fifo");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || fs::read(fifo).unwrap())
        };
        put(&fifo, b"piped").unwrap();
        assert_eq!(reader.join().unwrap(), b"piped");
        assert!(!fs::symlink_metadata(&fifo).unwrap().is_file());
        // A socket cannot be opened: an error, and the socket stays.
        let sock = d.join("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let e = put(&sock, b"x").unwrap_err().to_string();
        assert!(
            e.contains(&format!("cannot create {}", sock.display())),
            "{e}"
        );
        use std::os::unix::fs::FileTypeExt;
        assert!(fs::symlink_metadata(&sock).unwrap().file_type().is_socket());
        // A file with two names: both see the new text.
        let a = d.join("a.json");
        let b = d.join("b.json");
        fs::write(&a, b"old").unwrap();
        fs::hard_link(&a, &b).unwrap();
        put(&a, b"new text").unwrap();
        assert_eq!(fs::read(&b).unwrap(), b"new text");
        assert_eq!(
            fs::metadata(&a).unwrap().ino(),
            fs::metadata(&b).unwrap().ino()
        );
        assert_eq!(entries(&d), ["a.json", "b.json", "fifo", "sock"]);
        fs::remove_dir_all(&d).unwrap();
    }
}
