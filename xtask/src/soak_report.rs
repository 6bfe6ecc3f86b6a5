//! What the soak prints, and the verdict `--check` turns into an exit code: errors, processes
//! left behind, growth in open descriptors or resident memory between the quiet moment after
//! the warm-up and the quiet moment at the end, and enough traffic of every kind for those
//! comparisons to mean something.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::figures::{mib, ms};
use crate::procfs::Found;
use crate::soak_tally::Tally;

/// Descriptors a server may hold at the end beyond its count after the warm-up. Both counts are
/// taken with the server idle (no connection, run or task; the smallest set over a second), when
/// its descriptors are a fixed set (stdio, log, listener, epoll, the runtime's wakers), so no
/// slack is needed and none is given: every clean run measured equal counts (bridge 12 and 12,
/// MCP server 11 and 11, in five 20 s runs and a 300 s one). Any growth is a descriptor the
/// traffic left open (an injected leak of one per `DELETE /tasks/{id}` showed as 19 -> 74).
pub(crate) const FD_SLACK: usize = 0;
/// Resident memory a server may gain between the two idle moments: this share of the
/// after-warm-up figure or [`RSS_FLOOR_KIB`], whichever is larger. With no leak, measured
/// growth was +0.2 to +1.1 MiB in 20 s runs, and +4.5 MiB for the bridge in a 300 s run: its
/// `/health` and `/metrics` read every record of the task store, which the soak fills (1775
/// tasks by then), and the allocator keeps the pages of that one large temporary list (flat
/// under further traffic once the store stops growing). So the floor leaves room for a 300 s
/// soak's store. At 20 s (1200-1300 measured requests per server) it catches leaks of about
/// 8 KiB per request and more (an injected 16 KiB one: 16.8 -> 37.6 MiB; a 4 KiB one, +4.8 MiB,
/// passed); at 60 s, 4 KiB (16.1 -> 31.3 MiB).
pub(crate) const RSS_SHARE: f64 = 0.25;
/// The floor of the memory margin, in KiB.
pub(crate) const RSS_FLOOR_KIB: u64 = 8 * 1024;
/// Fewest operations of each kind the measured phase must run for `--check` to trust its
/// comparisons: a leak of one descriptor per operation of a kind shows as at least this many.
pub(crate) const MIN_PER_KIND: usize = 3;

/// A server's memory and descriptors at one moment.
pub(crate) struct Sample {
    /// VmRSS, KiB.
    pub(crate) rss: u64,
    /// VmHWM (peak RSS so far), KiB.
    pub(crate) hwm: u64,
    /// What each open descriptor points at.
    pub(crate) fds: Vec<String>,
}

/// One server's figures over the soak.
pub(crate) struct Server {
    /// What the report calls it.
    pub(crate) name: &'static str,
    /// Its pid.
    pub(crate) pid: u32,
    /// After the warm-up, idle.
    pub(crate) start: Sample,
    /// At the end, idle.
    pub(crate) end: Sample,
    /// Highest RSS (KiB) and descriptor count sampled while the traffic ran.
    pub(crate) peak: (u64, usize),
}

/// One front-end's traffic.
pub(crate) struct Front {
    /// What the report calls it.
    pub(crate) name: &'static str,
    /// Concurrent clients.
    pub(crate) clients: usize,
    /// The operations its clients cycle through.
    pub(crate) kinds: &'static [&'static str],
    /// The warm-up's counts (their errors count; their figures are not reported).
    pub(crate) warm: std::sync::Arc<Tally>,
    /// The measured phase's counts.
    pub(crate) main: std::sync::Arc<Tally>,
}

/// Everything the soak measured.
pub(crate) struct Outcome {
    /// `--time`.
    pub(crate) time: Duration,
    /// The warm-up, the measured phase, everything.
    pub(crate) took: (Duration, Duration, Duration),
    /// The two front-ends.
    pub(crate) fronts: [Front; 2],
    /// Errors found outside operations (counters, strays, a drain that did not end).
    pub(crate) checks: Tally,
    /// The two servers.
    pub(crate) servers: Vec<Server>,
    /// Processes of the soak still running at the end (besides the servers), with their
    /// command lines.
    pub(crate) left: Vec<(Found, String)>,
    /// Tasks in each front-end's store at the end.
    pub(crate) stored: [usize; 2],
}

/// The entries of `end` that `start` does not have (as many times as they are extra).
fn extra(start: &[String], end: &[String]) -> Vec<String> {
    let mut count: BTreeMap<&str, isize> = BTreeMap::new();
    for s in start {
        *count.entry(s).or_default() -= 1;
    }
    for e in end {
        *count.entry(e).or_default() += 1;
    }
    count
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(s, n)| format!("{s} x{n}"))
        .collect()
}

/// The RSS (KiB) a server may reach at the end given `start`.
pub(crate) fn rss_limit(start: u64) -> u64 {
    start + ((start as f64 * RSS_SHARE) as u64).max(RSS_FLOOR_KIB)
}

