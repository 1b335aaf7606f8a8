//! The walk over the candidates, as a type: [`Walk`] holds the loop's state between turns
//! (as mini-redis's `Handler` holds a connection's) and each turn is a method.
//!
//! A turn starts candidates from the page (in id order, up to the bounds below, stopping
//! at a leak that waits for its `--rate` slot), then waits for whatever comes first: Ctrl-C,
//! the checkpoint save under way, the rate slot, the next page, finished examinations, or
//! the progress clock. What is done in id order is then reported, counted and, every
//! `--batch-size`, saved to the checkpoint; progress (bar, log line, gauge) is shown every
//! `--batch-size` candidates and every [`SHOW_EVERY`], so it moves whatever the rate.
//!
//! May depend on: the sibling modules, `metrics`, `shutdown`, `error`, `tokio`.

use super::candidates::Candidate;
use super::checkpoint::{self, Step};
use super::examine::{self, Examined, Examiner};
use super::output::Reporter;
use super::pace::Pacer;
use super::reader::{Read, Reader};
use super::summary::Summary;
use super::window::{Slot, Window};
use super::BackfillArgs;
use crate::error::Error;
use crate::metrics::Metrics;
use crate::shutdown::Shutdown;
use futures_util::stream::FuturesUnordered;
use futures_util::StreamExt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use toolcall_detect::Detection;

/// Candidates started ahead of the oldest unfinished one, at most. A finished one waits
/// here (its result, about 150 bytes) until everything before it is done, so output,
/// summary and checkpoint follow id order while the walk goes on past a slow recovery.
/// Clean candidates are examined at a few hundred thousand a second, so this is tens of
/// milliseconds of walk: several recovery transactions.
const WINDOW: usize = 16_384;

/// Leaks being examined at once, at most: each waits for one of the `--concurrency`
/// recoveries on a task of its own (a few KiB). Enough to keep the recoveries busy; beyond
/// it the walk waits, as it does at a full [`WINDOW`].
const LEAKS_IN_FLIGHT: usize = 128;

/// Candidates started per turn of the walk, and finished examinations taken per turn: a
/// clean candidate finishes on its first poll, so this bounds how many wait at once.
const PER_TURN: usize = 256;

/// How often progress is shown when fewer than `--batch-size` candidates were done since
/// (a low `--rate`, a slow recovery): the bar and the gauge move, and the log line (every
/// 10 s, `output`) comes.
pub(super) const SHOW_EVERY: Duration = Duration::from_secs(1);

/// What the walk works with, borrowed from the run for its whole length.
#[derive(Clone, Copy)]
pub(super) struct With<'a> {
    pub args: &'a BackfillArgs,
    pub examiner: &'a Arc<Examiner>,
    pub metrics: &'a Metrics,
    pub pacer: Option<&'a Pacer>,
    /// The checkpoint's name.
    pub checkpoint: &'a str,
}

/// How the walk ended: what it showed and counted, and why it stopped.
pub(super) struct Walked<'a> {
    pub summary: Summary,
    pub reporter: Reporter<'a>,
    /// The first error, which ends the run.
    pub fatal: Option<Error>,
    /// Stopped by Ctrl-C with candidates left.
    pub interrupted: bool,
    /// What the reader said last: the end of the range, or `--limit`.
    pub read_all: Option<Read>,
}

/// The candidates to come: the page being started, the leak that waits for its rate slot,
/// and, once it has said so, that the reader has nothing more.
struct Feed {
    reader: Reader,
    page: std::vec::IntoIter<Candidate>,
    /// The leak taken from the page that waits for its rate slot: the walk paces what
    /// costs the database (recoveries), not rows examined, and takes nothing past a
    /// waiting leak, so candidates still start (and are checkpointed) in id order. A leak
    /// that waits has not been started, and Ctrl-C does not wait for it.
    waiting: Option<(Candidate, Detection)>,
    read_all: Option<Read>,
}

