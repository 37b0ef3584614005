//! Recording one event until the sink has it: what an adapter does with an event its batch
//! could not record, before it may acknowledge anything after it (invariant 1).

use std::time::Duration;

use crate::{Accepted, Backoff, CancellationToken, Inbound, InboundSink};

/// Retrying a recording that failed: 1 s, doubling, at most 30 s.
const RETRY: Backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));

/// Record `event`, retrying with backoff until the sink has it; `None` when shutdown came
/// first (the event stays unacknowledged, so the platform sends it again).
pub async fn record_until_done(
    sink: &dyn InboundSink,
    event: &Inbound,
    shutdown: &CancellationToken,
) -> Option<Accepted> {
    let mut retry = RETRY;
    loop {
        match sink.accept(event.clone()).await {
            Ok(accepted) => return Some(accepted),
            Err(e) => {
                let wait = retry.next_delay();
                tracing::error!(error = %e, event = %event.event_id, retry_in = ?wait, "cannot record an event; retrying");
                tokio::select! {
                    _ = shutdown.cancelled() => return None,
                    _ = tokio::time::sleep(wait) => {}
                }
            }
        }
    }
}

/// Record a platform batch with one sync ([`InboundSink::accept_batch`]); what it could not
/// record is recorded one at a time, in order, until the sink has it. `recorded(i, how)` is
/// called for each event, in order, as soon as it is recorded (an adapter acknowledges a
/// press there). `false` when shutdown came first: the events from there on are not
/// recorded and must not be acknowledged.
pub async fn record_batch(
    sink: &dyn InboundSink,
    events: &[Inbound],
    shutdown: &CancellationToken,
    mut recorded: impl FnMut(usize, Accepted),
) -> bool {
    if events.is_empty() {
        return true;
    }
    let mut results = sink.accept_batch(events.to_vec()).await.into_iter();
    for (i, event) in events.iter().enumerate() {
        let accepted = match results.next() {
            Some(Ok(accepted)) => accepted,
            _ => match record_until_done(sink, event, shutdown).await {
                Some(accepted) => accepted,
                None => return false,
            },
        };
        recorded(i, accepted);
    }
    true
}
