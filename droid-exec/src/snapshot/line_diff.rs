//! Line-level change counts and a rename similarity score for two byte buffers, as git computes
//! them.
//!
//! [`line_counts`] gives what `git diff --numstat` prints: lines added and removed. Lines are split
//! as git splits them (each ends with `\n`; a final line without `\n` is still a line and differs
//! from the same text with `\n`; bytes compare verbatim, `\r` included). The counts come from a
//! port of git's default diff (xdiff's Myers): `xdl_trim_ends`, `xdl_cleanup_records` (lines with
//! no partner, and very common lines amid unmatched runs, are changed without search), then
//! `xdl_recs_cmp`/`xdl_split` with git's cost heuristics (`mxcost`, snake sampling). So counts
//! equal git's even where git's script is not minimal, and the cost has git's bounds (each split
//! gives up after about sqrt(lines) steps): near-linear on ordinary files of a few MiB. Not
//! modelled: whitespace options, `--minimal`, `diff.algorithm`, attributes and textconv, and
//! git's treating blobs over `core.bigFileThreshold` (512 MiB) as binary.
//!
//! [`similarity`] is git's `diffcore-delta` rename estimate: each side is cut into chunks ending
//! at `\n` or after 64 bytes (for text a `\r` before `\n` is skipped; the trailing partial chunk
//! counts, as in the git 2.47 tested against), chunks are hashed into git's 107927 buckets, bytes
//! in common per bucket are summed, and the score is `copied * 100 / max(old size, new size)`,
//! the percentage git prints as `R087`. Differences from git: the size-ratio pre-filter (which
//! depends on `-M<n>`) is not applied, and identical buffers score 100 as git's exact-rename pass
//! gives. Binary data is scored the same way, without the `\r` rule, as git does.

use std::collections::HashMap;

/// How many leading bytes git inspects for a NUL when deciding a blob is binary.
const BINARY_PROBE: usize = 8000;
/// git's `HASHBASE`: the number of buckets `diffcore-delta` hashes chunks into.
const HASH_BASE: u32 = 107_927;
/// The longest chunk `diffcore-delta` hashes before cutting it without a newline.
const MAX_CHUNK: u64 = 64;
/// git's `XDL_SIMSCAN_WINDOW`: how far `xdl_clean_mmatch` looks around a common line.
const SCAN_WINDOW: usize = 100;
/// git's `XDL_SNAKE_CNT`: the diagonal run that counts as a good snake.
const SNAKE: i64 = 20;
/// git's `XDL_HEUR_MIN_COST` and `XDL_MAX_COST_MIN`: edit cost before heuristics may cut in.
const HEUR_MIN: i64 = 256;
/// git's `XDL_LINE_MAX`: the backward search's sentinel.
const LINE_MAX: i64 = i64::MAX;

/// Lines added and removed going from `old` to `new`, as `git diff --numstat` counts them; `None` when either side is binary (git's rule: a NUL byte in the first 8000 bytes).
pub(crate) fn line_counts(old: &[u8], new: &[u8]) -> Option<(u64, u64)> {
    if is_binary(old) || is_binary(new) {
        return None;
    }
    if old == new {
        return Some((0, 0));
    }
    let mut ids = HashMap::new();
    let (a, b) = (intern(old, &mut ids), intern(new, &mut ids));
    let (occ_a, occ_b) = (occurrences(&a, ids.len()), occurrences(&b, ids.len()));
    let (mid_a, mid_b) = trim_common(&a, &b);
    let (kept_a, gone_a) = discard(mid_a, &occ_b, a.len());
    let (kept_b, gone_b) = discard(mid_b, &occ_a, b.len());
    let (removed, added) = Myers::new(&kept_a, &kept_b).count();
    Some((gone_b.saturating_add(added), gone_a.saturating_add(removed)))
}

/// Whether `data` counts as binary for git (NUL in the first 8000 bytes).
pub(crate) fn is_binary(data: &[u8]) -> bool {
    data.iter().take(BINARY_PROBE).any(|&b| b == 0)
}

