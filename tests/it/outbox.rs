//! The outbox's "sent" marks (`outbox::Marker`), against the real PostgreSQL: a mark finds
//! its rows by primary key, whatever the partial index of pending rows holds, and marking a
//! row already sent changes nothing of it.

use crate::harness::*;
use std::time::Duration;
use toolcall_recovery::outbox::Marker;
use toolcall_recovery::store;

const T: Duration = Duration::from_secs(20);

/// Inserts `n` pending outbox rows; returns their ids in order.
async fn pending(app: &TestApp, n: i64) -> Vec<i64> {
    sqlx::query_scalar(
        "INSERT INTO outbox (message_id, target, message_key, body) \
         SELECT g, 'moderation', 'key-' || g, repeat('b', 200) FROM generate_series(1, $1) g \
         RETURNING id",
    )
    .bind(n)
    .fetch_all(&app.pool)
    .await
    .unwrap()
}

/// Marks `ids` one batch per id (each waits for the one before), then stops the marker and
/// waits until its connection is gone (its statistics are then written).
async fn mark_one_by_one(app: &TestApp, ids: &[i64]) {
    let options = store::connect_options(&app.settings.database)
        .unwrap()
        .application_name("tcr-outbox-test-marker");
    let (marker, task) = Marker::start(options);
    for &id in ids {
        marker.sent(id);
        wait_for("the mark", T, || async {
            app.count(&format!(
                "SELECT count(*) FROM outbox WHERE id = {id} AND sent_at IS NOT NULL"
            ))
            .await
                == 1
        })
        .await;
    }
    drop(marker);
    task.await.unwrap();
    wait_for("the marker's connection closed", T, || async {
        app.count(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE application_name = 'tcr-outbox-test-marker'",
        )
        .await
            == 0
    })
    .await;
}

/// A row's mark: when it was sent (as text, to compare exactly) and its attempts.
async fn mark_of(app: &TestApp, id: i64) -> (String, i32) {
    sqlx::query_as("SELECT sent_at::text, attempts FROM outbox WHERE id = $1")
        .bind(id)
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

async fn pending_index_scans(app: &TestApp) -> i64 {
    sqlx::query_scalar(
        "SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = 'outbox_pending_idx'",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap()
}

/// The pending index keeps an entry for every row marked since the last vacuum, so a mark
/// that went through it walked every row sent so far. The planner takes it for a young,
/// small table, and a cached plan (made after five runs on one connection) kept it as the
/// table grew. Twelve marks on one connection, on a table of fifty fresh rows: none reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mark_finds_its_rows_by_primary_key_not_through_the_pending_index() {
    let app = TestApp::prepare().await;
    let ids = pending(&app, 50).await;
    let before = pending_index_scans(&app).await;
    mark_one_by_one(&app, &ids[..12]).await;
    let after = pending_index_scans(&app).await;
    assert_eq!(after, before, "marks read outbox_pending_idx");
    assert_eq!(
        app.count("SELECT count(*) FROM outbox WHERE sent_at IS NULL")
            .await,
        38
    );
    app.cleanup().await;
}

/// A row sent twice (the relay and the worker both confirmed it) keeps the time and the
/// count of its first mark.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn marking_a_row_already_sent_changes_nothing_of_it() {
    let app = TestApp::prepare().await;
    let ids = pending(&app, 2).await;
    mark_one_by_one(&app, &ids[..1]).await;
    let first = mark_of(&app, ids[0]).await;
    assert_eq!(first.1, 1);
    tokio::time::sleep(Duration::from_millis(20)).await;
    mark_one_by_one(&app, &ids[..1]).await;
    let again = mark_of(&app, ids[0]).await;
    assert_eq!(again, first);
    assert_eq!(
        app.count(&format!(
            "SELECT count(*) FROM outbox WHERE id = {} AND sent_at IS NULL AND attempts = 0",
            ids[1]
        ))
        .await,
        1,
        "the row not marked stays pending"
    );
    app.cleanup().await;
}
