//! The lease's calls (docs/design.md §3): taking it with a compare-and-swap that reads the
//! queue in the same call, how much of it is left, releasing it, and the fences that make a
//! commit sent under a lease since taken over apply nothing: created with each commit,
//! removed once that commit can no longer apply, and swept when a stopped daemon left them.
//! When a lone daemon may keep the lease instead is `kept_lease`'s rule.

use chrono::Utc;
use tracing::{debug, info, warn};

use crate::a1;
use crate::lease::{self, Lease, LeaseState, WORKER_SHEET};
use crate::sheets::{
    BatchUpdate, BatchUpdateReply, Cell, MetadataLookup, Reply, Request, ValueRange,
};

use super::ledger::REQUEST_LIMIT;
use super::writeback::needs_whole_queue;
use super::{Daemon, DaemonError, Poll};

/// The lease as this daemon last took, kept or fenced it.
#[derive(Debug)]
pub(super) struct Held {
    /// When the acquire of the lease we last took was sent (or the commit that renewed it).
    pub(super) sent: Option<tokio::time::Instant>,
    /// The lease our last commit renewed instead of releasing, since rows were left waiting
    /// that this daemon, alone on the spreadsheet, claims as soon as a job of its ends
    /// (docs/design.md §3): the next claim pass commits under it on its poll's read,
    /// without an acquire.
    pub(super) kept: Option<super::kept_lease::KeptLease>,
    /// Until when our commits renew the lease instead of releasing it: a write sent under
    /// it may still be applied (its reply was lost), and no claim may come before that.
    pub(super) kept_until: Option<tokio::time::Instant>,
    /// Fences this daemon created or found untracked (docs/design.md §3.1), with when:
    /// removed with a batch sent anyway once the commit each fences can no longer apply.
    pub(super) fences: Vec<(i32, tokio::time::Instant)>,
    /// When to look next for fences that no daemon tracks (left by a stopped daemon).
    pub(super) sweep_at: tokio::time::Instant,
}

impl Held {
    /// Nothing taken yet; the first sweep for abandoned fences comes [`FENCE_FIRST_SWEEP`]
    /// after start.
    pub(super) fn new() -> Self {
        Held {
            sent: None,
            kept: None,
            kept_until: None,
            fences: Vec::new(),
            sweep_at: tokio::time::Instant::now() + FENCE_FIRST_SWEEP,
        }
    }
}

impl Daemon {
    /// How much of the lease we last took is left, in our own monotonic time from before
    /// its acquire was sent: another daemon takes it over only after watching it stand still
    /// for longer than its TTL, which began after that.
    pub(super) fn lease_left(&self) -> std::time::Duration {
        self.served
            .lease
            .sent
            .map_or(std::time::Duration::ZERO, |sent| {
                self.config.lease_ttl.saturating_sub(sent.elapsed())
            })
    }

