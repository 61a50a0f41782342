//! All-or-nothing output files: the text goes to a temporary file next to the destination,
//! which is renamed over it only once everything is written and synced. A failed write (full
//! disk, file size limit, I/O error) leaves no partial file, and an existing file untouched.

use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::error::{Error, Result};

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
/// * A new or existing regular file (also through a symlink, which is kept) is written as a
///   temporary file in the same directory and renamed over it on success; on any failure the
///   temporary file is removed and `path` is as it was. An existing file keeps its permission
///   bits, and must be writable, as for a plain overwrite.
/// * Anything else that exists there (`/dev/null`, `/dev/stdout`, a FIFO) is written in place,
///   as there is no file to replace.
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

/// The temporary file for [`write_atomic`] and the path it replaces, or `None` to write
/// `path` in place.
fn prepare(path: &Path) -> Result<Option<(File, TempFile, PathBuf)>> {
    let create_err = |e| Error::io(format!("cannot create {}", path.display()), e);
    let existing = match fs::metadata(path) {
        Ok(m) if !m.is_file() => return Ok(None),
        Ok(m) => Some(m),
        Err(_) => None,
    };
    // Write next to the file a symlink points at, so the link survives.
    let target = match &existing {
        Some(_) => fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
        None => path.to_path_buf(),
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
}
