//! File identity stamps, atomic replacement and timestamps.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::error::{Result, StoreError};
use super::failpoint;

/// What a file looked like: identity, size and timestamps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    /// Device id.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i64,
    /// Status-change time, nanoseconds since the epoch.
    pub ctime_ns: i64,
}

impl Stamp {
    /// The stamp of a file's metadata.
    pub fn of_metadata(m: &std::fs::Metadata) -> Stamp {
        Stamp {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
            ctime_ns: m.ctime() * 1_000_000_000 + m.ctime_nsec(),
        }
    }
}

/// The stamp of `path`, or `None` if it does not exist. A symbolic link is refused
/// (`ELOOP`): the store never reads or writes through one.
pub(crate) fn stamp(path: &Path) -> Result<Option<Stamp>> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(StoreError::io(
            "stat",
            path,
            std::io::Error::from_raw_os_error(libc::ELOOP),
        )),
        Ok(m) => Ok(Some(Stamp::of_metadata(&m))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::io("stat", path, e)),
    }
}

/// Opens a store file with `O_NOFOLLOW`: if `path` is a symbolic link the open fails
/// with `ELOOP` instead of reading or appending to whatever the link points at.
pub(crate) fn open_nofollow(path: &Path, options: &mut OpenOptions) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    options
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Makes a rename or creation in `dir` durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    failpoint::hit("dir.fsync").map_err(|e| StoreError::io("fsync directory", dir, e))?;
    open_nofollow(dir, OpenOptions::new().read(true))
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::io("fsync directory", dir, e))
}

/// Replaces `path` with `bytes` through a temporary file and a rename, so readers see
/// the old or the new content, never a mix. With `durable`, the temporary file is
/// synced before the rename and the directory after it.
pub(crate) fn replace_file(path: &Path, bytes: &[u8], durable: bool, point: &str) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{file_name}.tmp-{}", std::process::id()));
    let fail = |op| move |e| StoreError::io(op, path, e);
    let write = || -> std::io::Result<()> {
        failpoint::hit(&format!("{point}.write"))?;
        let mut f = open_nofollow(
            &tmp,
            OpenOptions::new().write(true).create(true).truncate(true),
        )?;
        f.write_all(bytes)?;
        if durable {
            failpoint::hit(&format!("{point}.fsync"))?;
            f.sync_all()?;
        }
        Ok(())
    };
    if let Err(e) = write() {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail("write temporary file for")(e));
    }
    failpoint::hit(&format!("{point}.rename")).map_err(fail("rename onto"))?;
    std::fs::rename(&tmp, path).map_err(fail("rename onto"))?;
    if durable {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Current time as RFC 3339 UTC with milliseconds, e.g. `2026-11-30T08:21:10.123Z`.
pub(crate) fn now_rfc3339() -> String {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = since.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60,
        since.subsec_millis()
    )
}

/// Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Time- and pid-derived bits for when the OS has no randomness to give.
pub(crate) fn random_fallback(salt: u64) -> u64 {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos() as u64;
    xxhash_rust::xxh3::xxh3_64(
        &[
            t.to_le_bytes(),
            u64::from(std::process::id()).to_le_bytes(),
            salt.to_le_bytes(),
        ]
        .concat(),
    )
}

/// A random 63-bit number (epochs, keys): epochs must never repeat, even after the
/// receipt that held the last one is lost.
pub(crate) fn random_u63() -> u64 {
    let mut buf = [0u8; 8];
    if getrandom::fill(&mut buf).is_err() {
        // No OS randomness: mix time and pid, still unique in practice.
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos() as u64;
        buf = (t ^ (u64::from(std::process::id()) << 32)).to_le_bytes();
    }
    u64::from_le_bytes(buf) >> 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_787), (2026, 11, 30));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        let now = now_rfc3339();
        assert_eq!(now.len(), 24);
        assert!(now.ends_with('Z'));
    }
}
