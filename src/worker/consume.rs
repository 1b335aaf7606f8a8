//! Consuming on one broker session: each delivery goes to a task of its own; the delivery
//! window follows the bodies seen and the bytes held ([`Window`]), applied by consuming
//! anew (or by pausing until enough of what is held is finished); on shutdown or a broken
//! session the in-flight deliveries are drained (bounded in time).
//!
//! May depend on: the parent `worker`, `amqp`, `shutdown`, `metrics`, `lapin`, `tokio`.

use super::acks::Acks;
use super::window::{Change, Window, IDLE};
use super::{Worker, BROKEN_SESSION_GRACE};
use crate::amqp::Session;
use crate::shutdown::Shutdown;
use futures_util::{FutureExt, StreamExt};
use lapin::message::Delivery;
use lapin::Consumer;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// The session broke while the window was changed.
struct Broken;

/// What the consuming loop woke up for. One lives for a turn of the loop, on the stack:
/// boxing the delivery would cost an allocation per delivery for nothing.
#[allow(clippy::large_enum_variant)]
enum Step {
    /// A delivery.
    Delivery(Delivery),
    /// A delivery finished while consuming is paused.
    Finished,
    /// No delivery for [`IDLE`].
    Idle,
}

/// What one session's consuming shares with the helpers below.
struct Consuming<'a> {
    session: &'a Arc<Session>,
    acks: &'a Arc<Acks>,
    window: &'a mut Window,
    tasks: JoinSet<()>,
    shutdown: &'a Shutdown,
}

