//! Capped capture of a guest's stdout or stderr.
//!
//! The guest's output is kept in memory up to a cap. A write that would pass the cap keeps what
//! fits and traps the guest at once, so `print` in a loop of a gigabyte costs a cap's worth of
//! memory and stops immediately instead of running on until the CPU limit.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError, StreamResult};

/// The message of the trap raised when a stream passes its cap (recognised by the runner).
pub(crate) const OVERFLOW_TRAP: &str = "weft-sandbox: output limit reached";

/// A clonable in-memory sink with a byte cap; all clones share one buffer.
#[derive(Clone)]
pub(crate) struct CappedOutput {
    buf: Arc<Mutex<Vec<u8>>>,
    cap: usize,
    overflowed: Arc<AtomicBool>,
}

impl CappedOutput {
    pub(crate) fn new(cap: usize) -> Self {
        CappedOutput {
            buf: Arc::new(Mutex::new(Vec::new())),
            cap,
            overflowed: Arc::new(AtomicBool::new(false)),
        }
    }

    /// What was captured (at most the cap).
    pub(crate) fn contents(&self) -> Vec<u8> {
        self.buf.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// True once the guest tried to write past the cap.
    pub(crate) fn overflowed(&self) -> bool {
        self.overflowed.load(Ordering::Relaxed)
    }

    /// Appends what fits; false when something did not.
    fn append(&self, bytes: &[u8]) -> bool {
        let mut buf = self.buf.lock().unwrap_or_else(|e| e.into_inner());
        let room = self.cap.saturating_sub(buf.len());
        if bytes.len() <= room {
            buf.extend_from_slice(bytes);
            true
        } else {
            buf.extend_from_slice(&bytes[..room]);
            self.overflowed.store(true, Ordering::Relaxed);
            false
        }
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CappedOutput {
    async fn ready(&mut self) {}
}

impl OutputStream for CappedOutput {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        if self.append(&bytes) {
            Ok(())
        } else {
            Err(StreamError::trap(OVERFLOW_TRAP))
        }
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        // Always offer a full buffer's worth so the write that passes the cap reaches `write`
        // (which traps) rather than being cut into a partial write the guest would retry.
        Ok(1 << 20)
    }
}

impl tokio::io::AsyncWrite for CappedOutput {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if self.append(buf) {
            Poll::Ready(Ok(buf.len()))
        } else {
            Poll::Ready(Err(std::io::Error::other(OVERFLOW_TRAP)))
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl IsTerminal for CappedOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CappedOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_what_fits_and_flags_the_rest() {
        let mut out = CappedOutput::new(5);
        assert!(out.write(Bytes::from_static(b"abc")).is_ok());
        assert!(!out.overflowed());
        assert!(out.write(Bytes::from_static(b"defg")).is_err());
        assert!(out.overflowed());
        assert_eq!(out.contents(), b"abcde");
    }
}
