//! Maps and sets keyed by repository paths, with a hasher made for them.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hash as _, Hasher};

/// A fast hasher for paths (FxHash's multiply-rotate over 8-byte words): a record hashes each
/// of 100,000 paths several times, and SipHash was a tenth of its time. Not collision-proof
/// against chosen names; a collision costs time, never a wrong answer (keys are compared).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct PathHasher(u64);

impl Hasher for PathHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut h = self.0;
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let word = <[u8; 8]>::try_from(w).map_or(0, u64::from_le_bytes);
            h = (h.rotate_left(5) ^ word).wrapping_mul(K);
        }
        for &b in words.remainder() {
            h = (h.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
        self.0 = h;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Maps keyed by paths.
pub(crate) type PathMap<V> = HashMap<Vec<u8>, V, BuildHasherDefault<PathHasher>>;
/// A set of path hashes ([`path_hash`]).
pub(crate) type HashesSet = HashSet<u64, BuildHasherDefault<PathHasher>>;

/// The hash a record keeps of a path it found unchanged.
pub(crate) fn path_hash(path: &[u8]) -> u64 {
    let mut h = PathHasher::default();
    path.hash(&mut h);
    h.finish()
}
