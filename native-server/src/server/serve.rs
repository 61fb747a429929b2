//! A built server running: the listener starts first (so `/health` and `/ready` answer while
//! the default model loads: `/ready` is 503 until it has), then the default model loads in
//! the background; other models load when a request names them. Ctrl-C / SIGTERM stops taking
//! requests, lets running streams finish, and ends. `POST /api/v1/restart` drains the same way
//! (at most `admin::restart::DRAIN`) and ends with [`Exit::Restart`]: the program decides how
//! to start again (`weft serve` re-executes itself on the same port).

use std::net::SocketAddr;

use anyhow::Context;

use super::{admin, router, ApiError, Shared};

/// A server ready to listen ([`Builder::build`](super::Builder::build)).
pub struct Server {
    addr: SocketAddr,
    state: Shared,
}

/// How a server stopped.
pub enum Exit {
    /// A signal: stop.
    Stopped,
    /// `POST /api/v1/restart`: start again on this port.
    Restart(u16),
}

impl Server {
    pub(super) fn new(addr: SocketAddr, state: Shared) -> Self {
        Server { addr, state }
    }

    /// Listens and serves until a signal or a restart request, then drains.
    pub async fn run(self) -> anyhow::Result<Exit> {
        let Server { addr, state } = self;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        let storage = state.storage.backend();
        let local = listener.local_addr()?;
        let names = state.registry.with_catalog(|c| c.names());
        tracing::info!(
            models = %names.join(", "),
            storage,
            "listening on http://{local} (default model loading)"
        );
        state.registry.start_reaper();
        state.code.warm_up();
        preload(state.clone());
        let app = router(state.clone());
        let st = state.clone();
        let mut restart = state.restart.subscribe();
        let (drain_tx, drain_rx) = tokio::sync::oneshot::channel::<()>();
        // The peer address reaches the auth layer (for the audit log).
        let server = axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(async move {
            let restarting = tokio::select! {
                _ = shutdown_signal() => false,
                _ = restart.wait_for(|r| *r) => true,
            };
            tracing::info!("shutting down: finishing running requests");
            // On a restart, requests already accepted but not yet queued must still be served
            // (the listener is closed and hyper closes idle connections, so no new ones come).
            if !restarting {
                st.registry.shutdown();
            }
            let _ = drain_tx.send(());
        });
        // Draining stops waiting after DRAIN (a stream that never ends must not block a
        // restart).
        let deadline = async {
            if drain_rx.await.is_ok() {
                tokio::time::sleep(admin::restart::DRAIN).await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            r = server => r?,
            _ = deadline => tracing::warn!("requests still running after the drain timeout; stopping anyway"),
        }
        // Every finished chat turn is written before the process ends or is replaced.
        state.sessions.flush().await;
        if let Some(j) = &state.jobs {
            j.flush().await;
        }
        if !*state.restart.borrow() {
            return Ok(Exit::Stopped);
        }
        // The pools close cleanly before the process image is replaced.
        let _ =
            tokio::time::timeout(std::time::Duration::from_secs(5), state.storage.close()).await;
        Ok(Exit::Restart(local.port()))
    }
}

/// Loads the default model in the background; `/ready` reports how it went.
fn preload(st: Shared) {
    tokio::spawn(async move {
        // A server of a video model alone has no text model to load.
        if st.video.is_some() && st.registry.with_catalog(|c| c.default_name().is_none()) {
            tracing::info!("serving a video model; ready");
            let _ = st.preload.set(Ok(()));
            return;
        }
        // The server's own load, on behalf of no request: nothing to admit or meter.
        let r = st
            .registry
            .acquire(None, None)
            .await
            .map(drop)
            .map_err(|e| ApiError::from(e).message);
        match &r {
            Ok(()) => tracing::info!("default model loaded; ready"),
            Err(e) => tracing::error!(error = %e, "the default model failed to load"),
        }
        let _ = st.preload.set(r);
    });
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}