/// How similar two files are, 0..=100, as git's `diffcore-delta` rename estimate scores them
/// (see the module doc); identical content is 100, empty against non-empty is 0.
pub(crate) fn similarity(old: &[u8], new: &[u8]) -> u8 {
    if old == new {
        return 100;
    }
    let (src, dst) = (chunk_counts(old), chunk_counts(new));
    let (mut i, mut j, mut copied) = (0, 0, 0u64);
    while let (Some(&(sh, sc)), Some(&(dh, dc))) = (src.get(i), dst.get(j)) {
        if sh == dh {
            copied = copied.saturating_add(sc.min(dc));
        }
        i += usize::from(sh <= dh);
        j += usize::from(dh <= sh);
    }
    let max_size = u64::try_from(old.len().max(new.len())).unwrap_or(u64::MAX);
    u8::try_from((copied.saturating_mul(100) / max_size.max(1)).min(100)).unwrap_or(100)
}

/// `diffcore-delta`'s `hash_chars`: byte counts per chunk-hash bucket, sorted by bucket.
fn chunk_counts(data: &[u8]) -> Vec<(u32, u64)> {
    let text = !is_binary(data);
    let mut chunks = Vec::new();
    let hash = |a1: u32, a2: u32| a1.wrapping_add(a2.wrapping_mul(0x61)) % HASH_BASE;
    let (mut accum1, mut accum2, mut len) = (0u32, 0u32, 0u64);
    for (i, &c) in data.iter().enumerate() {
        if text && c == b'\r' && data.get(i.saturating_add(1)) == Some(&b'\n') {
            continue;
        }
        let old1 = accum1;
        accum1 = ((accum1 << 7) ^ (accum2 >> 25)).wrapping_add(u32::from(c));
        accum2 = (accum2 << 7) ^ (old1 >> 25);
        len += 1;
        if len < MAX_CHUNK && c != b'\n' {
            continue;
        }
        chunks.push((hash(accum1, accum2), len));
        (accum1, accum2, len) = (0, 0, 0);
    }
    if len > 0 {
        chunks.push((hash(accum1, accum2), len));
    }
    chunks.sort_unstable_by_key(|&(hash, _)| hash);
    let mut merged: Vec<(u32, u64)> = Vec::with_capacity(chunks.len());
    for (hash, count) in chunks {
        match merged.last_mut() {
            Some(last) if last.0 == hash => last.1 = last.1.saturating_add(count),
            _ => merged.push((hash, count)),
        }
    }
    merged
}

/// The lines of `data` (git's split) as ids shared through `ids`.
fn intern<'a>(data: &'a [u8], ids: &mut HashMap<&'a [u8], usize>) -> Vec<usize> {
    let lines = data.split_inclusive(|&b| b == b'\n');
    lines
        .map(|line| {
            let next = ids.len();
            *ids.entry(line).or_insert(next)
        })
        .collect()
}

/// How often each id occurs in `seq`.
fn occurrences(seq: &[usize], width: usize) -> Vec<u64> {
    let mut counts = vec![0u64; width];
    for &t in seq {
        if let Some(c) = counts.get_mut(t) {
            *c = c.saturating_add(1);
        }
    }
    counts
}

/// Both sides without their common leading and trailing lines (git's `xdl_trim_ends`).
fn trim_common<'a>(a: &'a [usize], b: &'a [usize]) -> (&'a [usize], &'a [usize]) {
    let pre = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let (a, b) = (a.get(pre..).unwrap_or(&[]), b.get(pre..).unwrap_or(&[]));
    let post = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (la, lb) = (a.len().saturating_sub(post), b.len().saturating_sub(post));
    (a.get(..la).unwrap_or(&[]), b.get(..lb).unwrap_or(&[]))
}