impl Feed {
    fn has_next(&self) -> bool {
        self.waiting.is_some() || !self.page.as_slice().is_empty()
    }

    /// Everything read has been started.
    fn read_to_end(&self) -> bool {
        self.read_all.is_some() && !self.has_next()
    }

    /// The next candidate, with its detection when it holds a leak.
    fn next(&mut self, examiner: &Examiner) -> Option<(Candidate, Option<Detection>)> {
        if let Some((c, detection)) = self.waiting.take() {
            return Some((c, Some(detection)));
        }
        let c = self.page.next()?;
        let detection = examine::leaks(&c, &examiner.policy.detect);
        Some((c, detection))
    }
}

/// The walk's state between turns.
pub(super) struct Walk<'a> {
    with: With<'a>,
    stop: Shutdown,
    feed: Feed,
    /// The candidates started and not yet reported, in id order.
    window: Window,
    running: FuturesUnordered<Boxed<'a, Examination>>,
    finished: Vec<Examination>,
    /// Leaks among `running`.
    leaks: usize,
    taking: bool,
    interrupted: bool,
    fatal: Option<Error>,
    /// The wait for the waiting leak's rate slot, and whether the next leak has its slot.
    tick: Option<Boxed<'a, ()>>,
    paced: bool,
    saving: Option<Boxed<'a, Result<(), Error>>>,
    /// Done since the last save.
    unsaved: Step,
    /// Done since progress was last shown.
    unshown: u64,
    show_every: tokio::time::Interval,
    summary: Summary,
    reporter: Reporter<'a>,
}

impl<'a> Walk<'a> {
    /// A walk of the candidates after `after`, read by `reader`, counting into `summary`.
    pub(super) fn new(
        with: With<'a>,
        stop: Shutdown,
        (after, reader): (i64, Reader),
        summary: Summary,
        reporter: Reporter<'a>,
    ) -> Self {
        let mut show_every = tokio::time::interval(SHOW_EVERY);
        show_every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Walk {
            paced: with.pacer.is_none(),
            with,
            stop,
            feed: Feed {
                reader,
                page: Vec::new().into_iter(),
                waiting: None,
                read_all: None,
            },
            window: Window::default(),
            running: FuturesUnordered::new(),
            finished: Vec::with_capacity(PER_TURN),
            leaks: 0,
            taking: true,
            interrupted: false,
            fatal: None,
            tick: None,
            saving: None,
            unsaved: Step {
                last_message_id: after,
                examined: 0,
                changed: 0,
            },
            unshown: 0,
            show_every,
            summary,
            reporter,
        }
    }

