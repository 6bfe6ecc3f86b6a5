//! A child started straight into a cgroup leaf: `clone3(CLONE_INTO_CGROUP | CLONE_PIDFD)`.
//!
//! Why not `fork` then a write to the leaf's `cgroup.procs`: moving a process between cgroups
//! takes the kernel's cgroup threadgroup lock for writing, which waits for an RCU grace period
//! unless another move happened moments before. Measured on Linux 6.18 (2 cores): 1.7 ms per
//! move when moves come back to back, 7–10 ms each once runs are 20–50 ms apart, which is how
//! real runs come. A child born in the leaf takes that lock for reading only.
//!
//! Everything the child needs (argv, environment, directory, descriptors, the Landlock ruleset)
//! is prepared here, in the parent, before the clone: between the clone and `execve` the child
//! runs only system calls, as between `fork` and `exec` ([`crate::process::spawn`]'s rules). Errors
//! of the child's set-up or of `execve` reach the parent through a close-on-exec pipe, as the
//! standard library's spawn does. The child is its own process group's leader, its stdin is
//! `/dev/null` (or a file), its stdout and stderr pipes, its environment exactly the caller's, a
//! parent-death signal (SIGKILL), SIGPIPE back to its default and no signal blocked.
//!
//! [`LeafChild`] is waited for through its pidfd (never `waitpid(-1)`), and SIGKILLed when
//! dropped unwaited, then reaped with no task and no runtime ([`crate::process::spawn::orphans`]).

use std::ffi::{CString, OsStr};
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::ExitStatusExt as _;
use std::process::ExitStatus;

use nix::sys::signal::{SigSet, SigmaskHow, Signal};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus};
use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;

use crate::error::EngineError;
use crate::process::sandbox::Confinement;
use crate::process::spawn_spec::SpawnSpec;

/// `clone3`'s flags (`linux/sched.h`).
const CLONE_PIDFD: u64 = 0x1000;
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// `struct clone_args` (`linux/sched.h`, `CLONE_ARGS_SIZE_VER2`): the same on every
/// architecture.
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// A child started in a cgroup leaf (see the module docs).
#[derive(Debug)]
pub(crate) struct LeafChild {
    pid: u32,
    pidfd: Option<AsyncFd<OwnedFd>>,
    status: Option<ExitStatus>,
    /// The child's stdout.
    pub(crate) stdout: Option<pipe::Receiver>,
    /// The child's stderr.
    pub(crate) stderr: Option<pipe::Receiver>,
}

impl LeafChild {
    /// The child's pid (`None` once it has been waited for, as for a tokio child).
    pub(crate) fn id(&self) -> Option<u32> {
        self.status.is_none().then_some(self.pid)
    }

    /// Its exit status, if it has exited (reaped then).
    ///
    /// # Errors
    /// When `waitid` fails.
    pub(crate) fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        if let Some(status) = self.status {
            return Ok(Some(status));
        }
        let Some(fd) = &self.pidfd else {
            return Ok(None);
        };
        match nix::sys::wait::waitid(
            Id::PIDFd(fd.get_ref().as_fd()),
            WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG,
        ) {
            Ok(WaitStatus::Exited(_, code)) => Ok(Some(self.exited(code << 8))),
            Ok(WaitStatus::Signaled(_, signal, core)) => Ok(Some(
                self.exited(signal as i32 | if core { 0x80 } else { 0 }),
            )),
            Ok(_) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    fn exited(&mut self, raw: i32) -> ExitStatus {
        let status = ExitStatus::from_raw(raw);
        self.status = Some(status);
        self.pidfd = None;
        status
    }

    /// Wait for it to exit, and reap it.
    ///
    /// # Errors
    /// When the pidfd cannot be polled or `waitid` fails.
    pub(crate) async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        loop {
            if let Some(status) = self.try_wait()? {
                return Ok(status);
            }
            let Some(fd) = &self.pidfd else {
                return Err(std::io::Error::other("the child's pidfd is gone"));
            };
            // a pidfd is readable once its process has exited
            fd.readable().await?.clear_ready();
        }
    }
}

impl Drop for LeafChild {
    fn drop(&mut self) {
        if self.status.is_some() {
            return;
        }
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(self.pid).unwrap_or(i32::MAX)),
            Signal::SIGKILL,
        );
        // reaped without a task: a runtime shutting down drops a task spawned now at once
        // (see `orphans`)
        if let Some(pidfd) = self.pidfd.take() {
            crate::process::spawn::orphans::reap(pidfd.into_inner());
        }
    }
}

