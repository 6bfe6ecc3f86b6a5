//! A world for escape tests, run as the user the product really serves: not root, with a HOME
//! outside the system temp directory (a run may write `/tmp`, so a HOME there proves nothing).
//!
//! As root (CI), the world is a directory under `/home/droid-executor-tests/` owned by `nobody`
//! (uid and gid looked up in `/etc/passwd`, else 65534), and [`World::command`] starts a program
//! as that user through `setpriv --reuid --regid --clear-groups` (util-linux; the kernel drops
//! root's capabilities on the change of uid). Programs under a directory `nobody` cannot
//! traverse (a checkout under `/root`) are copied into the world first ([`World::reachable`]).
//! As any other user, the world is under `$HOME/.droid-executor-tests/` and programs run as that
//! user directly. [`World::as_root`] gives the same layout for the root variant of a test: under
//! `/home/droid-executor-tests/`, never the temp directory, wherever the checkout is.
//!
//! Each world's layout: `home/` (HOME, with the repository or anything else the test puts there)
//! and `bin/` (copies of programs). The whole directory is removed on drop.

use std::ffi::OsStr;
use std::io;
use std::os::unix::fs::MetadataExt as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Distinguishes worlds made by one process.
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Where worlds are made as root: outside the system temp directory, whatever `TMPDIR` says.
pub const ROOT_BASE: &str = "/home/droid-executor-tests";

/// Who a world's programs run as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    /// The user running the tests, root included.
    Me,
    /// Not root: `nobody` when the tests run as root, else the user running them.
    NonRoot,
}

/// See the module documentation.
#[derive(Debug)]
pub struct World {
    dir: PathBuf,
    /// The uid and gid programs run as, when not this process's own.
    switch_to: Option<(u32, u32)>,
}

/// The uid and gid of `nobody`, from `/etc/passwd`, else 65534.
fn nobody() -> (u32, u32) {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    passwd
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.first() == Some(&"nobody") && f.len() > 3)
                .then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))
                .flatten()
        })
        .unwrap_or((65534, 65534))
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Where tests put what a run must not write, outside the system temp directory wherever the
/// checkout is: [`ROOT_BASE`] as root, else `$HOME/.droid-executor-tests`.
///
/// # Panics
/// When HOME is not set and this process is not root.
pub fn outside_temp_base() -> PathBuf {
    if is_root() {
        return PathBuf::from(ROOT_BASE);
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| panic!("HOME is not set: the escape tests need a HOME outside /tmp"));
    PathBuf::from(home).join(".droid-executor-tests")
}

impl World {
    /// A world whose programs run as a non-root user (see the module documentation).
    ///
    /// # Errors
    /// When the directory cannot be made or given to the user.
    pub fn non_root(name: &str) -> io::Result<World> {
        Self::new(name, Who::NonRoot)
    }

    /// A world whose programs run as this process's user, laid out as [`World::non_root`]'s.
    ///
    /// # Errors
    /// When the directory cannot be made.
    pub fn as_root(name: &str) -> io::Result<World> {
        Self::new(name, Who::Me)
    }

    /// A world for `who`.
    ///
    /// # Errors
    /// When the directory cannot be made or given to the user.
    pub fn new(name: &str, who: Who) -> io::Result<World> {
        let base = outside_temp_base();
        std::fs::create_dir_all(&base)?;
        // others must traverse it to reach their own world inside
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755))?;
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = base.join(format!("{name}-{}-{nanos:x}-{n}", std::process::id()));
        std::fs::create_dir(&dir)?;
        std::fs::create_dir(dir.join("home"))?;
        std::fs::create_dir(dir.join("bin"))?;
        let switch_to = (who == Who::NonRoot && is_root()).then(nobody);
        if switch_to.is_some() && !on_path("setpriv") {
            return Err(io::Error::other(
                "setpriv not found: the escape tests run programs as another user with it: \
                 apt-get install util-linux",
            ));
        }
        let world = World { dir, switch_to };
        if let Some((uid, gid)) = switch_to {
            std::os::unix::fs::chown(&world.dir, Some(uid), Some(gid))?;
            std::fs::set_permissions(&world.dir, std::fs::Permissions::from_mode(0o755))?;
            world.give_all(&world.dir)?;
        }
        Ok(world)
    }

    /// The world's directory (HOME is `home/` in it).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// HOME.
    pub fn home(&self) -> PathBuf {
        self.dir.join("home")
    }

    /// Whether programs run as another user than this process's.
    pub fn switches_user(&self) -> bool {
        self.switch_to.is_some()
    }

    /// The uid programs run as.
    pub fn uid(&self) -> u32 {
        self.switch_to
            .map_or_else(|| nix::unistd::geteuid().as_raw(), |(u, _)| u)
    }

    /// Give `path` and everything under it to the world's user (files the test made as root).
    ///
    /// # Errors
    /// When an entry cannot be given.
    pub fn give_all(&self, path: &Path) -> io::Result<()> {
        let Some((uid, gid)) = self.switch_to else {
            return Ok(());
        };
        let mut stack = vec![path.to_path_buf()];
        while let Some(p) = stack.pop() {
            std::os::unix::fs::lchown(&p, Some(uid), Some(gid))?;
            let meta = std::fs::symlink_metadata(&p)?;
            if meta.is_dir() {
                for e in std::fs::read_dir(&p)? {
                    stack.push(e?.path());
                }
            }
        }
        Ok(())
    }

    /// `program` where the world's user can run it: in place when every directory on its way
    /// can be traversed by others, else a copy in `bin/`.
    ///
    /// # Errors
    /// When the copy fails.
    pub fn reachable(&self, program: &Path) -> io::Result<PathBuf> {
        if self.switch_to.is_none() || traversable(program) {
            return Ok(program.to_path_buf());
        }
        let name = program
            .file_name()
            .ok_or_else(|| io::Error::other("a program path without a name"))?;
        let to = self.dir.join("bin").join(name);
        if !to.exists() {
            std::fs::copy(program, &to)?;
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755))?;
        }
        Ok(to)
    }

    /// `program args…` as the world's user, with an empty environment (the caller adds its own).
    #[allow(clippy::disallowed_methods)] // the suites start the programs they test
    pub fn command(&self, program: &Path) -> tokio::process::Command {
        let mut cmd = match self.switch_to {
            Some((uid, gid)) => {
                let mut c = tokio::process::Command::new("setpriv");
                c.arg(format!("--reuid={uid}"))
                    .arg(format!("--regid={gid}"))
                    .arg("--clear-groups")
                    .arg("--")
                    .arg(program);
                c
            }
            None => tokio::process::Command::new(program),
        };
        cmd.env_clear().kill_on_drop(true);
        cmd
    }
}

/// Whether `program` is in a directory of `PATH`.
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// Whether others may traverse every directory on `path`'s way and read and run it.
fn traversable(path: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    if meta.mode() & 0o005 != 0o005 {
        return false;
    }
    path.ancestors()
        .skip(1)
        .filter(|a| !a.as_os_str().is_empty())
        .all(|a| std::fs::metadata(a).is_ok_and(|m| m.mode() & 0o001 != 0))
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `true` when `dir` lies under the system temp directory (where a run may write).
pub fn under_temp(dir: &Path) -> bool {
    let tmp = std::env::temp_dir();
    let tmp = tmp.canonicalize().unwrap_or(tmp);
    dir.starts_with(&tmp) || dir.starts_with(OsStr::new("/tmp"))
}
