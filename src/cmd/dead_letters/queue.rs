//! The dead-letter queue on the broker: one connection with one confirm-mode channel, and
//! one walk over the queue that every action of the command is made of.
//!
//! AMQP 0-9-1 has no "peek": the only way to read a message is to take it. A walk takes
//! the ready dead letters one by one (`basic.get`), in queue order, and keeps each unacked
//! until it knows what to do with it, so no message is seen twice and none leaves the
//! queue unless it was asked to: one that stays is returned (`basic.nack`, requeue) at the
//! end of the walk, or by the broker when the channel closes (an error, a crash, a kill).
//! A replay acks a dead letter only after the broker confirmed its publish to the input
//! exchange: interrupted anywhere, a replay loses nothing; at worst an event is both
//! replayed and still dead (the worker is idempotent, so replaying it twice is harmless).
//!
//! A walk takes at most as many dead letters as the queue held when it started: a replay
//! that fails again (malformed JSON) is dead-lettered again at once, and must not be
//! replayed again in the same run.
//!
//! May depend on: `publish` (the connection, the one confirmed publish), `settings`,
//! `error`, `lapin` (and its `amq-protocol` re-exports, for the broker's version),
//! `tokio`.

use super::{Broker, DeadLetter};
use crate::error::Error;
use crate::publish::{publish_confirmed, Message, Published};
use lapin::options::{BasicAckOptions, BasicGetOptions, BasicNackOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use lapin::{Channel, Connection};
use std::io::{Read, Write};
use std::time::Duration;

/// How long reading the broker's version may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest `connection.start` frame read (a broker's is about 1 KiB).
const MAX_START_FRAME: usize = 64 * 1024;

/// What a walk does with the dead letter it just took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Leave it in the queue and go on.
    Keep,
    /// Leave it in the queue and end the walk.
    KeepAndStop,
    /// Keep it taken (unacked) past the walk, for the caller to [`Queue::settle`].
    Hold,
    /// Publish it to the input exchange; ack it once the broker confirmed.
    Replay,
}

/// What a walk went through.
#[derive(Debug, Default)]
pub struct Walked {
    /// Dead letters taken.
    pub taken: usize,
    /// Of those, given back to the queue.
    pub kept: usize,
    /// Of those, still taken ([`Step::Hold`]), in the order they were taken.
    pub held: Vec<u64>,
}

/// The dead-letter queue, open.
pub struct Queue {
    connection: Connection,
    channel: Channel,
    broker: Broker,
}

impl Queue {
    /// Connects and checks that the queue exists (it is never declared here: a missing
    /// queue is a wrong name, not something to create).
    pub async fn open(broker: &Broker) -> Result<Queue, Error> {
        let (connection, channel) =
            crate::publish::confirm_channel(&broker.publish.broker(), &broker.connection_name)
                .await?;
        let queue = Queue {
            connection,
            channel,
            broker: broker.clone(),
        };
        match queue.ready_count().await {
            Ok(_) => Ok(queue),
            Err(e) => {
                queue.close().await;
                Err(e)
            }
        }
    }

    /// The name of the dead-letter queue.
    pub fn name(&self) -> &str {
        &self.broker.names.dead_letter_queue
    }