    /// Walks until the range is read and examined, `--limit`, Ctrl-C or the first error.
    pub(super) async fn run(mut self) -> Walked<'a> {
        loop {
            self.notice_stop();
            self.start_candidates();
            if self.running.is_empty() && (!self.taking || self.feed.read_to_end()) {
                break;
            }
            let show = self.turn().await;
            self.report_done();
            self.show_progress(show);
            self.save_when_due();
        }
        self.finish().await
    }

    fn notice_stop(&mut self) {
        if self.taking && self.stop.is_shutdown() {
            self.taking = false;
            self.interrupted = self.feed.read_all.is_none() || self.feed.has_next();
        }
    }

    /// Starts candidates from the page, up to the bounds, stopping at a leak that waits
    /// for its rate slot.
    fn start_candidates(&mut self) {
        let mut started = 0;
        while self.taking
            && started < PER_TURN
            && self.leaks < LEAKS_IN_FLIGHT
            && self.window.len() < WINDOW
        {
            let Some((c, detection)) = self.feed.next(self.with.examiner) else {
                break;
            };
            if detection.is_some() && !self.paced {
                if let Some(p) = self.with.pacer {
                    self.tick.get_or_insert_with(|| Box::pin(p.tick()));
                }
                self.feed.waiting = detection.map(|d| (c, d));
                break;
            }
            if detection.is_some() {
                self.paced = self.with.pacer.is_none();
            }
            started += 1;
            let (examination, leak) =
                examine_one(self.with.examiner, self.window.start(), c, detection);
            self.leaks += usize::from(leak);
            self.running.push(examination);
        }
    }

    /// Waits for what comes first; whether the progress clock struck.
    async fn turn(&mut self) -> bool {
        let want_page = self.taking && self.feed.read_all.is_none() && !self.feed.has_next();
        // The clock only while something else is awaited: when nothing is, `else` says so.
        let busy = self.taking || self.saving.is_some() || !self.running.is_empty();
        // Biased, and the walk's own results last: the others are ready once each, and a
        // save or a rate tick must not wait behind a stream of clean candidates.
        tokio::select! {
            biased;
            () = self.stop.wait(), if self.taking => {}
            saved = await_some(&mut self.saving), if self.saving.is_some() => {
                self.saving = None;
                if let Err(e) = saved {
                    self.fail(e);
                }
            }
            () = await_some(&mut self.tick), if self.taking && self.tick.is_some() => {
                self.tick = None;
                self.paced = true;
            }
            read = self.feed.reader.pages.recv(), if want_page => self.take_page(read),
            _ = self.show_every.tick(), if busy => return true,
            () = take_finished(&mut self.running, &mut self.finished),
                if !self.running.is_empty() => self.record_finished(),
            else => self.fail(Error::Bug("the walk had nothing to wait for".into())),
        }
        false
    }

    fn take_page(&mut self, read: Option<Result<Read, Error>>) {
        match read {
            Some(Ok(Read::Page(p))) => self.feed.page = p.into_iter(),
            Some(Ok(end)) => self.feed.read_all = Some(end),
            Some(Err(e)) => self.fail(e),
            None => self.fail(Error::Bug("the page reader stopped".into())),
        }
    }

    fn record_finished(&mut self) {
        for (seq, leak, result) in std::mem::take(&mut self.finished) {
            self.leaks -= usize::from(leak);
            match result {
                Ok(e) => self.window.finish(seq, Slot::Done(e)),
                Err(e) => {
                    self.window.finish(seq, Slot::Failed);
                    self.fail(e);
                }
            }
        }
    }

    /// The first error ends the run: the walk takes nothing more and drains.
    fn fail(&mut self, e: Error) {
        self.taking = false;
        keep_first(&mut self.fatal, e);
    }

    /// Reports and counts what is done, in id order.
    fn report_done(&mut self) {
        while let Some(e) = self.window.pop_done() {
            self.count(&e);
            self.unsaved.last_message_id = e.message_id;
            self.unsaved.examined += 1;
            self.unsaved.changed += i64::from(e.changed);
            self.unshown += 1;
        }
    }

    fn count(&mut self, e: &Examined) {
        self.summary.add(e);
        self.reporter.message(e);
    }

    /// Progress every `--batch-size` candidates, and when the clock struck.
    fn show_progress(&mut self, clock: bool) {
        if clock || self.unshown >= self.batch() {
            self.unshown = 0;
            let last = self.unsaved.last_message_id;
            self.with.metrics.backfill_progress(last);
            self.reporter.progress(last, &self.summary);
        }
    }

    /// A checkpoint save every `--batch-size` candidates (real runs), one at a time.
    fn save_when_due(&mut self) {
        if !self.with.args.dry_run
            && self.saving.is_none()
            && self.unsaved.examined as u64 >= self.batch()
        {
            self.saving = Some(save(self.with, self.unsaved));
            self.unsaved.examined = 0;
            self.unsaved.changed = 0;
        }
    }

    fn batch(&self) -> u64 {
        u64::from(self.with.args.batch_size)
    }

    /// After the loop: the last save, what is done past a failure, the last progress.
    async fn finish(self) -> Walked<'a> {
        let Walk {
            with,
            feed,
            mut window,
            mut fatal,
            saving,
            unsaved,
            mut summary,
            mut reporter,
            interrupted,
            ..
        } = self;
        drop(feed.reader);
        if let Some(saved) = saving {
            if let Err(e) = saved.await {
                keep_first(&mut fatal, e);
            }
        }
        if unsaved.examined > 0 {
            if !with.args.dry_run {
                if let Err(e) = save(with, unsaved).await {
                    keep_first(&mut fatal, e);
                }
            }
            with.metrics.backfill_progress(unsaved.last_message_id);
        }
        // Past a failed examination: done and reported, but not covered by the checkpoint.
        for e in window.done_past_failure() {
            summary.add(&e);
            reporter.message(&e);
        }
        reporter.progress(unsaved.last_message_id, &summary);
        Walked {
            summary,
            reporter,
            fatal,
            interrupted,
            read_all: feed.read_all,
        }
    }
}

