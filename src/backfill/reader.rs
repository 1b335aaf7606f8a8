//! The page reader: reads candidate pages ahead of the walk on a task of its own, so the
//! server scans for the next page while this one is examined.
//!
//! May depend on: the sibling modules (`candidates`, `examine`), `error`, `tokio`.

use super::candidates;
use super::examine::Examiner;
use crate::error::Error;
use std::sync::Arc;
use tokio::sync::mpsc;

/// What the page reader hands the walk.
pub(super) enum Read {
    /// The next candidates, in id order (never empty).
    Page(Vec<candidates::Candidate>),
    /// The range holds no further candidate.
    End,
    /// `--limit` candidates have been read.
    Limit,
}

/// Reads pages ahead of the walk, on a task of its own: the server scans for the next page
/// while this one is examined, and rows are decoded beside the examining. At most two pages
/// wait for the walk. Dropping it stops it.
pub(super) struct Reader {
    pub(super) pages: mpsc::Receiver<Result<Read, Error>>,
    task: tokio::task::JoinHandle<()>,
}

impl Reader {
    pub(super) fn start(
        examiner: Arc<Examiner>,
        after: i64,
        until: i64,
        limit: u64,
        batch: u64,
    ) -> Self {
        let (tx, pages) = mpsc::channel(1);
        let task = tokio::spawn(async move {
            let mut after = after;
            let mut remaining = limit;
            loop {
                if remaining == 0 {
                    let _ = tx.send(Ok(Read::Limit)).await;
                    return;
                }
                let want = i64::try_from(remaining.min(batch)).unwrap_or(i64::MAX);
                let page = examiner
                    .retrying(|| {
                        candidates::page(&examiner.pool, &examiner.model_column, after, until, want)
                    })
                    .await;
                let page = match page {
                    Ok(page) => page,
                    Err(e) => {
                        let _ = tx.send(Err(e)).await;
                        return;
                    }
                };
                let Some(last) = page.last() else {
                    let _ = tx.send(Ok(Read::End)).await;
                    return;
                };
                after = last.id;
                remaining = remaining.saturating_sub(page.len() as u64);
                if tx.send(Ok(Read::Page(page))).await.is_err() {
                    return; // the walk has stopped
                }
            }
        });
        Reader { pages, task }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.task.abort();
    }
}
