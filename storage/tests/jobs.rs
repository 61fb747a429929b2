//! Job rows on SQLite: written and read back, an ended row never changes again, a cancel
//! request reaches the owner's poll, and a restart marks the jobs of the dead process failed.
//! (tests/tests/server_admin/jobs.rs runs the server's jobs on Postgres too.)

use serde_json::json;
use weft_storage::{JobRow, Storage};

fn row(id: &str, owner: &weft_storage::JobOwner, kind: &str, created_at: f64) -> JobRow {
    JobRow {
        id: id.into(),
        kind: kind.into(),
        status: "running".into(),
        phase: "downloading".into(),
        unit: "bytes".into(),
        done: 5,
        total: 10,
        percent: 50.0,
        request: json!({"model": "hf.co/o/r:q4_k_m", "name": null}),
        detail: json!({"digest": "sha256:ab"}).as_object().unwrap().clone(),
        result: None,
        error: None,
        created_at,
        started_at: Some(created_at + 0.5),
        finished_at: None,
        owner: owner.id.clone(),
        owner_lock: owner.lock,
        cancel_requested: false,
        principal: "key_a".into(),
    }
}

#[tokio::test]
async fn jobs_persist_end_once_and_orphans_fail_at_start() {
    let dir = std::env::temp_dir().join(format!("weft-storage-jobs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("weft.db").display().to_string();
    let s = Storage::open(&path).await.unwrap();
    let me = s.job_owner().await.unwrap();
    let a = row("job-a", &me, "pull", 100.0);
    let b = row("job-b", &me, "quantize", 200.0);
    s.write_job(&a).await.unwrap();
    s.write_job(&b).await.unwrap();
    assert_eq!(s.job("job-a").await.unwrap().unwrap(), a);
    assert!(s.job("job-none").await.unwrap().is_none());
    let ids: Vec<String> = s
        .jobs(10)
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(ids, ["job-a", "job-b"]);
    let ids: Vec<String> = s.jobs(1).await.unwrap().into_iter().map(|j| j.id).collect();
    assert_eq!(ids, ["job-b"], "the newest when limited");
    let mine: Vec<String> = s
        .jobs_of("key_a", 10)
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(mine, ["job-a", "job-b"], "a principal's own jobs");
    assert!(
        s.jobs_of("key_b", 10).await.unwrap().is_empty(),
        "not another's"
    );

    // A cancel request reaches the owner's poll and survives the owner's next write.
    let got = s.request_job_cancel("job-b").await.unwrap().unwrap();
    assert!(got.cancel_requested);
    s.write_job(&b).await.unwrap();
    assert_eq!(s.jobs_to_cancel(&me.id).await.unwrap(), ["job-b"]);
    assert!(s.jobs_to_cancel("owner_other").await.unwrap().is_empty());

    // Ended is final.
    let mut done = b.clone();
    done.status = "cancelled".into();
    done.finished_at = Some(300.0);
    s.write_job(&done).await.unwrap();
    s.write_job(&b).await.unwrap();
    assert_eq!(s.job("job-b").await.unwrap().unwrap().status, "cancelled");
    assert!(s.jobs_to_cancel(&me.id).await.unwrap().is_empty());

    // Another process starts on the same file: `job-a` lost its owner.
    s.close().await;
    let s = Storage::open(&path).await.unwrap();
    let next = s.job_owner().await.unwrap();
    assert_ne!(next.id, me.id);
    assert_eq!(
        s.fail_orphaned_jobs(&next, false, "interrupted", "; hint")
            .await
            .unwrap(),
        0,
        "on SQLite only a start finds orphans"
    );
    let n = s
        .fail_orphaned_jobs(&next, true, "interrupted", "; hint")
        .await
        .unwrap();
    assert_eq!(n, 1);
    let a = s.job("job-a").await.unwrap().unwrap();
    assert_eq!(a.status, "failed");
    assert_eq!(a.error.as_deref(), Some("interrupted; hint"));
    assert!(a.finished_at.is_some());
    assert_eq!(s.prune_jobs(1).await.unwrap(), 1);
    assert_eq!(s.jobs(10).await.unwrap().len(), 1);
    s.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}