/// Why [`spawn_into`] started nothing.
#[derive(Debug)]
pub(crate) enum IntoError {
    /// The kernel refused the clone itself (no `clone3`, no `CLONE_INTO_CGROUP`, no right to
    /// create processes in that cgroup): no run of this process can use a leaf.
    Refused(std::io::Error),
    /// The program could not be started (not found, the child's set-up or `execve` failed).
    Spawn(EngineError),
}

/// Start `spec` in the cgroup whose directory `cgroup` is open, confined by `confine`.
///
/// # Errors
/// [`IntoError::Refused`] when `clone3` is refused; [`IntoError::Spawn`] when the program is
/// not found, or the child's set-up or `execve` fails (the child's errno).
pub(crate) fn spawn_into(
    spec: &SpawnSpec,
    confine: Option<&Confinement>,
    cgroup: BorrowedFd<'_>,
) -> Result<LeafChild, IntoError> {
    spawn_into_inner(spec, confine, cgroup).map_err(|e| match e {
        Ok(refused) => IntoError::Refused(refused),
        Err(spawn) => IntoError::Spawn(spawn),
    })
}

/// [`spawn_into`], its error `Ok` when the clone itself was refused.
fn spawn_into_inner(
    spec: &SpawnSpec,
    confine: Option<&Confinement>,
    cgroup: BorrowedFd<'_>,
) -> Result<LeafChild, Result<std::io::Error, EngineError>> {
    let failed = |source| {
        Err(EngineError::Spawn {
            program: spec.program.display().to_string(),
            source,
        })
    };
    let program = resolve(spec).ok_or_else(|| {
        failed(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no such program",
        ))
    })?;
    // the ruleset's descriptor: the child only enforces it (a ruleset the kernel would not
    // enforce fails the spawn: a run that was to be confined never runs unconfined)
    let ruleset: Option<OwnedFd> = match confine.map(Confinement::ruleset).transpose() {
        Ok(None) => None,
        Ok(Some(rules)) => Some(
            Option::<OwnedFd>::from(rules)
                .ok_or_else(|| failed(std::io::Error::from_raw_os_error(nix::libc::ENOSYS)))?,
        ),
        Err(e) => return Err(failed(e)),
    };
    let c = |s: &OsStr| CString::new(s.as_bytes()).map_err(|e| failed(e.into()));
    let path = c(program.as_os_str())?;
    let mut argv = vec![c(spec.program.as_os_str())?];
    for a in &spec.args {
        argv.push(c(a)?);
    }
    let mut envp = Vec::with_capacity(spec.env.len());
    for (k, v) in &spec.env {
        let mut kv = k.as_bytes().to_vec();
        kv.push(b'=');
        kv.extend_from_slice(v.as_bytes());
        envp.push(CString::new(kv).map_err(|e| failed(e.into()))?);
    }
    let cwd = c(spec.cwd.as_os_str())?;
    let argv_ptrs: Vec<*const nix::libc::c_char> = argv
        .iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let envp_ptrs: Vec<*const nix::libc::c_char> = envp
        .iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let stdin: OwnedFd = match &spec.stdin_file {
        Some(file) => std::fs::File::open(file).map_err(failed)?.into(),
        None => std::fs::File::open("/dev/null").map_err(failed)?.into(),
    };
    let cloexec = nix::fcntl::OFlag::O_CLOEXEC;
    let io = |e: nix::Error| failed(e.into());
    let (out_r, out_w) = nix::unistd::pipe2(cloexec).map_err(io)?;
    let (err_r, err_w) = nix::unistd::pipe2(cloexec).map_err(io)?;
    let (report_r, report_w) = nix::unistd::pipe2(cloexec).map_err(io)?;
    let child = Prepared {
        path: &path,
        argv: &argv_ptrs,
        envp: &envp_ptrs,
        cwd: &cwd,
        stdio: [stdin.as_raw_fd(), out_w.as_raw_fd(), err_w.as_raw_fd()],
        report: report_w.as_raw_fd(),
        ruleset: ruleset.as_ref().map_or(-1, |fd| fd.as_raw_fd()),
        parent: nix::unistd::getpid().as_raw(),
        rlimits: spec.rlimits,
    };
    let mut pidfd: RawFd = -1;
    let cgroup = u64::try_from(cgroup.as_raw_fd()).map_err(|e| failed(std::io::Error::other(e)))?;
    let ret = clone_into(&child, cgroup, &mut pidfd);
    // the parent: the child's ends of the pipes and its stdin are not ours to keep open
    drop((stdin, out_w, err_w, report_w));
    drop(ruleset);
    if ret < 0 {
        return Err(Ok(std::io::Error::from_raw_os_error(
            i32::try_from(-ret).unwrap_or(nix::libc::EINVAL),
        )));
    }
    let pid = u32::try_from(ret).map_err(|e| failed(std::io::Error::other(e)))?;
    #[allow(unsafe_code)]
    // SAFETY: CLONE_PIDFD made the kernel store a new descriptor, owned by nobody else, there.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    // end-of-file once the child executed (close-on-exec), else its errno
    let mut report = [0u8; 4];
    let mut got = 0;
    while got < report.len() {
        match nix::unistd::read(&report_r, &mut report[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(io(e)),
        }
    }
    if got == report.len() {
        // it exited: reap it before saying why
        let _ = nix::sys::wait::waitid(Id::PIDFd(pidfd.as_fd()), WaitPidFlag::WEXITED);
        return Err(failed(std::io::Error::from_raw_os_error(
            i32::from_ne_bytes(report),
        )));
    }
    let receiver = |fd: OwnedFd| pipe::Receiver::from_owned_fd(fd).map_err(failed);
    #[allow(unsafe_code)]
    // SAFETY: the `OwnedFd` owns the pidfd, which stays open as long as the `AsyncFd` holds it.
    let pidfd = unsafe { AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE) }
        .map_err(|e| failed(std::io::Error::other(e.to_string())))?;
    Ok(LeafChild {
        pid,
        pidfd: Some(pidfd),
        status: None,
        stdout: Some(receiver(out_r)?),
        stderr: Some(receiver(err_r)?),
    })
}

