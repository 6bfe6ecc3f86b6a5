use super::*;

struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "droid-exec-stat-scan-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    /// Write `rel` and return its pending entry (content kept whole or by blob id).
    fn pending(&self, rel: &str, content: &[u8], whole: bool) -> Pending {
        let path = self.0.join(rel);
        std::fs::write(&path, content).unwrap();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        Pending {
            path: rel.as_bytes().to_vec(),
            stat: Stat::of(&meta),
            whole,
        }
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn the_reader_keeps_only_files_still_as_recorded() {
    let d = Dir::new("late");
    let same = d.pending("same.txt", b"one\n", true);
    let hashed = d.pending("hashed.bin", b"blob", false);
    let grown = d.pending("grown.txt", b"one\n", true);
    std::fs::write(d.0.join("grown.txt"), b"one\ntwo\n").unwrap();
    // same size, written again: a new inode (rename over it) tells it apart
    let replaced = d.pending("replaced.txt", b"aaaa", true);
    std::fs::write(d.0.join("tmp"), b"bbbb").unwrap();
    std::fs::rename(d.0.join("tmp"), d.0.join("replaced.txt")).unwrap();
    // a symlink or a FIFO put in its place is neither followed nor waited on
    let linked = d.pending("linked.txt", b"l", true);
    std::fs::remove_file(d.0.join("linked.txt")).unwrap();
    std::os::unix::fs::symlink(d.0.join("same.txt"), d.0.join("linked.txt")).unwrap();
    let fifo = d.pending("fifo", b"f", true);
    std::fs::remove_file(d.0.join("fifo")).unwrap();
    nix::unistd::mkfifo(&d.0.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let gone = d.pending("gone.txt", b"g", true);
    std::fs::remove_file(d.0.join("gone.txt")).unwrap();
    // a directory on the way swapped for a symlink: not followed, even to the very file
    // recorded (the directory was only renamed)
    std::fs::create_dir_all(d.0.join("sub")).unwrap();
    let beneath = d.pending("sub/f.txt", b"s", true);
    std::fs::rename(d.0.join("sub"), d.0.join("elsewhere")).unwrap();
    std::os::unix::fs::symlink(d.0.join("elsewhere"), d.0.join("sub")).unwrap();
    let nested = {
        std::fs::create_dir_all(d.0.join("a/b")).unwrap();
        d.pending("a/b/n.txt", b"nested\n", true)
    };

    let out = read_pending(
        &d.0,
        vec![
            same, hashed, grown, replaced, linked, fifo, gone, beneath, nested,
        ],
        &AtomicBool::new(false),
    );

    assert_eq!(
        out.kept.get(b"same.txt".as_slice()),
        Some(&Kept::Bytes(b"one\n".to_vec()))
    );
    assert_eq!(
        out.kept.get(b"hashed.bin".as_slice()),
        Some(&Kept::Blob(blob_id(b"blob")))
    );
    assert_eq!(
        out.kept.get(b"a/b/n.txt".as_slice()),
        Some(&Kept::Bytes(b"nested\n".to_vec()))
    );
    assert_eq!(out.kept.len(), 3);
    let mut unread: Vec<&[u8]> = out.unread.keys().map(Vec::as_slice).collect();
    unread.sort_unstable();
    assert_eq!(
        unread,
        [
            b"fifo".as_slice(),
            b"gone.txt",
            b"grown.txt",
            b"linked.txt",
            b"replaced.txt",
            b"sub/f.txt"
        ]
    );
}

#[test]
fn a_stopped_reader_reads_nothing_more() {
    let d = Dir::new("stopped");
    let files = vec![d.pending("a", b"a", true), d.pending("b", b"b", false)];
    let out = read_pending(&d.0, files, &AtomicBool::new(true));
    assert!(out.kept.is_empty());
    assert_eq!(out.unread.len(), 2);
}

#[test]
fn dropping_a_record_stops_its_reader() {
    let d = Dir::new("drop");
    let many: Vec<Pending> = (0..=INLINE_FILES)
        .map(|i| d.pending(&format!("f{i}"), b"x", true))
        .collect();
    let late = read_late(&d.0, many);
    let stop = Arc::clone(&late.reader.lock().unwrap().as_ref().expect("a reader").stop);
    assert!(!stop.load(Ordering::Relaxed));
    drop(late);
    assert!(stop.load(Ordering::Relaxed), "told to stop");
}

#[test]
fn little_content_is_read_by_the_record_itself_and_more_by_a_thread() {
    let d = Dir::new("inline");
    let few: Vec<Pending> = (0..INLINE_FILES)
        .map(|i| d.pending(&format!("f{i}"), b"x", true))
        .collect();
    let late = read_late(&d.0, few);
    assert!(late.reader.lock().unwrap().is_none(), "read at once");
    assert_eq!(late.done.get().map(|l| l.kept.len()), Some(INLINE_FILES));

    let many: Vec<Pending> = (0..=INLINE_FILES)
        .map(|i| d.pending(&format!("f{i}"), b"x", true))
        .collect();
    let scan = Scan {
        late: read_late(&d.0, many),
        ..Scan::default()
    };
    assert!(scan.reading(), "a thread reads them");
    scan.settle();
    scan.settle(); // idempotent
    assert!(!scan.reading());
    // all read, or (stopped first) left unread: none lost without saying so
    for i in 0..=INLINE_FILES {
        let p = format!("f{i}");
        assert!(
            scan.kept(p.as_bytes()).is_some() != scan.unread(p.as_bytes()),
            "{p} is kept or unread"
        );
    }
}
