//! The uploaded archive, copied chunk by chunk into a temporary file (0600, removed when
//! dropped) while its size is counted, so a restore never holds the upload in memory and
//! stops reading at [`super::MAX_UPLOAD`] whatever `Content-Length` says.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::PathBuf;

use axum::body::Bytes;
use axum::extract::{FromRequest, Multipart, Request};
use axum::http::{header, StatusCode};
use futures_util::StreamExt;

use crate::server::error::ApiError;

/// A temporary file holding the upload; deleted on drop.
pub struct Spooled {
    pub file: File,
    pub len: u64,
    path: PathBuf,
}

impl Drop for Spooled {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Spooled {
    fn create() -> Result<Spooled, ApiError> {
        let mut id = [0u8; 16];
        getrandom::fill(&mut id).map_err(|e| ApiError::internal(format!("randomness: {e}")))?;
        let name: String = id.iter().map(|b| format!("{b:02x}")).collect();
        let path = std::env::temp_dir().join(format!("weft-restore-{name}.zip"));
        let mut o = std::fs::OpenOptions::new();
        o.read(true).write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
        let file = o.open(&path).map_err(|e| {
            tracing::error!(path = %path.display(), error = %e, "creating the restore's temporary file");
            ApiError::internal(format!("creating a temporary file for the upload: {e}"))
        })?;
        Ok(Spooled { file, len: 0, path })
    }

    fn push(&mut self, chunk: &Bytes, max: usize) -> Result<(), ApiError> {
        self.len += chunk.len() as u64;
        if self.len > max as u64 {
            return Err(ApiError::too_large(format!(
                "the upload is larger than {max} bytes"
            )));
        }
        self.file
            .write_all(chunk)
            .map_err(|e| ApiError::internal(format!("writing the upload to a temporary file: {e}")))
    }

    fn rewind(mut self) -> Result<Spooled, ApiError> {
        self.file
            .seek(SeekFrom::Start(0))
            .map_err(|e| ApiError::internal(format!("reading the upload back: {e}")))?;
        Ok(self)
    }
}

fn reading(status: StatusCode, max: usize, e: String) -> ApiError {
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::too_large(format!("the upload is larger than {max} bytes"))
    } else {
        ApiError::invalid(format!("reading the upload: {e}"))
    }
}

/// The archive from a multipart field `file` or a raw `application/zip` body, on disk.
pub async fn spool(req: Request, max: usize) -> Result<Spooled, ApiError> {
    let ct = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if ct.starts_with("multipart/form-data") {
        let mut mp = Multipart::from_request(req, &())
            .await
            .map_err(|e| ApiError::invalid(e.body_text()))?;
        while let Some(mut field) = mp
            .next_field()
            .await
            .map_err(|e| reading(e.status(), max, e.body_text()))?
        {
            if field.name() != Some("file") {
                continue;
            }
            let mut out = Spooled::create()?;
            while let Some(chunk) = field
                .chunk()
                .await
                .map_err(|e| reading(e.status(), max, e.body_text()))?
            {
                out.push(&chunk, max)?;
            }
            return out.rewind();
        }
        Err(ApiError::invalid(
            "the multipart body has no field named `file` holding the backup ZIP",
        ))
    } else if ct.starts_with("application/zip") || ct.starts_with("application/octet-stream") {
        let mut out = Spooled::create()?;
        let mut body = req.into_body().into_data_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| ApiError::invalid(format!("reading the upload: {e}")))?;
            out.push(&chunk, max)?;
        }
        out.rewind()
    } else {
        Err(ApiError::invalid(
            "send the backup as a multipart field `file` or as a body of type application/zip",
        ))
    }
}
