//! A cap on what a run writes to its workspace, enforced at the WASI boundary.
//!
//! WASI has no disk quota, so the few preview-1 calls that make files grow or appear are wrapped:
//! `fd_write` / `fd_pwrite` to anything but stdio are charged against a byte budget, and
//! `path_open` with `O_CREAT` and `path_create_directory` against a count. Past either, the call
//! fails with `ENOSPC` before anything is written. Otherwise the wrappers call wasmtime-wasi's
//! own implementation, so its semantics are unchanged.
//!
//! Stdio descriptors stay stdio (their output is capped separately): closing 0–2 is a no-op and
//! renumbering another descriptor onto them is refused, so a file can never take their numbers
//! and escape the byte count.

use wasmtime::{AsContextMut, Caller, Extern, Linker};
use wasmtime_wasi::p1::wasi_snapshot_preview1::{self as p1, WasiSnapshotPreview1 as _};
use wasmtime_wasi::p1::WasiP1Ctx;

use crate::error::Result;

const MODULE: &str = "wasi_snapshot_preview1";
const ERRNO_SUCCESS: i32 = 0;
const ERRNO_NOSPC: i32 = 51;
const ERRNO_NOTSUP: i32 = 58;
const O_CREAT: i32 = 1;

/// What a run may still write, and whether it hit the cap.
#[derive(Debug)]
pub(crate) struct Quota {
    bytes_left: u64,
    creates_left: u64,
    /// Set when a write or create was refused.
    pub(crate) hit: bool,
}

impl Quota {
    pub(crate) fn new(bytes: u64, creates: u64) -> Self {
        Quota {
            bytes_left: bytes,
            creates_left: creates,
            hit: false,
        }
    }
}

/// Store data that carries a quota and the WASI context.
pub(crate) trait HasQuota: Send + 'static {
    fn quota(&mut self) -> &mut Quota;
    fn wasi(&mut self) -> &mut WasiP1Ctx;
}

/// Calls wasmtime-wasi's own implementation of a preview-1 function (the function wiggle
/// generates for its linker entry), with the guest's memory and the hostcall fuel set as that
/// entry would set them.
macro_rules! call_wasi {
    ($caller:ident, $func:ident ( $($arg:expr),* )) => {{
        let fuel = $caller.as_context_mut().hostcall_fuel();
        match $caller.get_export("memory") {
            Some(Extern::Memory(m)) => {
                let (mem, data) = m.data_and_store_mut(&mut $caller);
                let ctx = data.wasi();
                ctx.set_hostcall_fuel(fuel);
                let mut mem = wiggle::GuestMemory::Unshared(mem);
                let errno = p1::$func(ctx, &mut mem, $($arg),*).await?;
                Ok::<i32, wasmtime::Error>(errno)
            }
            _ => Err(wasmtime::format_err!("missing required memory export")),
        }
    }};
}

/// Bytes an iovec array asks to write, or None when it lies outside memory (the original
/// function then reports the fault).
fn iovec_total<T>(caller: &mut Caller<'_, T>, iovs: i32, len: i32) -> Option<u64> {
    let memory = caller.get_export("memory")?.into_memory()?;
    let data = memory.data(&*caller);
    let start = iovs as u32 as usize;
    let end = start.checked_add((len as u32 as usize).checked_mul(8)?)?;
    let table = data.get(start..end)?;
    Some(
        table
            .chunks_exact(8)
            .map(|iov| u32::from_le_bytes([iov[4], iov[5], iov[6], iov[7]]) as u64)
            .sum(),
    )
}

/// The u32 the guest's call left at `ptr`.
fn read_u32<T>(caller: &mut Caller<'_, T>, ptr: i32) -> u64 {
    let Some(memory) = caller.get_export("memory").and_then(|e| e.into_memory()) else {
        return 0;
    };
    let start = ptr as u32 as usize;
    memory
        .data(&*caller)
        .get(start..start + 4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64)
        .unwrap_or(0)
}

/// Charges `want` bytes for a write to `fd`; false when the budget would be exceeded.
fn charge<T: HasQuota>(caller: &mut Caller<'_, T>, fd: i32, want: Option<u64>) -> bool {
    if (0..=2).contains(&fd) {
        return true;
    }
    let q = caller.data_mut().quota();
    match want {
        Some(n) if n > q.bytes_left => {
            q.hit = true;
            false
        }
        _ => true,
    }
}