/// git's `xdl_cleanup_records` for one side: the lines kept for Myers and how many were
/// discarded (no partner at all, or a very common line inside a run of unmatched lines).
fn discard(mid: &[usize], other_occ: &[u64], own_len: usize) -> (Vec<usize>, u64) {
    let (mut limit, mut n) = (1u64, own_len);
    while n > 0 {
        (limit, n) = (limit << 1, n >> 2);
    }
    let limit = limit.min(1024);
    let dis: Vec<u8> = mid
        .iter()
        .map(|&t| match other_occ.get(t).copied().unwrap_or(0) {
            0 => 0,
            m if m >= limit => 2,
            _ => 1,
        })
        .collect();
    let (mut kept, mut discarded) = (Vec::with_capacity(mid.len()), 0u64);
    for (i, (&token, &d)) in mid.iter().zip(&dis).enumerate() {
        if d == 1 || (d == 2 && !drop_multimatch(&dis, i)) {
            kept.push(token);
        } else {
            discarded = discarded.saturating_add(1);
        }
    }
    (kept, discarded)
}

/// git's `xdl_clean_mmatch`: whether the common line at `i` sits in a run of mostly unmatched lines.
fn drop_multimatch(dis: &[u8], i: usize) -> bool {
    let run = |it: &mut dyn Iterator<Item = &u8>| {
        it.take_while(|&&d| d != 1)
            .fold((0u64, 1u64), |(none, multi), &d| {
                if d == 0 {
                    (none + 1, multi)
                } else {
                    (none, multi + 1)
                }
            })
    };
    let end = i
        .saturating_add(SCAN_WINDOW)
        .min(dis.len().saturating_sub(1));
    let before = dis.get(i.saturating_sub(SCAN_WINDOW)..i).unwrap_or(&[]);
    let (none0, multi0) = run(&mut before.iter().rev());
    let (none1, multi1) = run(&mut dis.get(i.saturating_add(1)..=end).unwrap_or(&[]).iter());
    let (none, multi) = (none0 + none1, multi0 + multi1);
    none0 > 0 && none1 > 0 && multi * 4 < multi + none
}

/// git's `xdl_recs_cmp`/`xdl_split` state over the kept lines of both sides.
struct Myers<'a> {
    /// Kept old lines.
    a: &'a [usize],
    /// Kept new lines.
    b: &'a [usize],
    /// Furthest forward x per diagonal (`kvdf`), diagonal `d` at index `d + base`.
    fwd: Vec<i64>,
    /// Furthest backward x per diagonal (`kvdb`), same indexing.
    bwd: Vec<i64>,
    /// Index of diagonal 0 in `fwd`/`bwd`.
    base: i64,
    /// git's `mxcost`: the edit cost after which the best partial path is taken.
    max_cost: i64,
}

impl<'a> Myers<'a> {
    /// Sets up the diagonal vectors for comparing `a` with `b`.
    fn new(a: &'a [usize], b: &'a [usize]) -> Self {
        let ndiags = a.len().saturating_add(b.len()).saturating_add(3);
        let (mut max_cost, mut n) = (1i64, ndiags);
        while n > 0 {
            (max_cost, n) = (max_cost.saturating_mul(2), n >> 2);
        }
        let base = i64::try_from(b.len()).unwrap_or(i64::MAX).saturating_add(1);
        let (fwd, bwd) = (vec![0; ndiags], vec![0; ndiags]);
        Myers {
            a,
            b,
            fwd,
            bwd,
            base,
            max_cost: max_cost.max(HEUR_MIN),
        }
    }