impl Worker {
    /// Consumes until shutdown or until the session breaks, then drains.
    pub(super) async fn consume(
        self: &Arc<Self>,
        session: Arc<Session>,
        consumer: Consumer,
        acks: &Arc<Acks>,
        window: &mut Window,
        shutdown: &mut Shutdown,
    ) {
        // The window bounds the deliveries the broker pushes, sized so that their bytes fit
        // the budget beside what is held; each task then takes its share of the budget
        // before it decodes. Recoveries queue for the committers, so deliveries waiting on
        // the database never hold up clean ones, which need none.
        let mut stop = shutdown.clone();
        let mut c = Consuming {
            session: &session,
            acks,
            window,
            tasks: JoinSet::new(),
            shutdown,
        };
        let mut consumer = Some(consumer);
        let mut last = Instant::now();
        'consuming: loop {
            while c.tasks.try_join_next().is_some() {}
            let paused = consumer.is_none();
            let step = tokio::select! {
                d = next(&mut consumer) => match d {
                    Some(Ok(delivery)) => Step::Delivery(delivery),
                    Some(Err(e)) => {
                        ended(&session, Some(e));
                        break;
                    }
                    None => {
                        ended(&session, None);
                        break;
                    }
                },
                _ = self.finished.notified(), if paused => Step::Finished,
                _ = stop.wait() => break,
                _ = session.health.broken() => break,
                _ = tokio::time::sleep_until(last + IDLE) => Step::Idle,
            };
            let change = match step {
                Step::Delivery(delivery) => {
                    last = Instant::now();
                    let mut change = self.take_in(&mut c, delivery);
                    // Under load the broker sends deliveries in bursts: those the consumer
                    // already holds are taken in without a turn of the loop each (its
                    // timer and wake-up registrations cost more than a take-in).
                    while change.is_none() && !stop.is_shutdown() && !session.health.is_broken() {
                        let Some(ready) = consumer.as_mut().and_then(|k| k.next().now_or_never())
                        else {
                            break;
                        };
                        match ready {
                            Some(Ok(delivery)) => change = self.take_in(&mut c, delivery),
                            Some(Err(e)) => {
                                ended(&session, Some(e));
                                break 'consuming;
                            }
                            None => {
                                ended(&session, None);
                                break 'consuming;
                            }
                        }
                    }
                    change
                }
                Step::Finished => c.window.resume(self.held()).map(Change::To),
                Step::Idle => {
                    last = Instant::now();
                    c.window.idle(self.held()).map(Change::To)
                }
            };
            if let Some(change) = change {
                if self.apply(&mut c, &mut consumer, change).await.is_err() {
                    break;
                }
            }
        }
        let tasks = std::mem::take(&mut c.tasks);
        self.drain(&session, tasks, shutdown).await;
    }

    /// Takes in a delivery: holds its bytes, tells the window, hands it to a task.
    fn take_in(self: &Arc<Self>, c: &mut Consuming<'_>, delivery: Delivery) -> Option<Change> {
        let len = delivery.data.len();
        let held = self.held.fetch_add(len, Ordering::SeqCst) + len;
        self.metrics.in_flight_bytes(len as i64);
        let change = c.window.arrived(len, held);
        c.acks.taken(delivery.delivery_tag);
        let worker = self.clone();
        let session = c.session.clone();
        let acks = c.acks.clone();
        let shutdown = c.shutdown.clone();
        c.tasks.spawn(async move {
            worker.handle(&session, &acks, delivery, shutdown).await;
        });
        change
    }

    /// Applies a window change: stops the running consumer, starts one with the new window
    /// (none for a pause), and takes in the deliveries the old one still held: they count
    /// for the window too, and may change it again.
    async fn apply(
        self: &Arc<Self>,
        c: &mut Consuming<'_>,
        consumer: &mut Option<Consumer>,
        mut change: Change,
    ) -> Result<(), Broken> {
        loop {
            let old = consumer.take();
            if old.is_some() {
                c.session.stop_consuming().await.map_err(|e| broken(&e))?;
            }
            let window = match change {
                Change::To(w) => {
                    *consumer = Some(c.session.consume(w).await.map_err(|e| broken(&e))?);
                    w
                }
                Change::Pause => 0,
            };
            tracing::debug!(window, "delivery window changed (0: paused)");
            self.metrics.delivery_window(window);
            let mut again = None;
            if let Some(mut old) = old {
                while let Some(next) = old.next().await {
                    let delivery = next.map_err(|e| {
                        c.session.health.mark_broken();
                        broken(&e)
                    })?;
                    again = self.take_in(c, delivery).or(again);
                }
            }
            match again {
                Some(next) if next != change => change = next,
                _ => return Ok(()),
            }
        }
    }

    /// Bytes of deliveries taken in and not finished.
    fn held(&self) -> usize {
        self.held.load(Ordering::SeqCst)
    }

    /// Waits for the in-flight deliveries: on shutdown for the drain timeout (after the
    /// consumer is cancelled), on a broken session for a short grace.
    async fn drain(&self, session: &Session, mut tasks: JoinSet<()>, shutdown: &Shutdown) {
        while tasks.try_join_next().is_some() {}
        // Not ready from here on: the session is draining or gone.
        self.broker_ready.store(false, Ordering::SeqCst);
        let limit = if shutdown.is_shutdown() {
            session.cancel_consumer().await;
            tracing::info!(in_flight = tasks.len(), "draining in-flight deliveries");
            self.settings.drain_timeout()
        } else {
            BROKEN_SESSION_GRACE
        };
        let drained =
            tokio::time::timeout(limit, async { while tasks.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            tracing::warn!(
                abandoned = tasks.len(),
                "in-flight deliveries did not finish in time; they stay unacked and will be redelivered"
            );
            tasks.abort_all();
        }
    }
}

/// The next delivery of the consumer; none while paused.
async fn next(consumer: &mut Option<Consumer>) -> Option<Result<Delivery, lapin::Error>> {
    match consumer {
        Some(consumer) => consumer.next().await,
        None => std::future::pending().await,
    }
}

/// The consumer failed (`Some`) or the broker closed it: the session is rebuilt.
fn ended(session: &Session, error: Option<lapin::Error>) {
    match error {
        Some(e) => session.health.lost("consumer failed", Some(&e)),
        None => session.health.lost("consumer closed by the broker", None),
    }
}

fn broken(e: &dyn std::fmt::Display) -> Broken {
    tracing::warn!(error = %e, "changing the delivery window failed; rebuilding the session");
    Broken
}