/// The program to execute: `spec.program` when it names a path, else the first match on the
/// child's own `PATH`.
fn resolve(spec: &SpawnSpec) -> Option<std::path::PathBuf> {
    let path = spec
        .env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_os_str());
    crate::process::spawn_spec::resolve_program(&spec.program, path)
}

/// What the child needs between the clone and `execve`, all prepared by the parent.
struct Prepared<'a> {
    path: &'a CString,
    argv: &'a [*const nix::libc::c_char],
    envp: &'a [*const nix::libc::c_char],
    cwd: &'a CString,
    /// The descriptors that become 0, 1 and 2.
    stdio: [RawFd; 3],
    /// Where a failure's errno goes (close-on-exec).
    report: RawFd,
    /// The Landlock ruleset to enforce, or -1.
    ruleset: RawFd,
    /// This process, the child's parent.
    parent: nix::libc::pid_t,
    /// The limits to set before `execve`.
    rlimits: crate::process::limits::Rlimits,
}

/// The child's stack when it shares this process's memory (see [`clone_into`]).
const CHILD_STACK: usize = 64 * 1024;

/// `clone3(CLONE_INTO_CGROUP | CLONE_PIDFD)` running `child` in the new process. Returns the
/// child's pid, or `-errno`; the pidfd is stored in `pidfd`.
///
/// On x86-64 the child shares this process's memory and runs on a stack of its own while the
/// calling thread waits (`CLONE_VM | CLONE_VFORK`, as `posix_spawn` does): no page table is
/// copied, and `execve` has nothing to tear down, which makes a spawn from a large, threaded
/// front-end several times cheaper. All signals are blocked in the calling thread meanwhile,
/// so no handler of ours can run on the child's stack; the child resets every handler before
/// it unblocks them. Elsewhere the child is a copy of this process (fork semantics).
fn clone_into(child: &Prepared<'_>, cgroup: u64, pidfd: &mut RawFd) -> i64 {
    let mut args = CloneArgs {
        flags: CLONE_PIDFD | CLONE_INTO_CGROUP,
        pidfd: std::ptr::from_mut(pidfd) as u64,
        exit_signal: Signal::SIGCHLD as u64,
        cgroup,
        ..CloneArgs::default()
    };
    let mut all = SigSet::all();
    let mut old = SigSet::empty();
    let _ = nix::sys::signal::pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&all), Some(&mut old));
    let ret = clone_raw(&mut args, child);
    let _ = nix::sys::signal::pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None);
    all.clear();
    ret
}

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
fn clone_raw(args: &mut CloneArgs, child: &Prepared<'_>) -> i64 {
    const CLONE_VM: u64 = 0x100;
    const CLONE_VFORK: u64 = 0x4000;
    // 16-byte aligned, as the ABI wants the stack at a call
    let mut stack = vec![0u128; CHILD_STACK / 16];
    args.flags |= CLONE_VM | CLONE_VFORK;
    args.stack = stack.as_mut_ptr() as u64;
    args.stack_size = CHILD_STACK as u64;
    let ret: i64;
    // SAFETY: the kernel starts the child on `stack` (its own, alive until the child has
    // executed or exited: CLONE_VFORK holds this thread until then) with this thread's
    // registers, so r12 and r13 hold `child_main` and its argument; `child_main` never returns.
    // The parent goes on at label 2 with the syscall's result (rcx and r11 are clobbered by
    // `syscall`). `args` and `child` outlive the call.
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "xor ebp, ebp",
            "mov rdi, r13",
            "call r12",
            "ud2",
            "2:",
            inlateout("rax") nix::libc::SYS_clone3 => ret,
            in("rdi") std::ptr::from_mut(args),
            in("rsi") std::mem::size_of::<CloneArgs>(),
            in("r12") child_main as *const () as usize,
            in("r13") std::ptr::from_ref(child),
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    drop(stack);
    ret
}