    /// The lease's time to live, as the sheet's clock arithmetic needs it.
    pub(super) fn lease_ttl(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.config.lease_ttl).unwrap_or(chrono::Duration::seconds(30))
    }

    /// Takes the lease with a compare-and-swap from the value `poll` saw, reading the queue
    /// in the same call. `None` when another daemon holds it or won the race, or when too
    /// little of it is left to commit safely (then it is released at once).
    pub(super) async fn acquire(
        &mut self,
        poll: &Poll,
    ) -> Result<Option<(Lease, Poll)>, DaemonError> {
        // Follow-ups whose rows the poll did not find are placed on a read of the whole queue.
        let full = poll.full || needs_whole_queue(poll, &[], &self.served.writes.pending);
        let plan = self.read_plan(full, false);
        let Some((lease, reply)) = self.take_lease(poll, plan.ranges.clone()).await? else {
            return Ok(None);
        };
        let held = lease.to_string();
        let fresh = match self.parse_poll(&plan, &reply.ranges) {
            Ok(p) => Poll {
                protections: (!reply.protections.is_empty()).then(|| reply.protections.clone()),
                ..p
            },
            Err(e) => {
                self.release(&held).await;
                return Err(e);
            }
        };
        // Give up rather than commit on a lease that may run out while the commit travels.
        if self.lease_left() < self.config.lease_ttl / 2 {
            warn!("lease nearly expired before the commit; releasing it without claiming");
            self.release(&held).await;
            return Ok(None);
        }
        Ok(Some((lease, fresh)))
    }

    /// The lease's compare-and-swap from the value `poll` saw, with `read` read back in the
    /// same call and the removals of finished rows' bindings riding along. `None` when
    /// another daemon holds the lease or won the race.
    pub(super) async fn take_lease(
        &mut self,
        poll: &Poll,
        read: Vec<String>,
    ) -> Result<Option<(Lease, BatchUpdateReply)>, DaemonError> {
        let Some(from) = poll.lease.takeable(
            &self.config.worker_id,
            poll.lease_quiet,
            self.config.lease_ttl,
        ) else {
            self.observers.metrics.lease_wait();
            if let LeaseState::Invalid(text) = &poll.lease {
                warn!(lease = %text, "the lease cell _ワーカー!B1 holds no lease; resetting it to free");
                let free = ValueRange::new(
                    a1::range(WORKER_SHEET, lease::LEASE_CELL),
                    vec![vec![Cell::from(lease::FREE)]],
                );
                self.sheets.write(&[free]).await?;
            } else {
                debug!("lease held by another daemon; waiting for the next tick");
            }
            return Ok(None);
        };
        // The expiry written is for people; no daemon compares it with its clock. Ours is
        // counted from before this request was sent, in our own monotonic time.
        let lease = Lease::new(&self.config.worker_id, Utc::now() + self.lease_ttl());
        self.served.lease.sent = Some(tokio::time::Instant::now());
        let held = lease.to_string();
        // Bindings of finished rows, and fences whose commits can no longer apply, go with
        // the acquire, a batch sent anyway.
        let old = self.fences_to_remove();
        let mut unbind = std::mem::take(&mut self.served.writes.unbind);
        unbind.extend(old);
        let mut requests = vec![lease::swap(
            self.served.layout.worker_sheet_id,
            &from,
            &held,
        )];
        // Taking over a held lease (an abandoned one, or our own whose commit reply was
        // lost) fences every commit made under it: none can apply after this batch.
        let fencing = from != lease::FREE;
        if fencing {
            requests.push(lease::fence(self.served.layout.worker_sheet_id, &from));
        }
        requests.extend(unbind.iter().map(|id| Request::DeleteMetadata { id: *id }));
        let reply = self
            .sheets
            .batch_update(&BatchUpdate {
                requests,
                response_ranges: read,
                ..Default::default()
            })
            .await;
        let reply = match reply {
            Ok(r) => r,
            Err(e) if fencing && lease::is_fenced(&e.message, &from) => {
                // The commit made under that lease applied (with its fence) first, or another
                // daemon took it over first: the lease is not ours to take.
                debug!("the lease we meant to take over was settled first");
                self.served.writes.unbind.extend(unbind);
                self.observers.metrics.lease_wait();
                return Ok(None);
            }
            Err(e) => {
                self.served.watch.read_failed();
                if e.is_retryable() {
                    self.served.writes.unbind.extend(unbind);
                } else if !unbind.is_empty() {
                    // A refused batch applies nothing: leave those bindings (`sheetq status`
                    // shows them) rather than let them block every later acquire.
                    warn!(error = %e, bindings = unbind.len(), "the lease acquire carrying binding removals was refused; not removing them");
                }
                return Err(e.into());
            }
        };
        if fencing {
            self.served
                .lease
                .fences
                .push((lease::fence_id(&from), tokio::time::Instant::now()));
        }
        if !matches!(
            reply.replies.first(),
            Some(Reply::CompareAndSwap { changed: 1 })
        ) {
            debug!("another daemon took the lease first");
            self.observers.metrics.lease_wait();
            return Ok(None);
        }
        self.observers.metrics.lease_acquired();
        Ok(Some((lease, reply)))
    }

    /// The fences whose commits can no longer apply, at most [`FENCES_PER_BATCH`] (the
    /// rest go with the next batches); the others stay.
    pub(super) fn fences_to_remove(&mut self) -> Vec<i32> {
        let kept = fence_kept(self.config.lease_ttl);
        let (mut old, young): (Vec<_>, Vec<_>) = std::mem::take(&mut self.served.lease.fences)
            .into_iter()
            .partition(|(_, at)| at.elapsed() >= kept);
        let later = old.split_off(old.len().min(FENCES_PER_BATCH));
        self.served.lease.fences = young;
        self.served.lease.fences.extend(later);
        old.into_iter().map(|(id, _)| id).collect()
    }

    /// Whether to look for fences no daemon will remove (see [`Self::sweep_fences`]).
    pub(super) fn fence_sweep_due(&self) -> bool {
        tokio::time::Instant::now() >= self.served.lease.sweep_at
    }

    /// Finds every fence on the spreadsheet (`developerMetadata.search`, one read,
    /// [`FENCE_FIRST_SWEEP`] after start-up and then hourly) and removes those this daemon does not know yet once
    /// [`fence_kept`] has passed from now: fences left by a daemon that stopped or crashed
    /// before removing its own, which would otherwise pile up against Google's 30,000
    /// characters of metadata per sheet. Seen now, each was created before now, so no
    /// commit it fences can apply by then; its creator removing it too does no harm.
    pub(super) async fn sweep_fences(&mut self) {
        let now = tokio::time::Instant::now();
        match self
            .sheets
            .search_metadata(&MetadataLookup::key(lease::FENCE_KEY))
            .await
        {
            Ok(found) => {
                let known: std::collections::HashSet<i32> =
                    self.served.lease.fences.iter().map(|(id, _)| *id).collect();
                let new: Vec<i32> = found
                    .iter()
                    .map(|m| m.id)
                    .filter(|id| !known.contains(id))
                    .collect();
                if !new.is_empty() {
                    info!(fences = new.len(), "found fences no daemon tracks (left by a stopped one); removing them once no commit they fence can apply");
                }
                self.served
                    .lease
                    .fences
                    .extend(new.into_iter().map(|id| (id, now)));
                self.served.lease.sweep_at = now + FENCE_SWEEP_EVERY;
            }
            Err(e) => {
                debug!(error = %e, "could not look for abandoned fences; trying again in a minute");
                self.served.lease.sweep_at = now + std::time::Duration::from_secs(60);
            }
        }
    }

    /// The compare-and-swap that frees `held`, our lease; none while a write sent under it
    /// is in doubt: kept on purpose, it may still be applied. Our next pass takes the lease
    /// back (renewing it), or it runs out on its own.
    pub(super) fn release_request(&self, held: &str) -> Option<Request> {
        if self.served.lease.kept_until.is_some() {
            return None;
        }
        Some(lease::swap(
            self.served.layout.worker_sheet_id,
            held,
            lease::FREE,
        ))
    }

    pub(super) async fn release(&self, held: &str) {
        let Some(swap) = self.release_request(held) else {
            return;
        };
        let batch = BatchUpdate {
            requests: vec![swap],
            response_ranges: vec![],
            ..Default::default()
        };
        if let Err(e) = self.sheets.batch_update(&batch).await {
            warn!(error = %e, "could not release the lease; it expires on its own");
        }
    }

    /// What a commit leaves in the lease cell: `free`, or a new lease of ours when it is
    /// kept for the next claim (`keep`, [`Self::keep_lease`]) or while a write sent under it
    /// is in doubt ([`Self::hold_in_doubt`]), so that other daemons, which take over only a
    /// lease they watched stand still, wait.
    pub(super) fn lease_after_commit(&self, keep: bool) -> String {
        if keep || self.served.lease.kept_until.is_some() {
            Lease::new(&self.config.worker_id, Utc::now() + self.lease_ttl()).to_string()
        } else {
            lease::FREE.to_string()
        }
    }
}

/// How many fences one batch removes at most.
pub(super) const FENCES_PER_BATCH: usize = 100;

/// How often a daemon looks for fences that no daemon tracks any more.
pub(super) const FENCE_SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(60 * 60);

/// The first look for abandoned fences comes this long after start: past the first minute,
/// whose reads a fleet started right after `sheetq init` needs for its polls (the README's
/// "A fleet's first minute"). An abandoned fence waits for its commit's 190 s anyway.
pub(super) const FENCE_FIRST_SWEEP: std::time::Duration = std::time::Duration::from_secs(90);

/// How long a fence is kept: while the commit it fences could still be applied (its lease's
/// TTL, then Google's request limit).
pub(super) fn fence_kept(lease_ttl: std::time::Duration) -> std::time::Duration {
    REQUEST_LIMIT + lease_ttl
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_outlives_every_batch_it_fences() {
        let ttl = std::time::Duration::from_secs(30);
        assert!(fence_kept(ttl) >= ttl + std::time::Duration::from_secs(180));
    }
}