/// Saves a step of the checkpoint, retrying transient failures.
fn save(with: With<'_>, step: Step) -> Boxed<'_, Result<(), Error>> {
    let With {
        args,
        examiner,
        checkpoint,
        ..
    } = with;
    Box::pin(async move {
        examiner
            .retrying(|| {
                checkpoint::save(
                    &examiner.pool,
                    checkpoint,
                    step,
                    args.since_id,
                    args.until_id,
                )
            })
            .await
    })
}

/// The first error ends the run and is returned; later ones (the run is draining) are logged.
fn keep_first(fatal: &mut Option<Error>, e: Error) {
    match fatal {
        None => *fatal = Some(e),
        // The first is the run's error (said at ERROR as the run ends); later ones are the
        // same fault seen again while stopping.
        Some(_) => tracing::warn!(error = %e, "backfill: a further error while stopping"),
    }
}

/// One candidate's examination, tagged with its place in the [`Window`] and whether it
/// runs on a task of its own (a leak, by detection).
///
/// A leak is examined on a task of its own: its recovery is about ten round trips to the
/// database, and a task is polled on the runtime thread that receives its I/O, while the
/// walk is polled wherever its caller runs it (the binary's main thread), where each round
/// trip would cost two thread wake-ups. The others finish on their first poll, in the walk.
/// Either way the outcome is `examine`'s; detection here only chooses where it runs.
///
/// Boxed here, once: the future is a few KiB (it has room for a recovery), and
/// `FuturesUnordered` would otherwise copy it into its task several times.
fn examine_one(
    examiner: &Arc<Examiner>,
    seq: u64,
    c: Candidate,
    detection: Option<Detection>,
) -> (Boxed<'_, Examination>, bool) {
    let Some(detection) = detection else {
        return (
            Box::pin(async move { (seq, false, examiner.examine_detected(c, None).await) }),
            false,
        );
    };
    let examiner = examiner.clone();
    let task = tokio::spawn(async move { examiner.examine_detected(c, Some(detection)).await });
    let examination = Box::pin(async move {
        let result = task
            .await
            .unwrap_or_else(|e| Err(Error::Bug(format!("examining a message: {e}"))));
        (seq, true, result)
    });
    (examination, true)
}

/// A future of the walk's, boxed.
type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A finished examination: its place in the [`Window`], whether it was a leak on a task of
/// its own, and what came of it.
type Examination = (u64, bool, Result<Examined, Error>);

/// Waits until an examination has finished, then takes it and the others already finished
/// (up to [`PER_TURN`]): one wake-up of the walk serves many clean candidates.
fn take_finished<'a, F: Future>(
    running: &'a mut FuturesUnordered<F>,
    into: &'a mut Vec<F::Output>,
) -> impl Future<Output = ()> + 'a {
    std::future::poll_fn(move |cx| {
        while into.len() < PER_TURN {
            match running.poll_next_unpin(cx) {
                Poll::Ready(Some(out)) => into.push(out),
                Poll::Ready(None) | Poll::Pending => break,
            }
        }
        if into.is_empty() {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
}

/// The future in `slot`, awaited (for a `select!` branch enabled only while there is one).
async fn await_some<F: Future + Unpin>(slot: &mut Option<F>) -> F::Output {
    match slot {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}