#[cfg(not(target_arch = "x86_64"))]
#[allow(unsafe_code)]
fn clone_raw(args: &mut CloneArgs, child: &Prepared<'_>) -> i64 {
    // SAFETY: clone3 without CLONE_VM forks this process (a copy of its memory, one thread);
    // in the child (0) only `child_main` runs, which never returns. `args` outlives the call.
    let ret = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_clone3,
            std::ptr::from_mut(args),
            std::mem::size_of::<CloneArgs>(),
        )
    };
    if ret == 0 {
        child_main(std::ptr::from_ref(child));
    }
    if ret < 0 {
        -i64::from(nix::errno::Errno::last_raw())
    } else {
        ret
    }
}

/// The child's side: set up, execute; on any failure report errno and `_exit(127)`. Only raw
/// system calls: the child may share this process's memory, with other threads running.
extern "C" fn child_main(prepared: *const Prepared<'_>) -> ! {
    #[allow(unsafe_code)]
    // SAFETY: the parent's `Prepared`, alive while the child runs (see `clone_raw`).
    let p = unsafe { &*prepared };
    #[allow(unsafe_code)]
    // SAFETY: system calls on memory and descriptors the parent prepared; no allocation, no lock.
    unsafe {
        use nix::libc;
        let errno = 'failed: {
            // every handler back to its default (ignored ones but SIGPIPE stay ignored) before
            // any signal can be delivered here
            for sig in 1..=64 {
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, std::ptr::null(), &raw mut old) == 0
                    && (old.sa_sigaction != libc::SIG_IGN || sig == libc::SIGPIPE)
                    && old.sa_sigaction != libc::SIG_DFL
                {
                    let mut dfl: libc::sigaction = std::mem::zeroed();
                    dfl.sa_sigaction = libc::SIG_DFL;
                    libc::sigaction(sig, &raw const dfl, std::ptr::null_mut());
                }
            }
            for (target, fd) in (0..).zip(p.stdio) {
                // `dup2` onto itself keeps close-on-exec, which is cleared then
                let r = if fd == target {
                    libc::fcntl(fd, libc::F_SETFD, 0)
                } else {
                    libc::dup2(fd, target)
                };
                if r < 0 {
                    break 'failed *libc::__errno_location();
                }
            }
            if libc::setpgid(0, 0) < 0
                || libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) < 0
            {
                break 'failed *libc::__errno_location();
            }
            // the parent may have died before the line above: then nobody will ever signal us
            if libc::getppid() != p.parent {
                break 'failed libc::ESRCH;
            }
            if p.ruleset >= 0
                && (libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0
                    || libc::syscall(libc::SYS_landlock_restrict_self, p.ruleset, 0) < 0)
            {
                break 'failed *libc::__errno_location();
            }
            if p.rlimits.set_on_self().is_err() {
                break 'failed *libc::__errno_location();
            }
            if libc::chdir(p.cwd.as_ptr()) < 0 {
                break 'failed *libc::__errno_location();
            }
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&raw mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &raw const none, std::ptr::null_mut());
            libc::execve(p.path.as_ptr(), p.argv.as_ptr(), p.envp.as_ptr());
            *libc::__errno_location()
        };
        libc::write(p.report, (&raw const errno).cast(), 4);
        libc::_exit(127)
    }
}