impl Outcome {
    /// Print the report; the reasons `--check` fails (empty when it passes).
    pub(crate) fn report(&self) -> Vec<String> {
        let mut failures = Vec::new();
        let (warm, main, total) = self.took;
        println!(
            "soak: bridge and MCP server at the same time, --time {} s: warm-up {:.1} s, measured \
             {:.1} s, {:.1} s in all with the drains (debug build, fake droid)",
            self.time.as_secs(),
            warm.as_secs_f64(),
            main.as_secs_f64(),
            total.as_secs_f64()
        );
        println!();
        println!(
            "  {:<8} {:<16} {:>7} {:>9} {:>9}",
            "front", "operation", "count", "p50 ms", "p99 ms"
        );
        let mut errors = self.checks.errors().0;
        let mut first = self.checks.errors().1;
        for f in &self.fronts {
            for (kind, fig) in f.main.ops() {
                println!(
                    "  {:<8} {kind:<16} {:>7} {:>9.1} {:>9.1}",
                    f.name,
                    fig.count,
                    ms(fig.p50),
                    ms(fig.p99)
                );
            }
            let r = f.main.requests();
            println!(
                "  {:<8} {:<16} {:>7} {:>9.1} {:>9.1}   {:.1} req/s, {} clients",
                f.name,
                "every request",
                r.count,
                ms(r.p50),
                ms(r.p99),
                r.count as f64 / main.as_secs_f64(),
                f.clients
            );
            for t in [&f.warm, &f.main] {
                let (n, e) = t.errors();
                errors += n;
                first.extend(e);
            }
            let mut kinds = f.kinds.to_vec();
            kinds.sort_unstable();
            kinds.dedup();
            for kind in kinds {
                let n = f.main.count(kind);
                if n < MIN_PER_KIND {
                    failures.push(format!(
                        "{} {kind} ran {n} times in the measured phase (fewer than \
                         {MIN_PER_KIND}: too little traffic to judge growth; raise --time)",
                        f.name
                    ));
                }
            }
        }
        println!();
        println!("  errors: {errors}");
        for e in first.iter().take(5) {
            println!("    {e}");
        }
        if errors > 0 {
            failures.push(format!("{errors} error(s); first: {}", first[0]));
        }
        println!();
        println!(
            "  {:<20} {:>10} {:>10} {:>10} {:>10} {:>6} {:>6} {:>6}",
            "server", "RSS start", "RSS end", "RSS peak", "VmHWM", "fds", "fds", "fds"
        );
        println!(
            "  {:<20} {:>10} {:>10} {:>10} {:>10} {:>6} {:>6} {:>6}",
            "", "MiB", "MiB", "MiB", "MiB", "start", "end", "peak"
        );
        for s in &self.servers {
            println!(
                "  {:<20} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>6} {:>6} {:>6}",
                format!("{} ({})", s.name, s.pid),
                mib(s.start.rss),
                mib(s.end.rss),
                mib(s.peak.0),
                mib(s.end.hwm),
                s.start.fds.len(),
                s.end.fds.len(),
                s.peak.1
            );
            if s.end.fds.len() > s.start.fds.len() + FD_SLACK {
                failures.push(format!(
                    "{} holds {} descriptors at the end, {} after the warm-up (slack \
                     {FD_SLACK}); new: {}",
                    s.name,
                    s.end.fds.len(),
                    s.start.fds.len(),
                    extra(&s.start.fds, &s.end.fds).join(", ")
                ));
            }
            if s.end.rss > rss_limit(s.start.rss) {
                failures.push(format!(
                    "{} RSS grew from {:.1} MiB to {:.1} MiB (limit {:.1} MiB: +{:.0}% or \
                     +{} MiB, whichever is larger)",
                    s.name,
                    mib(s.start.rss),
                    mib(s.end.rss),
                    mib(rss_limit(s.start.rss)),
                    RSS_SHARE * 100.0,
                    RSS_FLOOR_KIB / 1024
                ));
            }
        }
        println!(
            "  (start: idle after the warm-up; end: idle after the traffic drained; --check \
             allows +{FD_SLACK} descriptors and +max({:.0}%, {} MiB) RSS)",
            RSS_SHARE * 100.0,
            RSS_FLOOR_KIB / 1024
        );
        let marked = self.left.iter().filter(|(f, _)| f.marked).count();
        println!(
            "  processes left: {marked} carrying DROID_EXECUTOR_RUN_ID, {} other processes of \
             the soak's HOMEs",
            self.left.len() - marked
        );
        for (f, cmd) in self.left.iter().take(5) {
            println!("    {} {cmd}", f.pid);
        }
        if !self.left.is_empty() {
            failures.push(format!(
                "{} process(es) left behind ({marked} with the run marker)",
                self.left.len()
            ));
        }
        println!(
            "  task stores at the end: bridge {} tasks, mcp {} tasks",
            self.stored[0], self.stored[1]
        );
        failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_descriptors_are_what_the_end_has_more_of() {
        let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
        let start = s(&["/dev/null", "pipe:[1]", "socket:[2]"]);
        let end = s(&["/dev/null", "/dev/null", "socket:[2]", "socket:[9]"]);
        assert_eq!(extra(&start, &end), s(&["/dev/null x1", "socket:[9] x1"]));
        assert!(extra(&end, &end).is_empty());
    }

    #[test]
    fn memory_margin_is_a_share_or_a_floor() {
        assert_eq!(rss_limit(10 * 1024), 10 * 1024 + RSS_FLOOR_KIB);
        assert_eq!(rss_limit(100 * 1024), 125 * 1024);
    }
}