    /// Dead letters ready in the queue now (not counting those a walk holds).
    pub async fn ready_count(&self) -> Result<u32, Error> {
        let passive = QueueDeclareOptions {
            passive: true,
            ..Default::default()
        };
        match self
            .channel
            .queue_declare(self.name(), passive, FieldTable::default())
            .await
        {
            Ok(q) => Ok(q.message_count()),
            Err(lapin::Error::ProtocolError(e)) if e.get_id() == 404 => {
                Err(Error::Startup(format!(
                    "no queue {:?} on the broker ({e}): the worker declares it when it starts; \
                 check --dead-letter-queue / TCR_DEAD_LETTER_QUEUE",
                    self.name()
                )))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Takes up to `max` dead letters (and never more than the queue held at the start), asks
    /// `step` about each and does it; `replayed` hears of each replay once its dead letter is
    /// acked. The ones kept go back to the queue at the end; the ones held stay taken until
    /// [`Queue::settle`] (or the end of the connection, which gives them back).
    pub async fn walk(
        &self,
        max: usize,
        step: &mut (dyn FnMut(&DeadLetter) -> Step + Send),
        replayed: &mut (dyn FnMut(&DeadLetter) + Send),
    ) -> Result<Walked, Error> {
        let max = max.min(usize::try_from(self.ready_count().await?).unwrap_or(usize::MAX));
        let mut walked = Walked::default();
        let mut kept = Vec::new();
        let result = async {
            while walked.taken < max {
                let Some(got) = self
                    .channel
                    .basic_get(self.name(), BasicGetOptions { no_ack: false })
                    .await?
                else {
                    break;
                };
                walked.taken += 1;
                let tag = got.delivery.delivery_tag;
                let headers = got
                    .delivery
                    .properties
                    .headers()
                    .clone()
                    .unwrap_or_default();
                let letter = DeadLetter::read(headers, got.delivery.data);
                match step(&letter) {
                    Step::Keep => kept.push(tag),
                    Step::KeepAndStop => {
                        kept.push(tag);
                        break;
                    }
                    Step::Hold => walked.held.push(tag),
                    Step::Replay => {
                        if let Err(e) = self.replay(&letter).await {
                            kept.push(tag);
                            return Err(e);
                        }
                        self.ack(tag).await?;
                        replayed(&letter);
                    }
                }
            }
            Ok(())
        }
        .await;
        walked.kept = kept.len();
        self.give_back(&kept).await;
        if let Err(e) = result {
            // (When the broker closed the channel, it has put back every unacked one.)
            self.give_back(&walked.held).await;
            return Err(e);
        }
        Ok(walked)
    }

    /// Deletes (acks) the dead letters `held` by a walk, or gives them back.
    pub async fn settle(&self, held: &[u64], delete: bool) -> Result<(), Error> {
        if !delete {
            self.give_back(held).await;
            return Ok(());
        }
        for &tag in held {
            self.ack(tag).await?;
        }
        Ok(())
    }

    /// Returns taken dead letters to the queue (`basic.nack`, requeue), then waits, a few
    /// seconds at most, until the queue counts them again: a quorum queue applies a return a
    /// moment later, and a command run right after this one must find them there.
    async fn give_back(&self, tags: &[u64]) {
        if tags.is_empty() {
            return;
        }
        let requeue = BasicNackOptions {
            multiple: false,
            requeue: true,
        };
        for &tag in tags {
            if self.channel.basic_nack(tag, requeue).await.is_err() {
                return;
            }
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while tokio::time::Instant::now() < deadline {
            match self.ready_count().await {
                Ok(n) if n as usize >= tags.len() => return,
                Ok(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                Err(_) => return,
            }
        }
    }

    /// Publishes a dead letter's body to the input exchange under its original routing key
    /// (or the configured one), with its replay headers, and waits for the confirm. A
    /// replay no queue took is an error: its dead letter must stay.
    async fn replay(&self, letter: &DeadLetter) -> Result<(), Error> {
        let names = &self.broker.names;
        let routing_key = letter
            .routing_key
            .as_deref()
            .unwrap_or(&names.input_routing_key);
        let message = Message {
            exchange: &names.input_exchange,
            routing_key,
            body: &letter.body,
            message_id: None,
            headers: letter.replay_headers(),
        };
        match publish_confirmed(&self.channel, message).await? {
            Published::Routed => Ok(()),
            Published::Unroutable => Err(Error::Startup(format!(
                "the broker routed the replay of {} to no queue: nothing is bound to {:?} with \
                 {routing_key:?} (is the worker's queue declared? it is, once the worker has \
                 started); the dead letter stays in {}",
                letter.id,
                names.input_exchange,
                self.name()
            ))),
        }
    }

    async fn ack(&self, tag: u64) -> Result<(), Error> {
        self.channel
            .basic_ack(tag, BasicAckOptions::default())
            .await
            .map_err(Error::from)
    }

    /// The broker's version, as it announces it (`connection.start`, server property
    /// `version`, e.g. `3.10.8`), or `None` when it cannot be read. lapin 2 reads that
    /// frame but keeps none of it, so this opens a short second connection of its own
    /// (TLS for `amqps://`, as lapin's), sends the protocol header, reads the first frame
    /// and closes before authenticating. Asked only when a note depends on the version.
    pub async fn server_version(&self) -> Option<String> {
        let uri = self.broker.publish.broker().uri().ok()?;
        let read = tokio::task::spawn_blocking(move || announced_version(&uri));
        match tokio::time::timeout(PROBE_TIMEOUT, read).await {
            Ok(Ok(Ok(version))) => version,
            Ok(Ok(Err(e))) => {
                tracing::debug!(error = %e, "cannot read the broker's version");
                None
            }
            _ => None,
        }
    }

    /// Closes the channel and the connection (what is still unacked goes back).
    pub async fn close(self) {
        let _ = self.channel.close(200, "done").await;
        let _ = self.connection.close(200, "done").await;
    }
}

/// Connects to `uri` (blocking), sends the AMQP 0-9-1 protocol header and reads the
/// broker's `connection.start`: the `version` of its server properties.
fn announced_version(uri: &lapin::uri::AMQPUri) -> std::io::Result<Option<String>> {
    use lapin::protocol::{connection::AMQPMethod, AMQPClass};
    use lapin::tcp::AMQPUriTcpExt;
    let mut stream = uri
        .connect()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(PROBE_TIMEOUT))?;
    stream.set_write_timeout(Some(PROBE_TIMEOUT))?;
    stream.write_all(b"AMQP\x00\x00\x09\x01")?;
    stream.flush()?;
    // A frame: type (1: a method), channel (2 bytes), size (4 bytes), payload, 0xCE.
    let mut header = [0u8; 7];
    stream.read_exact(&mut header)?;
    let size = u32::from_be_bytes([header[3], header[4], header[5], header[6]]) as usize;
    if header[0] != 1 || size > MAX_START_FRAME {
        return Ok(None);
    }
    let mut payload = vec![0u8; size];
    stream.read_exact(&mut payload)?;
    Ok(match lapin::protocol::parse_class(payload.as_slice()) {
        Ok((_, AMQPClass::Connection(AMQPMethod::Start(start)))) => start
            .server_properties
            .inner()
            .get("version")
            .and_then(|v| match v {
                lapin::types::AMQPValue::LongString(s) => {
                    Some(String::from_utf8_lossy(s.as_bytes()).into_owned())
                }
                lapin::types::AMQPValue::ShortString(s) => Some(s.as_str().to_string()),
                _ => None,
            }),
        _ => None,
    })
}
