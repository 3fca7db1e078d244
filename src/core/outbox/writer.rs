//! Group commit for the relay: one writer thread owns the outbox connection and stores every write
//! that arrived while the previous transaction was committing in ONE transaction. Each caller gets
//! its answer only after the transaction holding its envelope has committed (`synchronous=FULL`), so
//! a `202` is never sent for an envelope that is not durable.

use super::envelope::NewEnvelope;
use super::store::{EnqueueOutcome, Outbox};
use super::OutboxError;
use std::sync::mpsc;
use std::thread::JoinHandle;
use tokio::sync::oneshot;

/// The most envelopes committed in one transaction.
pub const MAX_BATCH: usize = 512;

struct Job {
    envelope: NewEnvelope,
    reply: oneshot::Sender<Result<EnqueueOutcome, OutboxError>>,
}

/// A handle to the writer thread. Cloneable senders are not exposed: share it behind an `Arc`.
pub struct OutboxWriter {
    tx: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl OutboxWriter {
    /// Starts the writer thread over an open outbox.
    pub fn spawn(mut outbox: Outbox) -> Result<OutboxWriter, OutboxError> {
        let path = outbox.path().to_path_buf();
        let (tx, rx) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("outbox-writer".into())
            .spawn(move || {
                while let Ok(first) = rx.recv() {
                    let mut jobs = vec![first];
                    while jobs.len() < MAX_BATCH {
                        match rx.try_recv() {
                            Ok(j) => jobs.push(j),
                            Err(_) => break,
                        }
                    }
                    let envelopes: Vec<NewEnvelope> =
                        jobs.iter().map(|j| j.envelope.clone()).collect();
                    match outbox.enqueue_batch(&envelopes) {
                        Ok(outcomes) => {
                            for (job, outcome) in jobs.into_iter().zip(outcomes) {
                                let _ = job.reply.send(Ok(outcome));
                            }
                        }
                        Err(e) => {
                            let msg = e.to_string();
                            tracing::error!(error = %msg, batch = jobs.len(), "outbox commit failed");
                            for job in jobs {
                                let _ = job.reply.send(Err(OutboxError::Commit(msg.clone())));
                            }
                        }
                    }
                }
            })
            .map_err(|source| OutboxError::Io { path, source })?;
        Ok(OutboxWriter {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Stores one envelope; resolves after the transaction holding it has committed.
    pub async fn enqueue(&self, envelope: NewEnvelope) -> Result<EnqueueOutcome, OutboxError> {
        let (reply, rx) = oneshot::channel();
        let tx = self.tx.as_ref().ok_or(OutboxError::WriterStopped)?;
        tx.send(Job { envelope, reply })
            .map_err(|_| OutboxError::WriterStopped)?;
        rx.await.map_err(|_| OutboxError::WriterStopped)?
    }

    /// Stops accepting writes, lets the thread commit what it has, and waits for it.
    pub fn close(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for OutboxWriter {
    fn drop(&mut self) {
        self.shutdown();
    }
}
