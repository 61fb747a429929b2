//! The quota's wrappers around wasmtime-wasi's preview-1 calls (see the parent module for what
//! is charged). Each wrapper charges first and, when the budget allows, calls wasmtime-wasi's own
//! implementation, so its semantics are unchanged.
//!
//! Stdio descriptors stay stdio (their output is capped separately): closing 0–2 is a no-op and
//! renumbering another descriptor onto them is refused, so a file can never take their numbers
//! and escape the byte count.

use wasmtime::{AsContextMut, Caller, Extern, Linker};
use wasmtime_wasi::p1::types::{Fd, Fdflags};
use wasmtime_wasi::p1::wasi_snapshot_preview1::{self as p1, WasiSnapshotPreview1};
use wasmtime_wasi::p1::WasiP1Ctx;

use super::{resize_cost, write_cost, Extent, Quota};
use crate::error::Result;

const MODULE: &str = "wasi_snapshot_preview1";
const ERRNO_SUCCESS: i32 = 0;
const ERRNO_NOSPC: i32 = 51;
const ERRNO_NOTSUP: i32 = 58;
const O_CREAT: i32 = 1;

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

/// Where the open file `fd` stands (cursor, size, append mode), asked of wasmtime-wasi itself;
/// None when `fd` is not an open regular file (the call then fails or writes nothing of the
/// workspace, and only its bytes are charged).
async fn extent<T: HasQuota>(caller: &mut Caller<'_, T>, fd: i32) -> Option<Extent> {
    let memory = caller.get_export("memory")?.into_memory()?;
    let (mem, data) = memory.data_and_store_mut(&mut *caller);
    let ctx = data.wasi();
    let mut mem = wiggle::GuestMemory::Unshared(mem);
    let fd = Fd::from(fd as u32);
    let stat = WasiSnapshotPreview1::fd_filestat_get(ctx, &mut mem, fd)
        .await
        .ok()?;
    let flags = WasiSnapshotPreview1::fd_fdstat_get(ctx, &mut mem, fd)
        .await
        .ok()?;
    let position = WasiSnapshotPreview1::fd_tell(ctx, &mut mem, fd).unwrap_or(stat.size);
    Some(Extent {
        position,
        size: stat.size,
        append: flags.fs_flags.contains(Fdflags::APPEND),
    })
}

fn is_stdio(fd: i32) -> bool {
    (0..=2).contains(&fd)
}

/// Checks a write of the iovecs at `iovs` to `fd` (at `at`, for `fd_pwrite`) against the
/// budget; returns the hole it would leave (charged with the bytes once written), or None when
/// it does not fit.
async fn check_write<T: HasQuota>(
    caller: &mut Caller<'_, T>,
    fd: i32,
    iovs: i32,
    len: i32,
    at: Option<u64>,
) -> Option<u64> {
    if is_stdio(fd) {
        return Some(0);
    }
    let want = iovec_total(caller, iovs, len).unwrap_or(0);
    let extent = extent(caller, fd).await;
    let cost = write_cost(extent, at, want);
    let hole = cost - want;
    caller.data_mut().quota().allows(cost).then_some(hole)
}

/// Spends what a successful write used: the bytes written and, when it wrote any, the hole.
fn spend_write<T: HasQuota>(caller: &mut Caller<'_, T>, fd: i32, hole: u64, nwritten_ptr: i32) {
    if is_stdio(fd) {
        return;
    }
    let n = read_u32(caller, nwritten_ptr);
    let used = if n > 0 { n.saturating_add(hole) } else { 0 };
    caller.data_mut().quota().spend(used);
}

fn take_entry<T: HasQuota>(caller: &mut Caller<'_, T>) -> bool {
    caller.data_mut().quota().take_entry()
}

/// Defines the wrappers in `linker` (which must already hold wasmtime-wasi, with shadowing on).
pub(crate) fn wrap<T: HasQuota>(linker: &mut Linker<T>) -> Result<()> {
    linker.allow_shadowing(true);
    linker.func_wrap_async(
        MODULE,
        "fd_write",
        |mut caller: Caller<'_, T>, (fd, iovs, len, nwritten): (i32, i32, i32, i32)| {
            Box::new(async move {
                let Some(hole) = check_write(&mut caller, fd, iovs, len, None).await else {
                    return Ok::<i32, wasmtime::Error>(ERRNO_NOSPC);
                };
                let errno = call_wasi!(caller, fd_write(fd, iovs, len, nwritten))?;
                if errno == ERRNO_SUCCESS {
                    spend_write(&mut caller, fd, hole, nwritten);
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
                let at = Some(offset as u64);
                let Some(hole) = check_write(&mut caller, fd, iovs, len, at).await else {
                    return Ok::<i32, wasmtime::Error>(ERRNO_NOSPC);
                };
                let errno = call_wasi!(caller, fd_pwrite(fd, iovs, len, offset, nwritten))?;
                if errno == ERRNO_SUCCESS {
                    spend_write(&mut caller, fd, hole, nwritten);
                }
                Ok(errno)
            })
        },
    )?;
    linker.func_wrap_async(
        MODULE,
        "fd_filestat_set_size",
        |mut caller: Caller<'_, T>, (fd, size): (i32, i64)| {
            Box::new(async move {
                // `truncate` / `ftruncate` to a larger size makes a file of that logical length
                // without writing a byte: charge the growth.
                let growth = match extent(&mut caller, fd).await {
                    Some(e) => resize_cost(e.size, size as u64),
                    None => 0,
                };
                if !caller.data_mut().quota().allows(growth) {
                    return Ok::<i32, wasmtime::Error>(ERRNO_NOSPC);
                }
                let errno = call_wasi!(caller, fd_filestat_set_size(fd, size))?;
                if errno == ERRNO_SUCCESS {
                    caller.data_mut().quota().spend(growth);
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
                if oflags & O_CREAT != 0 && !take_entry(&mut caller) {
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
                if !take_entry(&mut caller) {
                    return Ok::<i32, wasmtime::Error>(ERRNO_NOSPC);
                }
                call_wasi!(caller, path_create_directory(fd, path, path_len))
            })
        },
    )?;
    linker.func_wrap_async(
        MODULE,
        "path_symlink",
        |mut caller: Caller<'_, T>,
         (old_path, old_len, fd, new_path, new_len): (i32, i32, i32, i32, i32)| {
            Box::new(async move {
                if !take_entry(&mut caller) {
                    return Ok::<i32, wasmtime::Error>(ERRNO_NOSPC);
                }
                call_wasi!(
                    caller,
                    path_symlink(old_path, old_len, fd, new_path, new_len)
                )
            })
        },
    )?;
    linker.func_wrap_async(
        MODULE,
        "path_link",
        |mut caller: Caller<'_, T>,
         (old_fd, old_flags, old_path, old_len, new_fd, new_path, new_len): (
            i32,
            i32,
            i32,
            i32,
            i32,
            i32,
            i32,
        )| {
            Box::new(async move {
                // A hard link adds a name (and one more path the host would list and copy).
                if !take_entry(&mut caller) {
                    return Ok::<i32, wasmtime::Error>(ERRNO_NOSPC);
                }
                call_wasi!(
                    caller,
                    path_link(old_fd, old_flags, old_path, old_len, new_fd, new_path, new_len)
                )
            })
        },
    )?;
    linker.func_wrap_async(
        MODULE,
        "fd_close",
        |mut caller: Caller<'_, T>, (fd,): (i32,)| {
            Box::new(async move {
                if is_stdio(fd) {
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