fn spend<T: HasQuota>(caller: &mut Caller<'_, T>, fd: i32, nwritten_ptr: i32) {
    if (0..=2).contains(&fd) {
        return;
    }
    let n = read_u32(caller, nwritten_ptr);
    let q = caller.data_mut().quota();
    q.bytes_left = q.bytes_left.saturating_sub(n);
}

fn take_create<T: HasQuota>(caller: &mut Caller<'_, T>) -> bool {
    let q = caller.data_mut().quota();
    if q.creates_left == 0 {
        q.hit = true;
        false
    } else {
        q.creates_left -= 1;
        true
    }
}

/// Defines the wrappers in `linker` (which must already hold wasmtime-wasi, with shadowing on).
pub(crate) fn wrap<T: HasQuota>(linker: &mut Linker<T>) -> Result<()> {
    linker.allow_shadowing(true);
    linker.func_wrap_async(
        MODULE,
        "fd_write",
        |mut caller: Caller<'_, T>, (fd, iovs, len, nwritten): (i32, i32, i32, i32)| {
            Box::new(async move {
                let want = iovec_total(&mut caller, iovs, len);
                if !charge(&mut caller, fd, want) {
                    return Ok::<i32, wasmtime::Error>(ERRNO_NOSPC);
                }
                let errno = call_wasi!(caller, fd_write(fd, iovs, len, nwritten))?;
                if errno == ERRNO_SUCCESS {
                    spend(&mut caller, fd, nwritten);
                }
                Ok(errno)
            })
        },
    )?;
    linker.func_wrap_async(
        MODULE,
        "fd_pwrite",
        |mut caller: Caller<'_, T>,
         (fd, iovs, len, offset, nwritten): (i32, i32, i32, i64, i32)| {
            Box::new(async move {
                let want = iovec_total(&mut caller, iovs, len);
                if !charge(&mut caller, fd, want) {
                    return Ok::<i32, wasmtime::Error>(ERRNO_NOSPC);
                }
                let errno = call_wasi!(caller, fd_pwrite(fd, iovs, len, offset, nwritten))?;
                if errno == ERRNO_SUCCESS {
                    spend(&mut caller, fd, nwritten);
                }
                Ok(errno)
            })
        },
    )?;
    linker.func_wrap_async(
        MODULE,
        "path_open",
        |mut caller: Caller<'_, T>,
         (fd, dirflags, path, path_len, oflags, base, inheriting, fdflags, opened): (
            i32,
            i32,
            i32,
            i32,
            i32,
            i64,
            i64,
            i32,
            i32,
        )| {
            Box::new(async move {
                if oflags & O_CREAT != 0 && !take_create(&mut caller) {
                    return Ok::<i32, wasmtime::Error>(ERRNO_NOSPC);
                }
                call_wasi!(
                    caller,
                    path_open(
                        fd, dirflags, path, path_len, oflags, base, inheriting, fdflags, opened
                    )
                )
            })
        },
    )?;
    linker.func_wrap_async(
        MODULE,
        "path_create_directory",
        |mut caller: Caller<'_, T>, (fd, path, path_len): (i32, i32, i32)| {
            Box::new(async move {
                if !take_create(&mut caller) {
                    return Ok::<i32, wasmtime::Error>(ERRNO_NOSPC);
                }
                call_wasi!(caller, path_create_directory(fd, path, path_len))
            })
        },
    )?;
    linker.func_wrap_async(
        MODULE,
        "fd_close",
        |mut caller: Caller<'_, T>, (fd,): (i32,)| {
            Box::new(async move {
                if (0..=2).contains(&fd) {
                    return Ok::<i32, wasmtime::Error>(ERRNO_SUCCESS);
                }
                call_wasi!(caller, fd_close(fd))
            })
        },
    )?;
    linker.func_wrap_async(
        MODULE,
        "fd_renumber",
        |_caller: Caller<'_, T>, (_from, _to): (i32, i32)| {
            // dup2 onto stdio would let a file escape the byte count, and nothing a script in
            // a workspace needs relies on renumbering: refuse it outright.
            Box::new(async move { Ok::<i32, wasmtime::Error>(ERRNO_NOTSUP) })
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}
