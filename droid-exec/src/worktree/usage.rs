//! The disk a worktree uses (what `tasks list` and `doctor` show): the blocks of every entry of
//! its directory, counted without following a symlink, bounded in entries and time (a checkout
//! with its build output can hold millions of files; the answer then says it is a lower bound).

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::no_follow::{self as nf, Kind};

/// Most entries counted for one worktree.
const MAX_ENTRIES: usize = 1_000_000;
/// Longest a count may take.
const MAX_TIME: Duration = Duration::from_secs(5);

/// The disk a directory uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskUse {
    /// Bytes of the blocks allocated to it.
    pub bytes: u64,
    /// Entries counted.
    pub entries: u64,
    /// The count stopped at a bound: `bytes` is a lower bound.
    pub partial: bool,
}

impl DiskUse {
    /// `bytes` for people: `412 KiB`, `3.1 GiB`, with `≥` when it is a lower bound.
    pub fn human(&self) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"];
        #[allow(clippy::cast_precision_loss)]
        let mut v = self.bytes as f64;
        let mut unit = 0;
        while v >= 1024.0 && unit + 1 < units.len() {
            v /= 1024.0;
            unit += 1;
        }
        let at_least = if self.partial { "≥" } else { "" };
        if unit == 0 || v >= 100.0 {
            format!("{at_least}{v:.0} {}", units[unit])
        } else {
            format!("{at_least}{v:.1} {}", units[unit])
        }
    }
}

/// The disk `dir` uses (nothing when it is missing).
pub(crate) fn disk_use(dir: &Path) -> DiskUse {
    let mut out = DiskUse::default();
    let Ok(fd) = nix::fcntl::open(
        dir,
        nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    ) else {
        return out;
    };
    let until = Instant::now() + MAX_TIME;
    count(&fd, &mut out, until);
    out
}

fn count(dir: &OwnedFd, out: &mut DiskUse, until: Instant) {
    let Ok((names, more)) = nf::list(dir, MAX_ENTRIES) else {
        return;
    };
    if more {
        out.partial = true;
    }
    for name in names {
        if out.entries >= MAX_ENTRIES as u64 || Instant::now() >= until {
            out.partial = true;
            return;
        }
        let Ok(Some(st)) = nf::stat_at(dir, &name) else {
            continue;
        };
        out.entries += 1;
        out.bytes += u64::try_from(st.st_blocks).unwrap_or(0) * 512;
        if Kind::of(&st) == Kind::Dir
            && let Ok(sub) = nf::open_dir(dir, OsStr::new(&name))
        {
            count(&sub, out, until);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_for_people() {
        let at = |bytes, partial| DiskUse {
            bytes,
            entries: 1,
            partial,
        };
        assert_eq!(at(512, false).human(), "512 B");
        assert_eq!(at(4096, false).human(), "4.0 KiB");
        assert_eq!(at(3 << 30, true).human(), "≥3.0 GiB");
        assert_eq!(disk_use(Path::new("/nonexistent/x")), DiskUse::default());
    }
}
