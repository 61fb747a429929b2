//! One generation as a job: the pipeline with its progress written to the job (phase, step,
//! total, and the `video` detail the stream reads), cancellation checked at every report, the
//! MP4 written among the owner's uploads.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};
use weft_core::diffusion::Control;

use super::request::Prepared;
use super::types::VideoReply;
use super::VideoService;
use crate::jobs::{Job, JobContext, JobKind, ProgressUnit};
use crate::server::conversations::default_session;
use crate::server::uploads::store::{new_name, Meta, Store};
use crate::video_gen::to_mp4;

/// Queues the generation `p` for `owner`; the job's result is a [`VideoReply`].
pub fn submit(svc: &Arc<VideoService>, store: Store, owner: &str, p: Prepared) -> Job {
    let s = &p.settings;
    // What `/api/v1/jobs` shows of the request (the prompt cut short, no image bytes).
    let shown = json!({
        "model": svc.name,
        "prompt": p.request.prompt.chars().take(200).collect::<String>(),
        "width": s.width, "height": s.height, "frames": s.frames, "steps": s.steps,
        "seed": s.seed, "sampler": s.sampler.name(), "fps": p.fps,
        "image": p.request.image.is_some(),
    });
    let (svc2, owner2) = (svc.clone(), owner.to_string());
    svc.runner.submit_as(
        owner,
        JobKind::Video,
        shown,
        ProgressUnit::Steps,
        Box::new(move |ctx| work(&svc2, &store, &owner2, p, ctx)),
    )
}

fn work(
    svc: &VideoService,
    store: &Store,
    owner: &str,
    p: Prepared,
    ctx: &JobContext,
) -> Result<Value, String> {
    let started = Instant::now();
    let video = svc
        .pipeline
        .generate(&p.request, &mut |r| {
            ctx.note(
                "video",
                json!({"phase": r.phase.name(), "step": r.step, "total": r.total}),
            );
            ctx.phase(r.phase.name());
            ctx.progress(r.step as u64, r.total as u64);
            if ctx.cancelled() {
                Control::Stop
            } else {
                Control::Continue
            }
        })
        .map_err(|e| e.to_string())?;
    ctx.phase("encode");
    let mp4 = to_mp4(&video, p.fps).map_err(|e| format!("writing the MP4: {e}"))?;
    if ctx.cancelled() {
        return Err("cancelled".into());
    }
    let name = new_name("mp4").map_err(|e| e.to_string())?;
    let meta = Meta {
        file_name: "video.mp4".into(),
        kind: "video".into(),
        media_type: "video/mp4".into(),
        size: mp4.len() as u64,
        page_count: None,
        text_pages: None,
        truncated: false,
        time_s: None,
    };
    store
        .save(owner, &p.session, &name, &mp4, None, &meta)
        .map_err(|e| format!("storing the video: {e}"))?;
    let url = if p.session == default_session(owner) {
        format!("/uploads/{name}")
    } else {
        format!("/uploads/{name}?sessionId={}", query_escape(&p.session))
    };
    let reply = VideoReply {
        ok: true,
        url,
        audio_url: None,
        width: video.width,
        height: video.height,
        frames: video.frames,
        fps: p.fps,
        seed: video.settings.seed,
        codec: "h264".into(),
        elapsed_seconds: started.elapsed().as_secs_f64(),
    };
    serde_json::to_value(reply).map_err(|e| e.to_string())
}

/// Percent-encodes everything but unreserved characters (a session id in a query).
fn query_escape(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
