//! A run's workspace quota: what it may still add to its workspace, in bytes and in entries.
//!
//! WASI has no disk quota, so every preview-1 call that can make the workspace grow is wrapped
//! ([`wasi`]) and charged here before it runs:
//!
//! - bytes: each byte written (overwrites included), plus the gap a write leaves when it starts
//!   past the end of the file (a sparse file counts at its logical length: `seek(50 GiB)` then
//!   one byte costs 50 GiB), plus the growth asked of `fd_filestat_set_size` (`truncate` to a
//!   larger size costs the difference);
//! - entries: every name a run adds to a directory (a file opened with `O_CREAT`, a directory,
//!   a symlink, a hard link).
//!
//! Past either budget the call fails with `ENOSPC` before anything happens, and the run is
//! marked (`hit`) so its outcome can say why.

pub(crate) mod wasi;

/// What a run may still add, and whether it was refused something.
#[derive(Debug)]
pub(crate) struct Quota {
    bytes_left: u64,
    entries_left: u64,
    /// Set when a write, a resize or a new entry was refused.
    pub(crate) hit: bool,
}

impl Quota {
    pub(crate) fn new(bytes: u64, entries: u64) -> Self {
        Quota {
            bytes_left: bytes,
            entries_left: entries,
            hit: false,
        }
    }

    /// True when `n` bytes fit in what is left (nothing is spent: see [`Quota::spend`]).
    pub(crate) fn allows(&mut self, n: u64) -> bool {
        if n > self.bytes_left {
            self.hit = true;
            return false;
        }
        true
    }

    /// Takes `n` bytes off the budget (after the call that used them succeeded).
    pub(crate) fn spend(&mut self, n: u64) {
        self.bytes_left = self.bytes_left.saturating_sub(n);
    }

    /// Takes one new directory entry; false (and nothing taken) when none is left.
    pub(crate) fn take_entry(&mut self) -> bool {
        if self.entries_left == 0 {
            self.hit = true;
            return false;
        }
        self.entries_left -= 1;
        true
    }
}

/// Where an open file stands before a write: its cursor, its size, and whether it appends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Extent {
    pub(crate) position: u64,
    pub(crate) size: u64,
    pub(crate) append: bool,
}

/// The bytes a write of `len` bytes at `at` costs: the bytes themselves plus the hole left
/// between the end of the file and `at` (an appending file always writes at its end).
pub(crate) fn write_cost(extent: Option<Extent>, at: Option<u64>, len: u64) -> u64 {
    let hole = match extent {
        Some(e) if !e.append => at.unwrap_or(e.position).saturating_sub(e.size),
        _ => 0,
    };
    len.saturating_add(hole)
}

/// The bytes resizing a file from `size` to `new_size` costs (shrinking is free).
pub(crate) fn resize_cost(size: u64, new_size: u64) -> u64 {
    new_size.saturating_sub(size)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn at(position: u64, size: u64) -> Option<Extent> {
        Some(Extent {
            position,
            size,
            append: false,
        })
    }

    #[test]
    fn a_write_at_the_end_costs_its_bytes() {
        assert_eq!(write_cost(at(10, 10), None, 5), 5);
        // Overwrites inside the file are charged too (the budget counts bytes written).
        assert_eq!(write_cost(at(0, 10), None, 5), 5);
    }

    #[test]
    fn a_write_past_the_end_costs_the_hole_it_leaves() {
        // seek(50 GiB) then one byte: the file's logical length is 50 GiB + 1.
        assert_eq!(write_cost(at(50 * GIB, 0), None, 1), 50 * GIB + 1);
        // pwrite at an offset: the offset counts, not the cursor.
        assert_eq!(write_cost(at(0, 100), Some(4096), 10), 4096 - 100 + 10);
        assert_eq!(write_cost(at(0, 100), Some(50), 10), 10);
    }

    #[test]
    fn an_appending_file_leaves_no_hole() {
        let e = Some(Extent {
            position: 50 * GIB,
            size: 3,
            append: true,
        });
        assert_eq!(write_cost(e, None, 7), 7);
        assert_eq!(write_cost(e, Some(50 * GIB), 7), 7);
    }

    #[test]
    fn an_unknown_descriptor_costs_its_bytes() {
        assert_eq!(write_cost(None, Some(50 * GIB), 3), 3);
    }

    #[test]
    fn growing_by_set_size_costs_the_growth() {
        assert_eq!(resize_cost(0, 100 * GIB), 100 * GIB);
        assert_eq!(resize_cost(10, 15), 5);
        assert_eq!(resize_cost(15, 10), 0);
        assert_eq!(resize_cost(10, 10), 0);
    }

    #[test]
    fn costs_never_overflow() {
        assert_eq!(write_cost(at(u64::MAX, 0), None, u64::MAX), u64::MAX);
    }

    #[test]
    fn the_byte_budget_refuses_what_does_not_fit_and_remembers() {
        let mut q = Quota::new(100, 0);
        assert!(q.allows(100));
        assert!(!q.hit);
        q.spend(60);
        assert!(q.allows(40));
        assert!(!q.allows(41));
        assert!(q.hit);
        q.spend(1000);
        assert!(q.allows(0));
        assert!(!q.allows(1));
    }

    #[test]
    fn every_new_entry_takes_one_until_none_is_left() {
        let mut q = Quota::new(0, 2);
        assert!(q.take_entry());
        assert!(q.take_entry());
        assert!(!q.hit);
        assert!(!q.take_entry());
        assert!(q.hit);
        assert!(!q.take_entry());
    }
}