    /// Length of the common run of old `i1..lim1` and new `i2..lim2`, from the start or (`back`) the end.
    fn run(&self, (i1, lim1): (i64, i64), (i2, lim2): (i64, i64), back: bool) -> i64 {
        let part = |s: &'a [usize], lo: i64, hi: i64| {
            let range = usize::try_from(lo).ok().zip(usize::try_from(hi).ok());
            range.and_then(|(lo, hi)| s.get(lo..hi)).unwrap_or(&[])
        };
        let (x, y) = (part(self.a, i1, lim1), part(self.b, i2, lim2));
        let n = if back {
            let pairs = x.iter().rev().zip(y.iter().rev());
            pairs.take_while(|(p, q)| p == q).count()
        } else {
            x.iter().zip(y).take_while(|(p, q)| p == q).count()
        };
        i64::try_from(n).unwrap_or(0)
    }

    /// Value on diagonal `d` of the forward or backward vector.
    fn at(&self, back: bool, d: i64) -> i64 {
        let v = if back { &self.bwd } else { &self.fwd };
        let i = usize::try_from(d.saturating_add(self.base)).ok();
        i.and_then(|i| v.get(i)).copied().unwrap_or(0)
    }

    /// Stores `x` on diagonal `d` of the forward or backward vector.
    fn put(&mut self, back: bool, d: i64, x: i64) {
        let v = if back { &mut self.bwd } else { &mut self.fwd };
        let i = usize::try_from(d.saturating_add(self.base)).ok();
        if let Some(slot) = i.and_then(|i| v.get_mut(i)) {
            *slot = x;
        }
    }

    /// (removed, added) over the whole input: git's recursion, run on an explicit stack.
    fn count(&mut self) -> (u64, u64) {
        let len = |s: &[usize]| i64::try_from(s.len()).unwrap_or(i64::MAX);
        let (mut removed, mut added) = (0i64, 0i64);
        let mut stack = vec![([0, len(self.a), 0, len(self.b)], false)];
        while let Some(([mut off1, mut lim1, mut off2, mut lim2], need_min)) = stack.pop() {
            let n = self.run((off1, lim1), (off2, lim2), false);
            (off1, off2) = (off1 + n, off2 + n);
            let n = self.run((off1, lim1), (off2, lim2), true);
            (lim1, lim2) = (lim1 - n, lim2 - n);
            let (i1, i2, min_lo, min_hi) = if off1 == lim1 || off2 == lim2 {
                (off1, off2, false, false)
            } else {
                self.split([off1, lim1, off2, lim2], need_min)
            };
            // An empty lower half (always so when one side is empty; never otherwise, as git's
            // split always progresses) means the whole box is changed.
            if (i1, i2) == (off1, off2) || (i1, i2) == (lim1, lim2) {
                (removed, added) = (removed + lim1 - off1, added + lim2 - off2);
                continue;
            }
            stack.push(([i1, lim1, i2, lim2], min_hi));
            stack.push(([off1, i1, off2, i2], min_lo));
        }
        let to_u64 = |n: i64| u64::try_from(n).unwrap_or(0);
        (to_u64(removed), to_u64(added))
    }

    /// Widens one search's diagonal range by a step within `dmin..=dmax`, seeding the new outer
    /// diagonals with `fill` (git's domain extension in `xdl_split`).
    fn widen(
        &mut self,
        back: bool,
        (lo, hi): (i64, i64),
        (dmin, dmax): (i64, i64),
        fill: i64,
    ) -> (i64, i64) {
        let lo = if lo > dmin {
            self.put(back, lo - 2, fill);
            lo - 1
        } else {
            lo + 1
        };
        let hi = if hi < dmax {
            self.put(back, hi + 2, fill);
            hi + 1
        } else {
            hi - 1
        };
        (lo, hi)
    }

    /// git's snake sampling on one search: the most promising point that ends (forward) or starts
    /// (backward) a 20-line snake, if its progress beats `4 * ec`.
    fn sample(
        &self,
        back: bool,
        (lo, hi): (i64, i64),
        mid: i64,
        bx: [i64; 4],
        ec: i64,
    ) -> Option<(i64, i64)> {
        let [off1, lim1, off2, lim2] = bx;
        let mut best = (0, 0, 0);
        for d in (lo..=hi).rev().step_by(2) {
            let i1 = self.at(back, d);
            let i2 = i1 - d;
            let reach = if back {
                (lim1 - i1) + (lim2 - i2)
            } else {
                (i1 - off1) + (i2 - off2)
            };
            let v = reach - (d - mid).abs();
            let inside = if back {
                off1 < i1 && i1 <= lim1 - SNAKE && off2 < i2 && i2 <= lim2 - SNAKE
            } else {
                off1 + SNAKE <= i1 && i1 < lim1 && off2 + SNAKE <= i2 && i2 < lim2
            };
            let snake = || {
                let (r1, r2) = if back {
                    ((i1, lim1), (i2, lim2))
                } else {
                    ((off1, i1), (off2, i2))
                };
                self.run(r1, r2, !back) >= SNAKE
            };
            if v > 4 * ec && v > best.0 && inside && snake() {
                best = (v, i1, i2);
            }
        }
        (best.0 > 0).then_some((best.1, best.2))
    }

    /// git's `xdl_split` on box `[off1, lim1, off2, lim2]`: a split point and whether each half
    /// must then be diffed minimally.
    fn split(&mut self, bx: [i64; 4], need_min: bool) -> (i64, i64, bool, bool) {
        let [off1, lim1, off2, lim2] = bx;
        let (dom, fmid, bmid) = ((off1 - lim2, lim1 - off2), off1 - off2, lim1 - lim2);
        let odd = (fmid - bmid) & 1 != 0;
        let (mut f, mut b) = ((fmid, fmid), (bmid, bmid));
        self.put(false, fmid, off1);
        self.put(true, bmid, lim1);
        for ec in 1.. {
            let mut got_snake = false;
            f = self.widen(false, f, dom, -1);
            for d in (f.0..=f.1).rev().step_by(2) {
                let (lo, hi) = (self.at(false, d - 1), self.at(false, d + 1));
                let i1 = if lo >= hi { lo + 1 } else { hi };
                let n = self.run((i1, lim1), (i1 - d, lim2), false);
                let (i1, i2) = (i1 + n, i1 - d + n);
                got_snake |= n > SNAKE;
                self.put(false, d, i1);
                if odd && b.0 <= d && d <= b.1 && self.at(true, d) <= i1 {
                    return (i1, i2, true, true);
                }
            }
            b = self.widen(true, b, dom, LINE_MAX);
            for d in (b.0..=b.1).rev().step_by(2) {
                let (lo, hi) = (self.at(true, d - 1), self.at(true, d + 1));
                let i1 = if lo < hi { lo } else { hi - 1 };
                let n = self.run((off1, i1), (off2, i1 - d), true);
                let (i1, i2) = (i1 - n, i1 - d - n);
                got_snake |= n > SNAKE;
                self.put(true, d, i1);
                if !odd && f.0 <= d && d <= f.1 && i1 <= self.at(false, d) {
                    return (i1, i2, true, true);
                }
            }
            if need_min {
                continue;
            }
            if got_snake && ec > HEUR_MIN {
                if let Some((i1, i2)) = self.sample(false, f, fmid, bx, ec) {
                    return (i1, i2, true, false);
                }
                if let Some((i1, i2)) = self.sample(true, b, bmid, bx, ec) {
                    return (i1, i2, false, true);
                }
            }
            if ec >= self.max_cost {
                // Enough: take the furthest-reaching point of either search.
                let (mut fbest, mut fbest1) = (-1, -1);
                for d in (f.0..=f.1).rev().step_by(2) {
                    let i1 = self.at(false, d).min(lim1);
                    let (i1, i2) = if lim2 < i1 - d {
                        (lim2 + d, lim2)
                    } else {
                        (i1, i1 - d)
                    };
                    if fbest < i1 + i2 {
                        (fbest, fbest1) = (i1 + i2, i1);
                    }
                }
                let (mut bbest, mut bbest1) = (LINE_MAX, LINE_MAX);
                for d in (b.0..=b.1).rev().step_by(2) {
                    let i1 = self.at(true, d).max(off1);
                    let (i1, i2) = if i1 - d < off2 {
                        (off2 + d, off2)
                    } else {
                        (i1, i1 - d)
                    };
                    if i1 + i2 < bbest {
                        (bbest, bbest1) = (i1 + i2, i1);
                    }
                }
                return if (lim1 + lim2) - bbest < fbest - (off1 + off2) {
                    (fbest1, fbest - fbest1, true, false)
                } else {
                    (bbest1, bbest - bbest1, false, true)
                };
            }
        }
        (off1, off2, false, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Runs git (user and system config ignored) in a fresh temp dir holding `files`, removes the
    /// dir, and returns git's stdout.
    #[allow(clippy::disallowed_methods)] // the test's own git, checking the counts against it
    fn git_with(files: &[(&str, &[u8])], args: &[&str]) -> String {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("linediff-{}-{n}", std::process::id()));
        for (name, data) in files {
            let path = dir.join(name);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, data).expect("write");
        }
        let out = std::process::Command::new("git")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .current_dir(&dir)
            .args(args)
            .output();
        std::fs::remove_dir_all(&dir).expect("clean up");
        let out = out.expect("run git");
        assert!(
            out.status.code().is_some_and(|c| c <= 1),
            "git failed: {out:?}"
        );
        String::from_utf8(out.stdout).expect("utf-8 git output")
    }

    /// What `git diff --no-index --numstat` reports as (added, removed).
    fn git_numstat(old: &[u8], new: &[u8]) -> Option<(u64, u64)> {
        let args = [
            "-c",
            "core.quotepath=false",
            "diff",
            "--no-index",
            "--numstat",
            "--",
            "a",
            "b",
        ];
        let out = git_with(&[("a", old), ("b", new)], &args);
        match out.split('\t').take(2).collect::<Vec<_>>()[..] {
            ["-", "-"] => None,
            [a, r] => Some((a.parse().expect("added"), r.parse().expect("removed"))),
            _ => Some((0, 0)),
        }
    }

    /// Asserts that [`line_counts`] agrees with git's numstat on this pair.
    fn assert_matches_git(old: &[u8], new: &[u8]) {
        let (ours, git) = (line_counts(old, new), git_numstat(old, new));
        assert_eq!(
            ours,
            git,
            "{:?} -> {:?}",
            String::from_utf8_lossy(old),
            String::from_utf8_lossy(new)
        );
    }

    /// git's rename score for `old` renamed to `new` (`-M1%`), or `None` if not paired.
    fn git_rename_score(old: &[u8], new: &[u8]) -> Option<u8> {
        let args = [
            "diff",
            "--no-index",
            "-M1%",
            "--name-status",
            "--",
            "x",
            "y",
        ];
        let out = git_with(&[("x/f1", old), ("y/f2", new)], &args);
        out.strip_prefix('R')
            .and_then(|s| s.get(..3))
            .map(|s| s.parse().expect("score"))
    }

    /// Fixed-seed xorshift64: the next value below `n`.
    fn below(state: &mut u64, n: u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state % n
    }

    /// A small random file from a tiny alphabet of lines, sometimes without a final newline.
    fn random_file(rng: &mut u64) -> Vec<u8> {
        const LINES: [&[u8]; 6] = [b"a\n", b"b\n", b"c\n", b"d\r\n", b"a\r\n", b"\n"];
        let mut out = Vec::new();
        for _ in 0..below(rng, 12) {
            out.extend_from_slice(LINES[usize::try_from(below(rng, 6)).expect("index")]);
        }
        if below(rng, 4) == 0 {
            out.extend_from_slice(if below(rng, 2) == 0 { b"a" } else { b"e" });
        }
        out
    }

    /// `n` lines drawn from `alpha` distinct ones, and a copy with about 30% of lines edited.
    fn edited_pair(rng: &mut u64, n: usize, alpha: u64) -> (Vec<u8>, Vec<u8>) {
        let line = |rng: &mut u64, p: &str| format!("{p}{}\n", below(rng, alpha)).into_bytes();
        let old: Vec<u8> = (0..n).flat_map(|_| line(rng, "x")).collect();
        let mut new = Vec::new();
        for l in old.split_inclusive(|&b| b == b'\n') {
            match below(rng, 10) {
                0 => {}
                1 => new.extend(line(rng, "y")),
                2 => new.extend([l.to_vec(), line(rng, "x")].concat()),
                _ => new.extend_from_slice(l),
            }
        }
        (old, new)
    }

    /// Fixed cases and heavily edited large pairs give git's exact counts.
    #[test]
    fn counts_match_git() {
        let big: Vec<u8> = (0..10_000)
            .flat_map(|i| format!("line {i}\n").into_bytes())
            .collect();
        let mut edited = Vec::new();
        for (i, line) in big.split_inclusive(|&b| b == b'\n').enumerate() {
            match (i % 100, i % 300, i % 200) {
                (7, _, _) => edited.extend_from_slice(b"changed\n"),
                (_, 50, _) => {}
                (_, _, 93) => edited.extend([line, b"extra\n"].concat()),
                _ => edited.extend_from_slice(line),
            }
        }
        let cases: [(&[u8], &[u8]); 12] = [
            (b"", b"a\nb\nc\n"),
            (b"a\nb\nc\n", b""),
            (b"a\nb\nc\n", b"a\nb\nx\ny\nc\n"),
            (b"a\nb\nc\nd\n", b"a\nd\n"),
            (b"a\nb\nc\n", b"a\nB\nc\n"),
            (b"a\n", b"a"),
            (b"a\nb", b"a\nb\nc"),
            (b"a\r\nb\r\n", b"a\nb\r\n"),
            (b"x\nx\nx\nx\n", b"x\nx\ny\nx\nx\nx\n"),
            (b"same\n", b"same\n"),
            (b"bin\0ary", b"text\n"),
            (&big, &edited),
        ];
        for (old, new) in cases {
            assert_matches_git(old, new);
        }
        // Heavy edits push git into its cost heuristics (non-minimal results).
        let mut rng = 0x1234_5678_9abc_def1;
        for (n, alpha) in [
            (3000, 5),
            (3000, 50),
            (2500, 1000),
            (4000, 100_000),
            (1500, 3),
        ] {
            let (old, new) = edited_pair(&mut rng, n, alpha);
            assert_matches_git(&old, &new);
        }
    }

    /// Small random pairs from a tiny line alphabet give git's exact counts.
    #[test]
    fn random_pairs_match_git() {
        let mut rng = 0x9e37_79b9_7f4a_7c15;
        let (mut misses, mut off_by) = (0, 0);
        for _ in 0..200 {
            let (old, new) = (random_file(&mut rng), random_file(&mut rng));
            let (a, r) = line_counts(&old, &new).expect("text");
            let (ga, gr) = git_numstat(&old, &new).expect("text");
            misses += u64::from((a, r) != (ga, gr));
            off_by += a.abs_diff(ga) + r.abs_diff(gr);
        }
        println!("random pairs: {misses}/200 differ from git, {off_by} lines off in total");
        assert_eq!((misses, off_by), (0, 0));
    }

    /// Scores equal the percentage git's rename detection prints.
    #[test]
    fn similarity_matches_git() {
        let mut rng = 0x2545_f491_4f6c_dd1d;
        let mut compared = 0;
        for _ in 0..40 {
            let (old, new) = (random_file(&mut rng), random_file(&mut rng));
            if let Some(score) = git_rename_score(&old, &new) {
                assert_eq!(similarity(&old, &new), score, "{old:?} -> {new:?}");
                compared += 1;
            }
        }
        assert!(compared >= 10, "too few pairs git paired: {compared}");
        let (old, new) = edited_pair(&mut rng, 3000, 100_000);
        let crlf = String::from_utf8_lossy(&old)
            .replace('\n', "\r\n")
            .into_bytes();
        let (bin_old, bin_new) = ([b"\0", &old[..]].concat(), [b"\0", &new[..]].concat());
        for (a, b) in [(&old, &new), (&old, &crlf), (&bin_old, &bin_new)] {
            assert_eq!(Some(similarity(a, b)), git_rename_score(a, b));
        }
    }

    /// Binary detection, empty inputs and simple scores.
    #[test]
    fn edge_cases() {
        assert!(is_binary(b"a\0b") && !is_binary(b"abc\n"));
        assert!(!is_binary(&[vec![b'a'; BINARY_PROBE], vec![0]].concat()));
        assert_eq!(line_counts(b"", b""), Some((0, 0)));
        assert_eq!(line_counts(b"a\0", b"a\0"), None);
        assert_eq!((similarity(b"", b""), similarity(b"", b"a\n")), (100, 0));
        assert_eq!(similarity(b"a\nb\n", b"a\nc\n"), 50);
        assert_eq!(similarity(b"x\0y\n", b"x\0y\n"), 100);
    }
}
