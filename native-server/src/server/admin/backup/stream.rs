//! The backup download as a stream: the database snapshot is read row by row (an async task),
//! zipped on a blocking thread (deflating is CPU work), and the archive's bytes flow to the
//! response body through bounded channels, so the server holds a few rows and one buffer
//! whatever the size of the database. A failure half-way ends the body with an error, so the
//! client sees a broken transfer rather than a short ZIP that looks whole.

use std::io::Write;

use axum::body::{Body, Bytes};
use serde_json::{Map, Value};
use tokio::sync::mpsc::{channel, Sender};
use weft_storage::{DumpItem, Storage};

use super::archive;

/// Bytes gathered before they are handed to the body.
const CHUNK: usize = 64 << 10;

/// A `Write` whose bytes go to the response body in chunks.
struct ToBody {
    tx: Sender<std::io::Result<Bytes>>,
    buf: Vec<u8>,
}

impl ToBody {
    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        self.tx.blocking_send(Ok(chunk)).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the client went away")
        })
    }
}

impl Write for ToBody {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(b);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}

/// The archive of `storage`'s current state as a response body.
pub fn body(
    storage: Storage,
    settings: Map<String, Value>,
    schema: i64,
    backend: &'static str,
) -> Body {
    let (rows_tx, mut rows_rx) = channel::<DumpItem>(256);
    let (tx, rx) = channel::<std::io::Result<Bytes>>(4);
    let reading = tokio::spawn(async move { storage.dump_to(&rows_tx).await });
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        let mut rows = 0usize;
        let items = std::iter::from_fn(|| {
            let item = rows_rx.blocking_recv();
            rows += usize::from(matches!(item, Some(DumpItem::Row(_))));
            item
        });
        let out = ToBody {
            tx: tx.clone(),
            buf: Vec::with_capacity(CHUNK),
        };
        let written = archive::write_stream(out, items, &settings, schema, backend);
        // The rows ended: because the snapshot was read through, or because reading failed.
        let read = runtime
            .block_on(reading)
            .map_err(std::io::Error::other)
            .and_then(|r| r.map_err(std::io::Error::other));
        let done = read.and(written).and_then(|mut w| w.flush());
        match done {
            Ok(()) => tracing::info!(rows, "backup taken"),
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                tracing::info!("backup download abandoned by the client")
            }
            Err(e) => {
                tracing::error!(error = %e, "writing the backup");
                let _ = tx.blocking_send(Err(e));
            }
        }
    });
    Body::from_stream(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    }))
}
